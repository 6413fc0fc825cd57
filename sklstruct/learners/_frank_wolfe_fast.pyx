"""Compiled passes of block-coordinate Frank-Wolfe, restricted simplicial decomposition with
dimension limit 1 (Yu and Rousu 2007; Lacoste-Julien et al. 2013).

Example ``i``'s dual variables are a distribution over its labellings, represented by its
statistics (:class:`sklstruct.learners._factored_dual.FactoredDualState`: rows of
``node_marg``, ``pair_marg[i]``) and its expected loss. The weights are
``v = C sum_i s_i (Psi(x_i, y_i) - E_i[Psi])`` (``s_i`` the sample weights, 1 unless given),
kept explicitly as ``W^T`` and ``pair_v``; the
model's weights ``w`` equal ``v`` except on pairwise coordinates constrained to be
non-negative, where ``w = [v]_+``. Everything about the structure comes from its compiled
kernels (``state.kernels``).

:func:`frank_wolfe_pass`: visiting example ``i``, the max-oracle at the current ``w`` gives the
vertex ``ybar`` (the kernels' ``max_oracle_candidate``: for chains of 32 states or more the
best labelling or one within the rounding of single-precision sums of it; the certificate
decodes exactly); with ``d = C s_i (Psi(ybar) - E_i[Psi])`` the block's Frank-Wolfe gap is
``g = C s_i (Delta(ybar) - E_i[Delta]) + w . d``, and the exact line search over
``(1 - gamma) alpha_i + gamma delta_ybar`` (piecewise quadratic where weights are clipped at
zero) moves the statistics and ``v`` (only the rows of ``W^T`` of the example's features).
:func:`active_sweeps` and :func:`certificate_pass` run the shrinking sweeps and the
per-example certificate of :mod:`sklstruct.learners._factored_dual_fast` on these steps.
The multi-point passes are in :mod:`sklstruct.learners._multi_point_fast`.

The passes check for Ctrl-C every few thousand tokens (KeyboardInterrupt; the state is then
consistent up to the examples visited).
"""

import numpy as np


from libc.stdlib cimport free, malloc

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport int32_t, int64_t, intp_t, uint64_t
from sklstruct.learners._example_rows cimport (dot, release, SIGNAL_CHECK_TOKENS,
                                               token_scores)
from sklstruct.learners._factored_dual_fast cimport (DualPass, certify_examples,
                                                     sweep_active)


cdef double _line_search(double gap, double norm_sq, const double* d_k, const double* v_k,
                         intp_t n_k) noexcept nogil:
    """Maximiser over ``[0, 1]`` of ``f(gamma)``, the dual along a Frank-Wolfe direction.

    ``f'(gamma) = a - gamma b + sum_k d_k [v_k - gamma d_k]_+`` with the constrained
    coordinates ``k`` (``d`` the direction, ``v`` the unclipped weights); ``f'(0) = gap`` and
    ``norm_sq = ||d||^2``. ``f'`` is piecewise linear and non-increasing, with breakpoints
    ``v_k / d_k``. A zero direction (``norm_sq = 0``: e.g. an example whose tokens have no
    features, where only the loss differs) leaves ``f`` linear: a positive gap takes the
    whole step.
    """
    cdef intp_t k, j, n_breaks = 0
    cdef double a, b, lo, hi, f_lo, f_hi, x
    cdef double breaks[66]
    if gap <= 0.0:
        return 0.0
    if norm_sq <= 0.0:
        return 1.0
    if n_k == 0:
        return min(1.0, gap / norm_sq)
    a = gap
    b = norm_sq
    for k in range(n_k):
        if v_k[k] > 0:
            a -= d_k[k] * v_k[k]
        b -= d_k[k] * d_k[k]
        if d_k[k] != 0.0:
            x = v_k[k] / d_k[k]
            if 0.0 < x < 1.0:
                # insertion into the sorted breakpoints
                j = n_breaks
                while j > 0 and breaks[j - 1] > x:
                    breaks[j] = breaks[j - 1]
                    j -= 1
                breaks[j] = x
                n_breaks += 1
    breaks[n_breaks] = 1.0
    lo = 0.0
    f_lo = gap
    for j in range(n_breaks + 1):
        hi = breaks[j]
        f_hi = a - hi * b
        for k in range(n_k):
            x = v_k[k] - hi * d_k[k]
            if x > 0:
                f_hi += d_k[k] * x
        if f_hi <= 0.0:
            if f_lo - f_hi <= 0.0:
                return lo
            return lo + f_lo * (hi - lo) / (f_lo - f_hi)
        lo = hi
        f_lo = f_hi
    return 1.0


