"""Compiled per-example passes of restricted simplicial decomposition (Yu and Rousu 2007).

Example ``i``'s dual variables are a distribution over its labellings, kept as sufficient
statistics (:class:`sklstruct.learners._factored_dual.FactoredDualState`): node marginals (rows
of ``node_marg``), expected pairwise statistics ``pair_marg[i]`` and the expected loss. The
weights are ``v = C sum_i (Psi(x_i, y_i) - E_i[Psi])``; ``W^T`` (the unary block) and
``pair_v`` (the pairwise block) are kept explicitly, and the model's weights ``w`` equal ``v``
except on pairwise coordinates constrained to be non-negative, where ``w = [v]_+`` (the
reduced dual of the paper's problem (15): ``D = sum_i gamma_i - 1/2 ||w||^2``).

Everything about the structure comes from its compiled kernels (``state.kernels``, see
:mod:`sklstruct._inference._kernels`): the most violating labelling of an example from token
scores, the per-token loss matrix and the pairwise weights, and the pairwise statistics of a
labelling as sparse entries.

:func:`frank_wolfe_pass` (dimension limit 1): visiting example ``i``, the max-oracle at the
current ``w`` gives the vertex ``ybar``; with ``d = C (Psi(ybar) - E_i[Psi])`` the block's
Frank-Wolfe gap is ``g = C (Delta(ybar) - E_i[Delta]) + w . d``, and the exact line search
over ``(1 - gamma) alpha_i + gamma delta_ybar`` (piecewise quadratic where weights are
clipped at zero) moves the statistics and ``v`` (only the rows of ``W^T`` of the example's
features).

:func:`multi_point_pass` (dimension limit ``r``): the example also keeps at most ``r``
labellings (``vertex_labels[t, k]``) with their losses, an anchor ``a`` (a past point: node
measures ``anchor_node``, pairwise statistics and loss) and weights ``mu_k`` with
``x = (1 - sum_k mu_k) a + sum_k mu_k z_k``. A visit adds the oracle's labelling (when full, the
lowest-weight one is dropped and ``x`` becomes the anchor: the paper's footnote 1) and solves
the master problem over the convex hull of the anchor and the labellings, a QP in ``mu`` whose
Gram matrix comes either from the example's token Gram matrix (``length^2`` entries, cheap for
short sequences with many features) or from the points' unary statistics on the example's
features (``(r + 1) x n_touched x n_states``, cheap for long sequences with few features); the
cheaper is chosen per example, and the token Gram matrix never beyond ``TOKEN_GRAM_CAP`` entries.
With constrained coordinates the master is solved by active-set rounds on the sign pattern of
``v`` on them (exact when the pattern settles; otherwise the best tried point that ascends).

Both passes check for Ctrl-C every few thousand tokens (KeyboardInterrupt; the state is then
consistent up to the examples visited).
"""

import numpy as np

from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport fabs
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._solvers._smo cimport smo_capped_simplices
from sklstruct._typedefs cimport float64_t, int8_t, int32_t, int64_t, intp_t, uint8_t
from sklstruct.learners._example_rows cimport (dot, sequence_sizes, signal_check_due,
                                               token_scores)

cdef enum:
    # largest token Gram matrix (entries) the multi-point pass forms for one example
    TOKEN_GRAM_CAP = 4194304
    MAX_POINTS = 63


cdef double _line_search(double gap, double norm_sq, const double* d_k, const double* v_k,
                         intp_t n_k) noexcept nogil:
    """Maximiser over ``[0, 1]`` of ``f(gamma)``, the dual along a Frank-Wolfe direction.

    ``f'(gamma) = a - gamma b + sum_k d_k [v_k - gamma d_k]_+`` with the constrained
    coordinates ``k`` (``d`` the direction, ``v`` the unclipped weights); ``f'(0) = gap`` and
    ``norm_sq = ||d||^2``. ``f'`` is piecewise linear and non-increasing, with breakpoints
    ``v_k / d_k``.
    """
    cdef intp_t k, j, n_breaks = 0
    cdef double a, b, lo, hi, f_lo, f_hi, x
    cdef double breaks[66]
    if gap <= 0.0 or norm_sq <= 0.0:
        return 0.0
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


