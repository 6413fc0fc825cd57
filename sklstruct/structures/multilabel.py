"""Multi-label classification with pairwise label interactions, and hierarchical labels."""

import numbers

import numpy as np

from .graph import PairwiseGraphBase

_PAIRS = ("independent", "tree", "full")


def chow_liu_tree(Y, smoothing=1.0):
    """The Chow-Liu tree of binary label columns: a maximum spanning tree of the pairwise
    mutual information (Chow and Liu 1968).

    The mutual information of labels ``j`` and ``k`` is computed from their 2 x 2 table of
    co-occurrence counts with ``smoothing`` added to every cell; the tree is grown by
    Prim's algorithm from label 0, ties going to the lower pair of indices. Of all trees, it
    is the one whose tree-structured distribution (product of the pairwise marginals over
    the edges) is closest to the empirical distribution in Kullback-Leibler divergence.

    Parameters
    ----------
    Y : ndarray of shape (n_samples, n_labels)
        0/1 labels (at least one label).
    smoothing : float, default=1.0
        Pseudo-count added to every cell of the co-occurrence tables (>= 0; an empty cell
        adds nothing to the mutual information, as ``0 log 0 = 0``).

    Returns
    -------
    edges : ndarray of int64 of shape (n_labels - 1, 2)
        ``(parent, child)`` pairs, parents nearer label 0.
    mutual_information : ndarray of shape (n_labels, n_labels)
    """
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] == 0:
        raise ValueError(f"Y must be a 2-D array of 0/1 labels with at least one label; got "
                         f"shape {Y.shape}.")
    if Y.dtype.kind not in "biuf" or not np.isin(Y, (0, 1)).all():
        raise ValueError("Y must hold 0/1 labels only.")
    if not (isinstance(smoothing, numbers.Real) and np.isfinite(smoothing)
            and smoothing >= 0):
        raise ValueError(f"smoothing must be a finite number >= 0; got {smoothing!r}.")
    if smoothing == 0 and Y.shape[0] == 0:
        raise ValueError("Y has no samples: give smoothing > 0 for a table of pseudo-counts.")
    Y = Y.astype(np.float64)
    n, L = Y.shape
    ones = Y.T @ Y
    p1 = np.diag(ones)
    counts = np.empty((2, 2, L, L))
    counts[1, 1] = ones
    counts[1, 0] = p1[:, None] - ones
    counts[0, 1] = p1[None, :] - ones
    counts[0, 0] = n - p1[:, None] - p1[None, :] + ones
    counts += smoothing
    joint = counts / counts.sum(axis=(0, 1))
    left = joint.sum(axis=1)   # (2, L, L): p(y_j = a)
    right = joint.sum(axis=0)  # (2, L, L): p(y_k = b)
    mi = np.zeros((L, L))
    for a in range(2):
        for b in range(2):
            cell = joint[a, b]
            with np.errstate(divide="ignore", invalid="ignore"):
                mi += np.where(cell > 0, cell * np.log(cell / (left[a] * right[b])), 0.0)
    mi = 0.5 * (mi + mi.T)  # (the same sums for (j, k) and (k, j), to the last bit)
    np.fill_diagonal(mi, 0.0)
    in_tree = np.zeros(L, dtype=bool)
    in_tree[0] = True
    best = mi[0].copy()
    parent = np.zeros(L, dtype=np.int64)
    edges = []
    for _ in range(L - 1):
        candidates = np.where(in_tree, -np.inf, best)
        child = int(np.argmax(candidates))
        edges.append((int(parent[child]), child))
        in_tree[child] = True
        better = ~in_tree & (mi[child] > best)
        best[better] = mi[child][better]
        parent[better] = child
    return np.array(edges, dtype=np.int64).reshape(-1, 2), mi