cdef class _BlockFrankWolfe(DualPass):
    """Block-coordinate Frank-Wolfe's step on one example (see :func:`frank_wolfe_pass`),
    with its workspace."""
    cdef double* scores
    cdef double* vertex_pair
    cdef double* entry_value
    cdef intp_t* entry_index
    cdef int64_t* labels
    cdef int32_t* touched

    def __init__(self, state):
        super().__init__(state)
        if self.scale2.shape[0] > 0 and self.n_k:
            raise ValueError("scaled features with constrained weights are not supported.")
        self.scores = <double*> malloc(self.max_len * self.S * sizeof(double))
        self.vertex_pair = <double*> malloc((self.P + 1) * sizeof(double))
        self.entry_value = <double*> malloc((self.kernels.max_pairwise_entries + 1)
                                            * sizeof(double))
        self.entry_index = <intp_t*> malloc((self.kernels.max_pairwise_entries + 1)
                                            * sizeof(intp_t))
        self.labels = <int64_t*> malloc(self.max_len * sizeof(int64_t))
        self.touched = <int32_t*> malloc(self.max_nnz * sizeof(int32_t))
        if (self.scores == NULL or self.vertex_pair == NULL or self.entry_value == NULL
                or self.entry_index == NULL or self.labels == NULL or self.touched == NULL):
            raise MemoryError("could not allocate the Frank-Wolfe workspace")

    def __dealloc__(self):
        free(self.scores)
        free(self.vertex_pair)
        free(self.entry_value)
        free(self.entry_index)
        free(self.labels)
        free(self.touched)

    cdef int gap_and_hinge(self, intp_t i, double* gap, double* hinge) except -1 nogil:
        cdef intp_t S = self.S, t, r, n_touched, n_entries
        cdef intp_t lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef double loss_bar = 0.0, bar = 0.0, expected = 0.0, truth = 0.0
        cdef double* scores = self.scores
        cdef int64_t* labels = self.labels
        n_touched = token_scores(&self.indptr[0], self.indices_ptr(), self.data_ptr(),
                                 self.WT_ptr(), S, lo, length, scores, &self.slot[0],
                                 self.touched)
        release(&self.slot[0], self.touched, n_touched)
        self.kernels.max_oracle(i, scores, &self.token_loss[lo, 0], self.theta_ptr(), labels)
        for t in range(length):
            loss_bar += self.token_loss[lo + t, labels[t]]
            bar += scores[t * S + labels[t]]
            truth += scores[t * S + self.Y[lo + t]]
            expected += dot(scores + t * S, &self.node_marg[lo + t, 0], S)
        n_entries = self.kernels.pairwise_entries(i, labels, self.entry_index,
                                                  self.entry_value)
        for r in range(n_entries):
            bar += self.theta[self.entry_index[r]] * self.entry_value[r]
        n_entries = self.kernels.pairwise_entries(i, &self.Y[lo], self.entry_index,
                                                  self.entry_value)
        for r in range(n_entries):
            truth += self.theta[self.entry_index[r]] * self.entry_value[r]
        for r in range(self.P):
            expected += self.theta[r] * self.pair_marg[i, r]
        hinge[0] = loss_bar + bar - truth
        if hinge[0] < 0.0:  # (max(0, ...): an oracle that missed the true labelling)
            hinge[0] = 0.0
        gap[0] = self.example_C(i) * (loss_bar - self.expected_loss[i] + bar - expected)
        return 0

    cdef int visit(self, intp_t i, double* gap_out, double* gain_out) except -1 nogil:
        """One oracle call and line search on example ``i``; its Frank-Wolfe gap into
        ``gap_out`` (``gain_out`` is left as it is: the dual's increase is not tracked)."""
        cdef intp_t S = self.S, P = self.P, n_k = self.n_k, n_unary = self.WT.shape[0] * S
        cdef bint scaled = self.scale2.shape[0] > 0
        cdef intp_t k2, t, s, r, n_touched, n_entries
        cdef intp_t lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef int64_t q
        cdef int32_t j
        cdef double v, loss_bar, gain, norm, gamma, dp, C = self.example_C(i)
        cdef double d_k[64]
        cdef double v_k[64]
        cdef double* scores = self.scores
        cdef double* row
        cdef const double* marg
        cdef double* WT = <double*> self.WT_ptr()
        cdef double* w_row
        cdef const double* step_row
        cdef const double* scale_row
        cdef intp_t n_rows = 0  # (the rows of scratch set so far: slots 0 .. n_rows - 1)
        cdef int64_t* labels = self.labels
        # (raw pointers: the stores would otherwise reload the memoryviews)
        cdef double* node_marg = &self.node_marg[lo, 0]
        cdef double* pair_marg = &self.pair_marg[i, 0] if P > 0 else NULL
        cdef double* pair_v = &self.pair_v[0] if P > 0 else NULL
        cdef const double* theta = self.theta_ptr()
        n_touched = token_scores(&self.indptr[0], self.indices_ptr(), self.data_ptr(),
                                 self.WT_ptr(), S, lo, length, scores, &self.slot[0],
                                 self.touched)
        self.kernels.max_oracle_candidate(i, scores, &self.token_loss[lo, 0], self.theta_ptr(),
                                          labels)
        for r in range(P):
            self.vertex_pair[r] = 0.0
        n_entries = self.kernels.pairwise_entries(i, labels, self.entry_index,
                                                  self.entry_value)
        for r in range(n_entries):
            self.vertex_pair[self.entry_index[r]] += self.entry_value[r]
        loss_bar = 0.0
        for t in range(length):
            loss_bar += self.token_loss[lo + t, labels[t]]
        # Frank-Wolfe gap g = C (Delta(ybar) - E[Delta]) + w . d and ||d||^2
        gain = loss_bar - self.expected_loss[i]
        for t in range(length):
            gain += scores[t * S + labels[t]]
            gain -= dot(scores + t * S, &self.node_marg[lo + t, 0], S)
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                j = self.slot[self.indices[q]]
                v = C * self.data[q]
                row = &self.scratch[j, 0]
                marg = &self.node_marg[lo + t, 0]
                if j == n_rows:  # (the feature's first entry: its row is set, from zero)
                    n_rows += 1
                    for s in range(S):
                        row[s] = 0.0 - v * marg[s]
                else:
                    for s in range(S):
                        row[s] -= v * marg[s]
                row[labels[t]] += v
        norm = 0.0
        for r in range(P):
            dp = self.vertex_pair[r] - pair_marg[r]
            gain += theta[r] * dp
            if scaled:
                norm += dp * dp * self.scale2[n_unary + r]
            else:
                norm += dp * dp
        gain *= C
        norm *= C * C
        for k2 in range(n_touched):
            if scaled:
                j = self.touched[k2] * S
                for s in range(S):
                    norm += self.scale2[j + s] * self.scratch[k2, s] * self.scratch[k2, s]
            else:
                norm += dot(&self.scratch[k2, 0], &self.scratch[k2, 0], S)
        self.block_gap[i] = gain
        gap_out[0] = gain
        for r in range(n_k):
            d_k[r] = C * (self.vertex_pair[self.constrained[r]]
                          - self.pair_marg[i, self.constrained[r]])
            v_k[r] = self.pair_v[self.constrained[r]]
        gamma = _line_search(gain, norm, d_k, v_k, n_k)
        if gamma > 0.0:
            for k2 in range(n_touched):
                j = self.touched[k2]
                w_row = WT + <intp_t> j * S
                step_row = &self.scratch[k2, 0]
                if scaled:
                    scale_row = &self.scale2[<intp_t> j * S]
                    for s in range(S):
                        w_row[s] -= gamma * step_row[s] * scale_row[s]
                else:
                    for s in range(S):
                        w_row[s] -= gamma * step_row[s]
        release(&self.slot[0], self.touched, n_touched)
        if gamma > 0.0:
            for r in range(P):
                dp = self.vertex_pair[r] - pair_marg[r]
                if scaled:
                    pair_v[r] -= gamma * C * dp * self.scale2[n_unary + r]
                else:
                    pair_v[r] -= gamma * C * dp
                pair_marg[r] += gamma * dp
            self.clip()
            for t in range(length):
                row = node_marg + t * S
                for s in range(S):
                    row[s] *= 1.0 - gamma
                row[labels[t]] += gamma
            self.expected_loss[i] += gamma * (loss_bar - self.expected_loss[i])
        return 0


