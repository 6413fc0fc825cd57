"""Nesterov's excessive gap technique with Bregman projections for M3N training (Zhang, Saha
and Vishwanathan)."""

import numbers

import numpy as np
from sklearn.utils.extmath import row_norms
from sklearn.utils.validation import check_is_fitted

from ..._input import weighted_examples
from ..._kernel_map import token_kernel
from ...base import BaseStructuredClassifier
from ...structures._base import check_potential_range
from ...utils._sklearn_compat import Interval, StrOptions
from ._geometry import KernelGeometry, LinearGeometry
from ._solver import ExcessiveGapRun, worst_case_mu

_KERNELS = {"linear", "rbf", "poly"}


class M3NExcessiveGap(BaseStructuredClassifier):
    """Max-margin Markov network trained by the excessive gap technique (Zhang, Saha and
    Vishwanathan, "Accelerated training of max-margin Markov networks with kernels").

    Minimises the objective shared by all sklstruct learners (margin rescaling)::

        P(w) = 1/2 ||w||^2 + C * sum_i s_i H_i(w),

    with sequence weights ``s_i`` (``sample_weight`` of :meth:`fit`, 1 by default); unweighted
    it is ``n C`` times the paper's ``J(w) = lambda/2 ||w||^2 + 1/n sum_i H_i(w)`` with
    ``lambda = 1 / (n C)``. Algorithm 2 of the paper (section 4.2): two sequences, weights
    ``w_k`` and dual variables ``alpha_k``, and a smoothing parameter ``mu_k`` that decays
    like ``1/k^2`` (``tau_k = 2/(k+3)``, ``mu_{k+1} = (1 - tau_k) mu_k``). Each iteration needs
    two rounds of clique marginals (forward-backward in compiled code): of the smoothed best
    response ``alpha_mu(w_k)`` (eq. (38)) and of the Bregman projection ``alpha~`` (eq. (40)).
    ``alpha_k`` is never stored as a distribution over labelings: only its marginals (node
    marginals per token and expected pairwise statistics per sequence),
    updated by the convex combinations of steps 7, 8 and 11.

    The duality gap ``P(w_k) - D(alpha_k)`` is computed exactly every iteration (it certifies
    the result whatever the schedule) and the fit stops when it is at most ``tol * P(w_k)``.
    Theorem 4 bounds it by ``6 mu_1 D_prox / ((k+1)(k+2))`` (in the paper's scale) when
    ``mu_1 >= L / sigma``.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        Any structure with a ``marginals`` oracle (``MultiClass``, ``ChainStructure``) and
        ``pairwise_count_blocks`` covering its pairwise statistics.
    C : float, default=1.0
        Weight of the summed structured hinge losses.
    fit_intercept : bool, default=True
        For multiclass models (a plain 2-D ``X``, or ``structure=MultiClass()``), whether to
        learn per-class intercepts as :class:`~sklearn.svm.LinearSVC` does: a constant
        feature of value 1 is appended to every sample, so the intercepts are regularised
        like the other weights (``intercept_``). Chain and grid models ignore it (they have
        start, end and transition scores). With a non-linear kernel the constant feature
        goes into the kernel's feature space, ``K(x, x') + 1``, so that the model is the one
        :class:`StructSVMCuttingPlane`'s kernel maps fit (their basis features with a
        constant column); its intercepts are then part of ``dual_coef_``.
    kernel : {"linear", "rbf", "poly"} or callable, default="linear"
        Kernel on token feature vectors (section 4.3): with a non-linear kernel ``w`` is kept
        implicitly through the marginals of ``beta_k`` (Theorem 9) and the token kernel matrix
        of the training set is formed (see ``kernel_memory_mb``). Transition and start/end
        features stay linear.
    gamma : float, default=None
        Kernel coefficient of "rbf" and "poly" (``None``: ``1 / n_features``), as in
        :func:`sklearn.metrics.pairwise.pairwise_kernels`.
    degree : int, default=3
        Degree of the "poly" kernel.
    coef0 : float, default=1.0
        Independent term of the "poly" kernel.
    smoothing : {"worst_case", "adaptive"}, default="adaptive"
        "worst_case": the paper's Algorithm 1/2 exactly: ``mu_1 = max ||psi||^2 / lambda``
        (eq. (32)'s ``L/sigma``, with ``max ||psi||^2`` bounded for weights tied across
        positions by ``2 (sum_t ||x_t||)^2 + 2 sum_b T_b^2`` over the structure's pairwise count
        blocks of totals ``T_b``; for a chain of length ``l``: ``2 (l - 1)^2``, ``+ 4`` with
        start/end features; with sample weights ``n`` in ``lambda = 1 / (n C)`` is
        ``sum_i s_i``) and ``tau_k = 2/(k+3)``; Theorem 4's ``O(1/k^2)`` bound holds.
        "adaptive": the same steps with ``tau_k`` chosen from a running estimate ``L_k`` of
        the curvature instead of the worst-case ``L`` (``tau^2 / (1 - tau) = mu_k / L_k``,
        the condition the proof of Theorem 5 needs, eq. (20)); the excessive gap condition
        ``J_mu(w_k) <= D(alpha_k)`` (11) is checked exactly at every iterate and a step that
        breaks it is redone with a larger ``L_k`` (up to the worst case, where (11) is
        guaranteed). So (11), and with it eq. (12) (``gap_k <= mu_k D`` in the paper's scale;
        ``gap_k <= (sum_i s_i) C mu_k D`` for ``history_["gap"]``), holds at every
        iterate, and ``mu_k`` falls as fast as the data's actual curvature allows, usually far
        faster than the worst-case schedule. The exact duality gap certifies the result in
        both modes.
    init_bias : float, default=0.0
        Node potential of every token's true state in the prox centre ``alpha_0`` (the
        smoothing's centre and the starting point, ``w_1 = w(alpha_0)``): 0 is the paper's
        uniform distribution; larger values centre the smoothing near the ground truth
        (``w = 0``). The prox function is then ``d(alpha) = KL(alpha || alpha_0)``, still
        1-strongly convex in the l1 norm, so both ``smoothing`` modes keep their guarantees
        (with ``D = max d``: ``prox_diameter_``). Whether it pays depends on the data (the
        user guide's "Choosing an estimator" page gives measurements).
    tol : float, default=1e-2
        Stop when the duality gap is at most ``tol`` times the primal objective.
    max_iter : int, default=1000
        Maximum number of iterations.
    kernel_memory_mb : float, default=1024
        Largest token kernel matrix (n_tokens^2 doubles) a non-linear kernel may form; a larger
        one raises a ValueError.
    n_jobs : int, default=None
        Threads for forward-backward and decoding.
    verbose : int, default=0
        Print one line per iteration (primal, dual, gap, time, oracle calls).
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
    classes_, structure_, w_, n_iter_, n_features_in_, feature_names_in_
        As in :class:`StructSVMCuttingPlane`; for a non-linear kernel the unary part of ``w_``
        is zero (the model's token scores are ``K(x, X_fit_) @ dual_coef_``).
    transition_, start_, end_, pairwise_, temperature_
        As in :class:`StructSVMCuttingPlane`.
    n_inexact_examples_, inexact_gap_bound_
        As in :class:`StructSVMCuttingPlane`.
    token_map_ : None
        Always None here (:class:`StructSVMCuttingPlane`'s kernel maps set it).
    coef_ : ndarray of shape (n_classes, n_features)
        Linear kernel only (for two classes in the multiclass form shape (1, n_features), as
        in :class:`StructSVMCuttingPlane`).
    intercept_ : ndarray of shape (n_classes,)
        Linear kernel only; as in :class:`StructSVMCuttingPlane`.
    dual_coef_ : ndarray of shape (n_fit_tokens, n_classes)
        Non-linear kernels: ``C s_i (onehot(y) - beta)`` per training token of sequence
        ``i``.
    X_fit_ : ndarray or sparse matrix
        Non-linear kernels: the training tokens.
    mu_init_ : float
        The ``mu_1`` of the first iteration (``history_["mu"]`` holds ``mu_k`` at every
        iteration): the paper's smoothing parameter, whose objective is ``history_``'s
        divided by ``n C`` (with sample weights ``(sum_i s_i) C``), so that
        ``history_["gap"]`` is at most ``(sum_i s_i) C mu_k`` times ``prox_diameter_``.
    prox_diameter_ : float
        ``D = max d(alpha)``: the mean over examples of ``log |Y_i|`` (of the log-partition
        of the prox centre's potentials with ``init_bias``), weighted by ``s_i``.
    n_mu_increases_ : int
        Steps redone by ``smoothing="adaptive"`` with a larger curvature estimate to keep
        condition (11).
    history_ : dict of ndarray
        Per iteration: ``primal``, ``dual``, ``gap``, ``time``, ``oracle_calls`` (single-example
        marginal or decoding calls), ``mu``, ``smoothed_primal`` (``n C J_mu(w_k)``, with
        sample weights ``(sum_i s_i) C J_mu(w_k)``; the excessive gap condition is
        ``smoothed_primal <= dual``) and ``drift`` (largest
        deviation of a token's marginals from summing to one before renormalisation).

    Notes
    -----
    Sample weights (``fit(..., sample_weight=s)``): example ``i``'s dual variables sum to
    ``C s_i``, and the prox function weighs its entropy by ``s_i``, so that its smoothed
    best responses and Bregman projections are those of an unweighted fit; the worst-case
    curvature is ``(sum_i s_i) C max_i ||psi_i||^2`` (see ``smoothing``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import M3NExcessiveGap
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> [p.tolist() for p in M3NExcessiveGap(C=10.0).fit(X, y).predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _trains_on_marginals = True

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "kernel": [StrOptions(_KERNELS), callable],
        "gamma": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "degree": [Interval(numbers.Integral, 1, None, closed="left")],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
        "smoothing": [StrOptions({"worst_case", "adaptive"})],
        "init_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "kernel_memory_mb": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, structure="auto", *, C=1.0, fit_intercept=True, kernel="linear",
                 gamma=None, degree=3, coef0=1.0, smoothing="adaptive", init_bias=0.0,
                 tol=1e-2, max_iter=1000,
                 kernel_memory_mb=1024, n_jobs=None, verbose=0, callback=None, max_time=None):
        self.structure = structure
        self.C = C
        self.fit_intercept = fit_intercept
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.smoothing = smoothing
        self.init_bias = init_bias
        self.tol = tol
        self.max_iter = max_iter
        self.kernel_memory_mb = kernel_memory_mb
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.max_time = max_time

    # ------------------------------------------------------------------ fitted model
    @property
    def _linear(self):
        """Whether the ``kernel`` parameter is linear (a fit's choice; a fitted model reads
        its own, :attr:`_fitted_linear`)."""
        return isinstance(self.kernel, str) and self.kernel == "linear"

    @property
    def _fitted_linear(self):
        return self._kernel_spec_["kernel"] == "linear"

    def _kernel_spec(self):
        """The kernel settings of a fit, kept with the fitted model (``_kernel_spec_``) so
        that ``set_params`` after fit changes nothing until the next fit."""
        return dict(kernel=self.kernel,
                    gamma=self.gamma if self.gamma is not None else 1.0 / self.n_features_in_,
                    degree=self.degree, coef0=self.coef0,
                    intercept=bool(self.fit_intercept) and not self._linear
                    and self.structure_.one_token_per_example)

    @property
    def coef_(self):
        """Per-class weights on token features (linear kernel only)."""
        check_is_fitted(self)
        if not self._fitted_linear:
            raise AttributeError("coef_ is only available with kernel='linear'.")
        return super().coef_

    def _linear_scores(self):
        return self._linear  # (asked at fit)

    @property
    def intercept_(self):
        """Per-class intercepts of the multiclass form (linear kernel only)."""
        check_is_fitted(self)
        if not self._fitted_linear:
            raise AttributeError("intercept_ is only available with kernel='linear'.")
        return super().intercept_

    def _kernel(self, A, B):
        spec = self._kernel_spec_
        K = token_kernel(A, B, spec["kernel"], spec["gamma"], spec["degree"], spec["coef0"])
        if spec["intercept"]:  # (a constant feature: see fit_intercept)
            K += 1.0
        return K

    def _potentials(self, batch):
        if self._fitted_linear:
            return super()._potentials(batch)
        scores = np.empty((batch.n_tokens, self.dual_coef_.shape[1]))
        step = max(1, int(2 ** 24 // max(self.X_fit_.shape[0], 1)))
        for lo in range(0, batch.n_tokens, step):
            scores[lo:lo + step] = self._kernel(batch.X[lo:lo + step], self.X_fit_) \
                @ self.dual_coef_
        return scores, self.structure_.split_weights(self.w_)[1]

    def _decode(self, batch):
        if self._fitted_linear:
            return super()._decode(batch)
        unary, pairwise = self._potentials(batch)
        check_potential_range(batch, unary, pairwise)
        return self.structure_.decode(batch, unary, pairwise, n_jobs=self.n_jobs)

    def _weight_norm_sq(self):
        return self._norm_sq_

    # ------------------------------------------------------------------ fit
    def _geometry(self, batch):
        if self._linear:
            return LinearGeometry(self.structure_, batch, self.n_jobs), None
        needed = batch.n_tokens ** 2 * 8 / 2 ** 20
        if needed > self.kernel_memory_mb:
            raise ValueError(
                f"The token kernel matrix would take {needed:.3g} MB for {batch.n_tokens} "
                f"tokens, above kernel_memory_mb={self.kernel_memory_mb}; raise the limit, "
                "use fewer tokens or a low-rank kernel map (StructSVMCuttingPlane).")
        K = self._kernel(batch.X, batch.X)
        return KernelGeometry(K), np.sqrt(np.maximum(np.diag(K), 0.0))

    def _fit_batch(self, batch, Y, sample_weight):
        batch, Y, weights = weighted_examples(batch, Y, sample_weight)
        self._kernel_spec_ = self._kernel_spec()
        geometry, token_norms = self._geometry(batch)
        if token_norms is None:
            token_norms = row_norms(batch.X)
        worst = worst_case_mu(self.structure_, batch, token_norms, float(self.C), weights)
        certificate = self._certificate(unit="iteration",
                                        extra_fields=("mu", "smoothed_primal", "drift"))
        run = ExcessiveGapRun(self.structure_, batch, Y, float(self.C), geometry,
                              certificate, self.n_jobs, float(self.init_bias), weights)
        certificate.current_attributes = lambda: dict(
            _norm_sq_=run.norm_sq,
            **({} if self._linear else dict(dual_coef_=run.rep[0].copy(), X_fit_=batch.X)))
        run.run(worst, adaptive=self.smoothing == "adaptive")
        self._record(certificate)
        self.mu_init_ = certificate.rows["mu"][0]
        self.prox_diameter_ = float(np.average(run.log_sizes, weights=weights))
        self.n_mu_increases_ = run.n_increases
        self._norm_sq_ = run.norm_sq
        if not self._linear:
            self.dual_coef_ = run.rep[0]
            self.X_fit_ = batch.X
        return run.w
