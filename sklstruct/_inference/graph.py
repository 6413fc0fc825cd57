"""Validated entry points to the inference kernels for pairwise graphs.

One graph has ``n_nodes >= 1`` nodes with ``n_states`` states each, node scores ``unary``
(n_nodes, n_states), edges ``edges`` (n_edges, 2) of distinct node indices, at most one per
pair of nodes, and edge scores ``pairwise`` (n_edges, n_states, n_states). The score of a
labelling ``y`` is

    score(y) = sum_t unary[t, y_t] + sum_e pairwise[e, y_{edges[e, 0]}, y_{edges[e, 1]}].

A batch stacks the graphs: ``unary`` rows ``node_offsets[i]:node_offsets[i + 1]``, and
``edges`` and ``pairwise`` rows ``edge_offsets[i]:edge_offsets[i + 1]`` belong to graph ``i``,
whose edges hold node indices local to it (0 to its number of nodes). :func:`check_graph`
validates graphs given one by one and packs them into this form.

Which oracle to use:

- forests (acyclic graphs, possibly disconnected): :func:`forest_map` and
  :func:`forest_marginals` are exact;
- small graphs of any shape (``n_states ** n_nodes`` up to about a million labellings):
  :func:`enumerate_map` and :func:`enumerate_marginals` are exact;
- binary labels with submodular edges: :func:`submodular_map` is exact on any graph, and
  :func:`grid3d_map` on 3-D grids with disagreement costs;
- otherwise :func:`loopy_map` (TRW-S) returns a labelling and a certified upper bound on the
  maximum score, equal to the score on forests.

Loss-augmented decoding with a node-decomposable loss (the Hamming loss) adds the loss to
``unary`` (:func:`sklstruct._inference.chain.hamming_token_loss`); the submodularity of the
edges does not change.
"""

import numbers

import numpy as np
import scipy.sparse as sp

from . import _graph, _graph_kernels
from ._validation import (as_float_array, as_int_array, check_n_jobs, run_chunks,
                          shape_products, split_into_chunks)

__all__ = [
    "check_graph",
    "enumerate_map",
    "enumerate_marginals",
    "forest_map",
    "forest_marginals",
    "grid3d_map",
    "is_forest",
    "loopy_map",
    "submodular_map",
]

# a submodularity margin pairwise[0,0] + pairwise[1,1] - pairwise[0,1] - pairwise[1,0] below
# zero by no more than this fraction of the sum of their magnitudes is taken for rounding
_SUBMODULAR_RTOL = 1e-12


def _check_offsets(offsets, name, total, what, allow_empty):
    offsets = as_int_array(offsets, name)
    if offsets.shape[0] < 1 or offsets[0] != 0:
        raise ValueError(f"{name} must start at 0.")
    if offsets[-1] != total:
        raise ValueError(f"{name} must end at the number of {what} ({total}), got "
                         f"{offsets[-1]}.")
    steps = np.diff(offsets)
    if np.any(steps < 0):
        raise ValueError(f"{name} must be non-decreasing.")
    if not allow_empty and np.any(steps == 0):
        raise ValueError(f"graph {int(np.flatnonzero(steps == 0)[0])} has no {what}; every "
                         f"graph needs at least one node.")
    return np.ascontiguousarray(offsets, dtype=np.int64)


def _as_edge_array(edges, name="edges"):
    """``edges`` as a C-contiguous int64 array of shape (n_edges, 2)."""
    if edges is None:
        raise TypeError(f"{name} must be an array of node index pairs, got None.")
    array = np.asarray(edges)
    if array.size == 0 and array.dtype.kind in "iuf":
        return np.zeros((0, 2), dtype=np.int64)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers (node indices), got dtype {array.dtype}.")
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{name} must have shape (n_edges, 2), got {array.shape}.")
    return np.ascontiguousarray(array, dtype=np.int64)


