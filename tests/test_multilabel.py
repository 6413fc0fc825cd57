"""Multi-label structures: scikit-learn's multi-label conventions, the Chow-Liu tree, the
hierarchical loss, and every learner reaching the exact optimum on a tiny problem."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, f1_score, hamming_loss
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklstruct import (M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       MultiLabelStructure, StructSVMCuttingPlane)
from sklstruct.structures.multilabel import chow_liu_tree, hierarchy_loss_weights

from ._enumeration import exact_optimum

LEARNERS = {
    "1-slack": lambda s: StructSVMCuttingPlane(s, C=0.5, tol=1e-7),
    "n-slack": lambda s: StructSVMCuttingPlane(s, C=0.5, tol=1e-7, variant="n-slack"),
    "exp_grad online": lambda s: M3NExpGrad(s, C=0.5, tol=1e-6, max_iter=20000,
                                            algorithm="online"),
    "exp_grad batch": lambda s: M3NExpGrad(s, C=0.5, tol=1e-6, max_iter=20000,
                                           algorithm="batch"),
    "excessive_gap": lambda s: M3NExcessiveGap(s, C=0.5, tol=1e-5, max_iter=20000),
    "simplicial": lambda s: M3NSimplicialDecomposition(s, C=0.5, tol=1e-7, max_iter=5000,
                                                       random_state=0),
    "frank_wolfe": lambda s: M3NSimplicialDecomposition(s, C=0.5, tol=1e-3, max_iter=5000,
                                                        max_points=1, random_state=0),
}


def make_multilabel(seed, n_samples=60, n_features=4, n_labels=4):
    """Labels from noisy linear scores, label 3 copying label 2 (an interaction)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, n_features))
    W = rng.normal(size=(n_features, n_labels))
    Y = (X @ W + rng.normal(scale=0.7, size=(n_samples, n_labels)) > 0).astype(int)
    if n_labels > 3:
        Y[:, 3] = Y[:, 2]
    return X, Y


def _fit(model, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, Y)


@pytest.mark.parametrize("pairs", ["independent", "tree", "full"])
def test_every_learner_reaches_the_exact_optimum(pairs):
    X, Y = make_multilabel(0, n_samples=6, n_features=2, n_labels=3)
    objectives = []
    for name, make in LEARNERS.items():
        model = _fit(make(MultiLabelStructure(pairs=pairs)), X, Y)
        batch, y_flat, _ = model._validate_input(X, Y, reset=False)
        lower, upper, _ = exact_optimum(model.structure_, batch, y_flat, model.C)
        h = model.history_
        objective = model.objective(X, Y)
        assert objective == pytest.approx(h["primal"][-1], rel=1e-9), name
        assert objective >= lower - 1e-9
        assert objective - lower <= h["gap"][-1] + 1e-7 * upper, name
        objectives.append(objective)
    assert max(objectives) - min(objectives) <= 1e-3 * min(objectives)


