"""Binary segmentation on 4-connected pixel grids (Yu and Rousu 2007, section 4.1)."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms

from .._inference._kernels import GridKernels
from .._inference.grid import check_widths, grid_map
from ._base import BaseStructure, check_rescale


class GridStructure(BaseStructure):
    """Binary labels on a 4-connected grid with non-negative disagreement costs.

    Images come as 3-D arrays (n_rows, n_cols, n_features) with 2-D label masks, or as
    "sequences" of pixels stored row by row (one feature row per pixel) with ``width`` pixels
    per grid row (the height is the number of pixels over ``width``; images may differ in
    height). The score is the form of Yu and Rousu (2007), section 4.1::

        w . Psi(x, y) = sum_n W[y_n] . x_n - sum_e w_edge . phi_e(x) [y_u(e) != y_v(e)]

    with node features ``x_n`` (the token rows), non-negative edge features ``phi_e`` and edge
    weights ``w_edge`` constrained to be non-negative (:attr:`nonnegative_`). Then decoding and
    loss-augmented decoding (margin rescaling, the node-decomposable weighted Hamming loss) are
    minimum cuts, solved exactly in compiled code (:mod:`sklstruct._inference._mincut`).

    Edge features, separately for horizontal and vertical edges: a constant 1 (a Potts term)
    and, with ``edge_features="contrast"``, ``exp(-contrast_gamma ||x_u - x_v||^2)`` (cheap
    boundaries where neighbouring pixels differ). The pairwise part of ``Psi`` is minus the
    edge features summed over the disagreeing edges, so the layout of the weights is that of
    every structure: ``[W^T.ravel(), w_edge]`` with ``w_edge`` ordered (horizontal constant,
    [horizontal contrast], vertical constant, [vertical contrast]).

    Decoding and loss-augmented decoding are one minimum cut per image (in the learners'
    compiled passes too, :class:`~sklstruct._inference._kernels.GridKernels`). Slack rescaling
    is not a cut: its loss-augmented decoding raises ``ValueError``. Only learners that keep
    ``w_edge >= 0`` can train it (:class:`~sklstruct.M3NSimplicialDecomposition`); decoding
    with a negative edge weight is a ``ValueError``. There is no marginal (exp-)oracle.

    Parameters
    ----------
    width : int, default=None
        Pixels per grid row of pixel-matrix input. ``None``: take every image's width from
        image-shaped input (then images may differ in size).
    edge_features : {"contrast", "potts"}, default="contrast"
    contrast_gamma : float, default=1.0
        Bandwidth of the contrast feature.
    class_weight : dict, 'balanced', array-like or None, default=None
        Per-class weights of the Hamming loss (a dict's labels that the training data lack
        are ignored).
    """

    def __init__(self, *, width=None, edge_features="contrast", contrast_gamma=1.0,
                 class_weight=None):
        self.width = width
        self.edge_features = edge_features
        self.contrast_gamma = contrast_gamma
        self.class_weight = class_weight

    def bind(self, n_features, n_states, classes=None, y=None):
        if self.width is not None and (isinstance(self.width, bool) or not isinstance(
                self.width, numbers.Integral) or self.width < 1):
            raise ValueError(f"width must be None or a positive integer, got {self.width!r}.")
        check_edge_parameters(self.edge_features, self.contrast_gamma)
        if n_states != 2:
            raise ValueError(f"GridStructure labels are binary; the data has {n_states} "
                             "classes.")
        return super().bind(n_features, n_states, classes, y)

    @property
    def n_edge_features_(self):
        return 2 if self.edge_features == "contrast" else 1

    @property
    def n_pairwise_(self):
        return 2 * self.n_edge_features_

    @property
    def nonnegative_(self):
        """Indices of the weights constrained to be non-negative (the edge weights)."""
        start = self.n_states_ * self.n_features_
        return np.arange(start, start + self.n_pairwise_)

    # ----------------------------------------------------------------- grid geometry
    def _edges(self, batch):
        """``(left, right, features)`` of the horizontal, then the vertical edges.

        ``left``/``right`` are global pixel indices, ``features`` has one row per edge. The
        last batch's edges are kept, since an oracle call and the statistics of its answer
        ask for the same batch.
        """
        cached = getattr(self, "_edge_cache", None)
        if cached is not None and cached[0] is batch.X and cached[1] is batch.offsets:
            return cached[2]
        edges = self._compute_edges(batch)
        self._edge_cache = (batch.X, batch.offsets, edges)
        return edges

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_edge_cache", None)
        return state

    def _widths(self, batch):
        """Per-image widths: the structure's ``width`` or the widths of image-shaped input."""
        if batch.slice_shapes is not None:
            raise ValueError("GridStructure labels images; the input is a list of volumes "
                             "(4-D arrays): use Grid3DStructure.")
        if self.width is None:
            if batch.widths is None:
                raise ValueError("GridStructure(width=None) needs images as 3-D arrays "
                                 "(n_rows, n_cols, n_features); for pixel matrices give width.")
            return check_widths(batch.widths, batch.lengths)
        if batch.widths is not None and np.any(batch.widths != self.width):
            bad = int(np.flatnonzero(batch.widths != self.width)[0])
            raise ValueError(f"image {bad} is {int(batch.widths[bad])} pixels wide but the "
                             f"structure has width={self.width}.")
        return check_widths(self.width, batch.lengths)

    def _compute_edges(self, batch):
        lengths = batch.lengths
        widths = self._widths(batch)
        width = np.repeat(widths, lengths)
        local = np.arange(batch.n_tokens) - np.repeat(batch.offsets[:-1], lengths)
        length_of = np.repeat(lengths, lengths)
        pixels = np.arange(batch.n_tokens)
        horizontal = pixels[(local % width) + 1 < width]
        vertical = pixels[local + width < length_of]
        edges = []
        for left, step in ((horizontal, 1), (vertical, width[vertical])):
            right = left + step
            columns = [np.ones(left.shape[0])]
            if self.edge_features == "contrast":
                columns.append(np.exp(-self.contrast_gamma * _squared_distances(batch.X, left,
                                                                               right)))
            edges.append((left, right, np.column_stack(columns)))
        return edges

    def _edge_feature_arrays(self, batch):
        """Per-pixel edge features to the right and downward neighbour, (n_pixels, k) each
        (zero rows where the pixel has no such neighbour)."""
        arrays = []
        for left, _, features in self._edges(batch):
            per_pixel = np.zeros((batch.n_tokens, self.n_edge_features_))
            per_pixel[left] = features
            arrays.append(per_pixel)
        return arrays

    def _edge_costs(self, batch, theta):
        """Per-pixel right and down disagreement costs ``w_edge . phi_e``."""
        if np.any(theta < 0):
            raise ValueError("GridStructure needs non-negative edge weights (the min-cut "
                             "oracle needs submodular pairwise terms); train it with "
                             "M3NSimplicialDecomposition, which keeps them non-negative.")
        k = self.n_edge_features_
        costs = []
        for direction, (left, _, features) in enumerate(self._edges(batch)):
            cost = np.zeros(batch.n_tokens)
            cost[left] = features @ theta[direction * k:(direction + 1) * k]
            costs.append(cost)
        return costs

    # ----------------------------------------------------------------- features
    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        k = self.n_edge_features_
        stats = np.zeros((batch.n_sequences, self.n_pairwise_))
        sequence = batch.sequence_index
        for direction, (left, right, features) in enumerate(self._edges(batch)):
            cut = Y[left] != Y[right]
            for f in range(k):
                stats[:, direction * k + f] = -np.bincount(
                    sequence[left[cut]], weights=features[cut, f], minlength=batch.n_sequences)
        if per_sequence:
            return stats
        return stats.sum(axis=0) if weights is None else weights @ stats

    # ----------------------------------------------------------------- oracles
    def decode(self, batch, unary, pairwise, n_jobs=None):
        right, down = self._edge_costs(batch, pairwise)
        labels, _ = grid_map(unary, batch.offsets, self._widths(batch), right, down)
        return labels

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        if rescale != "margin":
            raise ValueError("GridStructure supports margin rescaling only (slack-rescaled "
                             "loss-augmented decoding is not a minimum cut).")
        if token_loss is None:
            token_loss = self.token_loss(Y)
        right, down = self._edge_costs(batch, pairwise)
        labels, _ = grid_map(unary + token_loss, batch.offsets, self._widths(batch), right,
                             down)
        losses = batch.sum_per_sequence(token_loss[np.arange(Y.shape[0]), labels])
        return labels, losses, self.score(batch, unary, pairwise, labels)

    def example_kernels(self, batch):
        right, down = self._edge_feature_arrays(batch)
        return GridKernels(batch.offsets, self._widths(batch), right, down)


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
