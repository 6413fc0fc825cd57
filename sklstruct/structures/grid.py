"""Binary segmentation on 4-connected pixel grids (Yu and Rousu 2007, section 4.1)."""

import numbers

import numpy as np

from .._inference._kernels import GridKernels
from .._inference.grid import check_widths, grid_map
from ._lattice import LatticeStructure


class GridStructure(LatticeStructure):
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
        are ignored if it weighs every label the data have, else a ``ValueError``).

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
    """

    n_axes = 2

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
        return super().bind(n_features, n_states, classes, y)

    # ----------------------------------------------------------------- grid geometry
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

    def _axis_edges(self, batch):
        """The horizontal (to the right), then the vertical (downward) edges."""
        lengths = batch.lengths
        width = np.repeat(self._widths(batch), lengths)
        local = np.arange(batch.n_tokens) - np.repeat(batch.offsets[:-1], lengths)
        length_of = np.repeat(lengths, lengths)
        pixels = np.arange(batch.n_tokens)
        horizontal = pixels[(local % width) + 1 < width]
        vertical = pixels[local + width < length_of]
        return [(horizontal, horizontal + 1), (vertical, vertical + width[vertical])]

    # ----------------------------------------------------------------- oracles
    def _cut(self, batch, unary, costs, n_jobs):
        labels, _ = grid_map(unary, batch.offsets, self._widths(batch),
                             np.ascontiguousarray(costs[:, 0]),
                             np.ascontiguousarray(costs[:, 1]))
        return labels

    def example_kernels(self, batch):
        features = self._edge_feature_arrays(batch)
        return GridKernels(batch.offsets, self._widths(batch),
                           np.ascontiguousarray(features[:, 0]),
                           np.ascontiguousarray(features[:, 1]))
