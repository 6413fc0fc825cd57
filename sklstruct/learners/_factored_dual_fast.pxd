# The typed view of a dual state kept as per-example statistics (_factored_dual.DualWeights),
# shared by the compiled per-example passes: the Frank-Wolfe passes subclass it.
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t, uint8_t, uint64_t


cdef struct Progress:
    # the bookkeeping of a run of visits (DualPass.visit_sequence)
    double estimate  # the examples' summed positive gaps at their last visit
    double total_gap  # the positive gaps of the run's visits
    double gain  # the dual's increase (where tracked)
    double target_gap  # the run stops once estimate is at most this ...
    intp_t min_visits  # ... after at least this many visits
    intp_t visits
    intp_t since_check  # tokens since the last check for Ctrl-C
    bint done  # the target was reached


cdef inline bint record_visit(Progress* progress, double before, double gap) noexcept nogil:
    """Count a visit whose example had gap ``before`` and now ``gap``; true once the
    estimate reaches the target."""
    if before > 0.0:
        progress.estimate -= before
    if gap > 0.0:
        progress.estimate += gap
        progress.total_gap += gap
    progress.visits += 1
    if progress.visits >= progress.min_visits and progress.estimate <= progress.target_gap:
        progress.done = True
    return progress.done


cdef class DualPass:
    cdef const int64_t[::1] indptr, offsets, Y
    cdef const int32_t[::1] indices
    cdef const float64_t[::1] data, loss_weights, example_weight
    cdef const float64_t[:, ::1] token_loss
    cdef float64_t[:, ::1] node_marg, pair_marg, WT, scratch
    cdef float64_t[::1] expected_loss, pair_v, theta, block_gap, scale2
    cdef int32_t[::1] slot
    cdef intp_t[::1] constrained
    cdef uint8_t[::1] free_mask
    cdef ExampleKernels kernels
    cdef double C
    cdef intp_t S, P, n_k, max_len, max_nnz

    cdef void fill_loss(self, intp_t lo, intp_t length, double* out) noexcept nogil
    cdef int visit(self, intp_t i, double* gap_out, double* gain) except -1 nogil
    cdef int gap_and_hinge(self, intp_t i, double* gap, double* hinge) except -1 nogil
    cdef intp_t visit_sequence(self, const int64_t* sequence, intp_t n,
                               Progress* progress) except -1 nogil

    cdef inline double example_C(self, intp_t i) noexcept nogil:
        """Example ``i``'s share of the objective's ``C``: ``C s_i`` with ``s_i`` its sample
        weight (``C`` itself at weight 1)."""
        return self.C * self.example_weight[i]

    cdef inline const int32_t* indices_ptr(self) noexcept nogil:
        return &self.indices[0] if self.indices.shape[0] > 0 else NULL

    cdef inline const double* data_ptr(self) noexcept nogil:
        return &self.data[0] if self.data.shape[0] > 0 else NULL

    cdef inline const double* WT_ptr(self) noexcept nogil:
        return &self.WT[0, 0] if self.WT.shape[0] > 0 else NULL

    cdef inline const double* theta_ptr(self) noexcept nogil:
        return &self.theta[0] if self.P > 0 else NULL

    cdef inline double pair_scale(self, intp_t r) noexcept nogil:
        """The squared scale of pairwise weight ``r`` (1 without scales)."""
        if self.scale2.shape[0] == 0:
            return 1.0
        return self.scale2[self.WT.shape[0] * self.S + r]

    cdef inline void clip(self) noexcept nogil:
        """``theta = pair_v`` with the constrained coordinates clipped at zero."""
        cdef intp_t r
        if self.n_k == 0:  # theta is pair_v
            return
        for r in range(self.P):
            self.theta[r] = self.pair_v[r]
        for r in range(self.n_k):
            if self.pair_v[self.constrained[r]] < 0.0:
                self.theta[self.constrained[r]] = 0.0


# the sweeps of shrinking and the per-example certificate, over any pass (see
# _frank_wolfe_fast.active_sweeps and certificate_pass)
cdef tuple sweep_active(DualPass p, int64_t[::1] active, double threshold, double stop_gap,
                        intp_t max_visits, double target_gap, intp_t min_visits,
                        uint64_t seed)

cdef tuple certify_examples(type pass_type, state, intp_t n_threads)
