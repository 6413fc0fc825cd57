"""M3NExpGrad's step sizes (Bartlett et al. 2004, Theorem 2 / Lemma 3) and the online pass's
bookkeeping."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import ChainStructure, M3NExpGrad, MultiClass
from sklstruct.learners.exp_grad._online import OnlineEGState
from sklstruct.learners.exp_grad._safe_rate import dual_curvature, gradient_spread_bound
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import enumerate_labelings
from ._helpers import make_chain_data


def _bound_problem(structure, n_sequences, n_states, n_features, max_length, seed):
    X, y = make_chain_data(n_sequences=n_sequences, n_states=n_states, n_features=n_features,
                           max_length=max_length, seed=seed)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    bound = structure.bind(n_features, n_states, np.arange(n_states), Y)
    return bound, batch, Y


@pytest.mark.parametrize("structure", [ChainStructure(), ChainStructure(start_end=False)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curvature_is_the_largest_feasible_eigenvalue(structure, seed):
    C = 0.7
    bound, batch, Y = _bound_problem(structure, 3, 3, 2, 3, seed)
    Phi, _, groups = enumerate_labelings(bound, batch, Y)
    # A restricted to directions that sum to zero on every simplex
    projector = np.eye(len(groups)) - (groups[:, None] == groups[None, :]) / np.bincount(
        groups)[groups][None, :]
    A = C ** 2 * Phi @ Phi.T
    expected = np.linalg.eigvalsh(projector @ A @ projector)[-1]
    assert dual_curvature(bound, batch, C) == pytest.approx(expected, rel=1e-10)
    # the covariance operator itself, against the enumerated second moments
    sizes = np.bincount(groups).astype(float)
    G = sum(Phi[groups == i].T @ (Phi[groups == i] - Phi[groups == i].mean(axis=0))
            for i in range(batch.n_sequences))
    operator = bound.uniform_covariance_operator(batch, sizes)
    np.testing.assert_allclose(operator.matmat(np.eye(G.shape[0])), G, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_spread_bound_holds_at_random_duals(seed):
    C = 0.7
    bound, batch, Y = _bound_problem(ChainStructure(), 4, 3, 2, 3, seed)
    Phi, losses, groups = enumerate_labelings(bound, batch, Y)
    truth = np.concatenate([bound.joint_feature(
        SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64)), Y[lo:hi])
        for lo, hi in zip(batch.offsets[:-1], batch.offsets[1:])]).reshape(
        batch.n_sequences, -1)
    B = gradient_spread_bound(bound, batch, Y, C)
    rng = np.random.default_rng(seed)
    for _ in range(50):
        alpha = rng.exponential(size=len(groups)) ** 4  # near the simplex vertices too
        alpha /= np.bincount(groups, weights=alpha)[groups]
        w = C * (truth.sum(axis=0) - alpha @ Phi)
        gradient = C * (losses + Phi @ w)
        assert gradient.max() - gradient.min() <= B


@pytest.mark.parametrize("algorithm", ["batch", "online"])
@pytest.mark.parametrize("seed", range(4))
def test_safe_rate_never_decreases_the_dual(algorithm, seed):
    rng = np.random.default_rng(seed)
    structure = [ChainStructure(), ChainStructure(start_end=False),
                 ChainStructure(class_weight=[1.0, 3.0])][seed % 3]
    X, y = make_chain_data(n_sequences=int(rng.integers(3, 8)), n_states=2 + seed % 2,
                           n_features=3, max_length=4, seed=100 + seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(structure, C=float(rng.uniform(0.1, 3.0)), algorithm=algorithm,
                           step="safe", tol=1e-12, max_iter=300).fit(X, y)
    dual = model.history_["dual"]
    assert np.all(np.diff(dual) >= -1e-12 * np.abs(dual).max())
    assert dual[-1] > dual[0]


def test_safe_rate_on_multiclass_and_its_errors():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = rng.integers(0, 3, size=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(step="safe", tol=1e-12, max_iter=200,
                           fit_intercept=False).fit(X, y)
    assert isinstance(model.structure_, MultiClass)
    assert np.all(np.diff(model.history_["dual"]) >= -1e-12)
    # multiclass: sum_i S Cov(e_y (x) x_i) = (I - 11'/S) (x) X'X, so lambda = C^2 lambda_max(X'X)
    batch = SequenceBatch(X, np.arange(31, dtype=np.int64))
    assert dual_curvature(model.structure_, batch, 2.0) == pytest.approx(
        4.0 * np.linalg.eigvalsh(X.T @ X)[-1], rel=1e-10)
    with pytest.raises(ValueError, match="eta must be None"):
        M3NExpGrad(step="safe", eta=0.1).fit(X, y)


def test_safe_rate_underflow_is_a_clear_error():
    X = [np.ones((1100, 2))]  # 2 ** 1100 labelings: lambda overflows
    y = [np.array([0, 1] * 550)]
    with pytest.raises(ValueError, match="underflows"):
        M3NExpGrad(step="safe").fit(X, y)


@pytest.mark.parametrize("structure", [ChainStructure(), ChainStructure(start_end=False)])
def test_online_pass_keeps_weights_marginals_and_losses_consistent(structure):
    bound, batch, Y = _bound_problem(structure, 25, 4, 5, 7, 3)
    S = bound.n_states_
    state = OnlineEGState.from_shared_potentials(
        bound, batch, Y, 0.8, np.zeros((batch.n_tokens, S)), np.zeros(bound.n_pairwise_),
        np.full(batch.n_sequences, 0.3))
    _, dual = state.certificate()
    for _ in range(20):
        state.run_pass(adaptive=True)
        incremental = state.w.copy()
        _, new_dual = state.certificate()
        np.testing.assert_allclose(incremental, state.w, atol=1e-10)
        assert new_dual >= dual - 1e-10
        dual = new_dual
    np.testing.assert_allclose(state.node_marg.sum(axis=1), 1.0, atol=1e-12)
    assert state.node_marg.min() >= 0.0
    # marginals agree with forward-backward on each example's own potentials
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64))
        node, pairwise, _ = bound.marginals(sub, state.node_pot[lo:hi], state.pair_pot[i])
        np.testing.assert_allclose(node, state.node_marg[lo:hi], atol=1e-10)
        np.testing.assert_allclose(pairwise[0], state.pair_marg[i], atol=1e-10)
    rows = np.arange(Y.shape[0])
    expected_loss = np.bincount(batch.sequence_index,
                                weights=bound.loss_weights_[Y] * (1 - state.node_marg[rows, Y]))
    np.testing.assert_allclose(state.expected_loss, expected_loss, atol=1e-12)


def test_online_and_batch_reach_the_same_multiclass_objective():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 5))
    y = rng.integers(0, 4, size=60)
    online = M3NExpGrad(C=0.3, tol=1e-6, max_iter=20000).fit(X, y)
    batch = M3NExpGrad(C=0.3, algorithm="batch", tol=1e-6, max_iter=20000).fit(X, y)
    tolerance = online.history_["gap"][-1] + batch.history_["gap"][-1]
    assert abs(online.objective(X, y) - batch.objective(X, y)) <= tolerance


def test_online_refuses_structures_without_a_compiled_pass():
    from sklstruct.learners.exp_grad._estimator import check_online_structure

    with pytest.raises(ValueError, match="needs compiled per-example marginals"):
        check_online_structure(object(), None, "algorithm='online'")


@pytest.mark.parametrize("cap", [0.5, 3.0])
def test_online_visit_moves_no_potential_by_more_than_the_cap(cap):
    """An adaptive online step is capped so that, within a token, the node potentials move
    apart by at most ``max_change`` nats in one visit (the estimator's cap is
    ``ONLINE_MAX_CHANGE``); with a huge initial step the cap is what binds."""
    bound, batch, Y = _bound_problem(ChainStructure(), 25, 4, 5, 7, 3)
    S = bound.n_states_
    state = OnlineEGState.from_shared_potentials(
        bound, batch, Y, 0.8, np.zeros((batch.n_tokens, S)), np.zeros(bound.n_pairwise_),
        np.full(batch.n_sequences, 1e6))
    before = state.node_pot.copy()
    state.run_pass(adaptive=True, max_change=cap)
    moved = state.node_pot - before
    spread = moved.max(axis=1) - moved.min(axis=1)
    assert spread.max() <= cap * (1 + 1e-9)
    assert spread.max() >= 0.5 * cap  # the cap binds somewhere
