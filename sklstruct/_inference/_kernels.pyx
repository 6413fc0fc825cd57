"""Per-example kernels of the structures, for the compiled per-example passes.

An :class:`ExampleKernels` object is made by a bound structure for one batch
(``structure.example_kernels(batch)``). For example ``i`` of the batch it gives

- ``max_oracle``: the margin-rescaled most violating labelling, i.e. the argmax over labellings
  of ``sum_t (scores[t, y_t] + token_loss[t, y_t]) + theta . pairwise(y)``, from token scores,
  the per-token loss matrix and the pairwise parameters ``theta`` (the structure's pairwise
  block of ``w``);
- ``max_oracle_candidate``: a labelling for a learner's step, the most violating one or one
  within rounding of it (``max_oracle`` unless the structure has a cheaper decoder: chains of
  at least ``CANDIDATE_MIN_STATES`` states decode in single precision); the learners'
  certificates call ``max_oracle``;
- ``pairwise_entries``: the pairwise statistics of a labelling as sparse entries
  ``(index, value)`` into the pairwise block (an index may repeat; values add up);
- ``marginals`` (when ``has_marginals``): node marginals, the expected pairwise statistics
  (dense) and the log-partition of ``p(y) ∝ exp(sum_t node_pot[t, y_t] + pair_pot . pairwise(y))``.

Pointers are to the example's first token row (``scores``, ``token_loss``, ``node_pot``,
``node_marg`` are (length, n_states) row-major) or to its labels. The objects own their
workspace, so one object serves one thread at a time. The ``*_example`` methods are the same
kernels for Python callers (tests compare them with the structures' batched oracles).
"""

import numpy as np

from libc.math cimport exp, fabs, log
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct._inference._chain cimport (_exp_transitions, _forward_backward,
                                          _viterbi_candidate, _viterbi_sequence)
from sklstruct._inference._mincut cimport grid_image_cut, mincut_arcs, mincut_int_work
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t


# chains of at least this many states take single-precision candidate labellings (on fewer,
# rounding the scores and transitions to floats costs about what the narrower vectors save:
# on CoNLL-2000's 23 chunk states a visit took the same time) where the summed magnitudes
# of the augmented scores and the pairwise parameters, times the length, lie between these
# bounds (far from the floats' overflow and underflow) or are zero
cdef intp_t CANDIDATE_MIN_STATES = 32
CANDIDATE_STATES = CANDIDATE_MIN_STATES  # (for Python callers)
cdef double CANDIDATE_MIN_MAGNITUDE = 1e-30
cdef double CANDIDATE_MAX_MAGNITUDE = 1e30


cdef inline double _to_floats(const double* a, const double* b, intp_t n,
                              float* out) noexcept nogil:
    """``out = a + b`` (``b`` NULL: ``a``) rounded to floats; returns the summed magnitudes
    of the doubles (four partial sums: independent additions pipeline)."""
    cdef intp_t k = 0
    cdef double x0, x1, x2, x3, s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    while k + 4 <= n:
        x0 = a[k] + (b[k] if b != NULL else 0.0)
        x1 = a[k + 1] + (b[k + 1] if b != NULL else 0.0)
        x2 = a[k + 2] + (b[k + 2] if b != NULL else 0.0)
        x3 = a[k + 3] + (b[k + 3] if b != NULL else 0.0)
        out[k] = <float> x0
        out[k + 1] = <float> x1
        out[k + 2] = <float> x2
        out[k + 3] = <float> x3
        s0 += fabs(x0)
        s1 += fabs(x1)
        s2 += fabs(x2)
        s3 += fabs(x3)
        k += 4
    while k < n:
        x0 = a[k] + (b[k] if b != NULL else 0.0)
        out[k] = <float> x0
        s0 += fabs(x0)
        k += 1
    return (s0 + s1) + (s2 + s3)


