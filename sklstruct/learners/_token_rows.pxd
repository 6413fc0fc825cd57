# Per-example helpers shared by the compiled per-example passes (online EG, BCFW): they read an
# example's CSR token rows and the feature-major weights W^T (n_features x n_states, C order).
from sklstruct._inference._chain cimport _viterbi_sequence, int32_t, int64_t, intp_t

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


cdef inline void loss_augmented_viterbi(double* scores, intp_t max_len, intp_t length,
                                        intp_t n_states, const double* node_loss,
                                        const double* theta, bint has_transition,
                                        bint has_start_end, double* transition_t,
                                        const double* zeros, double* delta,
                                        int32_t* backpointer, int64_t* labels) noexcept nogil:
    """Margin-rescaled most violating labelling of one example into ``labels``.

    ``scores[t, s]`` (rows ``0 .. length``) holds the token scores; their loss-augmented copy
    goes to rows ``max_len .. max_len + length``. ``node_loss`` points at the example's first
    row of per-token state losses; ``theta`` holds the transitions (row-major ``a * S + b``)
    and then the start and end biases when present; ``zeros`` is ``S * S + 2 * S`` zeros;
    ``transition_t`` (S * S) and ``delta`` (2 * S) are workspace.
    """
    cdef intp_t t, s, a, b, S = n_states
    for t in range(length):
        for s in range(S):
            scores[(max_len + t) * S + s] = scores[t * S + s] + node_loss[t * S + s]
    if has_transition:
        for a in range(S):
            for b in range(S):
                transition_t[b * S + a] = theta[a * S + b]
    else:
        for a in range(S * S):
            transition_t[a] = 0.0
    _viterbi_sequence(scores + max_len * S, length, S, transition_t,
                      theta + S * S if has_start_end else zeros + S * S,
                      theta + S * S + S if has_start_end else zeros + S * S + S,
                      delta, delta + S, backpointer, labels)
