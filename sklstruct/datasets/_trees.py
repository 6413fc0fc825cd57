"""Synthetic tree-structured outputs with a known model (DOM-like trees)."""

import numbers

import numpy as np
from sklearn.utils import check_random_state

from ..utils._sklearn_compat import Interval, validate_params


def _random_tree(rng, n_nodes, max_children):
    """Parents of a random tree in pre-order (node 0 the root, every subtree a run of
    consecutive nodes, as the elements of a document): every new node hangs under the
    last node or one of its ancestors, the deeper ones likelier, and a node takes at most
    ``max_children`` children."""
    parents = np.full(n_nodes, -1, dtype=np.int64)
    children = np.zeros(n_nodes, dtype=np.int64)
    path = [0]  # the root-to-last-node path: the nodes a new node can hang under
    for v in range(1, n_nodes):
        while True:
            open_ = [u for u in path if children[u] < max_children]
            if open_:
                break
            path.pop()
        weights = np.arange(1, len(open_) + 1, dtype=np.float64)
        parent = open_[rng.choice(len(open_), p=weights / weights.sum())]
        parents[v] = parent
        children[parent] += 1
        path = path[:path.index(parent) + 1] + [v]
    return parents


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_nodes": [Interval(numbers.Integral, 1, None, closed="left"), tuple],
        "n_states": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_children": [Interval(numbers.Integral, 1, None, closed="left")],
        "persistence": [Interval(numbers.Real, 0, 1, closed="both")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "return_model": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def make_tree_data(n_samples=100, *, n_nodes=(5, 30), n_states=4, n_features=10,
                   max_children=4, persistence=0.7, noise=1.5, random_state=None,
                   return_model=False):
    """Tree-structured labellings drawn from a known directed tree model, DOM-like.

    Every example is a random tree (the elements of a document, nodes numbered in document
    order: pre-order, so that every subtree is a run of consecutive nodes) whose labels are
    drawn top-down: the root from a uniform prior, every child from a row of the transition
    matrix ``T`` given its parent's label. ``T`` keeps the parent's label with probability
    ``persistence`` and otherwise moves to a state drawn from a random distribution (the
    same for the whole data set, so that every parent label favours its own successors).
    Node features are a random linear embedding of the one-hot label plus Gaussian noise of
    standard deviation ``noise``: the label of a node is ambiguous from its own features, so
    its parent and children carry the information a model must use.

    A model over the tree (:class:`~sklstruct.TreeStructure`) matches how the labels were
    made; a chain over the same nodes in document order links a node to its predecessor,
    which is its parent only when it is the first child.

    Parameters
    ----------
    n_samples : int, default=100
        Number of trees.
    n_nodes : int or (int, int), default=(5, 30)
        Nodes per tree, or the inclusive range to draw it from uniformly.
    n_states : int, default=4
    n_features : int, default=10
    max_children : int, default=4
        The most children of a node.
    persistence : float, default=0.7
        Probability that a child keeps its parent's label.
    noise : float, default=1.5
        Standard deviation of the feature noise.
    random_state : int, RandomState instance or None, default=None
    return_model : bool, default=False
        Also return the model the data was drawn from.

    Returns
    -------
    X : list of (ndarray of shape (n_nodes_i, n_features), ndarray of shape (n_nodes_i - 1, 2))
        Per tree its node features and its ``(parent, child)`` edges.
    y : list of ndarray of shape (n_nodes_i,)
        Node labels in ``0 .. n_states - 1``.
    model : dict
        With ``return_model``: ``transition`` (n_states, n_states), ``embedding``
        (n_states, n_features), ``noise`` and the per-tree ``parents`` arrays.

    Examples
    --------
    >>> from sklstruct.datasets import make_tree_data
    >>> X, y = make_tree_data(n_samples=2, n_nodes=4, random_state=0)
    >>> X[0][0].shape, X[0][1].shape, y[0].shape
    ((4, 10), (3, 2), (4,))
    """
    rng = check_random_state(random_state)
    if isinstance(n_nodes, tuple):
        if len(n_nodes) != 2 or not all(isinstance(v, numbers.Integral) and v >= 1
                                        for v in n_nodes) or n_nodes[0] > n_nodes[1]:
            raise ValueError(f"n_nodes must be a positive int or a range (low, high) with "
                             f"1 <= low <= high, got {n_nodes!r}.")
        low, high = n_nodes
    else:
        low = high = n_nodes
    moves = rng.dirichlet(np.ones(n_states), size=n_states)
    transition = persistence * np.eye(n_states) + (1 - persistence) * moves
    transition /= transition.sum(axis=1, keepdims=True)
    embedding = rng.normal(size=(n_states, n_features)) * 2.0 / np.sqrt(n_features)
    X, y, all_parents = [], [], []
    for _ in range(n_samples):
        n = int(rng.randint(low, high + 1))
        parents = _random_tree(rng, n, max_children)
        labels = np.zeros(n, dtype=np.int64)
        labels[0] = rng.randint(n_states)
        for v in range(1, n):  # pre-order: a parent comes before its children
            labels[v] = rng.choice(n_states, p=transition[labels[parents[v]]])
        features = embedding[labels] + noise * rng.normal(size=(n, n_features))
        edges = np.column_stack([parents[1:], np.arange(1, n)]).astype(np.int64)
        X.append((features, edges.reshape(-1, 2)))
        y.append(labels)
        all_parents.append(parents)
    if return_model:
        return X, y, {"transition": transition, "embedding": embedding, "noise": noise,
                      "parents": all_parents}
    return X, y