cdef class ExampleKernels:
    """Base class: a structure's per-example oracles over one batch (see the module doc)."""

    def __init__(self, offsets, n_states, n_pairwise, max_pairwise_entries, has_marginals):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or self.offsets.shape[0] < 2 or self.offsets[0] != 0 \
                or np.any(np.diff(self.offsets) < 1):
            raise ValueError("offsets must start at 0 and list non-empty examples.")
        cdef const int64_t[::1] view = self.offsets
        self._offsets = &view[0]
        self.n_states = n_states
        self.n_pairwise = n_pairwise
        self.max_pairwise_entries = max_pairwise_entries
        self.has_marginals = has_marginals

    @property
    def n_examples(self):
        return self.offsets.shape[0] - 1

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        pass

    cdef void max_oracle_candidate(self, intp_t i, const double* scores,
                                   const double* token_loss, const double* theta,
                                   int64_t* labels) noexcept nogil:
        self.max_oracle(i, scores, token_loss, theta, labels)

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        return 0

    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil:
        return 0.0

    # ------------------------------------------------------------------ Python access
    def _example(self, i):
        if not 0 <= i < self.n_examples:
            raise IndexError(f"example {i} is not in the batch ({self.n_examples} examples).")
        return self.offsets[i], self.offsets[i + 1] - self.offsets[i]

    def max_oracle_example(self, intp_t i, scores, token_loss, theta, bint candidate=False):
        """Labels of ``max_oracle`` (``max_oracle_candidate`` with ``candidate``) for example
        ``i`` (arrays of that example's rows)."""
        lo, length = self._example(i)
        cdef const float64_t[:, ::1] s = np.ascontiguousarray(scores, dtype=np.float64)
        cdef const float64_t[:, ::1] loss = np.ascontiguousarray(token_loss, dtype=np.float64)
        cdef const float64_t[::1] th = np.ascontiguousarray(theta, dtype=np.float64)
        if s.shape[0] != length or loss.shape[0] != length or s.shape[1] != self.n_states \
                or loss.shape[1] != self.n_states or th.shape[0] != self.n_pairwise:
            raise ValueError("arrays do not match the example.")
        labels = np.zeros(length, dtype=np.int64)
        cdef int64_t[::1] out = labels
        if candidate:
            self.max_oracle_candidate(i, &s[0, 0], &loss[0, 0],
                                      &th[0] if self.n_pairwise else NULL, &out[0])
        else:
            self.max_oracle(i, &s[0, 0], &loss[0, 0], &th[0] if self.n_pairwise else NULL,
                            &out[0])
        return labels

    def pairwise_statistics_example(self, intp_t i, labels):
        """Dense pairwise statistics of a labelling of example ``i``."""
        lo, length = self._example(i)
        cdef const int64_t[::1] lab = np.ascontiguousarray(labels, dtype=np.int64)
        if lab.shape[0] != length or np.any(np.asarray(lab) < 0) \
                or np.any(np.asarray(lab) >= self.n_states):
            raise ValueError("labels do not match the example.")
        index = np.zeros(max(self.max_pairwise_entries, 1), dtype=np.intp)
        value = np.zeros(max(self.max_pairwise_entries, 1))
        cdef intp_t[::1] idx = index
        cdef float64_t[::1] val = value
        cdef intp_t count = self.pairwise_entries(i, &lab[0], &idx[0], &val[0])
        return np.bincount(index[:count], weights=value[:count], minlength=self.n_pairwise)

    def marginals_example(self, intp_t i, node_pot, pair_pot):
        """``(node_marginals, pairwise_marginals, log_partition)`` of example ``i``."""
        if not self.has_marginals:
            raise NotImplementedError("these kernels have no marginal oracle.")
        lo, length = self._example(i)
        cdef const float64_t[:, ::1] pot = np.ascontiguousarray(node_pot, dtype=np.float64)
        cdef const float64_t[::1] pair = np.ascontiguousarray(pair_pot, dtype=np.float64)
        if pot.shape[0] != length or pot.shape[1] != self.n_states \
                or pair.shape[0] != self.n_pairwise:
            raise ValueError("arrays do not match the example.")
        node = np.zeros((length, self.n_states))
        pairwise = np.zeros(max(self.n_pairwise, 1))
        cdef float64_t[:, ::1] node_view = node
        cdef float64_t[::1] pair_view = pairwise
        log_z = self.marginals(i, &pot[0, 0], &pair[0] if self.n_pairwise else NULL,
                               &node_view[0, 0], &pair_view[0])
        return node, pairwise[:self.n_pairwise], log_z