def hierarchy_loss_weights(parents, scheme="sibling"):
    """Per-label weights of the hierarchical loss of Rousu et al. (2006, section 2).

    ``Delta(y, u) = sum_j c_j [y_j != u_j]`` with ``c_j = 1 / n_roots`` at the roots and
    ``c_j = c_parent(j) / |siblings(j) and j|`` below ("sibling": the loss of a subtree is
    shared among its children), or ``c_j = |subtree(j)| / n_labels`` ("subtree": a mistake
    costs the size of the subtree it hides).

    Parameters
    ----------
    parents : array-like of int of shape (n_labels,)
        The parent of every label, -1 for a root.
    scheme : {"sibling", "subtree"}, default="sibling"

    Returns
    -------
    weights : ndarray of shape (n_labels,)
    """
    parents = check_parents(parents)
    L = parents.shape[0]
    children = [np.flatnonzero(parents == j) for j in range(L)]
    order = _top_down(parents)
    weights = np.zeros(L)
    if scheme == "sibling":
        roots = np.flatnonzero(parents < 0)
        weights[roots] = 1.0 / roots.shape[0]
        for j in order:
            if children[j].size:
                weights[children[j]] = weights[j] / children[j].shape[0]
    elif scheme == "subtree":
        size = np.ones(L)
        for j in order[::-1]:
            if parents[j] >= 0:
                size[parents[j]] += size[j]
        weights = size / L
    else:
        raise ValueError(f"scheme must be 'sibling' or 'subtree', got {scheme!r}.")
    return weights


def check_parents(parents):
    """A parent array (-1 for roots) describing a forest over the labels.

    Parameters
    ----------
    parents : array-like of int of shape (n_labels,)

    Returns
    -------
    parents : ndarray of int64 of shape (n_labels,)
    """
    parents = np.asarray(parents)
    if parents.ndim != 1 or parents.shape[0] < 1 or parents.dtype.kind not in "iu":
        raise ValueError("hierarchy must be a 1-D integer array: the parent of every label, "
                         "-1 for a root.")
    parents = parents.astype(np.int64)
    L = parents.shape[0]
    if np.any((parents < -1) | (parents >= L)) or np.any(parents == np.arange(L)):
        bad = int(np.flatnonzero((parents < -1) | (parents >= L)
                                 | (parents == np.arange(L)))[0])
        raise ValueError(f"hierarchy: label {bad} has parent {int(parents[bad])}, not -1 or "
                         f"another label in [0, {L}).")
    _top_down(parents)
    return parents


def _top_down(parents):
    """Labels in an order where every parent comes before its children (ValueError on a
    cycle)."""
    L = parents.shape[0]
    order = list(np.flatnonzero(parents < 0))
    seen = np.zeros(L, dtype=bool)
    seen[order] = True
    k = 0
    while k < len(order):
        for child in np.flatnonzero(parents == order[k]):
            if not seen[child]:
                seen[child] = True
                order.append(int(child))
        k += 1
    if len(order) < L:
        raise ValueError(f"hierarchy has a cycle through label {int(np.flatnonzero(~seen)[0])}.")
    return np.array(order, dtype=np.int64)


