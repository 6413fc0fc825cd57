"""M3NSimplicialDecomposition with sample weights: ``1/2 ||w||^2 + C sum_i s_i H_i(w)``, checked
against the exact optimum of the repeated data (integer weights), against the cutting plane
(real weights) and through cross-validation; every dual state (compiled block Frank-Wolfe,
multi-point passes cached and uncached, on one and two threads, the general working sets)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import GridStructure, M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct.learners import _frank_wolfe
from sklstruct.learners._frank_wolfe import BlockFrankWolfeState, MultiPointFrankWolfeState
from sklstruct.learners.simplicial._general import SimplicialDecompositionState
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum
from ._helpers import make_chain_data

WEIGHTS = np.array([2, 0, 1, 3, 1, 1, 0, 2])


def _repeated(X, y, weights):
    return ([x for x, k in zip(X, weights) for _ in range(k)],
            [s for s, k in zip(y, weights) for _ in range(k)])


def _exact(model, X, y, C, rescale="margin"):
    """The exact optimum's bracket of the objective on ``(X, y)`` (enumeration)."""
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.searchsorted(model.classes_, np.concatenate(y))
    return exact_optimum(model.structure_, batch, Y, C, rescale,
                         nonnegative=model.structure_.nonnegative_)[:2]


# (state, settings, module attributes set for the fit)
STATES = {
    "block Frank-Wolfe": (BlockFrankWolfeState, dict(max_points=1), {}),
    "one point, multi-point visits": (MultiPointFrankWolfeState, dict(max_points=1),
                                      {"MULTI_POINT_BLOCK_STEP_WORK": 0}),
    "multi-point, cached": (MultiPointFrankWolfeState, dict(max_points=4), {}),
    "multi-point, uncached": (MultiPointFrankWolfeState, dict(max_points=4), {"CACHE_MB": 0}),
    "general, per example": (SimplicialDecompositionState,
                             dict(max_points=4, working_set_size=3), {}),
    "general, one simplex": (SimplicialDecompositionState,
                             dict(max_points=30, blocks="single"), {}),
}


def _fit(settings, attributes, monkeypatch, X, y, sample_weight=None, **params):
    for name, value in attributes.items():
        monkeypatch.setattr(_frank_wolfe, name, value)
    model = M3NSimplicialDecomposition(warm_start=True, random_state=0,
                                       **{"tol": 1e-5, "max_iter": 3000, **settings, **params})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("name", list(STATES))
def test_integer_weights_reach_the_optimum_of_the_repeated_data(name, monkeypatch):
    """Weights 0 to 3 give the objective of the data with each sequence repeated that many
    times: the fit's certified primal is that objective at its weights and lies within its
    gap of the exact optimum of the repeated data."""
    state_type, settings, attributes = STATES[name]
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=4)
    C = 0.1  # (at C = 0.3 and above this data is separated: no weight changes the optimum)
    model = _fit(settings, attributes, monkeypatch, X, y, WEIGHTS, C=C)
    assert type(model._dual_state[1]) is state_type
    X_rep, y_rep = _repeated(X, y, WEIGHTS)
    lower, upper = _exact(model, X_rep, y_rep, C)
    h = model.history_
    primal = model.objective(X_rep, y_rep)
    assert primal == pytest.approx(h["primal"][-1], rel=1e-9)
    assert primal == pytest.approx(model.objective(X, y, sample_weight=WEIGHTS), rel=1e-12)
    assert h["dual"][-1] <= upper + 1e-9
    assert primal >= lower - 1e-9
    # (plain Frank-Wolfe, one point, converges as O(1/k): a looser target)
    assert h["gap"][-1] <= (5e-2 if settings["max_points"] == 1 else 1e-5) * primal
    # the weights matter: the unweighted optimum is not the weighted one
    assert abs(_fit(settings, attributes, monkeypatch, X, y, C=C).objective(
        X, y, sample_weight=WEIGHTS) - primal) > 10 * h["gap"][-1]


def test_multi_point_passes_give_the_same_weights_on_two_threads(monkeypatch):
    """The uncached two-stage visits with sample weights: the same bits on one thread and
    on two."""
    X, y = make_chain_data(n_sequences=60, n_states=4, n_features=30, max_length=12, seed=2)
    weights = np.random.default_rng(0).uniform(0.2, 3.0, size=60)
    fits = [_fit(dict(max_points=4), {"CACHE_MB": 0}, monkeypatch, X, y, weights, C=0.3,
                 n_jobs=n_jobs) for n_jobs in (1, 2)]
    np.testing.assert_array_equal(fits[0].w_, fits[1].w_)