cdef class ChainKernels(ExampleKernels):
    """First-order chains: pairwise block ``[transitions (S*S, row-major a * S + b),
    start (S), end (S)]``, each part present or not.

    Viterbi for the max-oracle, forward-backward (scaled, or log-domain for wide potentials)
    for the marginals. Without transitions (:class:`~sklstruct.structures.MultiClass`) the
    tokens are independent: a best state and a softmax per token, in O(S) memory and time
    per token (the tables of ``S * S`` transitions are neither kept nor read).
    """

    def __cinit__(self, *args, **kwargs):
        self._work = NULL
        self._work32 = NULL
        self._backpointer = NULL

    def __init__(self, offsets, intp_t n_states, bint has_transition, bint has_start_end):
        cdef intp_t S = n_states
        cdef intp_t P = (S * S if has_transition else 0) + (2 * S if has_start_end else 0)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        max_length = int(lengths.max()) if lengths.size else 1
        entries = (max_length - 1 if has_transition else 0) + (2 if has_start_end else 0)
        super().__init__(offsets, S, P, entries, True)
        self.has_transition = has_transition
        self.has_start_end = has_start_end
        self._max_length = max_length
        self._n_transition = S * S if has_transition else 0
        # augmented scores, zeros, delta; FB tables and buffers
        self._work = <double*> malloc(self._work_size() * sizeof(double))
        self._backpointer = <int32_t*> malloc(max_length * S * sizeof(int32_t))
        # single-precision augmented scores (L S), transitions (S S), start, end, delta (4 S)
        self._work32 = <float*> malloc((max_length * S + self._n_transition + 4 * S)
                                       * sizeof(float))
        if self._work == NULL or self._backpointer == NULL or self._work32 == NULL:
            raise MemoryError("could not allocate the chain kernels' workspace")
        memset(self._work, 0, self._work_size() * sizeof(double))

    cdef intp_t _work_size(self):
        # augmented scores (L S), zeros (2 S), delta (2 S); with transitions
        # forward-backward tables (3 S + 4 S S) and buffers (4 L S + 2 L)
        cdef intp_t S = self.n_states, L = self._max_length
        if not self.has_transition:
            return L * S + 4 * S
        return L * S + 2 * S + 2 * S + (3 * S + 4 * S * S) + (4 * L * S + 2 * L)

    def __dealloc__(self):
        free(self._work)
        free(self._work32)
        free(self._backpointer)

    cdef const double* _part(self, const double* theta, intp_t which) noexcept nogil:
        """Transitions (0; NULL when absent), start (1) or end (2) of ``theta``, or zeros
        when absent."""
        cdef intp_t S = self.n_states
        cdef const double* zeros = self._work + self._max_length * S
        if which == 0:
            return theta if self.has_transition else NULL
        if not self.has_start_end:
            return zeros
        return theta + self._n_transition + (which - 1) * S

    cdef void _best_states(self, intp_t length, const double* scores,
                           const double* token_loss, const double* theta,
                           int64_t* labels) noexcept nogil:
        """The max-oracle without transitions: the best state of every token (start and
        end scores added at the first and last token, in Viterbi's order of sums; ties to
        the lower state, as Viterbi)."""
        cdef intp_t S = self.n_states, t, b, best_state
        cdef const double* start = self._part(theta, 1)
        cdef const double* end = self._part(theta, 2)
        cdef double v, best = 0.0
        for t in range(length):
            best_state = 0
            for b in range(S):
                v = scores[t * S + b] + token_loss[t * S + b]
                if t == 0:
                    v = start[b] + v
                if t == length - 1:
                    v = v + end[b]
                if b == 0 or v > best:
                    best = v
                    best_state = b
            labels[t] = best_state

    cdef double _softmax_marginals(self, intp_t length, const double* node_pot,
                                   const double* pair_pot, double* node_marg) noexcept nogil:
        """The marginals without transitions: a softmax per token (start and end scores
        added at the first and last token); returns the log-partition function."""
        cdef intp_t S = self.n_states, t, b
        cdef const double* start = self._part(pair_pot, 1)
        cdef const double* end = self._part(pair_pot, 2)
        cdef double peak, total, log_z = 0.0
        cdef double* row
        for t in range(length):
            row = node_marg + t * S
            for b in range(S):
                row[b] = node_pot[t * S + b]
                if t == 0:
                    row[b] = start[b] + row[b]
                if t == length - 1:
                    row[b] = row[b] + end[b]
            peak = row[0]
            for b in range(1, S):
                if row[b] > peak:
                    peak = row[b]
            total = 0.0
            for b in range(S):
                row[b] = exp(row[b] - peak)
                total += row[b]
            for b in range(S):
                row[b] /= total
            log_z += peak + log(total)
        return log_z

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t S = self.n_states, length = self._offsets[i + 1] - self._offsets[i]
        cdef intp_t t
        cdef double* augmented = self._work
        cdef double* delta = augmented + self._max_length * S + 2 * S
        if not self.has_transition:
            self._best_states(length, scores, token_loss, theta, labels)
            return
        for t in range(length * S):
            augmented[t] = scores[t] + token_loss[t]
        _viterbi_sequence(augmented, length, S, self._part(theta, 0), self._part(theta, 1),
                          self._part(theta, 2), delta, delta + S, self._backpointer, labels)

    cdef void max_oracle_candidate(self, intp_t i, const double* scores,
                                   const double* token_loss, const double* theta,
                                   int64_t* labels) noexcept nogil:
        """Viterbi in single precision on the augmented scores rounded to floats (from
        ``CANDIDATE_MIN_STATES`` states on, between ``CANDIDATE_MIN_MAGNITUDE`` and
        ``CANDIDATE_MAX_MAGNITUDE``; else :meth:`max_oracle`): twice the states per vector
        register. Its labelling's score is within the rounding of the float sums of the
        best."""
        cdef intp_t S = self.n_states, length = self._offsets[i + 1] - self._offsets[i]
        cdef double total
        cdef float* augmented = self._work32
        cdef float* transition = augmented + self._max_length * S
        cdef float* start = transition + S * S
        cdef float* end = start + S
        cdef float* delta = end + S
        if S < CANDIDATE_MIN_STATES or not self.has_transition:  # (no transitions: O(L S))
            self.max_oracle(i, scores, token_loss, theta, labels)
            return
        total = (_to_floats(scores, token_loss, length * S, augmented)
                 + _to_floats(self._part(theta, 0), NULL, S * S, transition)
                 + _to_floats(self._part(theta, 1), NULL, S, start)
                 + _to_floats(self._part(theta, 2), NULL, S, end)) * length
        if not (total <= CANDIDATE_MAX_MAGNITUDE  # (also a NaN)
                and (total >= CANDIDATE_MIN_MAGNITUDE or total == 0.0)):
            self.max_oracle(i, scores, token_loss, theta, labels)
            return
        _viterbi_candidate(augmented, length, S, transition, start, end, delta, delta + S,
                           self._backpointer, labels)

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        cdef intp_t S = self.n_states, length = self._offsets[i + 1] - self._offsets[i]
        cdef intp_t t, count = 0, shift = S * S if self.has_transition else 0
        if self.has_transition:
            for t in range(1, length):
                index[count] = labels[t - 1] * S + labels[t]
                value[count] = 1.0
                count += 1
        if self.has_start_end:
            index[count] = shift + labels[0]
            index[count + 1] = shift + S + labels[length - 1]
            value[count] = 1.0
            value[count + 1] = 1.0
            count += 2
        return count

    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil:
        cdef intp_t S = self.n_states, L = self._max_length
        cdef intp_t length = self._offsets[i + 1] - self._offsets[i], r
        cdef intp_t shift = self._n_transition
        cdef double* tables = self._work + L * S + 2 * S + 2 * S
        cdef double* buffers = tables + 3 * S + 4 * S * S
        cdef double log_z = 0.0, peak, spread
        cdef bint log_tables_ready = False
        cdef const double* transition = self._part(pair_pot, 0)
        for r in range(self.n_pairwise):
            pair_marg[r] = 0.0
        if not self.has_transition:
            log_z = self._softmax_marginals(length, node_pot, pair_pot, node_marg)
        else:  # (the edge sums go straight into pair_marg's transition block)
            spread = _exp_transitions(transition, S, tables + 3 * S + 2 * S * S,
                                      tables + 3 * S + 3 * S * S, &peak)
            _forward_backward(node_pot, length, S, transition, self._part(pair_pot, 1),
                              self._part(pair_pot, 2), tables, peak, spread,
                              &log_tables_ready, buffers, L, node_marg, pair_marg, &log_z)
        if self.has_start_end:
            for r in range(S):
                pair_marg[shift + r] = node_marg[r]
                pair_marg[shift + S + r] = node_marg[(length - 1) * S + r]
        return log_z