def _check_edges(node_offsets, edges, edge_offsets):
    """Every edge joins two distinct nodes of its graph, and no pair of nodes twice.

    Errors name the graph and the edge's index within it.
    """
    n_edges = edges.shape[0]
    if n_edges == 0:
        return
    graph = np.repeat(np.arange(edge_offsets.shape[0] - 1), np.diff(edge_offsets))
    size = np.diff(node_offsets)[graph]

    def where(e):
        g = int(graph[e])
        return (f"graph {g}, edge {int(e - edge_offsets[g])} "
                f"({int(edges[e, 0])}, {int(edges[e, 1])})")

    outside = np.flatnonzero(((edges < 0) | (edges >= size[:, None])).any(axis=1))
    if outside.size:
        e = outside[0]
        raise ValueError(f"{where(e)}: node index outside [0, {int(size[e])}), the nodes of "
                         f"graph {int(graph[e])}.")
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if loops.size:
        raise ValueError(f"{where(loops[0])}: a self-loop; an edge joins two distinct nodes "
                         "(put node terms in unary).")
    lo = edges.min(axis=1)
    hi = edges.max(axis=1)
    order = np.lexsort((np.arange(n_edges), hi, lo, graph))
    same = ((graph[order[1:]] == graph[order[:-1]]) & (lo[order[1:]] == lo[order[:-1]])
            & (hi[order[1:]] == hi[order[:-1]]))
    if np.any(same):
        k = np.flatnonzero(same)
        # the repeat with the smallest index, and the first edge it repeats
        k = k[np.argmin(order[k + 1])]
        first, second = order[k], order[k + 1]
        raise ValueError(f"{where(second)}: repeats edge "
                         f"{int(first - edge_offsets[graph[first]])} "
                         f"({int(edges[first, 0])}, {int(edges[first, 1])}); give each pair "
                         "of nodes at most one edge (add their pairwise scores).")


