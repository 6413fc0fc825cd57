"""Compiled parts of the dual states kept as per-example statistics
(:mod:`sklstruct.learners._factored_dual`): :class:`DualPass`, their arrays as typed views
(every compiled per-example pass binds a state through it, once per call), and the streaming
passes the states compute their weights and primal objective with.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sklstruct._inference._validation import split_into_chunks
from sklstruct.learners._factored_dual import take_truth

from libc.string cimport memset

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t, uint64_t
from sklstruct.learners._example_rows cimport (release, sequence_sizes, SIGNAL_CHECK_TOKENS,
                                               token_scores)


cdef class DualPass:
    """The arrays of a dual state as typed views, and the per-example steps of the passes
    (the Frank-Wolfe passes' subclasses implement :meth:`visit` and :meth:`gap_and_hinge`)."""

    def __init__(self, state, bint statistics=True):
        """``statistics``: the state keeps node marginals and pairwise statistics
        (:class:`~sklstruct.learners._factored_dual.FactoredDualState`)."""
        cdef intp_t max_len, max_nnz
        self.indptr, self.indices, self.data = state.batch.csr_arrays
        self.offsets = state.batch.offsets
        self.Y = state.Y
        self.loss_weights = state.loss_weights
        self.token_loss = state.token_loss
        self.expected_loss = state.expected_loss
        self.WT = state.WT
        self.pair_v = state.pair_v
        self.theta = state.theta
        self.scratch = state.scratch
        self.slot = state.slot
        self.block_gap = state.block_gap
        self.constrained = state.constrained
        self.scale2 = state.scale2
        self.kernels = state.kernels
        self.C = state.C
        self.example_weight = state.example_weight
        self.S = self.kernels.n_states
        self.P = self.kernels.n_pairwise
        self.n_k = self.constrained.shape[0]
        if statistics:
            self.node_marg = state.node_marg
            self.pair_marg = state.pair_marg
            if self.pair_marg.shape[1] != self.P or self.node_marg.shape[1] != self.S:
                raise ValueError("the structure's kernels do not match the dual state.")
        if self.Y.shape[0] != self.offsets[self.offsets.shape[0] - 1]:
            raise ValueError("Y does not match the state's tokens.")
        if self.example_weight.shape[0] != self.offsets.shape[0] - 1:
            raise ValueError("the sample weights do not match the state's examples.")
        if self.token_loss.shape[0] not in (0, self.Y.shape[0]) or \
                self.token_loss.shape[1] != self.S or self.loss_weights.shape[0] != self.S:
            raise ValueError("the loss does not match the state's tokens and states.")
        if self.n_k > 64:
            raise ValueError("the compiled passes keep at most 64 constrained weights.")
        mask = np.ones(self.P, dtype=np.uint8)
        mask[np.asarray(self.constrained)] = 0
        self.free_mask = mask
        sequence_sizes(&self.indptr[0], &self.offsets[0], self.offsets.shape[0] - 1,
                       &max_len, &max_nnz)
        self.max_len = max_len
        self.max_nnz = max_nnz

    def own_workspace(self, state):
        """Give this pass its own oracle kernels and feature slots, so that it can certify
        examples on one thread while other passes bound to ``state`` do on others (their
        ``gap_and_hinge`` writes nothing else that is shared)."""
        self.kernels = state.structure.example_kernels(state.batch)
        take_truth(self.kernels, state.Y)
        self.slot = np.full(self.slot.shape[0], -1, dtype=np.int32)

    cdef void fill_loss(self, intp_t lo, intp_t length, double* out) noexcept nogil:
        """The loss rows ``L[t, s]`` of tokens ``lo .. lo + length``: the state's
        ``token_loss`` when it has one, else the weighted Hamming loss from ``Y``."""
        cdef intp_t t, s, S = self.S
        cdef double c
        if self.token_loss.shape[0]:
            for t in range(length):
                for s in range(S):
                    out[t * S + s] = self.token_loss[lo + t, s]
            return
        for t in range(length):
            c = self.loss_weights[self.Y[lo + t]]
            for s in range(S):
                out[t * S + s] = c
            out[t * S + self.Y[lo + t]] = 0.0

    cdef int visit(self, intp_t i, double* gap_out, double* gain) except -1 nogil:
        """One oracle call and step on example ``i`` (the passes' subclasses): its
        Frank-Wolfe gap into ``gap_out``, the dual's increase (where tracked) added to
        ``gain``."""
        return 0

    cdef int gap_and_hinge(self, intp_t i, double* gap, double* hinge) except -1 nogil:
        """Example ``i``'s Frank-Wolfe gap and structured hinge ``H_i`` at the current
        weights, without a step (the passes' subclasses)."""
        return 0

    cdef intp_t visit_sequence(self, const int64_t* sequence, intp_t n,
                               Progress* progress) except -1 nogil:
        """Visit the examples ``sequence[0 .. n - 1]`` in turn, each visit recorded on
        ``progress`` (:func:`record_visit`), until its target is reached; returns the
        visits made."""
        cdef intp_t k, i
        cdef double gap = 0.0, before
        for k in range(n):
            i = sequence[k]
            check_signals_every(&progress.since_check,
                                self.offsets[i + 1] - self.offsets[i], SIGNAL_CHECK_TOKENS)
            before = self.block_gap[i]
            self.visit(i, &gap, &progress.gain)
            if record_visit(progress, before, gap):
                return k + 1
        return n


def marginal_weights(state):
    """Set ``state.WT`` to ``v``'s unary block ``C sum_i s_i X_i^T (onehot(y_i) -
    node_marg_i)`` of a state that keeps node marginals (``s_i`` the sample weights), in one
    streaming pass over the token rows (no array per token or per feature is formed)."""
    cdef DualPass p = DualPass(state)
    cdef intp_t n = p.offsets.shape[0] - 1, S = p.S, i, t, s, since_check = 0
    cdef int64_t q
    cdef int32_t j
    cdef double v, c
    cdef const double* marg
    with nogil:
        if p.WT.shape[0] > 0:
            memset(&p.WT[0, 0], 0, p.WT.shape[0] * S * sizeof(double))
        for i in range(n):
            c = p.example_C(i)
            for t in range(p.offsets[i], p.offsets[i + 1]):
                check_signals_every(&since_check, 1, SIGNAL_CHECK_TOKENS)
                marg = &p.node_marg[t, 0]
                for q in range(p.indptr[t], p.indptr[t + 1]):
                    j = p.indices[q]
                    v = c * p.data[q]
                    for s in range(S):
                        p.WT[j, s] -= v * marg[s]
                    p.WT[j, p.Y[t]] += v


def structured_hinge_pass(state, const int64_t[::1] Y):
    """Per-example margin-rescaled structured hinge at the state's weights (``WT`` and
    ``theta``): each example's token scores, loss-augmented oracle and the truth's score,
    one example at a time, so no ``n_tokens x n_states`` array is formed."""
    cdef DualPass p = DualPass(state, False)
    cdef intp_t n = p.offsets.shape[0] - 1, S = p.S, i, t, lo, length, e, n_touched
    cdef intp_t since_check = 0
    cdef double total
    hinge = np.zeros(n)
    scores_array = np.zeros(p.max_len * S)
    loss_array = np.zeros(p.max_len * S)
    labels_array = np.zeros(p.max_len, dtype=np.int64)
    touched_array = np.zeros(p.max_nnz, dtype=np.int32)
    index_array = np.zeros(p.kernels.max_pairwise_entries + 1, dtype=np.intp)
    value_array = np.zeros(p.kernels.max_pairwise_entries + 1)
    cdef float64_t[::1] out = hinge, scores = scores_array, value = value_array
    cdef float64_t[::1] loss = loss_array
    cdef int64_t[::1] labels = labels_array
    cdef int32_t[::1] touched = touched_array
    cdef intp_t[::1] index = index_array
    cdef const double* theta = p.theta_ptr()
    if Y.shape[0] != p.offsets[n]:
        raise ValueError("Y does not match the state's tokens.")
    with nogil:
        for i in range(n):
            lo = p.offsets[i]
            length = p.offsets[i + 1] - lo
            check_signals_every(&since_check, length, SIGNAL_CHECK_TOKENS)
            n_touched = token_scores(&p.indptr[0], p.indices_ptr(), p.data_ptr(), p.WT_ptr(),
                                     S, lo, length, &scores[0], &p.slot[0], &touched[0])
            release(&p.slot[0], &touched[0], n_touched)
            p.fill_loss(lo, length, &loss[0])
            p.kernels.max_oracle(i, &scores[0], &loss[0], theta, &labels[0])
            total = 0.0
            for t in range(length):
                total += loss[t * S + labels[t]] + scores[t * S + labels[t]] \
                    - scores[t * S + Y[lo + t]]
            for e in range(p.kernels.pairwise_entries(i, &labels[0], &index[0], &value[0])):
                total += theta[index[e]] * value[e]
            for e in range(p.kernels.pairwise_entries(i, &Y[lo], &index[0], &value[0])):
                total -= theta[index[e]] * value[e]
            # max(0, ...): the true labelling is always a candidate (an oracle that misses
            # it, approximate or over a restricted set, can fall below it); NaN stays
            out[i] = 0.0 if total < 0.0 else total
    return hinge


cdef inline uint64_t _next_random(uint64_t* state) noexcept nogil:
    """xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
    scrambled", 2016): the next 64-bit draw of a generator whose non-zero state is
    ``state[0]``."""
    cdef uint64_t x = state[0]
    x ^= x >> 12
    x ^= x << 25
    x ^= x >> 27
    state[0] = x
    return x * <uint64_t> 2685821657736338717ULL


cdef tuple sweep_active(DualPass p, int64_t[::1] active, double threshold, double stop_gap,
                          intp_t max_visits, double target_gap, intp_t min_visits,
                          uint64_t seed):
    """Sweeps of ``p``'s visits over the examples of ``active`` (shrinking; see
    the passes' ``active_sweeps``); returns ``(sweeps, visits, gain)``."""
    cdef intp_t n_active = active.shape[0], n = p.offsets.shape[0] - 1, k, kept
    cdef intp_t sweeps = 0
    cdef int64_t swap
    cdef uint64_t rng = seed | 1  # (a non-zero state)
    cdef double total
    cdef Progress progress
    memset(&progress, 0, sizeof(Progress))
    progress.target_gap = target_gap
    progress.min_visits = min_visits
    with nogil:
        for k in range(n):
            if p.block_gap[k] > 0.0:
                progress.estimate += p.block_gap[k]
        while n_active > 0 and progress.visits < max_visits and not progress.done:
            for k in range(n_active - 1, 0, -1):  # Fisher-Yates shuffle
                kept = <intp_t> (_next_random(&rng) % <uint64_t> (k + 1))
                swap = active[k]
                active[k] = active[kept]
                active[kept] = swap
            # (the last sweep is cut short at max_visits)
            p.visit_sequence(&active[0], min(n_active, max_visits - progress.visits),
                             &progress)
            sweeps += 1
            # keep the examples whose gap at this visit exceeds the threshold (times their
            # sample weight: an example's gaps scale with it)
            kept = 0
            total = 0.0
            for k in range(n_active):
                if p.block_gap[active[k]] > threshold * p.example_weight[active[k]]:
                    total += p.block_gap[active[k]]
                    active[kept] = active[k]
                    kept += 1
            n_active = kept
            if total <= stop_gap:
                break
    return sweeps, progress.visits, progress.gain


cdef tuple certify_examples(type pass_type, state, intp_t n_threads):
    """Every example's structured hinge ``H_i`` and Frank-Wolfe gap at the weights of
    ``state``, one example at a time (an oracle call each, no step) by passes of
    ``pass_type`` (a :class:`DualPass`); returns ``(hinge, gaps)``. On several threads the
    examples are split into runs of consecutive examples of about equal token counts, one
    per thread, each run's pass with its own workspace (:meth:`DualPass.own_workspace`):
    every example's terms are computed as on one thread, so the arrays do not depend on the
    number of threads."""
    cdef DualPass first = pass_type(state)
    cdef intp_t n = first.offsets.shape[0] - 1
    hinge = np.zeros(n)
    gaps = np.zeros(n)
    chunks = split_into_chunks(np.asarray(first.offsets), n_threads)
    if len(chunks) == 1:
        _certify_run(first, 0, n, hinge, gaps)
        return hinge, gaps
    passes = [first]
    for _ in range(1, len(chunks)):
        extra = pass_type(state)
        extra.own_workspace(state)
        passes.append(extra)
    with ThreadPoolExecutor(len(chunks)) as threads:
        runs = [threads.submit(_certify_run, p, lo, hi, hinge, gaps)
                for p, (lo, hi) in zip(passes, chunks)]
        for run in runs:
            run.result()
    return hinge, gaps


def _certify_run(DualPass p, intp_t first, intp_t last, float64_t[::1] hinge,
                 float64_t[::1] gaps):
    """The terms of :func:`certify_examples` for examples ``first .. last - 1``."""
    cdef intp_t i, since_check = 0
    with nogil:
        for i in range(first, last):
            check_signals_every(&since_check, p.offsets[i + 1] - p.offsets[i], SIGNAL_CHECK_TOKENS)
            p.gap_and_hinge(i, &gaps[i], &hinge[i])
