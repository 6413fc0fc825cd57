"""Block coordinate ascent on the n-slack dual with the weights kept explicitly.

Constraint ``k`` of example ``i`` has direction ``g_k = [D_k^T X_i, p_k]`` with the token x state
matrix ``D_k`` stored as entries (token, true state, wrong state, scale): ``+scale`` on the true
state and ``-scale`` on the wrong one. The dual

    max_a  sum_k a_k c_k - 1/2 ||sum_k a_k g_k||^2,   a >= 0,  sum_{k in block i} a_k <= C_i

is optimised one block (example) at a time: the block's margins ``w . g_k`` are computed from the
CSR token rows, the block QP is solved by SMO with the rest fixed, and the weights ``W^T``
(n_features x n_states) and pairwise parameters are updated in place. The block's Gram matrix
does not depend on the weights: :class:`BlockGramCache` keeps it, and a sweep computes only the
rows of the constraints added since the block was last visited (through an accumulator over
the example's distinct features, whose slots the solver's ``slot`` array gives).

The functions take the solver's state (:class:`~._n_slack.NSlackSolver`), whose arrays a
typed :class:`_Constraints` binds once per call, as every compiled pass of the learners does.
"""

import numpy as np

from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

from sklstruct._signals cimport check_signals_every
from sklstruct._solvers._smo cimport _group_violation, smo_capped_simplices
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t
from sklstruct.learners._example_rows cimport release, sequence_sizes


cdef class _Constraints:
    """The token rows, weights and stored constraints of an n-slack solver, typed."""
    cdef const int64_t[::1] indptr, entry_ptr, tok, serial, pair_ptr, pair_index
    cdef const int32_t[::1] indices, true_state, wrong_state
    cdef const float64_t[::1] data, scale, pair_value
    cdef float64_t[:, ::1] WT
    cdef float64_t[::1] theta

    def __init__(self, solver):
        constraints = solver.constraints
        self.indptr, self.indices, self.data = solver.indptr, solver.indices, solver.data
        self.WT, self.theta = solver.WT, solver.theta
        self.entry_ptr = constraints.entry_ptr.data
        self.tok = constraints.tokens.data
        self.serial = constraints.serial.data
        self.true_state = constraints.true_state.data
        self.wrong_state = constraints.wrong_state.data
        self.scale = constraints.scale.data
        self.pair_ptr = constraints.pair_ptr.data
        self.pair_index = constraints.pair_index.data
        self.pair_value = constraints.pair_value.data

    cdef inline float64_t row_dot(self, int64_t t, int32_t a, int32_t b) noexcept nogil:
        """``x_t . (W[a] - W[b])``."""
        cdef int64_t q
        cdef float64_t total = 0.0
        for q in range(self.indptr[t], self.indptr[t + 1]):
            total += self.data[q] * (self.WT[self.indices[q], a] - self.WT[self.indices[q], b])
        return total

    cdef float64_t margin(self, int64_t k) noexcept nogil:
        """``w . g_k``."""
        cdef int64_t e
        cdef float64_t total = 0.0
        for e in range(self.entry_ptr[k], self.entry_ptr[k + 1]):
            total += self.scale[e] * self.row_dot(self.tok[e], self.true_state[e],
                                                  self.wrong_state[e])
        return self.add_pairwise_margin(k, total)

    cdef inline float64_t add_pairwise_margin(self, int64_t k, float64_t total) noexcept nogil:
        """``total`` plus the product of ``g_k``'s pairwise part and ``theta``."""
        cdef int64_t r
        for r in range(self.pair_ptr[k], self.pair_ptr[k + 1]):
            total += self.pair_value[r] * self.theta[self.pair_index[r]]
        return total

    cdef float64_t margin_memo(self, int64_t k, int64_t first_token, float64_t* memo,
                               int64_t* memo_stamp, int64_t stamp) noexcept nogil:
        """:meth:`margin` with the row products ``x_t . (W[y_t] - W[b])`` of one example's
        constraints shared: an example's constraints repeat its wrong tokens (the true state
        of a token is its label), so each ``(t, b)`` is computed once per ``stamp`` into
        ``memo[(t - first_token) * n_states + b]``. The same terms in the same order."""
        cdef int64_t e, key, n_states = self.WT.shape[1]
        cdef float64_t total = 0.0
        for e in range(self.entry_ptr[k], self.entry_ptr[k + 1]):
            key = (self.tok[e] - first_token) * n_states + self.wrong_state[e]
            if memo_stamp[key] != stamp:
                memo[key] = self.row_dot(self.tok[e], self.true_state[e], self.wrong_state[e])
                memo_stamp[key] = stamp
            total += self.scale[e] * memo[key]
        return self.add_pairwise_margin(k, total)

    cdef float64_t add_pairwise_dot(self, int64_t k, int64_t kk,
                                    float64_t total) noexcept nogil:
        """``total`` plus the product of the pairwise parts of ``g_k`` and ``g_kk`` (a merge
        of their ascending nonzero entries, added one by one)."""
        cdef int64_t a = self.pair_ptr[k], a_end = self.pair_ptr[k + 1]
        cdef int64_t b = self.pair_ptr[kk], b_end = self.pair_ptr[kk + 1]
        while a < a_end and b < b_end:
            if self.pair_index[a] < self.pair_index[b]:
                a += 1
            elif self.pair_index[a] > self.pair_index[b]:
                b += 1
            else:
                total += self.pair_value[a] * self.pair_value[b]
                a += 1
                b += 1
        return total

    cdef void add_direction(self, int64_t k, float64_t step) noexcept nogil:
        """``w += step * g_k``."""
        cdef int64_t e, q, t
        cdef float64_t v
        for e in range(self.entry_ptr[k], self.entry_ptr[k + 1]):
            t = self.tok[e]
            v = step * self.scale[e]
            for q in range(self.indptr[t], self.indptr[t + 1]):
                self.WT[self.indices[q], self.true_state[e]] += v * self.data[q]
                self.WT[self.indices[q], self.wrong_state[e]] -= v * self.data[q]
        for q in range(self.pair_ptr[k], self.pair_ptr[k + 1]):
            self.theta[self.pair_index[q]] += step * self.pair_value[q]


