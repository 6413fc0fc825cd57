"""Per-example kernels of binary 6-connected voxel grids, for the compiled per-example passes.

:class:`Grid3DKernels` is the :class:`~sklstruct._inference._kernels.ExampleKernels` of
:class:`~sklstruct.Grid3DStructure`: for volume ``i`` of a batch (voxels slice by slice, row
by row) its max-oracle is the exact minimum cut of :func:`sklstruct._inference._graph.grid3d_cut`
(Boykov and Kolmogorov's maximum flow, 2004, IEEE TPAMI 26(9)) on the loss-augmented scores,
and its pairwise statistics are minus the edge features summed over the cut edges, per axis.
"""

import numpy as np

from sklstruct._inference._validation import shape_products

from libc.stdlib cimport free, malloc

from sklstruct._inference._graph cimport grid3d_cut, grid3d_int_work, grid3d_work
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._typedefs cimport float64_t, int64_t, intp_t


cdef class Grid3DKernels(ExampleKernels):
    """Binary 6-connected grids (volume ``i`` has shape ``shapes[i]`` = (n_slices, n_rows,
    n_cols), its voxels stored in C order).

    ``edge_features`` (n_voxels, 3, k) holds the features of the edge from each voxel to the
    next one along axes 0, 1 and 2 (zero where there is none). Pairwise block: ``k`` weights
    per axis, axis 0 first; a labelling's statistic is minus the edge features summed over
    the edges it cuts. The max-oracle is a minimum cut with disagreement costs
    ``max(0, features . theta_axis)`` (the structure keeps ``theta >= 0``); among several
    maximising labellings it returns the one with the fewest ones. No marginals.
    """

    cdef readonly object shapes, edge_features
    cdef const int64_t* _shapes
    cdef const double* _features
    cdef intp_t _k
    cdef double* _work
    cdef intp_t* _int_work

    def __cinit__(self, *args, **kwargs):
        self._work = NULL
        self._int_work = NULL

    def __init__(self, offsets, shapes, edge_features):
        edge_features = np.ascontiguousarray(edge_features, dtype=np.float64)
        if edge_features.ndim != 3 or edge_features.shape[1] != 3:
            raise ValueError("edge features must have shape (n_voxels, 3, n_edge_features).")
        k = edge_features.shape[2]
        super().__init__(offsets, 2, 3 * k, 3 * k, False)
        self.shapes = np.ascontiguousarray(shapes, dtype=np.int64)
        n_volumes = self.offsets.shape[0] - 1
        if self.shapes.shape != (n_volumes, 3) or np.any(self.shapes < 1) or np.any(
                shape_products(self.shapes, "the shape of a volume")
                != np.diff(self.offsets)):
            raise ValueError("shapes must hold one (n_slices, n_rows, n_cols) per volume, "
                             "each with as many voxels as the volume.")
        if edge_features.shape[0] != self.offsets[n_volumes]:
            raise ValueError("edge features must have one row per voxel.")
        self.edge_features = edge_features
        self._k = k
        cdef const int64_t[:, ::1] shape_view = self.shapes
        cdef const float64_t[:, :, ::1] feature_view = self.edge_features
        self._shapes = &shape_view[0, 0]
        self._features = &feature_view[0, 0, 0] if k else NULL
        max_ints = max(grid3d_int_work(s[0], s[1], s[2]) for s in self.shapes.tolist())
        # loss-augmented scores (2 n) and costs (3 n) before the cut's own workspace
        max_doubles = max(5 * s[0] * s[1] * s[2] + grid3d_work(s[0], s[1], s[2])
                          for s in self.shapes.tolist())
        self._work = <double*> malloc(max_doubles * sizeof(double))
        self._int_work = <intp_t*> malloc(max_ints * sizeof(intp_t))
        if self._work == NULL or self._int_work == NULL:
            raise MemoryError("could not allocate the 3-D grid kernels' workspace")

    def __dealloc__(self):
        free(self._work)
        free(self._int_work)

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t lo = self._offsets[i], n = self._offsets[i + 1] - lo, t, axis, f
        cdef intp_t k = self._k
        cdef const int64_t* shape = self._shapes + 3 * i
        cdef double* unary = self._work
        cdef double* costs = unary + 2 * n
        cdef double* work = costs + 3 * n
        cdef const double* phi
        cdef double cost
        for t in range(2 * n):
            unary[t] = scores[t] + token_loss[t]
        for t in range(n):
            phi = self._features + (lo + t) * 3 * k
            for axis in range(3):
                cost = 0.0
                for f in range(k):
                    cost += phi[axis * k + f] * theta[axis * k + f]
                costs[3 * t + axis] = cost if cost > 0.0 else 0.0
        grid3d_cut(unary, shape[0], shape[1], shape[2], costs, labels, self._int_work, work)

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        cdef intp_t lo = self._offsets[i], k = self._k, f, t = 0, z, y, x
        cdef intp_t n_slices = self._shapes[3 * i], n_rows = self._shapes[3 * i + 1]
        cdef intp_t n_cols = self._shapes[3 * i + 2], plane = n_rows * n_cols
        cdef const double* phi
        for f in range(3 * k):
            index[f] = f
            value[f] = 0.0
        for z in range(n_slices):
            for y in range(n_rows):
                for x in range(n_cols):
                    phi = self._features + (lo + t) * 3 * k
                    if z + 1 < n_slices and labels[t] != labels[t + plane]:
                        for f in range(k):
                            value[f] -= phi[f]
                    if y + 1 < n_rows and labels[t] != labels[t + n_cols]:
                        for f in range(k):
                            value[k + f] -= phi[k + f]
                    if x + 1 < n_cols and labels[t] != labels[t + 1]:
                        for f in range(k):
                            value[2 * k + f] -= phi[2 * k + f]
                    t += 1
        return 3 * k
