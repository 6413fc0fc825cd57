"""Compiled dynamic programmes over batches of first-order linear chains.

A batch is stored as stacked per-token state scores ``unary`` (n_tokens, n_states) and an
``offsets`` array; sequence ``i`` covers tokens ``offsets[i]:offsets[i + 1]``. Every function
below processes a whole batch, writes into preallocated outputs and runs without the GIL, so
that chunks of one batch can be processed by concurrent threads.

The inputs are validated by the wrappers of :mod:`sklstruct._inference.chain`: shapes agree,
every sequence is non-empty, labels lie in ``[0, n_states)`` and all scores are finite. The
per-sequence routines are shared with other compiled modules through ``_chain.pxd``.
"""
from libc.math cimport INFINITY, exp, fabs, log
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t

# A rescaled sum of exponentials below this value is recomputed by an exact log-sum-exp, so
# that log-domain results stay accurate whatever the range of the potentials.
cdef double _TINY = 1e-280
# In an exact log-sum-exp, terms this many nats below the largest are skipped: e^-40 = 4e-18,
# so they change no double (S of them add less than the rounding of the result).
cdef double _NEGLIGIBLE = -40.0
# The batch loops check for a pending signal (Ctrl-C) after this many token x state x state
# steps of their dynamic programmes (a few milliseconds), so that an interrupt surfaces while
# a large batch is decoded; the workspaces are freed on the way out.
cdef intp_t _SIGNAL_CHECK_WORK = 1 << 24


cdef extern from *:
    """
    /* Rows first..last - 1 of a CSR matrix times a dense (n_features, n_states) matrix, into
       out (a row of n_states doubles per row), every row's stored entries summed in order
       as scipy's csr_matvecs sums them (the same doubles). The product waits on memory (the
       weight rows of a large vocabulary are out of cache): the weight rows of the entries
       SKLSTRUCT_PREFETCH entries ahead are prefetched. */
    #define SKLSTRUCT_PREFETCH 16
    static void sklstruct_csr_rows(const int64_t *indptr, const int32_t *indices,
                                   const double *data, const double *weights,
                                   Py_ssize_t first, Py_ssize_t last, Py_ssize_t n_states,
                                   double *out) {
        const int64_t stop = indptr[last];
        for (Py_ssize_t t = first; t < last; t++) {
            double *y = out + (t - first) * n_states;
            for (Py_ssize_t s = 0; s < n_states; s++) {
                y[s] = 0.0;
            }
            for (int64_t q = indptr[t]; q < indptr[t + 1]; q++) {
    #if defined(__GNUC__) || defined(__clang__)
                if (q + SKLSTRUCT_PREFETCH < stop) {
                    const double *ahead = weights
                        + (Py_ssize_t) indices[q + SKLSTRUCT_PREFETCH] * n_states;
                    for (Py_ssize_t s = 0; s < n_states; s += 8) {
                        __builtin_prefetch(ahead + s);
                    }
                    __builtin_prefetch(ahead + n_states - 1);
                }
    #endif
                const double a = data[q];
                const double *x = weights + (Py_ssize_t) indices[q] * n_states;
                for (Py_ssize_t s = 0; s < n_states; s++) {
                    y[s] += a * x[s];
                }
            }
        }
    }
    """
    void _csr_rows "sklstruct_csr_rows"(
        const int64_t* indptr, const int32_t* indices, const double* data,
        const double* weights, intp_t first, intp_t last, intp_t n_states,
        double* out) noexcept nogil


cdef extern from *:
    """
    /* One step of the max-sum recursion over all previous states:
       delta_next[b] = max_a (delta[a] + transition[a * n + b]) + unary[b], the first
       maximising a (the lowest index) into backpointer[b]; in double precision
       (sklstruct_viterbi_step) and in single precision (sklstruct_viterbi_step32, for the
       candidate labellings of the learners' passes, _viterbi_candidate). With GCC or Clang,
       4 L, 2 L or L states b at a time in registers of L = 32 bytes' values (four doubles or
       eight floats; halves of them for the baseline target), compiled for AVX2 as well,
       chosen at load time, where the compiler and the platform support function clones
       (glibc's ifunc); the last n % L states (n >= L) as the L states that end the row, some
       of them computed twice. Every candidate is the same sum, compared as in the scalar
       loop, so every state gets the scalar loop's bits. */
    #if defined(__GNUC__) || defined(__clang__)
    #define SKLSTRUCT_VECTORS 1
    typedef double sklstruct_v4d __attribute__((vector_size(32)));
    typedef long long sklstruct_v4i __attribute__((vector_size(32)));
    typedef double sklstruct_v4d_u __attribute__((vector_size(32), aligned(8), may_alias));
    typedef float sklstruct_v8f __attribute__((vector_size(32)));
    typedef int sklstruct_v8i __attribute__((vector_size(32)));
    typedef float sklstruct_v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
    #define SKLSTRUCT_LOAD4(p) (*(const sklstruct_v4d_u *)(p))
    #define SKLSTRUCT_STORE4(p, v) (*(sklstruct_v4d_u *)(p) = (v))
    #define SKLSTRUCT_SPLAT4(x) {x, x, x, x}
    #define SKLSTRUCT_SPLAT8(x) {x, x, x, x, x, x, x, x}
    /* states first .. first + width - 1 in vectors V of L lanes of T (IV: their indices,
       VU: unaligned V, SPLAT: L copies) */
    #define SKLSTRUCT_MAX_CHUNK(T, V, IV, VU, L, SPLAT, width, first)                     \
        {                                                                                 \
            const Py_ssize_t b0 = (first);                                                \
            V best[width / L], candidate, d = SPLAT(delta[0]);                            \
            IV index[width / L], greater;                                                 \
            for (int j = 0; j < width / L; j++) {                                         \
                best[j] = d + *(const VU *)(transition + b0 + L * j);                     \
                index[j] = (IV){0};                                                       \
            }                                                                             \
            for (Py_ssize_t prev = 1; prev < n; prev++) {                                 \
                const T *row = transition + prev * n + b0;                                \
                const T x = delta[prev];                                                  \
                const IV state = SPLAT((int) prev);                                       \
                d = (V)SPLAT(x);                                                          \
                for (int j = 0; j < width / L; j++) {                                     \
                    candidate = d + *(const VU *)(row + L * j);                           \
                    greater = candidate > best[j];                                        \
                    best[j] = (V)(((IV)candidate & greater) | ((IV)best[j] & ~greater));  \
                    index[j] = (state & greater) | (index[j] & ~greater);                 \
                }                                                                         \
            }                                                                             \
            for (int j = 0; j < width / L; j++) {                                         \
                *(VU *)(delta_next + b0 + L * j) =                                        \
                    best[j] + *(const VU *)(unary + b0 + L * j);                          \
                for (int l = 0; l < L; l++) {                                             \
                    backpointer[b0 + L * j + l] = (int32_t) index[j][l];                  \
                }                                                                         \
            }                                                                             \
        }
    #define SKLSTRUCT_MAX_CHUNKS(T, V, IV, VU, L, SPLAT)                                  \
        for (; b + 4 * L <= n; b += 4 * L)                                                \
            SKLSTRUCT_MAX_CHUNK(T, V, IV, VU, L, SPLAT, 4 * L, b)                         \
        for (; b + 2 * L <= n; b += 2 * L)                                                \
            SKLSTRUCT_MAX_CHUNK(T, V, IV, VU, L, SPLAT, 2 * L, b)                         \
        for (; b + L <= n; b += L)                                                        \
            SKLSTRUCT_MAX_CHUNK(T, V, IV, VU, L, SPLAT, L, b)                             \
        if (b < n && n >= L) {                                                            \
            SKLSTRUCT_MAX_CHUNK(T, V, IV, VU, L, SPLAT, L, n - L)                         \
            b = n;                                                                        \
        }
    #else
    #define SKLSTRUCT_MAX_CHUNKS(T, V, IV, VU, L, SPLAT)
    #endif
    #if defined(SKLSTRUCT_VECTORS) && defined(__x86_64__) && defined(__linux__) \
        && defined(__GLIBC__) && defined(__has_attribute)
    #if __has_attribute(target_clones)
    #define SKLSTRUCT_CLONES __attribute__((target_clones("avx2", "default")))
    #endif
    #endif
    #ifndef SKLSTRUCT_CLONES
    #define SKLSTRUCT_CLONES
    #endif
    #define SKLSTRUCT_DEFINE_VITERBI_STEP(name, T, V, IV, VU, L, SPLAT)                   \
        SKLSTRUCT_CLONES                                                                  \
        static void name(const T *delta, const T *unary, Py_ssize_t n,                    \
                         const T *transition, T *delta_next, int32_t *backpointer) {      \
            Py_ssize_t a, b = 0;                                                          \
            SKLSTRUCT_MAX_CHUNKS(T, V, IV, VU, L, SPLAT)                                  \
            for (; b < n; b++) {                                                          \
                T best = delta[0] + transition[b], candidate;                             \
                int32_t best_state = 0;                                                   \
                for (a = 1; a < n; a++) {                                                 \
                    candidate = delta[a] + transition[a * n + b];                         \
                    if (candidate > best) {                                               \
                        best = candidate;                                                 \
                        best_state = (int32_t) a;                                         \
                    }                                                                     \
                }                                                                         \
                delta_next[b] = best + unary[b];                                          \
                backpointer[b] = best_state;                                              \
            }                                                                             \
        }
    SKLSTRUCT_DEFINE_VITERBI_STEP(sklstruct_viterbi_step, double, sklstruct_v4d,
                                  sklstruct_v4i, sklstruct_v4d_u, 4, SKLSTRUCT_SPLAT4)
    SKLSTRUCT_DEFINE_VITERBI_STEP(sklstruct_viterbi_step32, float, sklstruct_v8f,
                                  sklstruct_v8i, sklstruct_v8f_u, 8, SKLSTRUCT_SPLAT8)
    """
    void _viterbi_step "sklstruct_viterbi_step"(
        const double* delta, const double* unary, intp_t n, const double* transition,
        double* delta_next, int32_t* backpointer) noexcept nogil
    void _viterbi_step32 "sklstruct_viterbi_step32"(
        const float* delta, const float* unary, intp_t n, const float* transition,
        float* delta_next, int32_t* backpointer) noexcept nogil


