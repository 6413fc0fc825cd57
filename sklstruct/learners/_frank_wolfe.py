"""Per-example restricted simplicial decomposition over sufficient statistics (Yu and Rousu
2007): the dual states of ``M3NSimplicialDecomposition``'s compiled passes and of
``L1M3N``'s M-steps.

:class:`BlockFrankWolfeState` (dimension limit 1: block-coordinate Frank-Wolfe with exact line
search) and :class:`MultiPointFrankWolfeState` (dimension limit ``r``) start every example at
the point mass on its true labelling (``w = 0``) and run the compiled passes of
:mod:`._frank_wolfe_fast` on any structure with compiled per-example kernels; a visit costs one
max-oracle call on the example and touches only the weights of its features.
"""

import numpy as np

from .._inference._validation import check_n_jobs
from ..structures._base import BaseStructure, checked_token_loss
from ..structures._loss import hamming_max_loss
from ._factored_dual import DualWeights, FactoredDualState
from . import _frank_wolfe_fast, _multi_point_fast
from ._multi_point_fast import TOKEN_GRAM_ENTRIES

# largest cache of per-example points (cached mode of MultiPointFrankWolfeState)
CACHE_MB = 256
# largest memory of kept token Gram matrices (uncached mode of MultiPointFrankWolfeState)
TOKEN_GRAM_MB = 64


def _weighted_hamming(structure):
    """Whether the structure's loss is the default weighted Hamming loss."""
    return type(structure).token_loss is BaseStructure.token_loss


def supports_multi_point(structure, batch):
    """Whether :class:`MultiPointFrankWolfeState`'s compiled pass takes the structure on the
    batch: labels kept as int16, anchors' keys as int32."""
    longest = int(np.diff(batch.offsets).max(initial=1))
    return (structure.n_states_ <= np.iinfo(np.int16).max
            and longest * structure.n_states_ < np.iinfo(np.int32).max
            and structure.n_pairwise_ < np.iinfo(np.int32).max)


# the mean stored entries times states of an example from which block-coordinate Frank-Wolfe
# (max_points=1) runs through the multi-point pass (see multi_point_block_steps)
MULTI_POINT_BLOCK_STEP_WORK = 2048


def multi_point_block_steps(structure, batch):
    """Whether block-coordinate Frank-Wolfe's visits (``max_points=1``) should run through
    :class:`MultiPointFrankWolfeState`'s uncached one-stage visits rather than
    :class:`BlockFrankWolfeState`'s pass.

    Without constrained coordinates the two take the same steps (an exact line search between
    the example's point and the oracle's labelling) up to rounding. The multi-point visit
    keeps no per-token marginals and forms no step direction over the example's features:
    it costs less where that direction is large, and more per visit otherwise. So it is
    taken when an example has on average at least ``MULTI_POINT_BLOCK_STEP_WORK`` stored
    entries times states (CoNLL-2000's sentences: about 11,000; OCR's words: about 26,000;
    the examples of ``make_tree_data``: about 700).
    """
    if len(structure.nonnegative_) or not supports_multi_point(structure, batch):
        return False
    n_entries = batch.csr_arrays[0][-1] if batch.n_tokens else 0
    work = float(n_entries) * structure.n_states_ / max(batch.n_sequences, 1)
    return work >= MULTI_POINT_BLOCK_STEP_WORK


# the threads of a certificate (primal_and_gaps) at most
MAX_CERTIFICATE_THREADS = 8

# the largest share of stored entries an example shares (by feature) with another for
# which MultiPointFrankWolfeState visits in two stages (0.23 on CoNLL-2000, 1.0 on OCR)
TWO_STAGE_MAX_SHARED = 0.5


