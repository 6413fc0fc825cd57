"""Binary segmentation of 6-connected voxel grids (volumes), the 3-D form of the pixel grid
of Yu and Rousu 2007, section 4.1."""

import numbers

import numpy as np

from .._inference._grid3d_kernels import Grid3DKernels
from .._inference._validation import shape_products
from .._inference.graph import grid3d_map
from ._lattice import LatticeStructure


class Grid3DStructure(LatticeStructure):
    """Binary labels on a 6-connected voxel grid with non-negative disagreement costs.

    Volumes come as 4-D arrays (n_slices, n_rows, n_cols, n_features) with 3-D label masks
    (volumes may differ in size), or as "sequences" of voxels stored slice by slice, row by
    row (C order; one feature row per voxel) with ``slice_shape=(n_rows, n_cols)`` (the
    number of slices is the number of voxels over ``n_rows * n_cols``). Every voxel has up to
    six neighbours, one step away along each axis. The score is the form of Yu and Rousu
    (2007), section 4.1, on this grid::

        w . Psi(x, y) = sum_n W[y_n] . x_n - sum_e w_edge . phi_e(x) [y_u(e) != y_v(e)]

    with node features ``x_n`` (the voxel rows), non-negative edge features ``phi_e`` and edge
    weights ``w_edge`` constrained to be non-negative (:attr:`nonnegative_`). Decoding and
    margin-rescaled loss-augmented decoding (the node-decomposable weighted Hamming loss)
    are then minimum cuts, exact, one per volume, by Boykov and Kolmogorov's maximum flow
    on the grid (:func:`sklstruct._inference.graph.grid3d_map`; in the learners' compiled
    passes :class:`~sklstruct._inference._grid3d_kernels.Grid3DKernels`).

    Edge features, separately for the three axes: a constant 1 (a Potts term) and, with
    ``edge_features="contrast"``, ``exp(-contrast_gamma ||x_u - x_v||^2)`` (cheap boundaries
    where neighbouring voxels differ). Separate weights per axis let the model learn
    anisotropic voxel spacing (slices further apart than pixels). The pairwise part of
    ``Psi`` is minus the edge features summed over the disagreeing edges; the weights are
    ``[W^T.ravel(), w_edge]`` with ``w_edge`` ordered by array axis: between slices (axis 0),
    between rows (axis 1), between columns (axis 2), each [constant, [contrast]].

    As :class:`~sklstruct.GridStructure`: slack rescaling is not a cut (its loss-augmented
    decoding raises ``ValueError``), only learners that keep ``w_edge >= 0`` can train it
    (:class:`~sklstruct.M3NSimplicialDecomposition`), decoding with a negative edge weight
    is a ``ValueError``, and there is no marginal (exp-)oracle.

    Parameters
    ----------
    slice_shape : tuple of two int, default=None
        ``(n_rows, n_cols)`` of every slice of voxel-matrix input. ``None``: take every
        volume's shape from volume-shaped input (then volumes may differ in size).
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

    Examples
    --------
    >>> from sklstruct import Grid3DStructure, M3NSimplicialDecomposition
    >>> from sklstruct.datasets import make_noisy_volumes
    >>> X, y = make_noisy_volumes(4, shape=(6, 8, 8), random_state=0)
    >>> X[0].shape, y[0].shape
    ((6, 8, 8, 3), (6, 8, 8))
    >>> model = M3NSimplicialDecomposition(Grid3DStructure(), C=1.0).fit(X, y)
    >>> model.predict(X[:1])[0].shape
    (6, 8, 8)
    """

    n_axes = 3

    def __init__(self, *, slice_shape=None, edge_features="contrast", contrast_gamma=1.0,
                 class_weight=None):
        self.slice_shape = slice_shape
        self.edge_features = edge_features
        self.contrast_gamma = contrast_gamma
        self.class_weight = class_weight

    def bind(self, n_features, n_states, classes=None, y=None):
        _check_slice_shape(self.slice_shape)
        return super().bind(n_features, n_states, classes, y)

    # ----------------------------------------------------------------- grid geometry
    def volume_shapes(self, batch):
        """``(n_slices, n_rows, n_cols)`` of every volume of ``batch``.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        shapes : ndarray of int64 of shape (n_volumes, 3)
        """
        if batch.widths is not None:
            raise ValueError("Grid3DStructure labels volumes; the input is a list of images "
                             "(3-D arrays): use GridStructure.")
        if self.slice_shape is None:
            if batch.slice_shapes is None:
                raise ValueError(
                    "Grid3DStructure(slice_shape=None) needs volumes as 4-D arrays (n_slices, "
                    "n_rows, n_cols, n_features); for voxel matrices (one row per voxel, "
                    "slice by slice, row by row) give slice_shape=(n_rows, n_cols).")
            slice_shapes = np.asarray(batch.slice_shapes, dtype=np.int64)
        else:
            expected = np.array(_check_slice_shape(self.slice_shape), dtype=np.int64)
            if batch.slice_shapes is not None:
                bad = np.flatnonzero(np.any(batch.slice_shapes != expected, axis=1))
                if bad.size:
                    i = int(bad[0])
                    raise ValueError(
                        f"volume {i} has slices of shape {tuple(batch.slice_shapes[i].tolist())} "
                        f"but the structure has slice_shape={tuple(expected.tolist())}.")
            slice_shapes = np.tile(expected, (batch.n_sequences, 1))
        if np.any(slice_shapes < 1):
            raise ValueError("every slice shape must have positive sizes.")
        sizes = shape_products(slice_shapes, "a slice shape")
        lengths = batch.lengths
        bad = np.flatnonzero(lengths % sizes)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"volume {i} has {lengths[i]} voxels, not a multiple of the slice "
                             f"size {slice_shapes[i, 0]} x {slice_shapes[i, 1]}.")
        return np.ascontiguousarray(np.column_stack([lengths // sizes, slice_shapes]),
                                    dtype=np.int64)

    def _axis_edges(self, batch):
        """The edges along axes 0 (between slices), 1 (rows) and 2 (columns)."""
        shapes = self.volume_shapes(batch)
        lengths = batch.lengths
        voxels = np.arange(batch.n_tokens)
        local = voxels - np.repeat(batch.offsets[:-1], lengths)
        per_voxel = np.repeat(shapes, lengths, axis=0)
        n_rows, n_cols = per_voxel[:, 1], per_voxel[:, 2]
        plane = n_rows * n_cols
        coordinates = (local // plane, (local // n_cols) % n_rows, local % n_cols)
        strides = (plane, n_cols, np.ones_like(n_cols))
        edges = []
        for axis in range(3):
            left = voxels[coordinates[axis] + 1 < per_voxel[:, axis]]
            edges.append((left, left + strides[axis][left]))
        return edges

    # ----------------------------------------------------------------- oracles
    def _cut(self, batch, unary, costs, n_jobs):
        labels, _ = grid3d_map(unary, self.volume_shapes(batch), costs, n_jobs=n_jobs)
        return labels

    def example_kernels(self, batch):
        return Grid3DKernels(batch.offsets, self.volume_shapes(batch),
                             self._edge_feature_arrays(batch))


def _check_slice_shape(slice_shape):
    """``slice_shape`` as a pair of positive ints (None stays None)."""
    if slice_shape is None:
        return None
    if isinstance(slice_shape, (str, bytes)) or np.ndim(slice_shape) != 1 or \
            len(slice_shape) != 2 or not all(
                isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1
                for s in slice_shape):
        raise ValueError(f"slice_shape must be None or a pair of positive integers (n_rows, "
                         f"n_cols), got {slice_shape!r}.")
    return int(slice_shape[0]), int(slice_shape[1])
