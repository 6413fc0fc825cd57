# Per-example kernels of pairwise graph structures (graphs given per example, multi-label
# interactions, output trees) and exact inference by enumeration, shared with other compiled
# modules. Conventions as in _graph.pxd: ``unary`` (n_nodes, n_states), ``pairwise``
# (n_edges, n_states, n_states) row-major, ``edges`` (n_edges, 2) local node indices.
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._typedefs cimport int64_t, intp_t


cdef inline intp_t enumerate_int_work(intp_t n_nodes, intp_t n_edges) noexcept nogil:
    """Integers of workspace the enumeration routines need (adjacency, digits, directions)."""
    return 4 * n_nodes + 1 + 2 * n_edges


cdef double enumerate_max(const double* unary, intp_t n_nodes, intp_t n_states,
                          const int64_t* edges, intp_t n_edges, const double* pairwise,
                          int64_t* labels, intp_t* int_work) noexcept nogil

cdef double enumerate_marginals(const double* unary, intp_t n_nodes, intp_t n_states,
                                const int64_t* edges, intp_t n_edges, const double* pairwise,
                                double* node_marginals, double* edge_marginals,
                                intp_t* int_work) noexcept nogil


cdef class GraphKernels(ExampleKernels):
    cdef readonly object edges, edge_offsets, feature_offsets, feature_index, feature_value
    cdef readonly object pair_index, methods
    cdef readonly intp_t n_edge_features, n_pair, max_iter
    cdef readonly double tol
    cdef const int64_t* _edges
    cdef const int64_t* _edge_offsets
    cdef const int64_t* _feature_offsets
    cdef const int64_t* _feature_index
    cdef const double* _feature_value
    cdef const int64_t* _pair_index
    cdef const int64_t* _methods
    cdef double* _work
    cdef intp_t* _int_work
    cdef intp_t _max_nodes, _max_edges

    cdef double* _node_buffer(self) noexcept nogil
    cdef double* _potential_buffer(self) noexcept nogil
    cdef double* _edge_marginal_buffer(self) noexcept nogil
    cdef double* _routine_work(self) noexcept nogil
    cdef void edge_potentials(self, intp_t i, const double* theta, double* out) noexcept nogil
    cdef double map_example(self, intp_t i, const double* unary, const double* potentials,
                            int64_t* labels, double* upper_bound) noexcept nogil