class MultiLabelStructure(PairwiseGraphBase):
    """Multi-label classification with pairwise label interactions.

    ``X`` is (n_samples, n_features), ``y`` an indicator matrix (n_samples, n_labels) of
    0/1, as scikit-learn's multi-label estimators take them; ``predict`` returns the same
    form. Every sample is a graph of ``n_labels`` binary nodes; node ``l`` sees the sample's
    features through its own weights, and the label pairs of ``pairs`` interact::

        w . Psi(x, y) = sum_l W_l[y_l] . x + sum_{(j, k) in pairs} Theta_jk[y_j, y_k]

    with a 2 x 2 matrix ``Theta_jk`` per pair (estimators' ``fit_intercept`` adds a
    per-label bias). The loss is the Hamming loss over labels, or a weighted one
    (``label_weights``; the hierarchical loss of Rousu et al. 2006 with ``hierarchy``).

    ``pairs``:

    - ``"independent"``: no interactions (one binary SVM per label, jointly regularised);
    - ``"tree"``: the Chow-Liu tree of the training labels
      (:func:`~sklstruct.structures.chow_liu_tree`, the maximum spanning tree of their
      mutual information); inference is exact belief
      propagation, marginals included;
    - ``"full"``: every pair; exact by enumeration up to ``max_enumeration`` labellings
      (``2 ** 16`` by default, 16 labels), beyond that a minimum cut where the learned
      interactions are attractive (submodular) and TRW-S otherwise (approximate: the fit
      warns);
    - an array (n_pairs, 2) of label pairs, e.g. the edges of a label hierarchy.

    Parameters
    ----------
    pairs : {"independent", "tree", "full"} or array-like of shape (n_pairs, 2), \
default="tree"
    hierarchy : array-like of int of shape (n_labels,), default=None
        Parent of every label (-1 for a root): hierarchical multi-label classification
        (Rousu et al. 2006, "Kernel-based learning of hierarchical multilabel classification
        models", JMLR 7). The pairs are then the hierarchy's ``(parent, child)`` edges
        (``pairs`` must be left at its default) and the loss is the hierarchical loss of
        ``hierarchy_loss``.
    hierarchy_loss : {"sibling", "subtree", "hamming"}, default="sibling"
        The per-label loss weights with a hierarchy
        (:func:`~sklstruct.structures.hierarchy_loss_weights`).
    label_weights : array-like of shape (n_labels,), default=None
        Per-label weights of the Hamming loss (without a hierarchy); ones by default.
    inference : {"auto", "exact", "trws"}, default="auto"
        As :class:`~sklstruct.GraphStructure`.
    max_enumeration : int, default=65536
        The most labellings (``2 ** n_labels``) that inference enumerates on a label graph
        with cycles. At most ``2 ** 24``.
    max_iter : int, default=100
        TRW-S iterations.
    smoothing : float, default=1.0
        Pseudo-count of the co-occurrence tables of ``pairs="tree"``.

    Attributes
    ----------
    n_features_ : int
        The number of token features, set by :meth:`bind` (a fit binds a copy of the
        structure to its data: the estimator's ``structure_``).
    n_states_ : int
        The number of states (classes), set by :meth:`bind`.
    loss_weights_ : ndarray of shape (n_states_,)
        The per-state weights of the Hamming loss (from ``class_weight``; ones without),
        set by :meth:`bind`.
    n_labels_ : int
        The number of labels, set by :meth:`bind_batch`.
    label_pairs_ : ndarray of shape (n_label_pairs, 2)
        The label pairs with an interaction (the edges of the label graph), in the order of
        the estimator's ``pairwise_``, set by :meth:`bind_batch`.
    label_loss_weights_ : ndarray of shape (n_labels_,)
        The per-label weights of the loss (``label_weights``, or the hierarchy's).
    """

    input_form = "multilabel"
    directed = True

    def __init__(self, *, pairs="tree", hierarchy=None, hierarchy_loss="sibling",
                 label_weights=None, inference="auto", max_enumeration=65536, max_iter=100,
                 smoothing=1.0):
        self.pairs = pairs
        self.hierarchy = hierarchy
        self.hierarchy_loss = hierarchy_loss
        self.label_weights = label_weights
        self.inference = inference
        self.max_enumeration = max_enumeration
        self.max_iter = max_iter
        self.smoothing = smoothing

    def bind(self, n_features, n_states, classes=None, y=None):
        self._check_inference_params()
        if n_states != 2:
            raise ValueError(f"MultiLabelStructure labels are binary; got {n_states} states.")
        if not isinstance(self.smoothing, numbers.Real) or not self.smoothing > 0:
            raise ValueError(f"smoothing must be a positive number, got {self.smoothing!r}.")
        if self.hierarchy is not None and not (isinstance(self.pairs, str)
                                               and self.pairs == "tree"):
            raise ValueError("with a hierarchy the label pairs are its edges: leave pairs at "
                             "its default.")
        if isinstance(self.pairs, str) and self.pairs not in _PAIRS:
            raise ValueError(f"pairs must be one of {list(_PAIRS)} or an array of label "
                             f"pairs, got {self.pairs!r}.")
        bound = super().bind(n_features, n_states, classes, y)
        bound.n_labels_ = None
        return bound

    def bind_batch(self, batch, Y):
        """Take the number of labels from the training batch and, for ``pairs="tree"``,
        learn the Chow-Liu tree of the training labels.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)

        Returns
        -------
        self
        """
        lengths = batch.lengths
        if lengths.size == 0 or np.any(lengths != lengths[0]):
            raise ValueError("MultiLabelStructure needs multi-label input: every sample has "
                             "the same labels.")
        L = int(lengths[0])
        self.n_labels_ = L
        if self.n_features_ % L:
            raise ValueError("the batch's features do not split into per-label blocks.")
        if self.hierarchy is not None:
            parents = check_parents(self.hierarchy)
            if parents.shape[0] != L:
                raise ValueError(f"hierarchy has {parents.shape[0]} labels, y has {L}.")
            children = np.flatnonzero(parents >= 0)
            self.label_pairs_ = np.column_stack([parents[children], children])
            if self.hierarchy_loss == "hamming":
                weights = np.ones(L)
            else:
                weights = hierarchy_loss_weights(parents, self.hierarchy_loss)
        else:
            weights = np.ones(L) if self.label_weights is None else \
                np.asarray(self.label_weights, dtype=np.float64)
            if weights.shape != (L,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
                raise ValueError(f"label_weights must hold {L} finite non-negative weights.")
            self.label_pairs_ = self._pairs_of(Y.reshape(-1, L), L)
        self.label_loss_weights_ = weights
        return self

    def _pairs_of(self, Y, L):
        if isinstance(self.pairs, str):
            if self.pairs == "independent":
                return np.zeros((0, 2), dtype=np.int64)
            if self.pairs == "full":
                rows, cols = np.triu_indices(L, 1)
                return np.column_stack([rows, cols]).astype(np.int64)
            return chow_liu_tree(Y, self.smoothing)[0]
        pairs = np.asarray(self.pairs)
        if pairs.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        if pairs.dtype.kind not in "iu" or pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError("pairs must be an integer array of label pairs, shape "
                             "(n_pairs, 2).")
        pairs = pairs.astype(np.int64)
        bad = np.flatnonzero(((pairs < 0) | (pairs >= L)).any(axis=1)
                             | (pairs[:, 0] == pairs[:, 1]))
        if bad.size:
            raise ValueError(f"pair {int(bad[0])} {tuple(pairs[bad[0]].tolist())} must join "
                             f"two distinct labels in [0, {L}).")
        key = np.sort(pairs, axis=1)
        if np.unique(key, axis=0).shape[0] != key.shape[0]:
            raise ValueError("pairs must not repeat a pair of labels.")
        return pairs

    @property
    def n_edge_features_(self):
        """One interaction matrix per label pair."""
        return self.label_pairs_.shape[0]

    def _check_bound_to_labels(self):
        if getattr(self, "n_labels_", None) is None:
            raise ValueError("MultiLabelStructure must be bound to training labels "
                             "(bind_batch) before use.")

    def _layout_arrays(self, batch):
        self._check_bound_to_labels()
        L, n = self.n_labels_, batch.n_sequences
        if np.any(batch.lengths != L):
            raise ValueError(f"every sample must have the model's {L} labels.")
        p = self.label_pairs_.shape[0]
        edges = np.tile(self.label_pairs_, (n, 1))
        edge_offsets = np.arange(0, n * p + 1, p, dtype=np.int64) if p else \
            np.zeros(n + 1, dtype=np.int64)
        m = n * p
        return (np.ascontiguousarray(edges, dtype=np.int64), edge_offsets,
                np.arange(m + 1, dtype=np.int64), np.tile(np.arange(p, dtype=np.int64), n),
                np.ones(m))

    def token_loss(self, Y):
        """The (label-weighted) Hamming loss: ``c_l [s != y_l]`` at label ``l``.

        Parameters
        ----------
        Y : ndarray of int of shape (n_samples * n_labels,)

        Returns
        -------
        token_loss : ndarray of shape (n_tokens, 2)
        """
        self._check_bound_to_labels()
        weights = np.tile(self.label_loss_weights_, Y.shape[0] // self.n_labels_)
        loss = np.repeat(weights[:, None], 2, axis=1)
        loss[np.arange(Y.shape[0]), Y] = 0.0
        return loss

    def pairwise_count_blocks(self, batch):
        ones = np.ones(batch.n_sequences)
        return [(4 * k, 4 * k + 4, ones) for k in range(self.n_edge_features_)]
