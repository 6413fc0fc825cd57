"""The l1-regularised (primal sparse) max-margin Markov network (Zhu, Xing and Zhang 2008)."""

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ...base import BaseStructuredClassifier, Certificate
from ...structures._scaled import scaled_structure
from ...utils._sklearn_compat import Interval, StrOptions
from ..cutting_plane import StructSVMCuttingPlane
from ..simplicial._frank_wolfe import MultiPointFrankWolfeState, supports_multi_point
from ._solvers import LPCuttingPlane, constraint_directions, projected_subgradient

_DEFAULT_MAX_ITER = {"em": 15, "subgradient": 1000, "cutting_plane": 500}


def _max_abs(w):
    """``max_k |w_k|`` (0 for an empty ``w``) without a temporary array."""
    return max(float(w.max(initial=0.0)), -float(w.min(initial=0.0)))


def _l1_norm(w, chunk=1 << 20):
    """``||w||_1`` in chunks (no temporary array of the size of ``w``)."""
    return float(sum(np.abs(w[start:start + chunk]).sum()
                     for start in range(0, w.shape[0], chunk)))


class L1M3N(BaseStructuredClassifier):
    """Primal sparse max-margin Markov network (l1-M3N; Zhu, Xing and Zhang, "Primal sparse
    max-margin Markov networks", KDD 2008).

    The model minimises the paper's problem P1::

        P1(w) = 1/2 ||w||_1 + C * sum_i H_i(w)

    (``H_i`` the margin-rescaled structured hinge loss of the shared objective); the l1 norm
    covers all weights (token features x states, transitions, start/end biases), so the model
    selects features by setting their weights to exact zeros. Three solvers (section 4):

    ``solver="cutting_plane"`` (Algorithm 1)
        Solves P1 with this ``C``. Each round adds, for every example whose most violated
        labeling (loss-augmented Viterbi) exceeds its slack, that constraint to its working set,
        and re-solves the LP over the working set (``w = mu - v``) with HiGHS: warm-started
        from the previous basis through the optional ``highspy`` package (``pip install
        highspy``), else from scratch by ``scipy.optimize.linprog``.
        The LP optimum is a lower bound on min P1 and ``P1(w)`` an upper bound; the fit stops
        when their difference is at most ``tol * P1(w)`` (``history_["gap"]``).
    ``solver="subgradient"`` (Algorithm 2)
        Solves P1': ``min (1/n) sum_i H_i(w)`` subject to ``||w||_1 <= radius``, by projected
        subgradient steps ``learning_rate / sqrt(t)`` with the exact O(d log d) projection onto
        the l1 ball (Duchi et al. 2008), keeping the best iterate. The solution of P1 with a
        given ``C`` solves P1' with ``radius = ||w*_C||_1``; there is no duality-gap certificate
        (``history_["gap"]`` is NaN). ``C`` only sets the default ``radius``: the l1 norm
        of the l1 model at this ``C`` (``solver="em"`` stopped at ``tol=0.1``; ``radius_``).
    ``solver="em"`` (Algorithm 3, and its form that solves P1 at this ``C``)
        Alternates an l2 problem on joint features rescaled per weight (the M-step) with a
        closed-form update of the scales. Each M-step solves
        ``min_g 1/2 ||g||^2 + C_m sum_i H_i(beta * g)`` (``w = beta * g``) by the compiled
        multi-point Frank-Wolfe passes of :class:`M3NSimplicialDecomposition` on the scaled
        features, warm-started from the previous M-step's dual point (the dual distributions
        do not depend on ``beta``), until its relative duality gap is at most
        ``max(tol, min(0.1, 0.1 * change))`` (``change`` the last relative change of P1; at
        most ``max(100, min(2000, 0.1 / tol))`` passes); structures without compiled kernels
        use the 1-slack :class:`StructSVMCuttingPlane` instead. The fit stops after
        ``max_iter`` iterations, when P1 changes by at most ``tol`` relative to its value
        after an M-step run with the target ``tol`` (not a looser one), or when the
        certified gap (below) is at most ``tol * P1``.

        ``em_lambda=None`` (default) solves P1 at this ``C``, through the variational form
        of the l1 norm ``|w_k| = min_{eta_k > 0} (w_k^2 / eta_k + eta_k) / 2``: the M-step
        minimises ``1/4 sum_k w_k^2 / eta_k + C sum_i H_i(w)`` with ``eta = |w|`` of the
        previous iterate (``beta_k^2 = 2 |w_k|``, ``C_m = C``; the first M-step is the l2
        problem), a majorise-minimise step that never increases P1 when the M-step is exact.
        The M-step's dual statistic ``v = C sum_i (Psi(x_i, y_i) - E_a[Psi])`` (``a`` its
        dual point, distributions over labellings) gives the next weights ``w_k = 2 |w_k|
        v_k``: a weight with ``|v_k| < 1/2`` shrinks, and once ``|w_k| <= threshold * max
        |w|`` it becomes an exact zero (after the first M-step, whose scales are not
        ``2 |w|``, and with structures without compiled kernels, a drop is made only when it
        does not increase P1); a zero weight whose ``|v_k|`` exceeds 1/2 re-enters with
        ``eta_k = threshold`` times the largest weight of the fit. So a fixed point satisfies
        the optimality conditions of P1 (``v_k = sign(w_k) / 2`` on the support,
        ``|v_k| <= 1/2`` off it). Keep ``threshold`` small: large values make weights near
        it alternate between dropping and re-entering. Every M-step's dual point certifies
        P1: with ``E = C sum_i E_a[Delta]`` and ``R`` twice the smallest P1 seen (a bound on
        ``||w*||_1``), ``min P1 >= max(E min(1, 1 / (2 ||v||_inf)), E - R (||v||_inf -
        1/2)_+)`` (``history_["dual"]``, the best bound so far; none for structures without
        compiled kernels). The bound is loose while weights are still moving to or from zero
        (their ``v_k`` barely affects the M-step), so the change of P1 usually stops the fit
        first. That rule guarantees a stalled P1 (an approximate fixed point of the EM), not
        a P1 within ``tol`` of its minimum: when the last certified relative gap is above
        ``tol`` the fit warns (``ConvergenceWarning``) with that gap, which ``history_``'s
        last row records (without compiled kernels there is no bound, hence no warning);
        ``solver="cutting_plane"`` certifies ``tol`` itself. The fit returns the iterate with the smallest P1 (the M-steps are inexact),
        with the weights below ``eps * max |w|`` set to zero for the largest ``eps`` in 1,
        0.1, 0.03, 0.01, 0.003, 0.001 that does not increase P1 (small weights reach zero
        only slowly: each M-step multiplies them by ``2 |v_k| < 1``).

        ``em_lambda`` a float is the paper's adaptive M3N with fixed ``lambda``: problem (5),
        ``min_g lambda ||g||^2 + C sum_i xi_i``, i.e. ``C_m = C / (2 lambda)``, with
        ``beta_k = sqrt(K) |g_k| / ||g||_2`` (eq. (6)), scales ``beta_k < threshold`` set to
        0 (the paper's 1e-4; that weight stays an exact zero), starting from
        ``beta = sqrt(lambda)``. A fixed point satisfies the optimality conditions of
        ``min (lambda / K) ||w||_1^2 + C sum_i H_i(w)`` on its support, i.e. it solves P1
        with ``C_P1 = C K / (4 lambda ||w||_1)`` (``history_["C_P1"]``; ``K`` the number of
        weights), a ``C`` that grows with ``K``: on CoNLL-2000 (9.2M weights) the M-steps of
        ``em_lambda=1`` are l2 problems at an effective ``C`` hundreds of times larger and
        take hundreds of passes each. No certificate (``history_["gap"]`` is NaN).

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        ``MultiClass`` or ``ChainStructure``.
    C : float, default=1.0
        The C of P1 (``cutting_plane``, and ``em`` with ``em_lambda=None``); with a float
        ``em_lambda`` the C of the paper's problem (5); ``subgradient`` uses it only for the
        default ``radius``.
    fit_intercept : bool, default=True
        For multiclass models (a plain 2-D ``X``, or ``structure=MultiClass()``), whether to
        learn per-class intercepts as :class:`~sklearn.svm.LinearSVC` does: a constant
        feature of value 1 is appended to every sample, so the intercepts are regularised
        like the other weights (``intercept_``). Chain and grid models ignore it (they have
        start, end and transition scores).
    solver : {"em", "subgradient", "cutting_plane"}, default="em"
    em_lambda : float, default=None
        ``solver="em"``: None solves P1 at this ``C``; a float is the ``lambda`` of the
        paper's problem (5) (larger values give sparser models; see ``solver="em"``).
    radius : float, default=None
        The l1 radius of P1' (``solver="subgradient"``); None takes the l1 norm of the
        l1 model at this ``C`` (see ``solver="subgradient"``).
    learning_rate : float, default=0.1
        Step scale of ``solver="subgradient"``.
    threshold : float, default=1e-4
        ``solver="em"``: weights with ``|w_k| <= threshold * max |w|`` (``em_lambda=None``),
        or scales ``beta_k`` below it (a float ``em_lambda``), become 0.
    tol : float, default=1e-2
        ``cutting_plane``: the relative duality gap (LP bound against P1); ``em``: the relative
        change of P1 between iterations or the relative certified gap (``em_lambda=None``),
        whichever comes first, and the floor of each M-step's relative gap; ``subgradient``:
        unused (the step budget stops it).
    max_iter : int, default=None
        EM iterations (default 15, as in the paper's experiments), subgradient steps (1000) or
        cutting-plane rounds (500).
    n_jobs : int, default=None
        Threads for decoding.
    verbose : int, default=0
        Print one line per check (iteration, primal, dual, gap, time, oracle calls).
    callback : callable, default=None
        Called at every check as ``callback(model, info)``: ``model`` a fitted copy of the
        estimator at the current weights (its ``predict``, ``score`` and ``objective`` work,
        e.g. to stop on a validation score), ``info`` a dict with the check's ``history_``
        row, ``iteration`` and ``w`` (a copy of the current weights); returning True stops
        the fit, whose model is then certified by the gap of that check.
    max_time : float, default=None
        Stop at the first check after this many seconds of fitting (with a
        ``ConvergenceWarning``).

    Attributes
    ----------
    classes_, structure_, w_, coef_, intercept_, n_iter_, n_features_in_
        As in :class:`StructSVMCuttingPlane`; ``coef_`` holds exact zeros for unselected
        weights, so ``sklearn.feature_selection.SelectFromModel`` can use it.
    transition_, start_, end_, temperature_
        As in :class:`StructSVMCuttingPlane`.
    beta_ : ndarray of shape (n_weights,)
        ``solver="em"``: the scales ``beta`` the next M-step would use (zero for discarded
        weights).
    radius_ : float
        ``solver="subgradient"`` without ``radius``: the radius used.
    history_ : dict of ndarray
        Per iteration / round / step: ``primal`` (P1 at this ``C``; for ``subgradient`` the
        P1' objective ``(1/n) sum_i H_i``), ``dual`` (the LP lower bound of
        ``cutting_plane``, the best bound of ``em`` with ``em_lambda=None``; else NaN),
        ``gap``, ``time``, ``oracle_calls``, ``n_nonzero`` and, for ``em``, ``C_P1`` (the C
        of P1 its fixed point solves: ``C`` itself with ``em_lambda=None``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import L1M3N
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 6))
    >>> y = (X[:, 0] > 0).astype(int)          # only feature 0 matters
    >>> model = L1M3N(C=0.05, solver="cutting_plane").fit(X, y)
    >>> np.flatnonzero(np.abs(model.coef_).sum(axis=0))   # the selected features
    array([0])
    """

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "solver": [StrOptions({"em", "subgradient", "cutting_plane"})],
        "em_lambda": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "radius": [Interval(numbers.Real, 0, None, closed="left"), None],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "threshold": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
    }

    def __init__(self, structure="auto", *, C=1.0, fit_intercept=True, solver="em", em_lambda=None,
                 radius=None, learning_rate=0.1, threshold=1e-4, tol=1e-2, max_iter=None,
                 n_jobs=None, verbose=0, callback=None, max_time=None):
        self.structure = structure
        self.C = C
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.em_lambda = em_lambda
        self.radius = radius
        self.learning_rate = learning_rate
        self.threshold = threshold
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.max_time = max_time

    def _regularizer(self):
        return 0.5 * float(np.abs(self.w_).sum())

    def _fit_batch(self, batch, Y, sample_weight):
        max_iter = self.max_iter or _DEFAULT_MAX_ITER[self.solver]
        run = {"em": self._fit_em, "subgradient": self._fit_subgradient,
               "cutting_plane": self._fit_cutting_plane}[self.solver]
        return run(batch, Y, max_iter)

    def _hinge(self, batch, Y, w):
        """Per-sequence hinge, most violating labels and their losses at ``w``."""
        return self._structured_hinge(batch, Y, *self.structure_.potentials(batch, w),
                                      "margin")

    def _p1(self, w, hinge):
        return 0.5 * _l1_norm(w) + float(self.C) * float(hinge.sum())

    def _objective(self, batch, Y, w):
        """P1 at ``w`` (one loss-augmented decoding)."""
        return self._p1(w, self._hinge(batch, Y, w)[0])

    # ------------------------------------------------------------------ Algorithm 1
    def _fit_cutting_plane(self, batch, Y, max_iter):
        certificate = Certificate(self, unit="round", extra_fields=("n_nonzero",
                                                                    "n_constraints"))
        solver = LPCuttingPlane(self.structure_, batch, Y, self.C)
        w = np.zeros(self.structure_.size_joint_feature_)
        lower, calls = 0.0, 0
        for round_ in range(1, max_iter + 1):
            hinge, Ybar, losses = self._hinge(batch, Y, w)
            calls += batch.n_sequences
            primal = self._p1(w, hinge)
            violated = np.flatnonzero(hinge > solver.slack + 1e-9 * max(1.0, hinge.max()))
            if certificate.check(round_, primal, lower, calls, w=w,
                                 converged=primal - lower <= self.tol * abs(primal)
                                 or violated.size == 0,
                                 n_nonzero=np.count_nonzero(w),
                                 n_constraints=solver.n_constraints):
                break
            solver.add(Ybar, losses, violated)
            w, lower = solver.solve()
        certificate.finish(round_)
        return w

    # ------------------------------------------------------------------ Algorithm 2
    def _fit_subgradient(self, batch, Y, max_iter):
        certificate = Certificate(self, unit="step", extra_fields=("n_nonzero",))
        structure, n = self.structure_, batch.n_sequences
        all_sequences = np.arange(n)

        def hinge_and_subgradient(w):
            hinge, Ybar, _ = self._hinge(batch, Y, w)
            active = all_sequences[hinge > 0]
            if active.size == 0:
                return 0.0, np.zeros_like(w)
            directions = constraint_directions(structure, batch, Y, Ybar, active)
            return float(hinge.sum()) / n, -np.asarray(directions.sum(axis=0)).ravel() / n

        def record(t, value, w):
            # no duality-gap certificate: the step budget is the stopping rule
            return certificate.check(t, value, np.nan, t * n, converged=False, w=w,
                                     n_nonzero=np.count_nonzero(w))

        w, _ = projected_subgradient(hinge_and_subgradient, structure.size_joint_feature_,
                                     self._radius(batch, Y), float(self.learning_rate), max_iter,
                                     record)
        certificate.finish(len(certificate.rows["primal"]), warn=False)
        return w

    def _radius(self, batch, Y):
        """``radius``, or by default the l1 norm of the l1 model at this ``C`` (the default EM
        stopped at ``tol=0.1``): the solution of P1 at ``C`` solves P1' at the l1 norm of
        that solution."""
        if self.radius is not None:
            return float(self.radius)
        em = L1M3N(C=self.C, tol=0.1, threshold=self.threshold, n_jobs=self.n_jobs)
        em.structure_ = self.structure_
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            w = em._fit_batch(batch, Y, np.ones(batch.n_sequences))
        self.radius_ = _l1_norm(w)
        return self.radius_

    # ------------------------------------------------------------------ Algorithm 3
    def _m_step_scaled_structure(self, batch, Y, beta, C):
        """The M-step by the 1-slack cutting plane on the joint features scaled by ``beta``
        (structures without compiled kernels); returns ``(g, oracle calls)``."""
        structure = self.structure_
        n_unary = structure.n_states_ * structure.n_features_
        m_step = StructSVMCuttingPlane(C=C, tol=self.tol, max_iter=100000, n_jobs=self.n_jobs,
                                       variant="1-slack")
        m_step.structure_ = scaled_structure(
            structure, beta[:n_unary].reshape(structure.n_features_, structure.n_states_),
            beta[n_unary:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            g = m_step._fit_batch(batch, Y, np.ones(batch.n_sequences))
        return g, int(m_step.history_["oracle_calls"][-1])

    def _m_step_frank_wolfe(self, batch, scale2, state, target, rng):
        """The M-step by the compiled restricted simplicial decomposition passes on the dual
        with squared scales ``scale2``, warm-started from the last M-step's dual point (the
        dual distributions do not depend on the scales), until its relative duality gap is at
        most ``target``, within a pass budget that grows as ``tol`` tightens
        (``max(100, min(2000, 0.1 / tol))``); returns the oracle calls (the solution is the
        state's: ``v = state.statistic_weights``, ``w = state.w = scale2 * v``)."""
        state.rescale(scale2)
        calls, primal = 0, np.inf
        budget = int(max(100, min(2000, 0.1 / self.tol)))
        for passes in range(1, budget + 1):
            estimate = state.run_pass(rng.permutation(batch.n_sequences))
            calls += batch.n_sequences
            if estimate <= target * abs(primal) or passes % 10 == 0 or passes == budget:
                _, dual = state.certificate()
                primal = state.primal()
                calls += batch.n_sequences
                if primal - dual <= target * abs(primal):
                    break
        return calls

    def _variational_step(self, batch, Y, w, state, reference):
        """``em_lambda=None``, after an M-step with weights ``w``: the weights with
        ``|w_k| <= threshold * max |w|`` are set to 0 when they are shrinking (their dual
        statistic ``|v_k| < 1/2``: the next M-step would multiply them by ``2 |v_k|``), or,
        without a dual statistic (``state`` None: the first M-step, whose scales are not
        ``2 |w|``, or structures without compiled kernels), when that does not increase P1.
        Returns ``(w, P1 at w, the next M-step's squared scales)``: ``2 |w_k|``, and
        ``2 threshold reference`` for a zero weight whose ``|v_k|`` exceeds 1/2 (it
        re-enters; ``reference`` the largest ``|w_k|`` of the fit so far). With ``state``,
        ``w`` is the state's own weight array and is zeroed in place (the next M-step
        recomputes it from the dual statistics)."""
        magnitude = np.abs(w)
        small = (magnitude <= self.threshold * float(magnitude.max(initial=0.0))) & \
            (magnitude > 0)
        v = state.statistic_weights if state is not None else None
        if v is not None:
            small &= (v < 0.5) & (v > -0.5)
            w[small] = 0.0  # the state's weights: the next M-step recomputes them
        objective = self._objective(batch, Y, w)
        if v is None and small.any():
            trial = np.where(small, 0.0, w)
            value = self._objective(batch, Y, trial)
            if value <= objective:
                w, objective = trial, value
            else:
                small[:] = False
        magnitude[small] = 0.0
        scale2 = np.multiply(magnitude, 2.0, out=magnitude)
        if v is not None and reference > 0:
            scale2[(w == 0.0) & ((v > 0.5) | (v < -0.5))] = 2.0 * self.threshold * reference
        return w, objective, scale2

    def _pruned(self, batch, Y, w, objective):
        """The sparsest of ``w`` with its weights below ``eps * max |w|`` set to 0, for
        ``eps`` in 1 (all weights), 0.1, 0.03, 0.01, 0.003, 0.001, whose P1 is at most
        ``objective`` (P1 at ``w``), with its P1; ``(w, objective)`` when none is."""
        largest = _max_abs(w)
        for eps in (1.0, 0.1, 0.03, 0.01, 0.003, 0.001):
            cut = eps * largest
            small = (w != 0) & (w >= -cut) & (w <= cut)
            if not small.any():
                continue
            trial = w.copy()
            trial[small] = 0.0
            value = self._objective(batch, Y, trial)
            if value <= objective:
                return trial, value
            del trial
        return w, objective

    def _l1_dual_bound(self, state, smallest_p1):
        """A lower bound on min P1 from the M-step's dual point (see ``solver="em"``):
        ``max(E min(1, 1 / (2 ||v||_inf)), E - R (||v||_inf - 1/2)_+)`` with ``R`` twice
        ``smallest_p1``, the smallest P1 seen."""
        expected = float(self.C) * float(state.expected_loss.sum())
        v = state.statistic_weights
        largest = _max_abs(v)
        scaled = expected * min(1.0, 0.5 / largest) if largest > 0 else expected
        return max(scaled, expected - 2.0 * smallest_p1 * max(0.0, largest - 0.5))

    def _fit_em(self, batch, Y, max_iter):
        structure = self.structure_
        certificate = Certificate(self, unit="iteration", extra_fields=("n_nonzero", "C_P1"))
        size = structure.size_joint_feature_
        C = float(self.C)
        variational = self.em_lambda is None
        # the M-step: min_g 1/2 ||g||^2 + m_step_C sum_i H_i(beta * g), scale2 = beta^2
        if variational:  # the first M-step is the l2 problem at C
            m_step_C, scale2 = C, np.ones(size)
        else:
            lam = float(self.em_lambda)
            m_step_C, beta = C / (2.0 * lam), np.full(size, np.sqrt(lam))
            scale2 = beta ** 2
        compiled = structure.example_kernels(batch) is not None and \
            len(structure.nonnegative_) == 0 and supports_multi_point(structure, batch)
        state = MultiPointFrankWolfeState(structure, batch, Y, m_step_C, 5,
                                          scale2=scale2) if compiled else None
        rng = np.random.RandomState(0)  # the M-steps' visiting orders
        calls, objective, change, lower = 0, np.inf, np.inf, -np.inf
        # em_lambda=None: the iterate with the smallest P1, the largest weight seen
        best, reference = (None, np.inf), 0.0
        target = self.tol  # the last M-step's precision (non-compiled M-steps: tol)
        for iteration in range(1, max_iter + 1):
            if variational:
                beta = None if compiled else np.sqrt(scale2)
            if compiled:  # the M-step's precision follows the EM's progress
                target = max(self.tol, min(0.1, 0.1 * change))
                calls += self._m_step_frank_wolfe(batch, scale2, state, target, rng)
                # the effective weights scale2 * v (the state's array: the next M-step
                # recomputes it from the statistics), or the paper's g = beta * v
                w = state.w if variational else None
                gamma = None if variational else beta * state.statistic_weights
            else:
                gamma, m_calls = self._m_step_scaled_structure(batch, Y, beta, m_step_C)
                calls += m_calls
                w = beta * gamma if variational else None
            if variational:
                reference = max(reference, _max_abs(w))
                w, new_objective, scale2 = self._variational_step(
                    batch, Y, w, state if iteration > 1 else None, reference)
            else:
                norm = float(np.linalg.norm(gamma))
                new_beta = np.sqrt(size) * np.abs(gamma) / norm if norm > 0 \
                    else np.zeros(size)
                new_beta[new_beta < self.threshold] = 0.0
                w = np.where(new_beta > 0, beta * gamma, 0.0)
                beta = new_beta
                scale2 = beta ** 2
                new_objective = self._objective(batch, Y, w)
            change = abs(objective - new_objective) / abs(new_objective) \
                if np.isfinite(objective) else np.inf
            objective = new_objective
            if variational and state is not None:
                lower = max(lower, self._l1_dual_bound(state, min(objective, best[1])))
            if variational:
                C_p1 = C
            else:
                l1 = _l1_norm(w)
                C_p1 = C * size / (4.0 * lam * l1) if l1 > 0 else np.inf
            # a small change counts only after an M-step run with the target tol (a looser
            # M-step that barely moves the weights says nothing about the EM's fixed point)
            converged = (change <= self.tol and target <= self.tol) or \
                objective - lower <= self.tol * abs(objective)
            if variational:
                if objective < best[1]:
                    best = (w.copy(), objective)
                if converged or iteration == max_iter or (
                        self.max_time is not None and certificate.elapsed() >= self.max_time):
                    # the last iterate: the best one seen, with exact zeros for the weights
                    # still on their way to zero (M-steps are inexact: P1 may rise a little)
                    w, objective = self._pruned(batch, Y, *best)
            if certificate.check(iteration, objective, lower if np.isfinite(lower) else np.nan,
                                 calls, w=w, converged=converged,
                                 n_nonzero=np.count_nonzero(w), C_P1=C_p1):
                break
        certificate.finish(iteration, what=f"a relative change of the objective <= "
                                           f"tol={self.tol}")
        gap = certificate.rows["gap"][-1] / abs(certificate.rows["primal"][-1])
        if certificate.stop_reason == "converged" and gap > self.tol:  # (NaN: no bound)
            warnings.warn(
                f"L1M3N(solver='em') stopped after {iteration} iterations on a relative "
                f"change of P1 of at most tol={self.tol}, with a certified relative duality "
                f"gap of {gap:.3g}: P1 has stalled, but only a gap <= tol certifies it within "
                "tol of its minimum. Lower tol, or use solver='cutting_plane' for a "
                "certificate.", ConvergenceWarning)
        self.beta_ = np.sqrt(scale2) if variational else beta
        return w
