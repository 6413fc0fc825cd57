import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator
from sklearn.model_selection import GridSearchCV, KFold, cross_validate

from sklstruct.metrics import (
    chunk_f1_score,
    chunk_f1_scorer,
    chunk_precision_recall_fscore,
    sequence_accuracy,
    token_accuracy,
    token_accuracy_scorer,
)

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_HOME = os.path.join(PROJECT_ROOT, "..", "shared", "data")


# --------------------------------------------------------------------------
# token and sequence accuracy


def test_token_accuracy_list_and_flat():
    y_true = [["a", "b", "c"], ["a"], np.array(["b", "b"])]
    y_pred = [np.array(["a", "c", "c"]), ["b"], ["b", "b"]]
    assert token_accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    flat_true = np.concatenate([np.asarray(y) for y in y_true])
    flat_pred = np.concatenate([np.asarray(y) for y in y_pred])
    assert token_accuracy(flat_true, flat_pred) == pytest.approx(4 / 6)
    assert token_accuracy(list(flat_true), list(flat_pred)) == pytest.approx(4 / 6)
    assert token_accuracy([1, 2, 3, 4], np.array([1, 2, 0, 0])) == 0.5


def test_sequence_accuracy():
    y_true = [["a", "b", "c"], ["a"], ["b", "b"], []]
    y_pred = [["a", "c", "c"], ["a"], ["b", "b"], []]
    assert sequence_accuracy(y_true, y_pred) == 0.75
    flat_true = ["a", "b", "c", "a", "b", "b"]
    flat_pred = ["a", "c", "c", "a", "b", "b"]
    assert sequence_accuracy(flat_true, flat_pred, lengths=[3, 1, 2]) == pytest.approx(
        2 / 3
    )
    assert sequence_accuracy(flat_true, flat_pred, lengths=[1, 2, 1, 2]) == 0.75
    with pytest.raises(ValueError, match="list of sequences"):
        sequence_accuracy(flat_true, flat_pred)


