"""Compiled passes of restricted simplicial decomposition with dimension limit ``r`` (Yu and
Rousu 2007): one simplex per example over its anchor and at most ``r`` labellings.

:func:`multi_point_pass` (dimension limit ``r``) keeps no per-token statistics: example
``i``'s point is ``x = (1 - sum_k mu_k) a + sum_k mu_k z_k``, from at most ``r`` labellings
(``vertex_labels[t, k]``, int16) with their losses and weights ``mu_k``, and an anchor ``a``
(a past point; the true labelling at first) packed as its non-zero node and pairwise entries
(:class:`~sklstruct.learners._frank_wolfe.AnchorStore`) with its loss. A visit
unpacks the anchor, computes the scores of the anchor and the points, adds the oracle's
labelling (when full, the lowest-weight one is dropped and ``x`` becomes the anchor: the
paper's footnote 1) and solves the master problem over the convex hull of the anchor and the
labellings, a QP in ``mu`` whose Gram matrix comes either from the example's token Gram matrix
(``length^2`` entries, cheap for short sequences with many features) or from the points' unary
statistics on the example's features (an anchor block of ``n_touched x n_states`` and sums
over the example's stored entries, cheap for long sequences with few features, and the only
way with scaled features); the cheaper is chosen per example (``state.master_gram`` can force
either), and the token Gram matrix
never beyond ``TOKEN_GRAM_CAP`` entries (its upper triangle kept between visits, for the
examples that fit the budget, in the state's ``token_gram`` or, when exact, ``token_gram32``
or ``token_gram8``). With constrained
coordinates the master is solved by active-set rounds on the sign pattern of ``v`` on them
(exact when the pattern settles; otherwise the best tried point that ascends).
:func:`statistics_weights` recomputes ``v`` from the points in one streaming pass.

The loss is the state's ``token_loss`` matrix when it has one, else the weighted Hamming loss
computed from ``Y`` and ``loss_weights`` for the visited example.

A visit's labelling is the kernels' ``max_oracle_candidate`` (for chains of 32 states or more,
Viterbi in single precision: the best labelling, or one within the rounding of float sums of
it), which the master takes as any other point; the certificate (:func:`certificate_pass`)
calls the exact ``max_oracle``, so the certified gap does not depend on it.

Both passes check for Ctrl-C every few thousand tokens (KeyboardInterrupt; the state is then
consistent up to the examples visited).

:func:`active_sweeps` and :func:`certificate_pass` run the shrinking sweeps and the
per-example certificate of :mod:`sklstruct.learners._factored_dual_fast` on these visits.

In the uncached mode the visits run in two stages (:class:`_Pipeline`) when the examples share
few of their stored entries' features (``state.two_stage``): the token scores over
the stored entries whose features the example visited before does not have, which a second
thread sums for the example after next while this one solves the next master; then the other
entries, the oracle and the master. The sums are the same on one thread and on two, so the
iterates do not depend on the number of threads.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from libc.math cimport INFINITY, fabs
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset

from sklstruct._signals cimport check_signals_every
from sklstruct._solvers._smo cimport active_set_capped_simplex, smo_capped_simplices
from sklstruct._typedefs cimport (float64_t, int16_t, int32_t, int64_t, intp_t, uint8_t,
                                  uint64_t)
from sklstruct.learners._example_rows cimport (PREFETCH_FEATURES, SKS_PREFETCH, dot, release,
                                               SIGNAL_CHECK_TOKENS, token_scores)
from sklstruct.learners._factored_dual_fast cimport (DualPass, Progress, certify_examples,
                                                     record_visit, sweep_active)


cdef inline intp_t _pair(intp_t a, intp_t b) noexcept nogil:
    """The position of the pair ``{a, b}`` of points in a packed upper triangle (row
    ``max(a, b)``, entries ``0..max(a, b)``)."""
    if a > b:
        return a * (a + 1) // 2 + b
    return b * (b + 1) // 2 + a


cdef enum:
    # largest token Gram matrix (entries) the multi-point pass forms for one example
    TOKEN_GRAM_CAP = 4194304
    MAX_POINTS = 63

TOKEN_GRAM_ENTRIES = TOKEN_GRAM_CAP  # (for the state's kept token Gram matrices)


cdef extern from *:
    """
    #include <sched.h>
    static inline long long sks_load_acquire(const long long* p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline void sks_store_release(long long* p, long long v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    static inline void sks_pause(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #endif
    }
    """
    long long sks_load_acquire(const long long* p) noexcept nogil
    void sks_store_release(long long* p, long long v) noexcept nogil
    void sks_pause() noexcept nogil
    int sched_yield() noexcept nogil


cdef enum:
    # busy-wait rounds of a pipelined pass's thread before it yields its core between checks
    SPIN_ROUNDS = 4096


cdef inline intp_t _wait_until(int64_t* counter, int64_t target) noexcept nogil:
    """Wait until another thread's release store takes ``counter`` to ``target`` or above
    (acquire: its writes before that store are visible after this returns); returns the
    rounds waited."""
    cdef intp_t rounds = 0
    while sks_load_acquire(<long long*> counter) < target:
        rounds += 1
        if rounds < SPIN_ROUNDS:
            sks_pause()
        else:
            sched_yield()
    return rounds


cdef struct _Handoff:
    # one example's token scores in a pipelined pass (_Pipeline), in two parts
    double* partial  # the sums over the stored entries not shared with the example before
    int32_t* touched  # the example's distinct features
    int64_t* shared  # its stored entries whose feature the example before has ...
    int32_t* shared_token  # ... and their tokens
    intp_t n_touched, n_shared


cdef double _solve_master(const double* G, const double* D_k, const double* base,
                          const double* mu_old, intp_t m, const double* v_k, intp_t n_k,
                          double tol, double* work, double* mu_best) noexcept nogil:
    """The master problem of one example over its point weights ``mu``; returns the exact
    increase of the dual at ``mu_best``.

    Maximises ``sum_p mu_p base_p - 1/2 mu' G mu - 1/2 ||[v_K(mu)]_+||^2`` (changes from
    ``mu_old``) over ``mu >= 0, sum mu <= 1``, with ``G`` the Gram matrix of the directions on
    the unconstrained coordinates, ``D_k`` (rows of 64) their constrained coordinates and
    ``v_K(mu) = v_k + D_k' (mu - mu_old)``. Without constrained coordinates one QP solve;
    with them, active-set rounds on the sign pattern of ``v_K`` (the objective is the QP
    without the clipped coordinates where the pattern holds; a solution that reproduces its
    pattern is optimal), keeping the best tried point that ascends. Each QP is solved by
    :func:`active_set_capped_simplex`, exact where SMO's pairwise steps crawl (``G`` is
    often singular: points that differ in a few tokens), and SMO where it gives up.
    ``work`` holds ``2 m^2 + 13 m + 64`` doubles.
    """
    cdef intp_t pt, l, q2, round_, n_steps
    cdef double slack, change, best_change = 0.0, v, v_new
    cdef bint settled
    cdef double* G_round = work
    cdef double* grad = G_round + m * m
    cdef double* mu = grad + m
    cdef double* dmu = mu + m
    cdef uint8_t clipped[64]
    cdef intp_t group_ptr[2]
    group_ptr[0] = 0
    group_ptr[1] = m
    for pt in range(m):
        mu_best[pt] = mu_old[pt]
    for q2 in range(n_k):
        clipped[q2] = v_k[q2] < 0.0
    for round_ in range(16 if n_k else 1):
        for pt in range(m):
            grad[pt] = base[pt]
            mu[pt] = mu_old[pt]
            for l in range(m):
                G_round[pt * m + l] = G[pt * m + l]
            for q2 in range(n_k):
                if not clipped[q2]:
                    grad[pt] -= v_k[q2] * D_k[pt * 64 + q2]
                    for l in range(m):
                        G_round[pt * m + l] += D_k[pt * 64 + q2] * D_k[l * 64 + q2]
        slack = 1.0
        for pt in range(m):
            slack -= mu[pt]
        if slack < 0.0:
            slack = 0.0
        # the exact solution by active sets; SMO finishes where it gives up
        if active_set_capped_simplex(G_round, m, grad, mu, &slack, tol, 4 * m + 24,
                                     dmu + m) < 0:
            smo_capped_simplices(G_round, m, grad, mu, group_ptr, 1, &slack, tol,
                                 20 * m + 20, &n_steps)
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
            v = v_k[q2]
            v_new = v
            for pt in range(m):
                v_new += dmu[pt] * D_k[pt * 64 + q2]
            change -= 0.5 * ((v_new * v_new if v_new > 0 else 0.0) - (v * v if v > 0 else 0.0))
            if (v_new < 0.0) != clipped[q2]:
                settled = False
                clipped[q2] = v_new < 0.0
        if change > best_change:  # (a master that would not ascend keeps mu_old)
            best_change = change
            for pt in range(m):
                mu_best[pt] = mu[pt]
        if settled:
            break
    return best_change


cdef struct _Work:
    # per-example workspace of the multi-point passes
    double* scores
    double* loss
    double* zeros
    double* saved
    double* anchor_node
    double* anchor_pair
    # the indices where anchor_pair may be non-zero, ascending (zero everywhere else), and
    # their marks
    intp_t* anchor_support
    uint8_t* in_support
    intp_t n_support
    # the states of each token where anchor_node is non-zero (rows of a CSR pattern)
    intp_t* anchor_states
    intp_t* anchor_state_ptr
    double* gram_tokens
    double* unary_stats
    double* pair_dense
    double* entry_value
    intp_t* entry_index
    intp_t* entry_count
    double* point_score
    int64_t* labels
    int64_t* point_labels
    int32_t* touched
    intp_t* moved
    double* master


cdef class _Pipeline


cdef class _MultiPoint(DualPass):
    """The multi-point pass's steps on one example (see the module doc).

    A visit unpacks the example's anchor into ``w.anchor_node`` (``length x n_states``) and
    ``w.anchor_pair`` (``n_pairwise``), computes its kept points' pairwise entries (rows of
    ``w.entry_index`` / ``w.entry_value``, ``stride`` apart; row ``r`` is scratch) and the
    scores of the anchor and the points at the current weights, and packs the anchor back
    when it changed."""
    cdef _Work w
    cdef intp_t stride, gram_cap, r
    cdef int master_gram  # the masters' Gram matrices: 0 cheaper, 1 tokens, 2 features
    cdef double anchor_score
    cdef int16_t[:, ::1] vertex_labels
    cdef float64_t[:, ::1] vertex_loss, vertex_weight
    cdef int64_t[::1] n_vertices
    cdef float64_t[::1] anchor_loss, feature_buffer
    # the anchors (AnchorStore)
    cdef object anchors
    cdef int64_t[::1] anchor_start, anchor_capacity, anchor_n_node, anchor_n_pair, pool_used
    cdef int32_t[::1] pool_keys
    cdef float64_t[::1] pool_values
    # the token-Gram terms of every example's master, kept between visits: <Z_p, Z_l>_K,
    # <A, Z_p>_K and <A, A>_K with validity flags
    cdef float64_t[:, ::1] gram_points  # (the symmetric <Z_p, Z_l>_K: see _pair)
    cdef float64_t[:, ::1] gram_anchor
    cdef float64_t[::1] gram_anchor_self
    cdef uint8_t[::1] gram_anchor_ok
    cdef uint8_t[:, ::1] gram_point_ok
    cdef const int64_t[::1] token_gram_ptr
    cdef float64_t[::1] token_gram
    cdef float[::1] token_gram32
    cdef uint8_t[::1] token_gram8
    cdef int gram_kind  # the kept matrices' entries: 0 double, 1 float, 2 uint8
    cdef uint8_t[::1] token_gram_ready
    # cached mode: every example's anchor and points as dense rows over its own features
    cdef bint cached
    cdef const int64_t[::1] cache_feature_ptr, cache_ptr
    cdef const int32_t[::1] cache_features
    cdef float64_t[::1] cache
    cdef uint8_t[::1] cache_ready
    # pipelined visits (_Pipeline): bit 1 marks the features of the example before the one
    # whose scores are summed, bit 2 those of that example already listed
    cdef uint8_t[::1] mark
    cdef _Pipeline pipeline  # the uncached mode's visits (None: plain visits)

    def __init__(self, state):
        super().__init__(state, False)
        self.vertex_labels = state.vertex_labels
        self.vertex_loss = state.vertex_loss
        self.vertex_weight = state.vertex_weight
        self.n_vertices = state.n_vertices
        self.anchor_loss = state.anchor_loss
        self.feature_buffer = state.feature_buffer
        self.gram_points = state.gram_points
        self.gram_anchor = state.gram_anchor
        self.gram_anchor_self = state.gram_anchor_self
        self.gram_anchor_ok = state.gram_anchor_ok
        self.gram_point_ok = state.gram_point_ok
        self.token_gram_ptr = state.token_gram_ptr
        self.token_gram = state.token_gram
        self.token_gram32 = state.token_gram32
        self.token_gram8 = state.token_gram8
        self.gram_kind = 2 if state.token_gram8.shape[0] else (
            1 if state.token_gram32.shape[0] else 0)
        self.token_gram_ready = state.token_gram_ready
        self.anchors = state.anchors
        self.anchor_start = self.anchors.start
        self.anchor_capacity = self.anchors.capacity
        self.anchor_n_node = self.anchors.n_node
        self.anchor_n_pair = self.anchors.n_pair
        self.pool_used = self.anchors.used
        self.bind_pool()
        self.r = self.vertex_labels.shape[1]
        if not 1 <= self.r <= MAX_POINTS:
            raise ValueError(f"the compiled pass keeps 1 to {MAX_POINTS} points per example.")
        if self.S > 32767 or self.max_len * self.S > 2147483647 or self.P > 2147483647:
            raise ValueError("the compiled pass keeps at most 32,767 states and 2**31 - 1 "
                             "entries of a sequence's statistics.")
        self.master_gram = {"auto": 0, "tokens": 1, "features": 2}[state.master_gram]
        self.cached = state.cached
        if self.cached:
            self.cache_feature_ptr = state.cache_feature_ptr
            self.cache_features = state.cache_features
            self.cache_ptr = state.cache_ptr
            self.cache = state.cache
            self.cache_ready = state.cache_ready
        cdef intp_t S = self.S, P = self.P, r = self.r
        cdef intp_t n_feature_rows = min(self.max_nnz, self.WT.shape[0])
        self.stride = self.kernels.max_pairwise_entries + 1
        self.gram_cap = 0 if self.cached else min(self.max_len * self.max_len,
                                                  TOKEN_GRAM_CAP)
        self.w.scores = <double*> malloc(self.max_len * S * sizeof(double))
        self.w.loss = <double*> malloc(self.max_len * S * sizeof(double))
        self.w.zeros = <double*> calloc(self.max_len * S, sizeof(double))
        self.w.saved = <double*> malloc(self.max_len * sizeof(double))
        self.w.anchor_node = <double*> malloc(self.max_len * S * sizeof(double))
        self.w.anchor_pair = <double*> calloc(P + 1, sizeof(double))
        self.w.anchor_support = <intp_t*> malloc((P + 1) * sizeof(intp_t))
        self.w.in_support = <uint8_t*> calloc(P + 1, sizeof(uint8_t))
        self.w.n_support = 0
        self.w.gram_tokens = <double*> malloc(
            (self.gram_cap + self.max_len * S + 1) * sizeof(double))
        self.w.unary_stats = <double*> malloc(
            ((0 if self.cached else 2 * n_feature_rows * S) + 1) * sizeof(double))
        self.w.pair_dense = <double*> malloc((P + 1) * sizeof(double))
        self.w.entry_value = <double*> malloc((r + 1) * self.stride * sizeof(double))
        self.w.entry_index = <intp_t*> malloc((r + 1) * self.stride * sizeof(intp_t))
        self.w.entry_count = <intp_t*> malloc((r + 1) * sizeof(intp_t))
        self.w.point_score = <double*> malloc((r + 1) * sizeof(double))
        self.w.labels = <int64_t*> malloc(self.max_len * sizeof(int64_t))
        self.w.point_labels = <int64_t*> malloc(self.max_len * sizeof(int64_t))
        self.w.touched = <int32_t*> malloc(self.max_nnz * sizeof(int32_t))
        self.w.moved = <intp_t*> malloc(S * sizeof(intp_t))
        self.w.anchor_states = <intp_t*> malloc((self.max_len * S + 1) * sizeof(intp_t))
        self.w.anchor_state_ptr = <intp_t*> malloc((self.max_len + 1) * sizeof(intp_t))
        self.w.master = <double*> malloc((4 * MAX_POINTS * MAX_POINTS + 8 * MAX_POINTS
                                          + 64 * MAX_POINTS + 64) * sizeof(double))
        if (self.w.scores == NULL or self.w.loss == NULL or self.w.zeros == NULL
                or self.w.saved == NULL or self.w.anchor_node == NULL
                or self.w.anchor_pair == NULL or self.w.gram_tokens == NULL
                or self.w.anchor_support == NULL or self.w.in_support == NULL
                or self.w.unary_stats == NULL or self.w.pair_dense == NULL
                or self.w.entry_value == NULL or self.w.entry_index == NULL
                or self.w.entry_count == NULL or self.w.point_score == NULL
                or self.w.labels == NULL or self.w.point_labels == NULL
                or self.w.touched == NULL or self.w.moved == NULL
                or self.w.anchor_states == NULL or self.w.anchor_state_ptr == NULL
                or self.w.master == NULL):
            raise MemoryError("could not allocate the simplicial decomposition workspace")
        memset(self.w.pair_dense, 0, (P + 1) * sizeof(double))

    def __dealloc__(self):
        free(self.w.scores)
        free(self.w.loss)
        free(self.w.zeros)
        free(self.w.saved)
        free(self.w.anchor_node)
        free(self.w.anchor_pair)
        free(self.w.anchor_support)
        free(self.w.in_support)
        free(self.w.gram_tokens)
        free(self.w.unary_stats)
        free(self.w.pair_dense)
        free(self.w.entry_value)
        free(self.w.entry_index)
        free(self.w.entry_count)
        free(self.w.point_score)
        free(self.w.labels)
        free(self.w.point_labels)
        free(self.w.touched)
        free(self.w.moved)
        free(self.w.anchor_states)
        free(self.w.anchor_state_ptr)
        free(self.w.master)

    cdef double loss_augmented_oracle(self, intp_t i, intp_t lo, intp_t length,
                                      double* scores, int64_t* labels,
                                      bint exact) noexcept nogil:
        """The most violating labelling of example ``i`` at the token scores into
        ``labels`` (``exact``: the kernels' ``max_oracle``; else their
        ``max_oracle_candidate``, which a step can take); returns its loss. The weighted
        Hamming loss ``c_t [s != y_t]`` is ``c_t - c_t [s = y_t]``, so the oracle runs on the
        scores with ``c_t`` taken from the true states (restored afterwards) and a zero loss
        matrix: no loss matrix is formed."""
        cdef intp_t S = self.S, t
        cdef int64_t y
        cdef double loss = 0.0
        if self.token_loss.shape[0]:
            self.fill_loss(lo, length, self.w.loss)
            if exact:
                self.kernels.max_oracle(i, scores, self.w.loss, self.theta_ptr(), labels)
            else:
                self.kernels.max_oracle_candidate(i, scores, self.w.loss, self.theta_ptr(),
                                                  labels)
            for t in range(length):
                loss += self.w.loss[t * S + labels[t]]
            return loss
        for t in range(length):
            y = self.Y[lo + t]
            self.w.saved[t] = scores[t * S + y]
            scores[t * S + y] -= self.loss_weights[y]
        if exact:
            self.kernels.max_oracle(i, scores, self.w.zeros, self.theta_ptr(), labels)
        else:
            self.kernels.max_oracle_candidate(i, scores, self.w.zeros, self.theta_ptr(),
                                              labels)
        for t in range(length):
            y = self.Y[lo + t]
            scores[t * S + y] = self.w.saved[t]
            if labels[t] != y:
                loss += self.loss_weights[y]
        return loss

    # --------------------------------------------------------------- anchors
    def bind_pool(self):
        """(Re)take the views of the anchors' pool (after :meth:`AnchorStore.reserve`)."""
        self.pool_keys = self.anchors.keys
        self.pool_values = self.anchors.values

    cdef inline void support_add(self, intp_t q) noexcept nogil:
        """Note that ``w.anchor_pair[q]`` may become non-zero (then :meth:`support_sort`)."""
        if not self.w.in_support[q]:
            self.w.in_support[q] = 1
            self.w.anchor_support[self.w.n_support] = q
            self.w.n_support += 1

    cdef void support_sort(self) noexcept nogil:
        """Sort the anchor's support (insertion sort: short, mostly sorted lists)."""
        cdef intp_t* support = self.w.anchor_support
        cdef intp_t a, b, q
        for a in range(1, self.w.n_support):
            q = support[a]
            b = a
            while b > 0 and support[b - 1] > q:
                support[b] = support[b - 1]
                b -= 1
            support[b] = q

    cdef void load_anchor(self, intp_t i, intp_t lo, intp_t length) noexcept nogil:
        """Unpack example ``i``'s anchor into ``w.anchor_node`` and ``w.anchor_pair`` (and
        its support)."""
        cdef intp_t S = self.S, t, e, n
        cdef int64_t k, a = self.anchor_start[i], n_node = self.anchor_n_node[i]
        cdef double* A = self.w.anchor_node
        cdef double* Ap = self.w.anchor_pair
        cdef intp_t* index = self.w.entry_index + self.r * self.stride
        cdef double* value = self.w.entry_value + self.r * self.stride
        memset(A, 0, length * S * sizeof(double))
        for e in range(self.w.n_support):
            Ap[self.w.anchor_support[e]] = 0.0
            self.w.in_support[self.w.anchor_support[e]] = 0
        self.w.n_support = 0
        if a < 0:  # the true labelling
            for t in range(length):
                A[t * S + self.Y[lo + t]] = 1.0
            n = self.kernels.pairwise_entries(i, &self.Y[lo], index, value)
            for e in range(n):
                Ap[index[e]] += value[e]
                self.support_add(index[e])
            self.support_sort()
            return
        for k in range(a, a + n_node):
            A[self.pool_keys[k]] = self.pool_values[k]
        for k in range(a + n_node, a + n_node + self.anchor_n_pair[i]):  # (ascending keys)
            Ap[self.pool_keys[k]] = self.pool_values[k]
            self.support_add(self.pool_keys[k])

    cdef int store_anchor(self, intp_t i, intp_t length) except -1 nogil:
        """Pack the workspace's anchor back as example ``i``'s (its non-zero entries)."""
        cdef intp_t q, e, n_node = 0, n_pair = 0, n_entries = length * self.S
        cdef int64_t k, need
        cdef const double* A = self.w.anchor_node
        cdef const double* Ap = self.w.anchor_pair
        for q in range(n_entries):
            if A[q] != 0.0:
                n_node += 1
        for e in range(self.w.n_support):
            if Ap[self.w.anchor_support[e]] != 0.0:
                n_pair += 1
        need = n_node + n_pair
        if self.anchor_start[i] < 0 or self.anchor_capacity[i] < need:
            need += need // 4 + 2  # room to grow in place
            if self.pool_used[0] + need > self.pool_keys.shape[0]:
                with gil:
                    self.anchors.reserve(need)
                    self.bind_pool()
            self.anchor_start[i] = self.pool_used[0]  # (abandons the old slot)
            self.anchor_capacity[i] = need
            self.pool_used[0] += need
        k = self.anchor_start[i]
        for q in range(n_entries):
            if A[q] != 0.0:
                self.pool_keys[k] = <int32_t> q
                self.pool_values[k] = A[q]
                k += 1
        for e in range(self.w.n_support):
            q = self.w.anchor_support[e]
            if Ap[q] != 0.0:
                self.pool_keys[k] = <int32_t> q
                self.pool_values[k] = Ap[q]
                k += 1
        self.anchor_n_node[i] = n_node
        self.anchor_n_pair[i] = n_pair
        return 0

    # --------------------------------------------------------------- points
    cdef void point_entries(self, intp_t i, intp_t lo, intp_t length, intp_t pt,
                            bint scored=True) noexcept nogil:
        """Point ``pt``'s pairwise entries (row ``pt`` of the entries) and, when ``scored``,
        its score at the current weights (``w.scores``) into ``w.point_score[pt]``."""
        cdef intp_t t, e, n
        cdef double total = 0.0
        cdef int64_t* labels = self.w.point_labels
        cdef intp_t* index = self.w.entry_index + pt * self.stride
        cdef double* value = self.w.entry_value + pt * self.stride
        for t in range(length):
            labels[t] = self.vertex_labels[lo + t, pt]
        n = self.kernels.pairwise_entries(i, labels, index, value)
        self.w.entry_count[pt] = n
        if not scored:
            return
        for t in range(length):
            total += self.w.scores[t * self.S + labels[t]]
        for e in range(n):
            total += self.theta[index[e]] * value[e]
        self.w.point_score[pt] = total

    cdef double anchor_weight(self, intp_t i) noexcept nogil:
        """``1 - sum_k mu_k``: the anchor's weight in example ``i``'s point."""
        cdef intp_t pt
        cdef double weight = 1.0
        for pt in range(self.n_vertices[i]):
            weight -= self.vertex_weight[i, pt]
        return weight

    cdef intp_t add_point(self, intp_t i, intp_t lo, intp_t length, const int64_t* labels,
                          double loss_bar) noexcept nogil:
        """Keep the labelling as a point of example ``i`` unless it has it; return its slot.

        A full example drops its lowest-weight point and makes the current ``x`` its anchor
        (the paper's footnote 1; ``anchor_score`` and the workspace's anchor, which the caller
        packs back, or in the cached mode the anchor's row, become ``x``'s). Returns
        ``-1 - slot`` for a point that was already kept.
        """
        cdef intp_t S = self.S, m = self.n_vertices[i], slot = -1, pt, t, q, e, K
        cdef bint duplicate
        cdef double weight, mu
        cdef double* A = self.w.anchor_node
        cdef double* Ap = self.w.anchor_pair
        cdef double* row0
        for pt in range(m):
            duplicate = True
            for t in range(length):
                if self.vertex_labels[lo + t, pt] != labels[t]:
                    duplicate = False
                    break
            if duplicate:
                return -1 - pt
        if m < self.r:
            slot = m
            self.n_vertices[i] = m + 1
        else:
            slot = 0
            for pt in range(1, m):
                if self.vertex_weight[i, pt] < self.vertex_weight[i, slot]:
                    slot = pt
            # the anchor becomes x = (1 - sum mu) a + sum mu_p z_p
            weight = self.anchor_weight(i)
            self.anchor_score *= weight
            for pt in range(m):
                self.anchor_score += self.vertex_weight[i, pt] * self.w.point_score[pt]
            if not self.cached:
                for q in range(length * S):
                    A[q] *= weight
                for e in range(self.w.n_support):
                    Ap[self.w.anchor_support[e]] *= weight
                for pt in range(m):
                    mu = self.vertex_weight[i, pt]
                    for t in range(length):
                        A[t * S + self.vertex_labels[lo + t, pt]] += mu
                    for e in range(self.w.entry_count[pt]):
                        Ap[self.w.entry_index[pt * self.stride + e]] += \
                            mu * self.w.entry_value[pt * self.stride + e]
                        self.support_add(self.w.entry_index[pt * self.stride + e])
                self.support_sort()
            self.anchor_loss[i] = self.expected_loss[i]
            if self.cached:  # the same combination of the cached rows
                K = self.row_size(i)
                row0 = &self.cache[self.cache_ptr[i]]
                for q in range(K):
                    row0[q] *= weight
                for pt in range(m):
                    for q in range(K):
                        row0[q] += self.vertex_weight[i, pt] * row0[(1 + pt) * K + q]
            for pt in range(m):
                self.vertex_weight[i, pt] = 0.0
            self.gram_anchor_ok[i] = 0
        for t in range(length):
            self.vertex_labels[lo + t, slot] = <int16_t> labels[t]
        self.vertex_loss[i, slot] = loss_bar
        self.vertex_weight[i, slot] = 0.0
        self.gram_point_ok[i, slot] = 0
        return slot

    cdef inline intp_t row_size(self, intp_t i) noexcept nogil:
        return (self.cache_feature_ptr[i + 1] - self.cache_feature_ptr[i]) * self.S + self.P

    cdef double row_score(self, intp_t i, intp_t k) noexcept nogil:
        """The score at the current weights of cached row ``k`` of example ``i`` (0: the
        anchor, ``1 + p``: point ``p``)."""
        cdef intp_t S = self.S, T = self.cache_feature_ptr[i + 1] - self.cache_feature_ptr[i]
        cdef intp_t q2
        cdef const double* row = &self.cache[self.cache_ptr[i] + k * self.row_size(i)]
        cdef double total = 0.0
        for q2 in range(T):
            total += dot(&self.WT[self.cache_features[self.cache_feature_ptr[i] + q2], 0],
                         row + q2 * S, S)
        for q2 in range(self.P):
            total += self.theta[q2] * row[T * S + q2]
        return total

    cdef void set_slots(self, intp_t i, bint on) noexcept nogil:
        """Map example ``i``'s features to their rows in its cache (or back to -1)."""
        cdef int64_t q
        for q in range(self.cache_feature_ptr[i], self.cache_feature_ptr[i + 1]):
            self.slot[self.cache_features[q]] = \
                <int32_t> (q - self.cache_feature_ptr[i]) if on else -1

    cdef void cache_row(self, intp_t i, intp_t lo, intp_t length, intp_t pt,
                        double* row) noexcept nogil:
        """Statistics ``X_i^T M`` (on the example's features) and the pairwise statistics of
        point ``pt`` (its labels and entries), or of the workspace's anchor for ``pt < 0``."""
        cdef intp_t S = self.S, T = self.cache_feature_ptr[i + 1] - self.cache_feature_ptr[i]
        cdef intp_t t, s, e, q2, base
        cdef int64_t q
        cdef double x
        for q2 in range(T * S + self.P):
            row[q2] = 0.0
        for t in range(length):
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                base = self.slot[self.indices[q]] * S
                x = self.data[q]
                if pt >= 0:
                    row[base + self.vertex_labels[lo + t, pt]] += x
                else:
                    for s in range(S):
                        row[base + s] += x * self.w.anchor_node[t * S + s]
        if pt >= 0:
            for e in range(self.w.entry_count[pt]):
                row[T * S + self.w.entry_index[pt * self.stride + e]] += \
                    self.w.entry_value[pt * self.stride + e]
        else:
            for q2 in range(self.P):
                row[T * S + q2] = self.w.anchor_pair[q2]


    cdef double token_gram_cost(self, intp_t i, intp_t lo, intp_t length,
                                intp_t m) noexcept nogil:
        """Work of :meth:`unary_gram_tokens` on example ``i`` given its cached terms."""
        cdef intp_t pt, stale = 0
        cdef double square = <double> length * length
        for pt in range(m):
            if not self.gram_point_ok[i, pt]:
                stale += 1
        if stale == 0 and self.gram_anchor_ok[i]:
            return m * m
        return ((0.0 if self.token_gram_ptr[i] >= 0 and self.token_gram_ready[i] else
                 <double> length * (self.indptr[lo + length] - self.indptr[lo]))
                + square * (2 * stale + (self.S + m if not self.gram_anchor_ok[i] else 0))
                + <double> stale * m * length)

    cdef void unary_gram_tokens(self, intp_t i, intp_t lo, intp_t length, intp_t m,
                                double* K, double* by_state, double* G) noexcept nogil:
        """``G[p, l] = C^2 <X^T (A - Z_p), X^T (A - Z_l)>`` (``A`` the anchor's node
        measures, ``Z_p`` one-hot point labels) from the inner products of ``A`` and the
        ``Z_p`` under the example's token Gram matrix ``K``; the products stay cached
        between visits and only those of new points or a new anchor are computed
        (``by_state`` holds ``n_states * length`` doubles). ``K`` is the workspace; the
        example's kept matrix (when it has one; computed at the first need) is read into
        it. Kept matrices are their upper triangles, row by row, as bytes or in single
        precision when that is exact (``gram_kind``: small non-negative or small integer
        features).""" 
        cdef intp_t t, t2, pt, l, s, count
        cdef int64_t q
        cdef double kval, total, C2 = self.example_C(i) * self.example_C(i), s0, s1, s2, s3
        cdef int32_t p0, p1, p2, p3
        cdef double sums[MAX_POINTS]
        cdef int32_t stale[MAX_POINTS]
        cdef const double* anchor_row
        cdef intp_t* states = self.w.anchor_states
        cdef intp_t* state_ptr = self.w.anchor_state_ptr
        cdef const int16_t* point_labels
        cdef bint anchor_ok = self.gram_anchor_ok[i], needed = not anchor_ok
        cdef int64_t e, kept = self.token_gram_ptr[i]
        for pt in range(m):
            if not self.gram_point_ok[i, pt]:
                needed = True
        if not needed:
            pass
        elif kept >= 0 and self.token_gram_ready[i]:  # the example's kept matrix
            e = kept
            for t in range(length):
                for t2 in range(t, length):
                    if self.gram_kind == 2:
                        kval = self.token_gram8[e]
                    elif self.gram_kind == 1:
                        kval = self.token_gram32[e]
                    else:
                        kval = self.token_gram[e]
                    K[t * length + t2] = kval
                    K[t2 * length + t] = kval
                    e += 1
        else:  # the token Gram matrix (kept when the example has room)
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
            if kept >= 0:
                e = kept
                for t in range(length):
                    for t2 in range(t, length):
                        if self.gram_kind == 2:
                            self.token_gram8[e] = <uint8_t> K[t * length + t2]
                        elif self.gram_kind == 1:
                            self.token_gram32[e] = <float> K[t * length + t2]
                        else:
                            self.token_gram[e] = K[t * length + t2]
                        e += 1
                self.token_gram_ready[i] = 1
        if not anchor_ok:
            # <A, A> under K over the anchor's non-zero states of each token (the states
            # its points gave the token: a few of them)
            state_ptr[0] = 0
            for t in range(length):
                state_ptr[t + 1] = state_ptr[t]
                for s in range(self.S):
                    if self.w.anchor_node[t * self.S + s] != 0.0:
                        states[state_ptr[t + 1]] = s
                        state_ptr[t + 1] += 1
            total = 0.0
            for t in range(length):
                anchor_row = self.w.anchor_node + t * self.S
                for t2 in range(length):
                    kval = 0.0
                    for l in range(state_ptr[t], state_ptr[t + 1]):
                        kval += anchor_row[states[l]] * self.w.anchor_node[t2 * self.S
                                                                          + states[l]]
                    total += K[t * length + t2] * kval
            self.gram_anchor_self[i] = total
        # <A, Z_pt> under K for the points that need it, several in one sweep over the token
        # pairs (each point's sum runs over the pairs in the same order as alone; the points'
        # sums are independent additions)
        count = 0
        for pt in range(m):
            if not anchor_ok or not self.gram_point_ok[i, pt]:
                stale[count] = <int32_t> pt
                count += 1
        # (four points at a time in registers, the rest one by one)
        for l in range(0, count - count % 4, 4):
            p0, p1, p2, p3 = stale[l], stale[l + 1], stale[l + 2], stale[l + 3]
            s0 = s1 = s2 = s3 = 0.0
            for t in range(length):
                anchor_row = self.w.anchor_node + t * self.S
                for t2 in range(length):
                    kval = K[t * length + t2]
                    point_labels = &self.vertex_labels[lo + t2, 0]
                    s0 += kval * anchor_row[point_labels[p0]]
                    s1 += kval * anchor_row[point_labels[p1]]
                    s2 += kval * anchor_row[point_labels[p2]]
                    s3 += kval * anchor_row[point_labels[p3]]
            sums[l], sums[l + 1], sums[l + 2], sums[l + 3] = s0, s1, s2, s3
        for l in range(count - count % 4, count):
            p0 = stale[l]
            s0 = 0.0
            for t in range(length):
                anchor_row = self.w.anchor_node + t * self.S
                for t2 in range(length):
                    s0 += K[t * length + t2] * anchor_row[self.vertex_labels[lo + t2, p0]]
            sums[l] = s0
        for l in range(count):
            self.gram_anchor[i, stale[l]] = sums[l]
        for pt in range(m):
            if self.gram_point_ok[i, pt]:
                continue
            # by_state[s, t2] = sum of K[t, t2] over the tokens t that point pt labels s
            for t2 in range(length * self.S):
                by_state[t2] = 0.0
            for t in range(length):
                s = self.vertex_labels[lo + t, pt]
                for t2 in range(length):
                    by_state[s * length + t2] += K[t * length + t2]
            for l in range(m):
                total = 0.0
                for t2 in range(length):
                    total += by_state[self.vertex_labels[lo + t2, l] * length + t2]
                self.gram_points[i, _pair(pt, l)] = total
        for pt in range(m):
            self.gram_point_ok[i, pt] = 1
        self.gram_anchor_ok[i] = 1
        for pt in range(m):
            for l in range(pt, m):
                G[pt * m + l] = C2 * (self.gram_anchor_self[i] - self.gram_anchor[i, pt]
                                      - self.gram_anchor[i, l]
                                      + self.gram_points[i, _pair(pt, l)])
                G[l * m + pt] = G[pt * m + l]

    cdef double point_product(self, intp_t lo, intp_t length, intp_t pt,
                              const double* block) noexcept nogil:
        """``<X^T Z_pt, B>`` in the norm weighted by the squared scales, for a block ``B``
        over the example's features (slots): a sum over its stored entries."""
        cdef intp_t t, z
        cdef int64_t q
        cdef double total = 0.0
        cdef bint scaled = self.scale2.shape[0] > 0
        for t in range(length):
            z = self.vertex_labels[lo + t, pt]
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                total += self.data[q] * block[self.slot[self.indices[q]] * self.S + z] * (
                    self.scale2[self.indices[q] * self.S + z] if scaled else 1.0)
        return total

    cdef void unary_gram_features(self, intp_t lo, intp_t length, intp_t m,
                                  const int32_t* touched, intp_t n_touched, double* stats,
                                  double C, double* G) noexcept nogil:
        """The same Gram matrix from the unary statistics on the example's features:
        ``G[p, l] = C^2 (<a, a> - <a, z_p> - <a, z_l> + <z_p, z_l>)`` in the norm weighted by
        the squared scales, with ``a = X^T A`` (one dense block, n_touched x n_states) and
        ``z_p = X^T Z_p``, whose products are sums over the example's stored entries (the
        points' blocks are formed one at a time in a second block, and cleared entry by
        entry): ``O(nnz (n_states + m^2) + n_touched n_states)`` work. ``stats`` holds two
        blocks."""
        cdef intp_t S = self.S, block = n_touched * S, k, t, s, pt, l, at, z
        cdef int64_t q
        cdef double x, C2 = C * C
        cdef double* a = stats
        cdef double* zl = stats + block
        cdef bint scaled = self.scale2.shape[0] > 0
        cdef double anchor_self = 0.0
        cdef double anchor_point[MAX_POINTS]
        for k in range(n_touched):
            self.slot[touched[k]] = <int32_t> k
        for k in range(2 * block):
            stats[k] = 0.0
        for t in range(length):
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                at = self.slot[self.indices[q]] * S
                x = self.data[q]
                for s in range(S):
                    a[at + s] += x * self.w.anchor_node[t * S + s]
        for k in range(n_touched):
            for s in range(S):
                x = a[k * S + s]
                anchor_self += x * x * (self.scale2[touched[k] * S + s] if scaled else 1.0)
        for pt in range(m):
            anchor_point[pt] = self.point_product(lo, length, pt, a)
        for l in range(m):
            for t in range(length):
                z = self.vertex_labels[lo + t, l]
                for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                    zl[self.slot[self.indices[q]] * S + z] += self.data[q]
            for pt in range(l + 1):
                G[pt * m + l] = C2 * (anchor_self - anchor_point[pt] - anchor_point[l]
                                      + self.point_product(lo, length, pt, zl))
                G[l * m + pt] = G[pt * m + l]
            for t in range(length):
                z = self.vertex_labels[lo + t, l]
                for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                    zl[self.slot[self.indices[q]] * S + z] = 0.0
        for k in range(n_touched):
            self.slot[touched[k]] = -1

    # --------------------------------------------------------------- masters
    cdef double master_cached(self, intp_t i, intp_t lo, intp_t length,
                              double tol) noexcept nogil:
        """Solve example ``i``'s master from its cached rows and apply it; return the gain."""
        cdef intp_t S = self.S, P = self.P, n_k = self.n_k, m = self.n_vertices[i]
        cdef intp_t T = self.cache_feature_ptr[i + 1] - self.cache_feature_ptr[i]
        cdef intp_t K = T * S + P, pt, l, q2, j, s
        cdef const double* row0 = &self.cache[self.cache_ptr[i]]
        cdef const double* row
        cdef double* G = self.w.master
        cdef double* D_k = G + MAX_POINTS * MAX_POINTS
        cdef double* base = D_k + 64 * MAX_POINTS
        cdef double* mu_old = base + MAX_POINTS
        cdef double* mu_best = mu_old + MAX_POINTS
        cdef double* work = mu_best + MAX_POINTS
        cdef double v_k[64]
        cdef double total, C = self.example_C(i), gain, step
        if m == 0:
            return 0.0
        for pt in range(m):
            row = row0 + (1 + pt) * K
            # base_p = C (loss_p - loss_a) + C v_free . (row_p - row0)
            total = self.vertex_loss[i, pt] - self.anchor_loss[i]
            for q2 in range(T):
                j = self.cache_features[self.cache_feature_ptr[i] + q2]
                for s in range(S):
                    total += self.WT[j, s] * (row[q2 * S + s] - row0[q2 * S + s])
            for q2 in range(P):
                if self.free_mask[q2]:
                    total += self.pair_v[q2] * (row[T * S + q2] - row0[T * S + q2])
            base[pt] = C * total
            for q2 in range(n_k):
                D_k[pt * 64 + q2] = C * (row0[T * S + self.constrained[q2]]
                                         - row[T * S + self.constrained[q2]])
            for l in range(pt, m):
                total = 0.0
                for q2 in range(T * S):
                    total += (row[q2] - row0[q2]) * (row0[(1 + l) * K + q2] - row0[q2])
                for q2 in range(P):
                    if self.free_mask[q2]:
                        total += (row[T * S + q2] - row0[T * S + q2]) \
                            * (row0[(1 + l) * K + T * S + q2] - row0[T * S + q2])
                G[pt * m + l] = C * C * total
                G[l * m + pt] = G[pt * m + l]
            mu_old[pt] = self.vertex_weight[i, pt]
        for q2 in range(n_k):
            v_k[q2] = self.pair_v[self.constrained[q2]]
        gain = _solve_master(G, D_k, base, mu_old, m, v_k, n_k, tol, work, mu_best)
        # apply: v += sum_p dmu_p C (row0 - row_p)
        for pt in range(m):
            work[pt] = mu_best[pt] - mu_old[pt]
        if not self.apply_weights(i, m, work, mu_best):
            return 0.0
        for pt in range(m):
            step = work[pt]
            if step == 0.0:
                continue
            row = row0 + (1 + pt) * K
            for q2 in range(T):
                j = self.cache_features[self.cache_feature_ptr[i] + q2]
                for s in range(S):
                    self.WT[j, s] -= C * step * (row[q2 * S + s] - row0[q2 * S + s])
            for q2 in range(P):
                self.pair_v[q2] -= C * step * (row[T * S + q2] - row0[T * S + q2])
        self.clip()
        return gain

    cdef bint apply_weights(self, intp_t i, intp_t m, const double* dmu,
                            const double* mu) noexcept nogil:
        """Move the point weights to ``mu`` (a change ``dmu``) and the expected loss with
        them; return whether anything moved."""
        cdef intp_t pt
        cdef double v
        cdef bint changed = False
        for pt in range(m):
            if dmu[pt] != 0.0:
                changed = True
            self.vertex_weight[i, pt] = mu[pt]
        if not changed:
            return False
        v = self.anchor_weight(i) * self.anchor_loss[i]
        for pt in range(m):
            v += mu[pt] * self.vertex_loss[i, pt]
        self.expected_loss[i] = v
        return True

    cdef double master_uncached(self, intp_t i, intp_t lo, intp_t length, intp_t n_touched,
                                double tol) noexcept nogil:
        """Example ``i``'s master with the Gram matrix from its tokens (token or feature
        statistics, whichever is cheaper), the current token scores in ``w.scores`` and the
        points' entries and scores of the visit; apply it and return the gain."""
        cdef intp_t S = self.S, P = self.P, n_k = self.n_k, m = self.n_vertices[i]
        cdef intp_t stride = self.stride, pt, l, t, s, q2, e, kk, nnz_i
        cdef int64_t q
        cdef double* scores = self.w.scores
        cdef double* change
        cdef intp_t* moved = self.w.moved
        cdef intp_t n_moved, k
        cdef const double* A = self.w.anchor_node
        cdef const double* Ap = self.w.anchor_pair
        cdef double* G = self.w.master
        cdef double* D_k = G + MAX_POINTS * MAX_POINTS
        cdef double* base = D_k + 64 * MAX_POINTS
        cdef double* mu_old = base + MAX_POINTS
        cdef double* mu_best = mu_old + MAX_POINTS
        cdef double* work = mu_best + MAX_POINTS
        cdef double anchor_dot[MAX_POINTS]
        cdef double v_k[64]
        cdef double total, anchor_free_sq, token_cost, feature_cost, gain, v
        cdef double mass = 0.0, C = self.example_C(i)
        cdef double* pair_dense = self.w.pair_dense
        cdef double* WT = <double*> self.WT_ptr()
        cdef double* row
        cdef const double* row_scale
        cdef const int32_t* indices = self.indices_ptr()
        cdef const double* data = self.data_ptr()
        cdef const intp_t* index
        cdef const double* value
        cdef bint scaled = self.scale2.shape[0] > 0, plain
        # the Gram matrix of the directions d_k = C (E_a[Psi] - Psi(z_k)) over the
        # unconstrained coordinates; the constrained coordinates of d_k in D_k
        nnz_i = self.indptr[lo + length] - self.indptr[lo]
        token_cost = self.token_gram_cost(i, lo, length, m)
        # (the feature path's sums gather through the features' slots: about four times the
        # cost of the token path's dense loops per term, measured on CoNLL-2000)
        feature_cost = 4.0 * (<double> nnz_i * (S + 2 * m + 0.5 * m * m) + 2.0 * n_touched * S)
        if not scaled and <double> length * length <= self.gram_cap and (
                self.master_gram == 1 or self.master_gram == 0 and token_cost <= feature_cost):
            self.unary_gram_tokens(i, lo, length, m, self.w.gram_tokens,
                                   self.w.gram_tokens + length * length, G)
        else:
            self.unary_gram_features(lo, length, m, self.w.touched, n_touched,
                                     self.w.unary_stats, C, G)
        # (sums over the anchor's support, ascending: the same terms and order as over all
        # pairwise coordinates, without the zeros)
        # (plain: every pairwise coordinate free and unscaled, the sums without the masks
        # and scales, whose factors are 1: the same bits)
        plain = n_k == 0 and not scaled
        anchor_free_sq = 0.0
        for e in range(self.w.n_support):
            q2 = self.w.anchor_support[e]
            if plain:
                anchor_free_sq += Ap[q2] * Ap[q2]
            elif self.free_mask[q2]:
                anchor_free_sq += Ap[q2] * Ap[q2] * self.pair_scale(q2)
        for pt in range(m):
            anchor_dot[pt] = 0.0
            index = self.w.entry_index + pt * stride
            value = self.w.entry_value + pt * stride
            if plain:
                for e in range(self.w.entry_count[pt]):
                    anchor_dot[pt] += Ap[index[e]] * value[e]
                continue
            for e in range(self.w.entry_count[pt]):
                kk = index[e]
                if self.free_mask[kk]:
                    anchor_dot[pt] += Ap[kk] * value[e] * self.pair_scale(kk)
        for pt in range(m):
            index = self.w.entry_index + pt * stride
            value = self.w.entry_value + pt * stride
            for e in range(self.w.entry_count[pt]):
                pair_dense[index[e]] += value[e]
            for q2 in range(n_k):
                D_k[pt * 64 + q2] = C * (Ap[self.constrained[q2]]
                                         - pair_dense[self.constrained[q2]])
            for l in range(pt, m):
                total = anchor_free_sq - anchor_dot[pt] - anchor_dot[l]
                index = self.w.entry_index + l * stride
                value = self.w.entry_value + l * stride
                if plain:
                    for e in range(self.w.entry_count[l]):
                        total += pair_dense[index[e]] * value[e]
                else:
                    for e in range(self.w.entry_count[l]):
                        kk = index[e]
                        if self.free_mask[kk]:
                            total += pair_dense[kk] * value[e] * self.pair_scale(kk)
                G[pt * m + l] += C * C * total
                if l != pt:
                    G[l * m + pt] = G[pt * m + l]
            index = self.w.entry_index + pt * stride
            for e in range(self.w.entry_count[pt]):
                pair_dense[index[e]] = 0.0
        # the master: C (loss_k - loss_a) - v_free . d_k is the gradient at the current w
        # plus w_constrained . D_k
        for pt in range(m):
            mu_old[pt] = self.vertex_weight[i, pt]
            base[pt] = C * (self.vertex_loss[i, pt] - self.anchor_loss[i]
                            + self.w.point_score[pt] - self.anchor_score)
            for q2 in range(n_k):
                if self.pair_v[self.constrained[q2]] > 0.0:
                    base[pt] += self.pair_v[self.constrained[q2]] * D_k[pt * 64 + q2]
        for q2 in range(n_k):
            v_k[q2] = self.pair_v[self.constrained[q2]]
        gain = _solve_master(G, D_k, base, mu_old, m, v_k, n_k, tol, work, mu_best)
        # move v by sum_k (mu_k - weight_k) C (a - z_k)
        for pt in range(m):
            work[pt] = mu_best[pt] - mu_old[pt]
            mass += work[pt]
        if not self.apply_weights(i, m, work, mu_best):
            return 0.0
        for t in range(length):
            change = scores + t * S
            for s in range(S):
                change[s] = -mass * A[t * S + s]  # the change of x
            for pt in range(m):
                change[self.vertex_labels[lo + t, pt]] += work[pt]
            # a token's change is non-zero on the states of its anchor and points only:
            # when few, the rows of W^T move on those (a zero change leaves an entry's bits)
            n_moved = 0
            for s in range(S):
                if change[s] != 0.0:
                    moved[n_moved] = s
                    n_moved += 1
            # (through raw row pointers: the stores would otherwise reload the memoryviews)
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                row = WT + <intp_t> indices[q] * S
                v = C * data[q]
                if scaled:
                    row_scale = &self.scale2[<intp_t> indices[q] * S]
                    for s in range(S):
                        row[s] -= v * change[s] * row_scale[s]
                elif 4 * n_moved < S:
                    for k in range(n_moved):
                        s = moved[k]
                        row[s] -= v * change[s]
                else:
                    for s in range(S):
                        row[s] -= v * change[s]
        for e in range(self.w.n_support):
            q2 = self.w.anchor_support[e]
            self.pair_v[q2] += C * mass * Ap[q2] * self.pair_scale(q2)
        for pt in range(m):
            for e in range(self.w.entry_count[pt]):
                kk = self.w.entry_index[pt * stride + e]
                self.pair_v[kk] -= C * work[pt] * self.w.entry_value[pt * stride + e] \
                    * self.pair_scale(kk)
        self.clip()
        return gain

    # --------------------------------------------------------------- one visit
    cdef double score_example(self, intp_t i, intp_t lo, intp_t length, intp_t* n_touched,
                              double* loss_bar, double* hinge) noexcept nogil:
        """The token scores (``w.scores``), the most violating labelling (``w.labels``) and
        the scores of the anchor and the points of example ``i`` at the current weights;
        returns the example's Frank-Wolfe gap at its point ``x``. ``n_touched`` receives the
        number of its distinct features (listed in ``w.touched``), ``loss_bar`` the
        labelling's loss and ``hinge`` (when not NULL: a certificate's call, with the exact
        oracle) the structured hinge ``H_i``; without ``hinge`` (a visit) the labelling is
        the kernels' candidate."""
        n_touched[0] = token_scores(&self.indptr[0], self.indices_ptr(), self.data_ptr(),
                                    self.WT_ptr(), self.S, lo, length, self.w.scores,
                                    &self.slot[0], self.w.touched)
        release(&self.slot[0], self.w.touched, n_touched[0])
        loss_bar[0] = self.loss_augmented_oracle(i, lo, length, self.w.scores, self.w.labels,
                                                 hinge != NULL)
        return self.gap_at_scores(i, lo, length, self.w.labels, loss_bar[0], hinge)

    cdef double gap_at_scores(self, intp_t i, intp_t lo, intp_t length,
                              const int64_t* labels, double loss_bar,
                              double* hinge) noexcept nogil:
        """The scores of the anchor and the points of example ``i`` from the token scores in
        ``w.scores``, and the example's Frank-Wolfe gap at its point ``x`` towards
        ``labels`` (of loss ``loss_bar``); ``hinge`` (when not NULL) receives the structured
        hinge ``H_i`` (``labels`` then the most violating labelling at those scores)."""
        cdef intp_t S = self.S, t, pt, e
        cdef intp_t* index = self.w.entry_index + self.r * self.stride
        cdef double* value = self.w.entry_value + self.r * self.stride
        cdef double total = 0.0, x_score, truth
        cdef double* scores = self.w.scores
        # the scores of the anchor and the points, and of x, their mixture: from the cached
        # rows once the example has them, else from the unpacked anchor and the labels
        if self.cached and self.cache_ready[i]:
            self.anchor_score = self.row_score(i, 0)
            for pt in range(self.n_vertices[i]):
                self.w.point_score[pt] = self.row_score(i, 1 + pt)
        else:
            self.load_anchor(i, lo, length)
            total = 0.0
            for t in range(length):
                total += dot(scores + t * S, self.w.anchor_node + t * S, S)
            for e in range(self.w.n_support):
                total += self.theta[self.w.anchor_support[e]] \
                    * self.w.anchor_pair[self.w.anchor_support[e]]
            self.anchor_score = total
            for pt in range(self.n_vertices[i]):
                self.point_entries(i, lo, length, pt)
        x_score = self.anchor_weight(i) * self.anchor_score
        for pt in range(self.n_vertices[i]):
            x_score += self.vertex_weight[i, pt] * self.w.point_score[pt]
        # the example's Frank-Wolfe gap at x
        total = 0.0
        for t in range(length):
            total += scores[t * S + labels[t]]
        for e in range(self.kernels.pairwise_entries(i, labels, index, value)):
            total += self.theta[index[e]] * value[e]
        if hinge != NULL:
            truth = 0.0
            for t in range(length):
                truth += scores[t * S + self.Y[lo + t]]
            for e in range(self.kernels.pairwise_entries(i, &self.Y[lo], index, value)):
                truth += self.theta[index[e]] * value[e]
            hinge[0] = loss_bar + total - truth
        return self.example_C(i) * (loss_bar - self.expected_loss[i] + total - x_score)

    cdef int gap_and_hinge(self, intp_t i, double* gap, double* hinge) except -1 nogil:
        cdef intp_t n_touched
        cdef double loss_bar
        gap[0] = self.score_example(i, self.offsets[i], self.offsets[i + 1] - self.offsets[i],
                                    &n_touched, &loss_bar, hinge)
        if hinge[0] < 0.0:  # (max(0, ...): an oracle that missed the true labelling)
            hinge[0] = 0.0
        return 0

    cdef int visit(self, intp_t i, double* gap_out, double* gain) except -1 nogil:
        """One oracle call and master on example ``i``; its Frank-Wolfe gap into
        ``gap_out``, the master's gain added to ``gain``."""
        cdef intp_t lo = self.offsets[i], n_touched
        cdef double loss_bar, gap
        gap = self.score_example(i, lo, self.offsets[i + 1] - lo, &n_touched, &loss_bar, NULL)
        return self.take_step(i, self.w.labels, loss_bar, n_touched, gap, gap_out, gain)

    cdef int take_step(self, intp_t i, const int64_t* labels, double loss_bar,
                       intp_t n_touched, double gap, double* gap_out,
                       double* gain) except -1 nogil:
        """The step of a visit of example ``i`` once its token scores (``w.scores``), the
        scores of its anchor and points and its gap ``gap`` towards the oracle's
        ``labels`` (of loss ``loss_bar``) are known: keep the labelling as a point and
        solve the master (``n_touched`` distinct features, listed in ``w.touched``)."""
        cdef intp_t lo = self.offsets[i], slot, K
        cdef intp_t length = self.offsets[i + 1] - lo
        cdef bint folded
        self.block_gap[i] = gap
        gap_out[0] = gap
        folded = self.n_vertices[i] == self.r
        if self.cached:
            self.set_slots(i, True)
            if not self.cache_ready[i]:  # the anchor's row, from its node measures
                self.cache_row(i, lo, length, -1, &self.cache[self.cache_ptr[i]])
                self.cache_ready[i] = 1
        slot = self.add_point(i, lo, length, labels, loss_bar)
        folded = folded and slot >= 0
        if slot >= 0:
            self.point_entries(i, lo, length, slot)
            if self.cached:
                K = self.row_size(i)
                self.cache_row(i, lo, length, slot,
                               &self.cache[self.cache_ptr[i] + (1 + slot) * K])
        if self.cached:
            self.set_slots(i, False)
            gain[0] += self.master_cached(i, lo, length, 1e-6 * fabs(gap) + 1e-300)
        else:
            gain[0] += self.master_uncached(i, lo, length, n_touched,
                                            1e-6 * fabs(gap) + 1e-300)
        if folded and not self.cached:  # (the cached rows hold the anchor)
            self.store_anchor(i, length)
        return 0

    cdef intp_t visit_sequence(self, const int64_t* sequence, intp_t n,
                               Progress* progress) except -1 nogil:
        """Visit ``sequence`` in turn: pipelined visits (:class:`_Pipeline`) in the
        uncached mode, otherwise one visit after the other."""
        if self.pipeline is not None:
            return self.pipeline.run(self, sequence, n, progress)
        return DualPass.visit_sequence(self, sequence, n, progress)

    # --------------------------------------------------------------- pipelined visits
    cdef void partial_stage(self, intp_t i, const _Handoff* before,
                            _Handoff* h) noexcept nogil:
        """The first stage of a pipelined visit of example ``i`` (see :class:`_Pipeline`):
        its token scores over the stored entries whose feature the example before
        (``before``; NULL when none) does not have, in their order (``h.partial``), the
        others listed (``h.shared``) and its distinct features. Reads the rows of ``W^T``
        of those features only, and this pass's own ``mark``."""
        cdef intp_t S = self.S, lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef intp_t t, s, k, n_touched = 0, n_shared = 0
        cdef int64_t q, end = self.indptr[lo + length]
        cdef int32_t j
        cdef uint8_t flags
        cdef double v
        cdef const double* WT = self.WT_ptr()
        cdef const double* row
        cdef double* partial = h.partial
        cdef uint8_t* mark = &self.mark[0]
        for t in range(length):
            for s in range(S):
                partial[t * S + s] = 0.0
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                if q + PREFETCH_FEATURES < end:
                    j = self.indices[q + PREFETCH_FEATURES]
                    row = WT + j * S
                    for s in range(0, S, 8):
                        SKS_PREFETCH(row + s)
                    SKS_PREFETCH(row + S - 1)
                    SKS_PREFETCH(mark + j)
                j = self.indices[q]
                flags = mark[j]
                if not flags & 2:
                    mark[j] = flags | 2
                    h.touched[n_touched] = j
                    n_touched += 1
                if flags & 1:
                    h.shared[n_shared] = q
                    h.shared_token[n_shared] = <int32_t> t
                    n_shared += 1
                    continue
                v = self.data[q]
                for s in range(S):
                    partial[t * S + s] += v * WT[j * S + s]
        h.n_touched = n_touched
        h.n_shared = n_shared
        # bit 1 moves from the example before's features to this one's
        if before != NULL:
            for k in range(before.n_touched):
                mark[before.touched[k]] &= ~1
        for k in range(n_touched):
            mark[h.touched[k]] = 1

    cdef void clear_marks(self, const _Handoff* h) noexcept nogil:
        """Unmark the features of ``h``'s example (the last oracle of a pipelined run)."""
        cdef intp_t k
        for k in range(h.n_touched):
            self.mark[h.touched[k]] = 0

    cdef int master_stage(self, intp_t i, _Handoff* h, double* gap_out,
                          double* gain) except -1 nogil:
        """The second stage of a pipelined visit of example ``i`` after
        :meth:`partial_stage` (``h``), once the example before's master wrote the weights:
        the token scores (``h.partial``, completed in place by the shared entries in their
        order; the visit's ``w.scores`` meanwhile), the oracle, and the step (as
        :meth:`visit`)."""
        cdef intp_t S = self.S, lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef intp_t t, s, k
        cdef int64_t q
        cdef int32_t j
        cdef double v, gap, loss_bar
        cdef const double* WT = self.WT_ptr()
        cdef double* scores = h.partial  # (the visit's token scores, completed in place)
        cdef double* own_scores = self.w.scores
        for k in range(h.n_shared):
            q = h.shared[k]
            t = h.shared_token[k]
            j = self.indices[q]
            v = self.data[q]
            for s in range(S):
                scores[t * S + s] += v * WT[j * S + s]
        for k in range(h.n_touched):
            self.w.touched[k] = h.touched[k]
        self.w.scores = scores
        try:
            loss_bar = self.loss_augmented_oracle(i, lo, length, scores, self.w.labels,
                                                  False)
            gap = self.gap_at_scores(i, lo, length, self.w.labels, loss_bar, NULL)
            return self.take_step(i, self.w.labels, loss_bar, h.n_touched, gap, gap_out,
                                  gain)
        finally:
            self.w.scores = own_scores

    cdef double add_statistics(self, intp_t i, double* pair_sum) noexcept nogil:
        """Add ``C s_i X_i^T (onehot(y_i) - x_i)`` to ``W^T`` and ``x_i``'s pairwise
        statistics times ``s_i`` (the example's sample weight) to ``pair_sum``; return
        ``x_i``'s expected loss."""
        cdef intp_t S = self.S, lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef intp_t t, s, pt, e, m = self.n_vertices[i]
        cdef int64_t q
        cdef int32_t j
        cdef double v, weight = self.anchor_weight(i), loss = weight * self.anchor_loss[i]
        cdef double C = self.example_C(i), s_i = self.example_weight[i]
        cdef double* d = self.w.scores
        if self.cached and self.cache_ready[i]:
            return self.add_row_statistics(i, pair_sum)
        self.load_anchor(i, lo, length)
        for t in range(length):
            for s in range(S):
                d[s] = -weight * self.w.anchor_node[t * S + s]
            for pt in range(m):
                d[self.vertex_labels[lo + t, pt]] -= self.vertex_weight[i, pt]
            d[self.Y[lo + t]] += 1.0
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                j = self.indices[q]
                v = C * self.data[q]
                for s in range(S):
                    self.WT[j, s] += v * d[s]
        for e in range(self.w.n_support):
            pair_sum[self.w.anchor_support[e]] += \
                s_i * weight * self.w.anchor_pair[self.w.anchor_support[e]]
        for pt in range(m):
            self.point_entries(i, lo, length, pt, False)
            for e in range(self.w.entry_count[pt]):
                pair_sum[self.w.entry_index[pt * self.stride + e]] += \
                    s_i * self.vertex_weight[i, pt] * self.w.entry_value[pt * self.stride + e]
            loss += self.vertex_weight[i, pt] * self.vertex_loss[i, pt]
        return loss


    cdef double add_row_statistics(self, intp_t i, double* pair_sum) noexcept nogil:
        """:meth:`add_statistics` from example ``i``'s cached rows (``X_i^T x_i`` on its
        features and ``x_i``'s pairwise statistics: the weighted sum of its rows)."""
        cdef intp_t S = self.S, lo = self.offsets[i], length = self.offsets[i + 1] - lo
        cdef intp_t T = self.cache_feature_ptr[i + 1] - self.cache_feature_ptr[i]
        cdef intp_t K = self.row_size(i), t, s, k, q2, m = self.n_vertices[i]
        cdef int64_t q
        cdef int32_t j
        cdef const double* row = &self.cache[self.cache_ptr[i]]
        cdef double mu, C = self.example_C(i), s_i = self.example_weight[i], loss = 0.0
        for t in range(length):
            for q in range(self.indptr[lo + t], self.indptr[lo + t + 1]):
                self.WT[self.indices[q], self.Y[lo + t]] += C * self.data[q]
        for k in range(m + 1):
            mu = self.anchor_weight(i) if k == 0 else self.vertex_weight[i, k - 1]
            loss += mu * (self.anchor_loss[i] if k == 0 else self.vertex_loss[i, k - 1])
            if mu == 0.0:
                continue
            for q2 in range(T):
                j = self.cache_features[self.cache_feature_ptr[i] + q2]
                for s in range(S):
                    self.WT[j, s] -= C * mu * row[k * K + q2 * S + s]
            for q2 in range(self.P):
                pair_sum[q2] += s_i * mu * row[k * K + T * S + q2]
        return loss