cdef extern from *:
    """
    /* out[b] += sum_k weights[k * weight_stride] * rows[k * row_stride + b] for b < n, every
       out[b] summed over k in increasing order with a product and an addition per term, as
       the scalar loop sums it (the same doubles: no fused multiply-add is formed, the AVX2
       clone does not enable FMA). The sums of the forward-backward recursions and of their
       pairwise marginals: with GCC or Clang, 16, 8 or 4 states b at a time in registers of
       four doubles (two of two doubles for the baseline target), compiled for AVX2 as well
       where function clones are supported. */
    #if defined(__GNUC__) || defined(__clang__)
    #define SKLSTRUCT_WEIGHTED_CHUNK(width)                                               \
        for (; b + width <= n; b += width) {                                              \
            sklstruct_v4d acc[width / 4];                                                 \
            for (int j = 0; j < width / 4; j++) {                                         \
                acc[j] = SKLSTRUCT_LOAD4(out + b + 4 * j);                                \
            }                                                                             \
            for (k = 0; k < count; k++) {                                                 \
                const double w = weights[k * weight_stride];                              \
                const sklstruct_v4d wv = {w, w, w, w};                                    \
                const double *row = rows + k * row_stride + b;                            \
                for (int j = 0; j < width / 4; j++) {                                     \
                    acc[j] += wv * SKLSTRUCT_LOAD4(row + 4 * j);                          \
                }                                                                         \
            }                                                                             \
            for (int j = 0; j < width / 4; j++) {                                         \
                SKLSTRUCT_STORE4(out + b + 4 * j, acc[j]);                                \
            }                                                                             \
        }
    #endif
    #if defined(SKLSTRUCT_VECTORS) && defined(__x86_64__) && defined(__linux__) \
        && defined(__GLIBC__) && defined(__has_attribute)
    #if __has_attribute(target_clones)
    __attribute__((target_clones("avx2", "default")))
    #endif
    #endif
    static void sklstruct_weighted_rows(Py_ssize_t count, const double *weights,
                                        Py_ssize_t weight_stride, const double *rows,
                                        Py_ssize_t row_stride, Py_ssize_t n, double *out) {
        Py_ssize_t b = 0, k;
    #if defined(__GNUC__) || defined(__clang__)
        SKLSTRUCT_WEIGHTED_CHUNK(16)
        SKLSTRUCT_WEIGHTED_CHUNK(8)
        SKLSTRUCT_WEIGHTED_CHUNK(4)
    #endif
        for (; b < n; b++) {
            double acc = out[b];
            for (k = 0; k < count; k++) {
                acc += weights[k * weight_stride] * rows[k * row_stride + b];
            }
            out[b] = acc;
        }
    }
    """
    void _weighted_rows "sklstruct_weighted_rows"(
        intp_t count, const double* weights, intp_t weight_stride, const double* rows,
        intp_t row_stride, intp_t n, double* out) noexcept nogil


cdef extern from *:
    """
    /* out[k] = exp(in[k] - shift) for k < n, for in[k] <= shift (the rescaled exponentials of
       the forward-backward recursions): x = round(x / ln 2) ln 2 + r with |r| <= ln(2) / 2
       (Cody and Waite's two-part ln 2), exp(r) by its Taylor polynomial of degree 13
       (truncation below 1e-17), times 2^round(x / ln 2) from the exponent bits; x below -708
       gives 0 (an absolute error below 3.4e-308). Within 1 ulp of glibc's exp on 2e7 points of
       [-708, 0]. Four at a time in vectors (two of two doubles for the baseline target, of four
       doubles in the AVX2 clone, without FMA: the same doubles from both); the last n % 4
       through a padded vector, so every element takes the same operations. */
    #if defined(__GNUC__) || defined(__clang__)
    #define SKLSTRUCT_EXP_SHIFTER 0x1.8p52
    #endif
    #if defined(SKLSTRUCT_VECTORS) && defined(__x86_64__) && defined(__linux__) \
        && defined(__GLIBC__) && defined(__has_attribute)
    #if __has_attribute(target_clones)
    __attribute__((target_clones("avx2", "default")))
    #endif
    #endif
    static void sklstruct_exp_shifted(const double *in, Py_ssize_t n, double shift,
                                      double *out) {
    #if defined(__GNUC__) || defined(__clang__)
        const sklstruct_v4d shifter = {SKLSTRUCT_EXP_SHIFTER, SKLSTRUCT_EXP_SHIFTER,
                                       SKLSTRUCT_EXP_SHIFTER, SKLSTRUCT_EXP_SHIFTER};
        double pad[4];
        for (Py_ssize_t k = 0; k < n; k += 4) {
            sklstruct_v4d x;
            if (k + 4 <= n) {
                x = SKLSTRUCT_LOAD4(in + k);
            } else {
                for (int j = 0; j < 4; j++) {
                    pad[j] = k + j < n ? in[k + j] : shift;
                }
                x = SKLSTRUCT_LOAD4(pad);
            }
            x = x - shift;
            sklstruct_v4d t = x * 0x1.71547652b82fep0 + shifter;
            sklstruct_v4d m = t - shifter;
            sklstruct_v4d r = x - m * 0x1.62e42fee00000p-1;
            r = r - m * 0x1.a39ef35793c76p-33;
            sklstruct_v4d p = r * (1.0 / 6227020800.0) + (1.0 / 479001600.0);
            p = p * r + (1.0 / 39916800.0);
            p = p * r + (1.0 / 3628800.0);
            p = p * r + (1.0 / 362880.0);
            p = p * r + (1.0 / 40320.0);
            p = p * r + (1.0 / 5040.0);
            p = p * r + (1.0 / 720.0);
            p = p * r + (1.0 / 120.0);
            p = p * r + (1.0 / 24.0);
            p = p * r + (1.0 / 6.0);
            p = p * r + 0.5;
            p = p * r + 1.0;
            p = p * r + 1.0;
            sklstruct_v4i bits = ((sklstruct_v4i) t - (sklstruct_v4i) shifter + 1023) << 52;
            sklstruct_v4i keep = x >= -708.0;
            sklstruct_v4d y = (sklstruct_v4d) ((sklstruct_v4i) (p * (sklstruct_v4d) bits) & keep);
            if (k + 4 <= n) {
                SKLSTRUCT_STORE4(out + k, y);
            } else {
                for (int j = 0; k + j < n; j++) {
                    out[k + j] = y[j];
                }
            }
        }
    #else
        for (Py_ssize_t k = 0; k < n; k++) {
            out[k] = exp(in[k] - shift);
        }
    #endif
    }
    """
    void _exp_shifted "sklstruct_exp_shifted"(const double* values, intp_t n, double shift,
                                              double* out) noexcept nogil


