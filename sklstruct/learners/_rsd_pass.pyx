"""One pass of restricted simplicial decomposition with one simplex per example, over chains.

Example ``i``'s dual point is kept as sufficient statistics, as in :mod:`._bcfw`: node marginals
(rows of ``node_marg``), expected pairwise statistics ``pair_marg[i]`` and the expected loss;
``w = C sum_i (Psi(x_i, y_i) - E_i[Psi])`` is kept explicitly. The example also keeps at most
``r`` extreme points (labellings, ``vertex_labels[t, k]`` for its tokens) with their losses and
their weights in the expression of the current point. Visiting example ``i``:

1. loss-augmented Viterbi at the current ``w`` gives a new extreme point; unless the example
   already has it, it is added, replacing the point of lowest weight when ``r`` are kept;
2. the master problem over the convex hull of the current point and the kept extreme points,
   ``max_mu f(x + sum_k mu_k (z_k - x))`` over ``mu >= 0, sum_k mu_k <= 1``, is a QP whose Gram
   matrix ``<d_k, d_l>`` (``d_k = C (E_x[Psi] - Psi(z_k))``) comes from the example's token Gram
   matrix, and whose linear term ``C (loss_k - E_x[loss] + score(z_k) - E_x[score])`` from its
   token scores; it is solved by pairwise (SMO) steps;
3. the statistics, the point weights and ``w`` (only the rows of ``W^T`` of the example's
   features, and the pairwise weights) move to the solution.

The current point is the retained point of restricted simplicial decomposition at every visit
(the seed's section 2.1 rule "replace one point by x_k"), so ``r = 1`` is block-coordinate
Frank-Wolfe with exact line search. The caller validates the arrays as for
:func:`sklstruct.learners._bcfw.bcfw_pass`.
"""

from libc.math cimport fabs
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct.learners._token_rows cimport int8_t, sequence_sizes, token_scores
from sklstruct._inference._chain cimport (_viterbi_sequence, float64_t, int32_t, int64_t,
                                          intp_t)


cdef intp_t _solve_master(const double* G, const double* c, double* mu, intp_t m,
                          double tol, intp_t max_iter) noexcept nogil:
    """``min 1/2 mu'G mu - c'mu`` over ``mu >= 0, sum mu <= 1`` by SMO from ``mu``.

    The unused capacity (index ``m``) is a variable with zero gradient and curvature.
    """
    cdef double grad[64]
    cdef intp_t it, u, v, up, down
    cdef double slack = 1.0, gmax, gmin, diff, curv, gain, best_gain, step = 0.0
    for u in range(m):
        slack -= mu[u]
    if slack < 0.0:
        slack = 0.0
    for u in range(m):  # gradient of the maximised objective: c - G mu
        grad[u] = c[u]
        for v in range(m):
            grad[u] -= G[u * m + v] * mu[v]
    for it in range(max_iter):
        gmax = 0.0
        up = m
        for u in range(m):
            if grad[u] > gmax:
                gmax = grad[u]
                up = u
        gmin = 1e300
        down = -1
        if slack > 0.0:
            gmin = 0.0
            down = m
        for u in range(m):
            if mu[u] > 0.0 and grad[u] < gmin:
                gmin = grad[u]
                down = u
        if down < 0 or gmax - gmin <= tol or up == down:
            break
        best_gain = -1.0
        for u in range(m + 1):
            if u == down:
                continue
            diff = (grad[u] if u < m else 0.0) - gmin
            if diff <= 0.0:
                continue
            if u == m:
                curv = G[down * m + down]
            elif down == m:
                curv = G[u * m + u]
            else:
                curv = G[u * m + u] + G[down * m + down] - 2.0 * G[u * m + down]
            if curv < 1e-12:
                curv = 1e-12
            gain = diff * diff / curv
            if gain > best_gain:
                best_gain = gain
                up = u
                step = diff / curv
        if best_gain < 0.0:
            break
        if down == m:
            if step > slack:
                step = slack
        elif step > mu[down]:
            step = mu[down]
        if step <= 0.0:
            break
        if up == m:
            slack += step
        else:
            mu[up] += step
            for v in range(m):
                grad[v] -= step * G[v * m + up]
        if down == m:
            slack = slack - step if slack > step else 0.0
        else:
            mu[down] = mu[down] - step if mu[down] > step else 0.0
            for v in range(m):
                grad[v] += step * G[v * m + down]
    return it


