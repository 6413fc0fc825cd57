"""The compiled oracles of the graph structures against exhaustive enumeration.

Kernels (:mod:`sklstruct._inference._graph_kernels`): enumeration on graphs of any shape,
the per-example max-oracle, pairwise entries and marginals, and the structures' batched
decoding, loss-augmented decoding and marginals on random forests and loopy graphs of up to
8 nodes.
"""

import numpy as np
import pytest
from scipy.special import logsumexp

from sklstruct import GraphStructure, TreeStructure
from sklstruct._inference.graph import enumerate_map, enumerate_marginals
from sklstruct.utils._sequences import ExampleArrays, SequenceBatch, offsets_from_lengths

from ._graph_reference import (all_labellings, brute_force_marginals, brute_force_max,
                               labelling_scores)
from .test_graph_kernels import potentials, random_forest, random_graph, stack

ATOL = 1e-9


# --- enumeration on any graph -----------------------------------------------------------


@pytest.mark.parametrize("integer", [False, True], ids=["random", "ties"])
def test_enumerate_map_matches_brute_force(integer):
    rng = np.random.default_rng(1)
    graphs = []
    for _ in range(60):
        n, S = int(rng.integers(1, 8)), int(rng.integers(1, 4))
        edges = random_graph(rng, n, 0.6)
        graphs.append((*potentials(rng, n, edges.shape[0], S, integer)[:1], edges,
                       potentials(rng, n, edges.shape[0], S, integer)[1]))
    for unary, edges, pairwise in graphs:
        n = unary.shape[0]
        labels, scores = enumerate_map(unary, [0, n], edges, [0, edges.shape[0]], pairwise)
        best, maximisers = brute_force_max(unary, edges, pairwise)
        assert scores[0] == pytest.approx(best, abs=ATOL)
        assert labelling_scores(unary, edges, pairwise, labels)[0] == pytest.approx(best,
                                                                                   abs=ATOL)
        if integer:
            assert (maximisers == labels).all(axis=1).any()


def test_enumerate_marginals_match_brute_force_and_stay_finite():
    rng = np.random.default_rng(2)
    for scale in (1.0, 1e3):
        for _ in range(40):
            n, S = int(rng.integers(1, 7)), int(rng.integers(2, 4))
            edges = random_graph(rng, n, 0.7)
            unary, pairwise = potentials(rng, n, edges.shape[0], S, scale=scale)
            node, edge, log_z = enumerate_marginals(unary, [0, n], edges,
                                                    [0, edges.shape[0]], pairwise)
            ref_z, ref_node, ref_edge = brute_force_marginals(unary, edges, pairwise)
            assert np.all(np.isfinite(node)) and np.isfinite(log_z[0])
            assert log_z[0] == pytest.approx(ref_z, rel=1e-12, abs=1e-9)
            np.testing.assert_allclose(node, ref_node, atol=1e-9)
            np.testing.assert_allclose(edge, ref_edge, atol=1e-9)


def test_enumeration_batches_equal_graph_by_graph():
    rng = np.random.default_rng(3)
    graphs = []
    for _ in range(6):
        n = int(rng.integers(1, 6))
        edges = random_graph(rng, n, 0.8)
        unary, pairwise = potentials(rng, n, edges.shape[0], 3)
        graphs.append((unary, edges, pairwise))
    unary, node_offsets, edges, edge_offsets, pairwise = stack(graphs)
    labels, scores = enumerate_map(unary, node_offsets, edges, edge_offsets, pairwise,
                                   n_jobs=2)
    node, _, log_z = enumerate_marginals(unary, node_offsets, edges, edge_offsets, pairwise)
    for g, (u, e, p) in enumerate(graphs):
        lo, hi = node_offsets[g], node_offsets[g + 1]
        one_labels, one_scores = enumerate_map(u, [0, u.shape[0]], e, [0, e.shape[0]], p)
        assert scores[g] == one_scores[0]
        np.testing.assert_array_equal(labels[lo:hi], one_labels)
        assert log_z[g] == pytest.approx(brute_force_marginals(u, e, p)[0], rel=1e-12)
        np.testing.assert_allclose(node[lo:hi], brute_force_marginals(u, e, p)[1], atol=1e-9)


