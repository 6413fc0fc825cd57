import os
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator
from sklearn.metrics import classification_report
from sklearn.model_selection import GridSearchCV, KFold, cross_validate

from sklstruct.metrics import (
    chunk_f1_score,
    chunk_f1_scorer,
    chunk_precision_recall_fscore,
    sequence_accuracy,
    sequence_classification_report,
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


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
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
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
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


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
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
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
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

    y_true = load_conll2000(DATA_HOME, subset="test", download_if_missing=False).target
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


# --------------------------------------------------------------------------
# sequence_classification_report against a conlleval reference


def _conlleval_tag(field):
    """conlleval's split of a tag field into prefix and type."""
    match = re.match(r"^([^-]*)-(.*)$", field)
    prefix, chunk_type = (match.group(1), match.group(2)) if match else (field, "")
    # Perl's truth test: "" and "0" are false
    return prefix, chunk_type if chunk_type not in ("", "0") else ""


_CONLLEVAL_ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"),
                   ("E", "E"), ("E", "I"), ("E", "O")}
_CONLLEVAL_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"),
                     ("E", "E"), ("E", "I"), ("O", "E")}


def _conlleval_end(prev_tag, tag, prev_type, chunk_type):
    return ((prev_tag, tag) in _CONLLEVAL_ENDS
            or (prev_tag != "O" and prev_tag != "." and prev_type != chunk_type)
            or prev_tag in ("[", "]"))


def _conlleval_start(prev_tag, tag, prev_type, chunk_type):
    return ((prev_tag, tag) in _CONLLEVAL_STARTS
            or (tag != "O" and tag != "." and prev_type != chunk_type)
            or tag in ("[", "]"))


def _conlleval(y_true, y_pred):
    """conlleval run on its input format: "word correct guessed" lines and blank lines.

    Returns conlleval's figures: ``{type: (precision, recall, FB1, found_correct)}``
    in percent per chunk type, and the overall (precision, recall, FB1).
    """
    lines = []
    for seq_true, seq_pred in zip(y_true, y_pred):
        lines += [f"w {t} {p}" for t, p in zip(seq_true, seq_pred)]
        lines.append("")
    correct_chunk, found_correct, found_guessed = Counter(), Counter(), Counter()
    in_correct = False
    last_correct, last_correct_type = "O", ""
    last_guessed, last_guessed_type = "O", ""
    for line in lines:
        features = line.split(" ") if line else []
        if not features or features[0] == "-X-":
            features = ["-X-", "O", "O"]
        guessed, guessed_type = _conlleval_tag(features[-1])
        correct, correct_type = _conlleval_tag(features[-2])
        if features[0] == "-X-":
            guessed = "O"
        end_correct = _conlleval_end(last_correct, correct, last_correct_type, correct_type)
        end_guessed = _conlleval_end(last_guessed, guessed, last_guessed_type, guessed_type)
        start_correct = _conlleval_start(last_correct, correct, last_correct_type,
                                         correct_type)
        start_guessed = _conlleval_start(last_guessed, guessed, last_guessed_type,
                                         guessed_type)
        if in_correct:
            if end_correct and end_guessed and last_guessed_type == last_correct_type:
                in_correct = False
                correct_chunk[last_correct_type] += 1
            elif end_correct != end_guessed or guessed_type != correct_type:
                in_correct = False
        if start_correct and start_guessed and guessed_type == correct_type:
            in_correct = True
        if start_correct:
            found_correct[correct_type] += 1
        if start_guessed:
            found_guessed[guessed_type] += 1
        last_correct, last_correct_type = correct, correct_type
        last_guessed, last_guessed_type = guessed, guessed_type
    if in_correct:
        correct_chunk[last_correct_type] += 1

    def figures(correct, n_correct, n_guessed):
        precision = 100 * correct / n_guessed if n_guessed else 0.0
        recall = 100 * correct / n_correct if n_correct else 0.0
        fb1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, fb1

    per_type = {
        t: (*figures(correct_chunk[t], found_correct[t], found_guessed[t]), found_correct[t])
        for t in sorted(set(found_correct) | set(found_guessed))
    }
    overall = figures(sum(correct_chunk.values()), sum(found_correct.values()),
                      sum(found_guessed.values()))
    return per_type, overall


