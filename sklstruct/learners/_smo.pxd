# Pairwise (SMO) steps on one capped simplex, shared by the compiled per-example passes.
from sklstruct._inference._chain cimport intp_t


cdef inline double smo_capped_simplex(const double* G, double* grad, double* value,
                                      double slack, intp_t m, double tol,
                                      intp_t max_iter) noexcept nogil:
    """Maximise ``c . a - 1/2 a' G a`` over ``a >= 0, sum a <= bound`` from ``value``.

    ``grad`` holds ``c - G value`` (kept current) and ``slack`` the unused capacity, which acts
    as a variable (index ``m``) with zero gradient and curvature; the working pair is chosen
    as in LIBSVM (first-order "down", second-order "up"). Returns the largest pairwise
    violation before the first step.
    """
    cdef intp_t it, u, up, down
    cdef double gmax, gmin, viol, diff, curv, gain, best_gain, step = 0.0
    cdef double first = 0.0
    for it in range(max_iter):
        gmax = 0.0  # best "up": largest gradient (the unused capacity counts as 0)
        up = m
        for u in range(m):
            if grad[u] > gmax:
                gmax = grad[u]
                up = u
        gmin = 1e300  # best "down": smallest gradient among positive variables
        down = -1
        if slack > 0:
            gmin = 0.0
            down = m
        for u in range(m):
            if value[u] > 0 and grad[u] < gmin:
                gmin = grad[u]
                down = u
        if down < 0:
            break
        viol = gmax - gmin
        if it == 0:
            first = viol
        if viol <= tol or up == down:
            break
        best_gain = -1.0
        for u in range(m + 1):
            if u == down:
                continue
            diff = (grad[u] if u < m else 0.0) - gmin
            if diff <= 0:
                continue
            if u == m:
                curv = G[down * m + down]
            elif down == m:
                curv = G[u * m + u]
            else:
                curv = G[u * m + u] + G[down * m + down] - 2.0 * G[u * m + down]
            if curv < 1e-12:
                curv = 1e-12
            gain = diff * diff / curv
            if gain > best_gain:
                best_gain = gain
                up = u
                step = diff / curv
        if best_gain < 0:
            break
        if down == m:  # clip the step to the mass available at "down"
            if step > slack:
                step = slack
        elif step >= value[down]:
            step = value[down]
        if step <= 0:
            break
        if up == m:
            slack += step
        else:
            value[up] += step
            for u in range(m):
                grad[u] -= step * G[u * m + up]
        if down == m:
            slack = slack - step if slack > step else 0.0
        else:
            # a variable emptied by the step becomes exactly zero
            value[down] = value[down] - step if value[down] > step else 0.0
            for u in range(m):
                grad[u] += step * G[u * m + down]
    return first
