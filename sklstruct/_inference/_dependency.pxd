# Per-sentence routines of _dependency.pyx (first-order arc-factored dependency trees), shared
# with other compiled modules. A sentence of n tokens has the dense C-ordered (n + 1) x (n + 1)
# score matrix scores[h * (n + 1) + m] (head h, modifier m; column 0 and the diagonal are
# ignored; -inf forbids an arc). heads[m - 1] receives the head of token m. The workspaces are
# given by the caller, sized by the inline helpers below (doubles / intp_t).
from sklstruct._typedefs cimport int64_t, intp_t


cdef inline intp_t eisner_work(intp_t n) noexcept nogil:
    """Doubles of workspace :func:`eisner_decode` needs for ``n`` tokens."""
    return 4 * (n + 1) * (n + 1)


cdef inline intp_t eisner_int_work(intp_t n) noexcept nogil:
    """Integers of workspace :func:`eisner_decode` needs for ``n`` tokens."""
    return 3 * (n + 1) * (n + 1) + 2 * (n + 2)


cdef inline intp_t spanning_tree_work(intp_t n) noexcept nogil:
    """Doubles of workspace :func:`spanning_tree_decode` needs for ``n`` tokens."""
    return (n + 1) * (n + 1) + 4 * (n + 1)


cdef inline intp_t spanning_tree_int_work(intp_t n) noexcept nogil:
    """Integers of workspace :func:`spanning_tree_decode` needs for ``n`` tokens."""
    return (n + 1) * (n + 1) + 24 * (n + 1)


cdef inline intp_t inside_outside_work(intp_t n) noexcept nogil:
    """Doubles of workspace :func:`eisner_marginals` needs for ``n`` tokens."""
    return 7 * (n + 1) * (n + 1)


cdef inline intp_t matrix_tree_work(intp_t n) noexcept nogil:
    """Doubles of workspace :func:`matrix_tree_marginals` needs for ``n`` tokens."""
    return 2 * n * (n + 1) + 3 * n + 3 * (n + 1)


cdef inline intp_t matrix_tree_int_work(intp_t n) noexcept nogil:
    """Integers of workspace :func:`matrix_tree_marginals` needs for ``n`` tokens."""
    return n


cdef double eisner_decode(const double* scores, intp_t n, bint single_root, int64_t* heads,
                          double* work, intp_t* int_work) noexcept nogil

cdef double spanning_tree_decode(const double* scores, intp_t n, bint single_root,
                                 int64_t* heads, double* work,
                                 intp_t* int_work) noexcept nogil

cdef double eisner_marginals(const double* scores, intp_t n, bint single_root,
                             double* marginals, double* work) noexcept nogil

cdef double matrix_tree_marginals(const double* scores, intp_t n, bint single_root,
                                  double* marginals, double* work,
                                  intp_t* int_work) noexcept nogil
