"""One pass of restricted simplicial decomposition with one simplex per example, over chains.

Example ``i``'s dual point is kept as sufficient statistics, as in :mod:`._bcfw`: node marginals
(rows of ``node_marg``), expected pairwise statistics ``pair_marg[i]`` and the expected loss;
``w = C sum_i (Psi(x_i, y_i) - E_i[Psi])`` is kept explicitly. The example also keeps at most
``r`` extreme points (labellings, ``vertex_labels[t, k]`` for its tokens) with their losses,
an anchor ``a`` (a past point, as node measures ``anchor_node``, pairwise statistics and loss)
and the weights ``mu_k`` with ``x = (1 - sum_k mu_k) a + sum_k mu_k z_k``. Visiting example
``i``:

1. loss-augmented Viterbi at the current ``w`` gives a new extreme point (its Frank-Wolfe gap
   at ``x`` goes to ``block_gap``); unless the example already has it, it is added; when ``r``
   are kept, the point of lowest weight is dropped and ``x`` becomes the anchor (the seed's
   footnote 1);
2. the master problem over the convex hull of the anchor and the points is a QP in ``mu``
   (``mu >= 0, sum_k mu_k <= 1``) whose Gram matrix ``<d_k, d_l>``, ``d_k = C (E_a[Psi] -
   Psi(z_k))``, comes from the example's token Gram matrix and whose gradient
   ``C (loss_k - E_a[loss] + score(z_k) - E_a[score])`` from its token scores; it is solved by
   pairwise (SMO) steps from the current weights;
3. the statistics and ``w`` (only the rows of ``W^T`` of the example's features, and the
   pairwise weights) move by ``sum_k (mu_k' - mu_k) (z_k - a)``.

The caller validates the arrays as for :func:`sklstruct.learners._bcfw.bcfw_pass`.
"""

from libc.math cimport fabs
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct.learners._smo cimport smo_capped_simplex
from sklstruct.learners._token_rows cimport (int8_t, loss_augmented_viterbi, sequence_sizes,
                                             token_scores)
from sklstruct._inference._chain cimport float64_t, int32_t, int64_t, intp_t


