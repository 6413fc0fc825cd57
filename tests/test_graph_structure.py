"""Graph structures in the estimators: the graph input form, its errors, and every learner
reaching the exact optimum (found by enumeration) on small trees and loopy graphs."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (L1M3N, ChainStructure, GraphStructure, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, StructSVMCuttingPlane, TreeStructure)
from sklstruct.utils._sequences import ExampleArrays, SequenceBatch

from ._enumeration import exact_optimum

L2_LEARNERS = {
    "1-slack": lambda s: StructSVMCuttingPlane(s, C=0.7, tol=1e-7),
    "n-slack": lambda s: StructSVMCuttingPlane(s, C=0.7, tol=1e-7, variant="n-slack"),
    "exp_grad online": lambda s: M3NExpGrad(s, C=0.7, tol=1e-6, max_iter=20000,
                                            algorithm="online"),
    "exp_grad batch": lambda s: M3NExpGrad(s, C=0.7, tol=1e-6, max_iter=20000,
                                           algorithm="batch"),
    "excessive_gap": lambda s: M3NExcessiveGap(s, C=0.7, tol=1e-5, max_iter=20000),
    "simplicial": lambda s: M3NSimplicialDecomposition(s, C=0.7, tol=1e-7, max_iter=5000,
                                                       random_state=0),
    "frank_wolfe": lambda s: M3NSimplicialDecomposition(s, C=0.7, tol=1e-3, max_iter=5000,
                                                        max_points=1, random_state=0),
}


def make_graphs(seed, n_graphs=4, max_nodes=4, n_states=3, loopy=False, edge_features=False):
    """Small random graphs (trees, or trees plus a closing edge) with noisy features."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_graphs):
        n = int(rng.integers(2, max_nodes + 1))
        edges = [(int(rng.integers(v)), v) for v in range(1, n)]
        if loopy and n >= 3 and (0, n - 1) not in edges:
            edges.append((0, n - 1))
        labels = rng.integers(0, n_states, size=n)
        features = np.eye(n_states)[labels][:, :2] + rng.normal(scale=0.7, size=(n, 2))
        graph = (features, np.array(edges, dtype=np.int64))
        if edge_features:
            graph += (rng.normal(size=(len(edges), 2)),)
        X.append(graph)
        y.append(labels)
    return X, y


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def _check_exact(model, X, y):
    batch, y_flat, _ = model._validate_input(X, y, reset=False)
    Y = model._encode_known(np.asarray(y_flat))
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, model.C)
    h = model.history_
    objective = model.objective(X, y)
    assert objective == pytest.approx(h["primal"][-1], rel=1e-9)
    assert h["dual"][-1] <= upper + 1e-9
    assert objective >= lower - 1e-9
    assert objective - lower <= h["gap"][-1] + 1e-7 * upper
    return objective


@pytest.mark.parametrize("problem", ["trees", "trees with edge features", "loopy"])
def test_every_learner_reaches_the_exact_optimum(problem):
    X, y = make_graphs(5, loopy=problem == "loopy", edge_features="edge" in problem)
    structure = TreeStructure() if problem.startswith("trees") else GraphStructure()
    objectives = {name: _check_exact(_fit(make(structure), X, y), X, y)
                  for name, make in L2_LEARNERS.items()}
    values = np.array(list(objectives.values()))
    assert values.max() - values.min() <= 1e-3 * values.min()


@pytest.mark.parametrize("structure", [GraphStructure(), TreeStructure()])
@pytest.mark.parametrize("max_nodes", [1, 4])
def test_graphs_without_edges_reach_the_exact_optimum(structure, max_nodes):
    """No training graph has an edge (single nodes, or nodes without edges): every learner
    fits (and refits warm) to the exact optimum."""
    X, y = make_graphs(6, n_graphs=5)
    X = [(features[:max_nodes], np.zeros((0, 2), dtype=np.int64)) for features, _ in X]
    y = [labels[:max_nodes] for labels in y]
    objectives = {name: _check_exact(_fit(make(structure), X, y), X, y)
                  for name, make in L2_LEARNERS.items()}
    values = np.array(list(objectives.values()))
    assert values.max() - values.min() <= 1e-3 * values.min()
    model = _fit(L2_LEARNERS["simplicial"](structure).set_params(warm_start=True), X, y)
    passes = model.n_iter_
    assert _fit(model, X, y).n_iter_ < passes  # (continued from the kept dual)


