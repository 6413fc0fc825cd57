"""Per-example restricted simplicial decomposition over sufficient statistics.

:class:`BlockFrankWolfeState` (dimension limit 1: block-coordinate Frank-Wolfe with exact line
search) and :class:`MultiPointFrankWolfeState` (dimension limit ``r``) start every example at
the point mass on its true labelling (``w = 0``) and run the compiled passes of
:mod:`._frank_wolfe_fast` on any structure with compiled per-example kernels; a visit costs one
max-oracle call on the example and touches only the weights of its features.
"""

import numpy as np

from .._factored_dual import FactoredDualState
from ._frank_wolfe_fast import frank_wolfe_pass, multi_point_pass


class BlockFrankWolfeState(FactoredDualState):
    """Statistics, weights and passes of block-coordinate Frank-Wolfe with line search."""

    def __init__(self, structure, batch, Y, C):
        super().__init__(structure, batch, Y, C, structure.onehot(Y),
                         structure.pairwise_statistics(batch, Y, per_sequence=True))

    def run_pass(self, order=None):
        """One pass over the examples (in ``order``); returns the sum of their FW gaps."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return frank_wolfe_pass(self, order)


class MultiPointFrankWolfeState(BlockFrankWolfeState):
    """Restricted simplicial decomposition with ``max_points`` points per example.

    Per visit: one max-oracle call, a master QP over the example's anchor and kept labellings
    (the paper's footnote 1), and an update of the example's statistics and weights.
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
        self.feature_slot = np.full(structure.n_features_, -1, dtype=np.int32)
        # the anchor of every example: its starting point (the true labelling) at first
        self.anchor_node = self.node_marg.copy()
        self.anchor_pair = self.pair_marg.copy()
        self.anchor_loss = self.expected_loss.copy()

    def run_pass(self, order=None):
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return multi_point_pass(self, order)
