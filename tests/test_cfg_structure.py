"""ConstituencyTree: oracles, statistics, losses and compiled kernels against enumeration of
every tree of tiny grammars."""

import pickle

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.base import clone

from sklstruct._inference.cfg import Grammar, span_index
from sklstruct.structures import ConstituencyTree
from sklstruct.utils._sequences import SequenceBatch

from ._cfg_reference import enumerate_trees, random_cfg_problem


def _problem(seed, loss="brackets", loss_scale=1.0, label_brackets=None, n_features=3):
    spec, X, Y, lengths, n_words = random_cfg_problem(seed, n_features=n_features)
    grammar = Grammar(**spec)
    structure = ConstituencyTree(grammar, loss_type=loss, loss_scale=loss_scale,
                                 label_brackets=label_brackets).bind(
        n_features, grammar.n_labels + 1)
    batch = SequenceBatch(X, np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))
    rng = np.random.default_rng(seed)
    w = rng.normal(size=structure.size_joint_feature_)
    return spec, structure, batch, Y, n_words, w


def _examples(spec, batch, n_words):
    """Per example: its rows and every tree (span states) of its length."""
    for i, n in enumerate(n_words):
        rows = slice(batch.offsets[i], batch.offsets[i + 1])
        labels, counts, _ = enumerate_trees(int(n), **spec)
        yield i, rows, labels + 1, counts


def _scores(structure, batch, i, w, trees):
    """Score of every tree of example ``i``, from the joint feature map."""
    sub = batch.take([i])
    return np.array([w @ structure.joint_feature(sub, tree) for tree in trees])


def _loss(structure, batch, i, y, trees):
    sub = batch.take([i])
    return np.array([structure.loss(sub, y, tree)[0] for tree in trees])


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_statistics_are_the_rule_counts(seed):
    spec, structure, batch, Y, n_words, _w = _problem(seed)
    per_sequence = structure.pairwise_statistics(batch, Y, per_sequence=True)
    weights = np.arange(1.0, batch.n_sequences + 1)
    np.testing.assert_allclose(structure.pairwise_statistics(batch, Y, weights=weights),
                               weights @ per_sequence)
    for i, rows, trees, counts in _examples(spec, batch, n_words):
        t = [k for k, tree in enumerate(trees) if np.array_equal(tree, Y[rows])]
        assert len(t) == 1
        np.testing.assert_array_equal(per_sequence[i], counts[t[0]])
    blocks = structure.pairwise_count_blocks(batch)
    assert blocks[0][:2] == (0, structure.n_pairwise_)
    np.testing.assert_array_equal(per_sequence.sum(axis=1), blocks[0][2])


@pytest.mark.parametrize("seed", SEEDS)
def test_decode_and_loss_augmented_decode_equal_enumeration(seed):
    spec, structure, batch, Y, n_words, w = _problem(seed)
    unary, pairwise = structure.potentials(batch, w)
    labels = structure.decode(batch, unary, pairwise)
    aug, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, Y)
    for i, rows, trees, _ in _examples(spec, batch, n_words):
        values = _scores(structure, batch, i, w, trees)
        loss = _loss(structure, batch, i, Y[rows], trees)
        np.testing.assert_allclose(_scores(structure, batch, i, w, [labels[rows]]),
                                   values.max(), rtol=1e-12)
        best = np.max(values + loss)
        np.testing.assert_allclose(scores[i] + losses[i], best, rtol=1e-12)
        np.testing.assert_allclose(_scores(structure, batch, i, w, [aug[rows]]), scores[i],
                                   rtol=1e-12)
        np.testing.assert_allclose(_loss(structure, batch, i, Y[rows], [aug[rows]]),
                                   losses[i], rtol=1e-12)
    np.testing.assert_allclose(structure.score(batch, unary, pairwise, labels),
                               [_scores(structure, batch, i, w, [labels[rows]])[0]
                                for i, rows, _, _ in _examples(spec, batch, n_words)])