def rsd_pass(const int64_t[::1] indptr, const int32_t[::1] indices,
             const float64_t[::1] data, const int64_t[::1] offsets,
             const int64_t[::1] order, const float64_t[:, ::1] node_loss,
             float64_t[:, ::1] node_marg, float64_t[:, ::1] pair_marg,
             float64_t[::1] expected_loss, float64_t[:, ::1] WT, float64_t[::1] theta,
             double C, float64_t[::1] feature_buffer, int8_t[::1] marker,
             int32_t[:, ::1] vertex_labels, float64_t[:, ::1] vertex_loss,
             float64_t[:, ::1] vertex_weight, int64_t[::1] n_vertices,
             float64_t[::1] block_gap):
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
    cdef intp_t i, k, k2, l, t, t2, s, a, b, q2, lo, length, n_touched, max_len, max_nnz
    cdef intp_t m, slot, p
    cdef int64_t q
    cdef int32_t j
    cdef double v, loss_bar, total, mass, kval, pp
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
    cdef double mv[63]
    cdef double vertex_score[63]
    cdef double marg_pair_dot[63]
    cdef double mm, expected_score, expected_pair_norm
    cdef int32_t* backpointer
    cdef int64_t* labels
    cdef int32_t* touched
    cdef bint failed = False, duplicate
    if r > 63:
        raise ValueError("at most 63 points per example")
    sequence_sizes(&indptr[0], &offsets[0], n_sequences, &max_len, &max_nnz)
    cdef const int32_t* indices_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const double* WT_ptr = &WT[0, 0] if WT.shape[0] > 0 else NULL

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
                for t in range(length):
                    for s in range(S):
                        scores[(max_len + t) * S + s] = scores[t * S + s] + node_loss[lo + t, s]
                if has_transition:
                    for a in range(S):
                        for b in range(S):
                            transition_t[b * S + a] = theta[a * S + b]
                else:
                    memset(transition_t, 0, S * S * sizeof(double))
                _viterbi_sequence(scores + max_len * S, length, S, transition_t,
                                  &theta[S * S] if has_start_end else zeros + S * S,
                                  &theta[S * S + S] if has_start_end else zeros + S * S + S,
                                  delta, delta + S, backpointer, labels)
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
                    else:
                        slot = 0
                        for p in range(1, m):
                            if vertex_weight[i, p] < vertex_weight[i, slot]:
                                slot = p
                    loss_bar = 0.0
                    for t in range(length):
                        vertex_labels[lo + t, slot] = <int32_t> labels[t]
                        loss_bar += node_loss[lo + t, labels[t]]
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
                # scores: E_x[score], score(z_k); Gram pieces
                expected_score = 0.0
                for t in range(length):
                    for s in range(S):
                        expected_score += scores[t * S + s] * node_marg[lo + t, s]
                expected_pair_norm = 0.0
                for q2 in range(P):
                    expected_score += theta[q2] * pair_marg[i, q2]
                    expected_pair_norm += pair_marg[i, q2] * pair_marg[i, q2]
                mm = 0.0
                for t in range(length):
                    for t2 in range(length):
                        v = 0.0
                        for s in range(S):
                            v += node_marg[lo + t, s] * node_marg[lo + t2, s]
                        mm += gram_tokens[t * length + t2] * v
                for p in range(m):
                    total = 0.0
                    for t in range(length):
                        total += scores[t * S + vertex_labels[lo + t, p]]
                    pp = 0.0
                    for e in range(p * (max_len + 1), p * (max_len + 1) + n_pairs):
                        total += theta[pair_index[e]]
                        pp += pair_marg[i, pair_index[e]]
                    vertex_score[p] = total
                    marg_pair_dot[p] = pp
                    total = 0.0
                    for t in range(length):
                        for t2 in range(length):
                            total += gram_tokens[t * length + t2] * \
                                node_marg[lo + t, vertex_labels[lo + t2, p]]
                    mv[p] = total
                for p in range(m):
                    c[p] = C * (vertex_loss[i, p] - expected_loss[i] + vertex_score[p]
                                - expected_score)
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
                        total = C * C * (mm - mv[p] - mv[l] + total + expected_pair_norm
                                         - marg_pair_dot[p] - marg_pair_dot[l] + pp)
                        G[p * m + l] = total
                        G[l * m + p] = total
                block_gap[i] = c[slot]
                if c[slot] > 0.0:
                    total_gap += c[slot]
                # 2. the master problem, from the current point (mu = 0)
                for p in range(m):
                    mu[p] = 0.0
                _solve_master(G, c, mu, m, 1e-6 * fabs(c[slot]) + 1e-300, 20 * m + 20)
                mass = 0.0
                for p in range(m):
                    mass += mu[p]
                if mass <= 0.0:
                    continue
                # 3. move the statistics and w: new = (1 - mass) x + sum_k mu_k z_k
                for t in range(length):
                    for s in range(S):
                        scores[t * S + s] = -mass * node_marg[lo + t, s]  # change of marginals
                    for p in range(m):
                        scores[t * S + vertex_labels[lo + t, p]] += mu[p]
                    for q in range(indptr[lo + t], indptr[lo + t + 1]):
                        j = indices[q]
                        v = C * data[q]
                        for s in range(S):
                            WT[j, s] -= v * scores[t * S + s]
                    for s in range(S):
                        node_marg[lo + t, s] += scores[t * S + s]
                for q2 in range(P):
                    theta[q2] += C * mass * pair_marg[i, q2]
                    pair_marg[i, q2] *= 1.0 - mass
                for p in range(m):
                    for e in range(p * (max_len + 1), p * (max_len + 1) + n_pairs):
                        theta[pair_index[e]] -= C * mu[p]
                        pair_marg[i, pair_index[e]] += mu[p]
                v = -mass * expected_loss[i]
                for p in range(m):
                    v += mu[p] * vertex_loss[i, p]
                expected_loss[i] += v
                for p in range(m):  # (rounding can leave 1 - mass at -1e-16)
                    v = (1.0 - mass) * vertex_weight[i, p] + mu[p]
                    vertex_weight[i, p] = v if v > 0.0 else 0.0
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
