"""ArcFeatures: McDonald et al.'s first-order templates, row order, vocabulary, errors."""

import numpy as np
import pytest

from sklstruct.parsing import ArcFeatures
from sklstruct.structures import DependencyTree

from ._arc_features_reference import arc_keys

SENTENCES = [
    [{"form": "The", "postag": "DT", "lemma": "the"},
     {"form": "old", "postag": "JJ", "lemma": "old"},
     {"form": "Dog", "postag": "NN", "lemma": "dog"},
     {"form": "barked", "postag": "VBD", "lemma": "bark"},
     {"form": "at", "postag": "IN", "lemma": "at"},
     {"form": "the", "postag": "DT", "lemma": "the"},
     {"form": "cat", "postag": "NN", "lemma": "cat"}],
    [{"form": "Yes", "postag": "UH", "lemma": "yes"}],
    [{"form": "cats", "postag": "NNS", "lemma": "cat"},
     {"form": "sleep", "postag": "VBP", "lemma": "sleep"},
     {"form": "all", "postag": "DT", "lemma": "all"},
     {"form": "day", "postag": "NN", "lemma": "day"},
     {"form": "long", "postag": "RB", "lemma": "long"},
     {"form": "and", "postag": "CC", "lemma": "and"},
     {"form": "purr", "postag": "VBP", "lemma": "purr"},
     {"form": "loudly", "postag": "RB", "lemma": "loudly"},
     {"form": "at", "postag": "IN", "lemma": "at"},
     {"form": "night", "postag": "NN", "lemma": "night"},
     {"form": "yes", "postag": "UH", "lemma": "yes"},
     {"form": "indeed", "postag": "RB", "lemma": "indeed"}],
]
HEADS = [np.array([3, 3, 4, 0, 4, 7, 5]), np.array([0]),
         np.array([2, 0, 4, 2, 2, 2, 2, 7, 7, 9, 2, 11])]


@pytest.mark.parametrize("extra", [(), ("lemma",)])
def test_every_row_holds_the_templates_of_its_arc(extra):
    features = ArcFeatures(extra=extra, features_from="all").fit(SENTENCES)
    matrices = features.transform(SENTENCES)
    vocabulary = features.vocabulary_
    for sentence, X in zip(SENTENCES, matrices):
        n = len(sentence)
        assert X.shape == (n * n, features.n_features_out_)
        for m in range(1, n + 1):
            for h in range(n + 1):
                if h == m:
                    continue
                row = DependencyTree.arc_index([n], np.array([h if k == m else 0 for k in
                                                               range(1, n + 1)]))[m - 1]
                got = set(vocabulary[X[row].indices].tolist())
                assert got == arc_keys(sentence, h, m, extra=extra)
                assert np.all(X[row].data == 1.0)
        assert X.has_canonical_format


def test_gold_features_are_those_of_the_training_arcs():
    features = ArcFeatures(extra=("lemma",)).fit(SENTENCES, HEADS)
    expected = set()
    for sentence, heads in zip(SENTENCES, HEADS):
        for m, h in enumerate(heads, start=1):
            expected |= arc_keys(sentence, int(h), m, extra=("lemma",))
    assert set(features.vocabulary_.tolist()) == expected
    X, n_rows = features.transform_flat(SENTENCES)
    np.testing.assert_array_equal(n_rows, [49, 1, 144])
    gold = DependencyTree.arc_index([7, 1, 12], np.concatenate(HEADS))
    # every gold arc has all its features, other arcs only those seen on gold arcs
    counts = np.diff(X.indptr)
    assert np.all(counts[gold] == [len(arc_keys(s, int(h), m, extra=("lemma",)))
                                   for s, heads in zip(SENTENCES, HEADS)
                                   for m, h in enumerate(heads, start=1)])
    assert counts.sum() < X.shape[0] * counts[gold].max()


def test_columns_do_not_depend_on_the_order_of_the_sentences():
    a = ArcFeatures().fit(SENTENCES, HEADS)
    b = ArcFeatures().fit(SENTENCES[::-1], HEADS[::-1])
    np.testing.assert_array_equal(a.vocabulary_, b.vocabulary_)
    assert (a.transform(SENTENCES)[0] != b.transform(SENTENCES)[0]).nnz == 0


def test_unseen_values_and_empty_sentences_transform():
    features = ArcFeatures().fit(SENTENCES, HEADS)
    X, n_rows = features.transform_flat([[{"form": "zzz", "postag": "QQ"}], []])
    np.testing.assert_array_equal(n_rows, [1, 0])
    assert X.shape == (1, features.n_features_out_)
    matrices = features.transform([[], SENTENCES[1]])
    assert [m.shape[0] for m in matrices] == [0, 1]


