"""Every bad input of DESIGN section 6 gives a clear ValueError/TypeError, never a crash."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklstruct import (ChainStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, MultiClass, StructSVMCuttingPlane)

from ._helpers import make_chain_data

LEARNERS = [StructSVMCuttingPlane, M3NExpGrad, M3NExcessiveGap, L1M3N,
            M3NSimplicialDecomposition]

GOOD_X = [np.ones((3, 2)), np.zeros((2, 2))]
GOOD_Y = [np.array([0, 1, 0]), np.array([1, 1])]


def fit(X, y, learner=StructSVMCuttingPlane, **kw):
    lengths = kw.pop("lengths", None)
    params = {"max_iter": 50, **kw}
    if "sample_weight" in kw:
        sample_weight = params.pop("sample_weight")
        return learner(**params).fit(X, y, lengths=lengths, sample_weight=sample_weight)
    return learner(**params).fit(X, y, lengths=lengths)


@pytest.mark.parametrize(
    "X, y, match",
    [
        ([np.ones((3, 2)), np.ones((2, 3))], GOOD_Y, "same number of features"),
        (GOOD_X, [np.array([0, 1]), np.array([1, 1])], "3 tokens but 2 labels"),
        (GOOD_X, [np.array([0, 1, 0])], "2 sequences but y has 1"),
        ([np.ones((3, 2)), np.ones((0, 2))], [np.array([0, 1, 0]), np.array([])], "empty"),
        ([], [], "at least one sequence"),
        ([np.ones((3, 2)), np.ones((2, 2, 1))], GOOD_Y, "2-D"),
        ([np.array([[1.0, np.nan], [0, 1], [1, 1]]), np.ones((2, 2))], GOOD_Y, "NaN"),
        ([np.array([[1.0, np.inf], [0, 1], [1, 1]]), np.ones((2, 2))], GOOD_Y, "infinity"),
        (GOOD_X, [np.zeros(3), np.zeros(2)], "only one class"),
        ([np.array([["a", "b"]] * 3, dtype=object), np.ones((2, 2))], GOOD_Y,
         "could not convert|numeric"),
        (GOOD_X, [np.array([[0, 1, 0]]), np.array([1, 1])], "1-D"),
        (GOOD_X, np.array([0, 1, 0, 1, 1]), "list of 1-D label arrays"),
        ([sp.csr_matrix(np.ones((3, 2))), sp.csr_matrix(np.ones((2, 3)))], GOOD_Y, "same number"),
        ([np.ones(3), np.ones((2, 2))], GOOD_Y, "sequence 0 has 1 dimension"),
        ([np.ones((3, 2)), np.ones(2)], GOOD_Y, "sequence 1 has 1 dimension"),
        ([[1.0, 2.0], [[1.0, 2.0], [3.0, 4.0]]], [np.array([0]), np.array([0, 1])],
         "sequence 0 has 1 dimension"),
        ([np.ones(2), np.zeros(2)], [np.array([0, 1]), np.array([1, 0])],
         "list of label sequences"),
        ((np.ones((n, 2)) for n in (3, 2)), GOOD_Y, "not generator; pass list"),
    ],
)
@pytest.mark.parametrize("learner", LEARNERS)
def test_bad_sequence_input(X, y, match, learner):
    with pytest.raises((ValueError, TypeError), match=match):
        fit(X, y, learner)


@pytest.mark.parametrize(
    "lengths, match",
    [
        ([3, 3], "does not match"),
        ([5, 0], "at least one token"),
        ([2.5, 2.5], "integers"),
        ([], "non-empty"),
        ([[3, 2]], "1-D"),
    ],
)
def test_bad_lengths(lengths, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fit(np.ones((5, 2)), np.array([0, 1, 0, 1, 1]), lengths=lengths)


def test_a_2d_mask_with_pixel_rows_says_how_to_give_an_image():
    X = [np.ones((6, 2)), np.zeros((6, 2))]
    y = [np.zeros((2, 3), dtype=int), np.ones((2, 3), dtype=int)]
    with pytest.raises(ValueError, match="must be 1-D.*GridStructure\\(width=n_cols\\)"):
        M3NSimplicialDecomposition().fit(X, y)


def test_multiclass_rows_with_a_column_of_labels():
    """A list of feature vectors with one label per element (a column vector) is multiclass
    data, as for scikit-learn's classifiers."""
    X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
    with pytest.warns(Warning, match="column-vector y"):
        model = M3NSimplicialDecomposition(C=10.0).fit(X, [[0], [1], [1], [0]])
    np.testing.assert_array_equal(model.classes_, [0, 1])


def test_lengths_with_list_input():
    with pytest.raises(ValueError, match="lengths"):
        fit(GOOD_X, GOOD_Y, lengths=[3, 2])


@pytest.mark.parametrize("C", [0, -1.0, np.inf * 0])
def test_bad_C(C):
    with pytest.raises(ValueError, match="C"):
        fit(GOOD_X, GOOD_Y, C=C)


@pytest.mark.parametrize("param, value", [("tol", 0), ("max_iter", 0), ("rescale", "both")])
def test_bad_params(param, value):
    with pytest.raises(ValueError, match=param):
        fit(GOOD_X, GOOD_Y, **{param: value})


