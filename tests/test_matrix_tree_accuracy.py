"""Accuracy of the matrix-tree marginals (all trees) at any score scale.

The log-partition must be exact to a relative 1e-10 and the arc marginals to an absolute
1e-10 for any finite scores, -inf (forbidden) arcs and ties included, multi-root and
single-root. The references are exhaustive enumeration for n <= 6 (a log-sum-exp over
all trees in float64) and, for 30 and 60 tokens, a subtraction-free elimination in
40-digit decimal arithmetic, itself checked against Gauss-Jordan inversion of Koo et al.'s
matrices in 300-digit arithmetic where the scores spread over fewer nats than that.
"""

import warnings

import numpy as np
import pytest

from sklstruct._inference.dependency import decode_trees, tree_marginals

from ._dependency_reference import (
    brute_force_marginals,
    elimination_reference,
    laplacian_reference,
)

ROOTS = [False, True]
ROOT_IDS = ["multi-root", "single-root"]
RTOL = 1e-10  # on log Z, relative to max(1, |log Z|)
ATOL = 1e-10  # on the marginals


def _solve(matrices, single_root):
    """log Z and marginal matrices of the sentences, in one batch, without any warning."""
    scores = np.concatenate([matrix.ravel() for matrix in matrices])
    lengths = np.array([matrix.shape[0] - 1 for matrix in matrices])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        marginals, log_z = tree_marginals(scores, lengths, projective=False,
                                          single_root=single_root)
    assert np.all(np.isfinite(marginals)) and not np.any(np.isnan(log_z))
    offsets = np.concatenate(([0], np.cumsum((lengths + 1) ** 2)))
    return log_z, [marginals[lo:hi].reshape(n + 1, n + 1)
                   for lo, hi, n in zip(offsets[:-1], offsets[1:], lengths)]


def _assert_matches(matrix, log_z, mu, expected_z, expected_mu, columns=None):
    if expected_z == -np.inf:
        assert log_z == -np.inf and not mu.any()
        return
    assert abs(log_z - expected_z) <= RTOL * max(1.0, abs(expected_z)), (log_z, expected_z)
    columns = slice(None) if columns is None else columns
    np.testing.assert_allclose(mu[:, columns], expected_mu[:, columns], rtol=0, atol=ATOL)
    assert np.all(mu[matrix == -np.inf] == 0.0)
    assert np.all(mu[:, 0] == 0.0) and np.all(np.diag(mu) == 0.0)


def _check_against_enumeration(matrices, single_root):
    log_z, marginals = _solve(matrices, single_root)
    for matrix, value, mu in zip(matrices, log_z, marginals):
        expected_z, expected_mu = brute_force_marginals(matrix, False, single_root)
        _assert_matches(matrix, value, mu, expected_z, expected_mu)


# ---------------------------------------------------------------------------------------------
# short sentences against enumeration


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
@pytest.mark.parametrize("scale", [1.0, 10.0, 100.0, 1000.0])
def test_matches_enumeration_at_every_scale(scale, single_root):
    """Normal scores, ties (integers times the scale) and -inf arcs, with and without ties."""
    rng = np.random.default_rng(int(scale))
    matrices = []
    for n in range(1, 7):
        for kind in ("normal", "ties", "forbidden", "forbidden ties"):
            for _ in range(3):
                if "ties" in kind:
                    matrix = scale * rng.integers(-2, 3, size=(n + 1, n + 1)).astype(float)
                else:
                    matrix = scale * rng.normal(size=(n + 1, n + 1))
                if "forbidden" in kind:
                    matrix[rng.random(matrix.shape) < 0.35] = -np.inf
                matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