@pytest.mark.parametrize("name", ["block Frank-Wolfe", "multi-point, uncached",
                                  "general, per example"])
def test_real_weights_agree_with_the_cutting_plane(name, monkeypatch):
    """Weights that are not integers: the same objective as the cutting plane's, within the
    two certified gaps."""
    _, settings, attributes = STATES[name]
    X, y = make_chain_data(n_sequences=20, n_states=3, n_features=5, max_length=7, seed=8)
    weights = np.random.default_rng(1).uniform(0.05, 4.0, size=20)
    C = 0.1
    model = _fit(settings, attributes, monkeypatch, X, y, weights, C=C, tol=1e-6)
    reference = StructSVMCuttingPlane(C=C, tol=1e-7).fit(X, y, sample_weight=weights)
    p_model = model.objective(X, y, sample_weight=weights)
    p_reference = reference.objective(X, y, sample_weight=weights)
    assert p_model == pytest.approx(model.history_["primal"][-1], rel=1e-9)
    assert abs(p_model - p_reference) <= model.history_["gap"][-1] \
        + reference.history_["gap"][-1] + 1e-9


def test_weights_of_one_change_nothing():
    """Weights all 1 (per sequence or per token) give the bits of a fit without weights."""
    X, y = make_chain_data(n_sequences=30, seed=6)
    plain = M3NSimplicialDecomposition(random_state=0).fit(X, y)
    ones = M3NSimplicialDecomposition(random_state=0).fit(X, y, sample_weight=np.ones(30))
    np.testing.assert_array_equal(plain.w_, ones.w_)
    X_flat, lengths = np.vstack(X), [len(s) for s in y]
    per_token = M3NSimplicialDecomposition(random_state=0).fit(
        X_flat, np.concatenate(y), lengths=lengths, sample_weight=np.ones(len(X_flat)))
    np.testing.assert_array_equal(plain.w_, per_token.w_)


def test_constrained_grid_weights_reach_the_repeated_optimum():
    """A grid (edge weights kept non-negative) with integer weights: within the gap of the
    exact optimum of the repeated images."""
    rng = np.random.default_rng(5)
    X, y = [], []
    for _ in range(5):
        labels = (rng.normal(size=9) > 0).astype(int)
        labels[0] = 1 - labels[1]
        X.append(np.column_stack([labels + rng.normal(scale=1.2, size=9), np.ones(9)]))
        y.append(labels)
    weights = np.array([1, 3, 0, 2, 1])
    C = 1.5
    model = M3NSimplicialDecomposition(GridStructure(width=3), C=C, max_points=4, tol=1e-6,
                                       random_state=0).fit(X, y, sample_weight=weights)
    X_rep, y_rep = _repeated(X, y, weights)
    lower, upper = _exact(model, X_rep, y_rep, C)
    primal = model.objective(X_rep, y_rep)
    assert primal == pytest.approx(model.history_["primal"][-1], rel=1e-9)
    assert model.history_["dual"][-1] <= upper + 1e-9
    assert primal >= lower - 1e-9
    assert np.all(model.w_[model.structure_.nonnegative_] >= 0)


def test_slack_rescaling_with_weights_reaches_the_repeated_optimum():
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=4)
    C = 0.6
    model = M3NSimplicialDecomposition(C=C, rescale="slack", max_points=4, working_set_size=3,
                                       tol=1e-5, max_iter=3000, random_state=0).fit(
        X, y, sample_weight=WEIGHTS)
    X_rep, y_rep = _repeated(X, y, WEIGHTS)
    lower, upper = _exact(model, X_rep, y_rep, C, rescale="slack")
    primal = model.objective(X_rep, y_rep)
    assert primal == pytest.approx(model.history_["primal"][-1], rel=1e-9)
    assert model.history_["dual"][-1] <= upper + 1e-9
    assert primal >= lower - 1e-9


def test_warm_start_is_not_taken_across_different_weights():
    """A warm start continues a fit on the same data and weights; other weights start
    afresh (the previous dual point is not feasible for them)."""
    X, y = make_chain_data(n_sequences=20, seed=2)
    weights = np.arange(20) % 3 + 1.0
    model = M3NSimplicialDecomposition(warm_start=True, random_state=0)
    model.fit(X, y, sample_weight=weights)
    state = model._dual_state[1]
    model.fit(X, y, sample_weight=weights)
    assert model._dual_state[1] is state
    model.fit(X, y, sample_weight=weights[::-1])
    assert model._dual_state[1] is not state
    fresh = M3NSimplicialDecomposition(random_state=0).fit(X, y, sample_weight=weights[::-1])
    np.testing.assert_array_equal(model.w_, fresh.w_)


