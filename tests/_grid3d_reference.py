"""Reference computations for 3-D grids, independent of sklstruct's code: joint features and
scores read directly off the 4-D arrays, enumeration of every labelling, and a minimum cut by
SciPy's maximum flow on integer capacities."""

import itertools

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_flow


def axis_pairs(shape):
    """``(left, right)`` voxel indices (C order) of the neighbours along axes 0, 1, 2."""
    index = np.arange(int(np.prod(shape))).reshape(shape)
    pairs = []
    for axis in range(3):
        left = np.take(index, np.arange(shape[axis] - 1), axis=axis).ravel()
        right = np.take(index, np.arange(1, shape[axis]), axis=axis).ravel()
        pairs.append((left, right))
    return pairs


def edge_features(volume, edge_kind, gamma):
    """Per axis, the (n_edges, k) features of the edges of :func:`axis_pairs`."""
    flat = volume.reshape(-1, volume.shape[3])
    features = []
    for left, right in axis_pairs(volume.shape[:3]):
        columns = [np.ones(left.shape[0])]
        if edge_kind == "contrast":
            columns.append(np.exp(-gamma * ((flat[left] - flat[right]) ** 2).sum(axis=1)))
        features.append(np.column_stack(columns))
    return features


def joint_feature(volume, labels, edge_kind, gamma):
    """``Psi(x, y) = [X^T onehot(y) (feature-major), -sum of cut edge features per axis]``."""
    flat = volume.reshape(-1, volume.shape[3])
    y = np.asarray(labels).ravel()
    onehot = np.zeros((y.shape[0], 2))
    onehot[np.arange(y.shape[0]), y] = 1.0
    pairwise = []
    for (left, right), phi in zip(axis_pairs(volume.shape[:3]),
                                  edge_features(volume, edge_kind, gamma)):
        pairwise.append(-phi[y[left] != y[right]].sum(axis=0))
    return np.concatenate([(flat.T @ onehot).ravel(), np.concatenate(pairwise)])


def all_labellings(n):
    return np.array(list(itertools.product((0, 1), repeat=n)), dtype=np.intp)


def labelling_scores(unary, shape, costs, labellings):
    """``sum_t unary[t, y_t] - sum_axis sum_(u,v) costs[u, axis] [y_u != y_v]`` for every row
    of ``labellings``; ``costs`` (n_voxels, 3) by array axis."""
    labellings = np.atleast_2d(labellings)
    scores = unary[np.arange(unary.shape[0]), labellings].sum(axis=1)
    for axis, (left, right) in enumerate(axis_pairs(shape)):
        scores = scores - (labellings[:, left] != labellings[:, right]) @ costs[left, axis]
    return scores


def reference_min_cut(unary, shape, costs):
    """Maximising labelling (the one with the fewest ones) and its score, by a minimum s-t
    cut with SciPy's maximum flow; ``unary`` and ``costs`` must hold integers.

    Voxel ``t`` gets an arc from the source of capacity ``unary[t, 1] - unary[t, 0]`` when
    positive, else one to the sink of the opposite capacity, neighbours a pair of arcs of
    their cost; label 1 = reachable from the source in the residual graph.
    """
    n = unary.shape[0]
    source, sink = n, n + 1
    d = (unary[:, 1] - unary[:, 0]).astype(np.int64)
    rows, cols, caps = [], [], []
    voxels = np.arange(n)
    rows += [np.full(n, source), voxels]
    cols += [voxels, np.full(n, sink)]
    caps += [np.maximum(d, 0), np.maximum(-d, 0)]
    for axis, (left, right) in enumerate(axis_pairs(shape)):
        c = costs[left, axis].astype(np.int64)
        rows += [left, right]
        cols += [right, left]
        caps += [c, c]
    rows, cols, caps = map(np.concatenate, (rows, cols, caps))
    keep = caps > 0
    graph = sp.csr_matrix((caps[keep].astype(np.int32), (rows[keep], cols[keep])),
                          shape=(n + 2, n + 2))
    flow = maximum_flow(graph, source, sink)
    residual = (graph - flow.flow).tocsr()
    residual.data = np.maximum(residual.data, 0)
    residual.eliminate_zeros()
    reached = breadth_first_order(residual, source, directed=True, return_predecessors=False)
    labels = np.zeros(n, dtype=np.int64)
    labels[reached[reached < n]] = 1
    score = unary.max(axis=1).sum() - flow.flow_value
    return labels, float(score)