@pytest.mark.parametrize(
    "metric", [token_accuracy, sequence_accuracy, chunk_precision_recall_fscore]
)
def test_mismatched_inputs(metric):
    with pytest.raises(ValueError, match="2 sequences but y_pred has 1"):
        metric([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="Sequence 1 has 2 labels in y_true but 1"):
        metric([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="both be lists of sequences"):
        metric([["O", "O"]], ["O", "O"])
    with pytest.raises(ValueError, match="3 labels but y_pred has 2"):
        metric(np.array(["O", "O", "O"]), np.array(["O", "O"]))
    with pytest.raises(TypeError, match="mixes sequences and single labels"):
        metric([["O"], "O"], [["O"], ["O"]])
    with pytest.raises(ValueError, match="1-D"):
        metric([np.array([["O"]])], [np.array([["O"]])])
    with pytest.raises(TypeError):
        metric(None, None)


def test_empty_inputs():
    with pytest.raises(ValueError, match="at least one token"):
        token_accuracy([], [])
    with pytest.raises(ValueError, match="at least one sequence"):
        sequence_accuracy([], [], lengths=[])
    assert chunk_precision_recall_fscore([], []) == (0.0, 0.0, 0.0)


def test_bad_lengths():
    y = ["B-NP", "I-NP", "O"]
    with pytest.raises(ValueError, match="lengths sum to 2"):
        chunk_f1_score(y, y, lengths=[1, 1])
    with pytest.raises(ValueError, match="non-negative integers"):
        chunk_f1_score(y, y, lengths=[4, -1])
    with pytest.raises(ValueError, match="non-negative integers"):
        chunk_f1_score(y, y, lengths=[1.5, 1.5])
    with pytest.raises(ValueError, match="only be given with flat"):
        chunk_f1_score([y], [y], lengths=[3])


# --------------------------------------------------------------------------
# chunk scores: hand-computed examples


@pytest.mark.parametrize(
    "y_true, y_pred, expected",
    [
        # identical IOB2 chunks
        ([["B-NP", "I-NP", "O", "B-VP"]], [["B-NP", "I-NP", "O", "B-VP"]], (1, 1, 1)),
        # IOB1: I- starts a chunk, B- only separates two adjacent chunks
        ([["I-NP", "I-NP", "B-NP", "O"]], [["B-NP", "I-NP", "B-NP", "O"]], (1, 1, 1)),
        # IOB1 read as one chunk of 3 versus two chunks: nothing matches
        ([["I-NP", "I-NP", "B-NP"]], [["I-NP", "I-NP", "I-NP"]], (0, 0, 0)),
        # type change I-NP -> I-VP ends a chunk and starts another
        ([["I-NP", "I-VP"]], [["B-NP", "B-VP"]], (1, 1, 1)),
        ([["I-NP", "I-VP"]], [["B-NP", "I-NP"]], (0, 0, 0)),
        # I- after O starts a chunk, like B- after O
        ([["O", "B-NP", "I-NP"]], [["O", "I-NP", "I-NP"]], (1, 1, 1)),
        # a chunk that ends one token early is wrong; the other one counts
        ([["B-NP", "I-NP", "I-NP", "B-VP"]], [["B-NP", "I-NP", "O", "B-VP"]],
         (1 / 2, 1 / 2, 1 / 2)),
        # a wrong type is wrong even with the right span
        ([["B-NP", "I-NP", "B-PP"]], [["B-VP", "I-VP", "B-PP"]], (1 / 2, 1 / 2, 1 / 2)),
        # no predicted chunks: precision 0 (not a division error)
        ([["B-NP", "O"]], [["O", "O"]], (0, 0, 0)),
        # no chunks at all
        ([["O", "O"]], [["O", "O"]], (0, 0, 0)),
        # a chunk running to the end of the sequence
        ([["O", "B-NP", "I-NP"], ["B-VP"]], [["O", "B-NP", "I-NP"], ["O"]],
         (1, 1 / 2, 2 / 3)),
    ],
)
def test_chunk_scores_hand_examples(y_true, y_pred, expected):
    precision, recall, f1 = chunk_precision_recall_fscore(y_true, y_pred)
    assert (precision, recall, f1) == pytest.approx(expected)
    assert chunk_f1_score(y_true, y_pred) == pytest.approx(expected[2])


def test_chunk_scores_worked_example():
    # true chunks: NP[0:2] VP[2] NP[3] | PP[0] NP[1:3]            -> 5 chunks
    # predicted:   NP[0:2] VP[2:4]     | PP[0] NP[1] NP[2]       -> 5 chunks
    # correct:     NP[0:2], PP[0]                                 -> 2
    y_true = [["B-NP", "I-NP", "B-VP", "B-NP"], ["B-PP", "B-NP", "I-NP"]]
    y_pred = [["B-NP", "I-NP", "B-VP", "I-VP"], ["B-PP", "B-NP", "B-NP"]]
    assert chunk_precision_recall_fscore(y_true, y_pred) == pytest.approx(
        (2 / 5, 2 / 5, 2 / 5)
    )
    # with one predicted chunk fewer (VP[2:4] -> O O) precision rises
    y_pred[0][2:] = ["O", "O"]
    assert chunk_precision_recall_fscore(y_true, y_pred) == pytest.approx(
        (2 / 4, 2 / 5, 4 / 9)
    )


def test_chunks_stop_at_sequence_boundaries():
    y_true = [["B-NP", "I-NP"], ["I-NP", "O"]]
    y_pred = [["B-NP", "I-NP"], ["B-NP", "O"]]
    # per sequence: NP[0:2] | NP[0] in both -> perfect
    assert chunk_precision_recall_fscore(y_true, y_pred) == (1.0, 1.0, 1.0)
    flat_true, flat_pred = np.concatenate(y_true), np.concatenate(y_pred)
    assert chunk_precision_recall_fscore(flat_true, flat_pred, lengths=[2, 2]) == (
        1.0,
        1.0,
        1.0,
    )
    # as one sequence the true tags hold a single chunk NP[0:3], the
    # predicted ones NP[0:2] and NP[2]: nothing matches
    assert chunk_precision_recall_fscore(flat_true, flat_pred) == (0.0, 0.0, 0.0)


def test_chunk_types_with_hyphens_and_non_string_labels():
    y_true = [["B-PER-NAME", "I-PER-NAME", "B-PER"]]
    y_pred = [["B-PER-NAME", "I-PER-NAME", "I-PER-NAME"]]
    assert chunk_precision_recall_fscore(y_true, y_pred) == pytest.approx((0, 0, 0))
    person = [["B-PER-NAME", "I-PER-NAME"]]
    assert chunk_f1_score(person, person) == 1.0
    # labels without a prefix/type split are one-token chunks of type ""
    assert chunk_precision_recall_fscore([[1, 0, 0]], [[1, 0, 1]]) == pytest.approx(
        (0, 0, 0)
    )


def _spans(tags):
    """(type, start, end) of the chunks of B/I/O tags under IOB1/IOB2 rules."""
    spans, start, current = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, chunk_type = tag.partition("-")
        continues = prefix == "I" and current == chunk_type
        if current is not None and not continues:
            spans.add((current, start, i))
            current = None
        if prefix in ("B", "I") and not continues:
            start, current = i, chunk_type
    return spans


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["O", "B-NP", "I-NP", "B-VP", "I-VP"]),
                st.sampled_from(["O", "B-NP", "I-NP", "B-VP", "I-VP"]),
            ),
            min_size=0,
            max_size=8,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_chunk_scores_match_span_sets(pairs):
    y_true = [[t for t, _ in seq] for seq in pairs]
    y_pred = [[p for _, p in seq] for seq in pairs]
    true_spans = [_spans(seq) for seq in y_true]
    pred_spans = [_spans(seq) for seq in y_pred]
    n_true = sum(len(s) for s in true_spans)
    n_pred = sum(len(s) for s in pred_spans)
    n_correct = sum(len(t & p) for t, p in zip(true_spans, pred_spans))
    precision, recall, f1 = chunk_precision_recall_fscore(y_true, y_pred)
    assert precision == pytest.approx(n_correct / n_pred if n_pred else 0.0)
    assert recall == pytest.approx(n_correct / n_true if n_true else 0.0)
    lengths = [len(seq) for seq in y_true]
    flat = chunk_precision_recall_fscore(
        sum(y_true, []), sum(y_pred, []), lengths=lengths
    )
    assert flat == pytest.approx((precision, recall, f1))