def test_grid_search_with_weights_matches_fits_by_hand():
    """GridSearchCV passes fit's weights to fit and to the scorer; each split's score is the
    weighted token accuracy of a weighted fit by hand."""
    from sklearn.model_selection import GridSearchCV, KFold

    X, y = make_chain_data(n_sequences=15, seed=5)
    weights = np.arange(15) % 3 + 0.5
    folds = KFold(3)
    search = GridSearchCV(M3NSimplicialDecomposition(random_state=0), {"C": [0.1, 1.0]},
                          cv=folds, error_score="raise").fit(X, y, sample_weight=weights)
    for k, (train, test) in enumerate(folds.split(X)):
        model = M3NSimplicialDecomposition(random_state=0, C=0.1).fit(
            [X[i] for i in train], [y[i] for i in train], sample_weight=weights[train])
        X_test, y_test = [X[i] for i in test], [y[i] for i in test]
        assert search.cv_results_[f"split{k}_test_score"][0] == model.score(
            X_test, y_test, sample_weight=weights[test])


@pytest.mark.parametrize("weights, match", [
    (np.r_[np.nan, np.ones(7)], "finite"),
    (np.r_[-1.0, np.ones(7)], "Negative"),
    (np.zeros(8), "all zero"),
    (np.ones(7), "shape"),
])
def test_bad_weights_are_refused(weights, match):
    X, y = make_chain_data(n_sequences=8, seed=1)
    with pytest.raises(ValueError, match=match):
        M3NSimplicialDecomposition().fit(X, y, sample_weight=weights)


@pytest.mark.parametrize("state_type", [BlockFrankWolfeState, MultiPointFrankWolfeState])
def test_weighted_states_start_at_zero(state_type):
    """The weighted sums of the true labellings' statistics on both sides of ``v`` cancel
    exactly (weights that are not powers of two included): the first certificate is at
    ``w = 0`` with dual 0."""
    X, y = make_chain_data(n_sequences=200, seed=1)
    model = M3NSimplicialDecomposition(max_iter=1).fit(X, y)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    weights = np.random.default_rng(0).uniform(0.1, 3.0, size=200)
    args = (model.structure_, batch, np.concatenate(y), 1.0) + (
        (4,) if state_type is MultiPointFrankWolfeState else ())
    w, dual = state_type(*args, sample_weight=weights).certificate()
    assert not np.any(w) and dual == 0.0


def test_weights_beyond_double_precision_stop_at_once_with_a_warning():
    """At C s_i of 1e30 no Frank-Wolfe step is representable (the dual stays at w = 0): the
    fit stops after two equal certificates and says why, instead of running its 1,000
    passes."""
    X, y = make_chain_data(n_sequences=40, seed=1)
    with pytest.warns(ConvergenceWarning, match="no longer change the weights"):
        model = M3NSimplicialDecomposition(random_state=0).fit(
            X, y, sample_weight=np.full(40, 1e30))
    assert model.n_iter_ < 20
    assert model.history_["gap"][-1] == model.history_["primal"][-1]  # (honest: dual 0)


def test_one_heavy_example_does_not_stop_the_shrinking_sweeps():
    """With one sample weighing 1e14 the primal is mostly that example's, so an unweighted
    share of the target gap shut every other example out of the sweeps, and the fit stopped
    as stalled (objective 4x too high). The shares now follow the weights, and a stall is
    confirmed by a pass over every example."""
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    weights = np.ones(len(y))
    weights[0] = 1e14
    fits = [M3NSimplicialDecomposition(C=0.1, random_state=0, shrinking=shrinking).fit(
        X, y, sample_weight=weights) for shrinking in (True, False)]
    for model in fits:
        assert model.history_["gap"][-1] <= model.tol * model.history_["primal"][-1]
    assert abs(fits[0].objective(X, y, sample_weight=weights)
               - fits[1].objective(X, y, sample_weight=weights)) \
        <= fits[0].history_["gap"][-1] + fits[1].history_["gap"][-1]


def test_one_simplex_certifies_its_weights_at_large_weights():
    """blocks="single" certifies from the dual and the Frank-Wolfe gap, which equal the
    primal in exact arithmetic only: at C s_i of 1e19 the estimate fell below zero and the
    fit stopped "converged" at a negative primal. The primal is now computed where the
    estimate would stop the fit, and the last record is the returned weights' own."""
    X, y = make_chain_data(n_sequences=20, seed=5)
    for scale in (1e11, 1e20):
        weights = np.full(20, scale)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = M3NSimplicialDecomposition(C=0.1, blocks="single", random_state=0,
                                               max_iter=200).fit(X, y, sample_weight=weights)
        h = model.history_
        assert h["primal"][-1] == model.objective(X, y, sample_weight=weights)
        assert h["gap"][-1] >= 0


