"""The l1-regularised (primal sparse) max-margin Markov network (Zhu, Xing and Zhang 2008)."""

import numbers

import numpy as np

from ..._input import weighted_examples
from ..._progress import Certificate
from ...base import BaseStructuredClassifier
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._warnings import warn_user
from ._em import fit_em_adaptive, fit_em_variational, l1_norm
from ._solvers import fit_lp_cutting_plane, fit_subgradient

DEFAULT_MAX_ITER = {"em": 15, "subgradient": 1000, "cutting_plane": 500}


class L1M3N(BaseStructuredClassifier):
    """Primal sparse max-margin Markov network (l1-M3N; Zhu, Xing and Zhang, "Primal sparse
    max-margin Markov networks", KDD 2008).

    The model minimises the paper's problem P1::

        P1(w) = 1/2 ||w||_1 + C * sum_i s_i H_i(w)

    (``s_i`` the sample weights of :meth:`fit`, 1 unless given; every solver takes them)

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
        when their difference is at most ``tol * P1(w)`` (``history_["gap"]``). A fit
        stopped before (``max_iter``, ``max_time``) returns the certified weights of
        smallest P1, which ``history_``'s last row certifies (the LP's solutions need not
        lower P1 from round to round).
    ``solver="subgradient"`` (Algorithm 2)
        Solves P1': ``min (1/n) sum_i H_i(w)`` subject to ``||w||_1 <= radius``, by projected
        subgradient steps ``learning_rate / sqrt(t)`` with the exact O(d log d) projection onto
        the l1 ball (Duchi et al. 2008), keeping the best iterate. The solution of P1 with a
        given ``C`` solves P1' with ``radius = ||w*_C||_1``; there is no duality-gap certificate
        (``history_["gap"]`` is NaN). ``C`` only sets the default ``radius``: the l1 norm
        of the l1 model at this ``C`` (``solver="em"`` with this ``tol``; ``radius_``; a
        radius of 0, where that model has no non-zero weight, warns: the model is then
        zero).
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
        ``solver="cutting_plane"`` certifies ``tol`` itself. The fit returns the iterate
        with the smallest P1 (the M-steps are inexact), with the weights below
        ``eps * max |w|`` set to zero for the largest ``eps`` in 1, 0.1, 0.03, 0.01, 0.003,
        0.001 that does not increase P1 (small weights reach zero only slowly: each M-step
        multiplies them by ``2 |v_k| < 1``).

        ``em_lambda`` a float is the paper's adaptive M3N with fixed ``lambda``: problem (5),
        ``min_g lambda ||g||^2 + C sum_i xi_i``, i.e. ``C_m = C / (2 lambda)``, with
        ``beta_k = sqrt(K) |g_k| / ||g||_2`` (eq. (6)), scales ``beta_k < threshold`` set to
        0 (the paper's 1e-4; that weight stays an exact zero), starting from
        ``beta = sqrt(lambda)``. A fixed point satisfies the optimality conditions of
        ``min (lambda / K) ||w||_1^2 + C sum_i H_i(w)`` on its support, i.e. it solves P1
        with ``C_P1 = C K / (4 lambda ||w||_1)`` (``history_["C_P1"]``; ``K`` the number of
        weights), a ``C`` that grows with ``K``: with millions of weights the M-steps are l2
        problems at an effective ``C`` hundreds of times larger, which take hundreds of passes
        each. No certificate (``history_["gap"]`` is NaN).

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        Any structure with a max-oracle (margin rescaling) and unconstrained weights:
        ``MultiClass``, ``ChainStructure``, graphs, trees, multi-label structures, parse
        trees or your own. The EM's M-steps run compiled passes where the structure has
        compiled kernels, and the 1-slack cutting plane otherwise.
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
        cutting-plane rounds (500; each certifies the weights it decodes with, then re-solves
        the linear programme unless it is the last).
    n_jobs : int, default=None
        Threads for decoding.
    verbose : int, default=0
        Print one line per check (iteration, primal, dual, gap, time, oracle calls).
    callback : callable, default=None
        Called at every check as ``callback(model, info)``: ``model`` a fitted copy of the
        estimator at the current weights (its ``predict``, ``score`` and ``objective`` work,
        e.g. to stop on a validation score), ``info`` a dict with the check's ``history_``
        row, ``iteration`` and ``w`` (a copy of the current weights); returning True stops
        the fit, whose model is then certified by the gap of that check. With
        ``solver="subgradient"`` and the default ``radius``, the EM fit that finds the
        radius runs first (within ``max_time``) and does not call it.
    max_time : float, default=None
        Stop at the first check after this many seconds of fitting (with a
        ``ConvergenceWarning``). The seconds count from the start of the solver, after
        the input validation, and the fit ends after the pass in which they run out and
        that iterate's certificate: it can run over by that much.

    Attributes
    ----------
    classes_, structure_, w_, coef_, intercept_, n_iter_, n_features_in_, feature_names_in_
        As in :class:`StructSVMCuttingPlane`; ``coef_`` holds exact zeros for unselected
        weights, so ``sklearn.feature_selection.SelectFromModel`` can use it.
    transition_, start_, end_, pairwise_, temperature_
        As in :class:`StructSVMCuttingPlane`.
    n_inexact_examples_, inexact_gap_bound_
        As in :class:`StructSVMCuttingPlane`.
    token_map_ : None
        Always None here (:class:`StructSVMCuttingPlane`'s kernel maps set it).
    beta_ : ndarray of shape (n_weights,)
        ``solver="em"``: the scales ``beta`` the next M-step would use (zero for discarded
        weights).
    radius_ : float
        ``solver="subgradient"`` without ``radius``: the radius used.
    history_ : dict of ndarray
        Per iteration / round / step: ``primal`` (P1 at this ``C``; for ``subgradient`` the
        P1' objective ``sum_i s_i H_i / sum_i s_i``, unweighted ``(1/n) sum_i H_i``),
        ``dual`` (the LP lower bound of ``cutting_plane``, the best bound of ``em`` with
        ``em_lambda=None``; else NaN),
        ``gap``, ``time``, ``oracle_calls``, ``n_nonzero`` and, for ``em``, ``C_P1`` (the C
        of P1 its fixed point solves: ``C`` itself with ``em_lambda=None``).

    Notes
    -----
    Sample weights (``fit(..., sample_weight=s)``): P1 becomes
    ``1/2 ||w||_1 + C sum_i s_i H_i(w)`` and P1' ``sum_i s_i H_i / sum_i s_i``.

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
        # (threshold: the EM's, also that of the subgradient's default radius)
        used = {"em": {"em_lambda", "threshold"}, "cutting_plane": set(),
                "subgradient": {"radius", "learning_rate"}
                | ({"threshold"} if self.radius is None else set())}[self.solver]
        self._warn_unused_parameters(
            sorted({"em_lambda", "radius", "learning_rate", "threshold"} - used),
            f"solver={self.solver!r}" + (", radius given" if self.solver == "subgradient"
                                         and "threshold" not in used else ""))
        batch, Y, weights = weighted_examples(batch, Y, sample_weight)
        unit = {"em": "iteration", "subgradient": "step", "cutting_plane": "round"}[self.solver]
        extra = {"em": ("n_nonzero", "C_P1"), "subgradient": ("n_nonzero",),
                 "cutting_plane": ("n_nonzero", "n_constraints")}[self.solver]
        certificate = self._certificate(unit=unit, extra_fields=extra,
                                        max_iter=self.max_iter or DEFAULT_MAX_ITER[self.solver])
        common = dict(C=float(self.C), n_jobs=self.n_jobs, certificate=certificate,
                      **({} if weights is None else {"sample_weight": weights}))
        if self.solver == "cutting_plane":
            w = fit_lp_cutting_plane(self.structure_, batch, Y, **common)
        elif self.solver == "subgradient":
            radius = self.radius
            if radius is None:
                radius = self.radius_ = self._default_radius(batch, Y, weights)
            w = fit_subgradient(self.structure_, batch, Y, radius=float(radius),
                                learning_rate=float(self.learning_rate), **common)
        elif self.em_lambda is None:
            w, self.beta_ = fit_em_variational(self.structure_, batch, Y,
                                               threshold=self.threshold, **common)
        else:
            w, self.beta_ = fit_em_adaptive(self.structure_, batch, Y, em_lambda=self.em_lambda,
                                            threshold=self.threshold, **common)
        self._record(certificate)
        return w

    def _default_radius(self, batch, Y, weights):
        """The l1 norm of the l1 model at this ``C`` (the default EM with this ``tol``): the
        solution of P1 at ``C`` solves P1' at the l1 norm of that solution. (EM stopped
        at ``tol=0.1`` can stop at zero weights: on 60 OCR words at ``C=0.1`` it did after
        4 iterations, where P1's optimum has about 200 non-zero weights.)"""
        # (within the fit's max_time: the subgradient steps' certificate, started before,
        # counts this time too)
        certificate = Certificate(self._progress_label(), tol=float(self.tol),
                                  max_iter=DEFAULT_MAX_ITER["em"], max_time=self.max_time,
                                  unit="iteration", extra_fields=("n_nonzero", "C_P1"),
                                  warns=False)
        w, _ = fit_em_variational(self.structure_, batch, Y, C=float(self.C),
                                  threshold=self.threshold, n_jobs=self.n_jobs,
                                  certificate=certificate,
                                  **({} if weights is None else {"sample_weight": weights}))
        radius = l1_norm(w)
        if radius == 0.0:
            warn_user(f"{type(self).__name__}(solver='subgradient'): the default radius is "
                      f"0 (EM at C={self.C} and tol={self.tol} returned no non-zero "
                      "weight; it can stop there before P1's optimum), so every weight "
                      "is 0; give a radius, a smaller tol or a larger C.", UserWarning)
        return radius