cdef class _Pass:
    """The arrays of a dual state as typed views, and the per-example steps of the passes."""
    cdef const int64_t[::1] indptr, offsets
    cdef const int32_t[::1] indices
    cdef const float64_t[::1] data
    cdef const float64_t[:, ::1] token_loss
    cdef float64_t[:, ::1] node_marg, pair_marg, WT, scratch
    cdef float64_t[::1] expected_loss, pair_v, theta, block_gap
    cdef int8_t[::1] marker
    cdef intp_t[::1] constrained
    cdef uint8_t[::1] free_mask
    cdef ExampleKernels kernels
    cdef double C
    cdef intp_t S, P, n_k, max_len, max_nnz
    # multi-point state
    cdef int32_t[:, ::1] vertex_labels
    cdef float64_t[:, ::1] vertex_loss, vertex_weight, anchor_node, anchor_pair
    cdef int64_t[::1] n_vertices
    cdef float64_t[::1] anchor_loss, feature_buffer
    cdef int32_t[::1] feature_slot
    cdef intp_t r

    def __init__(self, state, bint multi_point):
        cdef intp_t max_len, max_nnz
        self.indptr, self.indices, self.data = state.batch.csr_arrays
        self.offsets = state.batch.offsets
        self.token_loss = state.token_loss
        self.node_marg = state.node_marg
        self.pair_marg = state.pair_marg
        self.expected_loss = state.expected_loss
        self.WT = state.WT
        self.pair_v = state.pair_v
        self.theta = state.theta
        self.scratch = state.scratch
        self.marker = state.marker
        self.block_gap = state.block_gap
        self.constrained = state.constrained
        self.kernels = state.kernels
        self.C = state.C
        self.S = self.node_marg.shape[1]
        self.P = self.pair_marg.shape[1]
        self.n_k = self.constrained.shape[0]
        if self.kernels.n_pairwise != self.P or self.kernels.n_states != self.S:
            raise ValueError("the structure's kernels do not match the dual state.")
        if self.n_k > 64:
            raise ValueError("the compiled passes keep at most 64 constrained weights.")
        mask = np.ones(self.P, dtype=np.uint8)
        mask[np.asarray(self.constrained)] = 0
        self.free_mask = mask
        sequence_sizes(&self.indptr[0], &self.offsets[0], self.offsets.shape[0] - 1,
                       &max_len, &max_nnz)
        self.max_len = max_len
        self.max_nnz = max_nnz
        if multi_point:
            self.vertex_labels = state.vertex_labels
            self.vertex_loss = state.vertex_loss
            self.vertex_weight = state.vertex_weight
            self.n_vertices = state.n_vertices
            self.anchor_node = state.anchor_node
            self.anchor_pair = state.anchor_pair
            self.anchor_loss = state.anchor_loss
            self.feature_buffer = state.feature_buffer
            self.feature_slot = state.feature_slot
            self.r = self.vertex_labels.shape[1]
            if not 1 <= self.r <= MAX_POINTS:
                raise ValueError(f"the compiled pass keeps 1 to {MAX_POINTS} points per "
                                 "example.")

    cdef inline const int32_t* indices_ptr(self) noexcept nogil:
        return &self.indices[0] if self.indices.shape[0] > 0 else NULL

    cdef inline const double* data_ptr(self) noexcept nogil:
        return &self.data[0] if self.data.shape[0] > 0 else NULL

    cdef inline const double* WT_ptr(self) noexcept nogil:
        return &self.WT[0, 0] if self.WT.shape[0] > 0 else NULL

    cdef inline const double* theta_ptr(self) noexcept nogil:
        return &self.theta[0] if self.P > 0 else NULL

    cdef inline void clip(self) noexcept nogil:
        """``theta = pair_v`` with the constrained coordinates clipped at zero."""
        cdef intp_t r
        for r in range(self.P):
            self.theta[r] = self.pair_v[r]
        for r in range(self.n_k):
            if self.pair_v[self.constrained[r]] < 0.0:
                self.theta[self.constrained[r]] = 0.0

    cdef void unary_gram_tokens(self, intp_t lo, intp_t length, intp_t m, double* K,
                                double* G) noexcept nogil:
        """``G[p, l] = C^2 <X^T (A - Z_p), X^T (A - Z_l)>`` from the token Gram matrix ``K``
        of the example (``A`` the anchor's node measures, ``Z_p`` one-hot point labels)."""
        cdef intp_t t, t2, s, pt, l
        cdef int64_t q
        cdef double kval, mm = 0.0, total, C2 = self.C * self.C
        cdef double mv[MAX_POINTS]
        for t in range(length):
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                self.feature_buffer[self.indices[q]] += self.data[q]
            for t2 in range(t, length):
                kval = 0.0
                for q in range(self.indptr[lo + t2], self.indptr[lo + t2 + 1]):
                    kval += self.data[q] * self.feature_buffer[self.indices[q]]
                K[t * length + t2] = kval
                K[t2 * length + t] = kval
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                self.feature_buffer[self.indices[q]] = 0.0
        for t in range(length):
            for t2 in range(length):
                mm += K[t * length + t2] * dot(&self.anchor_node[lo + t, 0],
                                               &self.anchor_node[lo + t2, 0], self.S)
        for pt in range(m):
            total = 0.0
            for t in range(length):
                for t2 in range(length):
                    total += K[t * length + t2] * \
                        self.anchor_node[lo + t, self.vertex_labels[lo + t2, pt]]
            mv[pt] = total
        for pt in range(m):
            for l in range(pt, m):
                total = 0.0
                for t in range(length):
                    for t2 in range(length):
                        if self.vertex_labels[lo + t, pt] == self.vertex_labels[lo + t2, l]:
                            total += K[t * length + t2]
                G[pt * m + l] = C2 * (mm - mv[pt] - mv[l] + total)
                G[l * m + pt] = G[pt * m + l]

    cdef void unary_gram_features(self, intp_t lo, intp_t length, intp_t m,
                                  const int32_t* touched, intp_t n_touched, double* stats,
                                  double* G) noexcept nogil:
        """The same Gram matrix from the unary statistics ``X^T (A - Z_p)`` restricted to
        the example's features (``stats`` holds ``m`` blocks of n_touched x n_states)."""
        cdef intp_t S = self.S, block = n_touched * S, k, t, s, pt, l, row
        cdef int64_t q
        cdef double x, C2 = self.C * self.C
        for k in range(n_touched):
            self.feature_slot[touched[k]] = <int32_t> k
        for k in range(m * block):
            stats[k] = 0.0
        for t in range(length):
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                row = self.feature_slot[self.indices[q]] * S
                x = self.data[q]
                for pt in range(m):
                    for s in range(S):
                        stats[pt * block + row + s] += x * self.anchor_node[lo + t, s]
                    stats[pt * block + row + self.vertex_labels[lo + t, pt]] -= x
        for k in range(n_touched):
            self.feature_slot[touched[k]] = -1
        for pt in range(m):
            for l in range(pt, m):
                G[pt * m + l] = C2 * dot(stats + pt * block, stats + l * block, block)
                G[l * m + pt] = G[pt * m + l]


