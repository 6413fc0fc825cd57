"""Python entry points to the QP cores of :mod:`sklstruct._solvers._smo` (SMO, and the
active-set solver of one capped simplex)."""

import numpy as np

from sklstruct._solvers._smo cimport (_group_violation, active_set_capped_simplex,
                                      smo_capped_simplices)
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


def active_set(const float64_t[:, ::1] G, float64_t[::1] grad, float64_t[::1] value,
               float64_t[::1] slack, double tol, intp_t max_iter):
    """Run :func:`active_set_capped_simplex` in place (one capped simplex); return its
    iterations (-1: it gave up)."""
    cdef intp_t m = value.shape[0], result
    if G.shape[0] != m or G.shape[1] != m or grad.shape[0] != m or slack.shape[0] != 1:
        raise ValueError("G must be (m, m), grad (m,) and slack (1,) for m values.")
    if m < 1:
        return 0
    work = np.empty((m + 2) ** 2 + 5 * m + 6)
    cdef float64_t[::1] w = work
    with nogil:
        result = active_set_capped_simplex(&G[0, 0], m, &grad[0], &value[0], &slack[0], tol,
                                           max_iter, &w[0])
    return result