@pytest.mark.parametrize("gap", [10.0, 100.0, 700.0, 1000.0, 1e4])
def test_cycles_of_best_arcs_entered_far_below(gap, single_root):
    """The best arcs form cycles (a 2-cycle, a 3-cycle, or both, nested in a larger cycle)
    that every tree must break with arcs ``gap`` nats worse: the Laplacian shifted by the
    best arcs is singular to about ``exp(-gap)``, which defeats an LU factorisation."""
    rng = np.random.default_rng(11)
    matrices = []
    for n in range(2, 7):
        for _ in range(4):
            matrix = -gap + rng.normal(size=(n + 1, n + 1))
            tokens = rng.permutation(np.arange(1, n + 1))
            cycles = [tokens[:2], tokens[2:5]] if n >= 5 else [tokens]
            for cycle in cycles:
                for h, m in zip(cycle, np.roll(cycle, -1)):
                    matrix[h, m] = rng.normal()
            if n >= 5:  # the two cycles joined by arcs gap / 2 below
                matrix[tokens[0], tokens[2]] = matrix[tokens[2], tokens[0]] = -gap / 2
            matrix[rng.random(matrix.shape) < 0.15] = -np.inf
            matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_both_sides_of_the_double_precision_range(single_root):
    """Scores spreading over about 600 to 800 nats into a token, with -inf arcs: the
    double-precision elimination hands over to the log-domain one when an entry, or a
    fill-in of a forbidden arc, falls below 2^-960 of its column's best (665 nats)."""
    rng = np.random.default_rng(12)
    matrices = []
    for n in range(2, 7):
        for half_width in (300.0, 330.0, 340.0, 360.0, 400.0):
            for _ in range(4):
                matrix = half_width * rng.uniform(-1.0, 1.0, size=(n + 1, n + 1))
                matrix[rng.random(matrix.shape) < 0.3] = -np.inf
                matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_tiered_scores(single_root):
    """Scores in three tiers ``gap`` nats apart (50 to 330), a third of the arcs forbidden:
    the entries of the elimination span up to ``exp(2 gap)`` in a column, and for single
    root its root row grows past the double-precision range unless it is rescaled."""
    rng = np.random.default_rng(16)
    matrices = []
    for n in (4, 5, 6):
        for _ in range(20):
            gap = rng.uniform(50.0, 330.0)
            matrix = -gap * rng.integers(0, 3, size=(n + 1, n + 1)) + rng.normal(
                size=(n + 1, n + 1))
            matrix[rng.random(matrix.shape) < 0.3] = -np.inf
            matrices.append(matrix)
    # tiers 0, -256 and -512 whose single-root root row grows to exp(800) and beyond
    matrices.append(-256.0 * np.array([
        [2, 2, 2, 0, 1, 2, 1],
        [1, 9, 1, 9, 9, 9, 2],
        [9, 2, 9, 1, 2, 0, 0],
        [1, 0, 2, 1, 0, 9, 0],
        [2, 1, 9, 9, 2, 2, 0],
        [2, 0, 2, 9, 9, 1, 9],
        [9, 9, 9, 9, 9, 2, 0],
    ]))
    matrices[-1][matrices[-1] == -256.0 * 9] = -np.inf
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_small_fill_ins_of_forbidden_arcs(single_root):
    """Every tree takes the chain 0 -> 1 -> ... -> n, whose arcs lie 300 to 600 nats below
    the arcs from token n into the same tokens: eliminating the first tokens fills the
    forbidden arcs from the root with weights below 2^-960 of their columns, as small as
    exp(-1200), which double precision would lose."""
    rng = np.random.default_rng(15)
    matrices = []
    for n in range(3, 7):
        for _ in range(6):
            matrix = np.full((n + 1, n + 1), -np.inf)
            matrix[n, 1:n] = rng.normal(size=n - 1)
            matrix[np.arange(n), np.arange(1, n + 1)] = -rng.uniform(300.0, 600.0, size=n)
            matrix[n - 1, n] = rng.normal()
            if rng.random() < 0.5:  # an alternative to the chain, far below
                matrix[0, n] = -rng.uniform(800.0, 1500.0)
            matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
@pytest.mark.parametrize("lead", [30.0, 100.0, 300.0, 1000.0])
def test_root_arcs_far_above_the_others(lead, single_root):
    """The root arcs into some tokens ``lead`` nats above their other arcs: single-root
    trees leave all of them but one, and the elimination's root row (which single-root
    pivots leave out) grows by up to ``exp(lead)`` per token."""
    rng = np.random.default_rng(int(lead))
    matrices = []
    for n in range(2, 7):
        for _ in range(6):
            matrix = rng.normal(size=(n + 1, n + 1))
            matrix[0, 1:] += lead * (rng.random(n) < 0.6)
            matrix[rng.random(matrix.shape) < 0.15] = -np.inf
            matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_tokens_only_the_root_can_enter(single_root):
    """A token without entering token arcs is the root's only child of every single-root
    tree, wherever it stands; with two such tokens there is no single-root tree."""
    rng = np.random.default_rng(13)
    matrices = []
    for n in range(2, 7):
        for scale in (1.0, 300.0):
            for count in (1, 2):
                matrix = scale * rng.normal(size=(n + 1, n + 1))
                for m in rng.choice(np.arange(1, n + 1), size=count, replace=False):
                    matrix[1:, m] = -np.inf
                matrices.append(matrix)
    _check_against_enumeration(matrices, single_root)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_sentences_without_a_tree(single_root):
    """log Z = -inf and zero marginals, also next to sentences that have trees."""
    n = 4
    no_entry = np.zeros((n + 1, n + 1))
    no_entry[:, 2] = -np.inf  # token 2 cannot be entered
    no_root = np.zeros((n + 1, n + 1))
    no_root[0, :] = -np.inf
    good = np.zeros((n + 1, n + 1))
    log_z, marginals = _solve([good, no_entry, no_root, good], single_root)
    assert np.isfinite(log_z[[0, 3]]).all()
    assert np.all(log_z[[1, 2]] == -np.inf)
    assert not marginals[1].any() and not marginals[2].any()


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_a_common_offset_only_shifts_log_z(single_root):
    """Adding ``c`` to every score adds ``n c`` to log Z and leaves the marginals."""
    rng = np.random.default_rng(14)
    matrices = [scale * rng.normal(size=(n + 1, n + 1))
                for n in (3, 6, 20) for scale in (1.0, 100.0, 1000.0)]
    for offset in (-1e4, 1e4):
        log_z, marginals = _solve(matrices, single_root)
        shifted_z, shifted = _solve([matrix + offset for matrix in matrices], single_root)
        for matrix, a, b, mu, nu in zip(matrices, log_z, shifted_z, marginals, shifted):
            n = matrix.shape[0] - 1
            assert abs(b - a - n * offset) <= RTOL * abs(b)
            np.testing.assert_allclose(mu, nu, rtol=0, atol=ATOL)


