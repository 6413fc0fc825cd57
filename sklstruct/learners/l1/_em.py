"""Algorithm 3 of Zhu, Xing and Zhang (2008): the EM-style adaptive M3N, in its two forms.

:func:`fit_em_variational` solves P1 at the given ``C`` through the variational form of the l1
norm (``em_lambda=None`` of :class:`~sklstruct.L1M3N`); :func:`fit_em_adaptive` is the paper's
adaptive M3N with a fixed ``lambda``. Both alternate an M-step (an l2 problem on joint
features rescaled per weight) with a closed-form update of the scales; the M-step runs the
shared compiled Frank-Wolfe passes on the rescaled features, warm-started, or the 1-slack
cutting plane on a rescaled structure (structures without compiled kernels). See the
estimator's docstring for the forms, the stopping rules and the certified bound.
"""

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..._progress import Certificate
from ...structures._base import structured_hinge
from ...structures._scaled import scaled_structure
from ...utils._warnings import warn_user
from .._frank_wolfe import MultiPointFrankWolfeState, supports_multi_point
from ..cutting_plane import fit_one_slack

# the M-steps' dimension limit (points per example of the Frank-Wolfe passes)
_M_STEP_POINTS = 5
# the 1-slack cutting plane of the M-steps on structures without compiled kernels: its
# constraint cache and the rounds after which an inactive constraint is dropped
_M_STEP_CACHE_SIZE = 10
_M_STEP_INACTIVE_WINDOW = 50


def max_abs(w):
    """``max_k |w_k|`` (0 for an empty ``w``) without a temporary array."""
    return max(float(w.max(initial=0.0)), -float(w.min(initial=0.0)))


def l1_norm(w, chunk=1 << 20):
    """``||w||_1`` in chunks (no temporary array of the size of ``w``)."""
    return float(sum(np.abs(w[start:start + chunk]).sum()
                     for start in range(0, w.shape[0], chunk)))


class P1:
    """``P1(w) = 1/2 ||w||_1 + C sum_i s_i H_i(w)`` on a batch (margin rescaling; the sample
    weights ``s_i`` are 1 unless given)."""

    def __init__(self, structure, batch, Y, C, n_jobs, sample_weight=None):
        self.structure, self.batch, self.Y, self.C, self.n_jobs = structure, batch, Y, C, \
            n_jobs
        self.sample_weight = sample_weight

    def weighted(self, per_example):
        """``sum_i s_i a_i`` (the plain sum without weights)."""
        return float(per_example.sum()) if self.sample_weight is None else \
            float(self.sample_weight @ per_example)

    def hinge(self, w):
        """Per-sequence hinge, most violating labels and their losses at ``w``."""
        return structured_hinge(self.structure, self.batch, self.Y,
                                *self.structure.potentials(self.batch, w), "margin",
                                self.n_jobs)

    def of_hinge(self, w, hinge):
        return 0.5 * l1_norm(w) + float(self.C) * self.weighted(hinge)

    def __call__(self, w):
        """P1 at ``w`` (one loss-augmented decoding)."""
        return self.of_hinge(w, self.hinge(w)[0])


def _compiled_m_steps(structure, batch):
    """Whether the M-steps run the compiled Frank-Wolfe passes."""
    return structure.example_kernels(batch) is not None and \
        len(structure.nonnegative_) == 0 and supports_multi_point(structure, batch)


def _m_step_frank_wolfe(batch, scale2, state, target, rng, tol, certificate):
    """The M-step by the compiled restricted simplicial decomposition passes on the dual
    with squared scales ``scale2``, warm-started from the last M-step's dual point (the
    dual distributions do not depend on the scales), until its relative duality gap is at
    most ``target``, within a pass budget that grows as ``tol`` tightens
    (``max(100, min(2000, 0.1 / tol))``), or after the pass in which the fit's
    ``certificate`` runs out of time (and its certificate); returns the oracle calls (the
    solution is the state's: ``v = state.statistic_weights``, ``w = state.w = scale2 *
    v``)."""
    state.rescale(scale2)
    calls, primal = 0, np.inf
    budget = int(max(100, min(2000, 0.1 / tol)))
    for passes in range(1, budget + 1):
        estimate = state.run_pass(rng.permutation(batch.n_sequences))
        calls += batch.n_sequences
        if certificate.out_of_time():
            # (the statistics v, and w with them, must be those of the pass's dual point:
            # the fit's lower bound combines them with its expected losses)
            state.certificate()
            calls += batch.n_sequences
            break
        if estimate <= target * abs(primal) or passes % 10 == 0 or passes == budget:
            _, dual = state.certificate()
            primal = state.primal()
            calls += batch.n_sequences
            if primal - dual <= target * abs(primal):
                break
    return calls


