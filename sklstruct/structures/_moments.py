"""Covariance of a chain's joint feature map under independent, uniform labels.

Used by the safe step size of exponentiated gradient (Bartlett et al. 2004, Theorem 2 and
Lemma 3): the dual's curvature along feasible directions is
``C^2 lambda_max(sum_i |Y_i| Cov_i(Psi))``. The covariance is applied to a vector in closed
form over the whole batch.
"""

import numpy as np
from scipy.sparse.linalg import LinearOperator


def uniform_covariance_operator(structure, batch, weights, has_transition, has_start_end):
    """``v -> sum_i weights_i Cov_i(Psi) v`` for a chain (or multiclass, without pairwise
    parts) with labels independent and uniform per token.

    ``has_transition`` and ``has_start_end`` say which blocks the structure's pairwise part
    holds (transitions ``S * S``, then start and end biases ``S`` each).
    """
    S, d, P = structure.n_states_, structure.n_features_, structure.n_pairwise_
    X, offsets = batch.X, batch.offsets
    first, last = offsets[:-1], offsets[1:] - 1
    token_weight = np.repeat(weights, batch.lengths)
    is_first = np.zeros(batch.n_tokens, dtype=bool)
    is_first[first] = True
    is_last = np.zeros(batch.n_tokens, dtype=bool)
    is_last[last] = True
    left = np.flatnonzero(~is_last)
    right = left + 1
    pair_weight = token_weight[left]
    zeros = np.zeros(S)
    start_at = d * S + (S * S if has_transition else 0)

    def matvec(v):
        v = np.asarray(v, dtype=np.float64).ravel()
        u = np.asarray(X @ v[: d * S].reshape(d, S))
        centred_u = u - u.mean(axis=1, keepdims=True)
        node = centred_u.copy()
        col = row = start = end = zeros
        if has_transition:
            T = v[d * S: d * S + S * S].reshape(S, S)
            mean = T.mean()
            row, col = T.mean(axis=1) - mean, T.mean(axis=0) - mean
            node[~is_first] += col
            node[~is_last] += row
        if has_start_end:
            a, b = v[start_at: start_at + S], v[start_at + S: start_at + 2 * S]
            start, end = a - a.mean(), b - b.mean()
            node[is_first] += start
            node[is_last] += end
        node *= token_weight[:, None] / S
        out = [np.asarray(X.T @ node).ravel()]
        if has_transition:
            left_terms = centred_u[left] + np.where(is_first[left][:, None], start, col)
            right_terms = centred_u[right] + np.where(is_last[right][:, None], end, row)
            out.append(((pair_weight.sum() * (T - mean)
                         + (pair_weight @ left_terms)[:, None]
                         + (pair_weight @ right_terms)[None, :]) / S ** 2).ravel())
        if has_start_end:
            out.append(node[first].sum(axis=0))
            out.append(node[last].sum(axis=0))
        return np.concatenate(out)

    return LinearOperator((d * S + P, d * S + P), matvec=matvec, dtype=np.float64)
