"""The per-example cache of recent most-violating labellings of the cutting-plane learners
(``LabelCache``): what it keeps, and its choice against brute force over the cached
labellings scored through the joint feature map."""

import numpy as np
import pytest

from sklstruct import ChainStructure
from sklstruct.learners.cutting_plane._label_cache import LabelCache
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._helpers import make_chain_data


def _chain_problem(seed, n_sequences=6, n_states=3, n_features=3, max_length=4):
    X, y = make_chain_data(n_sequences=n_sequences, n_states=n_states, n_features=n_features,
                           max_length=max_length, seed=seed)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    structure = ChainStructure(class_weight=[1.0, 2.0, 0.5][:n_states]).bind(
        n_features, n_states, np.arange(n_states), Y)
    w = np.random.default_rng(seed).normal(scale=0.5, size=structure.size_joint_feature_)
    return structure, batch, Y, w


def _sequence(batch, i):
    lo, hi = batch.offsets[i], batch.offsets[i + 1]
    return SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64)), slice(lo, hi)


def _hinge(loss, score, true_score, rescale):
    return loss + score - true_score if rescale == "margin" else loss * (1 + score - true_score)


def _brute_force_choice(structure, batch, Y, w, inserted, rescale):
    """Per example, the best of ``y`` itself (hinge 0) and the cached labellings, scored as
    ``w . Psi`` of that sequence alone.

    Returns ``(values, margins, labels, losses, scores)``: the best hinge value, its lead over
    the runner-up (to skip near ties), and the winner's labels, loss and score.
    """
    n = batch.n_sequences
    values, margins = np.zeros(n), np.zeros(n)
    labels, losses, scores = Y.copy(), np.zeros(n), np.zeros(n)
    for i in range(n):
        sub, rows = _sequence(batch, i)
        true_score = w @ structure.joint_feature(sub, Y[rows])
        candidates = [(0.0, Y[rows], 0.0, true_score)]
        for Ybar, cached_losses in inserted:
            score = w @ structure.joint_feature(sub, Ybar[rows])
            loss = cached_losses[i]
            candidates.append((_hinge(loss, score, true_score, rescale), Ybar[rows], loss,
                               score))
        ranked = sorted(candidates, key=lambda item: -item[0])
        values[i] = ranked[0][0]
        margins[i] = ranked[0][0] - ranked[1][0] if len(ranked) > 1 else np.inf
        labels[rows], losses[i], scores[i] = ranked[0][1], ranked[0][2], ranked[0][3]
    return values, margins, labels, losses, scores


@pytest.mark.parametrize("size", [1, 3, 5])
def test_keeps_the_most_recent_labellings_in_a_ring(size):
    rng = np.random.default_rng(size)
    n_tokens, n_sequences = 7, 3
    cache = LabelCache(n_tokens, n_sequences, size)
    inserted = []
    for count in range(1, 3 * size + 2):
        Ybar = rng.integers(0, 4, size=n_tokens)
        losses = rng.random(n_sequences)
        cache.insert(Ybar, losses)
        inserted.append((Ybar.copy(), losses.copy()))
        Ybar[:] = -1  # the cache holds copies
        losses[:] = -1.0
        assert cache.filled == min(count, size)
        # the j-th most recent insertion sits in slot (count - 1 - j) mod size
        for j in range(cache.filled):
            kept_labels, kept_losses = inserted[count - 1 - j]
            slot = (count - 1 - j) % size
            np.testing.assert_array_equal(cache.labels[slot], kept_labels)
            np.testing.assert_array_equal(cache.losses[slot], kept_losses)


def test_size_zero_keeps_nothing():
    structure, batch, Y, w = _chain_problem(0)
    cache = LabelCache(batch.n_tokens, batch.n_sequences, 0)
    Ybar = (Y + 1) % structure.n_states_
    cache.insert(Ybar, structure.loss(batch, Y, Ybar))
    assert cache.filled == 0
    unary, pairwise = structure.potentials(batch, w)
    labels, losses, scores = cache.most_violating(structure, batch, Y, unary, pairwise,
                                                  "margin")
    np.testing.assert_array_equal(labels, Y)
    np.testing.assert_array_equal(losses, 0.0)
    np.testing.assert_allclose(scores, structure.score(batch, unary, pairwise, Y))


