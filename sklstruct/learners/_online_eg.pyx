"""One pass of online exponentiated gradient over chains (seed 001, section 5).

Every example keeps Gibbs potentials over its parts: per-token node potentials (rows of
``node_pot``) and its own pairwise table ``pair_pot[i]`` (transitions, then start and end
potentials when present), together with the marginals they induce. Visiting example ``i``:

1. its part gradients ``C (l_r + w . phi_r)`` are computed at the current weights;
2. the potentials move by ``eta_i`` times the gradient and forward-backward gives the new
   marginals;
3. the change of the dual ``C E[loss] - 1/2 ||w||^2`` is computed exactly from the marginal
   change (``w`` moves by ``-C X_i^T dmu`` and ``-C dpairwise``); with ``adaptive`` a step whose
   gain is below ``1/2 ||dw||^2`` (half its first-order gain: it overshoots or lowers the dual)
   is halved and retried, an accepted first try lets ``eta_i`` grow (doubling until the
   example's first rejection, by ``growth`` afterwards); an adaptive step
   never moves a potential by more than ``max_change`` (which keeps them finite);
4. ``W^T`` (only the rows of the example's features) and the pairwise weights are updated at once.

The caller validates the arrays: CSR rows of ``n_tokens`` tokens, ``offsets`` with non-empty
sequences, ``order`` within ``[0, n_sequences)``, ``n_pairwise`` equal to 0 (multiclass),
``S*S`` or ``S*S + 2S``, and ``scratch`` zero on entry (it is left zero).
"""

from libc.math cimport fabs
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct.learners._token_rows cimport int8_t, sequence_sizes, token_scores
from sklstruct._inference._chain cimport (_forward_backward_sequence, _transition_tables,
                                          float64_t, int64_t, intp_t)

ctypedef int int32_t


