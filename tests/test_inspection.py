import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from sklstruct import ChainStructure, M3NExcessiveGap, MultiClass, StructSVMCuttingPlane
from sklstruct.inspection import (
    LabelledTable,
    format_state_features,
    start_end_table,
    state_features,
    transition_table,
)
from sklstruct.preprocessing import SequenceVectorizer, window_features

from ._helpers import make_chain_data


@pytest.fixture(scope="module")
def chain_model():
    X, y = make_chain_data(n_sequences=40, n_states=4, n_features=12, seed=1)
    labels = np.array(["ADJ", "NOUN", "O", "VERB"])
    return StructSVMCuttingPlane(C=1.0).fit(X, [labels[seq] for seq in y])


def _sentences():
    return [
        (["The", "cat", "sat", "on", "the", "mat"], ["DT", "NN", "VBD", "IN", "DT", "NN"],
         ["B-NP", "I-NP", "B-VP", "B-PP", "B-NP", "I-NP"]),
        (["A", "dog", "ran"], ["DT", "NN", "VBD"], ["B-NP", "I-NP", "B-VP"]),
        (["Dogs", "bark", "."], ["NNS", "VBP", "."], ["B-NP", "B-VP", "O"]),
        (["He", "saw", "a", "bird"], ["PRP", "VBD", "DT", "NN"],
         ["B-NP", "B-VP", "B-NP", "I-NP"]),
    ]


@pytest.fixture(scope="module")
def pipeline():
    sentences = _sentences()
    X = [window_features(words, pos, window=1) for words, pos, _ in sentences]
    y = [tags for _, _, tags in sentences]
    return make_pipeline(SequenceVectorizer(), StructSVMCuttingPlane(C=10.0)).fit(X, y)


def _expected_top(weights, names, top):
    positive = [j for j in np.argsort(-weights, kind="stable") if weights[j] > 0][:top]
    negative = [j for j in np.argsort(weights, kind="stable") if weights[j] < 0][:top]
    return ([(names[j], weights[j]) for j in positive],
            [(names[j], weights[j]) for j in negative])


@pytest.mark.parametrize("top", [1, 3, None])
def test_top_features_follow_coef(chain_model, top):
    coef = chain_model.coef_
    names = [f"x{j}" for j in range(coef.shape[1])]
    features = state_features(chain_model, top=top)
    assert list(features) == chain_model.classes_.tolist()
    for k, label in enumerate(chain_model.classes_):
        positive, negative = _expected_top(coef[k], names, top)
        assert features[label]["positive"] == positive
        assert features[label]["negative"] == negative
        if top is None:
            assert len(positive) + len(negative) == np.count_nonzero(coef[k])
        else:
            assert len(positive) == min(top, np.sum(coef[k] > 0))
        assert all(isinstance(weight, float) for _, weight in positive + negative)
    # names given as a list
    letters = [f"f{chr(ord('a') + j)}" for j in range(coef.shape[1])]
    named = state_features(chain_model, letters, top=top)
    for label in features:
        assert [w for _, w in named[label]["positive"]] == [
            w for _, w in features[label]["positive"]]
        assert [letters[int(n[1:])] for n, _ in features[label]["negative"]] == [
            n for n, _ in named[label]["negative"]]


def test_names_from_pipeline(pipeline):
    vectorizer, model = pipeline[0], pipeline[-1]
    names = vectorizer.get_feature_names_out()
    features = state_features(pipeline, top=5)
    assert features == state_features(model, vectorizer, top=5)
    assert features == state_features(model, names, top=5)
    for k, label in enumerate(model.classes_):
        positive, negative = _expected_top(model.coef_[k], names, 5)
        assert features[label] == {"positive": positive, "negative": negative}
    # the determiners' features push towards B-NP
    assert "pos=DT" in [name for name, _ in state_features(pipeline)["B-NP"]["positive"]]


def test_format_state_features(pipeline):
    features = state_features(pipeline, top=2)
    text = format_state_features(features)
    lines = text.splitlines()
    assert lines[0] == "B-NP"
    assert lines[1] == "  Top positive:"
    name, weight = features["B-NP"]["positive"][0]
    assert lines[2].split() == [f"{weight:+.3f}", name]
    assert text.count("Top negative:") == len(features)
    empty = format_state_features({"O": {"positive": [], "negative": [("x0", -1.0)]}})
    assert empty == "O\n  Top positive:\n    (none)\n  Top negative:\n    -1.000  x0"