# A pruned Viterbi step (_viterbi_decode) needs this many states (on fewer, the scan over all
# of them costs less than the bound); after a step whose bound keeps too many states, this
# many steps scan all states; a bound must fall short by _VITERBI_MARGIN, relative to the
# magnitude of the scores, before a state is left out (the rounding errors of the sums
# compared are below 1e-15 of it)
cdef intp_t _VITERBI_PRUNED_STATES = 16
cdef intp_t _VITERBI_RETRY = 7
cdef double _VITERBI_MARGIN = 1e-9

# tokens whose unary scores viterbi_csr_batch forms at a time (a longer sequence: its own)
cdef intp_t _CSR_BLOCK = 4096


cdef inline void _transpose(const double* matrix, intp_t n, double* out) noexcept nogil:
    cdef intp_t a, b
    for a in range(n):
        for b in range(n):
            out[b * n + a] = matrix[a * n + b]


cdef double _path_score(const double* unary, intp_t length, intp_t n_states,
                        const double* transition, const double* start, const double* end,
                        const int64_t* labels) noexcept nogil:
    """Score of one labeling: unary + transition + start + end terms."""
    cdef intp_t t
    cdef double score = start[labels[0]] + end[labels[length - 1]]
    for t in range(length):
        score += unary[t * n_states + labels[t]]
    for t in range(1, length):
        score += transition[labels[t - 1] * n_states + labels[t]]
    return score


ctypedef fused real_t:
    float
    double


cdef inline real_t _viterbi_path(const real_t* unary, intp_t length, intp_t n_states,
                                 const real_t* transition, const real_t* start,
                                 const real_t* end, real_t* delta, real_t* delta_next,
                                 int32_t* backpointer, int64_t* labels) noexcept nogil:
    """Max-sum recursion on one sequence (``transition`` row-major) in the precision of its
    inputs; ties go to the lower state index. Returns the best score."""
    cdef intp_t t, b
    cdef real_t* swap
    for b in range(n_states):
        delta[b] = start[b] + unary[b]
    for t in range(1, length):
        if real_t is float:
            _viterbi_step32(delta, unary + t * n_states, n_states, transition, delta_next,
                            backpointer + t * n_states)
        else:
            _viterbi_step(delta, unary + t * n_states, n_states, transition, delta_next,
                          backpointer + t * n_states)
        swap = delta
        delta = delta_next
        delta_next = swap
    return _viterbi_backtrack(delta, length, n_states, end, backpointer, labels)


cdef double _viterbi_sequence(const double* unary, intp_t length, intp_t n_states,
                              const double* transition, const double* start,
                              const double* end, double* delta, double* delta_next,
                              int32_t* backpointer, int64_t* labels) noexcept nogil:
    """Max-sum recursion on one sequence (``transition`` row-major); ties go to the lower
    state index. Returns the best score."""
    return _viterbi_path(unary, length, n_states, transition, start, end, delta, delta_next,
                         backpointer, labels)


cdef void _viterbi_candidate(const float* unary, intp_t length, intp_t n_states,
                             const float* transition, const float* start, const float* end,
                             float* delta, float* delta_next, int32_t* backpointer,
                             int64_t* labels) noexcept nogil:
    """:func:`_viterbi_sequence` in single precision (inputs and sums): a labelling whose
    score is within the rounding of those sums of the best (the same labels wherever the
    best is ahead by more), for the learners' passes, whose steps take any labelling
    (their certificates decode in double precision)."""
    _viterbi_path(unary, length, n_states, transition, start, end, delta, delta_next,
                  backpointer, labels)


def csr_product_rows(const int64_t[::1] indptr, const int32_t[::1] indices,
                     const float64_t[::1] data, const float64_t[:, ::1] dense, intp_t first,
                     intp_t last, float64_t[:, ::1] out):
    """Rows ``first .. last - 1`` of the CSR matrix ``(indptr, indices, data)`` times
    ``dense`` into the same rows of ``out`` (``sklstruct_csr_rows``: scipy's doubles). The
    caller has checked that the column indices index rows of ``dense``."""
    if not 0 <= first <= last <= indptr.shape[0] - 1:
        raise ValueError("first and last must be rows of the CSR matrix.")
    if out.shape[0] != indptr.shape[0] - 1 or out.shape[1] != dense.shape[1]:
        raise ValueError("out must have a row per CSR row and a column per dense column.")
    if indptr[last] > min(indices.shape[0], data.shape[0]):
        raise ValueError("The CSR row pointers run past its entries.")
    if last == first or dense.shape[1] == 0:
        return
    with nogil:
        _csr_rows(&indptr[0], &indices[0], &data[0], &dense[0, 0], first, last,
                  dense.shape[1], &out[first, 0])


