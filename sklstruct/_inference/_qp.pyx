"""Sequential minimal optimisation for small dense QPs over capped simplices.

Solves  min_a  1/2 a^T G a - c^T a   s.t.  a >= 0,  sum_{k in group g} a_k <= bound_g

by pairwise steps (second-order working-set selection as in LIBSVM), treating the unused
capacity of each group as an implicit slack variable with zero gradient and curvature.
"""

ctypedef double float64_t
ctypedef Py_ssize_t intp_t


def smo_capped_simplex(const float64_t[:, ::1] G, const float64_t[::1] c,
                       float64_t[::1] alpha, float64_t[::1] grad,
                       const intp_t[::1] group_ptr,
                       const intp_t[::1] members, float64_t[::1] slack,
                       float64_t tol, intp_t max_iter):
    """Run SMO in place on ``alpha`` (with ``grad = G alpha - c`` kept current).

    ``members[group_ptr[g]:group_ptr[g + 1]]`` lists the variables of group ``g``;
    ``slack[g]`` is the bound of group ``g`` minus the mass currently in it.

    Returns ``(n_iter, max_violation)``.
    """
    cdef intp_t n_groups = group_ptr.shape[0] - 1
    cdef intp_t it = 0, g, p, k, up, down, best_g
    cdef float64_t viol, best_viol, gmax, gmin, curv, t, obj_gain, best_gain, diff
    cdef float64_t tau = 1e-12
    with nogil:
        while it < max_iter:
            # choose the group and the "down" variable (first order), then "up" (second order)
            best_viol = 0.0
            best_g = -1
            for g in range(n_groups):
                gmax = -1e300
                gmin = 0.0
                if slack[g] > 0:
                    gmax = 0.0
                for p in range(group_ptr[g], group_ptr[g + 1]):
                    k = members[p]
                    if alpha[k] > 0 and grad[k] > gmax:
                        gmax = grad[k]
                    if grad[k] < gmin:
                        gmin = grad[k]
                viol = gmax - gmin
                if viol > best_viol:
                    best_viol = viol
                    best_g = g
            if best_viol <= tol:
                break
            g = best_g
            # down: largest gradient among variables that can decrease (-1 = slack)
            down = -2
            gmax = -1e300
            if slack[g] > 0:
                down = -1
                gmax = 0.0
            for p in range(group_ptr[g], group_ptr[g + 1]):
                k = members[p]
                if alpha[k] > 0 and grad[k] > gmax:
                    gmax = grad[k]
                    down = k
            # up: maximal second-order gain among variables with smaller gradient
            up = -2
            best_gain = 0.0
            if down != -1 and gmax > 0:
                # moving mass into the slack: curvature G[down, down]
                curv = G[down, down]
                if curv < tau:
                    curv = tau
                best_gain = gmax * gmax / curv
                up = -1
            for p in range(group_ptr[g], group_ptr[g + 1]):
                k = members[p]
                if k == down:
                    continue
                diff = gmax - grad[k]
                if diff <= 0:
                    continue
                if down == -1:
                    curv = G[k, k]
                else:
                    curv = G[k, k] + G[down, down] - 2.0 * G[k, down]
                if curv < tau:
                    curv = tau
                obj_gain = diff * diff / curv
                if obj_gain > best_gain:
                    best_gain = obj_gain
                    up = k
            if up == -2:
                break
            # exact line search along e_up - e_down, clipped to the mass available at `down`
            if up == -1:
                curv = G[down, down]
                diff = gmax
            elif down == -1:
                curv = G[up, up]
                diff = -grad[up]
            else:
                curv = G[up, up] + G[down, down] - 2.0 * G[up, down]
                diff = gmax - grad[up]
            if curv < tau:
                curv = tau
            t = diff / curv
            if down == -1:
                if t > slack[g]:
                    t = slack[g]
            elif t >= alpha[down]:
                t = alpha[down]
            if t <= 0:
                break
            if up == -1:
                slack[g] += t
            else:
                alpha[up] += t
                for k in range(grad.shape[0]):
                    grad[k] += t * G[k, up]
            if down == -1:
                slack[g] = slack[g] - t if slack[g] > t else 0.0
            else:
                # a variable emptied by the step becomes exactly zero
                alpha[down] = alpha[down] - t if alpha[down] > t else 0.0
                for k in range(grad.shape[0]):
                    grad[k] -= t * G[k, down]
            it += 1
    return it, best_viol