cdef class GridKernels(ExampleKernels):
    """Binary 4-connected grids (images stored row by row, ``widths[i]`` pixels per row).

    Pairwise block: ``k`` weights of the right-neighbour edge features, then ``k`` of the
    down-neighbour ones; a labelling's statistic is minus the edge features summed over the
    edges it cuts. The max-oracle is a minimum cut (``theta`` must be non-negative; a
    negative disagreement cost counts as 0). No marginals.
    """

    def __cinit__(self, *args, **kwargs):
        self._work = NULL
        self._int_work = NULL

    def __init__(self, offsets, widths, right_features, down_features):
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.widths = np.ascontiguousarray(widths, dtype=np.int64)
        self.right_features = np.ascontiguousarray(right_features, dtype=np.float64)
        self.down_features = np.ascontiguousarray(down_features, dtype=np.float64)
        k = self.right_features.shape[1]
        n_tokens = int(offsets[-1]) if offsets.size else 0
        if self.widths.shape != (offsets.shape[0] - 1,) or np.any(self.widths < 1):
            raise ValueError("widths must hold one positive width per image.")
        if self.right_features.shape != (n_tokens, k) or self.down_features.shape != (n_tokens, k):
            raise ValueError("edge features must have one row per pixel.")
        super().__init__(offsets, 2, 2 * k, 2 * k, False)
        self._k = k
        cdef const int64_t[::1] w = self.widths
        cdef const float64_t[:, ::1] right = self.right_features
        cdef const float64_t[:, ::1] down = self.down_features
        self._widths = &w[0]
        self._right = &right[0, 0] if n_tokens and k else NULL
        self._down = &down[0, 0] if n_tokens and k else NULL
        max_n = int(np.diff(offsets).max())
        self._work = <double*> malloc((4 * max_n + mincut_arcs(max_n)) * sizeof(double))
        self._int_work = <intp_t*> malloc(mincut_int_work(max_n) * sizeof(intp_t))
        if self._work == NULL or self._int_work == NULL:
            raise MemoryError("could not allocate the grid kernels' workspace")

    def __dealloc__(self):
        free(self._work)
        free(self._int_work)

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t lo = self._offsets[i], n = self._offsets[i + 1] - lo, t, f, k = self._k
        cdef double* unary = self._work
        cdef double* right_cost = unary + 2 * n
        cdef double* down_cost = right_cost + n
        cdef double* cap = down_cost + n
        cdef double right, down
        for t in range(2 * n):
            unary[t] = scores[t] + token_loss[t]
        for t in range(n):
            right = 0.0
            down = 0.0
            for f in range(k):
                right += self._right[(lo + t) * k + f] * theta[f]
                down += self._down[(lo + t) * k + f] * theta[k + f]
            right_cost[t] = right
            down_cost[t] = down
        grid_image_cut(unary, n, self._widths[i], right_cost, down_cost, labels,
                       self._int_work, cap)

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        cdef intp_t lo = self._offsets[i], n = self._offsets[i + 1] - lo, t, f, k = self._k
        cdef intp_t width = self._widths[i]
        for f in range(2 * k):
            index[f] = f
            value[f] = 0.0
        for t in range(n):
            if t % width + 1 < width and labels[t] != labels[t + 1]:
                for f in range(k):
                    value[f] -= self._right[(lo + t) * k + f]
            if t + width < n and labels[t] != labels[t + width]:
                for f in range(k):
                    value[k + f] -= self._down[(lo + t) * k + f]
        return 2 * k