cdef class BlockGramCache:
    """The Gram matrix ``G_uv = g_u . g_v`` of every block's constraints, with the serial
    numbers of the constraints it was computed for (in block order)."""
    cdef float64_t **gram
    cdef int64_t **serial
    cdef int64_t *size
    cdef int64_t *capacity
    cdef int64_t n_blocks

    def __cinit__(self, int64_t n_blocks):
        self.n_blocks = n_blocks
        self.gram = <float64_t**> calloc(n_blocks + 1, sizeof(float64_t*))
        self.serial = <int64_t**> calloc(n_blocks + 1, sizeof(int64_t*))
        self.size = <int64_t*> calloc(n_blocks + 1, sizeof(int64_t))
        self.capacity = <int64_t*> calloc(n_blocks + 1, sizeof(int64_t))
        if (self.gram == NULL or self.serial == NULL or self.size == NULL
                or self.capacity == NULL):
            raise MemoryError("could not allocate the n-slack Gram cache")

    def __dealloc__(self):
        cdef int64_t b
        if self.gram != NULL:
            for b in range(self.n_blocks):
                free(self.gram[b])
        if self.serial != NULL:
            for b in range(self.n_blocks):
                free(self.serial[b])
        free(self.gram)
        free(self.serial)
        free(self.size)
        free(self.capacity)

    def matrix(self, int64_t blk):
        """``(gram, serial)``: copies of the matrix kept for block ``blk`` and the serial
        numbers of its constraints (empty before the block's first sweep)."""
        if not 0 <= blk < self.n_blocks:
            raise IndexError("block %d out of range [0, %d)" % (blk, self.n_blocks))
        cdef int64_t m = self.size[blk], u
        gram = np.empty((m, m))
        serial = np.empty(m, dtype=np.int64)
        for u in range(m * m):
            gram.flat[u] = self.gram[blk][u]
        for u in range(m):
            serial[u] = self.serial[blk][u]
        return gram, serial

    cdef int store(self, int64_t blk, int64_t m, const float64_t *gram,
                   const int64_t *serial) noexcept nogil:
        """Keep ``gram`` (m x m) and ``serial`` for block ``blk``; -1 if out of memory."""
        cdef float64_t *g
        cdef int64_t *s
        if m > self.capacity[blk]:
            g = <float64_t*> realloc(self.gram[blk], m * m * sizeof(float64_t))
            if g == NULL:
                return -1
            self.gram[blk] = g
            s = <int64_t*> realloc(self.serial[blk], m * sizeof(int64_t))
            if s == NULL:
                return -1
            self.serial[blk] = s
            self.capacity[blk] = m
        memcpy(self.gram[blk], gram, m * m * sizeof(float64_t))
        memcpy(self.serial[blk], serial, m * sizeof(int64_t))
        self.size[blk] = m
        return 0


cdef intp_t _assign_slots(_Constraints c, int64_t lo, int64_t hi, int32_t* slot,
                         int32_t* touched) noexcept nogil:
    """Give the distinct features of the tokens ``lo .. hi`` the slots ``0, 1, ...`` (in
    ``slot``, -1 for the others: :func:`release` restores it), listed in ``touched``;
    returns their count."""
    cdef int64_t q
    cdef int32_t j
    cdef intp_t n = 0
    for q in range(c.indptr[lo], c.indptr[hi]):
        j = c.indices[q]
        if slot[j] < 0:
            slot[j] = <int32_t> n
            touched[n] = j
            n += 1
    return n


