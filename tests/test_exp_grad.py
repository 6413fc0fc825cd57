"""M3NExpGrad (Bartlett et al. 2004) against exact optima and the cutting-plane learner."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import ChainStructure, M3NExpGrad, StructSVMCuttingPlane
from sklstruct.learners.exp_grad._online import OnlineEGState
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from ._helpers import make_chain_data


@pytest.mark.parametrize("algorithm", ["online", "batch"])
@pytest.mark.parametrize("structure", [ChainStructure(start_end=False),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5])])
def test_reaches_exact_optimum_on_tiny_chains(structure, algorithm):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    model = M3NExpGrad(structure, C=0.5, algorithm=algorithm, tol=1e-6,
                       max_iter=20000).fit(X, y)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = model._encode_known(np.concatenate(y))
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, 0.5)
    ours = primal_objective(model.structure_, batch, Y, model.w_, 0.5)
    gap = model.history_["gap"][-1]
    assert lower - 1e-9 <= ours <= upper + gap + 1e-9
    assert gap <= 1e-6 * ours + 1e-12


@pytest.mark.parametrize("algorithm", ["online", "batch"])
@pytest.mark.parametrize("C", [1e-160, 1e-300])
def test_tiny_C_keeps_finite_steps_and_a_certificate(algorithm, C):
    """Below C of about 1e-154, C * C underflows: the default step sizes are capped
    instead of overflowing (the batch algorithm failed on infinite potentials)."""
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = M3NExpGrad(C=C, algorithm=algorithm).fit(X, y)
    assert np.all(np.isfinite(model.w_)) and np.all(np.isfinite(model.eta_))
    ours, gap = model.objective(X, y), model.history_["gap"][-1]
    assert gap <= model.tol * ours
    # the same objective certified by the cutting plane (the enumerated QP's tolerances are
    # absolute: meaningless at this scale)
    reference = StructSVMCuttingPlane(C=C, tol=1e-6).fit(X, y)
    assert abs(ours - reference.objective(X, y)) <= gap + reference.history_["gap"][-1]


@pytest.mark.parametrize("algorithm, tol", [("batch", 1e-5), ("online", 1e-4)])
def test_matches_cutting_plane_and_dual_never_decreases(algorithm, tol):
    X, y = make_chain_data(n_sequences=40, seed=0)
    eg = M3NExpGrad(C=1.0, algorithm=algorithm, tol=tol, max_iter=10000).fit(X, y)
    cp = StructSVMCuttingPlane(C=1.0, tol=1e-6).fit(X, y)
    h = eg.history_
    assert h["gap"][-1] <= tol * h["primal"][-1]
    assert np.all(np.diff(h["dual"]) >= -1e-9 * abs(h["dual"][-1]))
    assert np.all(h["gap"] >= -1e-9)
    tolerance = h["gap"][-1] + cp.history_["gap"][-1]
    assert abs(eg.objective(X, y) - cp.objective(X, y)) <= tolerance + 1e-9


@pytest.mark.parametrize("algorithm", ["online", "batch"])
def test_warm_start_continues_from_the_last_dual(algorithm):
    X, y = make_chain_data(n_sequences=20, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(C=1.0, algorithm=algorithm, tol=1e-8, max_iter=50,
                           warm_start=True).fit(X, y)
        first_dual = model.history_["dual"][-1]
        model.fit(X, y)
        fresh = M3NExpGrad(C=1.0, algorithm=algorithm, tol=1e-8, max_iter=50).fit(X, y)
    assert model.history_["dual"][0] == pytest.approx(first_dual, rel=1e-12)
    assert model.history_["dual"][-1] > fresh.history_["dual"][-1]


def test_batch_fit_continues_online_but_not_the_reverse():
    X, y = make_chain_data(n_sequences=20, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(algorithm="batch", tol=1e-8, max_iter=30, warm_start=True).fit(X, y)
        last = model.history_["dual"][-1]
        model.set_params(algorithm="online").fit(X, y)
        assert model.history_["dual"][0] == pytest.approx(last, rel=1e-12)
        with pytest.raises(ValueError, match="online fit cannot be continued"):
            model.set_params(algorithm="batch").fit(X, y)


SAMPLE_WEIGHTS = np.array([2, 0, 1, 3, 1, 1, 0, 2])


@pytest.mark.parametrize("step", ["adaptive", "safe"])
def test_integer_weights_reach_the_optimum_of_the_repeated_data(step):
    """Online EG with weights 0 to 3: its certified primal is the objective of the data with
    each sequence repeated that many times, within its gap of that data's exact optimum
    (the safe rate from the bounds of the largest C s_i)."""
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=3, seed=4)
    C = 0.1
    model = M3NExpGrad(C=C, step=step, tol=1e-5, max_iter=20000 if step == "adaptive" else 500,
                       random_state=0).fit(
        X, y, sample_weight=SAMPLE_WEIGHTS)
    X_rep = [x for x, k in zip(X, SAMPLE_WEIGHTS) for _ in range(k)]
    y_rep = [s for s, k in zip(y, SAMPLE_WEIGHTS) for _ in range(k)]
    batch = SequenceBatch(np.vstack(X_rep), offsets_from_lengths([len(s) for s in y_rep]))
    Y = model._encode_known(np.concatenate(y_rep))
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, C)
    h = model.history_
    primal = model.objective(X_rep, y_rep)
    assert primal == pytest.approx(h["primal"][-1], rel=1e-9)
    assert primal == pytest.approx(model.objective(X, y, sample_weight=SAMPLE_WEIGHTS),
                                   rel=1e-12)
    assert h["dual"][-1] <= upper + 1e-9 and primal >= lower - 1e-9
    if step == "safe":  # slow, but the dual never decreases (Theorem 2 at the largest C s_i)
        assert np.all(np.diff(h["dual"]) >= -1e-12 * abs(h["dual"][-1]))
        return
    assert h["gap"][-1] <= 1e-5 * primal
    unweighted = M3NExpGrad(C=C, tol=1e-5, max_iter=20000, random_state=0).fit(X, y)
    assert unweighted.objective(X, y, sample_weight=SAMPLE_WEIGHTS) - primal \
        > 10 * h["gap"][-1]


def test_real_weights_agree_with_the_cutting_plane_and_warm_start_across_weights():
    """Weights that are not integers: the objective of the cutting plane within the two
    gaps; a warm start from a fit with other weights starts afresh (the previous potentials
    are feasible, but sharpened on the other optimum they move to this one slowly: relative
    gaps of 6e-3 against 1e-6 from a fresh start on tiny chains)."""
    X, y = make_chain_data(n_sequences=20, n_states=3, n_features=5, max_length=7, seed=8)
    weights = np.random.default_rng(1).uniform(0.05, 4.0, size=20)
    C = 0.1
    model = M3NExpGrad(C=C, tol=1e-6, max_iter=20000, random_state=0, warm_start=True)
    model.fit(X, y, sample_weight=weights[::-1])
    model.fit(X, y, sample_weight=weights)
    fresh = M3NExpGrad(C=C, tol=1e-6, max_iter=20000, random_state=0)
    np.testing.assert_array_equal(model.w_, fresh.fit(X, y, sample_weight=weights).w_)
    model.fit(X, y, sample_weight=weights)  # (the same weights: continued, at once)
    assert model.n_iter_ == 0
    reference = StructSVMCuttingPlane(C=C, tol=1e-7).fit(X, y, sample_weight=weights)
    p_model = model.objective(X, y, sample_weight=weights)
    assert p_model == pytest.approx(model.history_["primal"][-1], rel=1e-9)
    assert abs(p_model - reference.objective(X, y, sample_weight=weights)) \
        <= model.history_["gap"][-1] + reference.history_["gap"][-1] + 1e-9


def test_weights_of_one_change_nothing_and_batch_refuses_weights():
    X, y = make_chain_data(n_sequences=12, seed=1)
    plain = M3NExpGrad(random_state=0).fit(X, y)
    ones = M3NExpGrad(random_state=0).fit(X, y, sample_weight=np.ones(12))
    np.testing.assert_array_equal(plain.w_, ones.w_)
    with pytest.raises(ValueError, match="algorithm='online' only"):
        M3NExpGrad(algorithm="batch").fit(X, y, sample_weight=np.arange(12) + 1.0)


def test_eg_qp_reaches_the_minimum_of_a_simplex_qp():
    from scipy.optimize import minimize

    from ._eg_qp import eg_qp

    rng = np.random.default_rng(0)
    for _ in range(5):
        m = 7
        F = rng.normal(size=(m, 3))
        A, b = F @ F.T, rng.normal(size=m)
        groups = np.array([0, 0, 0, 1, 1, 2, 2])
        alpha, values = eg_qp(A, b, groups, eta=0.2, n_iter=3000)
        assert np.all(np.diff(values) <= 1e-12)  # small steps never increase Q here
        cons = [{"type": "eq", "fun": (lambda a, g=g: a[groups == g].sum() - 1)}
                for g in range(3)]
        ref = minimize(lambda a: b @ a + 0.5 * a @ A @ a, np.full(m, 0.4), method="SLSQP",
                       bounds=[(0, 1)] * m, constraints=cons, options={"ftol": 1e-14})
        assert values[-1] == pytest.approx(ref.fun, abs=1e-6)
        np.testing.assert_allclose(np.bincount(groups, weights=alpha), 1.0)


def test_theorem_1_factored_updates_equal_eg_qp_on_the_explicit_dual():
    """Bartlett et al. 2004, Theorem 1: the same dual iterates (compared through F and w)."""
    from ._eg_qp import eg_qp

    from ._enumeration import enumerate_constraints

    X, y = make_chain_data(n_sequences=4, n_states=2, n_features=2, max_length=3, seed=3)
    C, eta, steps = 0.7, 0.05, 25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(ChainStructure(), C=C, algorithm="batch", eta=eta, step="fixed",
                           init_bias=0.0, tol=1e-12, max_iter=steps, check_every=1).fit(X, y)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = model._encode_known(np.concatenate(y))
    directions, losses, groups = enumerate_constraints(model.structure_, batch, Y)
    # add the zero-loss labeling y_i of every example (direction 0, loss 0)
    size = directions.shape[1]
    n = batch.n_sequences
    directions = np.vstack([directions, np.zeros((n, size))])
    losses = np.concatenate([losses, np.zeros(n)])
    groups = np.concatenate([groups, np.arange(n)])
    # Q(a) = -F(a) = -C a.L + 1/2 C^2 ||sum a Phi||^2 ; the factored algorithm starts uniform
    A = C ** 2 * directions @ directions.T
    # the model records the iterates 0 .. steps
    alpha, values = eg_qp(A, -C * losses, groups, eta=eta, n_iter=steps)
    np.testing.assert_allclose(-values[: steps + 1], model.history_["dual"], rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(C * alpha @ directions, model.w_, atol=1e-8)


@pytest.mark.parametrize("algorithm", ["online", "batch"])
def test_init_bias_starts_from_the_gibbs_distribution_with_that_bias(algorithm):
    """init_bias b: every example starts at a_i(y) proportional to exp(b * #{t: y_t = y_it}),
    i.e. to exp(-b * Hamming loss); the first certificate is the dual of that point
    (enumerated labelings)."""
    from ._enumeration import enumerate_constraints

    X, y = make_chain_data(n_sequences=4, n_states=3, n_features=2, max_length=3, seed=5)
    C, bias = 0.7, 2.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(C=C, init_bias=bias, algorithm=algorithm, max_iter=1,
                           random_state=0).fit(X, y)
        uniform = M3NExpGrad(C=C, algorithm=algorithm, max_iter=1, random_state=0).fit(X, y)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = model._encode_known(np.concatenate(y))
    directions, losses, groups = enumerate_constraints(model.structure_, batch, Y)
    n = batch.n_sequences
    directions = np.vstack([directions, np.zeros((n, directions.shape[1]))])
    losses = np.concatenate([losses, np.zeros(n)])
    groups = np.concatenate([groups, np.arange(n)])
    alpha = np.exp(-bias * losses)
    alpha /= np.bincount(groups, weights=alpha)[groups]
    w = C * alpha @ directions
    dual = C * float(alpha @ losses) - 0.5 * float(w @ w)
    assert model.history_["dual"][0] == pytest.approx(dual, rel=1e-10)
    assert model.history_["dual"][0] != pytest.approx(uniform.history_["dual"][0], rel=1e-3)


def test_warm_start_with_a_fixed_default_step_keeps_the_rates():
    X, y = make_chain_data(n_sequences=10, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(step="fixed", warm_start=True, max_iter=5).fit(X, y)
        rates = model.eta_.copy()
        model.fit(X, y)
    np.testing.assert_array_equal(model.eta_, rates)


def test_online_passes_visit_the_examples_in_a_fresh_random_order(monkeypatch):
    """random_state fixes the fit; each online pass visits every example once, in an order
    drawn anew for the pass (the data's own order is not kept)."""
    rng = np.random.default_rng(1)
    X = [rng.normal(size=(rng.integers(1, 5), 3)) for _ in range(12)]
    y = [rng.integers(0, 3, size=len(x)) for x in X]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        first = M3NExpGrad(C=1.0, max_iter=3, random_state=7).fit(X, y)
        again = M3NExpGrad(C=1.0, max_iter=3, random_state=7).fit(X, y)
        other = M3NExpGrad(C=1.0, max_iter=3, random_state=8).fit(X, y)
    np.testing.assert_array_equal(first.w_, again.w_)
    assert not np.array_equal(first.w_, other.w_)

    visits = []
    original = OnlineEGState.run_pass

    def recording(state, adaptive, order=None, **kwargs):
        visits.append(np.array(order))
        return original(state, adaptive, order, **kwargs)

    monkeypatch.setattr(OnlineEGState, "run_pass", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        M3NExpGrad(C=1.0, max_iter=4, random_state=0, check_every=4).fit(X, y)
    assert len(visits) == 4
    for order in visits:
        np.testing.assert_array_equal(np.sort(order), np.arange(12))
    assert len({order.tobytes() for order in visits}) == 4


@pytest.mark.parametrize("algorithm", ["online", "batch"])
def test_automatic_checks_grow_by_a_quarter(algorithm):
    """Without a gap estimate of its own, EG certifies after 1, 2, 3, 4, 5, 7, 9, 12, ...
    passes (each about a quarter more than the last) and after the last pass."""
    X, y = make_chain_data(n_sequences=6, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(C=1.0, tol=1e-12, max_iter=20, algorithm=algorithm,
                           random_state=0).fit(X, y)
    assert model.history_["passes"].tolist() == [0, 1, 2, 3, 4, 5, 7, 9, 12, 15, 19, 20]