def test_multiclass_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)]
    model = StructSVMCuttingPlane(MultiClass(), C=1.0).fit(X, y)
    features = state_features(model, top=1)
    assert list(features) == ["a", "b", "c"]
    assert [features[c]["positive"][0][0] for c in "abc"] == ["x0", "x1", "x2"]
    # two classes: one row of coef_ (class 1's weights against class 0) or one per class
    binary = StructSVMCuttingPlane(MultiClass(), C=1.0).fit(X, y == "a")
    features = state_features(binary, top=None)
    labels = binary.classes_.tolist()[-binary.coef_.shape[0]:]
    assert list(features) == labels
    for label, weights in zip(labels, binary.coef_):
        assert features[label]["positive"] == _expected_top(
            weights, [f"x{j}" for j in range(5)], None)[0]


def test_transition_table_without_pandas(chain_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    table = transition_table(chain_model)
    assert isinstance(table, LabelledTable)
    assert table.index.tolist() == table.columns.tolist() == chain_model.classes_.tolist()
    np.testing.assert_array_equal(table.values, chain_model.transition_)
    # a copy: editing the table leaves the model alone
    table.values[0, 0] += 1.0
    assert table.values[0, 0] != chain_model.transition_[0, 0]
    lines = str(table).splitlines()
    assert lines[0].split() == ["from", "\\", "to"] + chain_model.classes_.tolist()
    assert lines[2].split()[0] == "NOUN"
    assert float(lines[2].split()[3]) == pytest.approx(chain_model.transition_[1, 2],
                                                       abs=5e-4)
    assert repr(table) == str(table)

    biases = start_end_table(chain_model)
    structure = chain_model.structure_
    _, start, end = structure.pairwise_parameters(structure.split_weights(chain_model.w_)[1])
    assert biases.index.tolist() == chain_model.classes_.tolist()
    assert biases.columns.tolist() == ["start", "end"]
    np.testing.assert_array_equal(biases.values, np.column_stack([start, end]))
    assert str(biases).splitlines()[0].split() == ["label", "start", "end"]


def test_tables_with_pandas(chain_model):
    pd = pytest.importorskip("pandas")
    table = transition_table(chain_model)
    assert isinstance(table, pd.DataFrame)
    assert table.index.name == "from" and table.columns.name == "to"
    np.testing.assert_array_equal(table.to_numpy(), chain_model.transition_)
    assert table.loc["NOUN", "O"] == chain_model.transition_[1, 2]
    biases = start_end_table(chain_model)
    assert biases.columns.tolist() == ["start", "end"]


def test_tables_from_pipeline(pipeline):
    model = pipeline[-1]
    table = transition_table(pipeline)
    assert table.index.tolist() == model.classes_.tolist()
    np.testing.assert_array_equal(table.values, model.transition_)
    assert start_end_table(pipeline).values.shape == (model.classes_.shape[0], 2)


def test_labelled_table_checks_its_shape():
    with pytest.raises(ValueError, match=r"shape \(2, 2\) but there are 2 row and 3 column"):
        LabelledTable(np.eye(2), ["a", "b"], ["x", "y", "z"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_errors(chain_model, pipeline):
    for function in (state_features, transition_table, start_end_table):
        with pytest.raises(NotFittedError):
            function(StructSVMCuttingPlane())
        with pytest.raises(NotFittedError, match="This Pipeline instance"):
            function(make_pipeline(SequenceVectorizer(), StructSVMCuttingPlane()))
        with pytest.raises(TypeError, match="needs a sklstruct estimator or a Pipeline"):
            function(LogisticRegression().fit([[0.0], [1.0]], [0, 1]))
    multiclass = StructSVMCuttingPlane(MultiClass()).fit(np.eye(3), [0, 1, 2])
    for function in (transition_table, start_end_table):
        with pytest.raises(ValueError, match="needs a chain model; this "
                                             "StructSVMCuttingPlane was fitted with the "
                                             "structure MultiClass"):
            function(multiclass)
    X, y = make_chain_data(n_sequences=10, seed=2)
    no_biases = StructSVMCuttingPlane(ChainStructure(start_end=False)).fit(X, y)
    assert transition_table(no_biases).values.shape == (3, 3)
    with pytest.raises(ValueError, match="start_end=False"):
        start_end_table(no_biases)
    for kernel_model in (StructSVMCuttingPlane(kernel="rbf", n_basis=5, random_state=0),
                         M3NExcessiveGap(kernel="rbf", max_iter=5)):
        kernel_model.fit(X, y)
        with pytest.raises(ValueError, match="needs a linear model"):
            state_features(kernel_model)
        assert transition_table(kernel_model).values.shape == (3, 3)
    with pytest.raises(ValueError, match="3 feature names but StructSVMCuttingPlane has 12"):
        state_features(chain_model, ["a", "b", "c"])
    with pytest.raises(ValueError, match="feature names but"):
        state_features(pipeline[-1], SequenceVectorizer().fit([[{"a": 1}]]))
    for top in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="top must be a positive int or None"):
            state_features(chain_model, top=top)