def _as_count(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    return int(value)


def check_graph(n_nodes, edges, edge_features=None, *, feature_shape=None):
    """Validate graphs and pack them as a batch.

    Parameters
    ----------
    n_nodes : int or sequence of int
        The number of nodes (at least 1) of one graph, or of each graph.
    edges : array-like of int of shape (n_edges, 2), or a sequence of them
        The edges of the graph (of each graph): node indices in ``[0, n_nodes)``, two
        distinct nodes per edge, at most one edge per pair of nodes (in either direction).
    edge_features : array-like, or a sequence of them, default=None
        Per-edge values (features or pairwise scores) of shape ``(n_edges,) +
        feature_shape``; real and finite.
    feature_shape : tuple of int, default=None
        The shape of one edge's values; None takes that of the first graph with edges.

    Returns
    -------
    node_offsets : ndarray of int64, shape (n_graphs + 1,)
    edges : ndarray of int64, shape (n_edges_total, 2)
        The edges of all graphs, stacked, with node indices local to their graph.
    edge_offsets : ndarray of int64, shape (n_graphs + 1,)
    edge_features : ndarray of float64 of shape (n_edges_total,) + feature_shape, or None

    Raises
    ------
    ValueError
        Naming the graph and the edge: a node index out of range, a self-loop, a repeated
        pair of nodes, edge values of the wrong shape or not finite.
    """
    single = np.ndim(n_nodes) == 0
    if single:
        counts = [_as_count(n_nodes, "n_nodes")]
        edge_lists = [edges]
        feature_lists = None if edge_features is None else [edge_features]
    else:
        counts = [_as_count(n, "n_nodes") for n in n_nodes]
        edge_lists = list(edges)
        feature_lists = None if edge_features is None else list(edge_features)
        if len(edge_lists) != len(counts):
            raise ValueError(f"edges must hold one array per graph ({len(counts)}), got "
                             f"{len(edge_lists)}.")
        if feature_lists is not None and len(feature_lists) != len(counts):
            raise ValueError(f"edge_features must hold one array per graph ({len(counts)}), "
                             f"got {len(feature_lists)}.")
    for g, n in enumerate(counts):
        if n < 1:
            raise ValueError(f"graph {g} has {n} nodes; every graph needs at least one.")
    edge_arrays = []
    for g, e in enumerate(edge_lists):
        try:
            edge_arrays.append(_as_edge_array(e))
        except (TypeError, ValueError) as error:
            raise type(error)(f"graph {g}: {error}") from None
    node_offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    edge_offsets = np.concatenate(([0], np.cumsum([e.shape[0] for e in edge_arrays])))
    edge_offsets = edge_offsets.astype(np.int64)
    stacked = np.concatenate(edge_arrays) if edge_arrays else np.zeros((0, 2), np.int64)
    _check_edges(node_offsets, stacked, edge_offsets)
    features = None
    if feature_lists is not None:
        arrays = []
        for g, f in enumerate(feature_lists):
            array = f.toarray() if sp.issparse(f) else np.asarray(f)
            if array.dtype.kind not in "biuf":
                raise TypeError(f"graph {g}: edge_features must hold real numbers, got dtype "
                                f"{array.dtype}.")
            arrays.append(array)
        if feature_shape is None:  # that of the first graph with edges, else the first
            shaped = [a for g, a in enumerate(arrays) if edge_arrays[g].shape[0]]
            shaped = shaped or [a for a in arrays if a.ndim >= 1]
            feature_shape = shaped[0].shape[1:] if shaped else ()
        feature_shape = tuple(feature_shape)
        if 0 in feature_shape:
            raise ValueError(f"edge_features have shape {feature_shape} per edge: an edge "
                             "needs at least one feature (leave edge_features out for none).")
        for g, array in enumerate(arrays):
            expected = (edge_arrays[g].shape[0],) + feature_shape
            if array.size == 0 and expected[0] == 0:
                arrays[g] = np.zeros(expected)
                continue
            if array.shape != expected:
                raise ValueError(f"graph {g}: edge_features must have shape {expected} (one "
                                 f"row per edge), got {array.shape}.")
            if not np.isfinite(array).all():
                e = int(np.flatnonzero(~np.isfinite(array.reshape(expected[0], -1)).all(
                    axis=1))[0])
                raise ValueError(f"graph {g}, edge {e}: edge_features contains NaN or "
                                 "infinite values.")
        features = np.ascontiguousarray(np.concatenate(arrays), dtype=np.float64)
    return node_offsets, stacked, edge_offsets, features


def _check_batch(unary, node_offsets, edges, edge_offsets, pairwise):
    """Validate a batch of graph potentials; return contiguous arrays."""
    unary = as_float_array(unary, "unary", 2)
    n_nodes, n_states = unary.shape
    if n_states < 1:
        raise ValueError("unary must have at least one state (column).")
    node_offsets = _check_offsets(node_offsets, "node_offsets", n_nodes, "nodes", False)
    edges = _as_edge_array(edges)
    edge_offsets = _check_offsets(edge_offsets, "edge_offsets", edges.shape[0], "edges", True)
    if edge_offsets.shape != node_offsets.shape:
        raise ValueError(f"edge_offsets must have one entry per graph plus one "
                         f"({node_offsets.shape[0]}, as node_offsets), got "
                         f"{edge_offsets.shape[0]}.")
    _check_edges(node_offsets, edges, edge_offsets)
    expected = (edges.shape[0], n_states, n_states)
    if pairwise is None:
        raise TypeError("pairwise must be an array of numbers, got None.")
    if np.size(pairwise) == 0 and expected[0] == 0:
        pairwise = np.zeros(expected)
    pairwise = as_float_array(pairwise, "pairwise", np.ndim(pairwise))
    if pairwise.shape != expected:
        raise ValueError(f"pairwise must have shape (n_edges, n_states, n_states) = "
                         f"{expected}, got {pairwise.shape}.")
    return unary, node_offsets, edges, edge_offsets, pairwise


def _graph_chunks(node_offsets, edge_offsets, n_chunks):
    """Contiguous runs of graphs with similar numbers of nodes plus edges."""
    return split_into_chunks(node_offsets + edge_offsets, n_chunks)


def _map_graphs(solve, unary, node_offsets, edges, edge_offsets, pairwise, shared, n_jobs):
    """Apply ``solve`` to the batch, in runs of graphs on threads if asked
    (:func:`~._validation.run_chunks`).

    Per-node, per-edge and per-graph outputs are concatenated in order, so the result does
    not depend on ``n_jobs``.
    """
    chunks = _graph_chunks(node_offsets, edge_offsets, check_n_jobs(n_jobs))
    if len(chunks) <= 1:
        return solve(unary, node_offsets, edges, edge_offsets, pairwise, *shared)
    pieces = run_chunks(solve, [
        (unary[node_offsets[lo] : node_offsets[hi]],
         node_offsets[lo : hi + 1] - node_offsets[lo],
         edges[edge_offsets[lo] : edge_offsets[hi]],
         edge_offsets[lo : hi + 1] - edge_offsets[lo],
         pairwise[edge_offsets[lo] : edge_offsets[hi]], *shared)
        for lo, hi in chunks], len(chunks))
    return tuple(np.concatenate(outputs) for outputs in zip(*pieces))


def _cycle_edges(node_offsets, edges, edge_offsets):
    cycle = np.zeros(node_offsets.shape[0] - 1, dtype=np.int64)
    _graph.forest_cycle_batch(node_offsets, edges, edge_offsets, cycle)
    return cycle


def _require_forests(node_offsets, edges, edge_offsets):
    cycle = _cycle_edges(node_offsets, edges, edge_offsets)
    bad = np.flatnonzero(cycle >= 0)
    if bad.size:
        g = int(bad[0])
        e = int(edge_offsets[g] + cycle[g])
        raise ValueError(f"graph {g} is not a forest: edge {int(cycle[g])} ({int(edges[e, 0])}, "
                         f"{int(edges[e, 1])}) closes a cycle; use loopy_map.")


def is_forest(node_offsets, edges, edge_offsets):
    """Whether each graph of a batch is a forest (has no cycle), by union-find.

    Parameters
    ----------
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries: graph ``i`` has ``node_offsets[i + 1] - node_offsets[i] >= 1`` nodes.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges, node indices local to their graph.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries.

    Returns
    -------
    forest : ndarray of bool, shape (n_graphs,)
    """
    node_offsets = as_int_array(node_offsets, "node_offsets")
    n_nodes = int(node_offsets[-1]) if node_offsets.shape[0] else 0
    node_offsets = _check_offsets(node_offsets, "node_offsets", n_nodes, "nodes", False)
    edges = _as_edge_array(edges)
    edge_offsets = _check_offsets(edge_offsets, "edge_offsets", edges.shape[0], "edges", True)
    if edge_offsets.shape != node_offsets.shape:
        raise ValueError("edge_offsets and node_offsets must have the same length.")
    _check_edges(node_offsets, edges, edge_offsets)
    return _cycle_edges(node_offsets, edges, edge_offsets) < 0


def _solve_forest_map(unary, node_offsets, edges, edge_offsets, pairwise):
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(node_offsets.shape[0] - 1)
    if scores.shape[0]:
        _graph.forest_map_batch(unary, node_offsets, edges, edge_offsets, pairwise, labels,
                                scores)
    return labels, scores


def _solve_forest_marginals(unary, node_offsets, edges, edge_offsets, pairwise):
    node_marginals = np.zeros(unary.shape)
    edge_marginals = np.zeros(pairwise.shape)
    log_partition = np.zeros(node_offsets.shape[0] - 1)
    if log_partition.shape[0]:
        _graph.forest_marginals_batch(unary, node_offsets, edges, edge_offsets, pairwise,
                                      node_marginals, edge_marginals, log_partition)
    return node_marginals, edge_marginals, log_partition


def _solve_trws(unary, node_offsets, edges, edge_offsets, pairwise, max_iter, tol):
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    n_graphs = node_offsets.shape[0] - 1
    scores = np.zeros(n_graphs)
    bounds = np.zeros(n_graphs)
    n_iter = np.zeros(n_graphs, dtype=np.int64)
    if n_graphs:
        _graph.trws_map_batch(unary, node_offsets, edges, edge_offsets, pairwise, max_iter,
                              tol, labels, scores, bounds, n_iter)
    return labels, scores, bounds


def _solve_submodular(unary, node_offsets, edges, edge_offsets, pairwise):
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(node_offsets.shape[0] - 1)
    if scores.shape[0]:
        _graph.submodular_cut_batch(unary, node_offsets, edges, edge_offsets, pairwise,
                                    labels, scores)
    return labels, scores


def forest_map(unary, node_offsets, edges, edge_offsets, pairwise, n_jobs=None):
    """Highest-scoring labelling of every graph of a batch of forests (max-product).

    Exact on acyclic graphs (trees or forests, edges in any direction and order): messages
    flow from the leaves to the root of each tree (its lowest-indexed node), then the labels
    are chosen from the root down.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries: ``node_offsets[0] == 0``, ``node_offsets[-1] == n_nodes``, every
        graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph; ``u != v`` and at most
        one edge per pair of nodes.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries (a graph may have no edge).
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on
        it.

    Returns
    -------
    labels : ndarray of int64, shape (n_nodes,)
        A maximising labelling; a tie goes to the lower state, given the labels already
        chosen nearer the root.
    scores : ndarray of float64, shape (n_graphs,)
        Score of the returned labelling of each graph.

    Raises
    ------
    ValueError
        If a graph has a cycle (naming the edge that closes it), or for invalid input.
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    _require_forests(node_offsets, edges, edge_offsets)
    return _map_graphs(_solve_forest_map, unary, node_offsets, edges, edge_offsets, pairwise,
                       (), n_jobs)


def forest_marginals(unary, node_offsets, edges, edge_offsets, pairwise, n_jobs=None):
    """Marginals and log-partition of ``p(y) ∝ exp(score(y))`` on a batch of forests.

    Exact sum-product on acyclic graphs, in the log domain: for any finite scores the
    marginals are finite, non-negative and sum to one to rounding (probabilities below
    about 1e-308 come out as 0), and the log-partition is finite.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries: ``node_offsets[0] == 0``, ``node_offsets[-1] == n_nodes``, every
        graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph; ``u != v`` and at most
        one edge per pair of nodes.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries (a graph may have no edge).
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on
        it.

    Returns
    -------
    node_marginals : ndarray of float64, shape (n_nodes, n_states)
        ``p(y_t = s)``.
    edge_marginals : ndarray of float64, shape (n_edges, n_states, n_states)
        ``p(y_u = a, y_v = b)`` for edge ``(u, v)``.
    log_partition : ndarray of float64, shape (n_graphs,)
        ``log sum_y exp(score(y))``.

    Raises
    ------
    ValueError
        If a graph has a cycle (naming the edge that closes it), or for invalid input.
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    _require_forests(node_offsets, edges, edge_offsets)
    return _map_graphs(_solve_forest_marginals, unary, node_offsets, edges, edge_offsets,
                       pairwise, (), n_jobs)


# the most labellings per graph the enumeration entry points accept
MAX_ENUMERATION = 1 << 24


def _check_enumerable(node_offsets, n_states):
    sizes = np.diff(node_offsets)
    too_big = sizes * np.log(max(n_states, 1)) > np.log(MAX_ENUMERATION)
    if np.any(too_big):
        g = int(np.flatnonzero(too_big)[0])
        raise ValueError(f"graph {g} has {n_states} ** {int(sizes[g])} labellings, more than "
                         f"enumeration takes ({MAX_ENUMERATION}); use forest_map or loopy_map.")


def _solve_enumerate_map(unary, node_offsets, edges, edge_offsets, pairwise):
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(node_offsets.shape[0] - 1)
    if scores.shape[0]:
        _graph_kernels.enumerate_map_batch(unary, node_offsets, edges, edge_offsets, pairwise,
                                           labels, scores)
    return labels, scores


def _solve_enumerate_marginals(unary, node_offsets, edges, edge_offsets, pairwise):
    node_marginals = np.zeros(unary.shape)
    edge_marginals = np.zeros(pairwise.shape)
    log_partition = np.zeros(node_offsets.shape[0] - 1)
    if log_partition.shape[0]:
        _graph_kernels.enumerate_marginals_batch(unary, node_offsets, edges, edge_offsets,
                                                 pairwise, node_marginals, edge_marginals,
                                                 log_partition)
    return node_marginals, edge_marginals, log_partition


def enumerate_map(unary, node_offsets, edges, edge_offsets, pairwise, n_jobs=None):
    """Exact MAP labelling of small graphs of any shape, by enumeration.

    All ``n_states ** n_nodes`` labellings of each graph are visited in reflected Gray-code
    order (Knuth, TAOCP 7.2.1.1), one node changing per step, so a step costs that node's
    degree; the running score is recomputed exactly every 4096 labellings. Exact for any
    graph; meant for small ones (a full graph over 16 binary labels has 65536 labellings).

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries; every graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph; ``u != v`` and at most
        one edge per pair of nodes.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries (a graph may have no edge).
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    n_jobs : int, default=None
        Number of joblib workers (threads unless a joblib backend is configured); the result
        does not depend on it.

    Returns
    -------
    labels : ndarray of int64, shape (n_nodes,)
        A maximising labelling: the first of strictly greater running score in Gray-code
        order (ties, up to rounding of the running score, go to the earliest).
    scores : ndarray of float64, shape (n_graphs,)
        Score of the returned labelling of each graph, recomputed exactly.

    Raises
    ------
    ValueError
        For invalid input, or a graph of more than ``2 ** 24`` labellings.
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    _check_enumerable(node_offsets, unary.shape[1])
    return _map_graphs(_solve_enumerate_map, unary, node_offsets, edges, edge_offsets,
                       pairwise, (), n_jobs)


def enumerate_marginals(unary, node_offsets, edges, edge_offsets, pairwise, n_jobs=None):
    """Marginals and log-partition of ``p(y) ∝ exp(score(y))`` on small graphs of any shape.

    Two passes over all labellings (reflected Gray-code order): the first finds the largest
    score ``m``, the second sums ``exp(score - m)``, each term at most one, into the
    marginals; the log-partition is ``m`` plus the log of that sum. Any finite scores give
    finite results.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries; every graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries.
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    n_jobs : int, default=None
        Number of joblib workers; the result does not depend on it.

    Returns
    -------
    node_marginals : ndarray of float64, shape (n_nodes, n_states)
    edge_marginals : ndarray of float64, shape (n_edges, n_states, n_states)
    log_partition : ndarray of float64, shape (n_graphs,)

    Raises
    ------
    ValueError
        For invalid input, or a graph of more than ``2 ** 24`` labellings.
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    _check_enumerable(node_offsets, unary.shape[1])
    return _map_graphs(_solve_enumerate_marginals, unary, node_offsets, edges, edge_offsets,
                       pairwise, (), n_jobs)


def loopy_map(unary, node_offsets, edges, edge_offsets, pairwise, max_iter=100, tol=1e-6,
              n_jobs=None):
    """Approximate MAP labelling of graphs with cycles, with a certified upper bound.

    Sequential tree-reweighted message passing, TRW-S (Kolmogorov 2006, "Convergent
    tree-reweighted message passing for energy minimization", IEEE TPAMI 28(10)), with the
    monotonic chains of the node order. Each graph's result satisfies

        scores[i] <= max_y score(y) <= upper_bounds[i],

    where the bound is the sum of the maxima of the monotonic chains the reparametrised
    scores are split into (the TRW dual bound, never above that of the previous pass); its
    infimum over reparametrisations is the linear-programming relaxation over the local
    polytope, which TRW-S approaches but may stop above. When the bound equals the score
    the labelling is certified optimal. A graph without cycles is solved exactly by
    max-product, and its bound equals its score.

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries: ``node_offsets[0] == 0``, ``node_offsets[-1] == n_nodes``, every
        graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph; ``u != v`` and at most
        one edge per pair of nodes.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries (a graph may have no edge).
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    max_iter : int, default=100
        Maximum number of TRW-S iterations (a pass in node order and one in reverse), >= 1.
    tol : float, default=1e-6
        Stop when ``upper_bound - score <= tol * max(|score|, |upper_bound|)``, or when an
        iteration lowers the bound by no more than that.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on
        it.

    Returns
    -------
    labels : ndarray of int64, shape (n_nodes,)
        The best labelling decoded during the iterations.
    scores : ndarray of float64, shape (n_graphs,)
        Score of the returned labelling of each graph.
    upper_bounds : ndarray of float64, shape (n_graphs,)
        An upper bound on each graph's maximum score, at least ``scores``.
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    max_iter = _as_count(max_iter, "max_iter")
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}.")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0 \
            or not np.isfinite(tol):
        raise ValueError(f"tol must be a non-negative finite number, got {tol!r}.")
    return _map_graphs(_solve_trws, unary, node_offsets, edges, edge_offsets, pairwise,
                       (max_iter, float(tol)), n_jobs)


def submodular_map(unary, node_offsets, edges, edge_offsets, pairwise, n_jobs=None):
    """Exact MAP labelling of binary graphs with submodular edges, by a minimum cut.

    Every edge must satisfy ``pairwise[e, 0, 0] + pairwise[e, 1, 1] >= pairwise[e, 0, 1] +
    pairwise[e, 1, 0]`` (attractive interactions; a violation within a relative 1e-12 is
    taken for rounding). The energy ``-score`` is then a minimum s-t cut (Kolmogorov and
    Zabih 2004, "What energy functions can be minimized via graph cuts?", IEEE TPAMI 26(2)),
    found by Boykov and Kolmogorov's maximum flow (2004, IEEE TPAMI 26(9)).

    Parameters
    ----------
    unary : array-like of shape (n_nodes, n_states)
        Score of each state at each node, all graphs stacked.
    node_offsets : array-like of int of shape (n_graphs + 1,)
        Node boundaries: ``node_offsets[0] == 0``, ``node_offsets[-1] == n_nodes``, every
        graph has at least one node.
    edges : array-like of int of shape (n_edges, 2)
        Stacked edges ``(u, v)``, node indices local to their graph; ``u != v`` and at most
        one edge per pair of nodes.
    edge_offsets : array-like of int of shape (n_graphs + 1,)
        Edge boundaries (a graph may have no edge).
    pairwise : array-like of shape (n_edges, n_states, n_states)
        ``pairwise[e, a, b]`` scores ``y_u = a, y_v = b`` for edge ``e = (u, v)``.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on
        it.

    Returns
    -------
    labels : ndarray of int64, shape (n_nodes,)
        A maximising labelling; among several, the one with the fewest ones (a node is
        labelled 1 only if every maximising labelling does so).
    scores : ndarray of float64, shape (n_graphs,)
        Score of the returned labelling of each graph.

    Raises
    ------
    ValueError
        If ``n_states != 2`` or an edge is not submodular (naming the graph and the edge).
    """
    unary, node_offsets, edges, edge_offsets, pairwise = _check_batch(
        unary, node_offsets, edges, edge_offsets, pairwise)
    if unary.shape[1] != 2:
        raise ValueError(f"submodular_map needs binary labels: unary must have 2 columns, got "
                         f"{unary.shape[1]}.")
    agree = pairwise[:, 0, 0] + pairwise[:, 1, 1]
    disagree = pairwise[:, 0, 1] + pairwise[:, 1, 0]
    magnitude = np.abs(pairwise).reshape(-1, 4).sum(axis=1)
    bad = np.flatnonzero(agree - disagree < -_SUBMODULAR_RTOL * magnitude)
    if bad.size:
        e = int(bad[0])
        g = int(np.searchsorted(edge_offsets, e, side="right") - 1)
        raise ValueError(
            f"graph {g}, edge {e - int(edge_offsets[g])} ({int(edges[e, 0])}, "
            f"{int(edges[e, 1])}) is not submodular: pairwise[0, 0] + pairwise[1, 1] = "
            f"{agree[e]:.6g} < pairwise[0, 1] + pairwise[1, 0] = {disagree[e]:.6g}; use "
            "loopy_map.")
    return _map_graphs(_solve_submodular, unary, node_offsets, edges, edge_offsets, pairwise,
                       (), n_jobs)


def _check_shapes(shapes, n_voxels):
    """Per-volume grid shapes (int64, (n_volumes, 3)) and voxel offsets."""
    array = np.asarray(shapes)
    if array.dtype.kind not in "iu":
        raise TypeError(f"shapes must hold integers, got dtype {array.dtype}.")
    if array.ndim == 1 and array.shape[0] == 3:
        if np.any(array < 1):
            raise ValueError(f"shape {tuple(int(s) for s in array)} must have positive "
                             "sizes.")
        size = int(shape_products(array[np.newaxis], "shape")[0])
        if n_voxels % size:
            raise ValueError(f"shape {tuple(int(s) for s in array)} must have positive sizes "
                             f"and tile the {n_voxels} voxels.")
        array = np.tile(array, (n_voxels // size, 1))
    elif array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"shapes must be one (n_slices, n_rows, n_cols) or one per volume, "
                         f"shape (n_volumes, 3); got an array of shape {array.shape}.")
    if np.any(array < 1):
        bad = int(np.flatnonzero((array < 1).any(axis=1))[0])
        raise ValueError(f"volume {bad} has shape {tuple(int(s) for s in array[bad])}; every "
                         "size must be at least 1.")
    array = np.ascontiguousarray(array, dtype=np.int64)
    sizes = shape_products(array, "the shape of a volume")
    if sizes.astype(np.float64).sum() > 2.0 ** 62:
        raise ValueError("the volumes of shapes hold more than 2**62 voxels.")
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    if offsets[-1] != n_voxels:
        raise ValueError(f"the volumes of shapes hold {offsets[-1]} voxels, unary has "
                         f"{n_voxels} rows.")
    return array, offsets


def _solve_grid3d(unary, offsets, shapes, costs):
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(shapes.shape[0])
    if scores.shape[0]:
        _graph.grid3d_cut_batch(unary, offsets, shapes, costs, labels, scores)
    return labels, scores


def grid3d_map(unary, shapes, costs, n_jobs=None):
    """Exact MAP labelling of binary 3-D 6-connected grids, by a minimum cut.

    Each volume's voxels are stored slice by slice, row by row (C order of its shape
    ``(n_slices, n_rows, n_cols)``), volumes one after the other. The labelling of a volume
    maximises

        sum_t unary[t, y_t] - sum_t sum_d costs[t, d] [y_t != y_{t + stride_d}]

    with ``stride = (n_rows * n_cols, n_cols, 1)`` for ``d = 0, 1, 2`` (the next slice, row
    and column; no term past the end of an axis). The flow graph is built from the grid
    directly and solved by Boykov and Kolmogorov's maximum flow (2004, IEEE TPAMI 26(9)).

    Parameters
    ----------
    unary : array-like of shape (n_voxels, 2)
        Score of labels 0 and 1 at each voxel, all volumes stacked.
    shapes : array-like of int of shape (3,) or (n_volumes, 3)
        ``(n_slices, n_rows, n_cols)`` of every volume, or of each; one shape for all
        must divide ``n_voxels``.
    costs : array-like of shape (n_voxels, 3)
        Non-negative cost of a voxel disagreeing with its next neighbour along each axis.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on
        it.

    Returns
    -------
    labels : ndarray of int64, shape (n_voxels,)
        A maximising labelling; among several, the one with the fewest ones.
    scores : ndarray of float64, shape (n_volumes,)
        Score of the returned labelling of each volume.
    """
    unary = as_float_array(unary, "unary", 2)
    if unary.shape[1] != 2:
        raise ValueError(f"grid labellings are binary: unary must have 2 columns, got "
                         f"{unary.shape[1]}.")
    shapes, offsets = _check_shapes(shapes, unary.shape[0])
    costs = as_float_array(costs, "costs", 2)
    if costs.shape != (unary.shape[0], 3):
        raise ValueError(f"costs must have shape (n_voxels, 3) = ({unary.shape[0]}, 3), got "
                         f"{costs.shape}.")
    negative = np.flatnonzero((costs < 0).any(axis=1))
    if negative.size:
        t = int(negative[0])
        volume = int(np.searchsorted(offsets, t, side="right") - 1)
        raise ValueError(f"costs must be non-negative (a minimum cut needs submodular terms); "
                         f"volume {volume}, voxel {t - int(offsets[volume])} has "
                         f"{costs[t].tolist()}.")
    chunks = split_into_chunks(offsets, check_n_jobs(n_jobs))
    if len(chunks) <= 1:
        return _solve_grid3d(unary, offsets, shapes, costs)
    pieces = run_chunks(_solve_grid3d, [
        (unary[offsets[lo] : offsets[hi]], offsets[lo : hi + 1] - offsets[lo], shapes[lo:hi],
         costs[offsets[lo] : offsets[hi]])
        for lo, hi in chunks], len(chunks))
    return tuple(np.concatenate(outputs) for outputs in zip(*pieces))

