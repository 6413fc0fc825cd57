# Sequential minimal optimisation over products of capped simplices: the one QP core of
# sklstruct, called by the compiled per-example passes (through this .pxd) and, through
# sklstruct._solvers.qp.solve_capped_simplex_qp, by the Python solvers.
from libc.math cimport fabs

from sklstruct._typedefs cimport intp_t


cdef inline double _group_violation(const double* grad, const double* value, intp_t lo,
                                    intp_t hi, double slack) noexcept nogil:
    """Largest gain rate ``grad[up] - grad[down]`` of a pairwise move within one group.

    The unused capacity of the group is a variable with gradient 0 that can always receive
    mass and can give mass when it is positive.
    """
    cdef intp_t u
    cdef double gmax = 0.0, gmin = 1e300
    if slack > 0:
        gmin = 0.0
    for u in range(lo, hi):
        if grad[u] > gmax:
            gmax = grad[u]
        if value[u] > 0 and grad[u] < gmin:
            gmin = grad[u]
    if gmin == 1e300:
        return 0.0
    return gmax - gmin


cdef inline double smo_capped_simplices(
        const double* G, intp_t m, double* grad, double* value, const intp_t* group_ptr,
        intp_t n_groups, double* slack, double tol, intp_t max_steps,
        intp_t* n_steps) noexcept nogil:
    """Maximise ``c . a - 1/2 a' G a`` over ``a >= 0`` and ``sum_{k in g} a_k <= bound_g``.

    ``G`` is the dense symmetric positive semi-definite (m, m) matrix, row-major. The variables
    of group ``g`` are ``group_ptr[g] .. group_ptr[g + 1]`` (contiguous); ``slack[g]`` is the
    group's unused capacity ``bound_g - sum_{k in g} a_k`` and ``grad`` holds ``c - G a``; all
    three are updated in place. Each step moves mass between two variables of the group with
    the largest violation (the unused capacity counts as a variable with gradient 0): "down" is
    the positive variable of smallest gradient, "up" the one of largest second-order gain
    (LIBSVM's working-set selection), and the step is the exact line search clipped to the mass
    available at "down"; a variable emptied by a step becomes exactly zero.

    Stops when the largest violation is at most ``tol`` or after ``max_steps`` steps.
    Returns the largest violation before the first step; ``n_steps`` receives the number of
    steps taken.
    """
    cdef intp_t steps = 0, g, best_group, k, u, up, down, lo, hi
    cdef double violation, worst, first = -1.0, gmin, diff, curvature, floor, gain, best_gain
    cdef double step = 0.0
    while True:
        worst = 0.0
        best_group = -1
        for g in range(n_groups):
            violation = _group_violation(grad, value, group_ptr[g], group_ptr[g + 1],
                                         slack[g])
            if violation > worst:
                worst = violation
                best_group = g
        if first < 0:
            first = worst
        if best_group < 0 or worst <= tol or steps >= max_steps:
            break
        lo = group_ptr[best_group]
        hi = group_ptr[best_group + 1]
        # down: the smallest gradient among variables that can give mass (m = the capacity)
        gmin = 1e300
        down = -1
        if slack[best_group] > 0:
            gmin = 0.0
            down = m
        for u in range(lo, hi):
            if value[u] > 0 and grad[u] < gmin:
                gmin = grad[u]
                down = u
        # up: the largest second-order gain (diff^2 / curvature) among the others
        up = -1
        best_gain = -1.0
        for k in range(lo, hi + 1):
            u = m if k == hi else k  # (index m: the unused capacity)
            if u == down:
                continue
            diff = (grad[u] if u < m else 0.0) - gmin
            if diff <= 0:
                continue
            if u == m:
                curvature = G[down * m + down]
                floor = 1e-12
            elif down == m:
                curvature = G[u * m + u]
                floor = 1e-12
            else:
                curvature = G[u * m + u] + G[down * m + down] - 2.0 * G[u * m + down]
                # below this the difference is rounding of the Gram entries: the two points
                # are numerically one, and a step longer than diff / floor is not justified
                floor = 1e-10 * (fabs(G[u * m + u]) + fabs(G[down * m + down]))
                if floor < 1e-12:
                    floor = 1e-12
            if curvature < floor:
                curvature = floor
            gain = diff * diff / curvature
            if gain > best_gain:
                best_gain = gain
                up = u
                step = diff / curvature
        if up < 0:
            break
        if down == m:
            if step > slack[best_group]:
                step = slack[best_group]
        elif step >= value[down]:
            step = value[down]
        if step <= 0:
            break
        if up == m:
            slack[best_group] += step
        else:
            value[up] += step
            for u in range(m):
                grad[u] -= step * G[u * m + up]
        if down == m:
            slack[best_group] = slack[best_group] - step if slack[best_group] > step else 0.0
        else:
            value[down] = value[down] - step if value[down] > step else 0.0
            for u in range(m):
                grad[u] += step * G[u * m + down]
        steps += 1
    n_steps[0] = steps
    return first