def _m_step_scaled_structure(structure, batch, Y, beta, C, tol, n_jobs, sample_weight=None):
    """The M-step by the 1-slack cutting plane on the joint features scaled by ``beta``
    (structures without compiled kernels), with the sample weights; returns ``(g, oracle
    calls)``."""
    n_unary = structure.n_states_ * structure.n_features_
    scaled = scaled_structure(
        structure, beta[:n_unary].reshape(structure.n_features_, structure.n_states_),
        beta[n_unary:])
    certificate = Certificate("L1M3N's M-step", tol=tol, max_iter=100000,
                              unit="iteration", extra_fields=("n_constraints",), warns=False)
    g, _ = fit_one_slack(scaled, batch, Y, np.ones(batch.n_sequences)
                         if sample_weight is None else sample_weight, C=C,
                         rescale="margin", cache_size=_M_STEP_CACHE_SIZE,
                         inactive_window=_M_STEP_INACTIVE_WINDOW,
                         n_jobs=n_jobs, certificate=certificate)
    return g, int(certificate.last("oracle_calls"))


def _variational_step(p1, w, state, reference, threshold):
    """After an M-step with weights ``w``: the weights with ``|w_k| <= threshold * max |w|``
    are set to 0 when they are shrinking (their dual statistic ``|v_k| < 1/2``: the next
    M-step would multiply them by ``2 |v_k|``), or, without a dual statistic (``state`` None:
    the first M-step, whose scales are not ``2 |w|``, or structures without compiled
    kernels), when that does not increase P1. Returns ``(w, P1 at w, the next M-step's
    squared scales)``: ``2 |w_k|``, and ``2 threshold reference`` for a zero weight whose
    ``|v_k|`` exceeds 1/2 (it re-enters; ``reference`` the largest ``|w_k|`` of the fit so
    far). With ``state``, ``w`` is the state's own weight array and is zeroed in place (the
    next M-step recomputes it from the dual statistics)."""
    magnitude = np.abs(w)
    small = (magnitude <= threshold * float(magnitude.max(initial=0.0))) & (magnitude > 0)
    v = state.statistic_weights if state is not None else None
    if v is not None:
        small &= (v < 0.5) & (v > -0.5)
        w[small] = 0.0  # the state's weights: the next M-step recomputes them
    objective = p1(w)
    if v is None and small.any():
        trial = np.where(small, 0.0, w)
        value = p1(trial)
        if value <= objective:
            w, objective = trial, value
        else:
            small[:] = False
    magnitude[small] = 0.0
    scale2 = np.multiply(magnitude, 2.0, out=magnitude)
    if v is not None and reference > 0:
        scale2[(w == 0.0) & ((v > 0.5) | (v < -0.5))] = 2.0 * threshold * reference
    return w, objective, scale2


def _pruned(p1, w, objective):
    """The sparsest of ``w`` with its weights below ``eps * max |w|`` set to 0, for ``eps``
    in 1 (all weights), 0.1, 0.03, 0.01, 0.003, 0.001, whose P1 is at most ``objective``
    (P1 at ``w``), with its P1; ``(w, objective)`` when none is. Prunes ``w`` in place (the
    values of a rejected trial are put back)."""
    largest = max_abs(w)
    for eps in (1.0, 0.1, 0.03, 0.01, 0.003, 0.001):
        cut = eps * largest
        small = np.flatnonzero((w != 0) & (w >= -cut) & (w <= cut))
        if not small.shape[0]:
            continue
        kept = w[small]
        w[small] = 0.0
        value = p1(w)
        if value <= objective:
            return w, value
        w[small] = kept
    return w, objective


