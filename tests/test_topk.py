"""Top-k decoding and sequence confidence against enumeration of every labelling."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sklstruct import M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct._inference.chain import (
    forward_backward,
    log_partition,
    topk_viterbi,
    viterbi,
)
from sklstruct.structures import GridStructure

from ._chain_reference import sequence_scores
from ._enumeration import all_labelings
from ._helpers import make_chain_data


def predict_topk(model, X, k=5, lengths=None):
    return model.predict_topk(X, k, lengths=lengths)


def sequence_confidence(model, X, lengths=None):
    return model.sequence_confidence(X, lengths=lengths)


def _random_chain(rng, n_states, lengths, integer, with_start, with_end):
    """Potentials of a batch; integer-valued ones (in -2..2) make exact ties common."""
    n_tokens = int(np.sum(lengths))

    def draw(*shape):
        if integer:
            return rng.integers(-2, 3, size=shape).astype(np.float64)
        return rng.normal(size=shape)

    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return (draw(n_tokens, n_states), offsets, draw(n_states, n_states),
            draw(n_states) if with_start else None, draw(n_states) if with_end else None)


def _ranked_labellings(unary, transition, start, end):
    """Every labelling of one sequence with its score, in the documented order: decreasing
    score, ties by the labels read from the last token back to the first."""
    length, n_states = unary.shape
    labellings = all_labelings(n_states, length)
    start = np.zeros(n_states) if start is None else start
    end = np.zeros(n_states) if end is None else end
    scores = np.array([
        unary[np.arange(length), y].sum() + transition[y[:-1], y[1:]].sum() + start[y[0]]
        + end[y[-1]] for y in labellings])
    # np.lexsort: the last key is the primary one
    order = np.lexsort(tuple(labellings.T) + (-scores,))
    return labellings[order], scores[order]


CASES = [(seed, n_states, integer) for seed in range(6) for n_states in (1, 2, 3)
         for integer in (True, False)]


@pytest.mark.parametrize("k", range(1, 11))
@pytest.mark.parametrize("seed, n_states, integer", CASES)
def test_topk_equals_enumeration(k, seed, n_states, integer):
    rng = np.random.default_rng(1000 * seed + 10 * n_states + k)
    lengths = rng.integers(1, 6 if n_states < 3 else 5, size=4)
    lengths[0] = 1
    unary, offsets, transition, start, end = _random_chain(
        rng, n_states, lengths, integer, seed % 2 == 0, seed % 3 == 0)
    labels, scores, counts = topk_viterbi(unary, offsets, transition, start, end, k=k)
    assert labels.shape == (offsets[-1], k) and scores.shape == (len(lengths), k)
    for i, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        expected, expected_scores = _ranked_labellings(unary[lo:hi], transition, start, end)
        count = min(k, len(expected))
        assert counts[i] == count
        np.testing.assert_array_equal(labels[lo:hi, :count].T, expected[:count])
        if integer:  # sums of small integers: no rounding, the scores are exact
            np.testing.assert_array_equal(scores[i, :count], expected_scores[:count])
        else:
            np.testing.assert_allclose(scores[i, :count], expected_scores[:count],
                                       rtol=0, atol=1e-12)
        # fewer labellings than k: padding
        assert np.all(labels[lo:hi, count:] == -1)
        assert np.all(scores[i, count:] == -np.inf)


def test_all_ties_come_in_reverse_lexicographic_order():
    # every labelling scores 0: the order is that of the labels read from the end
    labels, scores, counts = topk_viterbi(np.zeros((3, 2)), [0, 3], np.zeros((2, 2)), k=10)
    assert counts.tolist() == [8]
    expected = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1],
                [1, 1, 1]]
    np.testing.assert_array_equal(labels[:, :8].T, expected)
    np.testing.assert_array_equal(scores[0], [0.0] * 8 + [-np.inf] * 2)


@pytest.mark.parametrize("integer", [True, False])
def test_first_labelling_is_viterbi_and_scores_are_path_scores(integer):
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 40, size=60)
    unary, offsets, transition, start, end = _random_chain(rng, 7, lengths, integer, True,
                                                           True)
    best, best_scores = viterbi(unary, offsets, transition, start, end)
    for k in (1, 2, 5, 13):
        labels, scores, counts = topk_viterbi(unary, offsets, transition, start, end, k=k)
        np.testing.assert_array_equal(labels[:, 0], best)
        np.testing.assert_array_equal(scores[:, 0], best_scores)
        for j in range(k):
            present = counts > j
            rows = np.repeat(present, lengths)
            sub_offsets = np.concatenate(([0], np.cumsum(lengths[present])))
            np.testing.assert_allclose(
                scores[present, j],
                sequence_scores(unary[rows], sub_offsets, transition, start, end,
                                labels[rows, j]), rtol=1e-12, atol=1e-9)
        # non-increasing scores, distinct labellings
        for i, (lo, hi, count) in enumerate(zip(offsets[:-1], offsets[1:], counts)):
            assert np.all(np.diff(scores[i, :count]) <= 0)
            assert len({tuple(column) for column in labels[lo:hi, :count].T}) == count


def test_long_sequence_and_many_labellings():
    rng = np.random.default_rng(0)
    unary, offsets, transition, start, end = _random_chain(rng, 5, [3000, 1, 2000], True,
                                                           True, True)
    best, best_scores = viterbi(unary, offsets, transition, start, end)
    labels, scores, counts = topk_viterbi(unary, offsets, transition, start, end, k=200)
    assert counts.tolist() == [200, 5, 200]
    np.testing.assert_array_equal(labels[:, 0], best)
    np.testing.assert_array_equal(scores[:, 0], best_scores)
    assert np.all(np.diff(scores[[0, 2]], axis=1) <= 0)


def test_n_jobs_does_not_change_the_result():
    rng = np.random.default_rng(1)
    chain = _random_chain(rng, 4, rng.integers(1, 30, size=50), True, True, False)
    serial = topk_viterbi(*chain, k=6)
    threaded = topk_viterbi(*chain, k=6, n_jobs=3)
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(log_partition(*chain), log_partition(*chain, n_jobs=3))


@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_log_partition_equals_enumeration_and_forward_backward(scale):
    rng = np.random.default_rng(2)
    lengths = [1, 2, 4, 5]
    unary, offsets, transition, start, end = _random_chain(rng, 3, lengths, False, True,
                                                           True)
    unary, transition, start, end = (scale * a for a in (unary, transition, start, end))
    log_z = log_partition(unary, offsets, transition, start, end)
    for i, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        _, scores = _ranked_labellings(unary[lo:hi], transition, start, end)
        peak = scores.max()
        assert log_z[i] == pytest.approx(peak + np.log(np.exp(scores - peak).sum()),
                                         rel=1e-12, abs=1e-9)
    np.testing.assert_allclose(log_z, forward_backward(unary, offsets, transition, start,
                                                       end)[2], rtol=1e-13)


def test_empty_batch():
    labels, scores, counts = topk_viterbi(np.zeros((0, 3)), [0], np.zeros((3, 3)), k=4)
    assert labels.shape == (0, 4) and scores.shape == (0, 4) and counts.shape == (0,)
    assert log_partition(np.zeros((0, 3)), [0], np.zeros((3, 3))).shape == (0,)


GOOD = dict(unary=np.zeros((3, 2)), offsets=[0, 1, 3], transition=np.zeros((2, 2)))


@pytest.mark.parametrize("change, error, match", [
    (dict(k=0), ValueError, "at least 1"),
    (dict(k=-3), ValueError, "at least 1"),
    (dict(k=2.5), TypeError, "positive integer"),
    (dict(k="3"), TypeError, "positive integer"),
    (dict(k=True), TypeError, "positive integer"),
    (dict(k=None), TypeError, "positive integer"),
    (dict(k=2**31), ValueError, "below 2\\*\\*31"),
    (dict(unary=np.zeros((3, 3))), ValueError, "transition must have shape"),
    (dict(unary=np.zeros(3)), ValueError, "2-D"),
    (dict(unary=np.array([[0.0, np.nan], [0, 0], [0, 0]])), ValueError, "NaN"),
    (dict(unary=np.array([[0.0, np.inf], [0, 0], [0, 0]])), ValueError, "infinite"),
    (dict(transition=np.zeros((2, 3))), ValueError, "transition must have shape"),
    (dict(start=np.zeros(3)), ValueError, "one entry per state"),
    (dict(end=[0.0, np.nan]), ValueError, "NaN"),
    (dict(offsets=[0, 1, 1, 3]), ValueError, "empty"),
    (dict(offsets=[0, 2]), ValueError, "end at the number of tokens"),
    (dict(offsets=[1, 3]), ValueError, "start at 0"),
    (dict(offsets=[0.0, 3.0]), TypeError, "integers"),
    (dict(unary=np.array([["a", "b"]] * 3)), TypeError, "real numbers"),
])
def test_bad_input_raises(change, error, match):
    arguments = dict(GOOD, k=2)
    arguments.update(change)
    with pytest.raises(error, match=match):
        topk_viterbi(**arguments)
    if "k" not in change:
        with pytest.raises(error, match=match):
            log_partition(**{name: value for name, value in arguments.items()
                             if name != "k"})


# ---------------------------------------------------------------- through a fitted estimator
def _model_scores(model, X, labellings):
    """``w . Psi(x, y)`` of labellings of one sequence, from the fitted parameters."""
    transition, start, end = model.structure_.pairwise_parameters(
        model.structure_.split_weights(model.w_)[1])
    unary = X @ model.coef_.T
    index = np.searchsorted(model.classes_, labellings)
    lengths = [labellings.shape[1]] * labellings.shape[0]
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return sequence_scores(np.tile(unary, (len(lengths), 1)), offsets, transition, start, end,
                           index.ravel())


@pytest.fixture(scope="module")
def chain_model():
    X, y = make_chain_data(n_sequences=25, n_states=3, max_length=5, seed=4)
    names = np.array(["DET", "NOUN", "VERB"])
    y = [names[labels] for labels in y]
    return StructSVMCuttingPlane(C=1).fit(X, y), X


def test_predict_topk_of_a_fitted_chain(chain_model):
    model, X = chain_model
    labels, scores = predict_topk(model, X, k=10)
    assert len(labels) == len(scores) == len(X)
    for x, ranked, ranked_scores, predicted in zip(X, labels, scores, model.predict(X)):
        count = min(10, 3 ** x.shape[0])
        assert ranked.shape == (count, x.shape[0]) and ranked_scores.shape == (count,)
        assert ranked.dtype == model.classes_.dtype
        np.testing.assert_array_equal(ranked[0], predicted)
        np.testing.assert_allclose(ranked_scores, _model_scores(model, x, ranked),
                                   rtol=1e-12, atol=1e-10)
        # the k best of all labellings
        every = model.classes_[all_labelings(3, x.shape[0])]
        best = np.sort(_model_scores(model, x, every))[::-1][:count]
        np.testing.assert_allclose(ranked_scores, best, rtol=1e-12, atol=1e-10)
    # flat input with lengths gives the same lists
    lengths = [x.shape[0] for x in X]
    flat_labels, flat_scores = predict_topk(model, np.vstack(X), k=10, lengths=lengths)
    for a, b in zip(flat_labels + flat_scores, labels + scores):
        np.testing.assert_array_equal(a, b)


def test_predict_topk_with_empty_sequences(chain_model):
    model, X = chain_model
    empty = np.zeros((0, X[0].shape[1]))
    labels, scores = predict_topk(model, [X[0], empty, X[1]], k=3)
    assert labels[1].shape == (1, 0) and scores[1].tolist() == [0.0]
    full_labels, full_scores = predict_topk(model, X[:2], k=3)
    np.testing.assert_array_equal(labels[0], full_labels[0])
    np.testing.assert_array_equal(labels[2], full_labels[1])
    np.testing.assert_array_equal(scores[2], full_scores[1])
    labels, scores = predict_topk(model, [empty, empty], k=3)
    assert [a.shape for a in labels] == [(1, 0), (1, 0)]
    confidence = sequence_confidence(model, [empty, X[0], empty])
    assert confidence[0] == confidence[2] == 1.0
    assert confidence[1] == sequence_confidence(model, [X[0]])[0]
    np.testing.assert_array_equal(sequence_confidence(model, [empty]), [1.0])


def test_sequence_confidence_equals_enumeration(chain_model):
    model, X = chain_model
    confidence = sequence_confidence(model, X)
    assert confidence.shape == (len(X),)
    for x, value, predicted in zip(X, confidence, model.predict(X)):
        every = model.classes_[all_labelings(3, x.shape[0])]
        scores = _model_scores(model, x, every)
        predicted_score = _model_scores(model, x, predicted[None, :])[0]
        expected = np.exp(predicted_score - scores.max()) / np.exp(scores - scores.max()).sum()
        assert value == pytest.approx(expected, rel=1e-10)
        assert 0 < value <= 1
    lengths = [x.shape[0] for x in X]
    np.testing.assert_array_equal(sequence_confidence(model, np.vstack(X), lengths=lengths),
                                  confidence)
    # at a calibrated temperature T: the distribution exp(score / T) / Z_T
    model.temperature_ = 0.5
    for x, value, predicted in zip(X, sequence_confidence(model, X), model.predict(X)):
        scores = _model_scores(model, x, model.classes_[all_labelings(3, x.shape[0])]) / 0.5
        predicted_score = _model_scores(model, x, predicted[None, :])[0] / 0.5
        expected = np.exp(predicted_score - scores.max()) / np.exp(scores - scores.max()).sum()
        assert value == pytest.approx(expected, rel=1e-10)
    model.temperature_ = 1.0


def test_multiclass_is_a_chain_of_one_token():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.array(["a", "b", "c", "d"])[np.argmax(X @ rng.normal(size=(4, 4)), axis=1)]
    model = StructSVMCuttingPlane(C=1).fit(X, y)
    labels, scores = predict_topk(model, X, k=3)
    assert labels.shape == scores.shape == (60, 3)
    decision = model.decision_function(X)
    order = np.argsort(-decision, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(labels, model.classes_[order])
    np.testing.assert_allclose(scores, np.take_along_axis(decision, order, axis=1))
    np.testing.assert_array_equal(labels[:, 0], model.predict(X))
    all_labels, _ = predict_topk(model, X, k=10)
    assert all_labels.shape == (60, 4)
    confidence = sequence_confidence(model, X)
    np.testing.assert_allclose(confidence, model.predict_marginals(X).max(axis=1),
                               rtol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_models_and_images_are_refused(chain_model):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(9, 3)) for _ in range(3)]
    y = [np.arange(9) % 2 for _ in range(3)]
    grid = M3NSimplicialDecomposition(GridStructure(width=3), max_iter=2).fit(X, y)
    for function in (predict_topk, sequence_confidence):  # (absent: no chain form)
        with pytest.raises(AttributeError) as error:
            function(grid, X)
        assert "GridStructure is not a chain" in str(error.value.__cause__)
    model, X = chain_model
    images = [rng.normal(size=(2, 2, X[0].shape[1]))]
    with pytest.raises(ValueError, match="not images"):
        predict_topk(model, images)


def test_estimator_facing_checks(chain_model):
    model, X = chain_model
    with pytest.raises(ValueError, match="at least 1"):
        predict_topk(model, X, k=0)
    with pytest.raises(TypeError, match="positive integer"):
        predict_topk(model, X, k=1.0)
    # a k beyond every sequence's number of labellings is cut to it
    labels, _ = predict_topk(model, X[:1], k=10**12)
    assert labels[0].shape[0] == 3 ** X[0].shape[0]
    unfitted = StructSVMCuttingPlane()
    with pytest.raises(NotFittedError):
        predict_topk(unfitted, X)
