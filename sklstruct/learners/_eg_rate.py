"""The safe learning rate of exponentiated gradient, ``eta = 0.4 / (B + lambda)`` (seed 001).

Theorem 2 and Lemma 3 of seed 001 state that EG-QP on ``Q(a) = b . a + 1/2 a' A a`` over a
product of simplexes never increases ``Q`` when ``eta < 0.567 / (B + lambda)``, where ``lambda``
is the largest eigenvalue of ``A`` and ``B`` bounds the spread of the gradient's entries. For the
max-margin dual ``A = C^2 [<Phi(x_i, y), Phi(x_j, z)>]`` over all labelings.

Only the curvature along feasible directions enters Lemma 3 (an EG step moves every ``a_i`` within
its simplex), so ``lambda`` is computed as the largest eigenvalue of ``A`` restricted to directions
summing to zero on each simplex:

    lambda = C^2 lambda_max( sum_i |Y_i| Cov_i(Psi) ),

with ``Cov_i`` the covariance of the joint feature map of example ``i`` under independent, uniform
labels. That covariance is applied to a vector in closed form over the whole batch, and the
eigenvalue is found by Lanczos iteration. ``|Y_i| = S^{L_i}``, so for long chains the rate is
astronomically small: it is a certificate of monotone progress, not a practical step size.

``B`` uses the bound ``C max_i Delta_max,i + 2 C^2 R_max sum_i R_i`` with
``R_i >= max_y ||Psi(x_i, y_i) - Psi(x_i, y)||``.
"""

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.utils.extmath import row_norms

from ..structures.chain import ChainStructure
from ..structures.multiclass import MultiClass


def check_factored_structure(structure, what):
    """The compiled online updates and the safe rate know chains and multiclass only."""
    if not isinstance(structure, (ChainStructure, MultiClass)):
        raise ValueError(f"{what} supports ChainStructure and MultiClass, got "
                         f"{type(structure).__name__}.")


def _pairwise_layout(structure):
    S, P = structure.n_states_, structure.n_pairwise_
    return P >= S * S and P > 0, P == S * S + 2 * S


def uniform_covariance_operator(structure, batch, weights):
    """``v -> sum_i weights_i Cov_i(Psi) v`` with labels independent and uniform per token."""
    S, d, P = structure.n_states_, structure.n_features_, structure.n_pairwise_
    has_transition, has_start_end = _pairwise_layout(structure)
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
            a, b = v[d * S + S * S: d * S + S * S + S], v[d * S + S * S + S:]
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


def dual_curvature(structure, batch, C):
    """``lambda``: the largest eigenvalue of the dual's Hessian along feasible directions."""
    check_factored_structure(structure, "The safe step size")
    log_sizes = batch.lengths * np.log(structure.n_states_)
    scale = log_sizes.max()
    operator = uniform_covariance_operator(structure, batch, np.exp(log_sizes - scale))
    n = operator.shape[0]
    if n <= 200:
        top = np.linalg.eigvalsh(operator.matmat(np.eye(n)))[-1]
    else:
        top = eigsh(operator, k=1, which="LA", tol=1e-10, return_eigenvectors=False)[0]
    with np.errstate(over="ignore"):
        return float(C) ** 2 * float(np.exp(scale)) * max(float(top), 0.0)


def gradient_spread_bound(structure, batch, Y, C):
    """``B``: a bound on the spread of the dual gradient's entries over the feasible set."""
    token_norms = row_norms(batch.X)
    has_transition, has_start_end = _pairwise_layout(structure)
    seq = batch.sequence_index
    feature_norm = np.bincount(seq, weights=token_norms, minlength=batch.n_sequences)
    squared = feature_norm ** 2 + (2.0 if has_start_end else 0.0)
    if has_transition:
        squared += (batch.lengths - 1.0) ** 2
    radius = 2.0 * np.sqrt(squared)
    max_loss = np.bincount(seq, weights=structure.loss_weights_[Y],
                           minlength=batch.n_sequences).max()
    C = float(C)
    return C * float(max_loss) + 2.0 * C * C * float(radius.max()) * float(radius.sum())


def safe_learning_rate(structure, batch, Y, C):
    """``0.4 / (B + lambda)`` (seed 001, Theorem 2); raises when it underflows."""
    bound = gradient_spread_bound(structure, batch, Y, C) + dual_curvature(structure, batch, C)
    eta = 0.4 / bound
    if not np.isfinite(bound) or eta < 1e-300:
        raise ValueError("the safe step size 0.4 / (B + lambda) underflows on this data "
                         "(lambda grows like n_states ** sequence_length); use "
                         "step='adaptive'.")
    return eta
