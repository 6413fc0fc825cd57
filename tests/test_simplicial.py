"""M3NSimplicialDecomposition (Yu and Rousu 2007): exact optima, conditional gradient,
dimension limit."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, M3NExpGrad, M3NSimplicialDecomposition, MultiClass,
                       StructSVMCuttingPlane)
from sklstruct.learners.simplicial import _general as _rsd
from sklstruct.learners.simplicial._general import SimplicialDecompositionState
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import all_labelings, exact_optimum, primal_objective
from ._helpers import make_chain_data


def _bound(structure, X, y):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    n_states = int(Y.max()) + 1
    return structure.bind(batch.X.shape[1], n_states, np.arange(n_states), Y), batch, Y


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


CONFIGS = [
    dict(max_points=1),  # block-coordinate Frank-Wolfe (compiled for margin rescaling)
    dict(max_points=4, working_set_size=1),
    dict(max_points=4, working_set_size=3),
    dict(max_points=40, blocks="single"),
    dict(max_points=6, blocks="single", working_set_size=2),
]


@pytest.fixture(params=["dense points", "token points"])
def point_storage(request, monkeypatch):
    """Run the general solver with both storages of its points."""
    if request.param == "token points":
        monkeypatch.setattr(_rsd, "DENSE_POINTS_MB", 0)
    return request.param


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("rescale", ["margin", "slack"])
def test_within_reported_gap_of_the_exact_optimum(config, rescale, point_storage):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=11)
    C = 0.7
    one_point = config["max_points"] == 1  # plain Frank-Wolfe: O(1/k), a looser target
    model = _fit(M3NSimplicialDecomposition(C=C, rescale=rescale, tol=1e-4,
                                            max_iter=800 if one_point else 4000,
                                            random_state=0, **config), X, y)
    bound, batch, Y = _bound(model.structure_, X, y)
    lower, upper, _ = exact_optimum(bound, batch, Y, C, rescale)
    h = model.history_
    primal = primal_objective(bound, batch, Y, model.w_, C, rescale)
    # the reported primal is the objective of the returned weights, the dual a lower bound
    np.testing.assert_allclose(primal, h["primal"][-1], rtol=1e-9)
    np.testing.assert_allclose(model.objective(X, y), primal, rtol=1e-9)
    assert h["dual"][-1] <= upper + 1e-9
    assert primal >= lower - 1e-9
    assert h["gap"][-1] <= (5e-2 if one_point else 1e-4) * h["primal"][-1]


def test_matches_the_other_l2_learners():
    X, y = make_chain_data(n_sequences=25, n_states=3, n_features=4, max_length=6, seed=3)
    C = 0.4
    model = _fit(M3NSimplicialDecomposition(C=C, max_points=8, working_set_size=5, tol=1e-6,
                                            max_iter=2000, random_state=0), X, y)
    gap = model.history_["gap"][-1]
    reference = StructSVMCuttingPlane(C=C, tol=1e-9).fit(X, y)
    eg = _fit(M3NExpGrad(C=C, tol=1e-6, max_iter=5000), X, y)
    for other, other_gap in ((reference, 1e-9 * reference.objective(X, y)),
                             (eg, eg.history_["gap"][-1])):
        assert abs(model.objective(X, y) - other.objective(X, y)) <= gap + other_gap + 1e-9
    # the compiled r = 1 pass and the general solver agree on multiclass data too
    rng = np.random.default_rng(0)
    Xm, ym = rng.normal(size=(50, 4)), rng.integers(0, 3, size=50)
    cp = StructSVMCuttingPlane(C=0.3, tol=1e-9).fit(Xm, ym).objective(Xm, ym)
    for config in (dict(max_points=1), dict(max_points=5, blocks="single")):
        sd = _fit(M3NSimplicialDecomposition(C=0.3, tol=1e-5, max_iter=5000, random_state=0,
                                             **config), Xm, ym)
        assert isinstance(sd.structure_, MultiClass)
        assert abs(sd.objective(Xm, ym) - cp) <= sd.history_["gap"][-1] + 1e-9


def _frank_wolfe_reference(structure, batch, Y, C, n_iter):
    """Conditional gradient with exact line search on the dual over all enumerated labelings."""
    n = batch.n_sequences
    subs, psis, losses = [], [], []
    for i in range(n):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64))
        labelings = all_labelings(structure.n_states_, hi - lo)
        true = structure.joint_feature(sub, Y[lo:hi])
        psis.append(np.array([C * (true - structure.joint_feature(sub, yb))
                              for yb in labelings]))
        losses.append(np.array([C * structure.loss(sub, Y[lo:hi], yb)[0]
                                for yb in labelings]))
        subs.append(sub)
    # start: every example at its true labeling (b = 0, gamma = 0)
    b = np.zeros((n, psis[0].shape[1]))
    g = np.zeros(n)
    duals = []
    for _ in range(n_iter):
        w = b.sum(axis=0)
        duals.append(g.sum() - 0.5 * w @ w)
        best = [np.argmax(loss - psi @ w) for psi, loss in zip(psis, losses)]
        vertex_b = np.array([psi[k] for psi, k in zip(psis, best)])
        vertex_g = np.array([loss[k] for loss, k in zip(losses, best)])
        d_b, d_g = vertex_b - b, vertex_g - g
        direction = d_b.sum(axis=0)
        slope = d_g.sum() - w @ direction
        step = 0.0 if slope <= 0 else min(1.0, slope / max(direction @ direction, 1e-300))
        b += step * d_b
        g += step * d_g
    return np.array(duals)


def test_one_point_one_simplex_is_conditional_gradient():
    X, y = make_chain_data(n_sequences=5, n_states=2, n_features=3, max_length=4, seed=5)
    C = 1.3
    model = _fit(M3NSimplicialDecomposition(C=C, max_points=1, blocks="single", tol=1e-12,
                                            max_iter=25, random_state=0), X, y)
    bound, batch, Y = _bound(model.structure_, X, y)
    reference = _frank_wolfe_reference(bound, batch, Y, C, 26)
    np.testing.assert_allclose(model.history_["dual"], reference, rtol=1e-9, atol=1e-12)
    # the last record certifies the returned weights
    np.testing.assert_allclose(model.history_["primal"][-1],
                               primal_objective(bound, batch, Y, model.w_, C), rtol=1e-9)
    assert np.all(np.diff(reference) >= -1e-12) and reference[-1] > reference[1]


def test_more_points_need_fewer_oracle_calls():
    X, y = make_chain_data(n_sequences=20, n_states=3, n_features=4, max_length=6, seed=8)
    calls = {}
    for r in (1, 5):
        for blocks in ("per_example", "single"):
            model = _fit(M3NSimplicialDecomposition(
                C=0.5, max_points=r, blocks=blocks, working_set_size=None if blocks == "single"
                else 1, tol=3e-2, max_iter=3000, random_state=0), X, y)
            h = model.history_
            assert h["gap"][-1] <= 3e-2 * h["primal"][-1]
            calls[r, blocks] = h["oracle_calls"][-1]
    assert calls[5, "per_example"] < calls[1, "per_example"]
    assert calls[5, "single"] < calls[1, "single"]


def test_incremental_point_matches_recomputation_and_dual_ascends(point_storage):
    X, y = make_chain_data(n_sequences=12, n_states=3, n_features=3, max_length=5, seed=2)
    for rescale in ("margin", "slack"):
        bound, batch, Y = _bound(ChainStructure(), X, y)
        state = SimplicialDecompositionState(
            bound, batch, Y, 0.8, rescale=rescale, max_points=3, blocks="per_example",
            working_set_size=4, random_state=np.random.RandomState(0))
        assert state.dense == (point_storage == "dense points")
        dual = state.dual()
        for _ in range(30):
            state.run_pass()
            v, gamma = exact_point(state)
            np.testing.assert_allclose(state.v, v, atol=1e-10)
            np.testing.assert_allclose(state.gamma_total, gamma, rtol=1e-10, atol=1e-12)
            assert state.dual() >= dual - 1e-10  # every master problem ascends
            dual = state.dual()
            weights = state.weights[np.arange(state.n_blocks)]
            assert np.all(weights >= 0) and np.all(weights.sum(axis=1) <= 1 + 1e-9)


def test_warm_start_continues_and_pickle_drops_the_dual_state():
    X, y = make_chain_data(n_sequences=30, n_states=3, n_features=4, max_length=6, seed=4)
    # a fit without warm_start keeps no dual state (it holds several times the data)
    model = _fit(M3NSimplicialDecomposition(C=0.5, max_points=4, working_set_size=5,
                                            tol=1e-6, max_iter=3, random_state=0), X, y)
    assert not hasattr(model, "_dual_state")
    model.set_params(warm_start=True)
    _fit(model, X, y)
    first_dual = model.history_["dual"][-1]
    model.set_params(max_iter=50)
    _fit(model, X, y)
    assert model.history_["dual"][0] == pytest.approx(first_dual, rel=1e-12)
    assert model.history_["dual"][-1] > first_dual
    restored = pickle.loads(pickle.dumps(model))
    assert not hasattr(restored, "_dual_state") and hasattr(model, "_dual_state")
    np.testing.assert_array_equal(restored.w_, model.w_)
    # other data of the same shape: a fresh fit, the same as a cold one
    other = [1 - labels if labels.max() < 2 else (labels + 1) % 3 for labels in y]
    model.set_params(max_iter=20)
    _fit(model, X, other)
    cold = _fit(clone(model).set_params(warm_start=False), X, other)
    np.testing.assert_allclose(model.w_, cold.w_)
    # a different C starts afresh
    model.set_params(C=5.0, max_iter=1)
    _fit(model, X, y)
    assert model.history_["dual"][0] == 0.0


@pytest.mark.parametrize("max_points", [1, 5])
def test_compiled_passes_report_certified_gaps(max_points):
    X, y = make_chain_data(n_sequences=40, seed=6)
    model = M3NSimplicialDecomposition(C=0.2, max_points=max_points, tol=1e-2,
                                       random_state=0).fit(X, y)
    h = model.history_
    assert h["gap"][-1] <= 1e-2 * h["primal"][-1]
    assert np.all(h["gap"] >= -1e-9)
    assert np.all(np.diff(h["dual"]) >= -1e-9)
    assert h["passes"][-1] == model.n_iter_
    assert np.all(np.diff(h["oracle_calls"]) > 0)
    assert model.score(X, y) > 0.6


@pytest.mark.parametrize("params, match", [
    (dict(max_points=0), "max_points"),
    (dict(blocks="pairs"), "blocks"),
    (dict(working_set_size=0), "working_set_size"),
    (dict(rescale="both"), "rescale"),
])
def test_bad_parameters(params, match):
    X, y = make_chain_data(n_sequences=5, seed=0)
    with pytest.raises(ValueError, match=match):
        M3NSimplicialDecomposition(**params).fit(X, y)


def exact_point(state):
    """``v`` and the summed gamma recomputed from all anchors, points and weights."""
    all_blocks = np.arange(state.n_blocks)
    examples, block_local = state._examples(all_blocks)
    _, tokens = state.batch.select(examples)
    token_block = np.repeat(block_local, state.batch.lengths[examples])
    R, gamma_anchor, gamma_point, point_block, point_slot = state._rows(
        all_blocks, examples, block_local, tokens, token_block)
    mu = state.weights[point_block, point_slot]
    coef = np.concatenate([1.0 - np.bincount(point_block, weights=mu,
                                              minlength=state.n_blocks), mu])
    return R.T @ coef, float(coef[:state.n_blocks] @ gamma_anchor + mu @ gamma_point)
