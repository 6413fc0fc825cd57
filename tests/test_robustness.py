"""Behaviour at the edges: huge potentials, non-canonical and read-only sparse input, mixed
label types, empty sequences at prediction, the size of a pickled model."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct._inference.chain import forward_backward

from ._helpers import make_chain_data


def _enumerated_marginals(unary, transition):
    """Node marginals and edge sums of one chain by enumerating its labellings."""
    length, n_states = unary.shape
    paths = np.array(list(itertools.product(range(n_states), repeat=length)))
    scores = unary[np.arange(length), paths].sum(axis=1) + \
        transition[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    p = np.exp(scores - scores.max())
    p /= p.sum()
    node = np.zeros((length, n_states))
    edges = np.zeros((n_states, n_states))
    for path, weight in zip(paths, p):
        node[np.arange(length), path] += weight
        np.add.at(edges, (path[:-1], path[1:]), weight)
    return node, edges


@pytest.fixture(scope="module")
def fitted():
    X, y = make_chain_data(n_sequences=20, n_states=3, n_features=4, max_length=6, seed=11)
    return StructSVMCuttingPlane(C=1.0).fit(X, y), X, y


@pytest.mark.parametrize("scale", [1e3, 1e18, 1e20, 1e50, 1e150])
def test_forward_backward_is_finite_and_exact_at_any_magnitude(scale):
    rng = np.random.default_rng(int(np.log10(scale)))
    n_states, length = 3, 5
    unary = rng.normal(size=(length, n_states)) * scale
    transition = rng.normal(size=(n_states, n_states)) * scale
    node, edges, log_z = forward_backward(unary, np.array([0, length]), transition)
    assert np.all(np.isfinite(node)) and np.isfinite(log_z).all()
    np.testing.assert_allclose(node.sum(axis=1), 1.0)
    expected_node, expected_edges = _enumerated_marginals(unary, transition)
    np.testing.assert_allclose(node, expected_node, atol=1e-9)
    np.testing.assert_allclose(edges[0], expected_edges, atol=1e-9)


@pytest.mark.parametrize("scale", [1e20, 1e100])
def test_predict_marginals_at_huge_feature_scales(fitted, scale):
    model, X, _ = fitted
    big = [x * scale for x in X]
    for marginals, labels in zip(model.predict_marginals(big), model.predict(big)):
        assert np.all(np.isfinite(marginals))
        np.testing.assert_allclose(marginals.sum(axis=1), 1.0)
        # at this scale the distribution sits on the best labelling
        np.testing.assert_array_equal(model.classes_[marginals.argmax(axis=1)], labels)


def _with_duplicates(A):
    """The CSR matrix A with every entry split into two halves (duplicate indices)."""
    A = sp.csr_matrix(A)
    indptr = 2 * A.indptr
    indices = np.repeat(A.indices, 2)
    data = np.repeat(A.data / 2.0, 2)
    out = sp.csr_matrix((data, indices, indptr), shape=A.shape)
    assert not out.has_canonical_format
    return out


@pytest.mark.parametrize("model", [M3NExpGrad(C=1.0, max_iter=30, random_state=0),
                                   M3NSimplicialDecomposition(C=1.0, random_state=0),
                                   StructSVMCuttingPlane(C=1.0)])
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_duplicate_entries_and_unsorted_indices_change_nothing(fitted, model):
    _, X, y = fitted
    lengths = [len(s) for s in y]
    flat, labels = sp.csr_matrix(np.vstack(X)), np.concatenate(y)
    reference = model.fit(flat, labels, lengths=lengths).w_.copy()
    duplicated = _with_duplicates(flat)
    snapshot = (duplicated.indices.copy(), duplicated.data.copy())
    np.testing.assert_allclose(model.fit(duplicated, labels, lengths=lengths).w_, reference,
                               rtol=1e-12, atol=1e-12)
    # the user's matrix is left as it was
    np.testing.assert_array_equal(duplicated.indices, snapshot[0])
    np.testing.assert_array_equal(duplicated.data, snapshot[1])
    # unsorted indices in read-only arrays
    unsorted = flat.copy()
    for i in range(unsorted.shape[0]):
        lo, hi = unsorted.indptr[i], unsorted.indptr[i + 1]
        unsorted.indices[lo:hi] = unsorted.indices[lo:hi][::-1].copy()
        unsorted.data[lo:hi] = unsorted.data[lo:hi][::-1].copy()
    unsorted.has_sorted_indices = False
    for array in (unsorted.data, unsorted.indices, unsorted.indptr):
        array.setflags(write=False)
    np.testing.assert_allclose(model.fit(unsorted, labels, lengths=lengths).w_, reference,
                               rtol=1e-12, atol=1e-12)


def test_labels_of_mixed_kinds_give_a_clear_error(fitted):
    _, X, y = fitted
    mixed = [np.array(["a", None] * 3, dtype=object)[: len(s)] for s in y]
    with pytest.raises(TypeError, match="mixes NoneType, str"):
        StructSVMCuttingPlane().fit(X, mixed)


def test_empty_sequences_at_prediction(fitted):
    model, X, y = fitted
    n_features, n_classes = X[0].shape[1], model.classes_.shape[0]
    empty = np.zeros((0, n_features))
    batch = [X[0], empty, X[1], sp.csr_matrix(empty)]
    predicted = model.predict(batch)
    assert [p.shape for p in predicted] == [(len(y[0]),), (0,), (len(y[1]),), (0,)]
    np.testing.assert_array_equal(predicted[2], model.predict([X[1]])[0])
    assert predicted[1].dtype == model.classes_.dtype
    for output in (model.decision_function(batch), model.predict_marginals(batch)):
        assert [o.shape for o in output] == [(len(y[0]), n_classes), (0, n_classes),
                                             (len(y[1]), n_classes), (0, n_classes)]
    flat = model.predict(np.vstack([X[0], X[1]]), lengths=[len(y[0]), 0, len(y[1])])
    np.testing.assert_array_equal(flat, np.concatenate([predicted[0], predicted[2]]))
    truth = [y[0], np.array([], dtype=y[0].dtype), y[1], np.array([], dtype=y[0].dtype)]
    assert model.score(batch, truth) == model.score(X[:2], y[:2])
    with pytest.raises(ValueError, match="empty"):  # fit still needs every sequence
        StructSVMCuttingPlane().fit(batch, truth)
    # only empty sequences: empty outputs of the right shapes and types
    only_empty = [empty, sp.csr_matrix(empty)]
    assert [p.shape for p in model.predict(only_empty)] == [(0,), (0,)]
    assert model.predict(only_empty)[0].dtype == model.classes_.dtype
    assert [m.shape for m in model.predict_marginals(only_empty)] == [(0, n_classes)] * 2
    assert model.predict(np.zeros((0, n_features)), lengths=[0, 0]).shape == (0,)
    with pytest.raises(ValueError, match="features"):
        model.predict([np.zeros((0, n_features + 1))])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_pickle_holds_the_model_not_the_dual_state():
    X, y = make_chain_data(n_sequences=300, n_states=4, n_features=20, max_length=30, seed=2)
    model = M3NExpGrad(C=1.0, max_iter=5, warm_start=True).fit(X, y)
    assert hasattr(model, "_dual_state")
    n_tokens = sum(len(s) for s in y)
    size = len(pickle.dumps(model))
    # the dual state (n_tokens x n_states marginals and more) stays out of the pickle
    assert size < 8 * model.w_.size + 8 * n_tokens
    restored = pickle.loads(pickle.dumps(model))
    for a, b in zip(restored.predict(X[:5]), model.predict(X[:5])):
        np.testing.assert_array_equal(a, b)


def test_chain_structure_marginals_at_huge_potentials():
    """The structure's potentials-level marginals stay finite with expected statistics that
    sum to the number of transitions."""
    rng = np.random.default_rng(0)
    X, y = make_chain_data(n_sequences=4, n_states=3, n_features=4, max_length=6, seed=1)
    model = StructSVMCuttingPlane(ChainStructure(start_end=False), C=1.0).fit(X, y)
    from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    unary = rng.normal(size=(batch.n_tokens, 3)) * 1e60
    pairwise = rng.normal(size=9) * 1e60
    node, pair, _ = model.structure_.marginals(batch, unary, pairwise)
    assert np.all(np.isfinite(node)) and np.all(np.isfinite(pair))
    np.testing.assert_allclose(node.sum(axis=1), 1.0)
    assert pair.sum() == pytest.approx(batch.n_tokens - batch.n_sequences)


@pytest.mark.parametrize("params", [{"max_points": 1}, {"max_points": 10},
                                    {"blocks": "single", "max_iter": 300}],
                         ids=["bcfw", "multi-point", "general"])
@pytest.mark.parametrize("scale", [1e3, 1e9, 1e12])
def test_simplicial_decomposition_never_diverges_at_huge_feature_scales(scale, params):
    # At 1e9-1e12, C * ||x||^2 ~ 1e18-1e24: the dual's ascent is below double precision; at
    # 1e3 the problem is merely ill-conditioned. The fit must warn and return weights no worse
    # than w = 0, certified by its last record (the last iterate's primal can be far worse).
    X, y = make_chain_data(n_sequences=30, seed=1)
    X = [x * scale for x in X]
    with pytest.warns(ConvergenceWarning):
        model = M3NSimplicialDecomposition(C=1.0, random_state=0, **params).fit(X, y)
    at_zero = sum(len(labels) for labels in y)  # C * sum_i max Hamming loss
    objective = model.objective(X, y)
    assert np.isfinite(model.w_).all()
    assert objective <= at_zero
    assert objective == pytest.approx(model.history_["primal"][-1], rel=1e-9)
    assert np.max(model.history_["dual"]) <= objective


def test_simplicial_decomposition_keeps_no_array_per_token_and_state():
    """The compiled multi-point pass keeps packed anchors, labels and Gram terms, no
    n_tokens x n_states array: a fit with 50 states peaks below the size of two (node
    marginals, anchors and the loss matrix took three, and the pairwise statistics of points
    and anchors 1.7 times that)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n_sequences, length, n_states = 1500, 10, 50
    n_tokens = n_sequences * length
    X = sp.random(n_tokens, 40, density=0.1, format="csr", random_state=0)
    y = np.asarray(X @ rng.normal(size=(40, n_states))).argmax(axis=1)
    # two points per example, so that anchors are folded and packed
    model = M3NSimplicialDecomposition(C=1.0, max_points=2, tol=1e-4, max_iter=8,
                                       random_state=0)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y, lengths=np.full(n_sequences, length))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert model.n_iter_ >= 4
    assert peak < 2 * 8 * n_tokens * n_states


