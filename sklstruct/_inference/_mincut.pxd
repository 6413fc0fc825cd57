# The per-image minimum cut of _mincut.pyx, shared with the per-example kernels (_kernels.pyx).
from sklstruct._typedefs cimport int64_t, intp_t


cdef inline intp_t mincut_arcs(intp_t n) noexcept nogil:
    """Arcs of the flow graph of an image of ``n`` pixels (at most three pairs per pixel)."""
    return 6 * n + 2


cdef inline intp_t mincut_int_work(intp_t n) noexcept nogil:
    """Integers of workspace :func:`grid_image_cut` needs for ``n`` pixels."""
    return 5 * (n + 2) + 2 * mincut_arcs(n)


cdef double grid_image_cut(const double* unary, intp_t n, intp_t width,
                           const double* right_cost, const double* down_cost, int64_t* labels,
                           intp_t* int_work, double* cap) noexcept nogil
