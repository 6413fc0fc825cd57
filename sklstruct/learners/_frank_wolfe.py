"""Block-coordinate Frank-Wolfe on the factored dual (the dimension-limit-1 case of seed 003).

:class:`BlockFrankWolfeState` starts every example at the point mass on its true labeling
(``w = 0``) and runs compiled passes (:func:`_bcfw.bcfw_pass`); each visit costs one
loss-augmented Viterbi on that example and touches only the weights of its features.
"""

import numpy as np

from ._bcfw import bcfw_pass
from ._factored_dual import FactoredDualState
from ._rsd_pass import rsd_pass


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


class MultiPointFrankWolfeState(BlockFrankWolfeState):
    """Restricted simplicial decomposition with ``max_points`` extreme points per example.

    Runs compiled passes (:func:`_rsd_pass.rsd_pass`): per visit one loss-augmented Viterbi,
    a master QP over the example's anchor and kept labellings (the seed's footnote 1), and an
    update of the example's statistics and weights.
    """

    def __init__(self, structure, batch, Y, C, max_points):
        super().__init__(structure, batch, Y, C)
        if not 1 <= max_points <= 63:
            raise ValueError(f"the compiled pass keeps 1 to 63 points per example, got "
                             f"{max_points}.")
        self.vertex_labels = np.zeros((batch.n_tokens, max_points), dtype=np.int32)
        self.vertex_loss = np.zeros((batch.n_sequences, max_points))
        self.vertex_weight = np.zeros((batch.n_sequences, max_points))
        self.n_vertices = np.zeros(batch.n_sequences, dtype=np.int64)
        self.feature_buffer = np.zeros(structure.n_features_)
        # the anchor of every example: its starting point (the true labelling) at first
        self.anchor_node = self.node_marg.copy()
        self.anchor_pair = self.pair_marg.copy()
        self.anchor_loss = self.expected_loss.copy()

    def run_pass(self, order=None):
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return rsd_pass(self.indptr, self.indices, self.data, self.batch.offsets, order,
                        self.node_loss, self.node_marg, self.pair_marg, self.expected_loss,
                        self.WT, self.theta, self.C, self.feature_buffer, self.marker,
                        self.vertex_labels, self.vertex_loss, self.vertex_weight,
                        self.n_vertices, self.anchor_node, self.anchor_pair, self.anchor_loss,
                        self.block_gap)