def frank_wolfe_pass(state, const int64_t[::1] order):
    """Visit the examples of ``order`` in turn (block-coordinate Frank-Wolfe with exact line
    search); return the sum of their Frank-Wolfe gaps. ``state.block_gap[i]`` receives
    example ``i``'s gap at its (last) visit."""
    cdef _Pass p = _Pass(state, False)
    cdef intp_t S = p.S, P = p.P, n_k = p.n_k
    cdef intp_t i, k, k2, t, s, r, lo, length, n_touched, n_entries, since_check = 0
    cdef int64_t q
    cdef int32_t j
    cdef double v, loss_bar, gain, norm, gamma, dp, C = p.C
    cdef double total_gap = 0.0
    cdef double d_k[64]
    cdef double v_k[64]
    cdef double* scores = NULL
    cdef double* vertex_pair = NULL
    cdef double* entry_value = NULL
    cdef intp_t* entry_index = NULL
    cdef int64_t* labels = NULL
    cdef int32_t* touched = NULL
    try:
        scores = <double*> malloc(p.max_len * S * sizeof(double))
        vertex_pair = <double*> malloc((P + 1) * sizeof(double))
        entry_value = <double*> malloc((p.kernels.max_pairwise_entries + 1) * sizeof(double))
        entry_index = <intp_t*> malloc((p.kernels.max_pairwise_entries + 1) * sizeof(intp_t))
        labels = <int64_t*> malloc(p.max_len * sizeof(int64_t))
        touched = <int32_t*> malloc(p.max_nnz * sizeof(int32_t))
        if (scores == NULL or vertex_pair == NULL or entry_value == NULL
                or entry_index == NULL or labels == NULL or touched == NULL):
            raise MemoryError("could not allocate the Frank-Wolfe workspace")
        with nogil:
            for k in range(order.shape[0]):
                i = order[k]
                lo = p.offsets[i]
                length = p.offsets[i + 1] - lo
                if signal_check_due(&since_check, length):
                    with gil:
                        PyErr_CheckSignals()
                n_touched = token_scores(&p.indptr[0], p.indices_ptr(), p.data_ptr(),
                                         p.WT_ptr(), S, lo, length, scores, &p.marker[0],
                                         touched)
                p.kernels.max_oracle(i, scores, &p.token_loss[lo, 0], p.theta_ptr(), labels)
                for r in range(P):
                    vertex_pair[r] = 0.0
                n_entries = p.kernels.pairwise_entries(i, labels, entry_index, entry_value)
                for r in range(n_entries):
                    vertex_pair[entry_index[r]] += entry_value[r]
                loss_bar = 0.0
                for t in range(length):
                    loss_bar += p.token_loss[lo + t, labels[t]]
                # Frank-Wolfe gap g = C (Delta(ybar) - E[Delta]) + w . d and ||d||^2
                gain = loss_bar - p.expected_loss[i]
                for t in range(length):
                    gain += scores[t * S + labels[t]]
                    gain -= dot(scores + t * S, &p.node_marg[lo + t, 0], S)
                    for q in range(p.indptr[lo + t], p.indptr[lo + t + 1]):
                        j = p.indices[q]
                        v = C * p.data[q]
                        for s in range(S):
                            p.scratch[j, s] -= v * p.node_marg[lo + t, s]
                        p.scratch[j, labels[t]] += v
                norm = 0.0
                for r in range(P):
                    dp = vertex_pair[r] - p.pair_marg[i, r]
                    gain += p.theta[r] * dp
                    norm += dp * dp
                gain *= C
                norm *= C * C
                for k2 in range(n_touched):
                    j = touched[k2]
                    norm += dot(&p.scratch[j, 0], &p.scratch[j, 0], S)
                p.block_gap[i] = gain
                if gain > 0.0:
                    total_gap += gain
                for r in range(n_k):
                    d_k[r] = C * (vertex_pair[p.constrained[r]]
                                  - p.pair_marg[i, p.constrained[r]])
                    v_k[r] = p.pair_v[p.constrained[r]]
                gamma = _line_search(gain, norm, d_k, v_k, n_k)
                for k2 in range(n_touched):
                    j = touched[k2]
                    if gamma > 0.0:
                        for s in range(S):
                            p.WT[j, s] -= gamma * p.scratch[j, s]
                    memset(&p.scratch[j, 0], 0, S * sizeof(double))
                    p.marker[j] = 0
                if gamma > 0.0:
                    for r in range(P):
                        dp = vertex_pair[r] - p.pair_marg[i, r]
                        p.pair_v[r] -= gamma * C * dp
                        p.pair_marg[i, r] += gamma * dp
                    p.clip()
                    for t in range(length):
                        for s in range(S):
                            p.node_marg[lo + t, s] *= 1.0 - gamma
                        p.node_marg[lo + t, labels[t]] += gamma
                    p.expected_loss[i] += gamma * (loss_bar - p.expected_loss[i])
    finally:
        free(scores)
        free(vertex_pair)
        free(entry_value)
        free(entry_index)
        free(labels)
        free(touched)
    return total_gap