def _l1_dual_bound(state, smallest_p1, C):
    """A lower bound on min P1 from the M-step's dual point:
    ``max(E min(1, 1 / (2 ||v||_inf)), E - R (||v||_inf - 1/2)_+)`` with
    ``E = C sum_i s_i E_a[Delta]`` and ``R`` twice ``smallest_p1``, the smallest P1 seen."""
    expected = float(C) * state.weighted_total(state.expected_loss)
    v = state.statistic_weights
    largest = max_abs(v)
    scaled = expected * min(1.0, 0.5 / largest) if largest > 0 else expected
    return max(scaled, expected - 2.0 * smallest_p1 * max(0.0, largest - 0.5))


def fit_em_variational(structure, batch, Y, *, C, threshold, n_jobs, certificate,
                       sample_weight=None):
    """Solve P1 at ``C`` by the EM on the variational form of the l1 norm.

    The first M-step is the l2 problem at ``C``; each next one minimises
    ``1/4 sum_k w_k^2 / eta_k + C sum_i H_i(w)`` with ``eta = |w|`` of the previous iterate.
    Stops on a relative change of P1 of at most ``tol`` after an M-step solved to ``tol``,
    on a certified gap of at most ``tol``, or at the certificate's budgets, and returns the
    iterate of smallest P1 with its near-zero weights pruned. When it stops on the change
    of P1 with a certified gap above ``tol`` it warns (``ConvergenceWarning``).

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    C : float
    threshold : float
        Relative size below which a shrinking weight becomes an exact zero.
    n_jobs : int or None
    certificate : Certificate
    sample_weight : ndarray of shape (n_sequences,) or None
        The examples' weights ``s_i`` in P1 (and in every M-step).

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    beta : ndarray of shape (size_joint_feature_,)
        The scales the next M-step would use.
    """
    tol = certificate.tol
    p1 = P1(structure, batch, Y, C, n_jobs, sample_weight)
    scale2 = np.ones(structure.size_joint_feature_)
    compiled = _compiled_m_steps(structure, batch)
    state = MultiPointFrankWolfeState(structure, batch, Y, C, _M_STEP_POINTS,
                                      scale2=scale2, sample_weight=sample_weight) \
        if compiled else None
    rng = np.random.RandomState(0)  # the M-steps' visiting orders
    calls, objective, change, lower = 0, np.inf, np.inf, -np.inf
    best_w, best_objective = None, np.inf  # the iterate with the smallest P1 (our own copy)
    reference = 0.0  # the largest |w| so far
    target = tol  # the last M-step's precision (non-compiled M-steps: tol)
    for iteration in range(1, certificate.max_iter + 1):
        if compiled:  # the M-step's precision follows the EM's progress
            target = max(tol, min(0.1, 0.1 * change))
            calls += _m_step_frank_wolfe(batch, scale2, state, target, rng, tol,
                                         certificate)
            # the effective weights scale2 * v (the state's array: the next M-step
            # recomputes it from the statistics)
            w = state.w
        else:
            gamma, m_calls = _m_step_scaled_structure(structure, batch, Y, np.sqrt(scale2), C,
                                                      tol, n_jobs, sample_weight)
            calls += m_calls
            w = np.sqrt(scale2) * gamma
        reference = max(reference, max_abs(w))
        w, new_objective, scale2 = _variational_step(
            p1, w, state if iteration > 1 else None, reference, threshold)
        change = abs(objective - new_objective) / abs(new_objective) \
            if np.isfinite(objective) else np.inf
        objective = new_objective
        if state is not None:
            lower = max(lower, _l1_dual_bound(state, min(objective, best_objective), C))
        # a small change counts only after an M-step run with the target tol (a looser
        # M-step that barely moves the weights says nothing about the EM's fixed point)
        converged = (change <= tol and target <= tol) or objective - lower <= tol * abs(objective)
        if objective < best_objective:
            best_objective = objective
            if best_w is None:
                best_w = w.copy()
            else:  # (into the same array: no second copy alive meanwhile)
                np.copyto(best_w, w)
        if converged or iteration == certificate.max_iter or certificate.out_of_time():
            # the last iterate: the best one seen, with exact zeros for the weights still on
            # their way to zero (M-steps are inexact: P1 may rise a little)
            w, objective = _pruned(p1, best_w, best_objective)
        if certificate.check(iteration, objective, lower if np.isfinite(lower) else np.nan,
                             calls, w=w, converged=converged, n_nonzero=np.count_nonzero(w),
                             C_P1=C):
            break
    certificate.finish(iteration, what=f"a relative change of the objective <= tol={tol}")
    gap = certificate.relative_gap()
    if certificate.warns and certificate.stop_reason == "converged" and gap > tol:
        # (NaN: no bound)
        warn_user(
            f"{certificate.name}(solver='em') stopped after {iteration} iterations on a "
            f"relative change of P1 of at most tol={tol}, with a certified relative duality "
            f"gap of {gap:.3g}: P1 has stalled, but only a gap <= tol certifies it within tol "
            "of its minimum. Lower tol, or use solver='cutting_plane' for a certificate.",
            ConvergenceWarning)
    return w, np.sqrt(scale2)