cdef enum:
    # shorter runs of visits take the pipelined visits' steps on one thread (the same
    # arithmetic: starting the oracle's thread would cost more than it saves)
    PIPELINE_MIN_VISITS = 32
    # a run of pipelined visits goes on one thread when, within a window of this many
    # visits, ...
    PIPELINE_WINDOW = 64

# ... at least this many waited for the first stage beyond SLOW_WAIT_ROUNDS rounds (the
# second thread was off its core: another process competes for the cores); module-level so
# that tests can force it
PIPELINE_SLOW_WAITS = 16
SLOW_WAIT_ROUNDS = SPIN_ROUNDS


cdef class _Pipeline:
    """Visits of the uncached multi-point pass in two stages: on a second thread, the
    :meth:`_MultiPoint.partial_stage` of the example after next beside this thread's
    :meth:`_MultiPoint.master_stage` of the next one.

    Example ``k``'s token scores are summed first over its stored entries whose features
    example ``k - 1`` does not have (about three quarters of them on CoNLL-2000): example
    ``k - 1``'s master moves only the rows of ``W^T`` of its own features, so that part
    can be summed once example ``k - 2``'s master is done. The master stage adds the other
    entries, in their order, at the current weights, then runs the oracle and the step. On
    one thread the two stages run one after the other with the same sums, so the iterates
    do not depend on the number of threads (and are those of one visit after the other up
    to the order of the score sums)."""
    cdef _MultiPoint scorer
    cdef _Handoff h[2]
    cdef int64_t go, done, stop, exited  # (shared by the threads: atomic loads and stores)
    cdef const int64_t* sequence
    cdef intp_t length, slow_waits, slow_rounds
    cdef public intp_t n_fallbacks  # runs that went on one thread part-way
    cdef object threads, worker

    def __init__(self, _MultiPoint master, state, intp_t n_threads):
        """Stages for the visits of ``master`` (bound to ``state``, uncached) on
        ``n_threads`` threads (1 or 2)."""
        cdef intp_t k, size = master.max_len * master.S
        if master.cached:
            raise ValueError("pipelined visits need the uncached mode.")
        if n_threads > 1:
            self.threads = ThreadPoolExecutor(1)
            # (its thread started here, before any pass: a pass's submit then reuses it and
            # starts none, so a Ctrl-C cannot come from a Thread.start inside the pass)
            self.threads.submit(int).result()
        self.slow_waits = PIPELINE_SLOW_WAITS
        self.slow_rounds = SLOW_WAIT_ROUNDS
        self.n_fallbacks = 0
        self.scorer = master
        master.mark = np.zeros(master.WT.shape[0], dtype=np.uint8)
        for k in range(2):
            self.h[k].partial = <double*> malloc(size * sizeof(double))
            self.h[k].touched = <int32_t*> malloc(master.max_nnz * sizeof(int32_t))
            self.h[k].shared = <int64_t*> malloc(master.max_nnz * sizeof(int64_t))
            self.h[k].shared_token = <int32_t*> malloc(master.max_nnz * sizeof(int32_t))
            self.h[k].n_touched = 0
            if (self.h[k].partial == NULL or self.h[k].touched == NULL
                    or self.h[k].shared == NULL or self.h[k].shared_token == NULL):
                raise MemoryError("could not allocate the pipelined visits' workspace")

    def __dealloc__(self):
        cdef intp_t k
        for k in range(2):
            free(self.h[k].partial)
            free(self.h[k].touched)
            free(self.h[k].shared)
            free(self.h[k].shared_token)

    def close(self):
        """Stop the second thread; drop the reference to the pass."""
        if self.threads is not None:
            self.threads.shutdown()
            self.threads = None
        self.scorer = None

    cdef intp_t run(self, _MultiPoint master, const int64_t* sequence, intp_t n,
                    Progress* progress) except -1 nogil:
        """Visit ``sequence[0 .. n - 1]`` in turn (as ``DualPass.visit_sequence``);
        returns the visits made."""
        cdef bint threaded = self.threads is not None and n >= PIPELINE_MIN_VISITS
        if n == 0:
            return 0
        self.sequence = sequence
        self.length = n
        sks_store_release(<long long*> &self.done, 0)
        if threaded:
            sks_store_release(<long long*> &self.go, 2)
            sks_store_release(<long long*> &self.stop, 0)
            sks_store_release(<long long*> &self.exited, 0)
        try:
            if threaded:
                # (inside the try: a Ctrl-C in the pool's Thread.start, after the job was
                # queued, must still stop the job that its thread then runs)
                with gil:
                    self.worker = self.threads.submit(_serve_partials, self)
            return self.run_visits(master, progress, threaded)
        finally:
            if threaded:
                sks_store_release(<long long*> &self.stop, 1)
                with gil:
                    if self.worker is not None:
                        self.worker.result()
                        self.worker = None
            if self.done > 0:  # (the marks hold the last summed example's features)
                self.scorer.clear_marks(&self.h[(self.done - 1) % 2])

    cdef intp_t run_visits(self, _MultiPoint master, Progress* progress,
                           bint threaded) except -1 nogil:
        """The master stages, each after its example's first stage: summed by
        :meth:`serve` on the other thread when ``threaded``, else here just before.

        A threaded run whose waits for the first stage are often long (at least
        ``PIPELINE_SLOW_WAITS`` of a window of ``PIPELINE_WINDOW`` visits beyond
        ``SLOW_WAIT_ROUNDS`` rounds: the other thread was off its core) stops the other
        thread and goes on here, one stage after the other: the same sums in the same order,
        so the same iterates."""
        cdef intp_t k, i, n = self.length, slow = 0
        cdef double gap = 0.0, before
        for k in range(n):
            i = self.sequence[k]
            check_signals_every(&progress.since_check,
                                master.offsets[i + 1] - master.offsets[i], SIGNAL_CHECK_TOKENS)
            if threaded:
                if k % PIPELINE_WINDOW == 0:
                    slow = 0
                if _wait_until(&self.done, k + 1) >= self.slow_rounds:
                    slow += 1
                if slow >= self.slow_waits:
                    # (the other thread leaves at its next check, after the first stage it
                    # may be summing; every first stage up to done is then complete)
                    sks_store_release(<long long*> &self.stop, 1)
                    _wait_until(&self.exited, 1)
                    threaded = False
                    self.n_fallbacks += 1
            elif sks_load_acquire(<long long*> &self.done) < k + 1:
                self.scorer.partial_stage(i, &self.h[(k + 1) % 2] if k > 0 else NULL,
                                          &self.h[k % 2])
                sks_store_release(<long long*> &self.done, k + 1)
            before = master.block_gap[i]
            master.master_stage(i, &self.h[k % 2], &gap, &progress.gain)
            if record_visit(progress, before, gap):
                return k + 1
            if threaded:
                sks_store_release(<long long*> &self.go, k + 3)
        return n

    cdef void serve(self) noexcept nogil:
        """The first stages, example ``k``'s once the master of example ``k - 2`` is
        done; ``exited`` is set on the way out."""
        self.serve_stages()
        sks_store_release(<long long*> &self.exited, 1)

    cdef void serve_stages(self) noexcept nogil:
        cdef intp_t k, rounds
        for k in range(self.length):
            rounds = 0
            while sks_load_acquire(<long long*> &self.go) <= k:
                if sks_load_acquire(<long long*> &self.stop):
                    return
                rounds += 1
                if rounds < SPIN_ROUNDS:
                    sks_pause()
                else:
                    sched_yield()
            if sks_load_acquire(<long long*> &self.stop):
                return
            self.scorer.partial_stage(self.sequence[k],
                                      &self.h[(k + 1) % 2] if k > 0 else NULL,
                                      &self.h[k % 2])
            sks_store_release(<long long*> &self.done, k + 1)