def rsd_pass(const int64_t[::1] indptr, const int32_t[::1] indices,
             const float64_t[::1] data, const int64_t[::1] offsets,
             const int64_t[::1] order, const float64_t[:, ::1] node_loss,
             float64_t[:, ::1] node_marg, float64_t[:, ::1] pair_marg,
             float64_t[::1] expected_loss, float64_t[:, ::1] WT, float64_t[::1] theta,
             double C, float64_t[::1] feature_buffer, int8_t[::1] marker,
             int32_t[:, ::1] vertex_labels, float64_t[:, ::1] vertex_loss,
             float64_t[:, ::1] vertex_weight, int64_t[::1] n_vertices,
             float64_t[:, ::1] anchor_node, float64_t[:, ::1] anchor_pair,
             float64_t[::1] anchor_loss, float64_t[::1] block_gap):
    """Visit the examples of ``order`` in turn; return the sum of their Frank-Wolfe gaps.

    ``feature_buffer`` (n_features) is zero on entry and left zero; ``r`` is
    ``vertex_labels.shape[1]`` (at most 63).
    """
    cdef intp_t S = node_marg.shape[1]
    cdef intp_t P = pair_marg.shape[1]
    cdef intp_t r = vertex_labels.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef bint has_transition = P >= S * S and P > 0
    cdef bint has_start_end = P == S * S + 2 * S
    cdef intp_t i, k, k2, l, t, t2, s, q2, lo, length, n_touched, max_len, max_nnz
    cdef intp_t m, slot, p
    cdef int64_t q
    cdef int32_t j
    cdef double v, loss_bar, total, mass, kval, pp, gap, anchor_score, anchor_pair_norm, slack
    cdef double total_gap = 0.0
    cdef double* scores
    cdef double* transition_t
    cdef double* zeros
    cdef double* delta
    cdef double* gram_tokens
    cdef intp_t* pair_index
    cdef intp_t e, e2, n_pairs
    cdef double G[63 * 63]
    cdef double c[63]
    cdef double mu[63]
    cdef double dmu[63]
    cdef double mv[63]
    cdef double vertex_score[63]
    cdef double marg_pair_dot[63]
    cdef double mm
    cdef int32_t* backpointer
    cdef int64_t* labels
    cdef int32_t* touched
    cdef bint failed = False, duplicate, changed
    if r > 63:
        raise ValueError("at most 63 points per example")
    sequence_sizes(&indptr[0], &offsets[0], n_sequences, &max_len, &max_nnz)
    cdef const int32_t* indices_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const double* WT_ptr = &WT[0, 0] if WT.shape[0] > 0 else NULL
    cdef const double* theta_ptr = &theta[0] if theta.shape[0] > 0 else NULL

    with nogil:
        scores = <double*> malloc(2 * max_len * S * sizeof(double))
        transition_t = <double*> malloc((2 * S * S + 4 * S + 1) * sizeof(double))
        gram_tokens = <double*> malloc(max_len * max_len * sizeof(double))
        pair_index = <intp_t*> malloc(r * (max_len + 1) * sizeof(intp_t))
        backpointer = <int32_t*> malloc(max_len * S * sizeof(int32_t))
        labels = <int64_t*> malloc(max_len * sizeof(int64_t))
        touched = <int32_t*> malloc(max_nnz * sizeof(int32_t))
        if (scores == NULL or transition_t == NULL or gram_tokens == NULL
                or pair_index == NULL or backpointer == NULL
                or labels == NULL or touched == NULL):
            failed = True
        else:
            zeros = transition_t + S * S
            memset(zeros, 0, (S * S + 2 * S) * sizeof(double))
            delta = zeros + S * S + 2 * S
            for k in range(order.shape[0]):
                i = order[k]
                lo = offsets[i]
                length = offsets[i + 1] - lo
                n_touched = token_scores(&indptr[0], indices_ptr, data_ptr, WT_ptr, S, lo,
                                         length, scores, &marker[0], touched)
                for k2 in range(n_touched):
                    marker[touched[k2]] = 0
                loss_augmented_viterbi(scores, max_len, length, S, &node_loss[lo, 0], theta_ptr,
                                       has_transition, has_start_end, transition_t, zeros,
                                       delta, backpointer, labels)
                # the block's Frank-Wolfe gap at the current point x
                loss_bar = 0.0
                total = 0.0
                for t in range(length):
                    loss_bar += node_loss[lo + t, labels[t]]
                    total += scores[t * S + labels[t]]
                    for s in range(S):
                        total -= scores[t * S + s] * node_marg[lo + t, s]
                if has_transition:
                    for t in range(1, length):
                        total += theta[labels[t - 1] * S + labels[t]]
                if has_start_end:
                    total += theta[S * S + labels[0]] + theta[S * S + S + labels[length - 1]]
                for q2 in range(P):
                    total -= theta[q2] * pair_marg[i, q2]
                gap = C * (loss_bar - expected_loss[i] + total)
                block_gap[i] = gap
                if gap > 0.0:
                    total_gap += gap
                # 1. add the new extreme point unless it is kept already
                m = n_vertices[i]
                slot = -1
                for p in range(m):
                    duplicate = True
                    for t in range(length):
                        if vertex_labels[lo + t, p] != labels[t]:
                            duplicate = False
                            break
                    if duplicate:
                        slot = p
                        break
                if slot < 0:
                    if m < r:
                        slot = m
                        m += 1
                        n_vertices[i] = m
                    else:  # footnote 1: drop the lowest weight, x becomes the anchor
                        slot = 0
                        for p in range(1, m):
                            if vertex_weight[i, p] < vertex_weight[i, slot]:
                                slot = p
                        for t in range(length):
                            for s in range(S):
                                anchor_node[lo + t, s] = node_marg[lo + t, s]
                        for q2 in range(P):
                            anchor_pair[i, q2] = pair_marg[i, q2]
                        anchor_loss[i] = expected_loss[i]
                        for p in range(m):
                            vertex_weight[i, p] = 0.0
                    for t in range(length):
                        vertex_labels[lo + t, slot] = <int32_t> labels[t]
                    vertex_loss[i, slot] = loss_bar
                    vertex_weight[i, slot] = 0.0
                # pairwise statistics of the points, as lists of the entries they count
                n_pairs = (length - 1 if has_transition else 0) + (2 if has_start_end else 0)
                for p in range(m):
                    e = p * (max_len + 1)
                    if has_transition:
                        for t in range(1, length):
                            pair_index[e] = vertex_labels[lo + t - 1, p] * S \
                                + vertex_labels[lo + t, p]
                            e += 1
                    if has_start_end:
                        pair_index[e] = S * S + vertex_labels[lo, p]
                        pair_index[e + 1] = S * S + S + vertex_labels[lo + length - 1, p]
                # token Gram matrix of the example
                for t in range(length):
                    for q in range(indptr[lo + t], indptr[lo + t + 1]):
                        feature_buffer[indices[q]] += data[q]
                    for t2 in range(t, length):
                        kval = 0.0
                        for q in range(indptr[lo + t2], indptr[lo + t2 + 1]):
                            kval += data[q] * feature_buffer[indices[q]]
                        gram_tokens[t * length + t2] = kval
                        gram_tokens[t2 * length + t] = kval
                    for q in range(indptr[lo + t], indptr[lo + t + 1]):
                        feature_buffer[indices[q]] = 0.0
                # 2. the master problem over the anchor a and the points z_k: the QP in the
                # weights of the points, d_k = C (E_a[Psi] - Psi(z_k)), from the current weights
                anchor_score = 0.0
                for t in range(length):
                    for s in range(S):
                        anchor_score += scores[t * S + s] * anchor_node[lo + t, s]
                anchor_pair_norm = 0.0
                for q2 in range(P):
                    anchor_score += theta[q2] * anchor_pair[i, q2]
                    anchor_pair_norm += anchor_pair[i, q2] * anchor_pair[i, q2]
                mm = 0.0
                for t in range(length):
                    for t2 in range(length):
                        v = 0.0
                        for s in range(S):
                            v += anchor_node[lo + t, s] * anchor_node[lo + t2, s]
                        mm += gram_tokens[t * length + t2] * v
                for p in range(m):
                    total = 0.0
                    for t in range(length):
                        total += scores[t * S + vertex_labels[lo + t, p]]
                    pp = 0.0
                    for e in range(p * (max_len + 1), p * (max_len + 1) + n_pairs):
                        total += theta[pair_index[e]]
                        pp += anchor_pair[i, pair_index[e]]
                    vertex_score[p] = total
                    marg_pair_dot[p] = pp
                    total = 0.0
                    for t in range(length):
                        for t2 in range(length):
                            total += gram_tokens[t * length + t2] * \
                                anchor_node[lo + t, vertex_labels[lo + t2, p]]
                    mv[p] = total
                for p in range(m):
                    # gradient at the current weights: C (loss_k - loss_a + score_k - score_a)
                    c[p] = C * (vertex_loss[i, p] - anchor_loss[i] + vertex_score[p]
                                - anchor_score)
                    for l in range(p, m):
                        total = 0.0
                        for t in range(length):
                            for t2 in range(length):
                                if vertex_labels[lo + t, p] == vertex_labels[lo + t2, l]:
                                    total += gram_tokens[t * length + t2]
                        pp = 0.0
                        for e in range(p * (max_len + 1), p * (max_len + 1) + n_pairs):
                            for e2 in range(l * (max_len + 1), l * (max_len + 1) + n_pairs):
                                if pair_index[e] == pair_index[e2]:
                                    pp += 1.0
                        total = C * C * (mm - mv[p] - mv[l] + total + anchor_pair_norm
                                         - marg_pair_dot[p] - marg_pair_dot[l] + pp)
                        G[p * m + l] = total
                        G[l * m + p] = total
                for p in range(m):
                    mu[p] = vertex_weight[i, p]
                slack = 1.0
                for p in range(m):
                    slack -= mu[p]
                if slack < 0.0:
                    slack = 0.0
                smo_capped_simplex(G, c, mu, slack, m, 1e-6 * fabs(gap) + 1e-300, 20 * m + 20)
                # 3. move the statistics and w by sum_k (mu_k - weight_k) (z_k - a)
                mass = 0.0
                changed = False
                for p in range(m):
                    dmu[p] = mu[p] - vertex_weight[i, p]
                    mass += dmu[p]
                    if dmu[p] != 0.0:
                        changed = True
                    vertex_weight[i, p] = mu[p]
                if not changed:
                    continue
                for t in range(length):
                    for s in range(S):
                        scores[t * S + s] = -mass * anchor_node[lo + t, s]  # change of x
                    for p in range(m):
                        scores[t * S + vertex_labels[lo + t, p]] += dmu[p]
                    for q in range(indptr[lo + t], indptr[lo + t + 1]):
                        j = indices[q]
                        v = C * data[q]
                        for s in range(S):
                            WT[j, s] -= v * scores[t * S + s]
                    for s in range(S):
                        node_marg[lo + t, s] += scores[t * S + s]
                for q2 in range(P):
                    theta[q2] += C * mass * anchor_pair[i, q2]
                    pair_marg[i, q2] -= mass * anchor_pair[i, q2]
                for p in range(m):
                    for e in range(p * (max_len + 1), p * (max_len + 1) + n_pairs):
                        theta[pair_index[e]] -= C * dmu[p]
                        pair_marg[i, pair_index[e]] += dmu[p]
                v = -mass * anchor_loss[i]
                for p in range(m):
                    v += dmu[p] * vertex_loss[i, p]
                expected_loss[i] += v
        free(scores)
        free(transition_t)
        free(gram_tokens)
        free(pair_index)
        free(backpointer)
        free(labels)
        free(touched)
    if failed:
        raise MemoryError("could not allocate the simplicial decomposition workspace")
    return total_gap