def fit_em_adaptive(structure, batch, Y, *, C, em_lambda, threshold, n_jobs, certificate,
                    sample_weight=None):
    """The paper's adaptive M3N with a fixed ``lambda = em_lambda``: M-steps
    ``min_g lambda ||g||^2 + C sum_i xi_i`` (``C_m = C / (2 lambda)``) on features scaled by
    ``beta``, then ``beta_k = sqrt(K) |g_k| / ||g||_2`` (eq. (6)), scales below
    ``threshold`` set to 0, from ``beta = sqrt(lambda)``. Stops on a relative change of P1
    of at most ``tol`` (after an M-step solved to ``tol``) or at the certificate's budgets.

    Parameters
    ----------
    structure, batch, Y, C, threshold, n_jobs, certificate, sample_weight
        As for :func:`fit_em_variational`.
    em_lambda : float

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    beta : ndarray of shape (size_joint_feature_,)
    """
    tol = certificate.tol
    p1 = P1(structure, batch, Y, C, n_jobs, sample_weight)
    size = structure.size_joint_feature_
    lam = float(em_lambda)
    m_step_C, beta = C / (2.0 * lam), np.full(size, np.sqrt(lam))
    scale2 = beta ** 2
    compiled = _compiled_m_steps(structure, batch)
    state = MultiPointFrankWolfeState(structure, batch, Y, m_step_C, _M_STEP_POINTS,
                                      scale2=scale2, sample_weight=sample_weight) \
        if compiled else None
    rng = np.random.RandomState(0)  # the M-steps' visiting orders
    calls, objective, change = 0, np.inf, np.inf
    target = tol
    for iteration in range(1, certificate.max_iter + 1):
        if compiled:
            target = max(tol, min(0.1, 0.1 * change))
            calls += _m_step_frank_wolfe(batch, scale2, state, target, rng, tol,
                                         certificate)
            gamma = beta * state.statistic_weights  # the paper's g = beta * v
        else:
            gamma, m_calls = _m_step_scaled_structure(structure, batch, Y, beta, m_step_C, tol,
                                                      n_jobs, sample_weight)
            calls += m_calls
        norm = float(np.linalg.norm(gamma))
        new_beta = np.sqrt(size) * np.abs(gamma) / norm if norm > 0 else np.zeros(size)
        new_beta[new_beta < threshold] = 0.0
        w = np.where(new_beta > 0, beta * gamma, 0.0)
        beta = new_beta
        scale2 = beta ** 2
        new_objective = p1(w)
        change = abs(objective - new_objective) / abs(new_objective) \
            if np.isfinite(objective) else np.inf
        objective = new_objective
        l1 = l1_norm(w)
        C_p1 = C * size / (4.0 * lam * l1) if l1 > 0 else np.inf
        converged = change <= tol and target <= tol
        if certificate.check(iteration, objective, np.nan, calls, w=w, converged=converged,
                             n_nonzero=np.count_nonzero(w), C_P1=C_p1):
            break
    certificate.finish(iteration, what=f"a relative change of the objective <= tol={tol}")
    return w, beta
