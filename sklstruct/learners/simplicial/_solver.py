"""The outer loops of restricted simplicial decomposition (Yu and Rousu 2007): passes of the
compiled per-example states or of the general working-set state, certified by the duality gap.

Both return the weights of the lowest certified primal (:class:`~sklstruct._progress.
BestCertified`: the last iterate's in exact arithmetic) and record their checks on the fit's
:class:`~sklstruct._progress.Certificate`, whose ``tol``, ``max_iter`` and ``max_time`` stop
them.
"""

import numpy as np

from ..._progress import PRECISION_LOST, BestCertified, CheckSchedule
from ...structures._base import primal_objective


def _check(certificate, structure, batch, Y, C, rescale, n_jobs, w, dual, passes, calls,
           fw_gap, primal=None):
    """Record a certificate at ``w``; return (whether the fit stops, oracle calls so far)."""
    if primal is None:
        primal, _ = primal_objective(structure, batch, Y, w, C, rescale, n_jobs)
        calls += batch.n_sequences
    stops = certificate.check(passes, primal, dual, calls, w=w, passes=passes, fw_gap=fw_gap)
    return stops, calls


def _sweep(state, rng, max_sweeps=20, min_fraction=0.1):
    """Re-solve the cached masters after an oracle pass (no oracle calls) while a sweep raises
    the dual by at least ``min_fraction`` of what the pass raised it by."""
    for _ in range(max_sweeps):
        if state.run_sweep(rng.permutation(state.batch.n_sequences)) \
                < min_fraction * state.last_gain:
            break


def solve_compiled(state, structure, batch, Y, *, C, check_every, rng, n_jobs, certificate):
    """Passes of a compiled per-example state (:class:`~.._frank_wolfe.BlockFrankWolfeState`
    or :class:`~.._frank_wolfe.MultiPointFrankWolfeState`), in a fresh random order each,
    certified when :class:`~sklstruct._progress.CheckSchedule` says (the passes' summed
    Frank-Wolfe gaps estimate the gap); margin rescaling.

    Parameters
    ----------
    state : the compiled per-example dual state (its passes update it in place)
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    C : float
    check_every : int or None
    rng : RandomState
    n_jobs : int or None
    certificate : Certificate

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    """
    schedule = CheckSchedule(certificate, check_every)
    w, dual = state.certificate()
    calls, passes = 0, 0
    common = (certificate, structure, batch, Y, C, "margin", n_jobs)
    if not np.any(w):  # w = 0: the primal is the largest loss, C sum_t max_s L[t, s]
        stops, calls = _check(*common, w, dual, 0, calls, np.nan, primal=C * state.max_loss())
    else:
        stops, calls = _check(*common, w, dual, 0, calls + batch.n_sequences, np.nan,
                              primal=state.primal())
    primal = certificate.last("primal")
    best = BestCertified()
    best.record(w, primal, dual)
    while not stops and passes < certificate.max_iter:
        fw_gap = state.run_pass(rng.permutation(batch.n_sequences))
        if getattr(state, "cached", False):
            _sweep(state, rng)
        calls += batch.n_sequences
        passes += 1
        if schedule.due(passes, fw_gap, primal):
            # every fifth certificate also removes the passes' rounding drift
            w, dual = state.certificate(exact=len(certificate.rows["primal"]) % 5 == 0)
            stops, calls = _check(*common, w, dual, passes, calls + batch.n_sequences, fw_gap,
                                  primal=state.primal())
            primal = certificate.last("primal")
            schedule.checked(passes)
            if best.record(w, primal, dual):
                certificate.precision_lost(PRECISION_LOST)
                break
    w = best.result(certificate, w)  # (an amended record may certify the tol: no warning)
    certificate.finish(passes)
    return w


def solve_general(state, structure, batch, Y, *, C, rescale, check_every, n_jobs,
                  certificate):
    """Passes of the general working-set state (:class:`~._general.
    SimplicialDecompositionState`: any structure, slack rescaling, shared simplices). With
    one block over all the data each iteration's direction finding certifies the iterate it
    was done at; otherwise the passes :class:`~sklstruct._progress.CheckSchedule` chooses
    are certified by a loss-augmented decoding of the training set.

    Parameters
    ----------
    state : SimplicialDecompositionState
    structure, batch, Y, C, check_every, n_jobs, certificate
        As for :func:`solve_compiled`.
    rescale : {"margin", "slack"}

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    """
    free_certificate = state.n_blocks == 1
    schedule = CheckSchedule(certificate, check_every)
    common = (certificate, structure, batch, Y, C, rescale, n_jobs)
    primal = None
    calls, passes = 0, 0
    stops = precision_lost = False
    best = BestCertified()
    last_w = None
    if not free_certificate:
        last_w, dual = state.w.copy(), state.dual()
        stops, calls = _check(*common, last_w, dual, 0, calls, np.nan)
        precision_lost = best.record(last_w, certificate.last("primal"), dual)
    while not stops and not precision_lost and passes < certificate.max_iter:
        w_before, dual_before = state.w.copy(), state.dual()
        n_calls, fw_gap = state.run_pass(n_jobs=n_jobs)
        calls += n_calls
        if free_certificate:  # certifies the iterate the direction finding was done at
            stops, calls = _check(*common, None, dual_before, passes, calls, fw_gap,
                                  primal=dual_before + fw_gap)
            last_w = w_before
            precision_lost = best.record(w_before, certificate.last("primal"), dual_before)
            if stops or precision_lost:
                break
        passes += 1
        if not free_certificate and schedule.due(passes, fw_gap, primal):
            last_w, dual = state.w.copy(), state.dual()
            stops, calls = _check(*common, last_w, dual, passes, calls, fw_gap)
            primal = certificate.last("primal")
            schedule.checked(passes)
            precision_lost = best.record(last_w, primal, dual)
    if free_certificate and not stops and not precision_lost:
        # the last row certifies the weights returned
        last_w, dual = state.w.copy(), state.dual()
        stops, calls = _check(*common, last_w, dual, passes, calls, np.nan)
        precision_lost = best.record(last_w, certificate.last("primal"), dual)
    if precision_lost:
        certificate.precision_lost(PRECISION_LOST)
    w = best.result(certificate, last_w)
    certificate.finish(passes)
    return w
