# Per-sequence chain routines of _chain.pyx, shared with the per-example kernels (_kernels.pyx)
# and the k-best decoder (_topk.pyx).
from sklstruct._typedefs cimport int32_t, int64_t, intp_t

cdef void _transition_tables(const double* transition, intp_t n, double* tables) noexcept nogil

cdef void _forward_backward_sequence(
        const double* unary, intp_t length, intp_t n_states, const double* transition,
        const double* start, const double* end, const double* column_max,
        const double* column_exp, const double* row_max, const double* row_exp_t,
        double* alpha, double* beta, double* scaled, double* sums, double* work,
        double* marginals, double* edge_sums, double* log_partition) noexcept nogil

cdef double _exp_transitions(const double* transition, intp_t n, double* table,
                             double* table_t, double* peak) noexcept nogil

cdef void _forward_backward(
        const double* unary, intp_t length, intp_t n, const double* transition,
        const double* start, const double* end, double* tables, double transition_peak,
        double transition_spread, bint* log_tables_ready, double* buffers, intp_t max_len,
        double* marginals, double* edge_sums, double* log_partition) noexcept nogil

cdef void _viterbi_tables(const double* transition, intp_t n, double* transition_t,
                          double* column_max) noexcept nogil

cdef double _viterbi_sequence(const double* unary, intp_t length, intp_t n_states,
                              const double* transition, const double* start,
                              const double* end, double* delta, double* delta_next,
                              int32_t* backpointer, int64_t* labels) noexcept nogil

cdef void _viterbi_candidate(const float* unary, intp_t length, intp_t n_states,
                             const float* transition, const float* start, const float* end,
                             float* delta, float* delta_next, int32_t* backpointer,
                             int64_t* labels) noexcept nogil

cdef double _viterbi_decode(const double* unary, intp_t length, intp_t n_states,
                            const double* transition, const double* transition_t,
                            const double* column_max, const double* start, const double* end,
                            double* delta, double* delta_next, int32_t* candidates,
                            int32_t* backpointer, int64_t* labels) noexcept nogil


cdef inline intp_t _max_length(const int64_t* offsets, intp_t n_sequences) noexcept nogil:
    """The number of tokens of the longest sequence."""
    cdef intp_t i, longest = 0
    for i in range(n_sequences):
        if offsets[i + 1] - offsets[i] > longest:
            longest = offsets[i + 1] - offsets[i]
    return longest
