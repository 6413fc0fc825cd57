"""Gather/scatter loops over cutting-plane constraints stored as labelings.

Each stored entry ``e`` belongs to constraint ``owner[e]`` and says: at token ``t`` the
direction holds ``+scale[e]`` on the true state and ``-scale[e]`` on the wrong state; the flat
indices ``t * n_states + state`` of both are stored.
"""

from sklstruct._typedefs cimport float64_t, int64_t


def constraint_dots(const float64_t[::1] unary, const int64_t[::1] true_index,
                    const int64_t[::1] wrong_index, const float64_t[::1] scale,
                    const int64_t[::1] owner, float64_t[::1] out):
    """``out[k] += sum_{e of k} scale[e] * (unary[true[e]] - unary[wrong[e]])``."""
    cdef Py_ssize_t e, n = true_index.shape[0]
    with nogil:
        for e in range(n):
            out[owner[e]] += scale[e] * (unary[true_index[e]] - unary[wrong_index[e]])


def scatter_constraints(float64_t[::1] M, const int64_t[::1] true_index,
                        const int64_t[::1] wrong_index, const float64_t[::1] scale,
                        const int64_t[::1] owner, const float64_t[::1] alpha):
    """``M[true[e]] += alpha[owner[e]] * scale[e]``; ``M[wrong[e]] -= ...`` (skips alpha == 0)."""
    cdef Py_ssize_t e, n = true_index.shape[0]
    cdef float64_t v
    with nogil:
        for e in range(n):
            v = alpha[owner[e]]
            if v != 0.0:
                v *= scale[e]
                M[true_index[e]] += v
                M[wrong_index[e]] -= v
