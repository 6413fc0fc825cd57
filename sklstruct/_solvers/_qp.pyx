"""Python entry point to the SMO core of :mod:`sklstruct._solvers._smo`."""

from sklstruct._solvers._smo cimport _group_violation, smo_capped_simplices
from sklstruct._typedefs cimport float64_t, intp_t


def smo(const float64_t[:, ::1] G, float64_t[::1] grad, float64_t[::1] value,
        const intp_t[::1] group_ptr, float64_t[::1] slack, double tol, intp_t max_steps):
    """Run :func:`smo_capped_simplices` in place; return ``(n_steps, final violation)``."""
    cdef intp_t m = value.shape[0], n_groups = group_ptr.shape[0] - 1, n_steps = 0, g
    cdef double worst = 0.0, violation
    cdef const double* G_ptr = &G[0, 0] if m > 0 else NULL
    cdef double* grad_ptr = &grad[0] if m > 0 else NULL
    cdef double* value_ptr = &value[0] if m > 0 else NULL
    if n_groups == 0:
        return 0, 0.0
    with nogil:
        smo_capped_simplices(G_ptr, m, grad_ptr, value_ptr, &group_ptr[0], n_groups,
                             &slack[0], tol, max_steps, &n_steps)
        for g in range(n_groups):
            violation = _group_violation(grad_ptr, value_ptr, group_ptr[g], group_ptr[g + 1],
                                         slack[g])
            if violation > worst:
                worst = violation
    return n_steps, worst
