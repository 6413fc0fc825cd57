"""One pass of block-coordinate Frank-Wolfe over chains (seed 003 with dimension limit 1).

Example ``i``'s dual variables are a distribution over its labelings, kept as sufficient
statistics: node marginals (rows of ``node_marg``), expected pairwise statistics
``pair_marg[i]`` (transition counts, then start and end indicators when present) and the
expected loss. ``w = C sum_i (Psi(x_i, y_i) - E_i[Psi])`` is kept explicitly. Visiting
example ``i``:

1. loss-augmented Viterbi at the current ``w`` gives the Frank-Wolfe vertex ``ybar``;
2. with ``v = C (Psi(ybar) - E_i[Psi])`` the dual changes by
   ``gamma g - gamma^2 ||v||^2 / 2`` along ``(1 - gamma) alpha_i + gamma delta_ybar``, where
   ``g = C (Delta(ybar) - E_i[Delta]) + w . v >= 0`` is the block's Frank-Wolfe gap; the exact
   line search takes ``gamma = min(1, g / ||v||^2)``;
3. the statistics move by the same convex combination and ``w`` by ``-gamma v``, touching only
   the rows of ``W^T`` of the example's features.

The caller validates the arrays as for :func:`sklstruct.learners._online_eg.online_eg_pass`;
``scratch`` is zero on entry and left zero.
"""

from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct.learners._token_rows cimport (int8_t, loss_augmented_viterbi, sequence_sizes,
                                             token_scores)
from sklstruct._inference._chain cimport float64_t, int32_t, int64_t, intp_t


cdef inline double _dot(const double* a, const double* b, intp_t n) noexcept nogil:
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


def bcfw_pass(const int64_t[::1] indptr, const int32_t[::1] indices,
              const float64_t[::1] data, const int64_t[::1] offsets,
              const int64_t[::1] order, const float64_t[:, ::1] node_loss,
              float64_t[:, ::1] node_marg, float64_t[:, ::1] pair_marg,
              float64_t[::1] expected_loss, float64_t[:, ::1] WT, float64_t[::1] theta,
              double C, float64_t[:, ::1] scratch, int8_t[::1] marker,
              float64_t[::1] block_gap):
    """Visit the examples of ``order`` in turn; return the sum of their Frank-Wolfe gaps.

    ``block_gap[i]`` receives example ``i``'s gap at its (last) visit.
    """
    cdef intp_t S = node_marg.shape[1]
    cdef intp_t P = pair_marg.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef bint has_transition = P >= S * S and P > 0
    cdef bint has_start_end = P == S * S + 2 * S
    cdef intp_t i, k, k2, t, s, r, lo, length, n_touched, max_len, max_nnz
    cdef int64_t q
    cdef int32_t j
    cdef double v, loss_bar, gain, norm, gamma, dp
    cdef double total_gap = 0.0
    cdef double* scores
    cdef double* transition_t
    cdef double* zeros
    cdef double* delta
    cdef double* vertex_pair
    cdef int32_t* backpointer
    cdef int64_t* labels
    cdef int32_t* touched
    cdef bint failed = False

    sequence_sizes(&indptr[0], &offsets[0], n_sequences, &max_len, &max_nnz)
    # (no stored feature at all is allowed: the pointers are then never dereferenced)
    cdef const int32_t* indices_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const double* WT_ptr = &WT[0, 0] if WT.shape[0] > 0 else NULL
    cdef const double* theta_ptr = &theta[0] if theta.shape[0] > 0 else NULL

    with nogil:
        scores = <double*> malloc(2 * max_len * S * sizeof(double))
        transition_t = <double*> malloc((2 * S * S + 4 * S + P + 1) * sizeof(double))
        backpointer = <int32_t*> malloc(max_len * S * sizeof(int32_t))
        labels = <int64_t*> malloc(max_len * sizeof(int64_t))
        touched = <int32_t*> malloc(max_nnz * sizeof(int32_t))
        if (scores == NULL or transition_t == NULL or backpointer == NULL or labels == NULL
                or touched == NULL):
            failed = True
        else:
            zeros = transition_t + S * S  # S*S + 2S zeros for absent transitions / start / end
            memset(zeros, 0, (S * S + 2 * S) * sizeof(double))
            delta = zeros + S * S + 2 * S
            vertex_pair = delta + 2 * S
            for k in range(order.shape[0]):
                i = order[k]
                lo = offsets[i]
                length = offsets[i + 1] - lo
                # token scores x_t . W[s] at the current weights; the example's features
                n_touched = token_scores(&indptr[0], indices_ptr, data_ptr, WT_ptr, S, lo,
                                         length, scores, &marker[0], touched)
                loss_augmented_viterbi(scores, max_len, length, S, &node_loss[lo, 0], theta_ptr,
                                       has_transition, has_start_end, transition_t, zeros,
                                       delta, backpointer, labels)
                # the vertex's pairwise statistics and loss
                for r in range(P):
                    vertex_pair[r] = 0.0
                if has_transition:
                    for t in range(1, length):
                        vertex_pair[labels[t - 1] * S + labels[t]] += 1.0
                if has_start_end:
                    vertex_pair[S * S + labels[0]] += 1.0
                    vertex_pair[S * S + S + labels[length - 1]] += 1.0
                loss_bar = 0.0
                for t in range(length):
                    loss_bar += node_loss[lo + t, labels[t]]
                # Frank-Wolfe gap g = C (Delta(ybar) - E[Delta]) + w . v and ||v||^2
                gain = loss_bar - expected_loss[i]
                for t in range(length):
                    gain += scores[t * S + labels[t]]
                    gain -= _dot(scores + t * S, &node_marg[lo + t, 0], S)
                    for q in range(indptr[lo + t], indptr[lo + t + 1]):
                        j = indices[q]
                        v = C * data[q]
                        for s in range(S):
                            scratch[j, s] -= v * node_marg[lo + t, s]
                        scratch[j, labels[t]] += v
                norm = 0.0
                for r in range(P):
                    dp = vertex_pair[r] - pair_marg[i, r]
                    gain += theta[r] * dp
                    norm += dp * dp
                gain *= C
                norm *= C * C
                for k2 in range(n_touched):
                    j = touched[k2]
                    norm += _dot(&scratch[j, 0], &scratch[j, 0], S)
                block_gap[i] = gain
                if gain > 0.0:
                    total_gap += gain
                gamma = 0.0
                if norm > 0.0 and gain > 0.0:
                    gamma = gain / norm
                    if gamma > 1.0:
                        gamma = 1.0
                for k2 in range(n_touched):
                    j = touched[k2]
                    for s in range(S):
                        WT[j, s] -= gamma * scratch[j, s]
                    memset(&scratch[j, 0], 0, S * sizeof(double))
                    marker[j] = 0
                if gamma > 0.0:
                    for r in range(P):
                        dp = vertex_pair[r] - pair_marg[i, r]
                        theta[r] -= gamma * C * dp
                        pair_marg[i, r] += gamma * dp
                    for t in range(length):
                        for s in range(S):
                            node_marg[lo + t, s] *= 1.0 - gamma
                        node_marg[lo + t, labels[t]] += gamma
                    expected_loss[i] += gamma * (loss_bar - expected_loss[i])
        free(scores)
        free(transition_t)
        free(backpointer)
        free(labels)
        free(touched)
    if failed:
        raise MemoryError("could not allocate the block-coordinate Frank-Wolfe workspace")
    return total_gap
