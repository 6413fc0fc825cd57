import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction import DictVectorizer

from sklstruct.preprocessing import SequenceVectorizer, window_features

X_TOY = [
    [{"word": "the", "len": 3}, {"word": "cat", "len": 3, "title": False}],
    [{"word": "Sat", "title": True}],
    [{"word": "on"}, {"word": "the", "len": 3.5}, {"word": "mat"}],
]


def _dense(matrices):
    return [m.toarray() for m in matrices]


def test_fit_transform_one_csr_per_sequence():
    vec = SequenceVectorizer()
    Xt = vec.fit_transform(X_TOY)
    assert [m.shape for m in Xt] == [(2, 7), (1, 7), (3, 7)]
    assert all(sp.issparse(m) and m.format == "csr" for m in Xt)
    assert all(m.dtype == np.float64 for m in Xt)
    names = ["len", "title", "word=Sat", "word=cat", "word=mat", "word=on", "word=the"]
    assert vec.feature_names_ == names
    assert vec.get_feature_names_out().tolist() == names
    assert vec.vocabulary_ == {name: i for i, name in enumerate(names)}
    expected_first = [[3, 0, 0, 0, 0, 0, 1], [3, 0, 0, 1, 0, 0, 0]]
    np.testing.assert_array_equal(Xt[0].toarray(), expected_first)
    np.testing.assert_array_equal(Xt[1].toarray(), [[0, 1, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(Xt[2].toarray()[1], [3.5, 0, 0, 0, 0, 0, 1])


def test_matches_dict_vectorizer_and_fit_then_transform():
    vec = SequenceVectorizer()
    Xt = vec.fit_transform(X_TOY)
    tokens = [token for seq in X_TOY for token in seq]
    reference = DictVectorizer().fit_transform(tokens)
    np.testing.assert_array_equal(sp.vstack(Xt).toarray(), reference.toarray())

    refitted = SequenceVectorizer().fit(X_TOY)
    for a, b in zip(refitted.transform(X_TOY), Xt):
        np.testing.assert_array_equal(a.toarray(), b.toarray())
    # a later sequence's rows do not leak into an earlier matrix
    single = vec.transform([X_TOY[2]])[0]
    np.testing.assert_array_equal(single.toarray(), Xt[2].toarray())


def test_transform_ignores_unknown_features():
    vec = SequenceVectorizer().fit(X_TOY)
    Xt = vec.transform([[{"word": "dog", "colour": "red"}, {"word": "cat", "n": 2}]])
    assert Xt[0].shape == (2, 7)
    np.testing.assert_array_equal(Xt[0].toarray()[0], np.zeros(7))
    np.testing.assert_array_equal(Xt[0].toarray()[1], [0, 0, 0, 1, 0, 0, 0])


def test_parameters():
    vec = SequenceVectorizer(dtype=np.float32, separator="|", sort=False)
    Xt = vec.fit_transform(X_TOY)
    assert all(m.dtype == np.float32 for m in Xt)
    assert vec.feature_names_[:3] == ["word|the", "len", "word|cat"]
    np.testing.assert_array_equal(Xt[0].toarray()[0, :3], [1, 3, 0])


def test_clone_get_params_and_pickle():
    vec = SequenceVectorizer(separator=":", sort=False)
    assert vec.get_params() == {"dtype": np.float64, "separator": ":", "sort": False}
    vec.set_params(sort=True)
    assert vec.sort is True
    cloned = clone(vec)
    assert cloned.get_params() == vec.get_params()
    assert not hasattr(cloned, "vocabulary_")

    vec.fit(X_TOY)
    restored = pickle.loads(pickle.dumps(vec))
    for a, b in zip(restored.transform(X_TOY), vec.transform(X_TOY)):
        np.testing.assert_array_equal(a.toarray(), b.toarray())


def test_not_fitted():
    with pytest.raises(NotFittedError):
        SequenceVectorizer().transform(X_TOY)
    with pytest.raises(NotFittedError):
        SequenceVectorizer().get_feature_names_out()


@pytest.mark.parametrize("method", ["fit", "fit_transform", "transform"])
def test_bad_input(method):
    vec = SequenceVectorizer().fit(X_TOY)
    call = getattr(vec, method)
    with pytest.raises(ValueError, match="at least one sequence"):
        call([])
    if method == "transform":  # prediction: an empty sequence gives an empty matrix
        width = len(vec.feature_names_)
        assert [m.shape for m in call([[{"a": 1}], []])] == [(1, width), (0, width)]
    else:
        with pytest.raises(ValueError, match=r"X\[1\] is an empty sequence"):
            call([[{"a": 1}], []])
    for bad in ({"a": 1}, "abc", np.zeros((2, 2)), None):
        with pytest.raises(TypeError, match="X must be a list of sequences"):
            call(bad)
    with pytest.raises(TypeError, match=r"X\[0\] must be a list of dicts"):
        call([{"a": 1}])
    with pytest.raises(TypeError, match="Every token must be a dict"):
        call([[{"a": 1}, "b"]])


def test_bad_parameter():
    with pytest.raises(ValueError, match="sort"):
        SequenceVectorizer(sort="yes").fit(X_TOY)


# --------------------------------------------------------------------------
# window_features


WORDS = ["He", "reckons", "the", "2", "USA"]
POS = ["PRP", "VBZ", "DT", "CD", "NNP"]


def test_window_features_middle_token():
    feats = window_features(WORDS, POS)
    assert len(feats) == 5
    assert feats[2] == {
        "bias": 1.0,
        "word.lower": "the",
        "word[-2:]": "he",
        "word[-3:]": "the",
        "pos": "DT",
        "pos[:2]": "DT",
        "-2:word.lower": "he",
        "-2:pos": "PRP",
        "-1:word.lower": "reckons",
        "-1:pos": "VBZ",
        "+1:word.lower": "2",
        "+1:pos": "CD",
        "+2:word.lower": "usa",
        "+2:pos": "NNP",
        "pos[-1]|pos[0]": "VBZ|DT",
        "pos[0]|pos[+1]": "DT|CD",
    }


def test_window_features_boundaries_and_shape_flags():
    feats = window_features(WORDS, POS)
    first, last = feats[0], feats[-1]
    assert first["BOS"] is True and "EOS" not in first
    assert last["EOS"] is True and "BOS" not in last
    assert first["word.istitle"] is True and "word.isupper" not in first
    assert "pos[-1]|pos[0]" not in first and "-1:pos" not in first
    assert "pos[0]|pos[+1]" not in last and "+1:word.lower" not in last
    assert feats[1]["-1:word.lower"] == "he" and "-2:word.lower" not in feats[1]
    assert feats[3]["word.isdigit"] is True
    assert last["word.isupper"] is True and "word.istitle" not in last
    single = window_features(["Hi"], ["UH"])
    assert single[0]["BOS"] is True and single[0]["EOS"] is True


def test_window_features_options():
    no_pos = window_features(WORDS)
    assert not any("pos" in key for token in no_pos for key in token)
    assert no_pos[2]["+2:word.lower"] == "usa"

    narrow = window_features(WORDS, POS, window=0)
    assert not any(key[0] in "+-" for token in narrow for key in token)
    assert narrow[2]["pos[-1]|pos[0]"] == "VBZ|DT"

    wide = window_features(WORDS, POS, window=4)
    assert wide[0]["+4:word.lower"] == "usa"
    assert "+5:word.lower" not in wide[0]

    assert window_features([], []) == []
    assert window_features(tuple(WORDS), np.array(POS).tolist()) == window_features(
        WORDS, POS
    )


def test_window_features_bad_input():
    with pytest.raises(ValueError, match="same length"):
        window_features(WORDS, POS[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        window_features(WORDS, window=-1)
    with pytest.raises(TypeError, match="window"):
        window_features(WORDS, window=1.5)
    with pytest.raises(TypeError, match="words"):
        window_features("He reckons")
    with pytest.raises(TypeError, match="words"):
        window_features(["He", 3])
    with pytest.raises(TypeError, match="pos"):
        window_features(WORDS, "PRP")


def test_window_features_with_vectorizer():
    sentences = [(WORDS, POS), (["the", "USA"], ["DT", "NNP"])]
    X = [window_features(words, pos) for words, pos in sentences]
    vec = SequenceVectorizer()
    Xt = vec.fit_transform(X)
    assert [m.shape[0] for m in Xt] == [5, 2]
    names = vec.get_feature_names_out().tolist()
    column = names.index("word.lower=usa")
    np.testing.assert_array_equal(Xt[1].toarray()[:, column], [0, 1])
    np.testing.assert_array_equal(Xt[0].toarray()[:, names.index("bias")], np.ones(5))


def test_transformers_of_sequences_and_parts_ignore_pandas_output():
    """Their outputs (sparse rows of tokens or parts, with lengths) have no table form:
    ``set_output`` is not offered, and the global ``transform_output="pandas"`` of many
    notebooks left make_sequence_pipeline unable to fit (a pandas length mismatch)."""
    import sklearn

    from sklstruct import M3NSimplicialDecomposition
    from sklstruct.parsing import ArcFeatures, SpanFeatures
    from sklstruct.pipeline import make_sequence_pipeline
    from sklstruct.preprocessing import HashingSequenceVectorizer, SequenceVectorizer

    for transformer in (SequenceVectorizer(), HashingSequenceVectorizer(), ArcFeatures(),
                        SpanFeatures()):
        assert not hasattr(transformer, "set_output")
    X = [[{"w": "the"}, {"w": "cat"}], [{"w": "sat"}], [{"w": "a"}, {"w": "dog"}]]
    y = [["B", "I"], ["O"], ["B", "I"]]
    expected = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0)).fit(X, y).predict(X)
    with sklearn.config_context(transform_output="pandas"):
        predicted = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0)).fit(X, y)\
            .predict(X)
    assert [list(p) for p in predicted] == [list(p) for p in expected]


def test_a_pickle_does_not_keep_the_feature_names_once_read():
    """The names are a cache formed again from the columns after loading."""
    X = [[{"word": f"w{i}", "suffix": f"s{i % 7}", "length": i % 5} for i in range(j, j + 30)]
         for j in range(0, 3000, 30)]
    vec = SequenceVectorizer().fit(X)
    before = len(pickle.dumps(vec))
    names = list(vec.feature_names_)
    assert len(pickle.dumps(vec)) == before
    restored = pickle.loads(pickle.dumps(vec))
    assert restored.feature_names_ == names
    assert list(restored.get_feature_names_out()) == [str(name) for name in names]


def test_an_unfitted_sequence_pipeline_names_itself_in_every_method():
    from sklstruct import StructSVMCuttingPlane
    from sklstruct.pipeline import make_sequence_pipeline

    pipeline = make_sequence_pipeline(StructSVMCuttingPlane())
    X, y = [[{"w": "a"}, {"w": "b"}]], [["x", "y"]]
    calls = {"predict": (X,), "predict_proba": (X,), "predict_marginals": (X,),
             "predict_topk": (X,), "sequence_confidence": (X,), "score": (X, y),
             "calibrate_temperature": (X, y)}
    for name, args in calls.items():
        with pytest.raises(NotFittedError, match="This SequencePipeline instance"):
            getattr(pipeline, name)(*args)
