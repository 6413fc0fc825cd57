"""Small dense QPs over products of capped simplices, solved by the compiled SMO core."""

import numpy as np

from ._qp import smo


def solve_capped_simplex_qp(G, c, bounds, groups=None, alpha0=None, tol=1e-10, max_iter=None):
    """Maximise ``c . a - 1/2 a' G a`` subject to ``a >= 0`` and group capacity bounds.

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
        Warm start; it is clipped at zero and scaled down into the feasible set if needed.
    tol : float, default=1e-10
        Stop when the largest pairwise violation (gain rate of the best pairwise move) is at
        most ``tol``.
    max_iter : int, default=None
        Maximum number of pairwise steps (``None``: ``100 * k + 1000``).

    Returns
    -------
    alpha : ndarray of shape (k,)
    n_iter : int
        Pairwise steps taken.
    violation : float
        The largest pairwise violation at return; the QP's duality gap is at most
        ``sum_g bounds[g] * violation``.
    """
    G = np.asarray(G, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    k = c.shape[0]
    if G.shape != (k, k):
        raise ValueError(f"G must have shape ({k}, {k}), got {G.shape}.")
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(c))):
        raise ValueError("G and c must be finite (no NaN or inf).")
    groups = np.zeros(k, dtype=np.intp) if groups is None else np.asarray(groups, dtype=np.intp)
    n_groups = int(groups.max()) + 1 if k else 1
    bounds = np.broadcast_to(np.asarray(bounds, dtype=np.float64), (n_groups,)).copy()
    if np.any(bounds < 0) or not np.all(np.isfinite(bounds)):
        raise ValueError("QP bounds must be finite and non-negative.")
    alpha = np.zeros(k) if alpha0 is None else np.maximum(np.asarray(alpha0, dtype=np.float64),
                                                          0.0)
    mass = np.bincount(groups, weights=alpha, minlength=n_groups)
    over = mass > bounds
    if np.any(over):
        alpha *= np.where(over, bounds / np.where(mass > 0, mass, 1.0), 1.0)[groups]
        mass = np.bincount(groups, weights=alpha, minlength=n_groups)
    # the core wants the variables of every group contiguous
    ordered = k == 0 or bool(np.all(groups[1:] >= groups[:-1]))
    order = np.arange(k) if ordered else np.argsort(groups, kind="stable")
    G_sorted = np.ascontiguousarray(G if ordered else G[np.ix_(order, order)])
    value = np.ascontiguousarray(alpha[order])
    grad = np.ascontiguousarray(c[order] - G_sorted @ value)
    group_ptr = np.zeros(n_groups + 1, dtype=np.intp)
    np.cumsum(np.bincount(groups, minlength=n_groups), out=group_ptr[1:])
    slack = np.maximum(bounds - mass, 0.0)
    if max_iter is None:
        max_iter = 100 * k + 1000
    n_iter, violation = smo(G_sorted, grad, value, group_ptr, slack, float(tol), int(max_iter))
    alpha[order] = value
    return alpha, n_iter, violation