# ---------------------------------------------------------------------------------------------
# long sentences against decimal arithmetic


def _long_sentence(n, scale, seed):
    """Normal scores, a tenth of them forbidden (the chain 0 -> 1 -> ... -> n kept), and a
    column of tied scores."""
    rng = np.random.default_rng(seed)
    matrix = scale * rng.normal(size=(n + 1, n + 1))
    matrix[rng.random(matrix.shape) < 0.1] = -np.inf
    matrix[np.arange(n), np.arange(1, n + 1)] = scale * rng.normal(size=n)
    matrix[:, n // 2] = scale * rng.integers(-1, 2, size=n + 1)
    return matrix


LONG = [(30, 50.0), (30, 500.0), (60, 50.0), (60, 500.0)]
LONG_IDS = [f"n{n}-scale{scale:g}" for n, scale in LONG]


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
@pytest.mark.parametrize("n, scale", LONG, ids=LONG_IDS)
def test_long_sentences_match_decimal_arithmetic(n, scale, single_root):
    """log Z and the marginals (of every token for n = 30, of six tokens for n = 60)."""
    matrix = _long_sentence(n, scale, seed=n + int(scale))
    columns = None if n <= 30 else [1, 2, n // 2, n // 2 + 1, n - 1, n]
    expected_z, expected_mu = elimination_reference(matrix, single_root, tokens=columns)
    log_z, marginals = _solve([matrix], single_root)
    _assert_matches(matrix, log_z[0], marginals[0], expected_z, expected_mu, columns)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
def test_decimal_references_agree(single_root):
    """The subtraction-free decimal elimination against Gauss-Jordan inversion of Koo et
    al.'s matrices in 300 digits (scores spreading over about 300 nats)."""
    matrix = _long_sentence(30, 50.0, seed=3)
    expected_z, expected_mu = laplacian_reference(matrix, single_root, digits=300)
    log_z, mu = elimination_reference(matrix, single_root)
    assert abs(log_z - expected_z) <= 1e-15 * abs(expected_z)
    np.testing.assert_allclose(mu, expected_mu, rtol=0, atol=1e-15)


@pytest.mark.parametrize("single_root", ROOTS, ids=ROOT_IDS)
@pytest.mark.parametrize("n, scale", LONG, ids=LONG_IDS)
def test_long_sentences_are_consistent(n, scale, single_root):
    """Every token has one head (for single root, the root one child), log Z is at least
    the best tree's score, and dlog Z / dscore[h, m] is the marginal (central differences
    on the 20 most uncertain arcs and 20 others)."""
    matrix = _long_sentence(n, scale, seed=2 * n + int(scale))
    log_z, (mu,) = _solve([matrix], single_root)
    np.testing.assert_allclose(mu[:, 1:].sum(axis=0), 1.0, rtol=0, atol=ATOL)
    if single_root:
        assert abs(mu[0, 1:].sum() - 1.0) <= ATOL
    assert np.all((mu >= 0.0) & (mu <= 1.0))
    _, best = decode_trees(matrix.ravel(), [n], projective=False, single_root=single_root)
    assert log_z[0] >= best[0] - RTOL * abs(best[0])
    arcs = np.argwhere(np.isfinite(matrix) & (np.arange(n + 1)[None, :] > 0)
                       & ~np.eye(n + 1, dtype=bool))
    uncertainty = mu[tuple(arcs.T)] * (1.0 - mu[tuple(arcs.T)])
    rng = np.random.default_rng(n)
    chosen = np.concatenate([np.argsort(-uncertainty, kind="stable")[:20],
                             rng.choice(len(arcs), size=20, replace=False)])
    step = 1e-4
    shifted = []
    for h, m in arcs[chosen]:
        for sign in (1.0, -1.0):
            copy = matrix.copy()
            copy[h, m] += sign * step
            shifted.append(copy)
    values, _ = _solve(shifted, single_root)
    numeric = (values[0::2] - values[1::2]) / (2 * step)
    np.testing.assert_allclose(numeric, mu[tuple(arcs[chosen].T)], rtol=0, atol=1e-6)
