"""The QP core: ``solve_capped_simplex_qp`` against exact optima found by enumerating active
sets (tests/_qp_reference.py), and its certificate ``duality gap <= sum_g bounds[g] *
violation``."""

import numpy as np
import pytest

from sklstruct._solvers._qp import active_set
from sklstruct._solvers.qp import solve_capped_simplex_qp

from ._qp_reference import exact_capped_simplex_qp, frank_wolfe_gap, qp_objective

GRAM_KINDS = ["full rank", "rank deficient", "zero rows", "duplicate points", "zero"]


def _gram(rng, k, kind):
    """``G = L' L`` of one of the degenerate kinds the learners produce."""
    if kind == "full rank":
        L = rng.normal(size=(k + 2, k))
    elif kind == "rank deficient":
        L = rng.normal(size=(max(1, k // 2), k))
    elif kind == "zero rows":
        L = rng.normal(size=(k + 1, k))
        L[:, rng.random(k) < 0.5] = 0.0
    elif kind == "duplicate points":
        L = rng.normal(size=(k + 1, k))[:, rng.integers(0, k, size=k)]
    else:
        L = np.zeros((1, k))
    return L.T @ L


def _problem(seed, kind, max_k=6):
    """A random QP: 1 to ``max_k`` variables in up to 3 groups (in any order, some empty)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, max_k + 1))
    n_groups = int(rng.integers(1, 4))
    groups = rng.integers(0, n_groups, size=k)
    bounds = rng.uniform(0.2, 3.0, size=int(groups.max()) + 1)
    return _gram(rng, k, kind), 2.0 * rng.normal(size=k), bounds, groups


def _assert_feasible(alpha, bounds, groups):
    assert np.all(alpha >= 0.0)
    mass = np.bincount(groups, weights=alpha, minlength=len(bounds))
    assert np.all(mass <= bounds * (1.0 + 1e-12))


def _rounding(G, c, alpha):
    """Rounding allowance for quantities of the size of the objective's terms."""
    return 1e-12 * (1.0 + np.abs(c) @ alpha + alpha @ np.abs(G) @ alpha)


@pytest.mark.parametrize("kind", GRAM_KINDS)
@pytest.mark.parametrize("seed", range(12))
def test_reaches_the_exact_optimum(kind, seed):
    G, c, bounds, groups = _problem(seed, kind)
    a_star, optimum = exact_capped_simplex_qp(G, c, bounds, groups)
    tol = 1e-10
    alpha, n_iter, violation = solve_capped_simplex_qp(G, c, bounds, groups=groups, tol=tol)
    _assert_feasible(alpha, bounds, groups)
    assert n_iter < 100 * len(c) + 1000
    assert violation <= tol
    value = qp_objective(G, c, alpha)
    gap_bound = bounds.sum() * tol + _rounding(G, c, alpha)
    assert optimum - gap_bound <= value <= optimum + 1e-9
    # the maximisers share G a: optimum - f(a) >= 1/2 (a - a*)' G (a - a*)
    d = alpha - a_star
    assert d @ G @ d <= 2.0 * gap_bound + 1e-9


@pytest.mark.parametrize("tol", [1e-1, 1e-3, 1e-6, 1e-10])
@pytest.mark.parametrize("seed", range(10))
def test_tolerance_bounds_the_duality_gap(tol, seed):
    # larger problems than the enumeration reaches: the Frank-Wolfe gap certifies the optimum
    rng = np.random.default_rng(seed)
    k = 40
    groups = rng.integers(0, 5, size=k)
    bounds = rng.uniform(0.1, 2.0, size=int(groups.max()) + 1)
    G = _gram(rng, k, GRAM_KINDS[seed % len(GRAM_KINDS)])
    c = 3.0 * rng.normal(size=k)
    alpha, n_iter, violation = solve_capped_simplex_qp(G, c, bounds, groups=groups, tol=tol)
    _assert_feasible(alpha, bounds, groups)
    assert violation <= tol
    gap = frank_wolfe_gap(G, c, bounds, groups, alpha)
    assert -1e-9 <= gap <= bounds.sum() * violation + _rounding(G, c, alpha)


@pytest.mark.parametrize("kind", GRAM_KINDS)
@pytest.mark.parametrize("seed", range(6))
def test_warm_starts_reach_the_same_optimum(kind, seed):
    G, c, bounds, groups = _problem(seed, kind)
    _, optimum = exact_capped_simplex_qp(G, c, bounds, groups)
    rng = np.random.default_rng(100 + seed)
    k = len(c)
    feasible = rng.exponential(size=k)
    feasible *= 0.9 * bounds[groups] / np.bincount(groups, weights=feasible)[groups]
    over_capacity = 5.0 * bounds[groups] * rng.random(k)
    with_negatives = rng.normal(size=k)
    for alpha0 in (feasible, over_capacity, with_negatives):
        alpha, _, violation = solve_capped_simplex_qp(G, c, bounds, groups=groups,
                                                      alpha0=alpha0)
        _assert_feasible(alpha, bounds, groups)
        assert violation <= 1e-10
        assert qp_objective(G, c, alpha) == pytest.approx(optimum, abs=1e-9 * (1 + abs(optimum)))


@pytest.mark.parametrize("seed", range(5))
def test_restart_from_the_solution_is_nearly_free(seed):
    rng = np.random.default_rng(seed)
    k = 40
    groups = rng.integers(0, 5, size=k)
    bounds = rng.uniform(0.1, 2.0, size=int(groups.max()) + 1)
    G = _gram(rng, k, "rank deficient")
    c = 3.0 * rng.normal(size=k)
    alpha, n_cold, _ = solve_capped_simplex_qp(G, c, bounds, groups=groups)
    warm, n_warm, violation = solve_capped_simplex_qp(G, c, bounds, groups=groups,
                                                      alpha0=alpha)
    assert n_cold > 50
    assert n_warm < n_cold // 10
    assert violation <= 1e-10
    assert qp_objective(G, c, warm) == pytest.approx(qp_objective(G, c, alpha), abs=1e-12)


def test_start_is_clipped_then_scaled_into_the_feasible_set():
    G, c = np.eye(3), np.array([1.0, 2.0, 3.0])
    alpha, n_iter, violation = solve_capped_simplex_qp(G, c, 1.0, alpha0=[0.5, -1.0, 1.5],
                                                       max_iter=0)
    np.testing.assert_allclose(alpha, [0.25, 0.0, 0.75])
    assert n_iter == 0
    # the violation of that start: the gradient c - G a is (0.75, 2, 2.25), the positive
    # variable of smallest gradient has 0.75
    assert violation == pytest.approx(2.25 - 0.75)


def test_zero_gram_is_a_linear_programme():
    # without curvature each group puts its capacity on its best positive entry
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(1, 8))
        groups = rng.integers(0, 3, size=k)
        bounds = rng.uniform(0.5, 2.0, size=int(groups.max()) + 1)
        c = rng.normal(size=k)
        alpha, _, violation = solve_capped_simplex_qp(np.zeros((k, k)), c, bounds,
                                                      groups=groups)
        best = np.zeros(len(bounds))
        np.maximum.at(best, groups, c)
        assert c @ alpha == pytest.approx(bounds @ best, abs=1e-12)
        assert violation == 0.0


def test_groups_in_any_order_and_zero_bounds():
    rng = np.random.default_rng(3)
    k = 7
    G = _gram(rng, k, "full rank")  # a unique maximiser, so the variables can be compared
    c = 2.0 * rng.normal(size=k) + 1.0
    groups = np.array([0, 1, 0, 2, 1, 2, 0])
    bounds = np.array([1.0, 0.0, 2.0])
    alpha, _, _ = solve_capped_simplex_qp(G, c, bounds, groups=groups)
    a_star, _ = exact_capped_simplex_qp(G, c, bounds, groups)
    np.testing.assert_allclose(alpha, a_star, atol=1e-6)
    assert np.all(alpha[groups == 1] == 0.0)
    perm = rng.permutation(k)
    permuted, _, _ = solve_capped_simplex_qp(G[np.ix_(perm, perm)], c[perm], bounds,
                                             groups=groups[perm])
    np.testing.assert_allclose(permuted, alpha[perm], atol=1e-6)
    # a group index that is never used is an empty group
    skipped, _, _ = solve_capped_simplex_qp(G, c, [1.0, 0.0, 2.0, 5.0],
                                            groups=np.where(groups == 2, 3, groups))
    np.testing.assert_allclose(skipped, alpha, atol=1e-6)


def test_default_group_and_scalar_bound():
    rng = np.random.default_rng(5)
    G, c = _gram(rng, 5, "rank deficient"), rng.normal(size=5) + 0.5
    alpha, n_iter, violation = solve_capped_simplex_qp(G, c, 1.5)
    same, _, _ = solve_capped_simplex_qp(G, c, np.array([1.5]), groups=np.zeros(5, int))
    np.testing.assert_array_equal(alpha, same)
    assert qp_objective(G, c, alpha) == pytest.approx(
        exact_capped_simplex_qp(G, c, np.array([1.5]), np.zeros(5, int))[1], abs=1e-9)


def test_max_iter_is_honoured():
    rng = np.random.default_rng(1)
    k = 30
    G, c = _gram(rng, k, "full rank"), rng.normal(size=k)
    _, n_full, _ = solve_capped_simplex_qp(G, c, 1.0)
    assert n_full > 3
    alpha, n_iter, violation = solve_capped_simplex_qp(G, c, 1.0, max_iter=3)
    assert n_iter == 3
    assert violation > 1e-10
    _assert_feasible(alpha, np.array([1.0]), np.zeros(k, dtype=np.intp))


def test_empty_problem_and_bad_input():
    alpha, n_iter, violation = solve_capped_simplex_qp(np.zeros((0, 0)), np.zeros(0), 1.0)
    assert alpha.shape == (0,) and n_iter == 0 and violation == 0.0
    G, c = np.eye(3), np.ones(3)
    with pytest.raises(ValueError, match="G must have shape"):
        solve_capped_simplex_qp(np.eye(2), c, 1.0)
    with pytest.raises(ValueError, match="bounds must be finite and non-negative"):
        solve_capped_simplex_qp(G, c, -1.0)
    with pytest.raises(ValueError, match="bounds must be finite and non-negative"):
        solve_capped_simplex_qp(G, c, np.inf)


def test_non_finite_problems_are_refused():
    with pytest.raises(ValueError, match="finite"):
        solve_capped_simplex_qp(np.eye(2), np.array([np.nan, 1.0]), 1.0)
    with pytest.raises(ValueError, match="finite"):
        solve_capped_simplex_qp(np.array([[np.inf, 0.0], [0.0, 1.0]]), np.ones(2), 1.0)


# ---------------------------------------------------------------- the active-set solver
@pytest.mark.parametrize("kind", GRAM_KINDS)
@pytest.mark.parametrize("seed", range(12))
def test_active_set_reaches_the_exact_optimum_of_one_capped_simplex(kind, seed):
    """One group (the masters of the simplicial decomposition), from a random feasible start:
    the optimum up to the regularisation's bound, the exact gradient at the point, feasible;
    it gives up (-1) only on a zero Gram matrix, and then not below its start."""
    G, c, bounds, _ = _problem(seed, kind, max_k=8)
    rng = np.random.default_rng(100 + seed)
    k, bound = len(c), float(bounds[0])
    groups = np.zeros(k, dtype=np.intp)
    start = rng.random(k) * (rng.random(k) < 0.6)
    start *= rng.uniform(0.0, bound) / max(start.sum(), 1e-300)
    a_star, optimum = exact_capped_simplex_qp(G, c, np.array([bound]), groups)
    value, grad = start.copy(), c - G @ start
    slack = np.array([bound - start.sum()])
    n_iter = active_set(np.ascontiguousarray(G), grad, value, slack, 1e-12, 4 * k + 24)
    _assert_feasible(value, np.array([bound]), groups)
    assert slack[0] >= 0.0 and abs(slack[0] + value.sum() - bound) <= 1e-12 * (1.0 + bound)
    np.testing.assert_allclose(grad, c - G @ value, rtol=0, atol=1e-12 * (1 + np.abs(c).max()))
    assert qp_objective(G, c, value) >= qp_objective(G, c, start) - _rounding(G, c, start)
    if kind == "zero":
        assert n_iter == -1
        return
    assert 0 <= n_iter <= 4 * k + 24
    # G + delta I on the faces (delta = 1e-12 max G_jj): the optimum within delta |move|^2
    allowance = 1e-12 * np.abs(np.diag(G)).max() * 4.0 * bound ** 2 + _rounding(G, c, a_star)
    assert optimum - allowance <= qp_objective(G, c, value) <= optimum + 1e-9


def test_active_set_gives_up_beyond_its_size_and_leaves_the_point():
    k = 127
    G = np.eye(k)
    value = np.full(k, 1.0 / k)
    grad = np.ones(k) - G @ value
    slack = np.array([0.0])
    assert active_set(G, grad, value, slack, 1e-12, 100) == -1
    np.testing.assert_array_equal(value, np.full(k, 1.0 / k))