def test_l1_learner_trains_graphs():
    X, y = make_graphs(6, n_graphs=6)
    for solver in ("cutting_plane", "subgradient", "em"):
        model = _fit(L1M3N(GraphStructure(), C=1.0, solver=solver, max_iter=200), X, y)
        assert model.score(X, y) > 0.5


def test_graph_input_round_trip():
    X, y = make_graphs(7, n_graphs=5, max_nodes=6, edge_features=True)
    names = np.array(["a", "b", "c"])
    y_named = [names[labels] for labels in y]
    model = _fit(M3NSimplicialDecomposition(C=1.0, random_state=0), X, y_named)
    assert isinstance(model.structure_, GraphStructure)
    assert model.structure_.edge_features_ and model.structure_.n_edge_features_ == 2
    predicted = model.predict(X)
    assert [p.shape for p in predicted] == [labels.shape for labels in y]
    assert set(np.concatenate(predicted)) <= set(names)
    assert model.pairwise_.shape == (2, 3, 3)
    np.testing.assert_allclose(model.pairwise_, model.pairwise_.transpose(0, 2, 1))
    # a graph predicts the same alone as in its batch
    for graph, labels in zip(X, predicted):
        np.testing.assert_array_equal(model.predict([graph])[0], labels)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(np.concatenate(again.predict(X)), np.concatenate(predicted))
    assert clone(model).get_params()["structure"] == "auto"
    assert 0.0 <= model.score(X, y_named) <= 1.0


def test_directed_edges_learn_asymmetric_interactions():
    X, y = make_graphs(8, n_graphs=6)
    model = _fit(M3NSimplicialDecomposition(GraphStructure(directed=True), C=1.0), X, y)
    assert model.structure_.n_pairwise_ == 9
    assert not np.allclose(model.pairwise_[0], model.pairwise_[0].T)


@pytest.mark.parametrize("graphs, message", [
    ([(np.zeros((3, 2)), np.array([[0, 1], [1, 3]]))], r"graph 0, edge 1 \(1, 3\): node index"),
    ([(np.zeros((3, 2)), np.array([[0, 1]])), (np.zeros((2, 2)), np.array([[1, 1]]))],
     r"graph 1, edge 0 \(1, 1\): a self-loop"),
    ([(np.zeros((3, 2)), np.array([[0, 1], [1, 0]]))], "repeats edge 0"),
    ([(np.zeros((3, 2)), np.array([[0, 1], [1, 2]]), np.zeros((3, 2)))],
     r"graph 0: edge_features must have shape \(2, 2\)"),
    ([(np.zeros((3, 2)), np.array([[0, 1]]), np.array([[np.nan]]))],
     "graph 0, edge 0: edge_features contains"),
    ([(np.zeros((3, 2)), np.array([[0, 1]]), np.ones((1, 1))),
      (np.zeros((2, 2)), np.array([[0, 1]]))], "graph 1 of X lacks edge features"),
    ([(np.zeros((3, 2)), np.array([0.5, 1.0]))], "must hold integers"),
])
def test_malformed_graphs_are_clear_errors(graphs, message):
    y = [np.arange(g[0].shape[0]) % 2 for g in graphs]
    with pytest.raises((ValueError, TypeError), match=message):
        M3NSimplicialDecomposition().fit(graphs, y)