def test_potentials_beyond_double_range_are_refused_not_misdecoded():
    """Weights of absurd scale make a labelling's score overflow: every prediction method
    refuses with a clear error instead of NaN confidences, inf scores or arbitrary labels."""
    X, y = make_chain_data(20, seed=0)
    model = StructSVMCuttingPlane().fit(X, y)
    model.w_ = model.w_ * (3e307 / np.abs(model.w_).max())
    for method in (model.predict, model.sequence_confidence, model.predict_marginals,
                   model.predict_proba, lambda X: model.predict_topk(X, 3)):
        with pytest.raises(ValueError, match="too large to be summed"):
            method(X[:3])
    # large but summable potentials still decode, with confidences in [0, 1]
    model.w_ = model.w_ * 1e-10
    confidence = model.sequence_confidence(X[:3])
    assert np.all((confidence >= 0) & (confidence <= 1))
    assert all(np.isfinite(scores).all() for scores in model.predict_topk(X[:3], 3)[1])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_scores_beyond_double_range_are_refused_on_every_structure():
    """Finite features whose product with the weights overflows gave NaN probabilities and
    labels against the scores (0 where label 1 scores +inf) on multiclass, multi-label and
    graph models; the chain decoders already refused them. Large finite scores decode."""
    from sklstruct import GraphStructure, MultiLabelStructure

    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    Y = np.column_stack([X[:, 0] > 0, X[:, 1] > 0]).astype(int)
    graphs = [(rng.randn(3, 2), np.array([[0, 1], [1, 2]])) for _ in range(30)]
    cases = [
        (M3NSimplicialDecomposition(random_state=0).fit(X, Y.sum(axis=1)),
         np.array([[1e308, 1e308]]), np.array([[1e3, 1e3]])),
        (M3NSimplicialDecomposition(MultiLabelStructure(pairs="full"), random_state=0).fit(X, Y),
         np.array([[1e308, -1e308]]), np.array([[1e3, -1e3]])),
        (M3NSimplicialDecomposition(GraphStructure(), random_state=0).fit(
            graphs, [(x[:, 0] > 0).astype(int) for x, _ in graphs]),
         [(np.array([[1e308, 0.0], [-1e308, 0.0], [1.0, 0.0]]), graphs[0][1])],
         [(np.array([[1e3, 0.0], [-1e3, 0.0], [1.0, 0.0]]), graphs[0][1])]),
    ]
    for model, huge, large in cases:
        for method in (model.predict, model.predict_proba, model.predict_marginals):
            with pytest.raises(ValueError, match="not finite"):
                method(huge)
            result = method(large)
            assert all(np.isfinite(np.asarray(r, dtype=float)).all() for r in
                       (result if isinstance(result, list) else [result]))
    graph_model = cases[2][0]
    assert graph_model.predict(cases[2][2])[0][:2].tolist() == [1, 0]
    # the other paths: a kernel model's decoding, a sparse chain's fused product and
    # decoding, and marginals at a low temperature
    kernel = M3NExcessiveGap(kernel="poly", degree=3, max_iter=50).fit(X, Y.sum(axis=1))
    with pytest.raises(ValueError, match="not finite"):
        kernel.predict(np.array([[1e110, 1e110]]))
    sequences = [sp.csr_matrix(np.abs(rng.randn(3, 4))) for _ in range(10)]
    labels = [(s.toarray()[:, 0] > 0.5).astype(int) for s in sequences]
    chain = M3NSimplicialDecomposition(random_state=0).fit(sequences, labels)
    with pytest.raises(ValueError, match="not finite"):
        chain.predict([sp.csr_matrix(np.sign(sequences[0].toarray()) * 1.7e308)])
    multiclass = cases[0][0]
    assert np.isfinite(multiclass.predict_proba(np.array([[3e305, 0.0]]))).all()
    multiclass.temperature_ = 1e-3
    with pytest.raises(ValueError, match="divided by temperature_"):
        multiclass.predict_proba(np.array([[3e305, 0.0]]))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore:The number of unique classes:UserWarning")