def test_enumeration_refuses_bad_input():
    with pytest.raises(ValueError, match="more than enumeration takes"):
        enumerate_map(np.zeros((30, 2)), [0, 30], np.zeros((0, 2), int), [0, 0],
                      np.zeros((0, 2, 2)))
    with pytest.raises(ValueError, match="self-loop"):
        enumerate_marginals(np.zeros((3, 2)), [0, 3], [[1, 1]], [0, 1], np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="NaN|finite"):
        enumerate_map(np.full((2, 2), np.nan), [0, 2], [[0, 1]], [0, 1], np.zeros((1, 2, 2)))


# --- the structures' oracles on random graphs --------------------------------------------


def graph_batch(rng, graphs, n_features=2, n_edge_features=None):
    """A batch of graphs (with random node and, if asked, edge features)."""
    lengths = [n for n, _ in graphs]
    edges = np.concatenate([e for _, e in graphs]).astype(np.int64).reshape(-1, 2)
    edge_offsets = offsets_from_lengths([e.shape[0] for _, e in graphs])
    extras = {"edges": ExampleArrays(edges, edge_offsets)}
    if n_edge_features:
        extras["edge_features"] = ExampleArrays(
            rng.normal(size=(edges.shape[0], n_edge_features)), edge_offsets)
    X = rng.normal(size=(sum(lengths), n_features))
    return SequenceBatch(X, offsets_from_lengths(lengths), extras=extras)


def bound_structure(structure, batch, n_states):
    bound = structure.bind(batch.X.shape[1], n_states, np.arange(n_states))
    return bound.bind_batch(batch, np.zeros(batch.n_tokens, dtype=np.intp))


def reference_potentials(structure, batch, i, theta):
    """Edge potentials of example ``i`` computed from the definition: ``sum_k f_ek
    Theta_k`` with ``Theta_k`` read off the parameters (symmetric unless directed)."""
    S, K = structure.n_states_, structure.n_edge_features_
    edges = batch.extra("edges").of(i)
    features = batch.extra("edge_features")
    f = np.ones((edges.shape[0], 1)) if features is None else features.of(i)
    blocks = theta.reshape(K, -1)
    thetas = np.zeros((K, S, S))
    if structure.directed:
        thetas = blocks.reshape(K, S, S)
    else:
        rows, cols = np.triu_indices(S)
        thetas[:, rows, cols] = blocks
        thetas[:, cols, rows] = blocks
    return edges, np.einsum("ek,kab->eab", f, thetas)


def check_oracles_against_enumeration(structure, batch, S, rng, loss_augmented=True,
                                      marginals=True):
    theta = rng.normal(size=structure.n_pairwise_) * 1.5
    unary = rng.normal(size=(batch.n_tokens, S))
    Y = rng.integers(0, S, size=batch.n_tokens)
    token_loss = structure.token_loss(Y)
    labels = structure.decode(batch, unary, theta)
    augmented, losses, plain = structure.loss_augmented_decode(batch, unary, theta, Y)
    if marginals:
        node, pair, log_z = structure.marginals(batch, unary, theta)
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        edges, P = reference_potentials(structure, batch, i, theta)
        best, _ = brute_force_max(unary[lo:hi], edges, P)
        assert labelling_scores(unary[lo:hi], edges, P, labels[lo:hi])[0] == pytest.approx(
            best, abs=ATOL)
        if loss_augmented:
            best_aug, _ = brute_force_max(unary[lo:hi] + token_loss[lo:hi], edges, P)
            got = labelling_scores(unary[lo:hi] + token_loss[lo:hi], edges, P,
                                   augmented[lo:hi])[0]
            assert got == pytest.approx(best_aug, abs=ATOL)
            assert losses[i] == pytest.approx(
                token_loss[np.arange(lo, hi), augmented[lo:hi]].sum())
            assert plain[i] == pytest.approx(
                labelling_scores(unary[lo:hi], edges, P, augmented[lo:hi])[0])
        if marginals:
            ref_z, ref_node, _ = brute_force_marginals(unary[lo:hi], edges, P)
            assert log_z[i] == pytest.approx(ref_z, rel=1e-11, abs=1e-9)
            np.testing.assert_allclose(node[lo:hi], ref_node, atol=1e-9)
            # expected statistics: sum over labellings of p(y) Psi_pair(y)
            sub = batch.take([i])
            everything = all_labellings(hi - lo, S)
            scores = labelling_scores(unary[lo:hi], edges, P, everything)
            p = np.exp(scores - logsumexp(scores))
            stats = np.array([structure.pairwise_statistics(sub, y) for y in everything])
            np.testing.assert_allclose(pair[i], p @ stats, atol=1e-9)
            # and the pairwise statistics score the pairwise part of the labelling
            k = int(rng.integers(everything.shape[0]))
            assert stats[k] @ theta == pytest.approx(
                scores[k] - unary[np.arange(lo, hi), everything[k]].sum(), abs=1e-9)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("n_edge_features", [None, 3])