def test_sklearn_multilabel_conventions():
    X, Y = make_multilabel(1, n_samples=90)
    model = _fit(M3NSimplicialDecomposition(C=1.0, random_state=0), X, Y)
    assert isinstance(model.structure_, MultiLabelStructure)
    P = model.predict(X)
    assert P.shape == Y.shape and set(np.unique(P)) <= {0, 1}
    assert model.score(X, Y) == pytest.approx(accuracy_score(Y, P))
    assert hamming_loss(Y, P) < 0.3
    assert f1_score(Y, P, average="samples", zero_division=0) > 0.5
    proba = model.predict_proba(X)
    assert proba.shape == Y.shape and np.all((proba >= 0) & (proba <= 1))
    assert model.decision_function(X).shape == Y.shape
    assert model.coef_.shape == (4, 4) and model.intercept_.shape == (4,)
    np.testing.assert_allclose(model.decision_function(X), X @ model.coef_.T + model.intercept_)
    assert model.pairwise_.shape == (3, 2, 2)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), P)
    np.testing.assert_array_equal(clone(model).fit(X, Y).predict(X), P)
    search = GridSearchCV(M3NSimplicialDecomposition(max_iter=50), {"C": [0.1, 1.0]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, Y)
        scores = cross_val_score(make_pipeline(StandardScaler(), M3NSimplicialDecomposition(
            MultiLabelStructure(pairs="full"), max_iter=50)), X, Y, cv=3,
            scoring="f1_samples")
    assert search.best_params_["C"] in (0.1, 1.0)
    assert scores.shape == (3,)


@pytest.mark.parametrize("dtype", [bool, np.int32, np.float64])
def test_predictions_have_the_dtype_of_y(dtype):
    X, Y = make_multilabel(1, n_samples=40)
    model = _fit(M3NSimplicialDecomposition(max_iter=20, random_state=0), X, Y.astype(dtype))
    P = model.predict(X)
    assert P.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(model.classes_, np.arange(Y.shape[1]))
    np.testing.assert_array_equal(
        P, _fit(M3NSimplicialDecomposition(max_iter=20, random_state=0), X, Y).predict(X))


def test_the_label_interaction_helps_on_copied_labels():
    X, Y = make_multilabel(2, n_samples=200)
    independent = _fit(M3NSimplicialDecomposition(MultiLabelStructure(pairs="independent"),
                                                  C=1.0, random_state=0), X, Y)
    tree = _fit(M3NSimplicialDecomposition(MultiLabelStructure(pairs="tree"), C=1.0,
                                           random_state=0), X, Y)
    assert [2, 3] in tree.structure_.label_pairs_.tolist()
    agree = tree.pairwise_[tree.structure_.label_pairs_.tolist().index([2, 3])]
    assert agree[0, 0] + agree[1, 1] > agree[0, 1] + agree[1, 0]
    assert independent.structure_.n_pairwise_ == 0
    assert hamming_loss(Y, tree.predict(X)) <= hamming_loss(Y, independent.predict(X)) + 0.02


def _is_spanning_tree(edges, n_nodes):
    """Whether ``n_nodes - 1`` edges connect ``n_nodes`` nodes without a cycle."""
    parent = list(range(n_nodes))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
    return True


def test_chow_liu_tree_is_the_maximum_spanning_tree_of_mutual_information():
    rng = np.random.default_rng(3)
    for _ in range(10):
        L = int(rng.integers(2, 6))
        Y = (rng.random((40, L)) < rng.random(L)).astype(int)
        Y[:, -1] = Y[:, 0] ^ (rng.random(40) < 0.1)
        edges, mi = chow_liu_tree(Y)
        assert edges.shape == (L - 1, 2)
        total = mi[edges[:, 0], edges[:, 1]].sum()
        pairs = list(itertools.combinations(range(L), 2))
        best = 0.0
        for tree in itertools.combinations(pairs, L - 1):  # spanning trees by brute force
            if _is_spanning_tree(tree, L):
                best = max(best, sum(mi[a, b] for a, b in tree))
        assert total == pytest.approx(best, abs=1e-12)
        # mutual information from the smoothed tables matches a direct computation
        j, k = 0, L - 1
        table = np.array([[np.sum((Y[:, j] == a) & (Y[:, k] == b)) + 1.0 for b in (0, 1)]
                          for a in (0, 1)])
        joint = table / table.sum()
        direct = np.sum(joint * np.log(joint / np.outer(joint.sum(1), joint.sum(0))))
        assert mi[j, k] == pytest.approx(direct)


def test_chow_liu_tree_without_smoothing_and_bad_input():
    """Without smoothing an empty cell of a table made the mutual information NaN, and the
    tree left out the strongest edge (two identical labels); bad labels or smoothing gave
    NaN or garbage without an error."""
    Y = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 0], [1, 1, 1], [0, 1, 1], [1, 0, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        edges, mi = chow_liu_tree(Y, smoothing=0.0)
    assert np.isfinite(mi).all() and np.array_equal(mi, mi.T)
    assert mi[1, 2] == pytest.approx(np.log(2)) and [1, 2] in edges.tolist()
    for bad, kwargs in ((np.array([[0, 2]]), {}), (np.array([[0.5, 1.0]]), {}),
                        (np.zeros((3, 0)), {}), (Y, {"smoothing": -1.0}),
                        (Y, {"smoothing": np.nan}), (np.zeros((0, 2)), {"smoothing": 0.0})):
        with pytest.raises(ValueError):
            chow_liu_tree(bad, **kwargs)


def test_hierarchical_multilabel_uses_the_hierarchy_and_its_loss():
    parents = np.array([-1, 0, 0, 1, 1, 2])
    weights = hierarchy_loss_weights(parents)
    np.testing.assert_allclose(weights, [1, 0.5, 0.5, 0.25, 0.25, 0.5])
    np.testing.assert_allclose(hierarchy_loss_weights(parents, "subtree"),
                               np.array([6, 3, 2, 1, 1, 1]) / 6)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 3))
    Y = np.zeros((80, 6), dtype=int)
    Y[:, 0] = 1
    Y[:, 1] = X[:, 0] > 0
    Y[:, 2] = 1 - Y[:, 1]
    Y[:, 3] = Y[:, 1] * (X[:, 1] > 0)
    Y[:, 4] = Y[:, 1] * (X[:, 1] <= 0)
    Y[:, 5] = Y[:, 2] * (X[:, 2] > 0)
    structure = MultiLabelStructure(hierarchy=parents)
    model = _fit(M3NSimplicialDecomposition(structure, C=10.0), X, Y)
    np.testing.assert_array_equal(model.structure_.label_pairs_,
                                  [[0, 1], [0, 2], [1, 3], [1, 4], [2, 5]])
    np.testing.assert_allclose(model.structure_.label_loss_weights_, weights)
    assert hamming_loss(Y, model.predict(X)) < 0.1
    with pytest.raises(ValueError, match="cycle"):
        hierarchy_loss_weights([1, 0])
    with pytest.raises(ValueError, match="leave pairs"):
        M3NSimplicialDecomposition(MultiLabelStructure(hierarchy=parents, pairs="full")).fit(
            X, Y)


