"""Per-example restricted simplicial decomposition over sufficient statistics.

:class:`BlockFrankWolfeState` (dimension limit 1: block-coordinate Frank-Wolfe with exact line
search) and :class:`MultiPointFrankWolfeState` (dimension limit ``r``) start every example at
the point mass on its true labelling (``w = 0``) and run the compiled passes of
:mod:`._frank_wolfe_fast` on any structure with compiled per-example kernels; a visit costs one
max-oracle call on the example and touches only the weights of its features.
"""

import numpy as np

from .._factored_dual import FactoredDualState
from ._frank_wolfe_fast import (TOKEN_GRAM_ENTRIES, frank_wolfe_pass, master_sweep,
                                multi_point_pass)

# largest cache of per-example points (cached mode of MultiPointFrankWolfeState)
CACHE_MB = 256
# largest memory of kept token Gram matrices (uncached mode of MultiPointFrankWolfeState)
TOKEN_GRAM_MB = 128


class BlockFrankWolfeState(FactoredDualState):
    """Statistics, weights and passes of block-coordinate Frank-Wolfe with line search."""

    def __init__(self, structure, batch, Y, C, scale2=None):
        super().__init__(structure, batch, Y, C, structure.onehot(Y),
                         structure.pairwise_statistics(batch, Y, per_sequence=True), scale2)

    def run_pass(self, order=None):
        """One pass over the examples (in ``order``); returns the sum of their FW gaps."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return frank_wolfe_pass(self, order)


class MultiPointFrankWolfeState(BlockFrankWolfeState):
    """Restricted simplicial decomposition with ``max_points`` points per example.

    Per visit: one max-oracle call, a master QP over the example's anchor and kept labellings
    (the paper's footnote 1), and an update of the example's statistics and weights.

    In the cached mode every example keeps its anchor and points as dense rows over its own
    features (``(max_points + 1) x (n_example_features x n_states + n_pairwise)`` doubles), so
    a master costs nothing proportional to the example's length and can be re-solved between
    oracle passes (:meth:`run_sweep`). ``cached="auto"`` takes it when the examples have, in
    total, fewer distinct features than tokens (images and other data with few features per
    token) and the rows fit in ``CACHE_MB``.
    """

    def __init__(self, structure, batch, Y, C, max_points, cached="auto", scale2=None):
        super().__init__(structure, batch, Y, C, scale2)
        if scale2 is not None:
            if self.constrained.size:
                raise ValueError("scaled features with constrained weights are not supported.")
            cached = False  # (the cached rows hold unscaled statistics)
        if not 1 <= max_points <= 63:
            raise ValueError(f"the compiled pass keeps 1 to {max_points} points per example, "
                             "at most 63.")
        self.vertex_labels = np.zeros((batch.n_tokens, max_points), dtype=np.int32)
        self.vertex_loss = np.zeros((batch.n_sequences, max_points))
        self.vertex_weight = np.zeros((batch.n_sequences, max_points))
        self.n_vertices = np.zeros(batch.n_sequences, dtype=np.int64)
        self.feature_buffer = np.zeros(structure.n_features_)
        # the masters' token-Gram products, kept between visits (see _frank_wolfe_fast)
        self.gram_points = np.zeros((batch.n_sequences, max_points, max_points))
        self.gram_anchor = np.zeros((batch.n_sequences, max_points))
        self.gram_anchor_self = np.zeros(batch.n_sequences)
        self.gram_anchor_ok = np.zeros(batch.n_sequences, dtype=np.uint8)
        self.gram_point_ok = np.zeros((batch.n_sequences, max_points), dtype=np.uint8)
        # the anchor of every example: its starting point (the true labelling) at first
        self.anchor_node = self.node_marg.copy()
        self.anchor_pair = self.pair_marg.copy()
        self.anchor_loss = self.expected_loss.copy()
        self._set_up_cache(max_points, cached)
        self._set_up_token_grams(keep=not self.cached and scale2 is None)
        self.last_gain = 0.0

    def _set_up_token_grams(self, keep):
        """Room for the examples' token Gram matrices (``length^2`` doubles each, computed
        at an example's first master and kept), for the examples in order while they fit in
        ``TOKEN_GRAM_MB`` and each within the pass's largest token Gram matrix;
        ``token_gram_ptr`` is -1 for the others (their matrix is recomputed when needed)."""
        sizes = self.batch.lengths.astype(np.int64) ** 2
        sizes[sizes > TOKEN_GRAM_ENTRIES] = 0
        end = np.cumsum(sizes)
        kept = (sizes > 0) & (end * 8 <= TOKEN_GRAM_MB * 2**20) if keep else \
            np.zeros(sizes.shape[0], dtype=bool)
        self.token_gram_ptr = np.where(kept, end - sizes, -1).astype(np.int64)
        self.token_gram = np.zeros(int(sizes[kept].sum()))
        self.token_gram_ready = np.zeros(sizes.shape[0], dtype=np.uint8)

    def _set_up_cache(self, max_points, cached):
        batch, S, P = self.batch, self.structure.n_states_, self.structure.n_pairwise_
        indptr, indices, _ = batch.csr_arrays
        if cached == "auto":
            # an example has at least as many features as its fullest token: when even that
            # bound exceeds the tokens, the cache cannot pay off (skip counting features)
            fullest = np.maximum.reduceat(np.diff(indptr), batch.offsets[:-1]) \
                if batch.n_tokens else np.zeros(batch.n_sequences, dtype=np.int64)
            if fullest.sum() > batch.n_tokens:
                cached = False
        if not cached:
            self.cached = False
            self.cache_features = np.zeros(0, dtype=np.int32)
            self.cache_feature_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
            self.cache_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
            self.cache = np.zeros(0)
            self.cache_ready = np.zeros(batch.n_sequences, dtype=np.uint8)
            return
        example_of_entry = np.repeat(batch.sequence_index, np.diff(indptr))
        key = np.unique(example_of_entry * np.int64(self.structure.n_features_) + indices)
        d = np.int64(self.structure.n_features_)
        self.cache_features = np.ascontiguousarray(key % d, dtype=np.int32)
        self.cache_feature_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // d, minlength=batch.n_sequences),
                  out=self.cache_feature_ptr[1:])
        n_features = np.diff(self.cache_feature_ptr)
        row_sizes = (max_points + 1) * (n_features * S + P)
        if cached == "auto":
            cached = bool(n_features.sum() <= batch.n_tokens
                          and row_sizes.sum() * 8 <= CACHE_MB * 2**20)
        self.cached = bool(cached)
        self.cache_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
        if self.cached:
            np.cumsum(row_sizes, out=self.cache_ptr[1:])
        self.cache = np.zeros(int(self.cache_ptr[-1]))
        self.cache_ready = np.zeros(batch.n_sequences, dtype=np.uint8)

    def run_pass(self, order=None):
        """One oracle pass; returns the sum of the Frank-Wolfe gaps (``last_gain``: the
        dual's increase)."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        gap, self.last_gain = multi_point_pass(self, order)
        return gap

    def run_sweep(self, order=None):
        """Re-solve every example's master from its cached points (no oracle call); returns
        the dual's increase."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return master_sweep(self, order)