def _serve_partials(_Pipeline pipeline):
    """The second thread of a pipelined run (:meth:`_Pipeline.serve`)."""
    with nogil:
        pipeline.serve()


cdef _MultiPoint _bind(state, n_threads):
    """A multi-point pass over ``state``: pipelined visits on ``n_threads`` (1 or 2) threads
    when the state takes them (``state.two_stage``: uncached mode)."""
    cdef _MultiPoint p = _MultiPoint(state)
    if state.two_stage:
        p.pipeline = _Pipeline(p, state, min(max(int(n_threads), 1), 2))
    return p


cdef void _unbind(_MultiPoint p, state):
    """Stop a pass's pipeline (its thread; the reference cycle through the pass); add its
    runs that went on one thread part-way to ``state.pipeline_fallbacks``."""
    if p.pipeline is not None:
        state.pipeline_fallbacks += p.pipeline.n_fallbacks
        p.pipeline.close()
        p.pipeline = None


def shared_entry_fraction(batch, intp_t n_features, intp_t max_pairs=512):
    """The fraction of the stored entries of example ``k + n // 2`` whose feature example
    ``k`` has, over ``k < min(n // 2, max_pairs)`` (``n`` examples; 1.0 for fewer than
    two): about the share of a visit's token scores that the example visited before leaves
    to the second stage of the pipelined visits (:class:`_Pipeline`) in a random order."""
    cdef const int64_t[::1] indptr, offsets = batch.offsets
    cdef const int32_t[::1] indices
    cdef intp_t n = offsets.shape[0] - 1, half = n // 2, pairs = min(n // 2, max_pairs), k
    cdef int64_t q, shared = 0, total = 0
    indptr, indices, _ = batch.csr_arrays
    if pairs == 0:
        return 1.0
    if indices.shape[0] and (np.min(np.asarray(indices)) < 0
                             or np.max(np.asarray(indices)) >= n_features):
        raise ValueError("the batch's features are outside 0 .. n_features - 1.")
    mark_array = np.zeros(n_features, dtype=np.uint8)
    cdef uint8_t[::1] mark = mark_array
    with nogil:
        for k in range(pairs):
            for q in range(indptr[offsets[k]], indptr[offsets[k + 1]]):
                mark[indices[q]] = 1
            for q in range(indptr[offsets[k + half]], indptr[offsets[k + half + 1]]):
                shared += mark[indices[q]]
                total += 1
            for q in range(indptr[offsets[k]], indptr[offsets[k + 1]]):
                mark[indices[q]] = 0
    return <double> shared / total if total else 1.0