@pytest.mark.parametrize("rescale", ["margin", "slack"])
@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("seed", range(4))
def test_most_violating_matches_brute_force(rescale, size, seed):
    structure, batch, Y, w = _chain_problem(seed)
    unary, pairwise = structure.potentials(batch, w)
    rng = np.random.default_rng(seed)
    cache = LabelCache(batch.n_tokens, batch.n_sequences, size)
    inserted = []
    for step in range(size + 2):  # wraps around: the oldest labellings drop out
        if step % 2:
            # what the oracle inserts: the loss-augmented labellings at some weights
            v = rng.normal(scale=2.0, size=w.shape[0])
            Ybar, losses, _ = structure.loss_augmented_decode(
                batch, *structure.potentials(batch, v), Y, rescale=rescale)
        else:
            Ybar = rng.integers(0, structure.n_states_, size=batch.n_tokens)
            # Y itself for some examples (zero loss)
            keep = np.repeat(rng.random(batch.n_sequences) < 0.3, batch.lengths)
            Ybar[keep] = Y[keep]
            losses = structure.loss(batch, Y, Ybar)
        cache.insert(Ybar, losses)
        inserted.append((np.asarray(Ybar).copy(), np.asarray(losses).copy()))
    recent = inserted[-size:]
    labels, losses, scores = cache.most_violating(structure, batch, Y, unary, pairwise, rescale)
    values, margins, labels_bf, losses_bf, scores_bf = _brute_force_choice(
        structure, batch, Y, w, recent, rescale)
    true_scores = np.array([w @ structure.joint_feature(*_with_labels(batch, i, Y))
                            for i in range(batch.n_sequences)])
    # the value of the returned choice is the brute-force maximum
    np.testing.assert_allclose(_hinge(losses, scores, true_scores, rescale), values,
                               atol=1e-10)
    assert np.all(values >= 0.0)
    clear = np.repeat(margins > 1e-9, batch.lengths)
    np.testing.assert_array_equal(labels[clear], labels_bf[clear])
    np.testing.assert_allclose(losses[margins > 1e-9], losses_bf[margins > 1e-9])
    # returned losses and scores are those of the returned labels
    np.testing.assert_allclose(losses, structure.loss(batch, Y, labels), atol=1e-12)
    for i in range(batch.n_sequences):
        assert scores[i] == pytest.approx(
            w @ structure.joint_feature(*_with_labels(batch, i, labels)), abs=1e-10)
    # every returned labelling is y itself or one of the cached labellings of that example
    for i in range(batch.n_sequences):
        _, rows = _sequence(batch, i)
        assert any(np.array_equal(labels[rows], option[rows])
                   for option in [Y] + [Ybar for Ybar, _ in recent])


def _with_labels(batch, i, labels):
    sub, rows = _sequence(batch, i)
    return sub, labels[rows]


@pytest.mark.parametrize("rescale", ["margin", "slack"])
def test_dropped_labellings_are_not_chosen(rescale):
    structure, batch, Y, w = _chain_problem(5)
    unary, pairwise = structure.potentials(batch, 0.01 * w)  # small weights: all violated
    Ybar, losses, _ = structure.loss_augmented_decode(batch, unary, pairwise, Y,
                                                      rescale=rescale)
    assert np.all(losses > 0)  # the most violating labelling of every example
    cache = LabelCache(batch.n_tokens, batch.n_sequences, 2)
    cache.insert(Ybar, losses)
    labels, _, _ = cache.most_violating(structure, batch, Y, unary, pairwise, rescale)
    np.testing.assert_array_equal(labels, Ybar)
    # two labellings that violate nothing (y itself) push it out: y is returned
    for _ in range(2):
        cache.insert(Y, np.zeros(batch.n_sequences))
    labels, losses, scores = cache.most_violating(structure, batch, Y, unary, pairwise,
                                                  rescale)
    np.testing.assert_array_equal(labels, Y)
    np.testing.assert_array_equal(losses, 0.0)
    np.testing.assert_allclose(scores, structure.score(batch, unary, pairwise, Y))


def test_a_tie_with_y_keeps_y():
    # a cached labelling whose hinge term is exactly 0 does not replace y
    structure, batch, Y, _ = _chain_problem(2, n_states=2)
    w = np.zeros(structure.size_joint_feature_)  # every labelling scores 0
    unary, pairwise = structure.potentials(batch, w)
    Ybar = (Y + 1) % 2
    cache = LabelCache(batch.n_tokens, batch.n_sequences, 1)
    cache.insert(Ybar, np.zeros(batch.n_sequences))  # zero hinge: loss 0 stored, score 0
    labels, losses, _ = cache.most_violating(structure, batch, Y, unary, pairwise, "margin")
    np.testing.assert_array_equal(labels, Y)
    np.testing.assert_array_equal(losses, 0.0)