cdef intp_t _block_gram(_Constraints c, BlockGramCache cache, int64_t blk,
                        const int64_t *block, int64_t m, int64_t lo, int64_t hi,
                        int64_t *serial, int64_t *old_position, float64_t *gram,
                        double *scratch, int32_t *slot, int32_t *touched) noexcept nogil:
    """Fill ``gram`` (m x m) with the Gram matrix of the constraints ``block[:m]`` of the
    example of tokens ``lo .. hi``, taking the entries of constraints already in the cached
    matrix of ``blk`` from it; returns the number of the example's features given slots
    (0 when every entry was cached).

    Serial numbers grow with the constraints' positions, so the cached constraints that remain
    are found by one merge of the two sorted lists. Each new constraint's row is computed
    through the zeroed accumulator ``scratch`` (a row of ``n_states`` per slot of the
    example's features, left zeroed); the slots are assigned at the first new row and
    released by the caller.
    """
    cdef int64_t u, v, k, kk, e, q, t, col, position = 0
    cdef int64_t n_states = c.WT.shape[1]
    cdef int64_t old_m = cache.size[blk]
    cdef const int64_t *old_serial = cache.serial[blk]
    cdef const float64_t *old_gram = cache.gram[blk]
    cdef float64_t diff
    cdef intp_t n_slots = 0
    for u in range(m):
        serial[u] = c.serial[block[u]]
        while position < old_m and old_serial[position] < serial[u]:
            position += 1
        if position < old_m and old_serial[position] == serial[u]:
            old_position[u] = position
        else:
            old_position[u] = -1
    for u in range(m):
        if old_position[u] < 0:
            continue
        for v in range(m):
            if old_position[v] >= 0:
                gram[u * m + v] = old_gram[old_position[u] * old_m + old_position[v]]
    for u in range(m):
        if old_position[u] >= 0:
            continue
        if n_slots == 0:
            n_slots = _assign_slots(c, lo, hi, slot, touched)
        k = block[u]
        for e in range(c.entry_ptr[k], c.entry_ptr[k + 1]):
            t = c.tok[e]
            for q in range(c.indptr[t], c.indptr[t + 1]):
                col = slot[c.indices[q]] * n_states
                scratch[col + c.true_state[e]] += c.scale[e] * c.data[q]
                scratch[col + c.wrong_state[e]] -= c.scale[e] * c.data[q]
        for v in range(m):
            if old_position[v] < 0 and v < u:
                continue  # computed with the row of v
            kk = block[v]
            diff = 0.0
            for e in range(c.entry_ptr[kk], c.entry_ptr[kk + 1]):
                t = c.tok[e]
                for q in range(c.indptr[t], c.indptr[t + 1]):
                    col = slot[c.indices[q]] * n_states
                    diff += c.scale[e] * c.data[q] * (
                        scratch[col + c.true_state[e]] - scratch[col + c.wrong_state[e]])
            diff = c.add_pairwise_dot(k, kk, diff)
            gram[u * m + v] = diff
            gram[v * m + u] = diff
        for e in range(c.entry_ptr[k], c.entry_ptr[k + 1]):
            t = c.tok[e]
            for q in range(c.indptr[t], c.indptr[t + 1]):
                col = slot[c.indices[q]] * n_states
                scratch[col + c.true_state[e]] = 0.0
                scratch[col + c.wrong_state[e]] = 0.0
    return n_slots


def margins(solver, const int64_t[::1] which, float64_t[::1] out):
    """``out[j] = w . g_k`` for the constraints ``k = which[j]`` of the solver."""
    cdef _Constraints c = _Constraints(solver)
    cdef int64_t j
    with nogil:
        for j in range(which.shape[0]):
            out[j] = c.margin(which[j])