def multi_point_pass(state, const int64_t[::1] order, n_threads=1):
    """Visit the examples of ``order`` in turn (restricted simplicial decomposition with one
    simplex per example; in the uncached mode pipelined on ``n_threads`` threads, at most 2,
    with the same iterates on any number: :class:`_Pipeline`); return the sum of their
    Frank-Wolfe gaps and the dual's increase."""
    cdef _MultiPoint p = _bind(state, n_threads)
    cdef Progress progress
    memset(&progress, 0, sizeof(Progress))
    progress.target_gap = -INFINITY
    try:
        if order.shape[0]:
            with nogil:
                p.visit_sequence(&order[0], order.shape[0], &progress)
    finally:
        _unbind(p, state)
    return progress.total_gap, progress.gain


def master_sweep(state, const int64_t[::1] order):
    """Re-solve the masters of the examples of ``order`` from their cached points, without
    oracle calls (cached mode only); return the dual's increase."""
    cdef _MultiPoint p = _MultiPoint(state)
    cdef intp_t k, i, lo, since_check = 0
    cdef double gain = 0.0
    if not p.cached:
        raise ValueError("master sweeps need the cached mode.")
    with nogil:
        for k in range(order.shape[0]):
            i = order[k]
            lo = p.offsets[i]
            check_signals_every(&since_check, p.offsets[i + 1] - lo, SIGNAL_CHECK_TOKENS)
            if p.cache_ready[i] and p.n_vertices[i] > 0:
                gain += p.master_cached(i, lo, p.offsets[i + 1] - lo, 1e-12)
    return gain


