"""What 2-D and 3-D grids share: binary labels, per-axis edge features, minimum cuts.

A lattice structure has node features on its rows (pixels, voxels) and edges between
neighbours along each of its axes. Every edge carries features ``phi_e`` (a constant 1,
plus ``exp(-gamma ||x_u - x_v||^2)`` with ``edge_features="contrast"``) scored by per-axis
weights constrained to be non-negative, and the pairwise part of ``Psi`` is minus the edge
features summed over the edges whose ends disagree (Yu and Rousu 2007, section 4.1). Then
decoding and margin-rescaled loss-augmented decoding are minimum cuts.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms

from ._base import BaseStructure, check_rescale


class LatticeStructure(BaseStructure):
    """Base of :class:`~sklstruct.GridStructure` and :class:`~sklstruct.Grid3DStructure`.

    Subclasses give the number of axes ``n_axes``, the neighbours along each axis
    (:meth:`_axis_edges`), the cut (:meth:`_cut`) and their per-example kernels; the base
    gives the edge features, the weight layout ``[W^T.ravel(), w_edge]`` (``w_edge`` axis by
    axis, each [constant, [contrast]]), the pairwise statistics and the oracles.
    """

    n_axes = 0

    def bind(self, n_features, n_states, classes=None, y=None):
        check_edge_parameters(self.edge_features, self.contrast_gamma)
        if n_states != 2:
            raise ValueError(f"{type(self).__name__} labels are binary; the data has "
                             f"{n_states} classes.")
        return super().bind(n_features, n_states, classes, y)

    @property
    def n_edge_features_(self):
        return 2 if self.edge_features == "contrast" else 1

    @property
    def n_pairwise_(self):
        return self.n_axes * self.n_edge_features_

    @property
    def nonnegative_(self):
        """Indices of the weights constrained to be non-negative (the edge weights)."""
        start = self.n_states_ * self.n_features_
        return np.arange(start, start + self.n_pairwise_)

    # ----------------------------------------------------------------- geometry
    def _axis_edges(self, batch):
        """``(left, right)`` global row indices of the edges along every axis."""
        raise NotImplementedError

    def _edges(self, batch):
        """``(left, right, features)`` of the edges along every axis, in axis order.

        ``features`` has one row per edge. The last batch's edges are kept, since an oracle
        call and the statistics of its answer ask for the same batch.
        """
        key = (batch.X, batch.offsets, batch.widths, batch.slice_shapes)
        cached = getattr(self, "_edge_cache", None)
        if cached is not None and all(a is b for a, b in zip(cached[0], key)):
            return cached[1]
        edges = []
        for left, right in self._axis_edges(batch):
            columns = [np.ones(left.shape[0])]
            if self.edge_features == "contrast":
                columns.append(np.exp(-self.contrast_gamma
                                      * _squared_distances(batch.X, left, right)))
            edges.append((left, right, np.column_stack(columns)))
        self._edge_cache = (key, edges)
        return edges

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_edge_cache", None)
        return state

    def _edge_feature_arrays(self, batch):
        """Per-row features of the edge to the next row along every axis, shape
        (n_rows, n_axes, k) (zero where the row has no such neighbour)."""
        per_row = np.zeros((batch.n_tokens, self.n_axes, self.n_edge_features_))
        for axis, (left, _, features) in enumerate(self._edges(batch)):
            per_row[left, axis] = features
        return per_row

    def _edge_costs(self, batch, theta):
        """Per-row disagreement costs ``w_edge . phi_e`` with the next row along every axis,
        shape (n_rows, n_axes) (zero past the end of an axis)."""
        if np.any(theta < 0):
            raise ValueError(f"{type(self).__name__} needs non-negative edge weights (the "
                             "min-cut oracle needs submodular pairwise terms); train it with "
                             "M3NSimplicialDecomposition, which keeps them non-negative.")
        k = self.n_edge_features_
        costs = np.zeros((batch.n_tokens, self.n_axes))
        for axis, (left, _, features) in enumerate(self._edges(batch)):
            costs[left, axis] = features @ theta[axis * k:(axis + 1) * k]
        return costs

    # ----------------------------------------------------------------- features
    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        Y = self.check_labels(batch, Y)
        k = self.n_edge_features_
        stats = np.zeros((batch.n_sequences, self.n_pairwise_))
        sequence = batch.sequence_index
        for axis, (left, right, features) in enumerate(self._edges(batch)):
            cut = Y[left] != Y[right]
            for f in range(k):
                stats[:, axis * k + f] = -np.bincount(
                    sequence[left[cut]], weights=features[cut, f], minlength=batch.n_sequences)
        if per_sequence:
            return stats
        return stats.sum(axis=0) if weights is None else weights @ stats

    # ----------------------------------------------------------------- oracles
    def _cut(self, batch, unary, costs, n_jobs):
        """The labels of the minimum cuts of ``unary`` scores and ``costs`` per axis."""
        raise NotImplementedError

    def decode(self, batch, unary, pairwise, n_jobs=None):
        return self._cut(batch, unary, self._edge_costs(batch, pairwise), n_jobs)

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        if rescale != "margin":
            raise ValueError(f"{type(self).__name__} supports margin rescaling only (slack-"
                             "rescaled loss-augmented decoding is not a minimum cut).")
        Y = self.check_labels(batch, Y)
        if token_loss is None:
            token_loss = self.token_loss(Y)
        labels = self._cut(batch, unary + token_loss, self._edge_costs(batch, pairwise),
                           n_jobs)
        losses = batch.sum_per_sequence(token_loss[np.arange(Y.shape[0]), labels])
        return labels, losses, self.score(batch, unary, pairwise, labels)


def check_edge_parameters(edge_features, contrast_gamma):
    """Raise a ``ValueError`` for an unknown edge feature kind or a bad contrast bandwidth."""
    if edge_features not in ("contrast", "potts"):
        raise ValueError(f"edge_features must be 'contrast' or 'potts', got "
                         f"{edge_features!r}.")
    if isinstance(contrast_gamma, bool) or not isinstance(contrast_gamma, numbers.Real) or \
            not np.isfinite(contrast_gamma) or contrast_gamma < 0:
        raise ValueError(f"contrast_gamma must be a finite non-negative number, got "
                         f"{contrast_gamma!r}.")


def _squared_distances(X, left, right):
    """``||X[left] - X[right]||^2`` row by row (dense or CSR ``X``)."""
    if sp.issparse(X):
        cross = np.asarray(X[left].multiply(X[right]).sum(axis=1)).ravel()
        norms = row_norms(X, squared=True)
        return np.maximum(norms[left] + norms[right] - 2.0 * cross, 0.0)
    diff = X[left] - X[right]
    return np.einsum("ij,ij->i", diff, diff)
