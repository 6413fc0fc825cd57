"""CKY kernels for weighted context-free grammars against enumeration of every tree."""

import itertools
import pickle
import re

import numpy as np
import pytest

from sklstruct._inference.cfg import (
    Grammar,
    check_span_tree,
    cky_best_other,
    cky_decode,
    cky_kbest,
    inside_outside,
    log_partition,
    span_index,
    span_offsets,
    span_position,
    tree_score,
)

from ._cfg_reference import (
    best_tree,
    distribution,
    enumerate_trees,
    inside_outside_dp,
    span_rows,
    tree_scores,
)


def _random_grammar(rng, n_symbols, n_labels, n_rules):
    """A grammar as a dict of arrays: random chains, masks and rules (in random order)."""
    top = rng.integers(n_symbols, size=n_labels)
    bottom = np.where(rng.random(n_labels) < 0.5, top, rng.integers(n_symbols, size=n_labels))
    lexical = rng.random(n_labels) < 0.5
    lexical[rng.integers(n_labels)] = True
    phrasal = rng.random(n_labels) < 0.6
    phrasal[rng.integers(n_labels)] = True
    root = rng.random(n_symbols) < 0.5
    root[rng.integers(n_symbols)] = True
    every_rule = np.array(list(itertools.product(range(n_symbols), repeat=3)))
    rules = every_rule[rng.choice(len(every_rule), size=n_rules, replace=False)]
    return dict(top=top, bottom=bottom, lexical=lexical, phrasal=phrasal, root=root,
                rules=rules.reshape(-1, 3))


def _draw(rng, shape, integer, scale):
    """Integer scores in -2..2 (exact sums, many ties) or Gaussian ones times ``scale``."""
    if integer:
        return rng.integers(-2, 3, size=shape).astype(np.float64)
    return rng.normal(size=shape) * scale


def _case(seed, integer, scale=1.0, max_length=4):
    """A tiny random grammar and a batch of 4 sentences with about 15% forbidden labels."""
    rng = np.random.default_rng(seed)
    n_symbols = int(rng.integers(1, 4))
    n_labels = int(rng.integers(1, 5))
    n_rules = int(rng.integers(0, n_symbols ** 3 + 1))
    spec = _random_grammar(rng, n_symbols, n_labels, n_rules)
    lengths = rng.integers(1, max_length + 1, size=4)
    offsets = span_offsets(lengths)
    span_scores = _draw(rng, (offsets[-1], n_labels), integer, scale)
    span_scores[rng.random(span_scores.shape) < 0.15] = -np.inf
    rule_scores = _draw(rng, n_rules, integer, scale)
    return spec, Grammar(**spec), lengths, offsets, span_scores, rule_scores


_TREES = {}


def _trees(spec, n):
    """Enumerated trees of a grammar over ``n`` words (cached per grammar and length)."""
    key = (n,) + tuple(np.asarray(value).tobytes() for value in spec.values())
    if key not in _TREES:
        _TREES[key] = enumerate_trees(n, **spec)
    return _TREES[key]


def _sentences(spec, lengths, offsets, span_scores, rule_scores):
    """Per sentence: its rows, and its enumerated trees with their scores."""
    for i, n in enumerate(lengths):
        labels, counts, keys = _trees(spec, int(n))
        rows = slice(offsets[i], offsets[i + 1])
        yield i, rows, labels, counts, keys, tree_scores(labels, counts, span_scores[rows],
                                                         rule_scores)


def _assert_scores(actual, expected, integer):
    if integer:
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


