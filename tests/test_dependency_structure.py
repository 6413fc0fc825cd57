"""DependencyTree: its oracles against enumeration of every tree, its loss, every learner."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (
    L1M3N,
    M3NExcessiveGap,
    M3NExpGrad,
    M3NSimplicialDecomposition,
    StructSVMCuttingPlane,
)
from sklstruct.structures import DependencyTree
from sklstruct.utils import SequenceBatch
from sklstruct.utils._sequences import offsets_from_lengths

from ._dependency_reference import all_trees
from ._enumeration import exact_optimum

KINDS = [(p, r) for p in (True, False) for r in (False, True)]


def _bound(n_states, projective, single_root):
    return DependencyTree(projective=projective, single_root=single_root).bind(1, n_states)


def _tree_labelings(structure, n, n_states):
    """Row labels of every tree of n tokens with every assignment of states >= 1 to its arcs."""
    trees = all_trees(n, structure.projective, structure.single_root)
    assignments = np.array(list(itertools.product(range(1, n_states), repeat=n)))
    labels = []
    for heads in trees:
        rows = structure.arc_index(np.array([n]), heads)
        for states in assignments:
            y = np.zeros(n * n, dtype=np.int64)
            y[rows] = states
            labels.append(y)
    return np.array(labels), np.repeat(trees, len(assignments), axis=0)


def _batch(lengths, n_features=1):
    rows = np.asarray(lengths) ** 2
    return SequenceBatch(np.zeros((int(rows.sum()), n_features)), offsets_from_lengths(rows))


def _scores(rng, n_rows, n_states, ties):
    if ties:
        return rng.randint(-2, 3, size=(n_rows, n_states)).astype(float)
    return rng.normal(scale=2.0, size=(n_rows, n_states))


def _cases():
    for projective, single_root in KINDS:
        for n_states, lengths in ((2, (1, 2, 3, 4, 5, 6)), (3, (1, 2, 3, 4))):
            for ties in (False, True):
                yield projective, single_root, n_states, lengths, ties


CASES = list(_cases())


def _ids(case):
    projective, single_root, n_states, _, ties = case
    return (f"{'proj' if projective else 'nonproj'}-{'single' if single_root else 'multi'}-"
            f"S{n_states}{'-ties' if ties else ''}")


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_oracles_equal_enumeration_of_every_tree(case):
    projective, single_root, n_states, lengths, ties = case
    rng = np.random.RandomState(hash(_ids(case)) % 2 ** 31)
    structure = _bound(n_states, projective, single_root)
    batch = _batch(lengths)
    unary = _scores(rng, batch.n_tokens, n_states, ties)
    gold = np.concatenate([_tree_labelings(structure, n, n_states)[0][
        rng.randint(len(_tree_labelings(structure, n, n_states)[0]))] for n in lengths])
    token_loss = structure.token_loss(gold)
    pairwise = np.zeros(0)

    decoded = structure.decode(batch, unary, pairwise)
    augmented, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, gold)
    node, pair, log_z = structure.marginals(batch, unary, pairwise)
    assert pair.shape == (len(lengths), 0)
    kernels = structure.example_kernels(batch)
    for i, n in enumerate(lengths):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        labelings, _ = _tree_labelings(structure, n, n_states)
        u, loss = unary[lo:hi], token_loss[lo:hi]
        values = u[np.arange(n * n), labelings].sum(axis=1)
        augmented_values = values + loss[np.arange(n * n), labelings].sum(axis=1)
        # decoding: a tree of the kind asked for, of the best score
        assert any(np.array_equal(decoded[lo:hi], y) for y in labelings)
        assert u[np.arange(n * n), decoded[lo:hi]].sum() == pytest.approx(values.max(),
                                                                            abs=1e-10)
        # loss-augmented decoding, and its returned loss and score
        assert any(np.array_equal(augmented[lo:hi], y) for y in labelings)
        value = (u + loss)[np.arange(n * n), augmented[lo:hi]].sum()
        assert value == pytest.approx(augmented_values.max(), abs=1e-10)
        assert losses[i] == pytest.approx(loss[np.arange(n * n), augmented[lo:hi]].sum())
        assert scores[i] == pytest.approx(u[np.arange(n * n), augmented[lo:hi]].sum())
        # marginals and log-partition over every tree and relation assignment
        assert log_z[i] == pytest.approx(logsumexp(values), abs=1e-9)
        p = np.exp(values - logsumexp(values))
        expected = np.zeros((n * n, n_states))
        for y, weight in zip(labelings, p):
            expected[np.arange(n * n), y] += weight
        np.testing.assert_allclose(node[lo:hi], expected, atol=1e-9)
        # the per-example kernels of the compiled passes agree with the batched oracles
        labels = kernels.max_oracle_example(i, u, loss, pairwise)
        assert (u + loss)[np.arange(n * n), labels].sum() == pytest.approx(
            augmented_values.max(), abs=1e-10)
        assert any(np.array_equal(labels, y) for y in labelings)
        k_node, k_pair, k_log_z = kernels.marginals_example(i, u, pairwise)
        np.testing.assert_allclose(k_node, expected, atol=1e-9)
        assert k_log_z == pytest.approx(log_z[i], abs=1e-9)
        assert k_pair.shape == (0,)


@pytest.mark.parametrize("n_states", [2, 4])
def test_loss_counts_the_wrongly_attached_or_labelled_tokens(n_states):
    rng = np.random.RandomState(n_states)
    structure = _bound(n_states, False, False)
    for n in (1, 3, 5):
        labelings, trees = _tree_labelings(structure, n, min(n_states, 3))
        pick = rng.choice(len(labelings), size=(40, 2))
        batch = _batch([n])
        for a, b in pick:
            gold, pred = labelings[a], labelings[b]
            heads_gold, states_gold = structure.heads_from_labels([n], gold)
            heads_pred, states_pred = structure.heads_from_labels([n], pred)
            np.testing.assert_array_equal(heads_gold, trees[a])
            wrong = (heads_gold != heads_pred) | (states_gold != states_pred)
            assert structure.loss(batch, gold, pred)[0] == pytest.approx(wrong.sum())


def test_labels_and_heads_convert_both_ways():
    rng = np.random.RandomState(0)
    structure = _bound(3, False, False)
    lengths = np.array([1, 4, 2, 6])
    heads = np.concatenate([all_trees(n)[rng.randint(len(all_trees(n)))] for n in lengths])
    states = rng.randint(1, 3, size=heads.shape[0])
    labels = structure.labels_from_heads(lengths, heads, states)
    assert labels.shape == (int((lengths ** 2).sum()),)
    back_heads, back_states = structure.heads_from_labels(lengths, labels)
    np.testing.assert_array_equal(back_heads, heads)
    np.testing.assert_array_equal(back_states, states)


def test_rows_that_are_not_a_square_name_the_example():
    structure = _bound(2, True, False)
    batch = SequenceBatch(np.zeros((4 + 5, 1)), np.array([0, 4, 9]))
    with pytest.raises(ValueError, match="example 1 has 5 rows"):
        structure.decode(batch, np.zeros((9, 2)), np.zeros(0))


def test_slack_rescaling_is_refused():
    structure = _bound(2, True, False)
    batch = _batch([2])
    with pytest.raises(ValueError, match="margin rescaling only"):
        structure.loss_augmented_decode(batch, np.zeros((4, 2)), np.zeros(0),
                                        np.array([1, 0, 1, 0]), rescale="slack")


def test_one_state_is_refused_at_bind():
    with pytest.raises(ValueError, match="one token long"):
        DependencyTree().bind(3, 1)
    with pytest.raises(TypeError, match="projective must be True or False"):
        DependencyTree(projective="yes").bind(3, 2)


# ------------------------------------------------------------------ learners
def _parsing_problem(n_states, seed=0):
    """Four sentences of 1-3 tokens with two arc features: a tiny parsing problem."""
    rng = np.random.RandomState(seed)
    lengths = [1, 2, 3, 3]
    structure = _bound(n_states, False, False)
    X, y = [], []
    for n in lengths:
        labelings, _ = _tree_labelings(structure, n, n_states)
        gold = labelings[rng.randint(len(labelings))]
        features = rng.normal(size=(n * n, 2))
        features[gold > 0, 0] += 1.0
        X.append(sp.csr_matrix(features))
        y.append(gold)
    return X, y


LEARNERS = {
    "n_slack": lambda s: StructSVMCuttingPlane(s, C=0.7, variant="n-slack", tol=1e-7,
                                               max_iter=5000),
    "one_slack": lambda s: StructSVMCuttingPlane(s, C=0.7, variant="1-slack", tol=1e-7,
                                                 max_iter=5000),
    "exp_grad": lambda s: M3NExpGrad(s, C=0.7, tol=1e-5, max_iter=5000, random_state=0),
    "excessive_gap": lambda s: M3NExcessiveGap(s, C=0.7, tol=1e-4, max_iter=20000),
    "simplicial": lambda s: M3NSimplicialDecomposition(s, C=0.7, tol=1e-7, max_iter=5000,
                                                       random_state=0),
}


@pytest.mark.parametrize("projective", [True, False])
@pytest.mark.parametrize("n_states", [2, 3])
@pytest.mark.parametrize("learner", LEARNERS)
def test_every_learner_reaches_the_exact_optimum(learner, n_states, projective):
    X, y = _parsing_problem(n_states)
    structure = DependencyTree(projective=projective)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LEARNERS[learner](structure).fit(X, y)
    batch, y_flat, _ = model._validate_input(X, y, reset=False)
    Y = model._encode_known(np.asarray(y_flat))
    bound = model.structure_

    def labelings(i, length):
        return _tree_labelings(bound, round(np.sqrt(length)), bound.n_states_)[0]

    lower, upper, _ = exact_optimum(bound, batch, Y, model.C, labelings=labelings)
    h = model.history_
    objective = model.objective(X, y)
    assert objective == pytest.approx(h["primal"][-1], rel=1e-9)
    assert h["dual"][-1] <= upper + 1e-9
    assert objective >= lower - 1e-9
    assert objective - lower <= h["gap"][-1] + 1e-7 * upper


@pytest.mark.parametrize("solver", ["cutting_plane", "em"])
def test_l1_learner_trains_trees(solver):
    X, y = _parsing_problem(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = L1M3N(DependencyTree(), C=0.7, solver=solver).fit(X, y)
    predictions = model.predict(X)
    heads, _ = DependencyTree.heads_from_labels([1, 2, 3, 3], np.concatenate(predictions))
    assert heads.shape == (9,)