def frank_wolfe_pass(state, const int64_t[::1] order):
    """Visit the examples of ``order`` in turn (block-coordinate Frank-Wolfe with exact line
    search); return the sum of their Frank-Wolfe gaps. ``state.block_gap[i]`` receives
    example ``i``'s gap at its (last) visit.

    With ``state.scale2`` (``s^2`` for every weight, flat) the joint features are scaled by
    ``s``: the pass keeps the unscaled statistics' weights ``v`` implicitly through the
    effective weights ``w = s^2 v`` (which score the tokens), and measures steps in the norm
    ``||s v||``.
    """
    cdef _BlockFrankWolfe p = _BlockFrankWolfe(state)
    cdef intp_t k, i, since_check = 0
    cdef double gap = 0.0, gain = 0.0, total_gap = 0.0
    with nogil:
        for k in range(order.shape[0]):
            i = order[k]
            check_signals_every(&since_check, p.offsets[i + 1] - p.offsets[i], SIGNAL_CHECK_TOKENS)
            p.visit(i, &gap, &gain)
            if gap > 0.0:
                total_gap += gap
    return total_gap


def active_sweeps(state, int64_t[::1] active, double threshold, double stop_gap,
                  intp_t max_visits, double target_gap, intp_t min_visits, uint64_t seed,
                  n_threads=1):
    """Sweeps over the examples of ``active`` (overwritten), each visit an oracle call and a
    step of the state's pass (:class:`~._frank_wolfe.BlockFrankWolfeState`: Frank-Wolfe with
    line search; :class:`~._frank_wolfe.MultiPointFrankWolfeState`: the master over its
    points). Every sweep visits the remaining examples in an order shuffled by xorshift64*
    from ``seed``, then drops those whose Frank-Wolfe gap at the visit is at most
    ``threshold`` (shrinking, as the active set of LIBLINEAR's dual coordinate descent). The
    sweeps stop when the remaining examples' gaps sum to at most ``stop_gap``, when none
    remains, after ``max_visits`` visits (the last sweep cut short), or after a visit, once
    there were ``min_visits``, that takes the estimated duality gap to ``target_gap`` or
    below: the sum over all examples of ``state.block_gap`` (their gaps at their last visit,
    or as the caller set them), kept up to date visit by visit. Returns
    ``(sweeps, visits, gain)``, ``gain`` the dual's increase (0 for the Frank-Wolfe steps,
    which do not track it). The block Frank-Wolfe visits run on one thread whatever
    ``n_threads`` (the multi-point pass's signature)."""
    cdef DualPass p
    if max_visits < 0 or min_visits < 0:
        raise ValueError("max_visits and min_visits must be non-negative.")
    p = _BlockFrankWolfe(state)
    n = state.batch.n_sequences
    if active.shape[0] and (np.min(np.asarray(active)) < 0
                             or np.max(np.asarray(active)) >= n):
        raise ValueError(f"active holds examples outside 0 .. {n - 1}.")
    return sweep_active(p, active, threshold, stop_gap, max_visits, target_gap, min_visits,
                          seed)


def certificate_pass(state, n_threads=1):
    """Every example's structured hinge ``H_i`` and Frank-Wolfe gap at the state's weights
    (``WT`` and ``theta``), one example at a time (an oracle call each, no step): at one
    ``w = w(alpha)`` the gaps sum to the duality gap ``P(w) - D(alpha)``. On ``n_threads``
    threads, with the same arrays (``certify_examples``). Returns ``(hinge, gaps)``."""
    return certify_examples(_BlockFrankWolfe, state, n_threads)
