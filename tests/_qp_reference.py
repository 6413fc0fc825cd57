"""Exact optima of small QPs over products of capped simplices, by enumerating active sets.

``max c . a - 1/2 a' G a`` subject to ``a >= 0`` and ``sum_{j in group g} a_j <= bounds[g]``,
with ``G`` symmetric positive semi-definite (possibly singular), is a concave QP with linear
constraints, so a feasible point is optimal if and only if it satisfies the KKT conditions:
``grad = c - G a``, per group a multiplier ``nu_g >= 0`` (zero unless the cap is tight) with
``grad_j = nu_g`` where ``a_j > 0`` and ``grad_j <= nu_g`` where ``a_j = 0``.
"""

import itertools

import numpy as np


def qp_objective(G, c, a):
    """``c . a - 1/2 a' G a``."""
    return float(c @ a - 0.5 * a @ G @ a)


def frank_wolfe_gap(G, c, bounds, groups, a):
    """``max_{b feasible} grad . (b - a)``: an upper bound on ``optimum - objective(a)``.

    Over a product of capped simplices the maximiser puts the whole capacity of a group on its
    largest gradient entry when that entry is positive, and nothing otherwise.
    """
    grad = c - G @ a
    n_groups = len(bounds)
    best = np.zeros(n_groups)
    np.maximum.at(best, groups, grad)
    return float(bounds @ best - grad @ a)


def _subsets(items):
    items = list(items)
    return itertools.chain.from_iterable(
        itertools.combinations(items, r) for r in range(len(items) + 1))


def exact_capped_simplex_qp(G, c, bounds, groups):
    """Maximiser of the QP, by solving the KKT system of every active set.

    Every support ``S`` (variables that may be positive) and every set ``T`` of groups whose
    cap is tight gives a linear system ``(G a)_j + nu_{g(j)} = c_j`` for ``j`` in ``S`` and
    ``sum_{j in S, g(j) = g} a_j = bounds[g]`` for ``g`` in ``T``; a solution that is feasible
    and dual feasible is a KKT point. At a vertex of the (polyhedral) set of maximisers, with
    ``T`` the groups whose cap is tight there, the system has that vertex as its unique
    solution, so the enumeration always finds one. Groups with a zero bound hold zeros.

    Returns
    -------
    a : ndarray of shape (k,)
    value : float
    """
    G = np.asarray(G, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.intp)
    k = c.shape[0]
    scale = 1.0 + np.abs(c).max(initial=0.0) + np.abs(G).max(initial=0.0) * bounds.max()
    eps = 1e-9 * scale
    free = [j for j in range(k) if bounds[groups[j]] > 0]
    best_a, best_value = None, -np.inf
    for support in _subsets(free):
        support = list(support)
        touched = sorted(set(groups[support].tolist()))
        for tight in _subsets(touched):
            tight = list(tight)
            m, t = len(support), len(tight)
            M = np.zeros((m + t, m + t))
            rhs = np.zeros(m + t)
            M[:m, :m] = G[np.ix_(support, support)]
            rhs[:m] = c[support]
            for col, g in enumerate(tight):
                members = [row for row, j in enumerate(support) if groups[j] == g]
                M[members, m + col] = 1.0
                M[m + col, members] = 1.0
                rhs[m + col] = bounds[g]
            solution = np.linalg.lstsq(M, rhs, rcond=None)[0] if m + t else np.zeros(0)
            if np.abs(M @ solution - rhs).max(initial=0.0) > eps:
                continue
            a = np.zeros(k)
            a[support] = solution[:m]
            nu = np.zeros(len(bounds))
            nu[tight] = solution[m:]
            grad = c - G @ a
            mass = np.bincount(groups, weights=a, minlength=len(bounds))
            if (a.min(initial=0.0) < -eps or np.any(mass > bounds + eps) or nu.min() < -eps
                    or np.any(grad[free] > nu[groups[free]] + eps)):
                continue
            a = np.maximum(a, 0.0)
            value = qp_objective(G, c, a)
            if value > best_value:
                best_a, best_value = a, value
    if best_a is None:
        raise AssertionError("no KKT point found: the enumeration is wrong")
    return best_a, best_value
