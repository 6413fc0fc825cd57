"""Input forms at the edges: per-sequence DataFrames, label kinds, object arrays, flat X."""

import re
from pathlib import Path

import numpy as np
import pytest

from sklstruct import ChainStructure, M3NSimplicialDecomposition, StructSVMCuttingPlane

from ._helpers import make_chain_data

pd = pytest.importorskip("pandas")


def _named_sequences(seed=0, n=40):
    """Sequences as DataFrames with columns [cap, num]: a token is a NAME exactly when cap."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        length = int(rng.integers(2, 6))
        cap = rng.integers(0, 2, length).astype(float)
        num = rng.integers(0, 2, length).astype(float)
        X.append(pd.DataFrame({"cap": cap, "num": num}))
        y.append(np.where(cap == 1, "NAME", "O"))
    return X, y


def test_per_sequence_dataframes_record_and_check_their_columns():
    X, y = _named_sequences()
    model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    np.testing.assert_array_equal(model.feature_names_in_, ["cap", "num"])
    test = pd.DataFrame({"cap": [1.0, 0.0, 1.0], "num": [0.0, 1.0, 0.0]})
    assert model.predict([test])[0].tolist() == ["NAME", "O", "NAME"]
    # the same columns in another order are refused, not read by position
    with pytest.raises(ValueError, match="same order"):
        model.predict([test[["num", "cap"]]])
    with pytest.raises(ValueError, match="unseen at fit time"):
        model.predict([test.rename(columns={"num": "digits"})])
    # a flat DataFrame with lengths is checked against the same names
    with pytest.raises(ValueError, match="same order"):
        model.predict(test[["num", "cap"]], lengths=[3])
    assert model.predict(test, lengths=[3]).tolist() == ["NAME", "O", "NAME"]


def test_sequences_of_one_call_must_share_their_columns():
    X, y = _named_sequences()
    mixed = [X[0], X[1][["num", "cap"]]] + X[2:]
    with pytest.raises(ValueError, match="sequence 1 has columns"):
        StructSVMCuttingPlane().fit(mixed, y)
    unnamed = [X[0], X[1].to_numpy()] + X[2:]
    with pytest.raises(ValueError, match="sequence 1 has no column names"):
        StructSVMCuttingPlane().fit(unnamed, y)


def test_arrays_after_dataframes_warn_as_scikit_learn_does():
    X, y = _named_sequences()
    model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict([x.to_numpy() for x in X[:2]])
    plain = StructSVMCuttingPlane(C=10.0).fit([x.to_numpy() for x in X], y)
    assert not hasattr(plain, "feature_names_in_")


def test_score_refuses_labels_of_another_kind_than_fit():
    X, y = make_chain_data(20, seed=0)
    as_str = [labels.astype(str) for labels in y]
    model = StructSVMCuttingPlane().fit(X, as_str)
    assert model.score(X, as_str) > 0.5
    with pytest.raises(ValueError, match="Mix of label input types"):
        model.score(X, y)
    numeric = StructSVMCuttingPlane().fit(X, y)
    with pytest.raises(ValueError, match="Mix of label input types"):
        numeric.score(X, as_str)
    with pytest.raises(ValueError, match="Mix of label input types"):
        numeric.objective(X, as_str)


def test_mixed_label_kinds_get_one_message_in_every_form():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.array([1, "a", 1, "a", 2, "b", 2, "b"], dtype=object)
    for labels in (y, y.tolist()):
        with pytest.raises(TypeError, match="mutually comparable values of one kind"):
            StructSVMCuttingPlane().fit(X, labels)
    Xs, ys = make_chain_data(10, seed=0)
    # every sequence mixes ints and strings: numpy would silently make them all strings
    mixed = [["a" if v == 0 else int(v) for v in labels] for labels in ys]
    mixed[0][0] = "a"
    with pytest.raises(TypeError, match="mutually comparable values of one kind"):
        StructSVMCuttingPlane().fit(Xs, mixed)


def test_object_array_of_sequences_is_the_list_form():
    X, y = make_chain_data(20, seed=0)
    as_objects = np.empty(len(X), dtype=object)
    as_objects[:] = X
    model = StructSVMCuttingPlane().fit(as_objects, y)
    reference = StructSVMCuttingPlane().fit(X, y)
    np.testing.assert_array_equal(model.w_, reference.w_)
    predicted = model.predict(as_objects)
    assert isinstance(predicted, list)
    for a, b in zip(predicted, reference.predict(X)):
        np.testing.assert_array_equal(a, b)
    labels = np.empty(len(y), dtype=object)
    labels[:] = y
    assert model.score(as_objects, labels) == reference.score(X, y)


def test_object_array_of_sequences_of_one_length_is_the_list_form():
    X, y = make_chain_data(20, seed=0)
    same = [x[:3] for x in X if len(x) >= 3]
    labels = [t[:3] for t in y if len(t) >= 3]
    as_objects = np.array(same, dtype=object)  # (numpy makes it 3-D)
    assert as_objects.ndim == 3
    model = StructSVMCuttingPlane().fit(as_objects, labels)
    reference = StructSVMCuttingPlane().fit(same, labels)
    np.testing.assert_array_equal(model.w_, reference.w_)
    for a, b in zip(model.predict(as_objects), reference.predict(same)):
        np.testing.assert_array_equal(a, b)


def test_flat_x_without_lengths_is_multiclass_as_the_readme_says():
    X, y = make_chain_data(20, seed=0)
    flat, labels = np.vstack(X), np.concatenate(y)
    model = M3NSimplicialDecomposition(random_state=0).fit(flat, labels)
    assert model.coef_.shape == (3, flat.shape[1]) and hasattr(model, "intercept_")
    with pytest.raises(ValueError, match="pass lengths="):
        M3NSimplicialDecomposition(ChainStructure()).fit(flat, labels)
    chain = M3NSimplicialDecomposition(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="pass lengths="):
        chain.predict(flat)
    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = " ".join(readme.read_text().split())
    assert re.search(r"without `lengths` or `sequence_ids`, a flat `X` is plain multiclass "
                     r"data", text)
    assert "refuses a flat `X` without them" in text


def test_sequences_in_dok_form_are_sparse_matrices_not_feature_dicts():
    """scipy's DOK matrices are dicts; they are read as the sparse matrices they are."""
    sparse = pytest.importorskip("scipy.sparse")
    X, y = make_chain_data(20, seed=1)
    reference = M3NSimplicialDecomposition(random_state=0).fit(X, y)
    for form in (sparse.dok_matrix, sparse.dok_array):
        model = M3NSimplicialDecomposition(random_state=0).fit([form(x) for x in X], y)
        np.testing.assert_array_equal(model.w_, reference.w_)


