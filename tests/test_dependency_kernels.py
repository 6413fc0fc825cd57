"""Tests of the dependency-tree kernels against exhaustive enumeration of the trees."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sklstruct._inference.dependency import check_heads, decode_trees, tree_marginals

from ._dependency_reference import (
    all_trees,
    brute_force_loss_augmented,
    brute_force_marginals,
    brute_force_max,
    chu_liu_edmonds_score,
    is_tree,
    tree_scores,
)

KINDS = [(p, s) for p in (True, False) for s in (False, True)]
KIND_IDS = ["proj", "proj-single", "nonproj", "nonproj-single"]
SCORE_TYPES = ["normal", "scale100", "scale1000", "integer", "forbidden"]


def _random_scores(rng, n, score_type):
    shape = (n + 1, n + 1)
    if score_type == "normal":
        return rng.normal(size=shape)
    if score_type == "scale100":
        return 100.0 * rng.normal(size=shape)
    if score_type == "scale1000":
        return 1000.0 * rng.normal(size=shape)
    if score_type == "integer":  # many ties
        return rng.integers(-2, 3, size=shape).astype(np.float64)
    scores = rng.normal(size=shape)  # "forbidden": some -inf arcs
    scores[rng.random(shape) < 0.35] = -np.inf
    return scores


def _batch(matrices):
    scores = np.concatenate([m.ravel() for m in matrices])
    lengths = np.array([m.shape[0] - 1 for m in matrices], dtype=np.int64)
    return scores, lengths


def _split(flat, lengths):
    offsets = np.concatenate(([0], np.cumsum((lengths + 1) ** 2)))
    return [flat[lo:hi].reshape(n + 1, n + 1)
            for lo, hi, n in zip(offsets[:-1], offsets[1:], lengths)]


def _split_heads(heads, lengths):
    return np.split(heads, np.cumsum(lengths)[:-1])


def _sentences(seed, score_types, n_values=range(1, 7), repeats=3):
    rng = np.random.default_rng(seed)
    return [_random_scores(rng, n, t) for t in score_types for n in n_values
            for _ in range(repeats)]


def _assert_close_scalar(actual, expected, rtol=1e-10):
    if expected == -np.inf:
        assert actual == -np.inf
    else:
        assert abs(actual - expected) <= rtol * max(1.0, abs(expected)), (actual, expected)


# ---------------------------------------------------------------------------------------------
# decoding


@pytest.mark.parametrize("projective, single_root", KINDS, ids=KIND_IDS)
def test_decode_matches_brute_force(projective, single_root):
    matrices = _sentences(0, SCORE_TYPES)
    scores, lengths = _batch(matrices)
    heads, best = decode_trees(scores, lengths, projective, single_root)
    assert heads.dtype == np.int64 and heads.shape == (lengths.sum(),)
    assert best.dtype == np.float64 and best.shape == lengths.shape
    for matrix, tree, value in zip(matrices, _split_heads(heads, lengths), best):
        expected, argmax = brute_force_max(matrix, projective, single_root)
        _assert_close_scalar(value, expected, rtol=1e-12)
        assert is_tree(tree, projective, single_root)
        assert tree_scores(matrix, tree) == value
        if np.all(np.floor(matrix) == matrix) and expected > -np.inf:
            assert tuple(tree) in argmax  # exact arithmetic: ties are resolved correctly


@pytest.mark.parametrize("projective, single_root", KINDS, ids=KIND_IDS)
def test_loss_augmented_decode_matches_brute_force(projective, single_root):
    """Hamming loss over heads: ``cost`` on every arc that is not a gold arc."""
    rng = np.random.default_rng(1)
    for n in range(1, 7):
        gold_trees = all_trees(n, projective, single_root)
        for score_type, cost in itertools.product(["normal", "integer", "forbidden"],
                                                  [0.5, 1.0, 3.0]):
            matrix = _random_scores(rng, n, score_type)
            gold = gold_trees[rng.integers(gold_trees.shape[0])]
            matrix[gold, np.arange(1, n + 1)] = rng.normal(size=n)  # gold arcs allowed
            augmented = matrix + cost
            augmented[gold, np.arange(1, n + 1)] -= cost
            heads, _ = decode_trees(augmented.ravel(), [n], projective, single_root)
            achieved = tree_scores(matrix, heads) + cost * np.sum(heads != gold)
            expected = brute_force_loss_augmented(matrix, gold, cost, projective,
                                                  single_root)
            _assert_close_scalar(achieved, expected, rtol=1e-12)
            assert is_tree(heads, projective, single_root)


@pytest.mark.parametrize("single_root", [False, True])
def test_spanning_tree_decode_on_longer_sentences(single_root):
    """Chu-Liu-Edmonds against the textbook recursion (single root: every root child tried)."""
    rng = np.random.default_rng(2)
    matrices = []
    for i in range(24):
        n = int(rng.integers(7, 26))
        matrix = rng.normal(size=(n + 1, n + 1)) * (10.0 if i % 3 == 0 else 1.0)
        if i % 3 == 0:
            matrix[0, 1:] -= 20.0  # the unconstrained tree has many root children
        elif i % 3 == 1:
            matrix = np.round(matrix)  # ties
        else:
            matrix[rng.random(matrix.shape) < 0.6] = -np.inf
        matrices.append(matrix)
    scores, lengths = _batch(matrices)
    heads, best = decode_trees(scores, lengths, False, single_root)
    projective_best = decode_trees(scores, lengths, True, single_root)[1]
    for matrix, tree, value, proj_value in zip(matrices, _split_heads(heads, lengths), best,
                                               projective_best):
        _assert_close_scalar(value, chu_liu_edmonds_score(matrix, single_root), 1e-12)
        assert is_tree(tree, False, single_root)
        assert proj_value <= value
    assert np.all(best <= decode_trees(scores, lengths, False, False)[1])


def test_decode_without_any_tree():
    n = 4
    blocked = np.full((n + 1, n + 1), -np.inf)
    only_cycles = np.full((n + 1, n + 1), -np.inf)
    only_cycles[1, 2] = only_cycles[2, 1] = only_cycles[3, 4] = only_cycles[4, 3] = 0.0
    two_roots_needed = np.full((n + 1, n + 1), -np.inf)
    two_roots_needed[0, 1] = two_roots_needed[0, 3] = 0.0
    two_roots_needed[1, 2] = two_roots_needed[3, 4] = 0.0
    for matrix, single_root in [(blocked, False), (only_cycles, False),
                                (two_roots_needed, True)]:
        for projective in (True, False):
            heads, best = decode_trees(matrix.ravel(), [n], projective, single_root)
            assert best[0] == -np.inf
            assert is_tree(heads, projective, single_root)
            marginals, log_z = tree_marginals(matrix.ravel(), [n], projective, single_root)
            assert log_z[0] == -np.inf
            assert np.all(marginals == 0.0)


def test_results_do_not_depend_on_n_jobs():
    matrices = _sentences(3, ["normal", "integer", "forbidden"], n_values=range(1, 30, 3),
                          repeats=2)
    scores, lengths = _batch(matrices)
    for projective, single_root in KINDS:
        one = decode_trees(scores, lengths, projective, single_root)
        two = decode_trees(scores, lengths, projective, single_root, n_jobs=2)
        np.testing.assert_array_equal(one[0], two[0])
        np.testing.assert_array_equal(one[1], two[1])
        m_one = tree_marginals(scores, lengths, projective, single_root)
        m_two = tree_marginals(scores, lengths, projective, single_root, n_jobs=2)
        np.testing.assert_array_equal(m_one[0], m_two[0])
        np.testing.assert_array_equal(m_one[1], m_two[1])


# ---------------------------------------------------------------------------------------------
# marginals


def _check_marginals(matrices, projective, single_root, rtol=1e-10, atol=1e-10):
    scores, lengths = _batch(matrices)
    marginals, log_z = tree_marginals(scores, lengths, projective, single_root)
    assert marginals.shape == scores.shape and log_z.shape == lengths.shape
    assert not np.isnan(marginals).any() and not np.isnan(log_z).any()
    for matrix, mu, value in zip(matrices, _split(marginals, lengths), log_z):
        expected_z, expected_mu = brute_force_marginals(matrix, projective, single_root)
        _assert_close_scalar(value, expected_z, rtol)
        np.testing.assert_allclose(mu, expected_mu, rtol=0, atol=atol)
        assert np.all(mu[matrix == -np.inf] == 0.0)
        assert np.all(mu[:, 0] == 0.0) and np.all(np.diag(mu) == 0.0)
        if expected_z > -np.inf:
            np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, rtol=0, atol=atol)


@pytest.mark.parametrize("single_root", [False, True])
def test_projective_marginals_match_brute_force(single_root):
    _check_marginals(_sentences(4, SCORE_TYPES), True, single_root)


@pytest.mark.parametrize("single_root", [False, True])
def test_nonprojective_marginals_match_brute_force(single_root):
    """The matrix-tree theorem at every score scale (test_matrix_tree_accuracy.py has more)."""
    matrices = _sentences(5, SCORE_TYPES)
    rng = np.random.default_rng(6)
    matrices += [5.0 * rng.normal(size=(n + 1, n + 1)) for n in range(1, 7) for _ in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_marginals(matrices, False, single_root)


@pytest.mark.parametrize("single_root", [False, True])
def test_nonprojective_marginals_at_large_scale(single_root):
    """Scores of scale 100 and 1000 whose best arcs into the tokens form a (single-root)
    tree."""
    rng = np.random.default_rng(7)
    for scale in (100.0, 1000.0):
        for n in range(1, 7):
            for _ in range(6):
                matrix = scale * rng.normal(size=(n + 1, n + 1))
                # token m's best head is m - 1 (the root for token 1)
                for m in range(1, n + 1):
                    matrix[m - 1, m] = np.max(matrix[:, m]) + abs(rng.normal())
                _check_marginals([matrix], False, single_root)


@pytest.mark.parametrize("single_root", [False, True])
def test_matrix_tree_on_a_cycle_entered_far_below(single_root):
    """A cycle of best arcs entered only 1000 nats below, whose Laplacian is singular in
    double precision (an LU factorisation finds no tree): exact, without a warning."""
    n = 3
    matrix = np.full((n + 1, n + 1), -1000.0)
    matrix[1, 2] = matrix[2, 3] = matrix[3, 1] = 0.0
    good = np.zeros((n + 1, n + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_marginals([good, matrix, good], False, single_root)


@pytest.mark.parametrize("projective, single_root", KINDS, ids=KIND_IDS)
def test_marginals_sum_to_one_on_longer_sentences(projective, single_root):
    rng = np.random.default_rng(8)
    matrices = [rng.normal(size=(n + 1, n + 1)) for n in (7, 12, 20, 33, 50)]
    matrices[2][rng.random(matrices[2].shape) < 0.5] = -np.inf
    scores, lengths = _batch(matrices)
    marginals, log_z = tree_marginals(scores, lengths, projective, single_root)
    heads, best = decode_trees(scores, lengths, projective, single_root)
    for mu, value, top in zip(_split(marginals, lengths), log_z, best):
        assert value >= top  # Z >= exp(best tree)
        np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, rtol=0, atol=1e-10)
        assert np.all((mu >= 0.0) & (mu <= 1.0))
        if single_root:
            assert mu[0, 1:].sum() == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("projective, single_root", KINDS, ids=KIND_IDS)
def test_gradient_of_log_partition_is_the_marginals(projective, single_root):
    """Central differences of log Z over every finite arc score of a sentence of 8 tokens."""
    rng = np.random.default_rng(9)
    n, step = 8, 1e-5
    matrix = rng.normal(size=(n + 1, n + 1))
    matrix[rng.random(matrix.shape) < 0.2] = -np.inf
    matrix[0, 1:] = rng.normal(size=n)
    marginals, _ = tree_marginals(matrix.ravel(), [n], projective, single_root)
    arcs = [(h, m) for h in range(n + 1) for m in range(1, n + 1)
            if h != m and matrix[h, m] > -np.inf]
    batch = []
    for (h, m), sign in itertools.product(arcs, (1.0, -1.0)):
        shifted = matrix.copy()
        shifted[h, m] += sign * step
        batch.append(shifted)
    scores, lengths = _batch(batch)
    log_z = tree_marginals(scores, lengths, projective, single_root)[1].reshape(-1, 2)
    numeric = (log_z[:, 0] - log_z[:, 1]) / (2 * step)
    analytic = marginals.reshape(n + 1, n + 1)[tuple(np.array(arcs).T)]
    np.testing.assert_allclose(numeric, analytic, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# hypothesis: any small matrix of integers, reals and -inf


@st.composite
def small_sentences(draw):
    n = draw(st.integers(1, 5))
    elements = st.one_of(st.integers(-3, 3).map(float), st.floats(-4, 4),
                         st.just(-np.inf))
    return draw(hnp.arrays(np.float64, (n + 1, n + 1), elements=elements))


@settings(max_examples=60, deadline=None)
@given(matrix=small_sentences(), kind=st.sampled_from(KINDS))
def test_any_small_sentence(matrix, kind):
    projective, single_root = kind
    n = matrix.shape[0] - 1
    heads, best = decode_trees(matrix.ravel(), [n], projective, single_root)
    expected, _ = brute_force_max(matrix, projective, single_root)
    _assert_close_scalar(best[0], expected, rtol=1e-12)
    assert is_tree(heads, projective, single_root)
    _check_marginals([matrix], projective, single_root)


# ---------------------------------------------------------------------------------------------
# check_heads


@pytest.mark.parametrize("projective, single_root", KINDS, ids=KIND_IDS)
def test_check_heads_agrees_with_enumeration(projective, single_root):
    for n in range(1, 5):
        for heads in itertools.product(range(-1, n + 2), repeat=n):
            if is_tree(heads, projective, single_root):
                check_heads(heads, [n], projective, single_root)
            else:
                with pytest.raises(ValueError, match="sentence 0"):
                    check_heads(heads, [n], projective, single_root)


@pytest.mark.parametrize("bad, projective, single_root, match", [
    ([2, 0, 3], False, False, "token 3 has head 3|token 3 is its own head"),
    ([4, 0, 2], False, False, "token 1 has head 4, outside 0..3"),
    ([-1, 0, 2], False, False, "token 1 has head -1"),
    ([3, 3, 1], False, False, "token 1 does not reach the root"),
    ([0, 0, 2], False, True, "2 tokens attached to the root"),
    ([3, 0, 0], True, False, "not projective"),
])
def test_check_heads_names_the_sentence(bad, projective, single_root, match):
    good = [0, 1, 2]
    heads = np.array(good + good + bad + [2, 0, 2])
    with pytest.raises(ValueError, match=match) as error:
        check_heads(heads, [3, 3, 3, 3], projective, single_root)
    assert "sentence 2 " in str(error.value)
    check_heads(np.array(good * 4), [3, 3, 3, 3], projective, single_root)


def test_check_heads_bad_input():
    with pytest.raises(ValueError, match="sum\\(lengths\\) = 3"):
        check_heads([0, 1], [3])
    with pytest.raises(TypeError, match="integers"):
        check_heads([0.0, 1.0], [2])
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        check_heads([0], [1, 0])
    with pytest.raises(TypeError, match="True or False"):
        check_heads([0], [1], projective="yes")


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("function", [decode_trees, tree_marginals])
def test_bad_input(function):
    good = np.zeros(9)
    with pytest.raises(ValueError, match="NaN"):
        function(np.full(9, np.nan), [2])
    with pytest.raises(ValueError, match=r"\+inf"):
        function(np.full(9, np.inf), [2])
    with pytest.raises(ValueError, match="13 entries, got 9"):
        function(good, [1, 2])
    with pytest.raises(ValueError, match="fewer than"):
        function(good, [5])
    with pytest.raises(ValueError, match="sentence 1 has length -1"):
        function(good, [2, -1])
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        function(good, [2, 0])
    with pytest.raises(ValueError, match="1-D"):
        function(good.reshape(3, 3), [2])
    with pytest.raises(ValueError, match="1-D"):
        function(good, [[2]])
    with pytest.raises(TypeError, match="integers"):
        function(good, [2.0])
    with pytest.raises(TypeError, match="real numbers"):
        function(good.astype(object), [2])
    with pytest.raises(TypeError, match="None"):
        function(None, [2])
    with pytest.raises(TypeError, match="True or False"):
        function(good, [2], projective=1)
    with pytest.raises(TypeError, match="n_jobs"):
        function(good, [2], n_jobs=1.5)
    empty = function(np.zeros(0), np.zeros(0, dtype=np.int64))
    assert all(part.shape == (0,) for part in empty)
