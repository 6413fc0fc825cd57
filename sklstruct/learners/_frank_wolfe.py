"""Block-coordinate Frank-Wolfe on the factored dual (the dimension-limit-1 case of seed 003).

:class:`BlockFrankWolfeState` starts every example at the point mass on its true labeling
(``w = 0``) and runs compiled passes (:func:`_bcfw.bcfw_pass`); each visit costs one
loss-augmented Viterbi on that example and touches only the weights of its features.
"""

import numpy as np

from ._bcfw import bcfw_pass
from ._factored_dual import FactoredDualState


class BlockFrankWolfeState(FactoredDualState):
    """Statistics, weights and passes of block-coordinate Frank-Wolfe with line search."""

    def __init__(self, structure, batch, Y, C):
        super().__init__(structure, batch, Y, C, structure.onehot(Y),
                         structure.pairwise_statistics(batch, Y, per_sequence=True))
        self.block_gap = np.zeros(batch.n_sequences)

    def run_pass(self, order=None):
        """One pass over the examples (in ``order``); returns the sum of their FW gaps."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return bcfw_pass(self.indptr, self.indices, self.data, self.batch.offsets, order,
                         self.node_loss, self.node_marg, self.pair_marg, self.expected_loss,
                         self.WT, self.theta, self.C, self.scratch, self.marker,
                         self.block_gap)