def sweep(solver, const int64_t[::1] block_ptr, const int64_t[::1] members,
          const int64_t[::1] order, float64_t tol, int64_t max_inner):
    """One pass of block coordinate ascent over the blocks listed in ``order``.

    The solver's ``slot`` is an int32 array of one entry per feature, all -1 (left so), and
    its ``gram_cache`` a :class:`BlockGramCache` of its blocks. Returns the largest pairwise
    KKT violation seen before the blocks' updates.
    """
    cdef _Constraints c = _Constraints(solver)
    cdef BlockGramCache cache = solver.gram_cache
    cdef const float64_t[::1] offset = solver.constraints.offsets.data
    cdef float64_t[::1] alpha = solver.constraints.alpha.data
    cdef const float64_t[::1] bound = solver.bound
    cdef int32_t[::1] slot = solver.slot
    cdef const int64_t[::1] offsets = solver.batch.offsets
    cdef int64_t oi, blk, m, u, k
    cdef int64_t max_m = 0
    cdef intp_t blocks_since_check = 0
    cdef intp_t max_length, max_nnz, n_slots
    cdef intp_t n_steps
    cdef intp_t group_ptr[2]
    cdef float64_t worst = 0.0, viol, slack
    cdef float64_t *gram
    cdef float64_t *grad
    cdef float64_t *value
    cdef int64_t *serial
    cdef int64_t *old_position
    cdef float64_t *memo
    cdef int64_t *memo_stamp
    cdef double *scratch
    cdef int32_t *touched
    # (no feature at all is allowed: no entry then reads a slot)
    cdef int32_t *slot_ptr = &slot[0] if slot.shape[0] > 0 else NULL
    cdef int failed = 0
    if cache.n_blocks != block_ptr.shape[0] - 1:
        raise ValueError("the Gram cache has %d blocks, the constraints %d"
                         % (cache.n_blocks, block_ptr.shape[0] - 1))
    if offsets.shape[0] != block_ptr.shape[0]:
        raise ValueError("the solver has %d examples, the constraints %d blocks"
                         % (offsets.shape[0] - 1, block_ptr.shape[0] - 1))
    if slot.shape[0] != c.WT.shape[0]:
        raise ValueError("the solver has %d feature slots for %d features"
                         % (slot.shape[0], c.WT.shape[0]))
    for blk in range(block_ptr.shape[0] - 1):
        if block_ptr[blk + 1] - block_ptr[blk] > max_m:
            max_m = block_ptr[blk + 1] - block_ptr[blk]
    sequence_sizes(&c.indptr[0], &offsets[0], offsets.shape[0] - 1, &max_length, &max_nnz)
    gram = <float64_t*> malloc(max_m * max_m * sizeof(float64_t) + 1)
    grad = <float64_t*> malloc(max_m * sizeof(float64_t) + 1)
    value = <float64_t*> malloc(max_m * sizeof(float64_t) + 1)
    serial = <int64_t*> malloc(max_m * sizeof(int64_t) + 1)
    old_position = <int64_t*> malloc(max_m * sizeof(int64_t) + 1)
    memo = <float64_t*> malloc(max_length * c.WT.shape[1] * sizeof(float64_t) + 1)
    memo_stamp = <int64_t*> calloc(max_length * c.WT.shape[1] + 1, sizeof(int64_t))
    scratch = <double*> calloc(max_nnz * c.WT.shape[1] + 1, sizeof(double))
    touched = <int32_t*> malloc(max_nnz * sizeof(int32_t) + 1)
    group_ptr[0] = 0
    try:
        if (gram == NULL or grad == NULL or value == NULL or serial == NULL
                or old_position == NULL or memo == NULL or memo_stamp == NULL
                or scratch == NULL or touched == NULL):
            raise MemoryError("could not allocate the n-slack block workspace")
        with nogil:
            for oi in range(order.shape[0]):
                blk = order[oi]
                m = block_ptr[blk + 1] - block_ptr[blk]
                if m == 0:
                    continue
                check_signals_every(&blocks_since_check, 1, 64)
                # block gradient (for maximisation): c_k - w . g_k
                slack = bound[blk]
                for u in range(m):
                    k = members[block_ptr[blk] + u]
                    grad[u] = offset[k] - c.margin_memo(k, offsets[blk], memo, memo_stamp,
                                                        oi + 1)
                    slack -= alpha[k]
                    value[u] = alpha[k]
                if slack <= 1e-12 * bound[blk]:  # rounding residue of a full block
                    slack = 0.0
                # a block within tol takes no SMO step: its Gram rows can wait
                viol = _group_violation(grad, value, 0, m, slack)
                if viol <= tol:
                    if viol > worst:
                        worst = viol
                    continue
                n_slots = _block_gram(c, cache, blk, &members[block_ptr[blk]], m,
                                      offsets[blk], offsets[blk + 1], serial, old_position,
                                      gram, scratch, slot_ptr, touched)
                release(slot_ptr, touched, n_slots)
                if cache.store(blk, m, gram, serial) != 0:
                    failed = 1
                    break
                # SMO on the block (the unused capacity acts as a variable of gradient 0)
                group_ptr[1] = m
                viol = smo_capped_simplices(gram, m, grad, value, group_ptr, 1, &slack, tol,
                                            max_inner, &n_steps)
                if viol > worst:
                    worst = viol
                # apply the block's change to alpha and to the weights
                for u in range(m):
                    k = members[block_ptr[blk] + u]
                    if value[u] != alpha[k]:
                        c.add_direction(k, value[u] - alpha[k])
                        alpha[k] = value[u]
        if failed:
            raise MemoryError("could not grow the n-slack Gram cache")
    finally:
        free(gram)
        free(grad)
        free(value)
        free(serial)
        free(old_position)
        free(memo)
        free(memo_stamp)
        free(scratch)
        free(touched)
    return worst