@pytest.mark.parametrize("rescale", ["margin", "slack"])
@pytest.mark.parametrize("seed", SEEDS)
def test_zero_one_loss_augmented_decode_equals_enumeration(seed, rescale):
    spec, structure, batch, Y, n_words, w = _problem(seed, loss="zero_one", loss_scale=2.5)
    unary, pairwise = structure.potentials(batch, w * 0.3)
    labels, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, Y,
                                                             rescale=rescale)
    true_scores = structure.score(batch, unary, pairwise, Y)
    for i, rows, trees, _ in _examples(spec, batch, n_words):
        values = _scores(structure, batch, i, w * 0.3, trees)
        loss = _loss(structure, batch, i, Y[rows], trees)
        assert set(loss) <= {0.0, 2.5}
        if rescale == "margin":
            objective = loss + values - true_scores[i]
        else:
            objective = loss * (1 + values - true_scores[i])
        best = max(objective.max(), 0.0)
        got = losses[i] + scores[i] - true_scores[i] if rescale == "margin" else \
            losses[i] * (1 + scores[i] - true_scores[i])
        np.testing.assert_allclose(got, best, rtol=1e-12, atol=1e-12)
        assert losses[i] == _loss(structure, batch, i, Y[rows], [labels[rows]])[0]
    np.testing.assert_array_equal(structure.max_loss(batch, Y), 2.5)