def test_stored_zeros_do_not_change_a_fit_and_stay_in_the_users_matrices():
    """Equal matrices give the same bits whether or not zeros are stored (the solvers choose
    their modes from the stored entries); the user's matrices keep theirs."""
    sparse = pytest.importorskip("scipy.sparse")
    from sklstruct import L1M3N, GraphStructure
    from sklstruct.datasets import make_tree_data

    def with_stored_zeros(a):
        rows, cols = np.indices(a.shape).reshape(2, -1)
        return sparse.csr_matrix((a[rows, cols], (rows, cols)), shape=a.shape)

    trees, y = make_tree_data(15, n_nodes=(4, 7), n_states=3, n_features=5, random_state=0)
    plain = [(sparse.csr_matrix((nodes > 0).astype(float)), edges) for nodes, edges in trees]
    zeros = [(with_stored_zeros((nodes > 0).astype(float)), edges) for nodes, edges in trees]
    stored = [m.nnz for m, _ in zeros]
    a = L1M3N(GraphStructure(), C=0.5).fit(plain, y)
    b = L1M3N(GraphStructure(), C=0.5).fit(zeros, y)
    np.testing.assert_array_equal(a.w_, b.w_)
    assert [m.nnz for m, _ in zeros] == stored
    X, labels = make_chain_data(20, seed=2)
    X = [np.where(x > 0, x, 0.0) for x in X]
    a = M3NSimplicialDecomposition(random_state=0).fit([sparse.csr_matrix(x) for x in X],
                                                       labels)
    b = M3NSimplicialDecomposition(random_state=0).fit([with_stored_zeros(x) for x in X],
                                                       labels)
    np.testing.assert_array_equal(a.w_, b.w_)


