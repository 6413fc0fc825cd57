"""One pass of online exponentiated gradient (Bartlett et al. 2004, section 5).

Every example keeps Gibbs potentials over its parts: per-token node potentials (rows of
``node_pot``) and its own pairwise table ``pair_pot[i]`` (in the structure's pairwise layout),
together with the marginals they induce (:class:`sklstruct.learners.exp_grad._online.
OnlineEGState`). Visiting example ``i``:

1. its part gradients ``C s_i (l_r + w . phi_r)`` are computed at the current weights
   (``s_i`` its sample weight, 1 unless given: its dual variables sum to ``C s_i``);
2. the potentials move by ``eta_i`` times the gradient and the structure's compiled marginal
   oracle (``state.kernels.marginals``: forward-backward for chains) gives the new marginals;
3. the change of the dual ``C E[loss] - 1/2 ||w||^2`` is computed exactly from the marginal
   change (``w`` moves by ``-C X_i^T dmu`` and ``-C dpairwise``); with ``adaptive`` a step whose
   gain is below ``1/2 ||dw||^2`` (half its first-order gain: it overshoots or lowers the dual)
   is halved and retried, an accepted first try lets ``eta_i`` grow (doubling until the
   example's first rejection, by ``growth`` afterwards); an adaptive step never moves a
   potential by more than ``max_change`` (which keeps them finite);
4. ``W^T`` (only the rows of the example's features) and the pairwise weights are updated at
   once.

The pass checks for Ctrl-C every few thousand tokens.
"""

from libc.math cimport fabs
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int8_t, int32_t, int64_t, intp_t
from sklstruct.learners._example_rows cimport (add_and_clear_rows, dot, release,
                                               scatter_entries, sequence_sizes,
                                               SIGNAL_CHECK_TOKENS, token_scores)


