# Per-example helpers shared by the compiled per-example passes (online EG, BCFW): they read an
# example's CSR token rows and the feature-major weights W^T (n_features x n_states, C order).
from sklstruct._inference._chain cimport int32_t, int64_t, intp_t

ctypedef signed char int8_t


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
                                intp_t lo, intp_t length, double* scores, int8_t* marker,
                                int32_t* touched) noexcept nogil:
    """``scores[t, s] = x_t . W[s]`` for the tokens ``lo .. lo + length``; lists the distinct
    features of those tokens in ``touched`` (marking them in ``marker``) and returns their
    count."""
    cdef intp_t t, s, n_touched = 0
    cdef int64_t q
    cdef int32_t j
    cdef double v
    for t in range(length):
        for s in range(n_states):
            scores[t * n_states + s] = 0.0
        for q in range(indptr[lo + t], indptr[lo + t + 1]):
            j = indices[q]
            v = data[q]
            for s in range(n_states):
                scores[t * n_states + s] += v * WT[j * n_states + s]
            if marker[j] == 0:
                marker[j] = 1
                touched[n_touched] = j
                n_touched += 1
    return n_touched