@pytest.mark.parametrize("seed", SEEDS)
def test_marginals_equal_enumeration(seed):
    spec, structure, batch, _Y, n_words, w = _problem(seed)
    unary, pairwise = structure.potentials(batch, w)
    node, pair, log_z = structure.marginals(batch, unary, pairwise)
    _summed_node, summed_pair, _summed_log_z = structure.summed_marginals(batch, unary, pairwise)
    np.testing.assert_allclose(summed_pair, pair.sum(axis=0))
    for i, rows, trees, counts in _examples(spec, batch, n_words):
        values = _scores(structure, batch, i, w, trees)
        expected = logsumexp(values)
        np.testing.assert_allclose(log_z[i], expected, rtol=1e-12)
        p = np.exp(values - expected)
        onehot = np.zeros((len(trees), rows.stop - rows.start, structure.n_states_))
        for t, tree in enumerate(trees):
            onehot[t, np.arange(tree.shape[0]), tree] = 1.0
        np.testing.assert_allclose(node[rows], np.einsum("t,tsk->sk", p, onehot), atol=1e-12)
        np.testing.assert_allclose(pair[i], p @ counts, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_bracket_loss_counts_brackets_in_one_tree_only(seed):
    """With label_brackets, the loss is the size of the multiset difference of brackets."""
    spec = random_cfg_problem(seed)[0]
    K = len(spec["top"])
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 3, size=(K, 2))
    _, structure, batch, Y, n_words, _ = _problem(seed, label_brackets=counts, loss_scale=0.5)

    def brackets(tree, start, end):
        found = {}
        for s in np.flatnonzero(tree):
            for kind in range(2):
                key = (int(start[s]), int(end[s]), kind)
                found[key] = found.get(key, 0) + counts[tree[s] - 1, kind]
        return found

    for i, rows, trees, _ in _examples(spec, batch, n_words):
        start, end = span_index(int(n_words[i]))
        true = brackets(Y[rows], start, end)
        for tree, loss in zip(trees, _loss(structure, batch, i, Y[rows], trees)):
            pred = brackets(tree, start, end)
            keys = set(true) | set(pred)
            expected = sum(abs(true.get(k, 0) - pred.get(k, 0)) for k in keys)
            assert loss == pytest.approx(0.5 * expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_compiled_kernels_equal_the_batch_oracles(seed):
    _spec, structure, batch, Y, _n_words, w = _problem(seed)
    unary, pairwise = structure.potentials(batch, w)
    kernels = structure.example_kernels(batch)
    assert (kernels.n_states, kernels.n_pairwise) == (structure.n_states_,
                                                      structure.n_pairwise_)
    token_loss = structure.token_loss(Y)
    aug, _, _ = structure.loss_augmented_decode(batch, unary, pairwise, Y)
    node, pair, log_z = structure.marginals(batch, unary, pairwise)
    for i in range(batch.n_sequences):
        rows = slice(batch.offsets[i], batch.offsets[i + 1])
        labels = kernels.max_oracle_example(i, unary[rows], token_loss[rows], pairwise)
        sub = batch.take([i])
        value = structure.score(sub, unary[rows], pairwise, labels) \
            + structure.loss(sub, Y[rows], labels)
        expected = structure.score(sub, unary[rows], pairwise, aug[rows]) \
            + structure.loss(sub, Y[rows], aug[rows])
        np.testing.assert_allclose(value, expected, rtol=1e-12)
        np.testing.assert_array_equal(kernels.pairwise_statistics_example(i, Y[rows]),
                                      structure.pairwise_statistics(sub, Y[rows]))
        k_node, k_pair, k_log_z = kernels.marginals_example(i, unary[rows], pairwise)
        np.testing.assert_allclose(k_node, node[rows], atol=1e-12)
        np.testing.assert_allclose(k_pair, pair[i], atol=1e-12)
        np.testing.assert_allclose(k_log_z, log_z[i], rtol=1e-12)


def test_a_labelling_that_is_not_a_tree_is_refused():
    _spec, structure, batch, Y, _n_words, _w = _problem(3)
    bad = Y.copy()
    bad[batch.offsets[-1] - 1] = 0  # the root span of the last sentence
    with pytest.raises(ValueError, match="not a tree of the grammar"):
        structure.pairwise_statistics(batch, bad)
    with pytest.raises(ValueError, match="n \\(n \\+ 1\\) / 2"):
        structure.pairwise_statistics(SequenceBatch(batch.X[:2], np.array([0, 2])), Y[:2])
    # the compiled kernels too: every span labelled (n (n - 1) / 2 rules for a buffer of
    # n - 1 entries) wrote past the buffer and corrupted the heap
    grammar = Grammar(top=[0], bottom=[0], lexical=[True], phrasal=[True], root=[True],
                      rules=[[0, 0, 0]])
    rows = 60 * 61 // 2  # (60 words)
    tree = ConstituencyTree(grammar).bind(4, 2)
    kernels = tree.example_kernels(SequenceBatch(np.zeros((rows, 4)), np.array([0, rows])))
    with pytest.raises(ValueError, match="not a tree of the grammar"):
        kernels.pairwise_statistics_example(0, np.ones(rows, dtype=np.int64))


def test_bind_checks_its_configuration():
    _spec, structure, batch, Y, _n_words, w = _problem(0)
    grammar = structure.grammar
    K = grammar.n_labels
    with pytest.raises(TypeError, match="Grammar"):
        ConstituencyTree().bind(3, 3)
    with pytest.raises(ValueError, match=f"needs {K + 1} states"):
        ConstituencyTree(grammar).bind(3, K)
    for params, match in [({"loss_type": "hamming"}, "loss_type must be"),
                          ({"loss_scale": 0.0}, "loss_scale"),
                          ({"loss_scale": np.inf}, "loss_scale"),
                          ({"label_brackets": np.ones((K + 1, 2))}, "label_brackets"),
                          ({"label_brackets": -np.ones((K, 2))}, "non-negative")]:
        with pytest.raises(ValueError, match=match):
            ConstituencyTree(grammar, **params).bind(3, K + 1)
    with pytest.raises(ValueError, match="margin rescaling only"):
        structure.loss_augmented_decode(batch, *structure.potentials(batch, w), Y,
                                        rescale="slack")
    zero_one = ConstituencyTree(grammar, loss_type="zero_one").bind(3, K + 1)
    assert not zero_one.loss_decomposes and structure.loss_decomposes
    with pytest.raises(ValueError, match="does not decompose"):
        zero_one.token_loss(Y)


def test_clone_and_pickle():
    _spec, structure, batch, _Y, _n_words, w = _problem(5)
    for copy in (clone(ConstituencyTree(structure.grammar, loss_type="zero_one")),
                 pickle.loads(pickle.dumps(structure))):
        bound = copy.bind(3, structure.n_states_)
        unary, pairwise = bound.potentials(batch, w)
        np.testing.assert_array_equal(bound.decode(batch, unary, pairwise),
                                      structure.decode(batch, unary, pairwise))


def test_empty_batch_and_sentence_without_tree():
    _spec, structure, _batch, _Y, _n_words, _w = _problem(1)
    empty = SequenceBatch(np.zeros((0, 3)), np.zeros(1, dtype=np.int64))
    assert structure.decode(empty, np.zeros((0, structure.n_states_)),
                            np.zeros(structure.n_pairwise_)).shape == (0,)
    node, _pair, log_z = structure.marginals(empty, np.zeros((0, structure.n_states_)),
                                            np.zeros(structure.n_pairwise_))
    assert node.shape == (0, structure.n_states_) and log_z.shape == (0,)
    # a grammar whose only rule builds nothing the root allows: no tree over two words
    grammar = Grammar(top=[0, 1], bottom=[0, 1], lexical=[True, False], phrasal=[False, True],
                      root=[False, True], rules=[[0, 0, 0]])
    lone = ConstituencyTree(grammar).bind(1, 3)
    labels = lone.decode(SequenceBatch(np.ones((3, 1)), np.array([0, 3])), np.zeros((3, 3)),
                         np.zeros(1))
    np.testing.assert_array_equal(labels, 0)
