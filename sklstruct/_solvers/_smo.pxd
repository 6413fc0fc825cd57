# Sequential minimal optimisation over products of capped simplices, the QP core of
# sklstruct, called by the compiled per-example passes (through this .pxd) and, through
# sklstruct._solvers.qp.solve_capped_simplex_qp, by the Python solvers; and an active-set
# solver of one capped simplex, exact where SMO crawls (singular Gram matrices), for the
# multi-point masters.
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


cdef inline bint _solve_dense(double* A, double* rhs, intp_t n) noexcept nogil:
    """Solve ``A x = rhs`` (``n x n``, row-major) by Gaussian elimination with partial
    pivoting, in place: ``x`` into ``rhs``, ``A`` overwritten. False for a zero pivot."""
    cdef intp_t col, a, b, piv
    cdef double t, factor
    for col in range(n):
        piv = col
        for a in range(col + 1, n):
            if fabs(A[a * n + col]) > fabs(A[piv * n + col]):
                piv = a
        if A[piv * n + col] == 0.0:
            return False
        if piv != col:
            for b in range(n):
                t = A[col * n + b]
                A[col * n + b] = A[piv * n + b]
                A[piv * n + b] = t
            t = rhs[col]
            rhs[col] = rhs[piv]
            rhs[piv] = t
        for a in range(col + 1, n):
            factor = A[a * n + col] / A[col * n + col]
            if factor != 0.0:
                for b in range(col, n):
                    A[a * n + b] -= factor * A[col * n + b]
                rhs[a] -= factor * rhs[col]
    for a in range(n - 1, -1, -1):
        t = rhs[a]
        for b in range(a + 1, n):
            t -= A[a * n + b] * rhs[b]
        rhs[a] = t / A[a * n + a]
    return True


cdef inline intp_t active_set_capped_simplex(
        const double* G, intp_t m, double* grad, double* value, double* slack, double tol,
        intp_t max_iter, double* work) noexcept nogil:
    """Maximise ``c . a - 1/2 a' G a`` over ``a >= 0`` and ``sum_k a_k <= bound``, one
    capped simplex of ``m <= 126`` variables, by a primal active-set method (the exact
    solution on each face from its KKT system), from the point given.

    ``G``, ``grad`` (``c - G a``), ``value`` (``a``) and ``slack`` (``bound - sum a``) are as
    for :func:`smo_capped_simplices`; the unused capacity is a variable of gradient 0. ``G``
    is positive semi-definite and often singular (directions that differ in a few tokens),
    so the faces' systems use ``G + delta I`` with ``delta`` 1e-12 of ``G``'s largest
    diagonal entry: each face's solution is then unique, and the objective of the result
    differs from the exact optimum by at most ``delta`` times the squared length of the
    move. A full step ends on its face's solution, which is then checked directly (the
    system is not solved again, where rounding would move the point along a nearly flat
    direction); a variable enters when its gradient exceeds the face's by more than
    ``tol``. ``work`` holds ``(m + 2)^2 + 5 m + 6`` doubles.

    Returns the number of iterations, or -1 (the point, its gradient and slack then a
    feasible point at least as good as the start, to be finished by SMO) when ``max_iter``
    runs out, a face's system is singular, ``G`` is zero or ``m`` is too large.
    """
    cdef intp_t n = m + 1, k, a, b, u, l, it, best, block
    cdef intp_t face[128]
    cdef double* x = work
    cdef double* x0 = x + n
    cdef double* g0 = x0 + n
    cdef double* g = g0 + n
    cdef double* A = g + n
    cdef double* rhs = A + (n + 1) * (n + 1)
    cdef double delta = 0.0, level, top, alpha
    cdef bint on_face = False
    cdef intp_t result = -1
    if m < 1 or n > 127:
        return -1
    for u in range(m):
        if G[u * m + u] > delta:
            delta = G[u * m + u]
    if not delta > 0.0:
        return -1
    delta *= 1e-12
    for u in range(m):
        x[u] = value[u]
        g0[u] = grad[u]
    x[m] = slack[0] if slack[0] > 0.0 else 0.0
    g0[m] = 0.0
    k = 0
    for u in range(n):
        x0[u] = x[u]
        if x[u] > 0.0:
            face[k] = u
            k += 1
    if k == 0:
        return 0
    for it in range(max_iter):
        # the gradient of the regularised objective at x
        for u in range(n):
            g[u] = g0[u] - delta * (x[u] - x0[u])
        for u in range(m):
            for l in range(m):
                if x[l] != x0[l]:
                    g[u] -= G[u * m + l] * (x[l] - x0[l])
        if not on_face:
            # the Newton step on the face: [H_FF 1; 1' 0] [p; nu] = [g_F; 0]
            for a in range(k):
                for b in range(k):
                    A[a * (k + 1) + b] = (G[face[a] * m + face[b]]
                                          if face[a] < m and face[b] < m else 0.0)
                A[a * (k + 1) + a] += delta
                A[a * (k + 1) + k] = 1.0
                A[k * (k + 1) + a] = 1.0
                rhs[a] = g[face[a]]
            A[k * (k + 1) + k] = 0.0
            rhs[k] = 0.0
            if not _solve_dense(A, rhs, k + 1):  # a singular system
                break
            top = 0.0
            for a in range(k):
                if fabs(rhs[a]) > top:
                    top = fabs(rhs[a])
            on_face = top <= 1e-15  # (p = 0: x is the face's solution)
            if not on_face:
                # the longest step along p that keeps the face's variables >= 0
                alpha = 1.0
                block = -1
                for a in range(k):
                    if rhs[a] < 0.0 and -x[face[a]] / rhs[a] < alpha:
                        alpha = -x[face[a]] / rhs[a]
                        block = a
                for a in range(k):
                    x[face[a]] += alpha * rhs[a]
                    if x[face[a]] < 0.0:
                        x[face[a]] = 0.0
                if block >= 0:
                    x[face[block]] = 0.0
                    k -= 1
                    face[block] = face[k]
                    if k == 0:
                        break
                else:
                    on_face = True
                continue
        # x solves its face: done unless a variable off the face gains more than tol
        on_face = False
        level = g[face[0]]
        for a in range(1, k):
            if g[face[a]] > level:
                level = g[face[a]]
        best = -1
        top = level + tol
        for u in range(n):
            if g[u] > top:
                for a in range(k):
                    if face[a] == u:
                        break
                else:
                    top = g[u]
                    best = u
        if best < 0:
            result = it + 1
            break
        face[k] = best
        k += 1
    # the point reached, its exact gradient and slack
    for u in range(m):
        value[u] = x[u]
        grad[u] = g0[u]
        for l in range(m):
            if x[l] != x0[l]:
                grad[u] -= G[u * m + l] * (x[l] - x0[l])
    slack[0] = x[m]
    return result