def test_forest_oracles_equal_enumeration(directed, n_edge_features):
    rng = np.random.default_rng(10 + directed + (n_edge_features or 0))
    graphs = []
    for _ in range(10):
        n = int(rng.integers(1, 9))
        graphs.append((n, random_forest(rng, n, n_dropped=int(rng.integers(0, 2)))))
    for S in (2, 3):
        if S == 3 and max(n for n, _ in graphs) > 7:
            graphs = [(min(n, 7), random_forest(rng, min(n, 7))) for n, _ in graphs]
        batch = graph_batch(rng, graphs, n_edge_features=n_edge_features)
        structure = bound_structure(TreeStructure(directed=directed), batch, S)
        check_oracles_against_enumeration(structure, batch, S, rng)


@pytest.mark.parametrize("directed", [False, True])
def test_small_loopy_graphs_are_enumerated_exactly(directed):
    rng = np.random.default_rng(20 + directed)
    graphs = [(n, random_graph(rng, n, 0.7)) for n in rng.integers(2, 7, size=8)]
    batch = graph_batch(rng, graphs, n_edge_features=2)
    structure = bound_structure(GraphStructure(directed=directed), batch, 3)
    assert structure.inexact_examples(batch).size == 0
    check_oracles_against_enumeration(structure, batch, 3, rng)


def test_binary_loopy_graphs_by_cut_or_trws_stay_within_the_bound():
    rng = np.random.default_rng(30)
    graphs = [(n, random_graph(rng, n, 0.6)) for n in rng.integers(3, 9, size=12)]
    batch = graph_batch(rng, graphs)
    structure = bound_structure(GraphStructure(max_enumeration=1, directed=True), batch, 2)
    for attractive in (True, False):
        S = 2
        theta = rng.normal(size=4)
        if attractive:  # theta[00] + theta[11] >= theta[01] + theta[10]: a minimum cut
            theta[0] += abs(theta[0] + theta[3] - theta[1] - theta[2]) + 0.1
        unary = rng.normal(size=(batch.n_tokens, S))
        labels, scores, bounds = structure.decode_with_bounds(batch, unary, theta)
        for i in range(batch.n_sequences):
            lo, hi = batch.offsets[i], batch.offsets[i + 1]
            edges, P = reference_potentials(structure, batch, i, theta)
            best, _ = brute_force_max(unary[lo:hi], edges, P)
            assert scores[i] == pytest.approx(labelling_scores(unary[lo:hi], edges, P,
                                                               labels[lo:hi])[0])
            assert scores[i] <= best + ATOL and best <= bounds[i] + ATOL
            if attractive:
                assert scores[i] == pytest.approx(best, abs=ATOL)


def test_trws_oracle_value_is_within_its_bound_and_exact_on_trees():
    rng = np.random.default_rng(31)
    loopy = [(n, random_graph(rng, n, 0.7)) for n in rng.integers(3, 8, size=10)]
    trees = [(n, random_forest(rng, n)) for n in rng.integers(1, 8, size=5)]
    batch = graph_batch(rng, loopy + trees)
    structure = bound_structure(GraphStructure(inference="trws"), batch, 3)
    n_loopy = sum(1 for n, e in loopy if e.shape[0] >= n)
    assert structure.inexact_examples(batch).size >= n_loopy
    theta = rng.normal(size=structure.n_pairwise_) * 2
    unary = rng.normal(size=(batch.n_tokens, 3))
    _, scores, bounds = structure.decode_with_bounds(batch, unary, theta)
    gaps = []
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        edges, P = reference_potentials(structure, batch, i, theta)
        best, _ = brute_force_max(unary[lo:hi], edges, P)
        assert scores[i] <= best + ATOL <= bounds[i] + 2 * ATOL
        gaps.append(bounds[i] - scores[i])
        if i >= len(loopy):
            assert scores[i] == pytest.approx(best, abs=ATOL)
            assert bounds[i] == pytest.approx(scores[i], abs=ATOL)
    assert np.all(np.asarray(gaps) >= -ATOL)


