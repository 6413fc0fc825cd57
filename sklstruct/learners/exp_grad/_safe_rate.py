"""The safe learning rate of exponentiated gradient, ``eta = 0.4 / (B + lambda)``.

Theorem 2 and Lemma 3 of Bartlett et al. (2004) state that EG-QP on ``Q(a) = b . a + 1/2 a' A a`` over a
product of simplexes never increases ``Q`` when ``eta < 0.567 / (B + lambda)``, where ``lambda``
is the largest eigenvalue of ``A`` and ``B`` bounds the spread of the gradient's entries. For the
max-margin dual ``A = C^2 [<Phi(x_i, y), Phi(x_j, z)>]`` over all labelings.

Only the curvature along feasible directions enters Lemma 3 (an EG step moves every ``a_i`` within
its simplex), so ``lambda`` is computed as the largest eigenvalue of ``A`` restricted to directions
summing to zero on each simplex:

    lambda = C^2 lambda_max( sum_i |Y_i| Cov_i(Psi) ),

with ``Cov_i`` the covariance of the joint feature map of example ``i`` under independent, uniform
labels, applied in closed form by the structure (``uniform_covariance_operator``), and the
eigenvalue found by Lanczos iteration. ``|Y_i| = S^{L_i}``, so for long chains the rate is
astronomically small: it is a certificate of monotone progress, not a practical step size.

``B`` uses the bound ``C max_i Delta_max,i + 2 C^2 R_max sum_i R_i`` with
``R_i >= max_y ||Psi(x_i, y_i) - Psi(x_i, y)||``.
"""

import numpy as np
from scipy.sparse.linalg import eigsh
from sklearn.utils.extmath import row_norms

from ...structures._base import checked_token_loss


def check_safe_rate_structure(structure, what):
    """The safe rate needs the structure's covariance operator (chains and multiclass)."""
    if not hasattr(structure, "uniform_covariance_operator"):
        raise ValueError(f"{what} supports ChainStructure and MultiClass (structures with a "
                         f"uniform_covariance_operator), got {type(structure).__name__}.")


def dual_curvature(structure, batch, C):
    """``lambda``: the largest eigenvalue of the dual's Hessian along feasible directions."""
    check_safe_rate_structure(structure, "The safe step size")
    log_sizes = batch.lengths * np.log(structure.n_states_)
    scale = log_sizes.max()
    operator = structure.uniform_covariance_operator(batch, np.exp(log_sizes - scale))
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
    seq = batch.sequence_index
    feature_norm = np.bincount(seq, weights=token_norms, minlength=batch.n_sequences)
    # max ||Psi(x_i, y)||^2 <= (sum_t ||x_t||)^2 + max ||pairwise statistics||^2
    pairwise_bound = structure.max_pairwise_norm_sq(batch)
    if pairwise_bound is None:
        raise ValueError(f"The safe step size needs pairwise_count_blocks covering the "
                         f"pairwise statistics of {type(structure).__name__}.")
    squared = feature_norm ** 2 + pairwise_bound
    radius = 2.0 * np.sqrt(squared)
    max_loss = np.bincount(seq, weights=checked_token_loss(structure, Y).max(axis=1),
                           minlength=batch.n_sequences).max()
    C = float(C)
    return C * float(max_loss) + 2.0 * C * C * float(radius.max()) * float(radius.sum())


def safe_learning_rate(structure, batch, Y, C):
    """``0.4 / (B + lambda)`` (Theorem 2); raises when it underflows."""
    check_safe_rate_structure(structure, "The safe step size")
    bound = gradient_spread_bound(structure, batch, Y, C) + dual_curvature(structure, batch, C)
    eta = 0.4 / bound
    if not np.isfinite(bound) or eta < 1e-300:
        raise ValueError("the safe step size 0.4 / (B + lambda) underflows on this data "
                         "(lambda grows like n_states ** sequence_length); use "
                         "step='adaptive'.")
    return eta
