"""The scikit-learn contract: common checks, clone, pickle, Pipeline, search, CV."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklstruct import (ChainStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, MultiClass, StructSVMCuttingPlane)
from sklstruct.metrics import chunk_f1_scorer, token_accuracy_scorer
from sklstruct.utils import lengths_to_groups
from sklstruct.utils.estimator_checks import expected_failed_checks

from ._helpers import make_chain_data

# the common checks fit small data with capped iterations: non-convergence is expected
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

@parametrize_with_checks(
    [StructSVMCuttingPlane(MultiClass(), max_iter=2000, tol=1e-9),
     # the defaults: the sample-weight equivalence checks need tol <= 1e-8
     StructSVMCuttingPlane(MultiClass()),
     M3NExpGrad(MultiClass(), max_iter=2000, tol=1e-4),
     M3NExcessiveGap(MultiClass(), max_iter=300, tol=1e-3), L1M3N(MultiClass(), max_iter=5),
     L1M3N(MultiClass(), solver="cutting_plane"),
     M3NSimplicialDecomposition(MultiClass(), max_iter=3000, tol=1e-3),
     M3NSimplicialDecomposition(MultiClass(), max_points=10, blocks="single", tol=1e-4),
     # structure="auto": scikit-learn's generic checks (not a classifier to scikit-learn)
     M3NSimplicialDecomposition(max_iter=3000, tol=1e-3)],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_common_checks(estimator, check):
    check(estimator)


def test_expected_failed_checks_are_those_of_a_finite_tol():
    """At the default tol the sample-weight equivalence checks fail (two fits of equivalent
    data agree within the certificate, not to 1e-7); they pass at tol=1e-8, and no other
    check is expected to fail."""
    from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

    default = StructSVMCuttingPlane(MultiClass())
    assert set(expected_failed_checks(default)) == {
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data"}
    with pytest.raises(AssertionError, match="not equivalent"):
        check_sample_weight_equivalence_on_dense_data("default", default)
    precise = StructSVMCuttingPlane(MultiClass(), tol=1e-9, max_iter=2000)
    assert expected_failed_checks(precise) == {}
    check_sample_weight_equivalence_on_dense_data("precise", precise)
    assert set(expected_failed_checks(M3NExcessiveGap(MultiClass()))) == set(
        expected_failed_checks(default))


@pytest.mark.parametrize("estimator", [StructSVMCuttingPlane(), M3NExpGrad(), M3NExcessiveGap(),
                                       L1M3N(), M3NSimplicialDecomposition()], ids=repr)
def test_n_jobs_zero_is_refused_at_fit_by_every_learner(estimator, chain_data):
    X, y = chain_data
    with pytest.raises(ValueError, match="n_jobs"):
        clone(estimator).set_params(n_jobs=0).fit(X, y)


@pytest.fixture
def chain_data():
    return make_chain_data(n_sequences=40, seed=1)


def test_clone_and_params(chain_data):
    model = StructSVMCuttingPlane(ChainStructure(start_end=False), C=0.5)
    assert model.get_params()["C"] == 0.5
    model.set_params(C=2.0, structure__start_end=True)
    assert model.C == 2.0 and model.structure.start_end
    X, y = chain_data
    model.fit(X, y)
    fresh = clone(model)
    assert not hasattr(fresh, "w_")
    assert fresh.get_params()["C"] == 2.0
    # the user's structure is never mutated by fit
    assert not hasattr(model.structure, "n_states_")


def test_pickle_round_trip(chain_data):
    X, y = chain_data
    model = StructSVMCuttingPlane(C=1.0).fit(X, y)
    restored = pickle.loads(pickle.dumps(model))
    for a, b in zip(model.predict(X), restored.predict(X)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.w_, restored.w_)


def test_pipeline_with_per_sequence_transformer(chain_data):
    X, y = chain_data
    scale = FunctionTransformer(lambda seqs: [2.0 * s for s in seqs])
    pipe = make_pipeline(scale, StructSVMCuttingPlane(C=1.0)).fit(X, y)
    assert pipe.score(X, y) > 0.5
    assert len(pipe.predict(X)) == len(X)


def test_grid_search_over_C_with_sequence_scorer(chain_data):
    X, y = chain_data
    search = GridSearchCV(
        StructSVMCuttingPlane(), {"C": [0.01, 1.0]}, cv=KFold(3), scoring=token_accuracy_scorer
    ).fit(X, y)
    assert search.best_params_["C"] in (0.01, 1.0)
    assert len(search.predict(X)) == len(X)


def test_grid_search_chunk_f1_scorer():
    rng = np.random.default_rng(0)
    tags = np.array(["B-NP", "I-NP", "O"])
    X, y = [], []
    for _ in range(30):
        labels = tags[rng.integers(0, 3, size=rng.integers(2, 7))]
        labels[0] = "B-NP" if labels[0] == "I-NP" else labels[0]
        X.append(np.eye(3)[np.searchsorted(tags, labels)] + 0.1 * rng.normal(size=(len(labels), 3)))
        y.append(labels)
    search = GridSearchCV(StructSVMCuttingPlane(), {"C": [0.1, 10.0]}, cv=3,
                          scoring=chunk_f1_scorer).fit(X, y)
    assert search.best_score_ > 0.8


def test_cross_validate_list_and_flat_forms(chain_data):
    X, y = chain_data
    res = cross_validate(StructSVMCuttingPlane(), X, y, cv=3)
    assert res["test_score"].shape == (3,)
    lengths = [len(s) for s in y]
    Xf, yf = np.vstack(X), np.concatenate(y)
    groups = lengths_to_groups(lengths)
    model = StructSVMCuttingPlane().fit(Xf, yf, lengths=lengths)
    flat_pred = model.predict(Xf, lengths=lengths)
    list_pred = StructSVMCuttingPlane().fit(X, y).predict(X)
    np.testing.assert_array_equal(flat_pred, np.concatenate(list_pred))
    assert len(list(GroupKFold(3).split(Xf, yf, groups))) == 3


def test_length_one_chains_equal_multiclass():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    y = rng.integers(0, 3, size=40)
    y[:3] = [0, 1, 2]
    mc = StructSVMCuttingPlane(C=1.0, tol=1e-6, fit_intercept=False).fit(X, y)
    chain = StructSVMCuttingPlane(ChainStructure(start_end=False), C=1.0, tol=1e-6).fit(
        [row[None, :] for row in X], [np.array([v]) for v in y]
    )
    # P is 1-strongly convex, so ||w - w*||^2 <= 2 (P(w) - P*) <= 2 gap for each model
    bound = np.sqrt(2 * chain.history_["gap"][-1]) + np.sqrt(2 * mc.history_["gap"][-1])
    assert np.linalg.norm(chain.coef_ - mc.coef_) <= bound
    assert abs(chain.history_["primal"][-1] - mc.history_["primal"][-1]) <= max(
        chain.history_["gap"][-1], mc.history_["gap"][-1]
    )
    # transitions never fire in length-1 chains, so they stay at zero
    np.testing.assert_allclose(chain.transition_, 0.0, atol=1e-12)
    np.testing.assert_array_equal(np.concatenate(chain.predict([r[None] for r in X])),
                                  mc.predict(X))


def test_sequence_prediction_independent_of_batch(chain_data):
    X, y = chain_data
    model = StructSVMCuttingPlane().fit(X, y)
    together = model.predict(X)
    order = np.random.default_rng(0).permutation(len(X))
    permuted = model.predict([X[i] for i in order])
    for k, i in enumerate(order):
        np.testing.assert_array_equal(permuted[k], together[i])
        np.testing.assert_array_equal(model.predict([X[i]])[0], together[i])


def test_label_permutation_gives_permuted_predictions(chain_data):
    X, y = chain_data
    names = np.array(["zeta", "alpha", "mid"])
    base = StructSVMCuttingPlane(tol=1e-5).fit(X, y)
    renamed = StructSVMCuttingPlane(tol=1e-5).fit(X, [names[s] for s in y])
    for a, b in zip(base.predict(X), renamed.predict(X)):
        np.testing.assert_array_equal(names[a], b)


def test_decision_function_and_marginals(chain_data):
    X, y = chain_data
    model = StructSVMCuttingPlane().fit(X, y)
    scores = model.decision_function(X)
    marg = model.predict_marginals(X)
    assert len(scores) == len(X) and scores[0].shape == (len(X[0]), 3)
    for m in marg:
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
        assert np.all(m >= 0)
    mc = StructSVMCuttingPlane(MultiClass()).fit(np.vstack(X), np.concatenate(y))
    probs = mc.predict_marginals(np.vstack(X))
    np.testing.assert_array_equal(mc.classes_[np.argmax(probs, axis=1)], mc.predict(np.vstack(X)))


# every learner, in the configurations the sequence-form workflows run with
SEQUENCE_LEARNERS = [
    StructSVMCuttingPlane(C=0.5, tol=1e-3),
    StructSVMCuttingPlane(C=0.5, tol=1e-3, variant="n-slack", random_state=0),
    M3NExpGrad(C=0.5, tol=1e-3, random_state=0),
    M3NExpGrad(C=0.5, tol=1e-2, algorithm="batch", max_iter=300),
    M3NExcessiveGap(C=0.5, tol=1e-3),
    L1M3N(C=0.5, solver="cutting_plane"),
    L1M3N(C=0.5, max_iter=3),
    L1M3N(C=0.5, solver="subgradient", radius=5.0, max_iter=100),
    M3NSimplicialDecomposition(C=0.5, tol=1e-3, random_state=0),
    M3NSimplicialDecomposition(C=0.5, tol=1e-3, random_state=0, max_points=3, blocks="single"),
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("model", SEQUENCE_LEARNERS, ids=repr)
def test_sequence_workflows(chain_data, model):
    X, y = chain_data
    fitted = clone(model).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    for a, b in zip(fitted.predict(X), restored.predict(X)):
        np.testing.assert_array_equal(a, b)
    search = GridSearchCV(model, {"C": [0.01, 1.0]}, cv=KFold(3),
                          scoring=token_accuracy_scorer).fit(X, y)
    assert search.best_params_["C"] in (0.01, 1.0)
    assert cross_validate(model, X, y, cv=3)["test_score"].min() > 0.5
    lengths = [len(s) for s in y]
    flat = clone(model).fit(np.vstack(X), np.concatenate(y), lengths=lengths)
    np.testing.assert_allclose(flat.w_, fitted.w_)
    pipe = make_pipeline(FunctionTransformer(lambda seqs: [2.0 * s for s in seqs]),
                         clone(model)).fit(X, y)
    assert pipe.score(X, y) > 0.5


@pytest.mark.parametrize("model", [M3NSimplicialDecomposition(C=0.5, random_state=0),
                                   StructSVMCuttingPlane(C=0.5)])
def test_sparse_valued_dense_input_equals_csr(model):
    """A mostly-zero dense token matrix trains and predicts like its CSR form (it is handled
    as CSR, so its cost follows the non-zeros)."""
    import scipy.sparse as sp

    from sklstruct.utils._sequences import check_token_matrix

    X, y = make_chain_data(n_sequences=15, n_states=3, n_features=4, max_length=6, seed=5)
    rng = np.random.default_rng(0)
    wide = [np.hstack([x, np.zeros((len(x), 200))]) for x in X]  # 2% non-zeros
    for x in wide:
        x[:, rng.integers(4, 204, size=len(x))] = 1.0
    assert sp.issparse(check_token_matrix(np.vstack(wide)))
    dense = clone(model).fit(wide, y)
    sparse = clone(model).fit([sp.csr_matrix(x) for x in wide], y)
    np.testing.assert_array_equal(dense.w_, sparse.w_)
    for a, b in zip(dense.predict(wide), sparse.predict([sp.csr_matrix(x) for x in wide])):
        np.testing.assert_array_equal(a, b)


def test_tags_describe_the_inputs_and_targets():
    """The parsers and their feature extractors take lists of sentences (not 2-D arrays)
    and need their trees (they said y was optional); a multi-label model's y is an
    indicator matrix (multi-output, multi-label)."""
    from sklearn.utils import get_tags

    from sklstruct import MultiLabelStructure
    from sklstruct.parsing import (ArcFeatures, ConstituencyParser, DependencyParser,
                                   PCFGParser, SpanFeatures)

    for parser in (DependencyParser(), ConstituencyParser(), PCFGParser()):
        tags = get_tags(parser)
        assert tags.target_tags.required and not tags.input_tags.two_d_array
    assert get_tags(DependencyParser()).input_tags.dict
    assert get_tags(ArcFeatures()).target_tags.required  # (features_from="gold")
    assert not get_tags(ArcFeatures(features_from="all")).target_tags.required
    assert not get_tags(SpanFeatures()).input_tags.two_d_array
    tags = get_tags(M3NSimplicialDecomposition(MultiLabelStructure()))
    assert tags.target_tags.multi_output and tags.classifier_tags.multi_label
    tags = get_tags(M3NSimplicialDecomposition())
    assert not tags.target_tags.multi_output and not tags.classifier_tags.multi_label