def _assert_report_is_conlleval(y_true, y_pred):
    per_type, overall = _conlleval(y_true, y_pred)
    report = sequence_classification_report(y_true, y_pred, output_dict=True)
    assert list(report) == list(per_type) + ["micro avg", "macro avg", "weighted avg"]
    for chunk_type, (precision, recall, fb1, support) in per_type.items():
        row = report[chunk_type]
        assert 100 * row["precision"] == pytest.approx(precision, rel=1e-12, abs=1e-12)
        assert 100 * row["recall"] == pytest.approx(recall, rel=1e-12, abs=1e-12)
        assert 100 * row["f1-score"] == pytest.approx(fb1, rel=1e-12, abs=1e-12)
        assert row["support"] == support
    micro = report["micro avg"]
    assert [100 * micro[k] for k in ("precision", "recall", "f1-score")] == pytest.approx(
        overall, rel=1e-12, abs=1e-12)
    assert micro["support"] == sum(row[3] for row in per_type.values())
    assert chunk_precision_recall_fscore(y_true, y_pred) == pytest.approx(
        [micro["precision"], micro["recall"], micro["f1-score"]], rel=1e-12, abs=1e-12)
    return per_type, overall


def _random_tags(rng, tags, n_sequences=60, max_length=12):
    return [list(rng.choice(tags, size=rng.integers(0, max_length + 1)))
            for _ in range(n_sequences)]


def _corrupt(rng, y, tags, rate):
    """Replace each tag of ``y`` by a random one with probability ``rate``."""
    return [[str(rng.choice(tags)) if rng.random() < rate else tag for tag in seq]
            for seq in y]


IOB_TAGS = ["O", "B-NP", "I-NP", "B-VP", "I-VP", "B-PP", "I-PP"]
ODD_TAGS = IOB_TAGS + ["E-NP", "S-VP", "E-PP", "B", "I", "[", "]", ".", "B-0", "I-0",
                       "B-PER-NAME", "I-PER-NAME"]


@pytest.mark.parametrize("tags", [IOB_TAGS, ODD_TAGS], ids=["iob", "odd-tags"])
@pytest.mark.parametrize("seed", range(5))
def test_report_matches_conlleval_on_random_tags(tags, seed):
    rng = np.random.default_rng(seed)
    y_true = _random_tags(rng, tags)
    # independent guesses, and guesses close to the truth (many correct chunks)
    _assert_report_is_conlleval(y_true, [list(rng.choice(tags, size=len(seq)))
                                         for seq in y_true])
    per_type, _ = _assert_report_is_conlleval(y_true, _corrupt(rng, y_true, tags, 0.15))
    assert any(100 > p > 0 for p, *_ in per_type.values())


def _pos_baseline(train, test):
    """The CoNLL-2000 baseline: each token gets the chunk tag most frequent for its POS."""
    counts = {}
    for pos, tags in zip(train.pos, train.target):
        for p, tag in zip(pos, tags):
            counts.setdefault(p, Counter())[tag] += 1
    best = {p: c.most_common(1)[0][0] for p, c in counts.items()}
    return [np.array([best.get(p, "O") for p in pos]) for pos in test.pos]


@pytest.mark.skipif(not os.path.isdir(DATA_HOME),
                    reason="../shared/data (CoNLL-2000) not found")
def test_report_matches_conlleval_on_conll2000_test():
    from sklstruct.datasets import load_conll2000

    train = load_conll2000(DATA_HOME, subset="train", download_if_missing=False)
    test = load_conll2000(DATA_HOME, subset="test", download_if_missing=False)
    y_pred = _pos_baseline(train, test)
    per_type, overall = _assert_report_is_conlleval(test.target, y_pred)
    # conlleval's figures for this baseline in the shared-task overview
    # (Tjong Kim Sang and Buchholz 2000): precision 72.58%, recall 82.14%
    assert np.round(overall, 2).tolist() == [72.58, 82.14, 77.07]
    assert per_type["NP"][3] == 12422
    assert sum(row[3] for row in per_type.values()) == 23852
    rng = np.random.default_rng(0)
    tags = sorted({tag for seq in test.target for tag in seq})
    _assert_report_is_conlleval(test.target, _corrupt(rng, test.target, tags, 0.1))


