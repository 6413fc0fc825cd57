"""The outer loops of restricted simplicial decomposition (Yu and Rousu 2007): passes of the
compiled per-example states or of the general working-set state, certified by the duality gap.

Both return the weights of the lowest certified primal (:class:`~sklstruct._progress.
BestCertified`: the last iterate's in exact arithmetic) and record their checks on the fit's
:class:`~sklstruct._progress.Certificate`, whose ``tol``, ``max_iter`` and ``max_time`` stop
them.
"""

import numpy as np
from threadpoolctl import threadpool_limits

from ..._progress import PRECISION_LOST, PRECISION_STALLED, BestCertified, CheckSchedule
from ...structures._base import primal_objective
from .._factored_dual import per_example_tables_too_large
from .._frank_wolfe import (BlockFrankWolfeState, MultiPointFrankWolfeState,
                            multi_point_block_steps, supports_multi_point)
from ._general import SimplicialDecompositionState


def compiled_kernels(structure, batch, rescale, max_points):
    """The structure's compiled kernels when the compiled per-example passes apply (margin
    rescaling, at most 63 points per example, non-negativity constraints on at most 64
    pairwise weights, the multi-point visits where ``max_points > 1``), else ``None``."""
    if rescale != "margin" or max_points > 63:
        return None
    constrained = np.asarray(structure.nonnegative_)
    if constrained.size > 64 or np.any(
            constrained < structure.n_states_ * structure.n_features_):
        return None
    if max_points > 1 and not supports_multi_point(structure, batch):
        return None
    return structure.example_kernels(batch)


def resolved_working_set(working_set_size, blocks, n_sequences, compiled):
    """The examples of a working set: ``working_set_size``, else all for one simplex, one
    for the compiled per-example passes and up to 16 for the general state."""
    if working_set_size is not None:
        return min(int(working_set_size), n_sequences)
    if blocks == "single":
        return n_sequences
    return 1 if compiled else min(16, n_sequences)


def initial_state(structure, batch, Y, *, C, compiled, max_points, blocks, working_set,
                  rescale, rng, sample_weight):
    """The dual state a fit starts from (``alpha`` on the true labellings: ``w = 0``).

    With the compiled passes (``compiled``): one-point block Frank-Wolfe, through the
    multi-point visits where these examples make them cheaper
    (:func:`~sklstruct.learners._frank_wolfe.multi_point_block_steps`) or the per-example
    tables would be too large; else the multi-point state of ``max_points`` points. Otherwise
    the general working-set state (any rescaling, constraints and ``blocks``).
    """
    if compiled and max_points == 1 and multi_point_block_steps(structure, batch):
        # (the same steps, through visits that cost less on these examples)
        return MultiPointFrankWolfeState(structure, batch, Y, C, 1, cached=False,
                                         two_stage=False, sample_weight=sample_weight)
    if compiled and max_points == 1 and not (
            per_example_tables_too_large(structure, batch, 1)
            and supports_multi_point(structure, batch)):
        return BlockFrankWolfeState(structure, batch, Y, C, sample_weight=sample_weight)
    if compiled:
        return MultiPointFrankWolfeState(structure, batch, Y, C, max_points,
                                         sample_weight=sample_weight)
    return SimplicialDecompositionState(structure, batch, Y, C, rescale=rescale,
                                        max_points=max_points, blocks=blocks,
                                        working_set_size=working_set, random_state=rng,
                                        sample_weight=sample_weight)


def _check(certificate, structure, batch, Y, C, rescale, n_jobs, sample_weight, w, dual,
           passes, calls, fw_gap, primal=None):
    """Record a certificate at ``w``; return (whether the fit stops, oracle calls so far)."""
    if primal is None:
        primal, _ = primal_objective(structure, batch, Y, w, C, rescale, n_jobs,
                                     weights=sample_weight)
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


# shrinking: a pass sweeps over the examples whose gap exceeds SHRINK_SHARE times their share
# of the target gap, until their gaps sum to SHRINK_FRACTION of the certified gap or after
# SHRINK_VISITS visits per example of the data (chosen on the oracle calls to certify digits,
# OCR letters and CoNLL-2000, among fractions 0.1 and 0.3, shares 0.01 to 0.1, visits 1 to 10)
SHRINK_FRACTION = 0.3
SHRINK_SHARE = 0.03
SHRINK_VISITS = 10