def test_graph_structure_refuses_other_input_and_mismatched_graphs():
    X, y = make_graphs(9, n_graphs=3)
    with pytest.raises(ValueError, match="GraphStructure takes a list of"):
        M3NSimplicialDecomposition(GraphStructure()).fit([g[0] for g in X], y)
    with pytest.raises(ValueError, match="does not take graphs input"):
        M3NSimplicialDecomposition(ChainStructure()).fit(X, y)
    with pytest.raises(ValueError, match="labels"):
        M3NSimplicialDecomposition().fit(X, [labels[:-1] for labels in y])
    model = _fit(M3NSimplicialDecomposition(max_iter=20), X, y)
    with_features = [g + (np.ones((g[1].shape[0], 1)),) for g in X]
    with pytest.raises(ValueError, match="without edge features"):
        model.predict(with_features)
    with pytest.raises(ValueError, match="takes a list of"):
        model.predict([g[0] for g in X])


def test_max_enumeration_beyond_the_enumerators_cap_is_refused():
    """``max_enumeration=10**12`` sent 5 x 5 grids of 3 states (8.5e11 labellings) to
    enumeration: a fit that ran for hours with no message."""
    from sklstruct import MultiLabelStructure

    X, y = make_graphs(9, n_graphs=3)
    for structure in (GraphStructure(max_enumeration=10**12),
                      MultiLabelStructure(pairs="full", max_enumeration=2**24 + 1)):
        with pytest.raises(ValueError, match=r"max_enumeration must be at most 2\*\*24"):
            structure.bind(3, 2)
    with pytest.raises(ValueError, match="max_enumeration must be at most"):
        M3NSimplicialDecomposition(GraphStructure(max_enumeration=10**12)).fit(X, y)
    GraphStructure(max_enumeration=2**24).bind(3, 2)