def test_report_averages_and_labels():
    y_true = [["B-NP", "I-NP", "B-VP", "B-NP"], ["B-PP", "B-NP", "O"]]
    y_pred = [["B-NP", "I-NP", "B-VP", "I-VP"], ["B-PP", "B-NP", "O"]]
    report = sequence_classification_report(y_true, y_pred, output_dict=True)
    # NP: 2 of 3 found, 2 guessed; PP: 1 of 1; VP: the guess VP[2:4] is wrong
    assert report["NP"] == pytest.approx(
        {"precision": 1.0, "recall": 2 / 3, "f1-score": 0.8, "support": 3})
    assert report["VP"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 1}
    assert report["micro avg"] == pytest.approx(
        {"precision": 3 / 4, "recall": 3 / 5, "f1-score": 2 / 3, "support": 5})
    assert report["macro avg"] == pytest.approx(
        {"precision": 2 / 3, "recall": 5 / 9, "f1-score": 0.6, "support": 5})
    assert report["weighted avg"] == pytest.approx(
        {"precision": 0.8, "recall": 0.6, "f1-score": 0.68, "support": 5})
    assert isinstance(report["NP"]["support"], int)
    # labels choose and order the rows; the averages cover those rows only
    subset = sequence_classification_report(y_true, y_pred, labels=["VP", "NP", "ADJP"],
                                            output_dict=True)
    assert list(subset) == ["VP", "NP", "ADJP", "micro avg", "macro avg", "weighted avg"]
    assert subset["ADJP"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0,
                              "support": 0}
    assert subset["micro avg"] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 4, "f1-score": 4 / 7, "support": 4})
    assert subset["macro avg"]["recall"] == pytest.approx((0 + 2 / 3 + 0) / 3)
    assert subset["weighted avg"]["recall"] == pytest.approx(2 / 4)
    # flat labels with lengths give the same report
    flat = sequence_classification_report(
        sum(y_true, []), sum(y_pred, []), lengths=[4, 3], output_dict=True)
    assert flat == report


def test_report_text():
    y_true = [["B-NP", "I-NP", "O", "B-PER-NAME"]]
    y_pred = [["B-NP", "I-NP", "O", "B-NP"]]
    text = sequence_classification_report(y_true, y_pred, digits=3)
    lines = text.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    assert lines[1] == ""
    assert lines[2].split() == ["NP", "0.500", "1.000", "0.667", "1"]
    assert lines[3].split() == ["PER-NAME", "0.000", "0.000", "0.000", "1"]
    assert lines[4] == ""
    assert lines[5].split() == ["micro", "avg", "0.500", "0.500", "0.500", "2"]
    assert [line.split()[:2] for line in lines[6:]] == [["macro", "avg"],
                                                       ["weighted", "avg"]]
    # the columns line up, names right-aligned as in scikit-learn
    assert len({len(line) for line in lines if line}) == 1
    assert text.endswith("\n")
    # no chunks at all: only the averages, all zero
    empty = sequence_classification_report([["O", "O"]], [["O", "O"]], output_dict=True)
    assert list(empty) == ["micro avg", "macro avg", "weighted avg"]
    assert all(row == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 0}
               for row in empty.values())
    assert sequence_classification_report([], []).splitlines()[2].split()[:2] == [
        "micro", "avg"]


def test_token_report_is_sklearns_on_flat_labels():
    rng = np.random.default_rng(0)
    y_true = _random_tags(rng, IOB_TAGS, n_sequences=20)
    y_pred = _corrupt(rng, y_true, IOB_TAGS, 0.3)
    flat_true, flat_pred = sum(y_true, []), sum(y_pred, [])
    lengths = [len(seq) for seq in y_true]
    for labels in (None, ["B-NP", "I-NP", "O"]):
        for output_dict in (False, True):
            expected = classification_report(flat_true, flat_pred, labels=labels, digits=3,
                                              output_dict=output_dict, zero_division=0)
            for args, kwargs in [((y_true, y_pred), {}),
                                 ((flat_true, flat_pred), {"lengths": lengths}),
                                 ((np.array(flat_true), np.array(flat_pred)), {})]:
                assert sequence_classification_report(
                    *args, scheme="token", labels=labels, digits=3,
                    output_dict=output_dict, **kwargs) == expected
    assert sequence_classification_report([[1, 2], [2]], [[1, 1], [2]], scheme="token",
                                          output_dict=True)["1"]["precision"] == 0.5


def test_report_errors():
    y = [["B-NP", "O"]]
    with pytest.raises(ValueError, match='scheme must be "chunk" or "token"'):
        sequence_classification_report(y, y, scheme="span")
    with pytest.raises(ValueError, match="at least one chunk type"):
        sequence_classification_report(y, y, labels=[])
    with pytest.raises(ValueError, match="at least one token"):
        sequence_classification_report([[]], [[]], scheme="token")
    with pytest.raises(ValueError, match="Sequence 0 has 2 labels in y_true but 1"):
        sequence_classification_report(y, [["O"]])
    with pytest.raises(ValueError, match="lengths sum to 3"):
        sequence_classification_report(["O", "O"], ["O", "O"], lengths=[3],
                                       scheme="token")