def _active_sweeps(state, rng, tol, primal, gaps, budget, n_jobs):
    """The sweeps of one pass of shrinking, over the examples whose gap at the last
    certificate exceeds ``SHRINK_SHARE`` times their share of the target gap,
    ``tol * primal * s_i / sum_j s_j`` (``s_i`` the sample weights, whose scale an example's
    gaps have; ``tol * primal / n_samples`` without), each sweep dropping those whose gap
    fell to it, until the remaining gaps sum to at most ``SHRINK_FRACTION`` of the certified
    gap, or, after ``n_samples`` visits, all examples' last gaps to the target gap; at most
    ``SHRINK_VISITS`` visits per example of the data, and ``budget``. Returns the visits
    (oracle calls)."""
    n = state.batch.n_sequences
    total_weight = float(state.example_weight.sum()) if state.weighted else n
    threshold = SHRINK_SHARE * tol * primal / total_weight
    state.block_gap[:] = gaps
    return state.run_active(np.flatnonzero(gaps > threshold * state.example_weight), threshold,
                            SHRINK_FRACTION * float(gaps.sum()),
                            min(SHRINK_VISITS * n, budget), rng.randint(2**62),
                            target_gap=tol * primal, min_visits=n, n_jobs=n_jobs)


def solve_compiled(state, structure, batch, Y, *, C, shrinking, check_every, rng, n_jobs,
                   certificate, sample_weight=None):
    """:func:`_solve_compiled` with BLAS on one thread: after each of the few vector
    products between passes its threads would spin for a while beside the passes' and the
    certificates' threads (and one thread is as fast on those products)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _solve_compiled(state, structure, batch, Y, C=C, shrinking=shrinking,
                               check_every=check_every, rng=rng, n_jobs=n_jobs,
                               certificate=certificate, sample_weight=sample_weight)


def _solve_compiled(state, structure, batch, Y, *, C, shrinking, check_every, rng, n_jobs,
                    certificate, sample_weight=None):
    """Passes of a compiled per-example state (:class:`~.._frank_wolfe.BlockFrankWolfeState`
    or :class:`~.._frank_wolfe.MultiPointFrankWolfeState`); margin rescaling.

    With ``shrinking`` every pass starts from a certificate that also gives every example's
    Frank-Wolfe gap (:func:`_active_sweeps` then visits the examples with a gap), and the
    budget ``max_iter`` counts visits in units of ``n_samples``; otherwise every pass visits
    every example in a fresh random order, certified when :class:`~sklstruct._progress.
    CheckSchedule` says (the passes' summed Frank-Wolfe gaps estimate the gap).

    Parameters
    ----------
    state : the compiled per-example dual state (its passes update it in place)
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    C : float
    shrinking : bool
    check_every : int or None
    rng : RandomState
    n_jobs : int or None
    certificate : Certificate
    sample_weight : ndarray of shape (n_sequences,) or None
        The examples' weights ``s_i`` in ``1/2 ||w||^2 + C sum_i s_i H_i(w)`` (the state's
        own: it was made with them).

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
        The state's weight array itself when the last iterate is the best certified one:
        the state must not change it afterwards (:meth:`~.._factored_dual.DualWeights.
        detach_weights` before more passes).
    """
    schedule = CheckSchedule(certificate, check_every)
    n = batch.n_sequences
    w, dual = state.certificate()
    calls, passes = 0, 0
    common = (certificate, structure, batch, Y, C, "margin", n_jobs, sample_weight)
    if shrinking:  # every pass starts from a certificate with the examples' gaps
        primal, gaps = state.primal_and_gaps(n_jobs)
        stops, calls = _check(*common, w, dual, 0, calls + n, np.nan, primal=primal)
    elif not np.any(w):  # w = 0: the primal is the largest loss, C sum_i s_i sum_t max_s L
        stops, calls = _check(*common, w, dual, 0, calls, np.nan, primal=C * state.max_loss())
    else:
        stops, calls = _check(*common, w, dual, 0, calls + n, np.nan, primal=state.primal())
    primal = certificate.last("primal")
    best = BestCertified()
    best.record(w, primal, dual)
    last_check = (primal, dual)
    full_pass = False  # (shrinking: the next pass visits every example once)
    visits = 0  # (shrinking: the budget is max_iter * n visits; passes count them by n)
    max_visits = certificate.max_iter * n
    while not stops and (visits < max_visits if shrinking else passes < certificate.max_iter):
        if shrinking and full_pass:
            state.run_pass(rng.permutation(n), n_jobs)
            visits += n
            calls += n
            passes = -(-visits // n)
            fw_gap = float(np.maximum(state.block_gap, 0.0).sum())
        elif shrinking:
            new = _active_sweeps(state, rng, certificate.tol, primal, gaps, max_visits - visits,
                                 n_jobs)
            if new == 0:  # no example above the threshold (rounding): nothing to do
                break
            visits += new
            calls += new
            passes = -(-visits // n)
            fw_gap = float(np.maximum(state.block_gap, 0.0).sum())
        else:
            fw_gap = state.run_pass(rng.permutation(n), n_jobs)
            calls += n
            passes += 1
        if getattr(state, "cached", False):
            _sweep(state, rng)
        if shrinking or schedule.due(passes, fw_gap, primal):
            # every fifth certificate also removes the passes' rounding drift
            w, dual = state.certificate(exact=len(certificate.rows["primal"]) % 5 == 0)
            if shrinking:
                primal, gaps = state.primal_and_gaps(n_jobs)
            else:
                primal = state.primal()
            stops, calls = _check(*common, w, dual, passes, calls + n, fw_gap, primal=primal)
            primal = certificate.last("primal")
            schedule.checked(passes)
            # (a dual above the primal beyond rounding: the arithmetic no longer certifies)
            if best.record(w, primal, dual) or \
                    dual - primal > 1e-9 * max(abs(primal), abs(dual)):
                certificate.precision_lost(PRECISION_LOST)
                break
            # (a step that moves anything raises the dual: the same certificate twice after
            # a pass over every example means that no step is representable any more, e.g.
            # at a huge C s_i ||x||^2; shrinking's sweeps may have visited only examples
            # that cannot move, so a full pass is tried first)
            stalled = not stops and (primal, dual) == last_check
            if stalled and (full_pass or not shrinking):
                certificate.precision_lost(PRECISION_STALLED)
                break
            full_pass = stalled
            last_check = (primal, dual)
    # the state's own array when it is the best: the state leaves it unchanged from here on
    # (a warm start detaches it first), which saves a copy of the weights
    w = best.result(certificate, w, copy=False)  # (an amended record may certify the tol)
    certificate.finish(passes)
    return w


def solve_general(state, structure, batch, Y, *, C, rescale, check_every, n_jobs,
                  certificate, sample_weight=None):
    """Passes of the general working-set state (:class:`~._general.
    SimplicialDecompositionState`: any structure, slack rescaling, shared simplices). With
    one block over all the data each iteration's direction finding certifies the iterate it
    was done at; otherwise the passes :class:`~sklstruct._progress.CheckSchedule` chooses
    are certified by a loss-augmented decoding of the training set.

    Parameters
    ----------
    state : SimplicialDecompositionState
    structure, batch, Y, C, check_every, n_jobs, certificate, sample_weight
        As for :func:`_solve_compiled`.
    rescale : {"margin", "slack"}

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    """
    free_certificate = state.n_blocks == 1
    schedule = CheckSchedule(certificate, check_every)
    common = (certificate, structure, batch, Y, C, rescale, n_jobs, sample_weight)
    primal = None
    calls, passes = 0, 0
    stops = precision_lost = False
    best = BestCertified()
    last_w = None
    last_check = None
    if not free_certificate:
        last_w, dual = state.w.copy(), state.dual()
        stops, calls = _check(*common, last_w, dual, 0, calls, np.nan)
        precision_lost = best.record(last_w, certificate.last("primal"), dual)
    while not stops and not precision_lost and passes < certificate.max_iter:
        w_before, dual_before = state.w.copy(), state.dual()
        n_calls, fw_gap = state.run_pass(n_jobs=n_jobs)
        calls += n_calls
        if free_certificate:  # certifies the iterate the direction finding was done at
            estimate = dual_before + fw_gap
            # (the estimate is the primal in exact arithmetic; where it would stop the fit,
            # or is below the dual from rounding at a large C s_i, the primal is computed)
            exact = estimate - dual_before <= certificate.tol * abs(estimate) or estimate < 0
            stops, calls = _check(*common, w_before, dual_before, passes, calls, fw_gap,
                                  primal=None if exact else estimate)
            last_w = w_before
            primal = certificate.last("primal")
            precision_lost = best.record(w_before, primal, dual_before)
            stalled = (primal, dual_before) == last_check
            last_check = (primal, dual_before)
            if stalled and not stops:
                certificate.precision_lost(PRECISION_STALLED)
                break
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
    w = best.result(certificate, last_w, copy=False)  # (last_w is a copy of the state's)
    if free_certificate and w is not None:
        # the free certificates' primal is exact in exact arithmetic only: the last record
        # gets the returned weights' own (one oracle pass; at a large C s_i they differ)
        primal, _ = primal_objective(structure, batch, Y, w, C, rescale, n_jobs,
                                     weights=sample_weight)
        if primal != certificate.last("primal"):
            certificate.amend_last(primal, certificate.last("dual"))
    certificate.finish(passes)
    return w