def online_eg_pass(const int64_t[::1] indptr, const int32_t[::1] indices,
                   const float64_t[::1] data, const int64_t[::1] offsets,
                   const int64_t[::1] order, const float64_t[:, ::1] node_loss,
                   float64_t[:, ::1] node_pot, float64_t[:, ::1] node_marg,
                   float64_t[:, ::1] pair_pot, float64_t[:, ::1] pair_marg,
                   float64_t[::1] expected_loss, float64_t[:, ::1] WT, float64_t[::1] theta,
                   float64_t[::1] eta, int8_t[::1] probing, double C, bint adaptive,
                   double growth,
                   int max_halvings, double max_change,
                   float64_t[:, ::1] scratch, int8_t[::1] marker):
    """Visit the examples of ``order`` once; return (forward-backward calls, dual increase)."""
    cdef intp_t S = node_pot.shape[1]
    cdef intp_t P = pair_pot.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef bint has_transition = P >= S * S and P > 0
    cdef bint has_start_end = P == S * S + 2 * S
    cdef intp_t i, k, k2, t, s, r, lo, length, n_touched, max_len, max_nnz
    cdef int64_t q
    cdef int32_t j
    cdef int halvings
    cdef long n_calls = 0
    cdef double step, v, peak, spread, coefficient_scale, lo_g, hi_g, dm, wdot, sq_pair, norm, new_loss, gain, rounding
    cdef double total_gain = 0.0
    cdef double log_z
    cdef double* unary_scores
    cdef double* new_pot
    cdef double* new_marg
    cdef double* new_pair_pot
    cdef double* new_pair_marg
    cdef double* zeros
    cdef double* tables
    cdef double* buffers
    cdef double* transition
    cdef double* start
    cdef double* end
    cdef int32_t* touched
    cdef bint failed = False

    sequence_sizes(&indptr[0], &offsets[0], n_sequences, &max_len, &max_nnz)
    # (no stored feature at all is allowed: the pointers are then never dereferenced)
    cdef const int32_t* indices_ptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double* data_ptr = &data[0] if data.shape[0] > 0 else NULL
    cdef const double* WT_ptr = &WT[0, 0] if WT.shape[0] > 0 else NULL

    with nogil:
        unary_scores = <double*> malloc(3 * max_len * S * sizeof(double))
        new_pair_pot = <double*> malloc((P + 1 + 2 * (S * S + 2 * S)) * sizeof(double))
        tables = <double*> malloc((3 * S + 2 * S * S) * sizeof(double))
        buffers = <double*> malloc(4 * max_len * S * sizeof(double))
        touched = <int32_t*> malloc(max_nnz * sizeof(int32_t))
        if (unary_scores == NULL or new_pair_pot == NULL or tables == NULL or buffers == NULL
                or touched == NULL):
            failed = True
        else:
            new_pot = unary_scores + max_len * S
            new_marg = new_pot + max_len * S
            new_pair_marg = new_pair_pot + P + 1  # S*S + 2S: also the edge sums of FB
            zeros = new_pair_marg + S * S + 2 * S  # absent transitions / start / end
            memset(zeros, 0, (S * S + 2 * S) * sizeof(double))
            for k in range(order.shape[0]):
                i = order[k]
                lo = offsets[i]
                length = offsets[i + 1] - lo
                # unary scores x_t . W[s] at the current weights, and the example's features
                n_touched = token_scores(&indptr[0], indices_ptr, data_ptr, WT_ptr, S, lo,
                                         length, unary_scores, &marker[0], touched)
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
                    transition = new_pair_pot if has_transition else zeros
                    start = new_pair_pot + S * S if has_start_end else zeros + S * S
                    end = new_pair_pot + S * S + S if has_start_end else zeros + S * S + S
                    _transition_tables(transition, S, tables)
                    for r in range(S * S):
                        new_pair_marg[r] = 0.0
                    _forward_backward_sequence(
                        new_pot, length, S, transition, start, end,
                        tables, tables + 3 * S, tables + S, tables + 3 * S + S * S,
                        buffers, buffers + max_len * S, buffers + 2 * max_len * S,
                        buffers + 3 * max_len * S, tables + 2 * S, new_marg,
                        new_pair_marg, &log_z)
                    n_calls += 1
                    if has_start_end:
                        for s in range(S):
                            new_pair_marg[S * S + s] = new_marg[s]
                            new_pair_marg[S * S + S + s] = new_marg[(length - 1) * S + s]
                    # exact dual change: C dE[loss] - w . dw - 1/2 ||dw||^2
                    new_loss = 0.0
                    wdot = 0.0
                    for t in range(length):
                        for s in range(S):
                            new_loss += node_loss[lo + t, s] * new_marg[t * S + s]
                            wdot += unary_scores[t * S + s] * (new_marg[t * S + s]
                                                               - node_marg[lo + t, s])
                        for q in range(indptr[lo + t], indptr[lo + t + 1]):
                            j = indices[q]
                            v = -C * data[q]
                            for s in range(S):
                                scratch[j, s] += v * (new_marg[t * S + s] - node_marg[lo + t, s])
                    sq_pair = 0.0
                    for r in range(P):
                        dm = new_pair_marg[r] - pair_marg[i, r]
                        wdot += theta[r] * dm
                        sq_pair += dm * dm
                    norm = C * C * sq_pair
                    for k2 in range(n_touched):
                        j = touched[k2]
                        for s in range(S):
                            norm += scratch[j, s] * scratch[j, s]
                    gain = C * (new_loss - expected_loss[i]) + C * wdot - 0.5 * norm
                    # noise floor: marginals carry absolute errors of about 1e-16
                    rounding = 1e-13 * (C * coefficient_scale + norm)
                    # sufficient increase: at least half the first-order gain, i.e. the step
                    # does not overshoot the maximum along its path (gain >= 1/2 ||dw||^2)
                    if adaptive and gain < 0.5 * norm - rounding:
                        for k2 in range(n_touched):
                            memset(&scratch[touched[k2], 0], 0, S * sizeof(double))
                        if halvings < max_halvings:
                            halvings += 1
                            probing[i] = 0
                            eta[i] *= 0.5
                            continue
                        break  # no ascent step found: leave the example unchanged
                    # accept: weights, potentials, marginals
                    for k2 in range(n_touched):
                        j = touched[k2]
                        for s in range(S):
                            WT[j, s] += scratch[j, s]
                        memset(&scratch[j, 0], 0, S * sizeof(double))
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
                for k2 in range(n_touched):
                    marker[touched[k2]] = 0
        free(unary_scores)
        free(new_pair_pot)
        free(tables)
        free(buffers)
        free(touched)
    if failed:
        raise MemoryError("could not allocate the online exponentiated-gradient workspace")
    return n_calls, total_gain