def online_eg_pass(state, const int64_t[::1] order, bint adaptive, double growth=1.05,
                   int max_halvings=40, double max_change=1.0):
    """Visit the examples of ``order`` once; return (marginal-oracle calls, dual increase)."""
    cdef const int64_t[::1] indptr, offsets
    cdef const int32_t[::1] indices
    cdef const float64_t[::1] data
    indptr, indices, data = state.batch.csr_arrays
    offsets = state.batch.offsets
    cdef const float64_t[:, ::1] node_loss = state.token_loss
    cdef float64_t[:, ::1] node_pot = state.node_pot, node_marg = state.node_marg
    cdef float64_t[:, ::1] pair_pot = state.pair_pot, pair_marg = state.pair_marg
    cdef float64_t[::1] expected_loss = state.expected_loss, theta = state.theta
    cdef float64_t[:, ::1] WT = state.WT, scratch = state.scratch
    cdef float64_t[::1] eta = state.eta
    cdef const float64_t[::1] example_weight = state.example_weight
    cdef int8_t[::1] probing = state.probing
    cdef int32_t[::1] slot = state.slot
    cdef ExampleKernels kernels = state.kernels
    cdef double C, C_all = state.C
    cdef intp_t S = node_pot.shape[1]
    cdef intp_t P = pair_pot.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, k, k2, t, s, r, lo, length, n_touched, max_len, max_nnz, since_check = 0
    cdef int64_t q
    cdef int halvings
    cdef long n_calls = 0
    cdef double step, v, peak, spread, coefficient_scale, lo_g, hi_g, dm, wdot, sq_pair
    cdef double norm, new_loss, gain, rounding
    cdef double total_gain = 0.0
    cdef double* unary_scores = NULL
    cdef double* new_pot
    cdef double* new_marg
    cdef double* new_pair_pot = NULL
    cdef double* new_pair_marg
    cdef double* marg_change
    cdef int32_t* touched = NULL
    if not kernels.has_marginals:
        raise ValueError("online exponentiated gradient needs the structure's compiled "
                         "marginals.")
    if kernels.n_pairwise != P or kernels.n_states != S:
        raise ValueError("the structure's kernels do not match the dual state.")
    if example_weight.shape[0] != n_sequences:
        raise ValueError("the sample weights do not match the state's examples.")
    sequence_sizes(&indptr[0], &offsets[0], n_sequences, &max_len, &max_nnz)
    # (no stored feature at all is allowed: the pointers are then never dereferenced)
    cdef const int32_t* indices_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const double* WT_ptr = &WT[0, 0] if WT.shape[0] > 0 else NULL
    # (raw pointers for the stores: through the memoryviews every store would make the
    # compiler reload their fields)
    cdef double* WT_rows = <double*> WT_ptr
    cdef double* scratch_ptr = &scratch[0, 0]
    cdef int32_t* slot_ptr = &slot[0] if slot.shape[0] > 0 else NULL
    try:
        unary_scores = <double*> malloc((3 * max_len + 1) * S * sizeof(double))
        new_pair_pot = <double*> malloc((2 * P + 2) * sizeof(double))
        touched = <int32_t*> malloc(max_nnz * sizeof(int32_t))
        if unary_scores == NULL or new_pair_pot == NULL or touched == NULL:
            raise MemoryError("could not allocate the online exponentiated-gradient workspace")
        new_pot = unary_scores + max_len * S
        new_marg = new_pot + max_len * S
        marg_change = new_marg + max_len * S
        new_pair_marg = new_pair_pot + P + 1
        with nogil:
            for k in range(order.shape[0]):
                i = order[k]
                lo = offsets[i]
                length = offsets[i + 1] - lo
                C = C_all * example_weight[i]
                check_signals_every(&since_check, length, SIGNAL_CHECK_TOKENS)
                # unary scores x_t . W[s] at the current weights, and the example's features
                n_touched = token_scores(&indptr[0], indices_ptr, data_ptr, WT_ptr, S, lo,
                                         length, unary_scores, &slot[0], touched)
                # cap the step so that no potential moves by more than max_change nats
                spread = 0.0
                for t in range(length):
                    lo_g = 1e308
                    hi_g = -1e308
                    for s in range(S):
                        v = node_loss[lo + t, s] + unary_scores[t * S + s]
                        if v < lo_g:
                            lo_g = v
                        if v > hi_g:
                            hi_g = v
                    if hi_g - lo_g > spread:
                        spread = hi_g - lo_g
                for r in range(P):
                    if 2.0 * fabs(theta[r]) > spread:
                        spread = 2.0 * fabs(theta[r])
                coefficient_scale = 0.0
                for t in range(length):
                    for s in range(S):
                        coefficient_scale += node_loss[lo + t, s] + fabs(unary_scores[t * S + s])
                for r in range(P):
                    coefficient_scale += length * fabs(theta[r])
                if adaptive and eta[i] * C * spread > max_change:
                    eta[i] = max_change / (C * spread)
                halvings = 0
                while True:
                    step = eta[i] * C
                    for t in range(length):
                        peak = -1e308
                        for s in range(S):
                            v = node_pot[lo + t, s] + step * (node_loss[lo + t, s]
                                                              + unary_scores[t * S + s])
                            new_pot[t * S + s] = v
                            if v > peak:
                                peak = v
                        for s in range(S):  # a per-token shift leaves the distribution alone
                            new_pot[t * S + s] -= peak
                    for r in range(P):
                        new_pair_pot[r] = pair_pot[i, r] + step * theta[r]
                    kernels.marginals(i, new_pot, new_pair_pot, new_marg, new_pair_marg)
                    n_calls += 1
                    # exact dual change: C dE[loss] - w . dw - 1/2 ||dw||^2
                    new_loss = 0.0
                    wdot = 0.0
                    for t in range(length):
                        for s in range(S):
                            new_loss += node_loss[lo + t, s] * new_marg[t * S + s]
                            marg_change[s] = new_marg[t * S + s] - node_marg[lo + t, s]
                            wdot += unary_scores[t * S + s] * marg_change[s]
                        scatter_entries(indptr[lo + t], indptr[lo + t + 1], indices_ptr,
                                        data_ptr, slot_ptr, -C, marg_change, S, scratch_ptr)
                    sq_pair = 0.0
                    for r in range(P):
                        dm = new_pair_marg[r] - pair_marg[i, r]
                        wdot += theta[r] * dm
                        sq_pair += dm * dm
                    # the touched rows of scratch are its first n_touched rows, contiguous
                    norm = C * C * sq_pair
                    if n_touched > 0:
                        norm += dot(&scratch[0, 0], &scratch[0, 0], n_touched * S)
                    gain = C * (new_loss - expected_loss[i]) + C * wdot - 0.5 * norm
                    # noise floor: marginals carry absolute errors of about 1e-16
                    rounding = 1e-13 * (C * coefficient_scale + norm)
                    # sufficient increase: at least half the first-order gain, i.e. the step
                    # does not overshoot the maximum along its path (gain >= 1/2 ||dw||^2)
                    if adaptive and gain < 0.5 * norm - rounding:
                        for k2 in range(n_touched):
                            memset(&scratch[k2, 0], 0, S * sizeof(double))
                        if halvings < max_halvings:
                            halvings += 1
                            probing[i] = 0
                            eta[i] *= 0.5
                            continue
                        break  # no ascent step found: leave the example unchanged
                    # accept: weights, potentials, marginals
                    add_and_clear_rows(n_touched, touched, WT_rows, S, scratch_ptr)
                    for r in range(P):
                        theta[r] -= C * (new_pair_marg[r] - pair_marg[i, r])
                        pair_pot[i, r] = new_pair_pot[r]
                        pair_marg[i, r] = new_pair_marg[r]
                    for t in range(length):
                        for s in range(S):
                            node_pot[lo + t, s] = new_pot[t * S + s]
                            node_marg[lo + t, s] = new_marg[t * S + s]
                    expected_loss[i] = new_loss
                    total_gain += gain
                    if adaptive and halvings == 0:
                        # double until the first rejection, then grow slowly
                        eta[i] *= 2.0 if probing[i] else growth
                    break
                release(&slot[0], touched, n_touched)
    finally:
        free(unary_scores)
        free(new_pair_pot)
        free(touched)
    return n_calls, total_gain