def test_lowercase_and_keys():
    upper = [[{"form": "DOG", "tag": "NN"}]]
    lower = [[{"form": "dog", "tag": "NN"}]]
    features = ArcFeatures(tag="tag", features_from="all").fit(lower)
    assert (features.transform(upper)[0] != features.transform(lower)[0]).nnz == 0
    cased = ArcFeatures(tag="tag", lowercase=False, features_from="all").fit(lower)
    assert cased.transform(upper)[0].nnz < cased.transform(lower)[0].nnz


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="token 2 of sentence 0 has no 'postag'"):
        ArcFeatures(features_from="all").fit([[{"form": "a", "postag": "X"}, {"form": "b"}]])
    with pytest.raises(TypeError, match=r"X\[0\]\[0\] \(token 1 of sentence 0\) must be a dict"):
        ArcFeatures(features_from="all").fit([["a", "b"]])
    for value in (float("nan"), 3, None):  # (never turned into a string)
        with pytest.raises(TypeError, match="token 2 of sentence 0: 'form' must be a str"):
            ArcFeatures(features_from="all").fit([[{"form": "a", "postag": "X"},
                                                   {"form": value, "postag": "Y"}]])
    with pytest.raises(TypeError, match="list of sentences"):
        ArcFeatures(features_from="all").fit("a sentence")
    with pytest.raises(ValueError, match="needs the training trees"):
        ArcFeatures().fit(SENTENCES)
    with pytest.raises(ValueError, match="tree 1 of y has 2 heads for a sentence of 1 tokens"):
        ArcFeatures().fit(SENTENCES, [HEADS[0], np.array([0, 1]), HEADS[2]])
    with pytest.raises(ValueError, match="features_from"):
        ArcFeatures(features_from="some").fit(SENTENCES, HEADS)
    with pytest.raises(TypeError, match="extra must be a tuple"):
        ArcFeatures(extra="lemma").fit(SENTENCES, HEADS)


def test_a_failed_fit_leaves_the_last_fits_features(monkeypatch):
    """ArcFeatures set tag_ before the fit's checks: a refit that failed left the last fit's
    vocabulary beside the new tag column, and transformed into other features without an
    error. SpanFeatures set its vocabulary before its columns."""
    from sklstruct.parsing import SpanFeatures

    A = [[{"form": "dogs", "postag": "NNS", "cpostag": "N"},
          {"form": "bark", "postag": "VBP", "cpostag": "V"}]]
    B = [[{"form": "cats", "postag": "_", "cpostag": "N"},
          {"form": "sleep", "postag": "_", "cpostag": "V"}]]
    features = ArcFeatures().fit(A, [np.array([2, 0])])
    before = features.transform_flat(A)[0]
    with pytest.raises(ValueError, match="tree"):
        features.fit(B, [np.array([2, 0]), np.array([1, 0])])
    assert features.tag_ == "postag"
    after = features.transform_flat(A)[0]
    assert (before != after).nnz == 0 and before.shape == after.shape

    spans = SpanFeatures().fit([[("dogs", "NNS"), ("bark", "VBP")]])
    state = dict(vars(spans))

    def interrupted(self, tokens):  # (an interrupt after the vocabulary is built)
        raise KeyboardInterrupt

    monkeypatch.setattr(SpanFeatures, "_raw_rows", interrupted)
    with pytest.raises(KeyboardInterrupt):
        spans.fit([["cats", "sleep"]])  # (untagged: other vocabulary and tagged_)
    assert vars(spans).keys() == state.keys()
    assert spans.vocabulary_ is state["vocabulary_"] and spans.tagged_ is True


def test_gold_arcs_must_form_trees():
    """A token headed by itself (or a cycle) gave arcs of no tree, silently."""
    from sklstruct.datasets import make_dependency_treebank

    treebank = make_dependency_treebank(5, random_state=0)
    heads = [np.asarray(h).copy() for h in treebank.heads]
    heads[2][1] = 2
    with pytest.raises(ValueError, match="sentence 2 are not a tree: token 2 is its own head"):
        ArcFeatures(features_from="gold").fit(treebank.sentences, heads)
    ArcFeatures(features_from="gold").fit(treebank.sentences, treebank.heads)
    # an empty sentence before it: the error still names the caller's position
    with pytest.raises(ValueError, match="sentence 3 are not a tree: token 2 is its own head"):
        ArcFeatures(features_from="gold").fit([[]] + list(treebank.sentences),
                                              [np.zeros(0, dtype=int)] + heads)
