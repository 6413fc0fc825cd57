# Per-graph routines of _graph.pyx (pairwise Markov networks given per example as a graph),
# shared with other compiled modules. Conventions: ``unary`` is (n_nodes, n_states) and
# ``pairwise`` (n_edges, n_states, n_states), both row-major; ``edges`` is (n_edges, 2) with
# ``pairwise[e, a, b]`` the score of ``y[edges[e, 0]] = a, y[edges[e, 1]] = b``. Every routine
# writes only into its outputs and the caller's workspace, sized by the helpers below.
from sklstruct._inference._workspace cimport _larger
from sklstruct._typedefs cimport int64_t, intp_t


cdef inline intp_t cycle_int_work(intp_t n_nodes) noexcept nogil:
    """Integers of workspace :func:`forest_cycle_edge` needs."""
    return 2 * n_nodes


cdef inline intp_t forest_int_work(intp_t n_nodes, intp_t n_edges) noexcept nogil:
    """Integers of workspace the forest routines need (adjacency lists and BFS schedule)."""
    return 4 * n_nodes + 1 + 2 * n_edges


cdef inline intp_t forest_map_work(intp_t n_nodes, intp_t n_states) noexcept nogil:
    """Doubles of workspace :func:`forest_max_product` needs."""
    return n_nodes * n_states


cdef inline intp_t forest_marginals_work(intp_t n_nodes, intp_t n_states) noexcept nogil:
    """Doubles of workspace :func:`forest_sum_product` needs."""
    return 3 * n_nodes * n_states + n_states


cdef inline intp_t trws_int_work(intp_t n_nodes, intp_t n_edges) noexcept nogil:
    """Integers of workspace :func:`trws_map` needs (on a forest it runs the exact routine)."""
    return _larger(forest_int_work(n_nodes, n_edges), 2 * n_nodes + 1 + 2 * n_edges)


cdef inline intp_t trws_work(intp_t n_nodes, intp_t n_edges, intp_t n_states) noexcept nogil:
    """Doubles of workspace :func:`trws_map` needs."""
    return _larger(forest_map_work(n_nodes, n_states), (2 * n_edges + 3) * n_states)


cdef inline intp_t flow_int_work(intp_t n_nodes, intp_t n_arcs) noexcept nogil:
    """Integers of workspace of the maximum-flow solver on ``n_nodes`` and ``n_arcs`` arcs."""
    return 8 * n_nodes + 1 + 2 * n_arcs


cdef inline intp_t flow_work(intp_t n_nodes, intp_t n_arcs) noexcept nogil:
    """Doubles of workspace of the maximum-flow solver (residual capacities)."""
    return n_nodes + n_arcs


cdef inline intp_t grid3d_arcs(intp_t n_slices, intp_t n_rows, intp_t n_cols) noexcept nogil:
    """Arcs of the flow graph of a 6-connected grid: two per pair of neighbours."""
    return 2 * ((n_slices - 1) * n_rows * n_cols + n_slices * (n_rows - 1) * n_cols
                + n_slices * n_rows * (n_cols - 1))


cdef inline intp_t submodular_int_work(intp_t n_nodes, intp_t n_edges) noexcept nogil:
    """Integers of workspace :func:`submodular_cut` needs (two arcs per edge)."""
    return flow_int_work(n_nodes, 2 * n_edges)


cdef inline intp_t submodular_work(intp_t n_nodes, intp_t n_edges) noexcept nogil:
    """Doubles of workspace :func:`submodular_cut` needs."""
    return flow_work(n_nodes, 2 * n_edges)


cdef inline intp_t grid3d_int_work(intp_t n_slices, intp_t n_rows, intp_t n_cols) noexcept nogil:
    """Integers of workspace :func:`grid3d_cut` needs."""
    return flow_int_work(n_slices * n_rows * n_cols, grid3d_arcs(n_slices, n_rows, n_cols))


cdef inline intp_t grid3d_work(intp_t n_slices, intp_t n_rows, intp_t n_cols) noexcept nogil:
    """Doubles of workspace :func:`grid3d_cut` needs."""
    return flow_work(n_slices * n_rows * n_cols, grid3d_arcs(n_slices, n_rows, n_cols))


cdef double graph_score(const double* unary, intp_t n_nodes, intp_t n_states,
                        const int64_t* edges, intp_t n_edges, const double* pairwise,
                        const int64_t* labels) noexcept nogil

cdef intp_t forest_cycle_edge(intp_t n_nodes, const int64_t* edges, intp_t n_edges,
                              intp_t* int_work) noexcept nogil

cdef double forest_max_product(const double* unary, intp_t n_nodes, intp_t n_states,
                               const int64_t* edges, intp_t n_edges, const double* pairwise,
                               int64_t* labels, intp_t* int_work, double* work) noexcept nogil

cdef double forest_sum_product(const double* unary, intp_t n_nodes, intp_t n_states,
                               const int64_t* edges, intp_t n_edges, const double* pairwise,
                               double* node_marginals, double* edge_marginals,
                               intp_t* int_work, double* work) noexcept nogil

cdef double trws_map(const double* unary, intp_t n_nodes, intp_t n_states,
                     const int64_t* edges, intp_t n_edges, const double* pairwise,
                     intp_t max_iter, double tol, int64_t* labels, double* upper_bound,
                     intp_t* n_iter, intp_t* int_work, double* work) noexcept nogil

cdef double submodular_cut(const double* unary, intp_t n_nodes, const int64_t* edges,
                           intp_t n_edges, const double* pairwise, int64_t* labels,
                           intp_t* int_work, double* work) noexcept nogil

cdef double grid3d_cut(const double* unary, intp_t n_slices, intp_t n_rows, intp_t n_cols,
                       const double* costs, int64_t* labels, intp_t* int_work,
                       double* work) noexcept nogil


cdef void adjacency(intp_t n_nodes, const int64_t* edges, intp_t n_edges, intp_t* start,
                    intp_t* adj, intp_t* fill) noexcept nogil