def test_overflowing_weights_and_per_label_weights_are_refused():
    X, y = make_chain_data(n_sequences=8, seed=1)
    with pytest.raises(ValueError, match="C \\* sample_weight overflows"):
        M3NSimplicialDecomposition(C=10.0).fit(X, y, sample_weight=np.full(8, 1e308))
    with pytest.raises(ValueError, match="C \\* sample_weight"):
        M3NSimplicialDecomposition(C=0.1).fit(X, y, sample_weight=np.full(8, 1e308))
    # multi-label: one weight per sample, not per (sample, label)
    rng = np.random.default_rng(0)
    X_ml, Y_ml = rng.normal(size=(30, 4)), (rng.random((30, 3)) > 0.5).astype(int)
    with pytest.raises(ValueError, match="expected \\(30,\\)"):
        M3NSimplicialDecomposition().fit(X_ml, Y_ml, sample_weight=np.ones(90))


def test_a_dual_above_the_primal_stops_with_a_warning():
    """One chain weighing 1e20: the passes' rounding puts the dual above the primal; the fit
    stopped there as converged, without a warning."""
    X, y = make_chain_data(n_sequences=12, seed=2)
    with pytest.warns(ConvergenceWarning, match="exceeded the primal"):
        M3NSimplicialDecomposition(C=1.0, random_state=0).fit(
            X, y, sample_weight=np.r_[1e20, np.ones(11)])


@pytest.mark.parametrize("learner", ["M3NExpGrad", "L1M3N", "M3NSimplicialDecomposition"])
def test_weights_beyond_the_sums_range_are_refused(learner):
    """C s_i |x| above 1e150 (whose squares overflow in the fits' sums, ending in NaN
    objectives or errors from deep inside) is refused up front, naming the weights; a C
    that large without weights is left to the learners."""
    import sklstruct

    X, y = make_chain_data(n_sequences=12, seed=2)
    with pytest.raises(ValueError, match="C \\* sample_weight overflows"):
        getattr(sklstruct, learner)(C=1.0).fit(X, y, sample_weight=np.r_[1e200, np.ones(11)])


def test_routed_searches_keep_unweighted_sequence_scores_unless_requested():
    """Under metadata routing a search that routes sample_weight to fit only keeps working
    with the module's scorers (scored unweighted, as before they took weights); a scorer of
    one's own that requests the weights scores each split weighted."""
    import sklearn
    from sklearn.model_selection import GridSearchCV, GroupKFold

    from sklstruct.metrics import SequenceScorer, token_accuracy, token_accuracy_scorer
    from sklstruct.utils import lengths_to_groups

    X, y = make_chain_data(n_sequences=18, seed=2)
    lengths = [len(s) for s in y]
    X_flat, y_flat, ids = np.vstack(X), np.concatenate(y), lengths_to_groups(lengths)
    per_token = np.repeat(np.arange(18) % 3 + 1.0, lengths)
    splits = list(GroupKFold(3).split(X_flat, y_flat, ids))
    scores = {}
    with sklearn.config_context(enable_metadata_routing=True):
        for name, scorer in [("module", token_accuracy_scorer),
                             ("weighted", SequenceScorer(token_accuracy).set_score_request(
                                 sample_weight=True))]:
            search = GridSearchCV(
                StructSVMCuttingPlane(tol=1e-6).set_fit_request(sequence_ids=True,
                                                               sample_weight=True),
                {"C": [0.1]}, cv=splits, scoring=scorer).fit(
                X_flat, y_flat, sequence_ids=ids, sample_weight=per_token)
            scores[name] = [search.cv_results_[f"split{k}_test_score"][0] for k in range(3)]
    for k, (train, test) in enumerate(splits):
        train_seq, test_seq = np.unique(ids[train]), np.unique(ids[test])
        model = StructSVMCuttingPlane(tol=1e-6, C=0.1).fit(
            [X[i] for i in train_seq], [y[i] for i in train_seq],
            sample_weight=np.arange(18)[train_seq] % 3 + 1.0)
        X_test, y_test = [X[i] for i in test_seq], [y[i] for i in test_seq]
        assert scores["module"][k] == model.score(X_test, y_test)
        assert scores["weighted"][k] == model.score(
            X_test, y_test, sample_weight=np.arange(18)[test_seq] % 3 + 1.0)