def viterbi_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                  const float64_t[:, ::1] transition, const float64_t[::1] start,
                  const float64_t[::1] end, int64_t[::1] labels, float64_t[::1] scores):
    """Viterbi decoding of every sequence, written into ``labels`` and ``scores``."""
    cdef intp_t n_states = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo, length, max_len
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* column_max
    cdef double* transition_t = NULL
    cdef double* delta = NULL
    cdef int32_t* backpointer = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    try:
        with nogil:
            max_len = _max_length(offsets_ptr, n_sequences)
            # transposed transitions (S S), column maxima (S + 1), delta (2 S)
            transition_t = <double*> malloc((n_states * n_states + 3 * n_states + 1)
                                            * sizeof(double))
            backpointer = <int32_t*> malloc((max_len + 1) * n_states * sizeof(int32_t))
            if transition_t == NULL or backpointer == NULL:
                failed = True
            else:
                column_max = transition_t + n_states * n_states
                delta = column_max + n_states + 1
                _viterbi_tables(&transition[0, 0], n_states, transition_t, column_max)
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    length = offsets_ptr[i + 1] - lo
                    scores[i] = _viterbi_decode(
                        unary_ptr + lo * n_states, length, n_states, &transition[0, 0],
                        transition_t, column_max, &start[0], &end[0], delta,
                        delta + n_states, backpointer + max_len * n_states, backpointer,
                        &labels[lo])
                    check_signals_every(&since_check, length * n_states * n_states,
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(transition_t)
        free(backpointer)
    if failed:
        raise MemoryError("could not allocate the Viterbi workspace")


def viterbi_csr_batch(const int64_t[::1] indptr, const int32_t[::1] indices,
                      const float64_t[::1] data, const float64_t[:, ::1] weights,
                      const int64_t[::1] offsets, const float64_t[:, ::1] transition,
                      const float64_t[::1] start, const float64_t[::1] end, intp_t first,
                      intp_t last, int64_t[::1] labels, float64_t[::1] scores):
    """Viterbi decoding of sequences ``first..last - 1`` from their token features.

    A block of consecutive sequences at a time (about ``_CSR_BLOCK`` tokens), their unary
    scores, their rows of the CSR matrix ``(indptr, indices, data)`` times ``weights``
    (n_features, n_states), are formed by ``sklstruct_csr_rows`` (the doubles of scipy's
    CSR product) and decoded by :func:`_viterbi_decode`. ``labels`` (n_tokens,) and
    ``scores`` (n_sequences,) receive the range's results at their places, so that threads
    can decode disjoint ranges into the same outputs.
    """
    cdef intp_t n_states = weights.shape[1]
    cdef intp_t i, block_end, block_lo, lo, length, max_len = 0, room
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* column_max
    cdef double* transition_t = NULL
    cdef double* unary = NULL
    cdef double* delta = NULL
    cdef int32_t* backpointer = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    if last <= first:
        return
    try:
        with nogil:
            for i in range(first, last):
                if offsets_ptr[i + 1] - offsets_ptr[i] > max_len:
                    max_len = offsets_ptr[i + 1] - offsets_ptr[i]
            room = max_len if max_len > _CSR_BLOCK else _CSR_BLOCK
            # transposed transitions (S S), column maxima (S + 1), delta (2 S)
            transition_t = <double*> malloc((n_states * n_states + 3 * n_states + 1)
                                            * sizeof(double))
            unary = <double*> malloc(room * n_states * sizeof(double))
            backpointer = <int32_t*> malloc((max_len + 1) * n_states * sizeof(int32_t))
            if transition_t == NULL or unary == NULL or backpointer == NULL:
                failed = True
            else:
                column_max = transition_t + n_states * n_states
                delta = column_max + n_states + 1
                _viterbi_tables(&transition[0, 0], n_states, transition_t, column_max)
                i = first
                while i < last:
                    block_end = i + 1  # the sequences that fit the workspace with sequence i
                    while block_end < last and \
                            offsets_ptr[block_end + 1] - offsets_ptr[i] <= room:
                        block_end += 1
                    block_lo = offsets_ptr[i]
                    _csr_rows(&indptr[0], &indices[0], &data[0], &weights[0, 0], block_lo,
                              offsets_ptr[block_end], n_states, unary)
                    while i < block_end:
                        lo = offsets_ptr[i]
                        length = offsets_ptr[i + 1] - lo
                        scores[i] = _viterbi_decode(
                            unary + (lo - block_lo) * n_states, length, n_states,
                            &transition[0, 0], transition_t, column_max, &start[0], &end[0],
                            delta, delta + n_states,
                            backpointer + max_len * n_states, backpointer, &labels[lo])
                        i += 1
                    check_signals_every(&since_check,
                                        (offsets_ptr[block_end] - block_lo) * n_states * n_states,
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(transition_t)
        free(unary)
        free(backpointer)
    if failed:
        raise MemoryError("could not allocate the Viterbi workspace")


cdef inline double _margin_sequence(const double* unary, const double* token_loss,
                                   intp_t length, intp_t n_states, const double* transition,
                                   const double* start, const double* end, double* augmented,
                                   double* delta, int32_t* backpointer,
                                   int64_t* labels) noexcept nogil:
    """Margin-rescaled loss-augmented decoding of one sequence: Viterbi on ``unary +
    token_loss`` (in ``augmented``, ``length * n_states`` doubles; ``delta`` holds ``2 *
    n_states``); returns the labelling's score without the loss."""
    cdef intp_t t
    for t in range(length * n_states):
        augmented[t] = unary[t] + token_loss[t]
    _viterbi_sequence(augmented, length, n_states, transition, start, end, delta,
                      delta + n_states, backpointer, labels)
    return _path_score(unary, length, n_states, transition, start, end, labels)


def margin_viterbi_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                         const float64_t[:, ::1] transition, const float64_t[::1] start,
                         const float64_t[::1] end, const float64_t[:, ::1] token_loss,
                         int64_t[::1] labels, float64_t[::1] scores):
    """Margin-rescaled loss-augmented decoding of every sequence.

    ``token_loss[t, s]`` is the loss of giving state ``s`` to token ``t`` (added to the unary
    scores); ``scores`` receives the score of the returned labeling without the loss term.
    """
    cdef intp_t n_states = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo, max_len
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const double* loss_ptr = &token_loss[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* delta = NULL
    cdef double* augmented = NULL
    cdef int32_t* backpointer = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    try:
        with nogil:
            max_len = _max_length(offsets_ptr, n_sequences)
            delta = <double*> malloc(2 * n_states * sizeof(double))
            augmented = <double*> malloc(max_len * n_states * sizeof(double))
            backpointer = <int32_t*> malloc(max_len * n_states * sizeof(int32_t))
            if delta == NULL or augmented == NULL or backpointer == NULL:
                failed = True
            else:
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    scores[i] = _margin_sequence(
                        unary_ptr + lo * n_states, loss_ptr + lo * n_states,
                        offsets_ptr[i + 1] - lo, n_states, &transition[0, 0], &start[0],
                        &end[0], augmented, delta, backpointer, &labels[lo])
                    check_signals_every(&since_check,
                                        (offsets_ptr[i + 1] - lo) * n_states * n_states,
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(delta)
        free(augmented)
        free(backpointer)
    if failed:
        raise MemoryError("could not allocate the loss-augmented Viterbi workspace")


cdef int _margin_csr_range(const int64_t* indptr, const int32_t* indices, const double* data,
                           const double* weights, intp_t n_states, const int64_t* offsets,
                           const double* transition, const double* start, const double* end,
                           const double* token_loss, const int64_t* y, intp_t first,
                           intp_t last, int64_t* labels, double* scores, double* true_scores,
                           double* unary) except -1 nogil:
    """Margin-rescaled decoding of sequences ``first..last - 1`` from their token features
    (the loop of :func:`margin_viterbi_csr_batch` and :func:`margin_hinge_csr_batch`).

    Each sequence's unary scores are formed by ``sklstruct_csr_rows`` into its rows of
    ``unary`` (n_tokens rows), or, when ``unary`` is NULL, into a workspace that the next
    sequence reuses; with ``y``, ``true_scores[i]`` receives the score of the labelling ``y``
    of sequence ``i``, summed as ``scores[i]`` is. Returns 1 if out of memory; raises what
    a pending signal's handler raises."""
    cdef intp_t i, lo, length, max_len = _max_length(offsets + first, last - first)
    cdef intp_t since_check = 0
    cdef double* delta = <double*> malloc(2 * n_states * sizeof(double))
    cdef double* augmented = <double*> malloc(max_len * n_states * sizeof(double))
    cdef int32_t* backpointer = <int32_t*> malloc(max_len * n_states * sizeof(int32_t))
    cdef double* workspace = NULL
    cdef double* unary_ptr
    cdef int status = 0
    try:
        if unary == NULL:
            workspace = <double*> malloc(max_len * n_states * sizeof(double))
        if delta == NULL or augmented == NULL or backpointer == NULL or (
                unary == NULL and workspace == NULL):
            status = 1
        else:
            for i in range(first, last):
                lo = offsets[i]
                length = offsets[i + 1] - lo
                unary_ptr = workspace if unary == NULL else unary + lo * n_states
                _csr_rows(indptr, indices, data, weights, lo, lo + length, n_states,
                          unary_ptr)
                scores[i] = _margin_sequence(
                    unary_ptr, token_loss + lo * n_states, length, n_states, transition,
                    start, end, augmented, delta, backpointer, labels + lo)
                if y != NULL:
                    true_scores[i] = _path_score(unary_ptr, length, n_states, transition,
                                                 start, end, y + lo)
                check_signals_every(&since_check, length * n_states * n_states, _SIGNAL_CHECK_WORK)
    finally:
        free(delta)
        free(augmented)
        free(backpointer)
        free(workspace)
    return status


def margin_viterbi_csr_batch(const int64_t[::1] indptr, const int32_t[::1] indices,
                             const float64_t[::1] data, const float64_t[:, ::1] weights,
                             const int64_t[::1] offsets, const float64_t[:, ::1] transition,
                             const float64_t[::1] start, const float64_t[::1] end,
                             const float64_t[:, ::1] token_loss, intp_t first, intp_t last,
                             int64_t[::1] labels, float64_t[::1] scores,
                             float64_t[:, ::1] unary):
    """:func:`margin_viterbi_batch` of sequences ``first..last - 1`` from their token
    features: each sequence's unary scores, its rows of the CSR matrix ``(indptr, indices,
    data)`` times ``weights`` (n_features, n_states), are formed by ``sklstruct_csr_rows``
    (the doubles of scipy's CSR product) into ``unary`` and decoded while in cache.
    ``labels``, ``unary`` (n_tokens rows) and ``scores`` (n_sequences) receive the range's
    results at their places, so that threads can decode disjoint ranges into the same
    outputs.
    """
    cdef int status
    if last <= first:
        return
    with nogil:
        status = _margin_csr_range(
            &indptr[0], &indices[0], &data[0], &weights[0, 0], weights.shape[1], &offsets[0],
            &transition[0, 0], &start[0], &end[0], &token_loss[0, 0], NULL, first, last,
            &labels[0], &scores[0], NULL, &unary[0, 0])
    if status != 0:
        raise MemoryError("could not allocate the loss-augmented Viterbi workspace")


def margin_hinge_csr_batch(const int64_t[::1] indptr, const int32_t[::1] indices,
                           const float64_t[::1] data, const float64_t[:, ::1] weights,
                           const int64_t[::1] offsets, const float64_t[:, ::1] transition,
                           const float64_t[::1] start, const float64_t[::1] end,
                           const float64_t[:, ::1] token_loss, const int64_t[::1] y,
                           intp_t first, intp_t last, int64_t[::1] labels,
                           float64_t[::1] scores, float64_t[::1] true_scores):
    """:func:`margin_viterbi_csr_batch` without keeping the unary scores: each sequence's
    are formed in a workspace, decoded, and scored at the true labelling ``y`` (n_tokens,)
    into ``true_scores`` (n_sequences), the sums in the order of ``scores``'. The hinge
    terms need no more, and no token x state array is written."""
    cdef int status
    if last <= first:
        return
    with nogil:
        status = _margin_csr_range(
            &indptr[0], &indices[0], &data[0], &weights[0, 0], weights.shape[1], &offsets[0],
            &transition[0, 0], &start[0], &end[0], &token_loss[0, 0], &y[0], first, last,
            &labels[0], &scores[0], &true_scores[0], NULL)
    if status != 0:
        raise MemoryError("could not allocate the loss-augmented Viterbi workspace")


cdef void _slack_sequence(const double* unary, intp_t length, intp_t n_states,
                          const double* transition, const double* transition_t,
                          const double* start, const double* end, const int64_t* y,
                          const int64_t* units, double unit, intp_t max_units,
                          double* values, double* values_next, int32_t* backpointer,
                          int64_t* labels) noexcept nogil:
    """Slack-rescaled loss-augmented decoding of one sequence.

    ``units[t * n_states + s]`` is the loss of state ``s`` at token ``t`` in multiples of
    ``unit``. ``values[s * (max_units + 1) + k]`` is the best score of a prefix that ends in
    state ``s`` and has accumulated ``k`` loss units. The final choice maximises
    ``k * unit * (1 + score - score(y))``, scanning ``k`` then ``s`` in increasing order and
    keeping the first maximiser; ``y`` itself is returned when no labeling beats 0.
    """
    cdef intp_t stride = max_units + 1
    cdef intp_t t, s, r, k, cost, top, reach, reach_next, best_state = -1, best_units = 0
    cdef double candidate, transition_score, token_score, score_y, objective, best = 0.0
    cdef double* row
    cdef double* previous_row
    cdef double* swap
    cdef int32_t* pointer_row
    for k in range(n_states * stride):
        values[k] = -INFINITY
    reach = 0
    for s in range(n_states):
        cost = units[s]
        values[s * stride + cost] = start[s] + unary[s]
        if cost > reach:
            reach = cost
    for t in range(1, length):
        top = 0
        for s in range(n_states):
            if units[t * n_states + s] > top:
                top = units[t * n_states + s]
        reach_next = reach + top
        for s in range(n_states):
            cost = units[t * n_states + s]
            row = values_next + s * stride
            pointer_row = backpointer + (t * n_states + s) * stride
            for k in range(reach_next + 1):
                row[k] = -INFINITY
                pointer_row[k] = -1
            for r in range(n_states):
                transition_score = transition_t[s * n_states + r]
                previous_row = values + r * stride
                for k in range(reach + 1):
                    candidate = previous_row[k] + transition_score
                    if candidate > row[k + cost]:
                        row[k + cost] = candidate
                        pointer_row[k + cost] = <int32_t> r
            token_score = unary[t * n_states + s]
            for k in range(cost, cost + reach + 1):
                row[k] += token_score
        swap = values
        values = values_next
        values_next = swap
        reach = reach_next

    score_y = _path_score(unary, length, n_states, transition, start, end, y)
    for k in range(1, reach + 1):
        for s in range(n_states):
            candidate = values[s * stride + k]
            if candidate == -INFINITY:
                continue
            objective = k * unit * (1.0 + candidate + end[s] - score_y)
            if objective > best:
                best = objective
                best_state = s
                best_units = k
    if best_state < 0:
        for t in range(length):
            labels[t] = y[t]
        return
    labels[length - 1] = best_state
    k = best_units
    for t in range(length - 1, 0, -1):
        s = labels[t]
        labels[t - 1] = backpointer[(t * n_states + s) * stride + k]
        k -= units[t * n_states + s]


cdef inline intp_t _reachable_units(const int64_t* units, intp_t length,
                                    intp_t n_states) noexcept nogil:
    """The largest number of loss units a labeling of the sequence can accumulate."""
    cdef intp_t t, s, top, total = 0
    for t in range(length):
        top = 0
        for s in range(n_states):
            if units[t * n_states + s] > top:
                top = units[t * n_states + s]
        total += top
    return total


def slack_viterbi_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                        const float64_t[:, ::1] transition, const float64_t[::1] start,
                        const float64_t[::1] end, const int64_t[::1] y,
                        const int64_t[:, ::1] token_units, double unit, int64_t[::1] labels,
                        float64_t[::1] scores):
    """Slack-rescaled loss-augmented decoding of every sequence.

    The loss of state ``s`` at token ``t`` is ``token_units[t, s] * unit``; the dynamic
    programme runs over (token, state, loss units). ``scores`` receives the score of the
    returned labeling without the loss term.
    """
    cdef intp_t n_states = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo, length, total_units, max_units = 0
    cdef size_t cells, max_cells = 0
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef const int64_t* y_ptr = &y[0]
    cdef const int64_t* units_ptr = &token_units[0, 0]
    cdef double* transition_t = NULL
    cdef double* values = NULL
    cdef int32_t* backpointer = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    try:
        with nogil:
            for i in range(n_sequences):
                lo = offsets_ptr[i]
                length = offsets_ptr[i + 1] - lo
                total_units = _reachable_units(units_ptr + lo * n_states, length, n_states)
                cells = <size_t> length * n_states * (total_units + 1)
                if total_units > max_units:
                    max_units = total_units
                if cells > max_cells:
                    max_cells = cells
            transition_t = <double*> malloc(n_states * n_states * sizeof(double))
            values = <double*> malloc(2 * n_states * (max_units + 1) * sizeof(double))
            backpointer = <int32_t*> malloc(max_cells * sizeof(int32_t))
            if transition_t == NULL or values == NULL or backpointer == NULL:
                failed = True
            else:
                _transpose(&transition[0, 0], n_states, transition_t)
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    length = offsets_ptr[i + 1] - lo
                    total_units = _reachable_units(units_ptr + lo * n_states, length,
                                                   n_states)
                    _slack_sequence(unary_ptr + lo * n_states, length, n_states,
                                    &transition[0, 0], transition_t, &start[0], &end[0],
                                    y_ptr + lo, units_ptr + lo * n_states, unit, total_units,
                                    values, values + n_states * (total_units + 1),
                                    backpointer, &labels[lo])
                    scores[i] = _path_score(unary_ptr + lo * n_states, length, n_states,
                                            &transition[0, 0], &start[0], &end[0],
                                            &labels[lo])
                    check_signals_every(&since_check,
                                        length * n_states * n_states * (total_units + 1),
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(transition_t)
        free(values)
        free(backpointer)
    if failed:
        raise MemoryError(
            "could not allocate the slack-rescaling workspace (n_tokens x n_states x "
            "loss units); use smaller sequences or coarser loss weights")


cdef void _transition_tables(const double* transition, intp_t n, double* tables) noexcept nogil:
    """Rescaled exponentiated transitions for :func:`_forward_backward_sequence`.

    ``tables`` (3 n + 2 n^2 doubles) receives the column maxima, the row maxima, ``n`` doubles
    of workspace, ``exp(T[a, b] - column_max[b])`` row-major and ``exp(T[a, b] - row_max[a])``
    stored transposed.
    """
    cdef intp_t a, b
    cdef double peak
    for b in range(n):
        peak = transition[b]
        for a in range(1, n):
            if transition[a * n + b] > peak:
                peak = transition[a * n + b]
        tables[b] = peak
    for a in range(n):
        peak = transition[a * n]
        for b in range(1, n):
            if transition[a * n + b] > peak:
                peak = transition[a * n + b]
        tables[n + a] = peak
    for a in range(n):
        for b in range(n):
            tables[3 * n + a * n + b] = exp(transition[a * n + b] - tables[b])
            tables[3 * n + n * n + b * n + a] = exp(transition[a * n + b] - tables[n + a])


cdef void _forward_backward_sequence(
        const double* unary, intp_t length, intp_t n_states, const double* transition,
        const double* start, const double* end, const double* column_max,
        const double* column_exp, const double* row_max, const double* row_exp_t,
        double* alpha, double* beta, double* scaled, double* sums, double* work,
        double* marginals, double* edge_sums, double* log_partition) noexcept nogil:
    """Log-domain forward-backward on one sequence.

    Messages are sums of exponentials rescaled by their maximum, multiplied by the
    column-rescaled (forward) or row-rescaled (backward, stored transposed) exponentiated
    transition matrix; a
    message whose rescaled sum falls below ``_TINY`` is recomputed by an exact log-sum-exp.
    ``scaled[t, a] = exp(alpha[t, a] - max_a alpha[t])`` and ``sums[t + 1, b]`` (zero on the
    exact path) are kept for the pairwise marginals, which are computed as
    ``p(y_{t+1} = b) * p(y_t = a | y_{t+1} = b, prefix)``.
    """
    cdef intp_t t, a, b, n = n_states
    cdef double peak, total, value, lse, weight
    cdef const double* previous
    cdef double* next_scaled
    for b in range(n):
        alpha[b] = start[b] + unary[b]
    for t in range(1, length):
        previous = alpha + (t - 1) * n
        next_scaled = scaled + (t - 1) * n
        peak = previous[0]
        for a in range(1, n):
            if previous[a] > peak:
                peak = previous[a]
        for b in range(n):
            work[b] = 0.0
        _exp_shifted(previous, n, peak, next_scaled)
        _weighted_rows(n, next_scaled, 1, column_exp, n, n, work)
        for b in range(n):
            if work[b] >= _TINY:
                alpha[t * n + b] = unary[t * n + b] + peak + column_max[b] + log(work[b])
                sums[t * n + b] = work[b]
            else:
                lse = previous[0] + transition[b]
                for a in range(1, n):
                    value = previous[a] + transition[a * n + b]
                    if value > lse:
                        lse = value
                total = 0.0
                for a in range(n):
                    value = previous[a] + transition[a * n + b] - lse
                    if value > _NEGLIGIBLE:
                        total += exp(value)
                alpha[t * n + b] = unary[t * n + b] + lse + log(total)
                sums[t * n + b] = 0.0

    previous = alpha + (length - 1) * n
    peak = previous[0] + end[0]
    for b in range(1, n):
        if previous[b] + end[b] > peak:
            peak = previous[b] + end[b]
    total = 0.0
    for b in range(n):
        total += exp(previous[b] + end[b] - peak)
    log_partition[0] = peak + log(total)

    for b in range(n):
        beta[(length - 1) * n + b] = end[b]
    for t in range(length - 2, -1, -1):
        peak = unary[(t + 1) * n] + beta[(t + 1) * n]
        for b in range(1, n):
            value = unary[(t + 1) * n + b] + beta[(t + 1) * n + b]
            if value > peak:
                peak = value
        for a in range(n):
            work[a] = 0.0
        for b in range(n):  # the weights, kept in beta_t until it is written
            beta[t * n + b] = unary[(t + 1) * n + b] + beta[(t + 1) * n + b]
        _exp_shifted(beta + t * n, n, peak, beta + t * n)
        _weighted_rows(n, beta + t * n, 1, row_exp_t, n, n, work)
        for a in range(n):
            total = work[a]
            if total >= _TINY:
                beta[t * n + a] = peak + row_max[a] + log(total)
            else:
                lse = -INFINITY
                for b in range(n):
                    value = transition[a * n + b] + unary[(t + 1) * n + b] + beta[(t + 1) * n + b]
                    if value > lse:
                        lse = value
                total = 0.0
                for b in range(n):
                    value = (transition[a * n + b] + unary[(t + 1) * n + b]
                             + beta[(t + 1) * n + b] - lse)
                    if value > _NEGLIGIBLE:
                        total += exp(value)
                beta[t * n + a] = lse + log(total)

    # every token normalised from its own largest alpha + beta (not logZ): the rounding
    # drift between alpha, beta and logZ, which grows with the potentials' magnitude, cancels
    for t in range(length):
        peak = alpha[t * n] + beta[t * n]
        for b in range(1, n):
            if alpha[t * n + b] + beta[t * n + b] > peak:
                peak = alpha[t * n + b] + beta[t * n + b]
        for b in range(n):
            marginals[t * n + b] = alpha[t * n + b] + beta[t * n + b]
        _exp_shifted(marginals + t * n, n, peak, marginals + t * n)
        total = 0.0
        for b in range(n):
            total += marginals[t * n + b]
        for b in range(n):
            marginals[t * n + b] /= total

    for t in range(length - 1):
        for b in range(n):
            if sums[(t + 1) * n + b] > 0.0:
                work[b] = marginals[(t + 1) * n + b] / sums[(t + 1) * n + b]
            else:
                work[b] = 0.0
        for a in range(n):
            weight = scaled[t * n + a]
            for b in range(n):
                edge_sums[a * n + b] += weight * column_exp[a * n + b] * work[b]
        for b in range(n):
            if sums[(t + 1) * n + b] > 0.0:
                continue
            if marginals[(t + 1) * n + b] == 0.0:
                continue
            # p(y_t = a | y_{t+1} = b) normalised over a from its own peak (exact path)
            lse = alpha[t * n] + transition[b]
            for a in range(1, n):
                value = alpha[t * n + a] + transition[a * n + b]
                if value > lse:
                    lse = value
            total = 0.0
            for a in range(n):
                value = alpha[t * n + a] + transition[a * n + b] - lse
                if value > _NEGLIGIBLE:
                    total += exp(value)
            for a in range(n):
                value = alpha[t * n + a] + transition[a * n + b] - lse
                if value > _NEGLIGIBLE:
                    edge_sums[a * n + b] += marginals[(t + 1) * n + b] * exp(value) / total


# The scaled forward-backward runs in probability space, with one exponential per state and
# token instead of five exponentials or logarithms, and results as accurate as the log-domain
# recursion's, in two cases:
# - every token's potentials span at most _SCALED_SPREAD nats together with the transitions:
#   every entry of a normalised message is then at least exp(-_SCALED_SPREAD) / n_states^2,
#   far from underflow (a product of two small entries may underflow, an absolute error below
#   1e-300);
# - the transitions span at most _SCALED_TRANSITION_SPREAD = R nats, whatever the spread of the
#   tokens' potentials (S states). A state whose exp(u - max u) underflows has a message entry
#   below 1e-300 of the token's largest. Every kept entry is a sum with a term of at least
#   exp(-R) / S (forward: from the largest previous entry; backward: the state of largest
#   potential, whose backward message is within exp(R) of the largest), and at most S terms
#   of 1e-300 are lost: a relative error below S^3 1e-300 exp(2 R), 1e-38 for 44 states. The
#   normalisers c_t and c_t sum_b alpha_t beta_t are at least exp(-2 R) / S^2, so no
#   reciprocal overflows.
cdef double _SCALED_SPREAD = 600.0
cdef double _SCALED_TRANSITION_SPREAD = 300.0


cdef double _exp_transitions(const double* transition, intp_t n, double* table,
                             double* table_t, double* peak) noexcept nogil:
    """``table[a, b] = exp(T[a, b] - max T)`` (and its transpose); returns ``max T - min T``
    (infinite, with the tables left unset, when a transition is not finite) and writes
    ``max T`` into ``peak``."""
    cdef intp_t a, b
    cdef double high = transition[0], low = transition[0], v
    for a in range(n * n):
        v = transition[a]
        if v != v:  # NaN
            return INFINITY
        if v > high:
            high = v
        if v < low:
            low = v
    peak[0] = high
    if high == INFINITY or low == -INFINITY:
        return INFINITY
    _exp_shifted(transition, n * n, high, table)
    for a in range(n):
        for b in range(n):
            table_t[b * n + a] = table[a * n + b]
    return high - low


cdef bint _forward_backward_scaled(
        const double* unary, intp_t length, intp_t n, const double* table,
        const double* table_t, double transition_peak, double transition_spread,
        const double* start, const double* end, double* expu, double* alpha, double* beta,
        double* norms, double* work, double* edge_rows, double* marginals, double* edge_sums,
        double* log_partition) noexcept nogil:
    """Forward-backward in probability space with normalised messages (Rabiner's scaling).

    Returns False, before writing any output, when a token's potentials (start and end
    included) are not finite, or span more than ``_SCALED_SPREAD - transition_spread`` nats
    while the transitions span more than ``_SCALED_TRANSITION_SPREAD``; the caller then runs the log-domain :func:`_forward_backward_sequence`. ``edge_sums``
    must be zero on entry. ``expu`` holds
    ``exp(u_t - max u_t)``, ``alpha``/``beta`` the messages normalised to sum 1, ``norms``
    (2 ``length`` doubles) the forward normalisers ``c_t`` and ``sum_b alpha_t beta_t``,
    ``edge_rows`` (``length n`` doubles) the factors of the pairwise marginals.
    """
    cdef intp_t t, a, b
    cdef double v, high, low, total, log_z
    cdef double budget = _SCALED_SPREAD - transition_spread
    cdef double* c = norms
    cdef double* overlap = norms + length
    cdef double* row
    if transition_spread <= _SCALED_TRANSITION_SPREAD:
        budget = INFINITY
    if not (budget > 0.0):
        return False
    log_z = (length - 1) * transition_peak
    for t in range(length):
        row = expu + t * n
        for b in range(n):
            v = unary[t * n + b]
            if t == 0:
                v += start[b]
            if t == length - 1:
                v += end[b]
            row[b] = v
        high = row[0]
        low = row[0]
        for b in range(1, n):
            if row[b] > high:
                high = row[b]
            if row[b] < low:
                low = row[b]
        if not (high - low <= budget and high - low < INFINITY):  # false for NaN too
            return False
        _exp_shifted(row, n, high, row)
        log_z += high

    # forward: alpha_t = expu_t * (alpha_{t-1} E) / c_t
    total = 0.0
    for b in range(n):
        alpha[b] = expu[b]
        total += expu[b]
    c[0] = total
    total = 1.0 / total
    for b in range(n):
        alpha[b] *= total
    for t in range(1, length):
        for b in range(n):
            work[b] = 0.0
        _weighted_rows(n, alpha + (t - 1) * n, 1, table, n, n, work)
        total = 0.0
        for b in range(n):
            v = work[b] * expu[t * n + b]
            alpha[t * n + b] = v
            total += v
        c[t] = total
        total = 1.0 / total
        for b in range(n):
            alpha[t * n + b] *= total
    for t in range(length):
        log_z += log(c[t])
    log_partition[0] = log_z

    # backward: beta_t = E (expu_{t+1} * beta_{t+1}), normalised to sum 1
    for b in range(n):
        beta[(length - 1) * n + b] = 1.0 / n
    for t in range(length - 2, -1, -1):
        for a in range(n):
            work[a] = 0.0
        for b in range(n):  # the weights, kept in beta_t until it is written
            beta[t * n + b] = expu[(t + 1) * n + b] * beta[(t + 1) * n + b]
        _weighted_rows(n, beta + t * n, 1, table_t, n, n, work)
        total = 0.0
        for a in range(n):
            total += work[a]
        total = 1.0 / total
        for a in range(n):
            beta[t * n + a] = work[a] * total

    for t in range(length):
        total = 0.0
        for b in range(n):
            v = alpha[t * n + b] * beta[t * n + b]
            marginals[t * n + b] = v
            total += v
        overlap[t] = total
        total = 1.0 / total
        for b in range(n):
            marginals[t * n + b] *= total

    # p(y_t = a, y_{t+1} = b) = alpha_t[a] E[a, b] expu_{t+1}[b] beta_{t+1}[b]
    #                           / (c_{t+1} sum_b' alpha_{t+1}[b'] beta_{t+1}[b']);
    # the outer products are summed over t first (edge_sums is zero on entry), E applied once:
    # row a of the sum is alpha[:, a] times the rows edge_rows[t] (summed in order of t)
    for t in range(length - 1):
        total = 1.0 / (c[t + 1] * overlap[t + 1])
        for b in range(n):
            edge_rows[t * n + b] = expu[(t + 1) * n + b] * beta[(t + 1) * n + b] * total
    if length > 1:
        for a in range(n):
            _weighted_rows(length - 1, alpha + a, n, edge_rows, n, n, edge_sums + a * n)
        for a in range(n * n):
            edge_sums[a] *= table[a]
    return True


cdef void _forward_backward(
        const double* unary, intp_t length, intp_t n, const double* transition,
        const double* start, const double* end, double* tables, double transition_peak,
        double transition_spread, bint* log_tables_ready, double* buffers, intp_t max_len,
        double* marginals, double* edge_sums, double* log_partition) noexcept nogil:
    """Forward-backward on one sequence: scaled when the potentials allow, else log-domain.

    ``tables`` (``3 n + 4 n^2`` doubles) holds the log-domain tables of
    :func:`_transition_tables` (filled here on first need, then ``log_tables_ready`` is set)
    followed by the exponentiated transitions of :func:`_exp_transitions` (filled by the
    caller, which passes their peak and spread); ``buffers`` holds ``4 max_len n + 2 max_len``
    doubles. ``edge_sums`` must be zero on entry.
    """
    cdef double* alpha = buffers
    cdef double* beta = buffers + max_len * n
    cdef double* scaled = buffers + 2 * max_len * n
    cdef double* sums = buffers + 3 * max_len * n
    cdef double* table = tables + 3 * n + 2 * n * n
    if _forward_backward_scaled(unary, length, n, table, table + n * n, transition_peak,
                                transition_spread, start, end, scaled, alpha, beta,
                                buffers + 4 * max_len * n, tables + 2 * n, sums, marginals,
                                edge_sums, log_partition):
        return
    if not log_tables_ready[0]:
        _transition_tables(transition, n, tables)
        log_tables_ready[0] = True
    _forward_backward_sequence(
        unary, length, n, transition, start, end, tables, tables + 3 * n, tables + n,
        tables + 3 * n + n * n, alpha, beta, scaled, sums, tables + 2 * n, marginals,
        edge_sums, log_partition)


def forward_backward_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                           const float64_t[:, ::1] transition, const float64_t[::1] start,
                           const float64_t[::1] end, float64_t[:, ::1] marginals,
                           float64_t[:, :, ::1] edge_sums, float64_t[::1] log_partition,
                           bint per_sequence=True):
    """Forward-backward on every sequence.

    Writes node marginals, the sums of pairwise marginals and the log-partition functions.
    With ``per_sequence`` ``edge_sums`` has one (n, n) block per sequence (zero on entry);
    otherwise one block, which receives the sums over the whole batch (when ``edge_sums``
    has no block at all they are not kept: node marginals then need no per-sequence
    memory beyond one (n, n) block).
    """
    cdef intp_t n = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo, length, max_len, a
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const double* transition_ptr = &transition[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* tables = NULL
    cdef double* buffers = NULL
    cdef double* sequence_edges = NULL
    cdef double* total = &edge_sums[0, 0, 0] if edge_sums.shape[0] > 0 else NULL
    cdef double peak, spread
    cdef bint log_tables_ready = False
    cdef bint failed = False
    cdef intp_t since_check = 0
    try:
        with nogil:
            max_len = _max_length(offsets_ptr, n_sequences)
            tables = <double*> malloc((3 * n + 4 * n * n) * sizeof(double))
            buffers = <double*> malloc((4 * max_len * n + 2 * max_len) * sizeof(double))
            if not per_sequence:
                sequence_edges = <double*> malloc(n * n * sizeof(double))
            if tables == NULL or buffers == NULL or (
                    not per_sequence and sequence_edges == NULL):
                failed = True
            else:
                spread = _exp_transitions(transition_ptr, n, tables + 3 * n + 2 * n * n,
                                          tables + 3 * n + 3 * n * n, &peak)
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    length = offsets_ptr[i + 1] - lo
                    check_signals_every(&since_check, length * n * n, _SIGNAL_CHECK_WORK)
                    if per_sequence:
                        _forward_backward(
                            unary_ptr + lo * n, length, n, transition_ptr, &start[0],
                            &end[0], tables, peak, spread, &log_tables_ready, buffers,
                            max_len, &marginals[lo, 0], &edge_sums[i, 0, 0],
                            &log_partition[i])
                        continue
                    memset(sequence_edges, 0, n * n * sizeof(double))
                    _forward_backward(
                        unary_ptr + lo * n, length, n, transition_ptr, &start[0], &end[0],
                        tables, peak, spread, &log_tables_ready, buffers, max_len,
                        &marginals[lo, 0], sequence_edges, &log_partition[i])
                    if total != NULL:
                        for a in range(n * n):
                            total[a] += sequence_edges[a]
    finally:
        free(tables)
        free(buffers)
        free(sequence_edges)
    if failed:
        raise MemoryError("could not allocate the forward-backward workspace")


cdef void _viterbi_tables(const double* transition, intp_t n, double* transition_t,
                          double* column_max) noexcept nogil:
    """The tables :func:`_viterbi_decode` reads: ``transition_t`` (n, n), the transposed
    transition matrix, and ``column_max`` (n + 1,): the largest transition into each state,
    then the largest magnitude of any transition."""
    cdef intp_t a, b
    cdef double magnitude = 0.0
    _transpose(transition, n, transition_t)
    for b in range(n):
        column_max[b] = transition_t[b * n]
        for a in range(n):
            if transition_t[b * n + a] > column_max[b]:
                column_max[b] = transition_t[b * n + a]
            if fabs(transition_t[b * n + a]) > magnitude:
                magnitude = fabs(transition_t[b * n + a])
    column_max[n] = magnitude


cdef inline real_t _viterbi_backtrack(const real_t* delta, intp_t length, intp_t n_states,
                                      const real_t* end, const int32_t* backpointer,
                                      int64_t* labels) noexcept nogil:
    """The best final state (ties to the lower index), then the labels back from it;
    returns the best score."""
    cdef intp_t t, b, best_state = 0
    cdef real_t best = delta[0] + end[0], candidate
    for b in range(1, n_states):
        candidate = delta[b] + end[b]
        if candidate > best:
            best = candidate
            best_state = b
    labels[length - 1] = best_state
    for t in range(length - 1, 0, -1):
        labels[t - 1] = backpointer[t * n_states + labels[t]]
    return best


cdef inline intp_t _viterbi_candidates(const double* delta, intp_t n_states,
                                       const double* transition_t, const double* column_max,
                                       int32_t* candidates) noexcept nogil:
    """The previous states that can win or tie a step of the max-sum recursion, in
    increasing order; returns their number, or 0 when the bound is not finite.

    With ``top`` the state of the largest ``delta``, a state ``a`` can reach the candidate
    ``delta[top] + T[top, b]`` of a state ``b`` only if ``delta[a] + max_a' T[a', b]`` does,
    so every ``a`` with ``delta[a] < delta[top] - max_b (max_a' T[a', b] - T[top, b])``, less
    a margin far above the rounding of these sums, is left out.
    """
    cdef intp_t a, b, top = 0, count = 0
    cdef double spread = 0.0, gap, threshold
    for a in range(1, n_states):
        if delta[a] > delta[top]:
            top = a
    for b in range(n_states):
        gap = column_max[b] - transition_t[b * n_states + top]
        if gap > spread or gap != gap:
            spread = gap
    threshold = delta[top] - spread
    threshold -= _VITERBI_MARGIN * (fabs(delta[top]) + spread + column_max[n_states])
    if not (threshold > -INFINITY and threshold < INFINITY):  # (also a NaN)
        return 0
    for a in range(n_states):  # (without a branch: the test is hard to predict)
        candidates[count] = <int32_t> a
        count += delta[a] >= threshold
    return count


cdef double _viterbi_decode(const double* unary, intp_t length, intp_t n_states,
                            const double* transition, const double* transition_t,
                            const double* column_max, const double* start, const double* end,
                            double* delta, double* delta_next, int32_t* candidates,
                            int32_t* backpointer, int64_t* labels) noexcept nogil:
    """:func:`_viterbi_sequence` with pruned steps: the same results, bit for bit.

    ``transition`` is row-major, ``transition_t`` and ``column_max`` are the tables of
    :func:`_viterbi_tables`;
    ``candidates`` holds ``n_states`` indices. From ``_VITERBI_PRUNED_STATES`` states on, a
    step where :func:`_viterbi_candidates` keeps at most half of the previous states scans
    only those: every candidate is the same sum as in the scan over all states, the others
    cannot reach the best, and ties go to the lower index. Pruning pays when one state
    stands out at most tokens, as in decoding with trained weights (loss-augmented scores
    lower the true state and keep many candidates: their decoding is
    :func:`_viterbi_sequence`); after a step that keeps too many, the next
    ``_VITERBI_RETRY`` steps scan all states without computing the bound. Returns the best
    score.
    """
    cdef intp_t t, a, b, k, count, best_state, wait = 0
    cdef double best, candidate
    cdef double* swap
    cdef const double* column
    if n_states < _VITERBI_PRUNED_STATES:
        return _viterbi_sequence(unary, length, n_states, transition, start, end, delta,
                                 delta_next, backpointer, labels)
    for b in range(n_states):
        delta[b] = start[b] + unary[b]
    for t in range(1, length):
        count = 0
        if wait > 0:
            wait -= 1
        else:
            count = _viterbi_candidates(delta, n_states, transition_t, column_max, candidates)
            if 2 * count > n_states:
                count = 0
                wait = _VITERBI_RETRY
        if count == 0:
            _viterbi_step(delta, unary + t * n_states, n_states, transition, delta_next,
                          backpointer + t * n_states)
        else:
            for b in range(n_states):
                column = transition_t + b * n_states
                best_state = candidates[0]
                best = delta[best_state] + column[best_state]
                for k in range(1, count):
                    a = candidates[k]
                    candidate = delta[a] + column[a]
                    if candidate > best:
                        best = candidate
                        best_state = a
                delta_next[b] = best + unary[t * n_states + b]
                backpointer[t * n_states + b] = <int32_t> best_state
        swap = delta
        delta = delta_next
        delta_next = swap
    return _viterbi_backtrack(delta, length, n_states, end, backpointer, labels)
