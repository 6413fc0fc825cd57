"""Exponentiated gradient on the factored dual of max-margin Markov networks (Bartlett et al.
2004)."""

import numbers

from ..._input import weighted_examples, weights_digest
from ...base import BaseStructuredClassifier
from ...utils._sklearn_compat import Interval, StrOptions
from .._factored_dual import per_example_tables_too_large
from ._safe_rate import safe_learning_rate
from ._solver import solve_batch, solve_online


class M3NExpGrad(BaseStructuredClassifier):
    """Max-margin Markov network trained by exponentiated gradient (Bartlett et al. 2004).

    Maximises the dual of the objective shared by all sklstruct learners (margin
    rescaling)::

        P(w) = 1/2 ||w||^2 + C * sum_i s_i H_i(w)
        D(a) = C sum_i s_i E_{a_i}[Delta(y_i, y)] - 1/2 ||w(a)||^2,
        w(a) = C sum_i s_i (Psi(x_i, y_i) - E_{a_i}[Psi(x_i, y)])

    with every ``a_i`` a Gibbs distribution over labelings whose potentials are kept per part
    (the paper's Figure 2): per-token node potentials and pairwise tables. An EG step adds
    ``eta * C * (loss_r + w . phi_r)`` to every part's potential and needs only the clique
    marginals (forward-backward in compiled code), never a QP or a working set. This is the
    paper's ``C``. The sample weights ``s_i`` of :meth:`fit` (1 unless given; the online
    algorithm only) scale example ``i``'s ``C``.

    ``algorithm="batch"`` is Figure 2: all examples move at once, from the same ``w``; the
    pairwise potentials are then equal for all examples and one table is kept.
    ``algorithm="online"`` is the variant of the paper's experiment (section 5): examples are
    visited in turn, each step recomputes that example's marginals and updates ``w`` at once;
    every example keeps its own pairwise table. The online pass runs in compiled code on the
    structure's compiled marginal oracle.

    At the passes ``check_every`` chooses, the exact dual, the primal objective at ``w(a)``
    (one loss-augmented decoding) and their gap are recorded; the fit stops when
    ``gap <= tol * primal``.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        ``algorithm="batch"`` accepts any structure with a ``marginals`` oracle;
        ``"online"`` needs compiled per-example marginals (chains, multiclass data, graphs
        and multi-label structures with exact marginals, parse trees: the structures user
        guide lists them); ``step="safe"`` accepts ``ChainStructure`` and ``MultiClass``.
    C : float, default=1.0
        Weight of the summed structured hinge losses.
    fit_intercept : bool, default=True
        For multiclass models (a plain 2-D ``X``, or ``structure=MultiClass()``), whether to
        learn per-class intercepts as :class:`~sklearn.svm.LinearSVC` does: a constant
        feature of value 1 is appended to every sample, so the intercepts are regularised
        like the other weights (``intercept_``). Chain and grid models ignore it (they have
        start, end and transition scores).
    algorithm : {"auto", "online", "batch"}, default="auto"
        "auto": online when the structure has compiled per-example marginals, else batch;
        also batch where the online dual's two pairwise tables per example would take more
        than 256 MB and four times the per-token arrays (many labels on short sequences:
        the batch updates share one table, memory O(n_tokens * n_states)).
        Online passes update an example's dual at the weights its neighbours have just moved,
        and usually reach a given duality gap in fewer passes than batch updates.
    step : {"adaptive", "fixed", "safe"}, default="adaptive"
        "adaptive": a step that would lower the dual (online: that gains less than half its
        first-order prediction) is halved and retried; an accepted first try doubles the step
        until the first rejection and lets it grow by 5% afterwards (per example for
        ``"online"``, where a step also never moves a potential by more than 3 nats); the
        dual never decreases.
        "fixed": every step uses ``eta`` (the paper's Figure 2 literally).
        "safe": the rate ``0.4 / (B + lambda)`` of the paper's Theorem 2, with ``lambda`` the
        largest eigenvalue of the dual's Hessian along feasible directions (computed exactly)
        and ``B`` a bound on the spread of the gradient; the dual provably never decreases,
        but ``lambda`` grows like ``n_states ** sequence_length``, so this rate is only
        practical for short sequences.
    eta : float, default=None
        Initial (adaptive) or constant (fixed) step size. ``None``: ``1 / (C^2 R)`` (the inverse
        curvature scale of the dual) with ``R`` the squared feature norm of a sequence plus its
        length (per example for ``"online"``, the largest for ``"batch"``). Must be ``None``
        with ``step="safe"``.
    init_bias : float, default=0.0
        Initial node potential of every token's true state: 0 is the paper's uniform start;
        larger values start near ``w = 0`` (the paper's Figure 4(b)); with the default
        online passes the uniform start usually reaches ``tol`` sooner.
    tol : float, default=1e-2
        Stop when the duality gap is at most ``tol`` times the primal objective.
    max_iter : int, default=1000
        Maximum number of passes over the data.
    check_every : int, default=None
        Passes between two certificates (each costs about one loss-augmented decoding of the
        training set). ``None``: automatic, see :class:`~sklstruct._progress.CheckSchedule`.
    warm_start : bool, default=False
        Keep this fit's dual state, and continue from that of the previous fit (made with
        ``warm_start=True`` too) when the training data (compared by a digest), ``C`` and the
        sample weights are the same (a batch fit can be continued by online passes);
        otherwise start afresh. The dual state is kept in memory only: it is not pickled.
    random_state : int, RandomState instance or None, default=None
        ``algorithm="online"``: every pass visits the examples in a fresh random order (far
        fewer passes to ``tol`` than the data's own order, whose neighbouring examples are
        alike). An int seeds every fit alike, so a ``warm_start`` fit repeats the orders of
        the fit it continues.
    n_jobs : int, default=None
        Threads for forward-backward and decoding outside the online pass.
    verbose : int, default=0
        Print one line per check (pass, primal, dual, gap, time, oracle calls).
    callback : callable, default=None
        Called at every check as ``callback(model, info)``: ``model`` a fitted copy of the
        estimator at the current weights (its ``predict``, ``score`` and ``objective`` work,
        e.g. to stop on a validation score), ``info`` a dict with the check's ``history_``
        row, ``iteration`` and ``w`` (a copy of the current weights); returning True stops
        the fit, whose model is then certified by the gap of that check.
    max_time : float, default=None
        Stop at the first check after this many seconds of fitting (with a
        ``ConvergenceWarning``). The seconds count from the start of the solver, after
        the input validation, and the fit ends after the pass in which they run out and
        that iterate's certificate: it can run over by that much.

    Attributes
    ----------
    classes_, structure_, w_, coef_, intercept_, n_iter_, n_features_in_, feature_names_in_
        As in :class:`StructSVMCuttingPlane`; ``n_iter_`` counts passes.
    transition_, start_, end_, pairwise_, temperature_
        As in :class:`StructSVMCuttingPlane`.
    n_inexact_examples_, inexact_gap_bound_
        As in :class:`StructSVMCuttingPlane`.
    token_map_ : None
        Always None here (:class:`StructSVMCuttingPlane`'s kernel maps set it).
    history_ : dict of ndarray
        Per check: ``primal``, ``dual``, ``gap``, ``time``, ``oracle_calls`` (calls of the
        marginal oracle on single examples, backtracking included), ``passes`` and ``eta``
        (the batch step, or the median per-example step for ``"online"``).
    eta_ : float or ndarray
        The step size (batch) or per-example step sizes (online) at the end of the fit.

    Notes
    -----
    Sample weights (``fit(..., sample_weight=s)``): example ``i``'s step is that of
    ``C s_i``. The online algorithm only: the batch updates share one pairwise table
    between all examples, which weights would make differ (``ValueError``).

    Memory: the dual is kept as sufficient statistics, never per labelling:
    node potentials and marginals (2 x n_tokens x n_states doubles) and, online, a pairwise
    potential and marginal table per sequence (2 x n_sequences x n_pairwise doubles), plus the
    weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import M3NExpGrad
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> [p.tolist() for p in M3NExpGrad(C=10.0).fit(X, y).predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _trains_on_marginals = True

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "algorithm": [StrOptions({"auto", "online", "batch"})],
        "eta": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "init_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "step": [StrOptions({"adaptive", "fixed", "safe"})],
        "check_every": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, structure="auto", *, C=1.0, fit_intercept=True, algorithm="auto",
                 step="adaptive", eta=None, init_bias=0.0, tol=1e-2, max_iter=1000,
                 check_every=None, warm_start=False, random_state=None, n_jobs=None,
                 verbose=0, callback=None, max_time=None):
        self.structure = structure
        self.C = C
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.step = step
        self.eta = eta
        self.init_bias = init_bias
        self.tol = tol
        self.max_iter = max_iter
        self.check_every = check_every
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.max_time = max_time

    # ------------------------------------------------------------------ set-up
    def _resolved_algorithm(self, batch):
        if self.algorithm != "auto":
            return self.algorithm
        kernels = self.structure_.example_kernels(batch)
        if kernels is None or not kernels.has_marginals:
            return "batch"
        # the online dual keeps two pairwise tables per example (its potentials and
        # marginals); where they would dwarf the per-token arrays (many labels on short
        # sequences), the batch updates, whose examples share one table, keep the memory
        # at O(n_tokens * n_states)
        return "batch" if per_example_tables_too_large(self.structure_, batch, 2) else "online"

    def _initial_step(self, batch, Y, weights):
        if self.step == "safe":
            if self.eta is not None:
                raise ValueError("eta must be None with step='safe' (the rate is computed).")
            # (with weights, the bounds of the largest C s_i hold for every example)
            C = self.C if weights is None else self.C * float(weights.max())
            return safe_learning_rate(self.structure_, batch, Y, C)
        return None if self.eta is None else float(self.eta)

    def _fit_batch(self, batch, Y, sample_weight):
        batch, Y, weights = weighted_examples(batch, Y, sample_weight)
        algorithm = self._resolved_algorithm(batch)
        if algorithm == "online":
            check_online_structure(self.structure_, batch)
        elif weights is not None:
            if self.algorithm == "auto":
                reason = (": the batch updates, which algorithm='auto' chose here (see its "
                          "docstring), share one pairwise table between all examples; use "
                          "M3NSimplicialDecomposition or StructSVMCuttingPlane.")
            else:
                reason = ((": the batch updates share one pairwise table between all examples"
                           if self.structure_.n_pairwise_ else
                           ": the batch updates take no weights")
                          + "; use algorithm='online', M3NSimplicialDecomposition or "
                          "StructSVMCuttingPlane.")
            raise ValueError("M3NExpGrad takes sample_weight with algorithm='online' only"
                             + reason)
        eta = self._initial_step(batch, Y, weights)
        # (a state of other sample weights would be feasible, but its potentials, sharpened
        # on the previous optimum, move slowly to the new one: a fresh start is faster)
        settings = (float(self.C), weights_digest(weights))
        state = self._warm_state(settings, batch, Y)
        if algorithm == "batch" and state is not None and state["pair_pot"].ndim == 2:
            raise ValueError("warm_start: an online fit cannot be continued by batch passes "
                             "(its examples have separate pairwise potentials); use "
                             "algorithm='online'.")
        certificate = self._certificate(extra_fields=("passes", "eta"))
        solve = solve_online if algorithm == "online" else solve_batch
        w, self.eta_, state = solve(
            self.structure_, batch, Y, C=float(self.C), eta=eta, init_bias=self.init_bias,
            adaptive=self.step == "adaptive", state=state, check_every=self.check_every,
            random_state=self.random_state, n_jobs=self.n_jobs, certificate=certificate,
            **({} if weights is None else {"sample_weight": weights}))
        self._record(certificate)
        self._keep_warm_state(settings, batch, Y, state)
        return w


def check_online_structure(structure, batch, what="algorithm='online'"):
    """Online passes run on the structure's compiled per-example marginals."""
    kernels = structure.example_kernels(batch) if hasattr(structure, "example_kernels") \
        else None
    if kernels is None or not kernels.has_marginals:
        raise ValueError(f"{what} needs compiled per-example marginals (chains, multiclass "
                         "data, graphs and multi-label structures with exact marginals, "
                         f"parse trees), which {type(structure).__name__} has not on this "
                         "data; use algorithm='batch'.")
