"""Small dense QP over capped simplices, solved by SMO in compiled code."""

import numpy as np

from .._inference._qp import smo_capped_simplex


def solve_capped_simplex_qp(G, c, bounds, groups=None, alpha0=None, tol=1e-10, max_iter=None):
    """Minimise ``1/2 a^T G a - c^T a`` subject to ``a >= 0`` and group capacity bounds.

    Parameters
    ----------
    G : ndarray of shape (k, k)
        Symmetric positive semi-definite matrix.
    c : ndarray of shape (k,)
        Linear term.
    bounds : float or ndarray of shape (n_groups,)
        ``sum_{j in group g} a_j <= bounds[g]``.
    groups : ndarray of shape (k,), default=None
        Group index of each variable; ``None`` puts every variable in group 0.
    alpha0 : ndarray of shape (k,), default=None
        Feasible warm start (it is scaled down into the feasible set if needed).
    tol : float, default=1e-10
        Stop when the largest first-order pairwise violation is below ``tol``.
    max_iter : int, default=None
        Maximum number of pairwise steps (``None``: ``100 * k + 1000``).

    Returns
    -------
    alpha : ndarray of shape (k,)
    n_iter : int
    violation : float
        The largest pairwise KKT violation at return; the QP's duality gap is at most
        ``sum_g bounds[g] * violation``.
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    c = np.ascontiguousarray(c, dtype=np.float64)
    k = c.shape[0]
    if G.shape != (k, k):
        raise ValueError(f"G must have shape ({k}, {k}), got {G.shape}.")
    if groups is None:
        groups = np.zeros(k, dtype=np.intp)
    groups = np.asarray(groups, dtype=np.intp)
    n_groups = int(groups.max()) + 1 if k else 1
    bounds = np.broadcast_to(np.asarray(bounds, dtype=np.float64), (n_groups,)).copy()
    if np.any(bounds < 0) or not np.all(np.isfinite(bounds)):
        raise ValueError("QP bounds must be finite and non-negative.")
    alpha = np.zeros(k) if alpha0 is None else np.maximum(np.asarray(alpha0, dtype=np.float64), 0.0)
    mass = np.bincount(groups, weights=alpha, minlength=n_groups)
    over = mass > bounds
    if np.any(over):
        alpha *= np.where(over, bounds / np.where(mass > 0, mass, 1.0), 1.0)[groups]
        mass = np.bincount(groups, weights=alpha, minlength=n_groups)
    slack = np.maximum(bounds - mass, 0.0)
    order = np.argsort(groups, kind="stable").astype(np.intp)
    group_ptr = np.zeros(n_groups + 1, dtype=np.intp)
    np.cumsum(np.bincount(groups, minlength=n_groups), out=group_ptr[1:])
    grad = G @ alpha - c
    if max_iter is None:
        max_iter = 100 * k + 1000
    n_iter, violation = smo_capped_simplex(
        G, c, alpha, grad, group_ptr, order, slack, float(tol), int(max_iter)
    )
    return alpha, n_iter, violation