def test_wrong_feature_count_at_predict():
    model = fit(GOOD_X, GOOD_Y)
    with pytest.raises(ValueError, match="features"):
        model.predict([np.ones((2, 3))])
    with pytest.raises(ValueError, match="features"):
        model.predict(np.ones((4, 3)))


def test_unfitted_predict():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        StructSVMCuttingPlane().predict(GOOD_X)


def test_bad_class_weight():
    with pytest.raises(ValueError, match="class_weight"):
        fit(GOOD_X, GOOD_Y, structure=ChainStructure(class_weight=[1.0, -1.0]))
    with pytest.raises(ValueError, match="class_weight"):
        fit(GOOD_X, GOOD_Y, structure=ChainStructure(class_weight=[1.0, np.nan]))


def test_class_weight_for_a_label_absent_from_the_data_is_ignored():
    """As scikit-learn's classifiers: a fold without the rare label still fits and scores
    when the dict weighs every label of the data."""
    from sklearn.model_selection import KFold, cross_val_score

    X, y = make_chain_data(30, seed=2)
    named = [np.array(["a", "b", "c"])[labels] for labels in y]
    weights = {"a": 2.0, "b": 1.0, "c": 0.5, "rare": 5.0}
    model = fit(X, named, structure=ChainStructure(class_weight=weights))
    np.testing.assert_array_equal(model.structure_.loss_weights_, [2.0, 1.0, 0.5])
    scores = cross_val_score(StructSVMCuttingPlane(ChainStructure(class_weight=weights)),
                             X, named, cv=KFold(3))
    assert np.all(np.isfinite(scores))
    # a partial dict: the labels it leaves out weigh one
    model = fit(X, named, structure=ChainStructure(class_weight={"b": 3.0}))
    np.testing.assert_array_equal(model.structure_.loss_weights_, [1.0, 3.0, 1.0])


@pytest.mark.parametrize("weights", [{"a": 2.0, "rare": 5.0}, {1: 100.0}])
@pytest.mark.parametrize("structure", [ChainStructure, MultiClass])
def test_class_weight_keys_that_are_not_labels_raise(weights, structure):
    """A partial dict with a key that is no label (a typo, an int for str labels) would
    leave the weights at one: an error, as compute_class_weight gives."""
    from sklearn.utils.class_weight import compute_class_weight

    labels = np.array(["a", "b", "c"])
    with pytest.raises(ValueError, match="not in class_weight"):
        compute_class_weight(weights, classes=labels, y=labels)
    if structure is MultiClass:
        X, y = np.random.RandomState(0).randn(30, 4), labels[np.arange(30) % 3]
    else:
        X, y = make_chain_data(30, seed=2)
        y = [labels[sequence] for sequence in y]
    with pytest.raises(ValueError, match="not in class_weight"):
        fit(X, y, structure=structure(class_weight=weights))


def test_unknown_labels_in_objective():
    model = fit(GOOD_X, GOOD_Y)
    with pytest.raises(ValueError, match="not seen"):
        model.objective(GOOD_X, [np.array([0, 1, 5]), np.array([1, 1])])


@pytest.mark.parametrize(
    "weights, match",
    [
        ([1.0, np.nan], "finite"),
        ([1.0, np.inf], "finite"),
        ([1.0, -1.0], "Negative"),
        ([0.0, 0.0], "all zero"),
        ([1.0, 1.0, 1.0], "one weight per sequence"),
        (["a", "b"], "numeric"),
    ],
)
def test_bad_sample_weight(weights, match):
    with pytest.raises(ValueError, match=match):
        fit(GOOD_X, GOOD_Y, sample_weight=weights)


def test_three_d_sequences_are_read_as_images_and_the_error_says_so():
    """A chain given words as (1, n_letters, n_features) arrays: they are images to the input
    reader, and the error says what a sequence is."""
    from sklstruct.datasets import load_ocr_sample

    words = load_ocr_sample()
    X, y = [x[None] for x in words.data[:5]], words.target[:5]
    with pytest.raises(ValueError, match=r"read as images.*a sequence is a 2-D"):
        M3NSimplicialDecomposition(ChainStructure()).fit(X, y)


def test_a_model_of_sequences_refuses_images_and_volumes():
    """A chain fitted on sequences decoded a list of images as chains over their pixels,
    row after row (transitions across the row ends), and returned masks; the grid,
    multiclass and graph models already refused input of another form."""
    X, y = make_chain_data(n_sequences=10, n_features=3, seed=5)
    model = M3NSimplicialDecomposition(random_state=0).fit(X, y)
    rng = np.random.default_rng(0)
    for other, form in (([rng.normal(size=(4, 5, 3))], "images"),
                        ([rng.normal(size=(2, 4, 5, 3))], "volumes")):
        for method in (model.predict, model.predict_proba):
            with pytest.raises(ValueError, match=f"fitted on sequences or samples, not {form}"):
                method(other)
    # a chain fitted on images explicitly keeps decoding them
    images = [rng.normal(size=(4, 5, 3)) for _ in range(6)]
    masks = [(image[..., 0] > 0).astype(int) for image in images]
    chain = M3NSimplicialDecomposition(ChainStructure(), random_state=0).fit(images, masks)
    assert chain.predict(images[:1])[0].shape == (4, 5)