def test_many_labels_fall_back_to_a_certified_relaxation():
    X, Y = make_multilabel(5, n_samples=30, n_labels=6)
    structure = MultiLabelStructure(pairs="full", max_enumeration=16)
    with pytest.warns(UserWarning, match="not a certificate"):
        model = _fit(M3NSimplicialDecomposition(structure, C=1.0, max_iter=30), X, Y)
    assert model.n_inexact_examples_ == 30
    with pytest.raises(ValueError, match="exact marginals"):
        _fit(M3NExpGrad(structure, max_iter=5), X, Y)
    # a fitted model says why it has no marginals, without advising another learner
    with pytest.raises(ValueError, match="predict_proba and predict_marginals are not "
                                         "available for it"):
        model.predict_proba(X)
    exact = _fit(M3NSimplicialDecomposition(MultiLabelStructure(pairs="full"), C=1.0,
                                            max_iter=30), X, Y)
    assert exact.n_inexact_examples_ == 0


@pytest.mark.parametrize("y, message", [
    (np.full((10, 3), 2), "indicator matrix of 0s and 1s"),
    (np.zeros((9, 3)), "10 samples but y has 9 rows"),
])
def test_bad_multilabel_input_is_a_clear_error(y, message):
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match=message):
        M3NSimplicialDecomposition(MultiLabelStructure()).fit(X, y)


