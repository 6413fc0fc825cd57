# Per-example helpers shared by the compiled per-example passes (online exponentiated gradient,
# block-coordinate Frank-Wolfe, restricted simplicial decomposition): they read an example's
# CSR token rows and the feature-major weights W^T (n_features x n_states, C order).
from sklstruct._typedefs cimport int8_t, int32_t, int64_t, intp_t

# tokens processed between two checks for a pending signal (Ctrl-C)
cdef enum:
    SIGNAL_CHECK_TOKENS = 16384
    # stored features read ahead by token_scores: the rows of W^T it will add (a few hundred
    # nanoseconds of memory latency each when W^T is far larger than the caches) are
    # requested this many features before they are needed
    PREFETCH_FEATURES = 12

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKS_PREFETCH(p) __builtin_prefetch((const void*) (p))
    #else
    #define SKS_PREFETCH(p) ((void) (p))
    #endif
    """
    void SKS_PREFETCH(const void* p) noexcept nogil


cdef extern from *:
    """
    /* The row updates of the per-example steps, compiled for AVX2 as well where the compiler
       and the platform support function clones (glibc's ifunc), chosen at load time. Each
       element takes a product and an addition as in the scalar loop (the AVX2 clone does not
       enable FMA), so every clone gives the scalar loop's bits. */
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) \
        && defined(__linux__) && defined(__GLIBC__) && defined(__has_attribute)
    #if __has_attribute(target_clones)
    #define SKS_ROW_CLONES __attribute__((target_clones("avx2", "default"), unused))
    #endif
    #endif
    #ifndef SKS_ROW_CLONES
    #if defined(__GNUC__) || defined(__clang__)
    #define SKS_ROW_CLONES __attribute__((unused))
    #else
    #define SKS_ROW_CLONES
    #endif
    #endif
    /* rows[slot[indices[q]]] += (scale * data[q]) * change, for the stored entries
       first .. last - 1 of a token (rows of n doubles, n = len(change)) */
    SKS_ROW_CLONES static void sks_scatter_entries(
            long long first, long long last, const int32_t *indices, const double *data,
            const int32_t *slot, double scale, const double *change, Py_ssize_t n,
            double *rows) {
        for (long long q = first; q < last; q++) {
            double *row = rows + (Py_ssize_t) slot[indices[q]] * n;
            const double v = scale * data[q];
            for (Py_ssize_t s = 0; s < n; s++) {
                row[s] += v * change[s];
            }
        }
    }
    /* rows[touched[k]] += steps[k], then steps[k] = 0, for k < count (rows of n doubles) */
    SKS_ROW_CLONES static void sks_add_and_clear_rows(
            Py_ssize_t count, const int32_t *touched, double *rows, Py_ssize_t n,
            double *steps) {
        for (Py_ssize_t k = 0; k < count; k++) {
            double *row = rows + (Py_ssize_t) touched[k] * n;
            double *step = steps + k * n;
            for (Py_ssize_t s = 0; s < n; s++) {
                row[s] += step[s];
                step[s] = 0.0;
            }
        }
    }
    """
    void scatter_entries "sks_scatter_entries"(
        long long first, long long last, const int32_t* indices, const double* data,
        const int32_t* slot, double scale, const double* change, intp_t n,
        double* rows) noexcept nogil
    void add_and_clear_rows "sks_add_and_clear_rows"(
        intp_t count, const int32_t* touched, double* rows, intp_t n,
        double* steps) noexcept nogil


cdef inline void sequence_sizes(const int64_t* indptr, const int64_t* offsets,
                                intp_t n_sequences, intp_t* max_len,
                                intp_t* max_nnz) noexcept nogil:
    """Longest sequence and largest number of stored features of a sequence (at least 1)."""
    cdef intp_t i
    max_len[0] = 1
    max_nnz[0] = 1
    for i in range(n_sequences):
        if offsets[i + 1] - offsets[i] > max_len[0]:
            max_len[0] = offsets[i + 1] - offsets[i]
        if indptr[offsets[i + 1]] - indptr[offsets[i]] > max_nnz[0]:
            max_nnz[0] = indptr[offsets[i + 1]] - indptr[offsets[i]]


cdef inline intp_t token_scores(const int64_t* indptr, const int32_t* indices,
                                const double* data, const double* WT, intp_t n_states,
                                intp_t lo, intp_t length, double* scores, int32_t* slot,
                                int32_t* touched) noexcept nogil:
    """``scores[t, s] = x_t . W[s]`` for the tokens ``lo .. lo + length``; lists the distinct
    features of those tokens in ``touched``, gives feature ``touched[k]`` the slot ``k``
    (``slot`` is -1 for the others; :func:`release` restores it) and returns their count.

    The row of ``W^T`` (and the slot) of the stored feature ``PREFETCH_FEATURES`` ahead is
    prefetched; the sums are those of the plain loop, in the same order."""
    cdef intp_t t, s, n_touched = 0
    cdef int64_t q, end = indptr[lo + length]
    cdef int32_t j
    cdef double v
    cdef const double* row
    for t in range(length):
        for s in range(n_states):
            scores[t * n_states + s] = 0.0
        for q in range(indptr[lo + t], indptr[lo + t + 1]):
            if q + PREFETCH_FEATURES < end:
                j = indices[q + PREFETCH_FEATURES]
                row = WT + j * n_states
                for s in range(0, n_states, 8):
                    SKS_PREFETCH(row + s)
                SKS_PREFETCH(row + n_states - 1)
                SKS_PREFETCH(slot + j)
            j = indices[q]
            v = data[q]
            for s in range(n_states):
                scores[t * n_states + s] += v * WT[j * n_states + s]
            if slot[j] < 0:
                slot[j] = <int32_t> n_touched
                touched[n_touched] = j
                n_touched += 1
    return n_touched


cdef inline void release(int32_t* slot, const int32_t* touched, intp_t n_touched) noexcept nogil:
    """Give the features of ``touched`` back their slot -1."""
    cdef intp_t k
    for k in range(n_touched):
        slot[touched[k]] = -1


cdef inline double dot(const double* a, const double* b, intp_t n) noexcept nogil:
    """``a . b`` with four partial sums (independent additions pipeline)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef intp_t k = 0
    while k + 4 <= n:
        s0 += a[k] * b[k]
        s1 += a[k + 1] * b[k + 1]
        s2 += a[k + 2] * b[k + 2]
        s3 += a[k + 3] * b[k + 3]
        k += 4
    while k < n:
        s0 += a[k] * b[k]
        k += 1
    return (s0 + s1) + (s2 + s3)