def test_signed_and_unsigned_integer_labels_stay_integers():
    X, y = make_chain_data(20, seed=3)
    mixed = [t.astype(np.uint64) if i % 2 else t.astype(np.int64) for i, t in enumerate(y)]
    model = StructSVMCuttingPlane().fit(X, mixed)
    assert model.classes_.dtype.kind in "iu"
    np.testing.assert_array_equal(model.classes_, np.unique(np.concatenate(y)))
    big = np.uint64(2**62)
    large = [(t % 2).astype(np.uint64) + big for t in y]
    large[0] = large[0].astype(np.int64)  # (one signed sequence, of values int64 holds)
    model = StructSVMCuttingPlane().fit(X, large)
    assert model.classes_.tolist() == [2**62, 2**62 + 1]
    # score and objective compare labels of the other dtype with classes_ in one integer
    # dtype too (as float64, 2**62 + 1 and 2**62 would be one label)
    unsigned = [t.astype(np.uint64) for t in large]
    assert model.score(X, unsigned) == model.score(X, large)
    assert model.objective(X, unsigned) == model.objective(X, large)
    huge = [(t % 2).astype(np.uint64) + np.uint64(2**63) for t in y]
    huge[0] = -(y[0] % 2).astype(np.int64) - 1  # (no integer dtype holds both)
    with pytest.raises(ValueError, match="no integer dtype holds together"):
        StructSVMCuttingPlane().fit(X, huge)


def test_object_array_of_images_is_the_list_form_and_stacked_arrays_say_what_to_do():
    from sklstruct import GridStructure

    rng = np.random.default_rng(0)
    images = [rng.normal(size=(h, 6, 3)) for h in (5, 6, 5)]
    masks = [(image[:, :, 0] > 0).astype(np.int64) for image in images]
    as_objects = np.empty(len(images), dtype=object)
    as_objects[:] = images
    reference = M3NSimplicialDecomposition(GridStructure(), random_state=0).fit(images, masks)
    model = M3NSimplicialDecomposition(GridStructure(), random_state=0).fit(as_objects, masks)
    np.testing.assert_array_equal(model.w_, reference.w_)
    mask_objects = np.empty(len(masks), dtype=object)
    mask_objects[:] = masks
    model = M3NSimplicialDecomposition(GridStructure(), random_state=0).fit(as_objects,
                                                                           mask_objects)
    np.testing.assert_array_equal(model.w_, reference.w_)
    X, y = make_chain_data(20, seed=0)
    same = np.array([x[:3] for x in X if len(x) >= 3])
    with pytest.raises(ValueError, match=r"list\(X\) for sequences"):
        StructSVMCuttingPlane().fit(same, [t[:3] for t in y if len(t) >= 3])
    with pytest.raises(ValueError, match=r"list\(X\) for images .* \[X\] for one of the "
                                         r"volumes"):
        reference.predict(np.stack([images[0], images[2]]))


def test_sparse_edge_features_are_the_dense_ones():
    sparse = pytest.importorskip("scipy.sparse")
    from sklstruct import GraphStructure

    rng = np.random.default_rng(0)
    graphs, sparse_graphs, y = [], [], []
    for _ in range(12):
        n = int(rng.integers(3, 6))
        edges = np.array([(k, k + 1) for k in range(n - 1)])
        features = (rng.random((n - 1, 2)) > 0.5).astype(float)
        nodes = rng.normal(size=(n, 3))
        graphs.append((nodes, edges, features))
        sparse_graphs.append((nodes, edges, sparse.csr_matrix(features)))
        y.append((nodes[:, 0] > 0).astype(np.int64))
    a = M3NSimplicialDecomposition(GraphStructure(), random_state=0).fit(graphs, y)
    b = M3NSimplicialDecomposition(GraphStructure(), random_state=0).fit(sparse_graphs, y)
    np.testing.assert_array_equal(a.w_, b.w_)