def test_chunk_open_at_the_end_of_the_input_is_closed_as_conlleval_does():
    """Tags whose prefix conlleval does not know leave a chunk open at the end of the input;
    conlleval counts it there (1.0 for a sequence scored against itself)."""
    assert chunk_precision_recall_fscore([["B", "."]], [["B", "."]]) == (1.0, 1.0, 1.0)
    assert chunk_precision_recall_fscore([["O", "B", "L"]], [["O", "B", "L"]]) == \
        (1.0, 1.0, 1.0)
    # IOBES read with conlleval's semantics: S-PER S-PER is one chunk, the same as B-PER I-PER
    # and not two single-token chunks
    assert chunk_precision_recall_fscore([["S-PER", "S-PER"]], [["B-PER", "I-PER"]]) == \
        (1.0, 1.0, 1.0)
    assert chunk_precision_recall_fscore([["S-PER", "S-PER"]], [["B-PER", "B-PER"]]) == \
        (0.0, 0.0, 0.0)
    # a chunk open in only one of the two columns is not correct
    assert chunk_precision_recall_fscore([["B", "I"]], [["B", "L"]]) == (0.0, 0.0, 0.0)


def test_weighted_metrics_equal_the_repeated_sequences():
    """Integer sequence weights (or the same weights per token) count a sequence as many
    times: chunk F1 and token accuracy equal those of the repeated sequences."""
    y_true = [["B-NP", "I-NP", "O"], ["B-VP", "O"], ["B-NP", "B-NP"], ["O"]]
    y_pred = [["B-NP", "I-NP", "O"], ["B-NP", "O"], ["B-NP", "O"], ["B-NP"]]
    weights = [2, 1, 3, 0]
    rep_true = [s for s, k in zip(y_true, weights) for _ in range(k)]
    rep_pred = [s for s, k in zip(y_pred, weights) for _ in range(k)]
    per_token = np.repeat(weights, [len(s) for s in y_true])
    for w in (weights, per_token):
        assert chunk_f1_score(y_true, y_pred, sample_weight=w) == pytest.approx(
            chunk_f1_score(rep_true, rep_pred), rel=1e-15)
        assert token_accuracy(y_true, y_pred, sample_weight=w) == pytest.approx(
            token_accuracy(rep_true, rep_pred), rel=1e-15)
    assert chunk_f1_score(y_true, y_pred, sample_weight=[1, 1, 1, 1]) == \
        chunk_f1_score(y_true, y_pred)


def test_sequence_scorers_take_fits_weights_in_a_search():
    """scikit-learn's searches hand fit's sample_weight to a scorer whose call takes it: each
    split's score is the weighted token accuracy of a weighted fit by hand (it was the
    unweighted one, with a warning). A scorer whose metric takes no weights says so."""
    import warnings

    from sklearn.model_selection import GridSearchCV, KFold

    from sklstruct import M3NSimplicialDecomposition
    from sklstruct.metrics import SequenceScorer, token_accuracy_scorer

    from ._helpers import make_chain_data

    X, y = make_chain_data(n_sequences=30, seed=2)
    weights = np.arange(30) % 4 + 0.5
    folds = KFold(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "does not support sample_weight" warning)
        search = GridSearchCV(M3NSimplicialDecomposition(random_state=0), {"C": [0.1]},
                              cv=folds, scoring=token_accuracy_scorer).fit(
            X, y, sample_weight=weights)
    for k, (train, test) in enumerate(folds.split(X)):
        model = M3NSimplicialDecomposition(random_state=0, C=0.1).fit(
            [X[i] for i in train], [y[i] for i in train], sample_weight=weights[train])
        assert search.cv_results_[f"split{k}_test_score"][0] == model.score(
            [X[i] for i in test], [y[i] for i in test], sample_weight=weights[test])
    plain = SequenceScorer(lambda y_true, y_pred: 1.0)
    assert not plain._accept_sample_weight()
    with pytest.raises(TypeError, match="takes no sample_weight"):
        plain(model, X, y, sample_weight=weights)


