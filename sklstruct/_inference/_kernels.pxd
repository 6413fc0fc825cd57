# Per-example kernels of a structure, called by the compiled per-example passes of the learners
# (block-coordinate Frank-Wolfe, restricted simplicial decomposition, online exponentiated
# gradient). A structure describes its pairwise layout through these methods; no pass reads
# the layout off array sizes.
from sklstruct._typedefs cimport int32_t, int64_t, intp_t


cdef class ExampleKernels:
    # states, pairwise parameters, and the most pairwise entries one example's labelling has
    cdef readonly intp_t n_states
    cdef readonly intp_t n_pairwise
    cdef readonly intp_t max_pairwise_entries
    cdef readonly bint has_marginals
    cdef readonly object offsets
    cdef const int64_t* _offsets

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil
    cdef void max_oracle_candidate(self, intp_t i, const double* scores,
                                   const double* token_loss, const double* theta,
                                   int64_t* labels) noexcept nogil
    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil
    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil


cdef class ChainKernels(ExampleKernels):
    cdef bint has_transition, has_start_end
    cdef double* _work
    cdef float* _work32
    cdef int32_t* _backpointer
    cdef intp_t _max_length
    cdef intp_t _n_transition

    cdef intp_t _work_size(self)
    cdef const double* _part(self, const double* theta, intp_t which) noexcept nogil
    cdef void _best_states(self, intp_t length, const double* scores,
                           const double* token_loss, const double* theta,
                           int64_t* labels) noexcept nogil
    cdef double _softmax_marginals(self, intp_t length, const double* node_pot,
                                   const double* pair_pot, double* node_marg) noexcept nogil


cdef class GridKernels(ExampleKernels):
    cdef readonly object widths, right_features, down_features
    cdef const int64_t* _widths
    cdef const double* _right
    cdef const double* _down
    cdef intp_t _k
    cdef double* _work
    cdef intp_t* _int_work