def test_span_layout():
    for n in range(1, 7):
        start, end = span_index(n)
        rows = span_rows(n)
        assert start.shape == (n * (n + 1) // 2,)
        for s, (i, j) in enumerate(zip(start, end)):
            assert rows[int(i), int(j)] == s
        np.testing.assert_array_equal(span_position(start, end, n), np.arange(start.size))
        assert span_position(0, n, n) == start.size - 1
        np.testing.assert_array_equal(start[:n], np.arange(n))
    np.testing.assert_array_equal(span_offsets([1, 3, 2]), [0, 1, 7, 10])


CASES = [(seed, integer) for seed in range(24) for integer in (True, False)]


@pytest.mark.parametrize("seed, integer", CASES)
def test_decode_equals_enumeration(seed, integer):
    spec, grammar, lengths, offsets, span_scores, rule_scores = _case(seed, integer)
    labels, scores = cky_decode(span_scores, lengths, grammar, rule_scores)
    for i, rows, trees, counts, keys, values in _sentences(spec, lengths, offsets,
                                                          span_scores, rule_scores):
        expected, best = best_tree(values, trees, keys)
        if expected is None:
            assert scores[i] == -np.inf
            assert np.all(labels[rows] == -1)
            continue
        _assert_scores(scores[i], best, integer)
        finite = np.sort(values[np.isfinite(values)])
        # the tie rule is checked where sums are exact, the argmax where it is clear
        if integer or finite.size == 1 or finite[-1] - finite[-2] > 1e-9:
            np.testing.assert_array_equal(labels[rows], expected)
    found = np.isfinite(scores)
    if found.any():
        kept = np.repeat(found, np.diff(offsets))
        _assert_scores(tree_score(labels[kept], span_scores[kept], lengths[found], grammar,
                                  rule_scores), scores[found], integer)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("seed, integer", CASES[::2] + CASES[1::4])
def test_kbest_equals_enumeration(k, seed, integer):
    spec, grammar, lengths, offsets, span_scores, rule_scores = _case(seed + 100, integer)
    labels, scores, counts = cky_kbest(span_scores, lengths, grammar, rule_scores, k=k)
    assert labels.shape == (offsets[-1], k) and scores.shape == (len(lengths), k)
    best_labels, best = cky_decode(span_scores, lengths, grammar, rule_scores)
    for i, rows, trees, uses, keys, values in _sentences(spec, lengths, offsets, span_scores,
                                                        rule_scores):
        expected = np.sort(values[np.isfinite(values)])[::-1][:k]
        assert counts[i] == expected.size
        _assert_scores(scores[i, :counts[i]], expected, integer)
        assert np.all(scores[i, counts[i]:] == -np.inf)
        assert np.all(labels[rows, counts[i]:] == -1)
        found = [tuple(labels[rows, j]) for j in range(counts[i])]
        assert len(set(found)) == len(found)
        known = {tuple(tree): t for t, tree in enumerate(trees)}
        for j, tree in enumerate(found):
            # a tree of the grammar, scored as reported
            _assert_scores(values[known[tree]], scores[i, j], integer)
        if counts[i]:
            np.testing.assert_array_equal(labels[rows, 0], best_labels[rows])
            assert scores[i, 0] == best[i]


@pytest.mark.parametrize("seed, integer", CASES[:24])
def test_best_other_equals_enumeration(seed, integer):
    spec, grammar, lengths, offsets, span_scores, rule_scores = _case(seed + 200, integer)
    rng = np.random.default_rng(seed)
    best_labels, _ = cky_decode(span_scores, lengths, grammar, rule_scores)
    random_trees = np.full(offsets[-1], -1)
    pools = {}
    for i, rows, trees, _, _, values in _sentences(spec, lengths, offsets, span_scores,
                                                   rule_scores):
        pools[i] = (rows, trees, values)
        if len(trees):
            random_trees[rows] = trees[rng.integers(len(trees))]
    for exclude in (best_labels, random_trees):
        labels, scores = cky_best_other(span_scores, lengths, grammar, exclude, rule_scores)
        for i, (rows, trees, values) in pools.items():
            other = np.array([not np.array_equal(tree, exclude[rows]) for tree in trees],
                             dtype=bool)
            candidates = values[other] if other.size else values
            candidates = candidates[np.isfinite(candidates)]
            if not candidates.size:
                assert scores[i] == -np.inf and np.all(labels[rows] == -1)
                continue
            _assert_scores(scores[i], candidates.max(), integer)
            assert not np.array_equal(labels[rows], exclude[rows])
            check_span_tree(labels[rows], lengths[i:i + 1], grammar)


@pytest.mark.parametrize("scale", [1.0, 100.0, 1000.0])
@pytest.mark.parametrize("seed", range(16))
def test_inside_outside_equals_enumeration(seed, scale):
    spec, grammar, lengths, offsets, span_scores, rule_scores = _case(seed + 300, False,
                                                                      scale)
    marginals, rule_counts, log_z = inside_outside(span_scores, lengths, grammar,
                                                   rule_scores)
    np.testing.assert_array_equal(log_partition(span_scores, lengths, grammar, rule_scores),
                                  log_z)
    for i, rows, trees, uses, _, values in _sentences(spec, lengths, offsets, span_scores,
                                                      rule_scores):
        expected_log_z, expected_marginals, expected_counts = distribution(
            values, trees, uses, grammar.n_labels)
        if expected_log_z == -np.inf:
            assert log_z[i] == -np.inf
        else:
            np.testing.assert_allclose(log_z[i], expected_log_z, rtol=1e-13)
        np.testing.assert_allclose(marginals[rows], expected_marginals, rtol=1e-10,
                                   atol=1e-14)
        np.testing.assert_allclose(rule_counts[i], expected_counts, rtol=1e-10, atol=1e-14)


def _medium_case(seed, scale, n_symbols=8, n_labels=14, n_rules=80, lengths=(1, 3, 6, 8)):
    rng = np.random.default_rng(seed)
    spec = _random_grammar(rng, n_symbols, n_labels, n_rules)
    lengths = np.array(lengths)
    offsets = span_offsets(lengths)
    span_scores = rng.normal(size=(offsets[-1], n_labels)) * scale
    span_scores[rng.random(span_scores.shape) < 0.3] = -np.inf
    return spec, Grammar(**spec), lengths, offsets, span_scores, rng.normal(size=n_rules) * scale


@pytest.mark.parametrize("scale", [1.0, 10.0, 100.0, 1000.0])
@pytest.mark.parametrize("seed", range(3))
def test_inside_outside_equals_log_space_recursion(seed, scale):
    """Grammars too large to enumerate, where the rescaled sums and their exact fallbacks
    (underflowing sums, anchors of large scale) all occur."""
    spec, grammar, lengths, offsets, span_scores, rule_scores = _medium_case(seed, scale)
    marginals, rule_counts, log_z = inside_outside(span_scores, lengths, grammar,
                                                   rule_scores)
    for i, n in enumerate(lengths):
        rows = slice(offsets[i], offsets[i + 1])
        expected_log_z, expected_marginals, expected_counts = inside_outside_dp(
            int(n), **spec, span_scores=span_scores[rows], rule_scores=rule_scores)
        if expected_log_z == -np.inf:
            assert log_z[i] == -np.inf
        else:
            np.testing.assert_allclose(log_z[i], expected_log_z, rtol=1e-13)
        # log values near 1e4 carry absolute rounding errors near 1e-12
        np.testing.assert_allclose(marginals[rows], expected_marginals, rtol=1e-10,
                                   atol=1e-11)
        np.testing.assert_allclose(rule_counts[i], expected_counts, rtol=1e-10, atol=1e-11)


def test_large_grammar_is_consistent():
    """30 symbols, 60 labels, 500 rules: the oracles agree with each other."""
    spec, grammar, lengths, offsets, span_scores, rule_scores = _medium_case(
        5, 1.0, n_symbols=30, n_labels=60, n_rules=500, lengths=(1, 2, 5, 9, 12))
    span_scores[np.isneginf(span_scores)] = -3.0
    labels, scores = cky_decode(span_scores, lengths, grammar, rule_scores)
    k_labels, k_scores, counts = cky_kbest(span_scores, lengths, grammar, rule_scores, k=10)
    found = np.isfinite(scores)
    assert found.sum() >= 3
    np.testing.assert_array_equal(k_scores[:, 0], scores)
    np.testing.assert_array_equal(k_labels[:, 0], labels)
    assert np.all(np.diff(k_scores, axis=1)[np.isfinite(k_scores[:, 1:])] <= 0)
    kept = np.repeat(found, np.diff(offsets))
    for j in range(10):
        some = counts > j
        rows = np.repeat(some, np.diff(offsets))
        np.testing.assert_allclose(
            tree_score(k_labels[rows, j], span_scores[rows], lengths[some], grammar,
                       rule_scores), k_scores[some, j], rtol=1e-12)
    other, other_scores = cky_best_other(span_scores, lengths, grammar, labels, rule_scores)
    two = counts >= 2
    np.testing.assert_array_equal(other_scores[two], k_scores[two, 1])
    marginals, rule_counts, log_z = inside_outside(span_scores, lengths, grammar, rule_scores)
    assert np.all(log_z[found] >= scores[found])
    assert np.all(log_z[~found] == -np.inf)
    for i, n in enumerate(lengths):
        if not found[i]:
            continue
        rows = slice(offsets[i], offsets[i + 1])
        np.testing.assert_allclose(marginals[rows][:n].sum(axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(marginals[rows].sum(), 2 * n - 1, rtol=1e-12)
        np.testing.assert_allclose(rule_counts[i].sum(), n - 1, rtol=1e-12, atol=1e-12)
    assert np.all(marginals[~kept] == 0)


def test_all_ties_follow_the_tie_rule():
    """Every tree scores 0: the decoded tree is the smallest serialisation, and the k best
    are distinct trees of the grammar."""
    spec = dict(top=[0, 1, 1, 0], bottom=[0, 1, 0, 1], lexical=[True, True, False, True],
                phrasal=[True, False, True, True], root=[True, True],
                rules=list(itertools.product(range(2), repeat=3)))
    grammar = Grammar(**spec)
    for n in range(1, 5):
        trees, _, keys = _trees(spec, n)
        span_scores = np.zeros((n * (n + 1) // 2, 4))
        labels, scores = cky_decode(span_scores, [n], grammar, np.zeros(8))
        np.testing.assert_array_equal(labels, trees[min(range(len(keys)), key=keys.__getitem__)])
        k_labels, k_scores, counts = cky_kbest(span_scores, [n], grammar, np.zeros(8), k=10)
        assert counts[0] == min(10, len(trees))
        assert len({tuple(column) for column in k_labels[:, :counts[0]].T}) == counts[0]
        np.testing.assert_array_equal(k_labels[:, 0], labels)
        again = cky_kbest(span_scores, [n], grammar, np.zeros(8), k=10)[0]
        np.testing.assert_array_equal(again, k_labels)


def test_sentences_without_a_tree():
    """No rule, a word whose labels are all forbidden, a root symbol nowhere allowed."""
    grammar = Grammar(top=[0, 1], bottom=[0, 1], lexical=[True, False],
                      phrasal=[False, True], root=[True, True], rules=[[1, 0, 0]])
    lengths = np.array([1, 2, 3, 2, 1])
    offsets = span_offsets(lengths)
    span_scores = np.zeros((offsets[-1], 2))
    span_scores[offsets[3]] = -np.inf            # sentence 3: its first word has no label
    span_scores[offsets[4]] = [-np.inf, 5.0]     # sentence 4: its word has no lexical label
    rule_scores = np.array([0.5])
    with np.errstate(all="raise"):
        labels, scores = cky_decode(span_scores, lengths, grammar, rule_scores)
        k_labels, k_scores, counts = cky_kbest(span_scores, lengths, grammar, rule_scores, k=3)
        other, other_scores = cky_best_other(span_scores, lengths, grammar, labels,
                                             rule_scores)
        marginals, rule_counts, log_z = inside_outside(span_scores, lengths, grammar,
                                                       rule_scores)
    has_tree = np.array([True, True, False, False, False])
    assert np.all(np.isfinite(scores) == has_tree)
    np.testing.assert_array_equal(counts, [1, 1, 0, 0, 0])
    assert np.all(other_scores == -np.inf) and np.all(other == -1)
    assert np.all(np.isfinite(log_z) == has_tree)
    for i in np.flatnonzero(~has_tree):
        rows = slice(offsets[i], offsets[i + 1])
        assert np.all(labels[rows] == -1) and np.all(k_labels[rows] == -1)
        assert np.all(marginals[rows] == 0) and np.all(rule_counts[i] == 0)
        assert np.all(k_scores[i] == -np.inf)
    assert not np.isnan(marginals).any() and not np.isnan(rule_counts).any()
    np.testing.assert_allclose(rule_counts[:, 0], [0, 1, 0, 0, 0])
    no_root = Grammar(top=[0], bottom=[0], lexical=[True], phrasal=[True], root=[False],
                      rules=[[0, 0, 0]])
    assert cky_decode(np.zeros((3, 1)), [2], no_root)[1][0] == -np.inf
    assert log_partition(np.zeros((3, 1)), [2], no_root)[0] == -np.inf


@pytest.mark.parametrize("seed", range(3))
def test_gradients_are_the_marginals_and_counts(seed):
    rng = np.random.default_rng(seed)
    spec = _random_grammar(rng, 4, 6, 30)
    for mask in ("lexical", "phrasal", "root"):
        spec[mask][:] = True
    grammar = Grammar(**spec)
    lengths = np.array([4, 5])
    span_scores = rng.normal(size=(25, 6))
    span_scores[rng.random(span_scores.shape) < 0.2] = -np.inf   # no derivative there
    rule_scores = rng.normal(size=30)
    marginals, rule_counts, log_z = inside_outside(span_scores, lengths, grammar, rule_scores)
    assert np.all(np.isfinite(log_z))
    step = 1e-5

    def total(scores, rules):
        return log_partition(scores, lengths, grammar, rules).sum()

    numeric = np.zeros_like(span_scores)
    for index in zip(*np.nonzero(np.isfinite(span_scores))):
        plus, minus = span_scores.copy(), span_scores.copy()
        plus[index] += step
        minus[index] -= step
        numeric[index] = (total(plus, rule_scores) - total(minus, rule_scores)) / (2 * step)
    np.testing.assert_allclose(numeric, marginals, atol=1e-8)
    assert np.all(marginals[np.isneginf(span_scores)] == 0)
    numeric = np.zeros_like(rule_scores)
    for r in range(rule_scores.size):
        plus, minus = rule_scores.copy(), rule_scores.copy()
        plus[r] += step
        minus[r] -= step
        numeric[r] = (total(span_scores, plus) - total(span_scores, minus)) / (2 * step)
    np.testing.assert_allclose(numeric, rule_counts.sum(axis=0), atol=1e-8)


def test_threads_give_the_same_results():
    spec, grammar, lengths, offsets, span_scores, rule_scores = _medium_case(
        7, 1.0, lengths=(5, 1, 7, 3, 6, 2, 4, 8))
    exclude = cky_decode(span_scores, lengths, grammar, rule_scores)[0]
    for function, extra in ((cky_decode, {}), (cky_kbest, {"k": 4}), (inside_outside, {}),
                            (log_partition, {})):
        alone = function(span_scores, lengths, grammar, rule_scores, **extra)
        threaded = function(span_scores, lengths, grammar, rule_scores, n_jobs=3, **extra)
        for a, b in zip(alone if isinstance(alone, tuple) else (alone,),
                        threaded if isinstance(threaded, tuple) else (threaded,)):
            np.testing.assert_array_equal(a, b)
    alone = cky_best_other(span_scores, lengths, grammar, exclude, rule_scores)
    threaded = cky_best_other(span_scores, lengths, grammar, exclude, rule_scores, n_jobs=2)
    for a, b in zip(alone, threaded):
        np.testing.assert_array_equal(a, b)


def test_empty_batch():
    grammar = Grammar(top=[0], bottom=[0], lexical=[True], phrasal=[True], root=[True],
                      rules=[[0, 0, 0]])
    empty = np.zeros((0, 1))
    labels, scores = cky_decode(empty, np.zeros(0, dtype=int), grammar)
    assert labels.shape == (0,) and scores.shape == (0,)
    assert cky_kbest(empty, np.zeros(0, dtype=int), grammar, k=2)[1].shape == (0, 2)
    assert inside_outside(empty, np.zeros(0, dtype=int), grammar)[1].shape == (0, 1)
    check_span_tree(np.zeros(0, dtype=int), np.zeros(0, dtype=int), grammar)


# A grammar for the tree checks: labels 0 (word, symbol 0), 1 (phrase S, root), 2 (phrase
# X+Y, top X = 2, bottom Y = 3, not a root); rules S -> 0 0, Y -> 0 0, S -> X 0.
CHECK_GRAMMAR = Grammar(top=[0, 1, 2], bottom=[0, 1, 3], lexical=[True, False, False],
                        phrasal=[False, True, True], root=[False, True, False, False],
                        rules=[[1, 0, 0], [3, 0, 0], [1, 2, 0]])
# n = 3, rows: [0,1) [1,2) [2,3) [0,2) [1,3) [0,3)
GOOD_TREE = [0, 0, 0, 2, -1, 1]


@pytest.mark.parametrize("labels, reason, span", [
    ([0, 0, 0, 2, -1, 5], "out of", "[0, 3)"),
    ([0, -1, 0, 2, -1, 1], "unlabelled word", "[1, 2)"),
    ([0, 1, 0, 2, -1, 1], "not lexical", "[1, 2)"),
    ([0, 0, 0, 2, -1, -1], "unlabelled root", "[0, 3)"),
    ([0, 0, 0, 2, -1, 2], "not allowed as a root", "[0, 3)"),
    ([0, 0, 0, 0, -1, 1], "not phrasal", "[0, 2)"),
    ([0, 0, 0, -1, -1, 1], "not nested", "[0, 3)"),
    ([0, 0, 0, 1, -1, 1], "not in the grammar", "[0, 3)"),
    ([0, 0, 0, 2, 2, 1], "crossing", "[1, 3)"),
])
def test_check_span_tree_names_the_problem(labels, reason, span):
    check_span_tree(GOOD_TREE, [3], CHECK_GRAMMAR)
    with pytest.raises(ValueError, match=f"sentence 2 .*{reason}.*{re.escape(span)}"):
        check_span_tree(np.array(GOOD_TREE + GOOD_TREE + labels), [3, 3, 3], CHECK_GRAMMAR)
    with pytest.raises(ValueError, match="sentence 0"):
        tree_score(labels, np.zeros((6, 3)), [3], CHECK_GRAMMAR)


def test_tree_score_sums_span_and_rule_scores():
    span_scores = np.arange(18, dtype=float).reshape(6, 3)
    span_scores[4] = -np.inf    # off the tree
    rule_scores = np.array([10.0, 20.0, 40.0])
    # nodes: words label 0 (0 + 3 + 6), [0,2) label 2 (11), root label 1 (16);
    # rules Y -> 0 0 at [0,2) and S -> X 0 at the root
    expected = 0 + 3 + 6 + 11 + 16 + 20 + 40
    np.testing.assert_array_equal(
        tree_score(GOOD_TREE, span_scores, [3], CHECK_GRAMMAR, rule_scores), [expected])
    span_scores[3, 2] = -np.inf
    assert tree_score(GOOD_TREE, span_scores, [3], CHECK_GRAMMAR, rule_scores)[0] == -np.inf


def test_grammar_is_immutable_and_pickles():
    grammar = CHECK_GRAMMAR
    with pytest.raises(AttributeError):
        grammar.top = [0, 0, 0]
    with pytest.raises(ValueError):
        grammar.top[0] = 1
    copy = pickle.loads(pickle.dumps(grammar))
    for name in ("top", "bottom", "lexical", "phrasal", "root", "rules"):
        np.testing.assert_array_equal(getattr(copy, name), getattr(grammar, name))
    assert (copy.n_labels, copy.n_symbols, copy.n_rules) == (3, 4, 3)
    assert "n_rules=3" in repr(copy)
    empty = Grammar(top=[0], bottom=[0], lexical=[True], phrasal=[True], root=[True],
                    rules=[])
    assert empty.n_rules == 0
    assert cky_decode(np.zeros((3, 1)), [2], empty)[1][0] == -np.inf


GOOD = dict(top=[0, 1], bottom=[0, 1], lexical=[True, False], phrasal=[False, True],
            root=[False, True], rules=[[1, 0, 0]])


@pytest.mark.parametrize("change, error, match", [
    ({"top": [0, 2]}, ValueError, "top must hold symbols"),
    ({"top": [0, -1]}, ValueError, "top must hold symbols"),
    ({"top": [0.0, 1.0]}, TypeError, "top must hold integers"),
    ({"top": []}, ValueError, "top must be a non-empty"),
    ({"bottom": [0]}, ValueError, "bottom must have shape"),
    ({"lexical": [True]}, ValueError, "lexical must have shape"),
    ({"phrasal": [0, 2]}, ValueError, "phrasal must hold booleans"),
    ({"phrasal": ["a", "b"]}, TypeError, "phrasal must be a boolean mask"),
    ({"root": []}, ValueError, "root must be a non-empty"),
    ({"rules": [[1, 0]]}, ValueError, "rules must have shape"),
    ({"rules": [[1, 0, 2]]}, ValueError, "rules must hold symbols"),
    ({"rules": [[1, 0, 0], [0, 1, 1], [1, 0, 0]]}, ValueError, "rules 0 and 2 are the same"),
])
def test_grammar_refuses_bad_input(change, error, match):
    with pytest.raises(error, match=match):
        Grammar(**{**GOOD, **change})


def _bad_calls():
    grammar = Grammar(**GOOD)
    scores = np.zeros((4, 2))     # sentences of 1 and 2 words
    lengths = [1, 2]
    nan, inf = scores.copy(), scores.copy()
    nan[0, 0] = np.nan
    inf[1, 1] = np.inf
    calls = []
    for name, function in (("cky_decode", cky_decode), ("cky_kbest", cky_kbest),
                           ("inside_outside", inside_outside),
                           ("log_partition", log_partition)):
        calls += [
            (name, function, (nan, lengths, grammar), {}, ValueError, "NaN or \\+inf"),
            (name, function, (inf, lengths, grammar), {}, ValueError, "NaN or \\+inf"),
            (name, function, (scores[:3], lengths, grammar), {}, ValueError, "shape \\(4, 2\\)"),
            (name, function, (scores.ravel(), lengths, grammar), {}, ValueError, "2-D"),
            (name, function, (scores.astype(object), lengths, grammar), {}, TypeError,
             "real numbers"),
            (name, function, (None, lengths, grammar), {}, TypeError, "span_scores"),
            (name, function, (scores, [1, 0, 2], grammar), {}, ValueError, "sentence 1 is empty"),
            (name, function, (scores, [1.0, 2.0], grammar), {}, TypeError, "lengths"),
            (name, function, (scores, [[1, 2]], grammar), {}, ValueError, "lengths must be 1-D"),
            (name, function, (scores, lengths, GOOD), {}, TypeError, "Grammar"),
            (name, function, (scores, lengths, grammar, [np.nan]), {}, ValueError, "rule_scores"),
            (name, function, (scores, lengths, grammar, [-np.inf]), {}, ValueError,
             "rule_scores"),
            (name, function, (scores, lengths, grammar, [1.0, 2.0]), {}, ValueError,
             "rule_scores must have shape"),
            (name, function, (scores, lengths, grammar), {"n_jobs": 0}, ValueError, "n_jobs"),
        ]
    calls += [
        ("cky_kbest", cky_kbest, (scores, lengths, grammar), {"k": 0}, ValueError, "k must"),
        ("cky_kbest", cky_kbest, (scores, lengths, grammar), {"k": 1.5}, TypeError, "k must"),
        ("cky_kbest", cky_kbest, (scores, lengths, grammar), {"k": True}, TypeError, "k must"),
        ("cky_best_other", cky_best_other, (scores, lengths, grammar, [0, 0, 0]), {},
         ValueError, "exclude must have shape"),
        ("cky_best_other", cky_best_other, (scores, lengths, grammar, np.zeros(4)), {},
         TypeError, "exclude must hold integers"),
        ("check_span_tree", check_span_tree, ([0, 0, 0], lengths, grammar), {}, ValueError,
         "span_labels must have shape"),
        ("check_span_tree", check_span_tree, ([0, 0, 0, 1], [1, 0], grammar), {}, ValueError,
         "sentence 1 is empty"),
        ("tree_score", tree_score, ([0, 0, 0, 1], nan, lengths, grammar), {}, ValueError,
         "NaN"),
        ("span_index", span_index, (0,), {}, ValueError, "at least 1"),
        ("span_position", span_position, (2, 2, 3), {}, ValueError, "start < end"),
        ("span_position", span_position, (0, 4, 3), {}, ValueError, "start < end"),
    ]
    return calls


@pytest.mark.parametrize("name, function, args, kwargs, error, match", _bad_calls(),
                         ids=lambda value: value if isinstance(value, str) else "")
def test_bad_input_is_refused(name, function, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        function(*args, **kwargs)


def test_lengths_whose_span_counts_overflow_are_refused():
    """Eight sentences of 2**62 words counted 0 span rows in int64: the chart was
    allocated empty and the CKY wrote past it (a segfault)."""
    from sklstruct._inference import cfg as cfg_kernels
    from sklstruct.structures import Grammar

    grammar = Grammar(top=[0, 1], bottom=[0, 1], lexical=[True, True],
                      phrasal=[True, True], root=[True, True], rules=[[0, 0, 0]])
    with pytest.raises(ValueError, match="more than 2\\*\\*31 - 1"):
        cfg_kernels.cky_decode(np.zeros((1, 2)), [2**62] * 8 + [1], grammar)
    with pytest.raises(ValueError, match="more than 2\\*\\*62 spans"):
        cfg_kernels.span_offsets([2**30] * 9)