def test_node_marginals_of_many_labels_need_no_pairwise_tables():
    """predict_marginals computes node marginals without per-sequence expected transition
    counts (n_sequences x n_states^2: 512 MB here)."""
    import tracemalloc

    n_states = 400
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 4)) for _ in range(n_states // 3 + 1)]
    y = [np.arange(3 * k, 3 * k + 3) % n_states for k in range(len(X))]
    model = StructSVMCuttingPlane(max_iter=2).fit(X, y)
    X_test = [rng.normal(size=(3, 4)) for _ in range(400)]
    tracemalloc.start()
    node = model.predict_marginals(X_test)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100 * 2**20, peak
    transition, start, end = model.transition_, model.start_, model.end_
    reference = forward_backward(model.decision_function(X_test[:5])[0], [0, 3],
                                 transition, start, end)[0]
    np.testing.assert_allclose(node[0], reference, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(np.vstack(node).sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_dual_states_of_many_labels_stay_within_the_token_arrays():
    """With many labels on short sequences, BCFW (max_points=1) keeps sparse anchors and
    M3NExpGrad's "auto" takes the batch updates: no n_sequences x n_pairwise table (290 MB
    each here), where CoNLL-2000's shape keeps the dense ones."""
    import tracemalloc

    from sklstruct.learners._factored_dual import per_example_tables_too_large
    from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

    n_states, n_sequences = 300, 400
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 4)) for _ in range(n_sequences)]
    y = [rng.integers(0, n_states, 3) for _ in range(n_sequences)]
    y[:100] = [np.arange(3 * k, 3 * k + 3) for k in range(100)]  # every label seen
    structure = ChainStructure().bind(4, n_states)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths(np.full(n_sequences, 3)))
    assert per_example_tables_too_large(structure, batch, 1)
    conll_shape = SequenceBatch(np.zeros((8936 * 23, 1)),  # (211,727 tokens in 8,936)
                                offsets_from_lengths(np.full(8936, 23)))
    assert not per_example_tables_too_large(ChainStructure().bind(1, 22), conll_shape, 2)
    for model in (M3NSimplicialDecomposition(max_points=1, max_iter=2, random_state=0),
                  M3NExpGrad(max_iter=2, random_state=0)):
        tracemalloc.start()
        model.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 150 * 2**20, (model, peak)


def test_weights_that_overflow_are_an_error_not_a_fitted_model():
    """Features near the largest double overflow M3NExpGrad's sums: its weights came back NaN
    with only overflow warnings and a NaN certificate; the fit now fails and leaves the
    estimator unfitted."""
    rng = np.random.RandomState(0)
    X = [rng.randn(4, 5) * 1e300 for _ in range(6)]
    y = [rng.randint(3, size=4) for _ in range(6)]
    model = M3NExpGrad(max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="non-finite weights.*overflow"):
            model.fit(X, y)
    assert not hasattr(model, "w_")