class _Shrinking:
    """Certificates with every example's gap, and sweeps over the examples whose gaps stay
    above a threshold (shrinking)."""

    def primal_and_gaps(self, n_jobs=None):
        """The primal objective at the state's weights and every example's Frank-Wolfe gap
        there (they sum to the duality gap at an exact certificate's weights), from one
        oracle call per example (the passes' ``certificate_pass``), on the threads
        ``n_jobs`` asks for (the same values on any number of them)."""
        # (each extra thread keeps a slot per feature: at most MAX_CERTIFICATE_THREADS, and
        # one per 64 examples)
        threads = min(check_n_jobs(n_jobs), MAX_CERTIFICATE_THREADS,
                      max(1, self.batch.n_sequences // 64))
        hinge, gaps = self._passes.certificate_pass(self, threads)
        return 0.5 * float(self.statistic_weights @ self.w) \
            + self.C * self.weighted_total(hinge), gaps

    def run_active(self, active, threshold, stop_gap, max_visits, seed, target_gap=-1.0,
                   min_visits=0, n_jobs=None):
        """Visit the examples of ``active`` in sweeps, each dropping those whose gap at the
        visit is at most ``threshold``, until the remaining gaps sum to at most ``stop_gap``,
        after ``max_visits`` visits, or once (after ``min_visits``) the summed gaps of all
        examples at their last visit (``block_gap``) are at most ``target_gap``
        (the passes' ``active_sweeps``, on the threads ``n_jobs`` asks for where the pass
        has several stages, with the same iterates on any number); returns the visits.
        ``last_gain`` receives the dual's increase (multi-point masters only)."""
        _, visits, self.last_gain = self._passes.active_sweeps(
            self, np.array(active, dtype=np.int64), float(threshold), float(stop_gap),
            int(max_visits), float(target_gap), int(min_visits), int(seed),
            check_n_jobs(n_jobs))
        return visits


class BlockFrankWolfeState(_Shrinking, FactoredDualState):
    """Statistics, weights and passes of block-coordinate Frank-Wolfe with line search."""

    _passes = _frank_wolfe_fast

    def __init__(self, structure, batch, Y, C, scale2=None, sample_weight=None):
        super().__init__(structure, batch, Y, C, structure.onehot(Y),
                         structure.pairwise_statistics(batch, Y, per_sequence=True), scale2,
                         sample_weight)

    def run_pass(self, order=None, n_jobs=None):
        """One pass over the examples (in ``order``, on one thread whatever ``n_jobs``);
        returns the sum of their FW gaps."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return _frank_wolfe_fast.frank_wolfe_pass(self, order)


def _distinct_features(batch, n_features, limit=None, chunk_entries=2**20):
    """Every example's distinct features (``(features int32, ptr int64)``, CSR-like), counted
    over chunks of about ``chunk_entries`` stored entries (with ``limit``, at most a quarter
    of it, so that the count stops soon after it passes); ``None`` once their number exceeds
    ``limit``."""
    if limit is not None:
        chunk_entries = min(chunk_entries, max(1024, limit // 4))
    indptr, indices, _ = batch.csr_arrays
    d, ends = np.int64(n_features), indptr[batch.offsets]
    counts = np.zeros(batch.n_sequences, dtype=np.int64)
    parts, total, first = [], 0, 0
    while first < batch.n_sequences:
        last = max(first + 1, int(np.searchsorted(ends, ends[first] + chunk_entries,
                                                  side="right")) - 1)
        last = min(last, batch.n_sequences)
        lo, hi = ends[first], ends[last]
        example = np.repeat(np.arange(last - first, dtype=np.int64),
                            np.diff(ends[first:last + 1]))
        key = np.unique(example * d + indices[lo:hi])
        counts[first:last] = np.bincount(key // d, minlength=last - first)
        total += key.shape[0]
        if limit is not None and total > limit:
            return None
        parts.append((key % d).astype(np.int32))
        first = last
    ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)), ptr


class AnchorStore:
    """Every example's anchor as sparse entries in one pool.

    Example ``i``'s anchor is the true labelling while ``start[i] < 0`` (no entries); then
    ``n_node[i]`` node entries (key ``t * n_states + s``, ``t`` the token's position in the
    example) followed by ``n_pair[i]`` pairwise entries (key: the pairwise coordinate), from
    ``start[i]`` in ``keys`` and ``values``, within a slot of ``capacity[i]`` entries. An anchor
    is a mixture of the labellings an example's master has used, so it has few non-zero
    entries per token; the compiled pass unpacks the visited example's anchor into dense
    workspace arrays and packs it back after a change. ``used[0]`` entries of the pool are
    taken (by live or abandoned slots).
    """

    def __init__(self, n_sequences, n_entries):
        self.start = np.full(n_sequences, -1, dtype=np.int64)
        self.capacity = np.zeros(n_sequences, dtype=np.int64)
        self.n_node = np.zeros(n_sequences, dtype=np.int64)
        self.n_pair = np.zeros(n_sequences, dtype=np.int64)
        self.keys = np.zeros(max(16, n_entries), dtype=np.int32)
        self.values = np.zeros(max(16, n_entries))
        self.used = np.zeros(1, dtype=np.int64)

    def reserve(self, n_entries):
        """Make room for a slot of ``n_entries`` after ``used[0]``: move the live slots to the
        front when abandoned slots take a quarter of the pool's used part or more, and grow
        the pool to 1.5 times what is then needed when that is not enough."""
        live = self.start >= 0
        live_entries = int(self.capacity[live].sum())
        if 4 * (int(self.used[0]) - live_entries) >= int(self.used[0]):
            order = np.flatnonzero(live)
            order = order[np.argsort(self.start[order], kind="stable")]
            sizes = self.capacity[order]
            new_start = np.zeros(order.shape[0], dtype=np.int64)
            np.cumsum(sizes[:-1], out=new_start[1:])
            source = np.repeat(self.start[order] - new_start, sizes) + np.arange(live_entries)
            self.keys[:live_entries] = self.keys[source]
            self.values[:live_entries] = self.values[source]
            self.start[order] = new_start
            self.used[0] = live_entries
        needed = int(self.used[0]) + int(n_entries)
        if needed > self.keys.shape[0]:
            size = needed + needed // 2
            keys, values = np.zeros(size, dtype=np.int32), np.zeros(size)
            keys[:self.used[0]] = self.keys[:self.used[0]]
            values[:self.used[0]] = self.values[:self.used[0]]
            self.keys, self.values = keys, values


class MultiPointFrankWolfeState(_Shrinking, DualWeights):
    """Restricted simplicial decomposition with ``max_points`` points per example.

    Per visit: one max-oracle call, a master QP over the example's anchor and kept labellings
    (the paper's footnote 1), and an update of the example's point weights and weights ``v``.
    Example ``i``'s dual point is ``x_i = (1 - sum_k mu_k) a_i + sum_k mu_k z_k`` with ``a_i``
    its anchor (an :class:`AnchorStore` entry: the true labelling at first) and ``z_k`` its
    kept labellings (``max_points`` labels per token); its statistics are never stored
    apart from these, so the memory above the data is about the anchors' non-zero entries
    (12 bytes each, in a pool with room to grow: up to about twice the live entries),
    ``2 * max_points`` bytes per token for the labels, ``4 * max_points (max_points + 1)``
    bytes per example for the masters' Gram terms, and the kept token Gram matrices
    (``TOKEN_GRAM_MB``).

    In the cached mode every example keeps its anchor and points as dense rows over its own
    features (``(max_points + 1) x (n_example_features x n_states + n_pairwise)`` doubles), so
    a master costs nothing proportional to the example's length and can be re-solved between
    oracle passes (:meth:`run_sweep`). ``cached="auto"`` takes it when the examples have, in
    total, fewer distinct features than tokens (images and other data with few features per
    token) and the rows fit in ``CACHE_MB``.

    The uncached visits run in two stages (:class:`~._multi_point_fast._Pipeline`, on two
    threads when a pass asks for several) with ``two_stage=True``; ``"auto"`` takes them when
    a sample of example pairs shares at most ``TWO_STAGE_MAX_SHARED`` of the stored entries'
    features; ``False`` keeps one stage.
    """

    _passes = _multi_point_fast

    def __init__(self, structure, batch, Y, C, max_points, cached="auto", scale2=None,
                 two_stage="auto", sample_weight=None):
        self._bind(structure, batch, Y, C, scale2, sample_weight)
        S, n = structure.n_states_, batch.n_sequences
        if scale2 is not None:
            if self.constrained.size:
                raise ValueError("scaled features with constrained weights are not supported.")
            cached = False  # (the cached rows hold unscaled statistics)
        if not 1 <= max_points <= 63:
            raise ValueError(f"the compiled pass keeps 1 to 63 points per example, not "
                             f"{max_points}.")
        if not supports_multi_point(structure, batch):
            raise ValueError("the compiled pass keeps at most 32,767 states and "
                             "2**31 - 1 entries of a sequence's node or pairwise statistics.")
        # a loss other than the weighted Hamming loss is kept as its token loss matrix
        self.token_loss = np.zeros((0, S)) if _weighted_hamming(structure) else \
            np.ascontiguousarray(checked_token_loss(structure, self.Y))
        self.anchor_loss = np.zeros(n) if not self.token_loss.size else np.bincount(
            batch.sequence_index, weights=self.token_loss[np.arange(batch.n_tokens), self.Y],
            minlength=n)
        self.expected_loss = self.anchor_loss.copy()
        self.vertex_labels = np.zeros((batch.n_tokens, max_points), dtype=np.int16)
        self.vertex_loss = np.zeros((n, max_points))
        self.vertex_weight = np.zeros((n, max_points))
        self.n_vertices = np.zeros(n, dtype=np.int64)
        self.feature_buffer = np.zeros(structure.n_features_)
        # the masters' token-Gram products, kept between visits (see _frank_wolfe_fast)
        self.gram_points = np.zeros((n, max_points * (max_points + 1) // 2))  # (triangles)
        self.gram_anchor = np.zeros((n, max_points))
        self.gram_anchor_self = np.zeros(n)
        self.gram_anchor_ok = np.zeros(n, dtype=np.uint8)
        self.gram_point_ok = np.zeros((n, max_points), dtype=np.uint8)
        self._set_up_cache(max_points, cached)
        self._set_up_token_grams(keep=not self.cached and scale2 is None)
        # (the cached rows hold the anchors in the cached mode)
        self.anchors = AnchorStore(n, 0 if self.cached else batch.n_tokens)
        # the uncached visits in two stages (_multi_point_fast._Pipeline) where most stored
        # entries' features are new to the example visited before; elsewhere (pixels, a few
        # dense features: OCR letters) the split costs more than a second thread saves
        # (two_stage=False: always one stage)
        self.two_stage = bool(two_stage) and not self.cached and (
            two_stage is True or _multi_point_fast.shared_entry_fraction(
                batch, structure.n_features_) <= TWO_STAGE_MAX_SHARED)
        # runs of two-stage visits on two threads that went on one part-way, their second
        # thread being often off its core (_multi_point_fast._Pipeline.run_visits)
        self.pipeline_fallbacks = 0
        self.last_gain = 0.0
        # how the uncached masters get their Gram matrices: "auto" (the cheaper per example),
        # "tokens" (where possible) or "features"
        self.master_gram = "auto"
        # every example's point starts at its true labelling, so v = 0: the weights are the
        # zeros _bind made (a certificate would recompute them from every token)
        if self.scale2.size:
            self._v = self.w.copy()

    def point_statistics(self):
        """Every example's point ``x_i``, dense: node measures (n_tokens, n_states) and
        pairwise statistics (n_sequences, n_pairwise), for inspection and tests (the fit
        never forms them). Not in the cached mode, whose anchors are rows over the
        examples' features."""
        if self.cached:
            raise ValueError("the cached mode keeps no per-token anchors.")
        batch, S, a = self.batch, self.structure.n_states_, self.anchors
        node = self.structure.onehot(self.Y).astype(np.float64)
        pair = np.asarray(self.structure.pairwise_statistics(batch, self.Y, per_sequence=True),
                          dtype=np.float64).reshape(batch.n_sequences, -1).copy()
        stored = np.flatnonzero(a.start >= 0)
        node[np.isin(batch.sequence_index, stored)] = 0.0
        pair[stored] = 0.0

        def entries(first, counts):
            within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            return np.repeat(stored, counts), np.repeat(first, counts) + within

        seq, at = entries(a.start[stored], a.n_node[stored])
        node[batch.offsets[seq] + a.keys[at] // S, a.keys[at] % S] = a.values[at]
        seq, at = entries(a.start[stored] + a.n_node[stored], a.n_pair[stored])
        pair[seq, a.keys[at]] = a.values[at]
        weight = 1.0 - self.vertex_weight.sum(axis=1)
        node *= weight[batch.sequence_index, None]
        pair *= weight[:, None]
        tokens = np.arange(batch.n_tokens)
        for k in range(self.vertex_labels.shape[1]):
            mu = self.vertex_weight[:, k]
            node[tokens, self.vertex_labels[:, k]] += mu[batch.sequence_index]
            kept = np.flatnonzero(self.n_vertices > k)
            if kept.size and pair.shape[1]:
                rows = np.isin(batch.sequence_index, kept)
                labels = self.vertex_labels[rows, k].astype(np.int64)
                pair[kept] += mu[kept, None] * np.asarray(self.structure.pairwise_statistics(
                    batch.take(kept), labels, per_sequence=True)
                ).reshape(kept.size, -1)
        return node, pair

    def rescale(self, scale2):
        if self.cached:
            raise ValueError("the cached mode keeps unscaled rows: make the state with "
                             "scale2 to rescale it.")
        return super().rescale(scale2)

    def _statistics_weights(self):
        self.WT[:] = 0.0
        self.pair_v[:] = self.C * (self.true_pairwise
                                    - _multi_point_fast.statistics_weights(self))

    def max_loss(self):
        """``sum_i s_i sum_{t in i} max_s L[t, s]``: the (weighted) summed hinge at
        ``w = 0``."""
        if self.token_loss.size:
            return self.weighted_per_token_total(self.token_loss.max(axis=1))
        if self.weighted:
            return self.weighted_per_token_total(
                hamming_max_loss(self.Y, self.loss_weights, self.structure.n_states_,
                                 per_token=True))
        return hamming_max_loss(self.Y, self.loss_weights, self.structure.n_states_)

    def _set_up_token_grams(self, keep):
        """Room for the examples' token Gram matrices (their upper triangles, ``length *
        (length + 1) / 2`` entries each, computed at an example's first master and kept),
        for the examples in order while they fit in ``TOKEN_GRAM_MB`` and each within the
        pass's largest token Gram matrix; ``token_gram_ptr`` is -1 for the others (their
        matrix is recomputed when needed). The entries are kept as bytes (``token_gram8``)
        when that is exact: non-negative integer features whose tokens' squared l2 norms
        are at most 255, so that every entry is an integer from 0 to 255 (binary features,
        e.g. one-hot token attributes, with at most 255 per token); else in single precision
        (``token_gram32``) when that is exact: integer features whose tokens' l1 norms stay
        below ``2**12``, so every entry is an integer below ``2**24``; else in double
        precision (``token_gram``)."""
        lengths = self.batch.lengths.astype(np.int64)
        sizes = lengths * (lengths + 1) // 2
        sizes[lengths ** 2 > TOKEN_GRAM_ENTRIES] = 0
        indptr, _, data = self.batch.csr_arrays
        starts = indptr[:-1][np.diff(indptr) > 0]
        integer = keep and bool(np.all(data == np.rint(data)))
        small = integer and (data.size == 0 or (
            bool(np.all(data >= 0))
            and float(np.add.reduceat(data * data, starts).max()) <= 255))
        single = integer and not small and (
            data.size == 0 or float(np.add.reduceat(np.abs(data), starts).max()) < 2**12)
        itemsize = 1 if small else 4 if single else 8
        end = np.cumsum(sizes)
        kept = (sizes > 0) & (end * itemsize <= TOKEN_GRAM_MB * 2**20) if keep else \
            np.zeros(sizes.shape[0], dtype=bool)
        self.token_gram_ptr = np.where(kept, end - sizes, -1).astype(np.int64)
        size = int(sizes[kept].sum())
        self.token_gram = np.zeros(size if itemsize == 8 else 0)
        self.token_gram32 = np.zeros(size if single else 0, dtype=np.float32)
        self.token_gram8 = np.zeros(size if small else 0, dtype=np.uint8)
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
        if cached:
            # with "auto", counting stops once the examples' distinct features outnumber
            # the tokens: the cache cannot pay off then
            distinct = _distinct_features(batch, self.structure.n_features_,
                                          batch.n_tokens if cached == "auto" else None)
            if distinct is None:
                cached = False
        if not cached:
            self.cached = False
            self.cache_features = np.zeros(0, dtype=np.int32)
            self.cache_feature_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
            self.cache_ptr = np.zeros(batch.n_sequences + 1, dtype=np.int64)
            self.cache = np.zeros(0)
            self.cache_ready = np.zeros(batch.n_sequences, dtype=np.uint8)
            return
        self.cache_features, self.cache_feature_ptr = distinct
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

    def run_pass(self, order=None, n_jobs=None):
        """One oracle pass; returns the sum of the Frank-Wolfe gaps (``last_gain``: the
        dual's increase). The uncached mode's visits run in two stages on two threads when
        ``n_jobs`` asks for several, with the same iterates."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        gap, self.last_gain = _multi_point_fast.multi_point_pass(self, order,
                                                                 check_n_jobs(n_jobs))
        return gap

    def run_sweep(self, order=None):
        """Re-solve every example's master from its cached points (no oracle call); returns
        the dual's increase."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        return _multi_point_fast.master_sweep(self, order)