def test_a_loopy_graph_of_weight_zero_neither_warns_nor_is_refused():
    """Sequences of weight 0 take no part in a fit: one loopy graph of weight 0 among
    trees is not an inexact example, and a marginal learner trains on the trees."""
    rng = np.random.default_rng(0)
    graphs, labels = [], []
    for g in range(8):
        edges = np.array([(k, k + 1) for k in range(4)] + ([(0, 4)] if g == 0 else []))
        nodes = rng.normal(size=(5, 3))
        graphs.append((nodes, edges))
        labels.append((nodes[:, 0] > 0).astype(np.int64))
    weights = np.r_[0.0, np.ones(7)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        for learner in (StructSVMCuttingPlane, M3NExpGrad):
            model = learner(GraphStructure(inference="trws")).fit(graphs, labels,
                                                                 sample_weight=weights)
            assert model.n_inexact_examples_ == 0
    with pytest.warns(UserWarning, match="not a certificate"):
        model = StructSVMCuttingPlane(GraphStructure(inference="trws")).fit(graphs, labels)
    assert model.n_inexact_examples_ == 1


def test_an_approximate_oracle_warns_and_is_recorded():
    X, y = make_graphs(10, n_graphs=4, max_nodes=5, loopy=True)
    with pytest.warns(UserWarning, match="not a certificate"):
        model = _fit(M3NSimplicialDecomposition(GraphStructure(inference="trws"), C=1.0,
                                                max_iter=50), X, y)
    assert model.n_inexact_examples_ >= 1
    exact = _fit(M3NSimplicialDecomposition(GraphStructure(), C=1.0, max_iter=50), X, y)
    assert exact.n_inexact_examples_ == 0
    assert not hasattr(exact, "inexact_gap_bound_")
    # the bound from TRW-S's certificates is a true gap: the exact primal objective at the
    # model's weights (by enumeration) minus the learner's dual value stays below it
    exact.w_ = model.w_
    true_gap = exact.objective(X, y) - model.history_["dual"][-1]
    assert model.inexact_gap_bound_ >= true_gap - 1e-9
    assert model.inexact_gap_bound_ >= model.history_["gap"][-1] - 1e-9


def _frustrated_ring_graphs(seed=0, n_graphs=8, n=7, S=3, d=4):
    """Rings with chords labelled by the exact MAP of a random frustrated model: graphs on
    which TRW-S often misses the best labelling."""
    rng = np.random.RandomState(seed)
    W, T = rng.randn(S, d) * 2, rng.randn(S, S) * 1.5
    T = (T + T.T) / 2
    edges = np.array([(k, (k + 1) % n) for k in range(n)] + [(k, (k + 2) % n) for k in range(n)])
    X, y = [], []
    for _ in range(n_graphs):
        features = rng.randn(n, d)
        unary = features @ W.T

        def score(labels):
            labels = np.array(labels)
            return unary[np.arange(n), labels].sum() + T[labels[edges[:, 0]],
                                                         labels[edges[:, 1]]].sum()

        y.append(np.array(max(itertools.product(range(S), repeat=n), key=score)))
        X.append((features, edges))
    return X, y


def test_an_approximate_oracle_keeps_the_hinge_at_or_above_zero():
    """max(0, ...): the true labelling is always a candidate of the hinge. An oracle that
    misses it (TRW-S) made the compiled passes' hinge negative: a recorded primal far below
    objective(), even below 0, and negative gaps."""
    X, y = _frustrated_ring_graphs()
    for learner in (M3NSimplicialDecomposition(GraphStructure(inference="trws"), C=100.0,
                                               tol=1e-6, max_iter=200, random_state=0),
                    M3NSimplicialDecomposition(GraphStructure(inference="trws"), C=100.0,
                                               max_points=1, tol=1e-6, max_iter=200,
                                               random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = learner.fit(X, y)
        h = model.history_
        assert model.objective(X, y) == pytest.approx(h["primal"][-1], rel=1e-9)
        finite = np.isfinite(h["primal"])
        assert np.all(h["primal"][finite] >= 0.0)
        assert np.all(h["gap"][np.isfinite(h["gap"])] >= -1e-9 * np.abs(h["primal"]).max())


@pytest.mark.parametrize("learner", [M3NExpGrad, M3NExcessiveGap])
def test_learners_on_marginals_refuse_loopy_graphs_before_warning(learner):
    X, y = make_graphs(10, n_graphs=4, max_nodes=5, loopy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (no warning about the certificate)
        with pytest.raises(ValueError, match="exact marginals"):
            learner(GraphStructure(inference="trws"), max_iter=5).fit(X, y)


def test_batches_carry_their_graphs_through_select_and_take():
    edges = ExampleArrays(np.array([[0, 1], [0, 1], [1, 2], [0, 1]]),
                          np.array([0, 1, 1, 3, 4]))
    batch = SequenceBatch(np.arange(20.0).reshape(10, 2), np.array([0, 2, 3, 6, 10]),
                          extras={"edges": edges})
    sub, rows = batch.select([3, 0, 2])
    np.testing.assert_array_equal(rows, [6, 7, 8, 9, 0, 1, 3, 4, 5])
    np.testing.assert_array_equal(sub.extra("edges").offsets, [0, 1, 2, 4])
    np.testing.assert_array_equal(sub.extra("edges").data, [[0, 1], [0, 1], [0, 1], [1, 2]])
    run = batch.take([1, 2])
    np.testing.assert_array_equal(run.extra("edges").offsets, [0, 0, 2])
    np.testing.assert_array_equal(run.extra("edges").of(1), [[0, 1], [1, 2]])
    assert batch.take([0]).extra("missing") is None


def test_make_tree_data_draws_document_ordered_trees_from_its_model():
    from sklstruct.datasets import make_tree_data

    X, y, model = make_tree_data(30, n_nodes=(1, 12), max_children=2, random_state=0,
                                 return_model=True)
    again, _ = make_tree_data(30, n_nodes=(1, 12), max_children=2, random_state=0)
    np.testing.assert_array_equal(np.vstack([f for f, _ in X]),
                                  np.vstack([f for f, _ in again]))
    for (features, edges), labels, parents in zip(X, y, model["parents"]):
        n = labels.shape[0]
        assert features.shape == (n, 10) and edges.shape == (n - 1, 2)
        assert np.all(edges[:, 0] < edges[:, 1])  # pre-order: parents first
        np.testing.assert_array_equal(edges[:, 0], parents[1:])
        assert np.bincount(edges[:, 0], minlength=n).max(initial=0) <= 2
        # pre-order: every subtree is a run of consecutive nodes
        for v in range(n):
            subtree = [v]
            for child in range(v + 1, n):
                if parents[child] in subtree:
                    subtree.append(child)
            assert subtree == list(range(v, v + len(subtree)))
    np.testing.assert_allclose(model["transition"].sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="n_nodes"):
        make_tree_data(3, n_nodes=(5, 2))


def test_a_tree_model_beats_a_chain_over_the_same_nodes():
    from sklstruct.datasets import make_tree_data

    X, y = make_tree_data(240, n_nodes=(5, 20), random_state=1)
    train, test = slice(0, 120), slice(120, 240)
    tree = _fit(M3NSimplicialDecomposition(TreeStructure(), C=1.0, random_state=0),
                X[train], y[train])
    chain = _fit(M3NSimplicialDecomposition(ChainStructure(), C=1.0, random_state=0),
                 [f for f, _ in X[train]], y[train])
    truth = np.concatenate(y[test])
    tree_accuracy = np.mean(np.concatenate(tree.predict(X[test])) == truth)
    chain_accuracy = np.mean(np.concatenate(chain.predict([f for f, _ in X[test]])) == truth)
    assert tree_accuracy > chain_accuracy + 0.02


def test_graphs_given_as_lists_with_a_graph_structure():
    """Code that reads ``x[0], x[1]`` per graph takes lists as well as tuples: with a graph
    structure (given, or bound by a fit) lists ``[node_features, edges]`` are graphs, with
    the weights and predictions of the tuples; otherwise the errors name the graph form
    instead of numpy's message about an inhomogeneous shape."""
    X, y = make_graphs(9, n_graphs=4, edge_features=True)
    as_lists = [list(graph) for graph in X]
    by_tuples = _fit(M3NSimplicialDecomposition(GraphStructure(), random_state=0), X, y)
    by_lists = _fit(M3NSimplicialDecomposition(GraphStructure(), random_state=0), as_lists, y)
    np.testing.assert_array_equal(by_tuples.w_, by_lists.w_)
    auto = _fit(M3NSimplicialDecomposition(random_state=0), X, y)
    for model in (by_lists, auto):
        np.testing.assert_array_equal(np.concatenate(model.predict(as_lists)),
                                      np.concatenate(model.predict(X)))
    # without a graph structure a list of arrays of different shapes is no sequence
    ragged = [[np.zeros((3, 2)), np.array([[0, 1], [1, 2]])],
              [np.zeros((2, 2)), np.array([[0, 1]])]]
    with pytest.raises(ValueError, match=r"a graph a tuple \(node_features, edges"):
        M3NSimplicialDecomposition().fit(ragged, [np.array([0, 1, 1]), np.array([1, 0])])


def test_a_fitted_model_keeps_no_batch_of_its_last_prediction():
    """The structure kept the last batch it laid out (node features included) alive in
    the fitted model: 6 MB after one large predict call."""
    import gc
    import weakref

    X, y = make_graphs(3, n_graphs=6)
    model = _fit(M3NSimplicialDecomposition(GraphStructure(), random_state=0), X, y)
    big = [(np.random.default_rng(0).normal(size=(2000, 2)),
            np.column_stack([np.arange(1999), np.arange(1, 2000)]))]
    model.predict(big)
    gc.collect()
    cached = model.structure_._layout_cache
    assert isinstance(cached[0], weakref.ref) and cached[0]() is None