@pytest.mark.parametrize("y, message", [
    (np.full((10, 3), 0.5), "indicator matrix of 0s and 1s"),
    (np.full((10, 3), "a"), "indicator matrix of 0s and 1s"),
    (np.where(np.eye(10, 3) == 1, np.nan, 0.0), "NaN"),
])
def test_a_malformed_indicator_matrix_is_named_with_the_default_structure(y, message):
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match=message):
        M3NSimplicialDecomposition().fit(X, y)


def test_labels_of_one_value_in_training_warn():
    """As OneVsRestClassifier: a label present in every training sample, or in none."""
    X, Y = make_multilabel(4)
    Y[:, 1], Y[:, 3] = 0, 1
    with pytest.warns(UserWarning, match=r"2 label\(s\) take one value in every training "
                                         r"sample \(label 1 always 0, label 3 always 1\)"):
        _fit(M3NSimplicialDecomposition(random_state=0), X, Y)
    X, Y = make_multilabel(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        M3NSimplicialDecomposition(random_state=0).fit(X, Y)


def test_a_sparse_indicator_matrix_gets_sparse_predictions():
    """As OneVsRestClassifier: predict returns a sparse y's form, with the same values."""
    import scipy.sparse as sp

    X, Y = make_multilabel(3)
    dense = _fit(M3NSimplicialDecomposition(random_state=0), X, Y)
    sparse = _fit(M3NSimplicialDecomposition(random_state=0), X, sp.csr_matrix(Y))
    predicted = sparse.predict(X)
    assert sp.issparse(predicted) and predicted.shape == Y.shape
    np.testing.assert_array_equal(predicted.toarray(), dense.predict(X))
    assert sparse.score(X, sp.csr_matrix(Y)) == dense.score(X, Y)
    assert not sp.issparse(sparse.predict_proba(X))


def test_predict_checks_the_number_of_labels_and_features():
    X, Y = make_multilabel(6, n_samples=30)
    model = _fit(M3NSimplicialDecomposition(max_iter=20), X, Y)
    with pytest.raises(ValueError, match="fitted with 4"):
        model.score(X, Y[:, :3])
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :2])
    with pytest.raises(ValueError, match="takes a 2-D X"):
        M3NSimplicialDecomposition(MultiLabelStructure()).fit([X[:3], X[3:6]],
                                                               [Y[:3, 0], Y[3:6, 0]])


@pytest.mark.parametrize("solver", ["cutting_plane", "em"])
def test_l1_learner_trains_multilabel_structures(solver):
    from sklstruct import L1M3N

    X, Y = make_multilabel(7, n_samples=40)
    for pairs in ("independent", "tree", "full"):
        model = _fit(L1M3N(MultiLabelStructure(pairs=pairs), C=1.0, solver=solver,
                           max_iter=100), X, Y)
        assert model.predict(X).shape == Y.shape
        assert hamming_loss(Y, model.predict(X)) < 0.2


@pytest.mark.parametrize("method", ["predict_proba", "decision_function", "predict"])
def test_cross_val_predict_takes_the_labels_from_classes(method):
    """As for scikit-learn's multi-label classifiers, classes_ numbers the labels (one per
    column of predict_proba and decision_function): cross_val_predict reorders the columns
    of each fold by it (classes_ was [0, 1]: a shape mismatch)."""
    from sklearn.model_selection import KFold, cross_val_predict

    X, Y = make_multilabel(1, n_samples=60)
    model = M3NSimplicialDecomposition(max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        predicted = cross_val_predict(model, X, Y, cv=KFold(3), method=method)
        manual = np.vstack([getattr(clone(model).fit(X[train], Y[train]), method)(X[test])
                            for train, test in KFold(3).split(X)])
    assert predicted.shape == Y.shape
    np.testing.assert_array_equal(predicted, manual)


def test_state_features_name_every_label():
    from sklstruct.inspection import state_features

    X, Y = make_multilabel(1, n_samples=40)
    model = _fit(M3NSimplicialDecomposition(max_iter=20, random_state=0), X, Y)
    features = state_features(model, top=2)
    assert list(features) == list(range(Y.shape[1]))