def test_weights_of_flat_input_with_empty_sequences():
    """Per-token weights beside an empty last sequence indexed past the tokens (IndexError),
    and a scorer turned per-sequence weights into per-token ones that the metric then read
    per sequence (as many tokens as sequences): 0.667 where the weighted F1 is 0.286."""
    from sklstruct.metrics import SequenceScorer

    y_true = np.array(["B-NP", "I-NP", "O", "B-VP"], dtype=object)
    y_pred = np.array(["B-NP", "I-NP", "O", "O"], dtype=object)
    pieces = lambda y: [y[:3], y[3:], y[:0]]  # noqa: E731
    expected = chunk_f1_score(pieces(y_true), pieces(y_pred), sample_weight=[1, 2, 0])
    assert expected == pytest.approx(0.5)
    assert chunk_f1_score(y_true, y_pred, lengths=[3, 1, 0],
                          sample_weight=[1, 1, 1, 2]) == expected

    class Fixed(BaseEstimator):  # predicts y_pred whatever the input
        def predict(self, X, lengths=None):
            return y_pred

    X = np.zeros((4, 1))
    scorer = SequenceScorer(chunk_f1_score)
    assert scorer(Fixed(), X, y_true, lengths=[3, 1, 0], sample_weight=[1, 2, 5]) == expected
    assert scorer(Fixed(), X, y_true, lengths=[3, 1, 0, 0],
                  sample_weight=[1, 5, 1, 1]) == pytest.approx(
        chunk_f1_score(pieces(y_true)[:2], pieces(y_pred)[:2], sample_weight=[1, 5]))
    token_scorer = SequenceScorer(token_accuracy)
    assert token_scorer(Fixed(), X, y_true, lengths=[3, 1, 0, 0],
                        sample_weight=[1, 5, 1, 1]) == pytest.approx(3 / 8)

    # a metric of one's own that takes lengths gets the weights per token, as before
    def weighted_accuracy(y_true, y_pred, *, lengths=None, sample_weight=None):
        return float(np.average(np.asarray(y_true) == np.asarray(y_pred),
                                weights=sample_weight))

    own = SequenceScorer(weighted_accuracy)
    assert own(Fixed(), X, y_true, lengths=[3, 1], sample_weight=[1, 1, 1, 3]) == 0.5


def test_bytes_tags_are_read_as_text():
    """Tags of dtype "S" (as HDF5 or np.loadtxt give them) were split as "b'B" and "NP'"."""
    y_true = [np.array([b"B-NP", b"I-NP", b"O", b"B-VP"])]
    y_pred = [np.array([b"B-NP", b"B-NP", b"O", b"B-VP"])]
    as_text = [[tag.decode() for tag in y] for y in y_true], \
        [[tag.decode() for tag in y] for y in y_pred]
    assert chunk_precision_recall_fscore(y_true, y_pred) == \
        chunk_precision_recall_fscore(*as_text)
    report = sequence_classification_report(y_true, y_pred, output_dict=True)
    assert set(report) >= {"NP", "VP"} and "NP'" not in report
    named = sequence_classification_report(y_true, y_pred, labels=[b"NP"], output_dict=True)
    assert named["NP"] == report["NP"]
    with pytest.raises(ValueError, match="not UTF-8"):
        chunk_f1_score([np.array([b"B-\xff"])], [np.array([b"O"])])


def test_label_arrays_of_two_dimensions_and_nested_sequences():
    """A 2-D array of labels holds equal-length sequences, one per row, whatever its dtype
    (str arrays were refused where object arrays were read so); a column is refused, and a
    sequence that nests sequences gets a message of its own."""
    y_true = np.array([["B-NP", "I-NP", "O"], ["O", "B-VP", "O"]])
    y_pred = np.array([["B-NP", "I-NP", "O"], ["O", "O", "O"]])
    expected = chunk_f1_score(list(y_true), list(y_pred))
    assert chunk_f1_score(y_true, y_pred) == expected
    assert chunk_f1_score(y_true.astype(object), y_pred.astype(object)) == expected
    assert sequence_accuracy(y_true, y_pred) == 0.5
    with pytest.raises(ValueError, match="column"):
        token_accuracy(y_true[:, :1], y_pred[:, :1])
    with pytest.raises(ValueError, match=r"y_true\[0\] .* nests sequences"):
        chunk_f1_score([["B-NP", ["O"]]], [["B-NP", "O"]])


def test_chunks_of_weight_zero_only_leave_the_figures_undefined():
    from sklearn.exceptions import UndefinedMetricWarning

    y = [["B-NP", "I-NP"], ["O", "O"]]
    with pytest.warns(UndefinedMetricWarning, match="weight 0"):
        assert chunk_precision_recall_fscore(y, y, sample_weight=[0, 1]) == (0.0, 0.0, 0.0)