def statistics_weights(state):
    """Add ``v``'s unary block ``C sum_i s_i X_i^T (onehot(y_i) - x_i)`` to ``state.WT``
    (zero beforehand; ``s_i`` the sample weights), set every example's expected loss from
    its point, and return the weighted sum of pairwise statistics ``sum_i s_i
    E_{x_i}[Psi_pairwise]`` (one streaming pass over the examples, no array per token)."""
    cdef _MultiPoint p = _MultiPoint(state)
    cdef intp_t i, since_check = 0
    pair_sum_array = np.zeros(p.P)
    cdef double[::1] pair_sum = pair_sum_array
    cdef double* pair_sum_ptr = &pair_sum[0] if p.P > 0 else NULL
    with nogil:
        for i in range(p.offsets.shape[0] - 1):
            check_signals_every(&since_check, p.offsets[i + 1] - p.offsets[i], SIGNAL_CHECK_TOKENS)
            p.expected_loss[i] = p.add_statistics(i, pair_sum_ptr)
    return pair_sum_array


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
    which do not track it). The uncached mode's visits are pipelined on ``n_threads``
    threads (at most 2; the same iterates on any number: :class:`_Pipeline`)."""
    cdef DualPass p
    if max_visits < 0 or min_visits < 0:
        raise ValueError("max_visits and min_visits must be non-negative.")
    n = state.batch.n_sequences
    if active.shape[0] and (np.min(np.asarray(active)) < 0
                             or np.max(np.asarray(active)) >= n):
        raise ValueError(f"active holds examples outside 0 .. {n - 1}.")
    p = _bind(state, n_threads)
    try:
        return sweep_active(p, active, threshold, stop_gap, max_visits, target_gap,
                            min_visits, seed)
    finally:
        _unbind(<_MultiPoint> p, state)


def certificate_pass(state, n_threads=1):
    """Every example's structured hinge ``H_i`` and Frank-Wolfe gap at the state's weights
    (``WT`` and ``theta``), one example at a time (an oracle call each, no step): at one
    ``w = w(alpha)`` the gaps sum to the duality gap ``P(w) - D(alpha)``. On ``n_threads``
    threads, with the same arrays (``certify_examples``). Returns ``(hinge, gaps)``."""
    return certify_examples(_MultiPoint, state, n_threads)