def multi_point_pass(state, const int64_t[::1] order):
    """Visit the examples of ``order`` in turn (restricted simplicial decomposition with one
    simplex per example); return the sum of their Frank-Wolfe gaps."""
    cdef _Pass p = _Pass(state, True)
    cdef intp_t S = p.S, P = p.P, n_k = p.n_k, r_max = p.r
    cdef intp_t stride = p.kernels.max_pairwise_entries + 1
    cdef intp_t n_feature_rows = min(p.max_nnz, p.WT.shape[0])
    cdef intp_t gram_cap = min(p.max_len * p.max_len, TOKEN_GRAM_CAP)
    cdef intp_t i, k, k2, l, t, s, q2, lo, length, n_touched, m, slot, pt, e, nnz_i, kk
    cdef intp_t since_check = 0, n_steps, round_
    cdef int64_t q
    cdef int32_t j
    cdef double v, loss_bar, total, mass, gap, anchor_score, slack, C = p.C
    cdef double token_cost, feature_cost, best_change, change, anchor_free_sq
    cdef double total_gap = 0.0
    cdef bint duplicate, changed, settled
    cdef double G[MAX_POINTS * MAX_POINTS]
    cdef double G_round[MAX_POINTS * MAX_POINTS]
    cdef double base[MAX_POINTS]
    cdef double grad[MAX_POINTS]
    cdef double mu[MAX_POINTS]
    cdef double mu_old[MAX_POINTS]
    cdef double mu_best[MAX_POINTS]
    cdef double dmu[MAX_POINTS]
    cdef double vertex_score[MAX_POINTS]
    cdef double anchor_dot[MAX_POINTS]
    cdef double D_k[MAX_POINTS * 64]
    cdef double v_new[64]
    cdef uint8_t clipped[64]
    cdef intp_t group_ptr[2]
    cdef double* scores = NULL
    cdef double* gram_tokens = NULL
    cdef double* unary_stats = NULL
    cdef double* pair_dense = NULL
    cdef double* entry_value = NULL
    cdef intp_t* entry_index = NULL
    cdef intp_t* entry_count = NULL
    cdef int64_t* labels = NULL
    cdef int64_t* point_labels = NULL
    cdef int32_t* touched = NULL
    group_ptr[0] = 0
    try:
        scores = <double*> malloc(p.max_len * S * sizeof(double))
        gram_tokens = <double*> malloc(gram_cap * sizeof(double))
        unary_stats = <double*> malloc(r_max * n_feature_rows * S * sizeof(double))
        pair_dense = <double*> malloc((P + 1) * sizeof(double))
        entry_value = <double*> malloc(r_max * stride * sizeof(double))
        entry_index = <intp_t*> malloc(r_max * stride * sizeof(intp_t))
        entry_count = <intp_t*> malloc(r_max * sizeof(intp_t))
        labels = <int64_t*> malloc(p.max_len * sizeof(int64_t))
        point_labels = <int64_t*> malloc(p.max_len * sizeof(int64_t))
        touched = <int32_t*> malloc(p.max_nnz * sizeof(int32_t))
        if (scores == NULL or gram_tokens == NULL or unary_stats == NULL or pair_dense == NULL
                or entry_value == NULL or entry_index == NULL or entry_count == NULL
                or labels == NULL or point_labels == NULL or touched == NULL):
            raise MemoryError("could not allocate the simplicial decomposition workspace")
        with nogil:
            for q2 in range(P):
                pair_dense[q2] = 0.0
            for k in range(order.shape[0]):
                i = order[k]
                lo = p.offsets[i]
                length = p.offsets[i + 1] - lo
                if signal_check_due(&since_check, length):
                    with gil:
                        PyErr_CheckSignals()
                n_touched = token_scores(&p.indptr[0], p.indices_ptr(), p.data_ptr(),
                                         p.WT_ptr(), S, lo, length, scores, &p.marker[0],
                                         touched)
                for k2 in range(n_touched):
                    p.marker[touched[k2]] = 0
                p.kernels.max_oracle(i, scores, &p.token_loss[lo, 0], p.theta_ptr(), labels)
                # the block's Frank-Wolfe gap at the current point x
                loss_bar = 0.0
                total = 0.0
                for t in range(length):
                    loss_bar += p.token_loss[lo + t, labels[t]]
                    total += scores[t * S + labels[t]]
                    total -= dot(scores + t * S, &p.node_marg[lo + t, 0], S)
                e = p.kernels.pairwise_entries(i, labels, entry_index, entry_value)
                for q2 in range(e):
                    total += p.theta[entry_index[q2]] * entry_value[q2]
                for q2 in range(P):
                    total -= p.theta[q2] * p.pair_marg[i, q2]
                gap = C * (loss_bar - p.expected_loss[i] + total)
                p.block_gap[i] = gap
                if gap > 0.0:
                    total_gap += gap
                # 1. add the new point unless the example keeps it already
                m = p.n_vertices[i]
                slot = -1
                for pt in range(m):
                    duplicate = True
                    for t in range(length):
                        if p.vertex_labels[lo + t, pt] != labels[t]:
                            duplicate = False
                            break
                    if duplicate:
                        slot = pt
                        break
                if slot < 0:
                    if m < r_max:
                        slot = m
                        m += 1
                        p.n_vertices[i] = m
                    else:  # footnote 1: drop the lowest weight, x becomes the anchor
                        slot = 0
                        for pt in range(1, m):
                            if p.vertex_weight[i, pt] < p.vertex_weight[i, slot]:
                                slot = pt
                        for t in range(length):
                            for s in range(S):
                                p.anchor_node[lo + t, s] = p.node_marg[lo + t, s]
                        for q2 in range(P):
                            p.anchor_pair[i, q2] = p.pair_marg[i, q2]
                        p.anchor_loss[i] = p.expected_loss[i]
                        for pt in range(m):
                            p.vertex_weight[i, pt] = 0.0
                    for t in range(length):
                        p.vertex_labels[lo + t, slot] = <int32_t> labels[t]
                    p.vertex_loss[i, slot] = loss_bar
                    p.vertex_weight[i, slot] = 0.0
                # the points' pairwise entries and scores, the anchor's score
                for pt in range(m):
                    for t in range(length):
                        point_labels[t] = p.vertex_labels[lo + t, pt]
                    entry_count[pt] = p.kernels.pairwise_entries(
                        i, point_labels, entry_index + pt * stride, entry_value + pt * stride)
                    total = 0.0
                    for t in range(length):
                        total += scores[t * S + point_labels[t]]
                    for e in range(entry_count[pt]):
                        total += p.theta[entry_index[pt * stride + e]] \
                            * entry_value[pt * stride + e]
                    vertex_score[pt] = total
                anchor_score = 0.0
                for t in range(length):
                    anchor_score += dot(scores + t * S, &p.anchor_node[lo + t, 0], S)
                for q2 in range(P):
                    anchor_score += p.theta[q2] * p.anchor_pair[i, q2]
                # 2. the Gram matrix of the directions d_k = C (E_a[Psi] - Psi(z_k)) over the
                # unconstrained coordinates; the constrained coordinates of d_k in D_k
                nnz_i = p.indptr[lo + length] - p.indptr[lo]
                token_cost = <double> length * nnz_i \
                    + <double> length * length * (m * m + m + S)
                feature_cost = <double> nnz_i * (m + 1) * S \
                    + <double> m * m * n_touched * S
                if <double> length * length <= gram_cap and token_cost <= feature_cost:
                    p.unary_gram_tokens(lo, length, m, gram_tokens, G)
                else:
                    p.unary_gram_features(lo, length, m, touched, n_touched, unary_stats, G)
                anchor_free_sq = 0.0
                for q2 in range(P):
                    if p.free_mask[q2]:
                        anchor_free_sq += p.anchor_pair[i, q2] * p.anchor_pair[i, q2]
                for pt in range(m):
                    anchor_dot[pt] = 0.0
                    for e in range(entry_count[pt]):
                        kk = entry_index[pt * stride + e]
                        if p.free_mask[kk]:
                            anchor_dot[pt] += p.anchor_pair[i, kk] * entry_value[pt * stride + e]
                for pt in range(m):
                    for e in range(entry_count[pt]):
                        pair_dense[entry_index[pt * stride + e]] += entry_value[pt * stride + e]
                    for q2 in range(n_k):
                        D_k[pt * 64 + q2] = C * (p.anchor_pair[i, p.constrained[q2]]
                                                 - pair_dense[p.constrained[q2]])
                    for l in range(pt, m):
                        total = anchor_free_sq - anchor_dot[pt] - anchor_dot[l]
                        for e in range(entry_count[l]):
                            kk = entry_index[l * stride + e]
                            if p.free_mask[kk]:
                                total += pair_dense[kk] * entry_value[l * stride + e]
                        G[pt * m + l] += C * C * total
                        if l != pt:
                            G[l * m + pt] = G[pt * m + l]
                    for e in range(entry_count[pt]):
                        pair_dense[entry_index[pt * stride + e]] = 0.0
                # 3. the master problem over mu; with constrained coordinates, active-set
                # rounds on their sign pattern (one round without constraints)
                for pt in range(m):
                    mu_old[pt] = p.vertex_weight[i, pt]
                    mu_best[pt] = mu_old[pt]
                    # C (loss_k - loss_a) - v_free . d_k = the gradient at the current w plus
                    # w_constrained . D_k
                    base[pt] = C * (p.vertex_loss[i, pt] - p.anchor_loss[i]
                                    + vertex_score[pt] - anchor_score)
                    for q2 in range(n_k):
                        if p.pair_v[p.constrained[q2]] > 0.0:
                            base[pt] += p.pair_v[p.constrained[q2]] * D_k[pt * 64 + q2]
                for q2 in range(n_k):
                    clipped[q2] = p.pair_v[p.constrained[q2]] < 0.0
                best_change = 0.0
                for round_ in range(16 if n_k else 1):
                    for pt in range(m):
                        grad[pt] = base[pt]
                        mu[pt] = mu_old[pt]
                        for l in range(m):
                            G_round[pt * m + l] = G[pt * m + l]
                        for q2 in range(n_k):
                            if not clipped[q2]:
                                grad[pt] -= p.pair_v[p.constrained[q2]] * D_k[pt * 64 + q2]
                                for l in range(m):
                                    G_round[pt * m + l] += D_k[pt * 64 + q2] * D_k[l * 64 + q2]
                    slack = 1.0
                    for pt in range(m):
                        slack -= mu[pt]
                    if slack < 0.0:
                        slack = 0.0
                    group_ptr[1] = m
                    smo_capped_simplices(G_round, m, grad, mu, group_ptr, 1, &slack,
                                         1e-6 * fabs(gap) + 1e-300, 20 * m + 20, &n_steps)
                    # the exact change of the dual and the new sign pattern
                    for pt in range(m):
                        dmu[pt] = mu[pt] - mu_old[pt]
                    change = 0.0
                    for pt in range(m):
                        change += dmu[pt] * base[pt]
                        for l in range(m):
                            change -= 0.5 * dmu[pt] * G[pt * m + l] * dmu[l]
                    settled = True
                    for q2 in range(n_k):
                        v = p.pair_v[p.constrained[q2]]
                        v_new[q2] = v
                        for pt in range(m):
                            v_new[q2] += dmu[pt] * D_k[pt * 64 + q2]
                        change -= 0.5 * ((v_new[q2] * v_new[q2] if v_new[q2] > 0 else 0.0)
                                         - (v * v if v > 0 else 0.0))
                        if (v_new[q2] < 0.0) != clipped[q2]:
                            settled = False
                            clipped[q2] = v_new[q2] < 0.0
                    if change > best_change or n_k == 0:
                        best_change = change
                        for pt in range(m):
                            mu_best[pt] = mu[pt]
                    if settled:
                        break
                # 4. move the statistics and v by sum_k (mu_k - weight_k) (z_k - a)
                mass = 0.0
                changed = False
                for pt in range(m):
                    dmu[pt] = mu_best[pt] - mu_old[pt]
                    mass += dmu[pt]
                    if dmu[pt] != 0.0:
                        changed = True
                    p.vertex_weight[i, pt] = mu_best[pt]
                if not changed:
                    continue
                for t in range(length):
                    for s in range(S):
                        scores[t * S + s] = -mass * p.anchor_node[lo + t, s]  # change of x
                    for pt in range(m):
                        scores[t * S + p.vertex_labels[lo + t, pt]] += dmu[pt]
                    for q in range(p.indptr[lo + t], p.indptr[lo + t + 1]):
                        j = p.indices[q]
                        v = C * p.data[q]
                        for s in range(S):
                            p.WT[j, s] -= v * scores[t * S + s]
                    for s in range(S):
                        p.node_marg[lo + t, s] += scores[t * S + s]
                for q2 in range(P):
                    p.pair_v[q2] += C * mass * p.anchor_pair[i, q2]
                    p.pair_marg[i, q2] -= mass * p.anchor_pair[i, q2]
                for pt in range(m):
                    for e in range(entry_count[pt]):
                        kk = entry_index[pt * stride + e]
                        p.pair_v[kk] -= C * dmu[pt] * entry_value[pt * stride + e]
                        p.pair_marg[i, kk] += dmu[pt] * entry_value[pt * stride + e]
                p.clip()
                v = -mass * p.anchor_loss[i]
                for pt in range(m):
                    v += dmu[pt] * p.vertex_loss[i, pt]
                p.expected_loss[i] += v
    finally:
        free(scores)
        free(gram_tokens)
        free(unary_stats)
        free(pair_dense)
        free(entry_value)
        free(entry_index)
        free(entry_count)
        free(labels)
        free(point_labels)
        free(touched)
    return total_gap