@pytest.mark.skipif(not os.path.isdir(DATA_HOME), reason="benchmark data not found")
def test_chunk_scores_on_conll2000_test():
    from sklstruct.datasets import load_conll2000

    y_true = load_conll2000(DATA_HOME, subset="test").target
    assert chunk_precision_recall_fscore(y_true, y_true) == (1.0, 1.0, 1.0)
    # Drop every NP chunk: conlleval counts 23,852 phrases in this test set,
    # 12,422 of them NP, and every remaining predicted chunk is correct.
    y_pred = [np.where(np.char.endswith(y, "-NP"), "O", y) for y in y_true]
    precision, recall, f1 = chunk_precision_recall_fscore(y_true, y_pred)
    assert precision == 1.0
    assert recall == pytest.approx((23852 - 12422) / 23852)
    assert token_accuracy(y_true, y_pred) == pytest.approx(1 - (12422 + 14376) / 47377)


# --------------------------------------------------------------------------
# scorers in model selection


class MostFrequentTag(BaseEstimator):
    """Predict, for each word, the tag it most often had in training."""

    def __init__(self, lowercase=False, default="O"):
        self.lowercase = lowercase
        self.default = default

    def _key(self, word):
        return word.lower() if self.lowercase else word

    def fit(self, X, y):
        counts = {}
        for words, tags in zip(X, y):
            for word, tag in zip(words, tags):
                counts.setdefault(self._key(word), Counter())[tag] += 1
        self.tag_of_ = {w: c.most_common(1)[0][0] for w, c in counts.items()}
        return self

    def predict(self, X):
        return [
            np.array([self.tag_of_.get(self._key(w), self.default) for w in words])
            for words in X
        ]


def _toy_chunking_data(n_sentences=30, seed=0):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_sentences):
        words, tags = [], []
        for _ in range(rng.integers(1, 4)):
            # random letter case, so that many spellings are unseen in training
            noun = "".join(
                c.upper() if rng.random() < 0.5 else c
                for c in rng.choice(["cat", "dog", "bird"])
            )
            words += ["the", noun, rng.choice(["runs", "sleeps"])]
            tags += ["B-NP", "I-NP", "B-VP"]
            if rng.random() < 0.5:
                words.append(".")
                tags.append("O")
        X.append(words)
        y.append(np.array(tags))
    return X, y


def _manual_scores(estimator, X, y, cv, metric):
    scores = []
    for train, test in cv.split(X):
        fitted = estimator.fit([X[i] for i in train], [y[i] for i in train])
        y_pred = fitted.predict([X[i] for i in test])
        scores.append(metric([y[i] for i in test], y_pred))
    return np.array(scores)


def test_scorers_in_grid_search():
    X, y = _toy_chunking_data()
    cv = KFold(n_splits=3, shuffle=True, random_state=0)
    search = GridSearchCV(
        MostFrequentTag(),
        {"lowercase": [False, True], "default": ["O", "B-NP"]},
        scoring={"f1": chunk_f1_scorer, "accuracy": token_accuracy_scorer},
        refit="f1",
        cv=cv,
    )
    search.fit(X, y)
    results = search.cv_results_
    for i, params in enumerate(results["params"]):
        estimator = MostFrequentTag(**params)
        f1 = _manual_scores(estimator, X, y, cv, chunk_f1_score)
        accuracy = _manual_scores(estimator, X, y, cv, token_accuracy)
        for k in range(3):
            assert results[f"split{k}_test_f1"][i] == pytest.approx(f1[k])
            assert results[f"split{k}_test_accuracy"][i] == pytest.approx(accuracy[k])
    assert search.best_params_["lowercase"] is True
    assert search.best_score_ == pytest.approx(1.0)
    assert results["mean_test_f1"].min() < 1.0


def test_scorers_in_cross_validate():
    X, y = _toy_chunking_data(seed=1)
    cv = KFold(n_splits=4)
    estimator = MostFrequentTag()
    scores = cross_validate(
        estimator,
        X,
        y,
        cv=cv,
        scoring={"f1": chunk_f1_scorer, "accuracy": token_accuracy_scorer},
    )
    np.testing.assert_allclose(
        scores["test_f1"], _manual_scores(estimator, X, y, cv, chunk_f1_score)
    )
    np.testing.assert_allclose(
        scores["test_accuracy"], _manual_scores(estimator, X, y, cv, token_accuracy)
    )
    assert np.all(scores["test_f1"] < 1.0)
