"""Brute-force inference on small pairwise graphs (test-only reference).

Every labelling of a graph is enumerated (n_states ** n_nodes of them; graphs up to 8 nodes
and 3 states), so the maximum, the maximisers, the log-partition and the marginals are exact
up to the rounding of one sum per labelling.
"""

import numpy as np
from scipy.special import logsumexp


def all_labellings(n_nodes, n_states):
    """Every labelling, one per row, in lexicographic order."""
    codes = np.arange(n_states ** n_nodes)
    return np.stack(np.unravel_index(codes, (n_states,) * n_nodes), axis=1).astype(np.int64)


def labelling_scores(unary, edges, pairwise, labellings):
    """``sum_t unary[t, y_t] + sum_e pairwise[e, y_u, y_v]`` for each row ``y``."""
    unary = np.asarray(unary, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    labellings = np.atleast_2d(labellings)
    scores = unary[np.arange(unary.shape[0]), labellings].sum(axis=1)
    if edges.shape[0]:
        e = np.arange(edges.shape[0])
        scores = scores + pairwise[e, labellings[:, edges[:, 0]],
                                   labellings[:, edges[:, 1]]].sum(axis=1)
    return scores


def brute_force_max(unary, edges, pairwise):
    """The maximum score and every maximising labelling (rows)."""
    labellings = all_labellings(*np.shape(unary))
    scores = labelling_scores(unary, edges, pairwise, labellings)
    best = scores.max()
    return best, labellings[scores == best]


def brute_force_marginals(unary, edges, pairwise):
    """Log-partition, node marginals (n_nodes, S) and edge marginals (n_edges, S, S)."""
    n_nodes, n_states = np.shape(unary)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    labellings = all_labellings(n_nodes, n_states)
    scores = labelling_scores(unary, edges, pairwise, labellings)
    log_z = logsumexp(scores)
    p = np.exp(scores - log_z)
    node = np.zeros((n_nodes, n_states))
    for t in range(n_nodes):
        node[t] = np.bincount(labellings[:, t], weights=p, minlength=n_states)
    edge = np.zeros((edges.shape[0], n_states, n_states))
    for e, (u, v) in enumerate(edges):
        pair = labellings[:, u] * n_states + labellings[:, v]
        edge[e] = np.bincount(pair, weights=p, minlength=n_states ** 2).reshape(n_states,
                                                                                n_states)
    return log_z, node, edge


def grid3d_labelling_scores(unary, shape, costs, labellings):
    """Scores of 3-D grid labellings: unary terms minus disagreement costs."""
    n_slices, n_rows, n_cols = shape
    labellings = np.atleast_2d(labellings)
    scores = unary[np.arange(unary.shape[0]), labellings].sum(axis=1)
    index = np.arange(unary.shape[0]).reshape(shape)
    for axis in range(3):
        lo = np.take(index, np.arange(shape[axis] - 1), axis=axis).ravel()
        hi = np.take(index, np.arange(1, shape[axis]), axis=axis).ravel()
        scores = scores - (labellings[:, lo] != labellings[:, hi]) @ costs[lo, axis]
    return scores