def test_per_example_kernels_equal_the_batched_oracles():
    rng = np.random.default_rng(40)
    graphs = [(n, random_graph(rng, n, 0.5)) for n in rng.integers(1, 7, size=8)]
    batch = graph_batch(rng, graphs, n_edge_features=2)
    structure = bound_structure(GraphStructure(), batch, 3)
    kernels = structure.example_kernels(batch)
    assert kernels.has_marginals
    theta = rng.normal(size=structure.n_pairwise_)
    unary = rng.normal(size=(batch.n_tokens, 3))
    Y = rng.integers(0, 3, size=batch.n_tokens)
    token_loss = structure.token_loss(Y)
    augmented, _, _ = structure.loss_augmented_decode(batch, unary, theta, Y)
    node, pair, log_z = structure.marginals(batch, unary, theta)
    per_example = structure.pairwise_statistics(batch, augmented, per_sequence=True)
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        labels = kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], theta)
        np.testing.assert_array_equal(labels, augmented[lo:hi])
        np.testing.assert_allclose(kernels.pairwise_statistics_example(i, labels),
                                   per_example[i])
        one_node, one_pair, one_z = kernels.marginals_example(i, unary[lo:hi], theta)
        np.testing.assert_allclose(one_node, node[lo:hi], atol=1e-12)
        np.testing.assert_allclose(one_pair, pair[i], atol=1e-12)
        assert one_z == pytest.approx(log_z[i])


def test_gradient_of_the_log_partition_is_the_expected_statistics():
    rng = np.random.default_rng(50)
    graphs = [(n, random_forest(rng, n)) for n in (4, 6)] + [(5, random_graph(rng, 5, 0.8))]
    batch = graph_batch(rng, graphs, n_edge_features=2)
    structure = bound_structure(GraphStructure(), batch, 3)
    theta = rng.normal(size=structure.n_pairwise_)
    unary = rng.normal(size=(batch.n_tokens, 3))
    _, pair, _ = structure.marginals(batch, unary, theta)
    h = 1e-6
    for k in range(structure.n_pairwise_):
        step = np.zeros_like(theta)
        step[k] = h
        up = structure.marginals(batch, unary, theta + step)[2]
        down = structure.marginals(batch, unary, theta - step)[2]
        np.testing.assert_allclose((up - down) / (2 * h), pair[:, k], atol=1e-6)


def test_marginals_on_large_loopy_graphs_are_a_clear_error():
    rng = np.random.default_rng(60)
    batch = graph_batch(rng, [(6, random_graph(rng, 6, 1.0))])
    structure = bound_structure(GraphStructure(max_enumeration=10), batch, 2)
    assert not structure.example_kernels(batch).has_marginals
    with pytest.raises(ValueError, match="exact marginals on forests.*example 0 is neither"):
        structure.marginals(batch, np.zeros((6, 2)), np.zeros(structure.n_pairwise_))
    # (a small graph, which TRW-S does not enumerate: the message names the setting)
    small = graph_batch(rng, [(3, np.array([[0, 1], [1, 2], [0, 2]]))])
    trws = bound_structure(GraphStructure(inference="trws"), small, 2)
    with pytest.raises(ValueError, match="forests only with inference='trws'; example 0 "
                                         "has cycles"):
        trws.marginals(small, np.zeros((3, 2)), np.zeros(trws.n_pairwise_))
    with pytest.raises(ValueError, match="inference='exact'"):
        bound_structure(GraphStructure(inference="exact", max_enumeration=10), batch,
                        2).decode(batch, np.zeros((6, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="closes a cycle"):
        bound_structure(TreeStructure(), batch, 2).decode(batch, np.zeros((6, 2)),
                                                          np.zeros(4))


def test_oracles_do_not_depend_on_n_jobs():
    rng = np.random.default_rng(70)
    graphs = [(n, random_graph(rng, n, 0.6)) for n in rng.integers(1, 8, size=12)]
    batch = graph_batch(rng, graphs, n_edge_features=2)
    structure = bound_structure(GraphStructure(), batch, 3)
    theta = rng.normal(size=structure.n_pairwise_)
    unary = rng.normal(size=(batch.n_tokens, 3))
    one = structure.decode_with_bounds(batch, unary, theta)
    two = structure.decode_with_bounds(batch, unary, theta, n_jobs=3)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(structure.marginals(batch, unary, theta),
                    structure.marginals(batch, unary, theta, n_jobs=2)):
        np.testing.assert_allclose(a, b, rtol=1e-13)
