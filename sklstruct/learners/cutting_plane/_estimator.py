"""Cutting-plane training of structural SVMs (Joachims, Finley and Yu 2009)."""

import numbers

import numpy as np

from ..._input import encode_targets, weighted_examples
from ..._kernel_map import LowRankKernelMap
from ...base import BaseStructuredClassifier
from ...utils._sklearn_compat import Interval, StrOptions, _fit_context
from ._n_slack import fit_n_slack
from ._one_slack import fit_one_slack, solve_one_slack
from ._sharded import ShardedSequences, ShardOracle

# variant="auto": n-slack above this many training examples
AUTO_N_SLACK_ABOVE = 1000


class StructSVMCuttingPlane(BaseStructuredClassifier):
    """Structural SVM trained by cutting planes (Joachims, Finley and Yu, "Cutting-plane
    training of structural SVMs", Machine Learning 2009; Algorithms 1-4).

    Minimises the objective shared by all sklstruct learners::

        P(w) = 1/2 ||w||^2 + C * sum_i H_i(w)

    with ``H_i`` the structured hinge loss under margin rescaling
    ``max_y [Delta(y_i, y) + w.Psi(x_i, y)] - w.Psi(x_i, y_i)`` or slack rescaling
    ``max_y Delta(y_i, y) [1 + w.Psi(x_i, y) - w.Psi(x_i, y_i)]``. In the paper's notation
    (OP2/OP3 with ``C_J/n sum xi_i``, and their 1-slack forms OP4/OP5), ``C_J = n * C``.

    With ``variant="1-slack"``, each iteration calls the separation oracle
    (loss-augmented inference over the whole batch in compiled code), adds the most violated
    1-slack constraint to the working set, grows the Gram matrix of the working set by one row
    and column and re-solves the dual QP
    ``max_a sum_k a_k c_k - 1/2 ||sum_k a_k g_k||^2, a >= 0, sum_k a_k <= C`` warm-started
    from the previous solution.

    With ``variant="n-slack"``, every example keeps its own working set; a pass separates the
    examples in batches of ``batch_size`` (one compiled oracle call per batch), adds the
    constraint of every example violated beyond its slack, and re-optimises the batch's
    blocks of the dual by compiled block coordinate ascent.

    Both stop on the exact duality gap ``P(w) - D(a)`` (recorded in ``history_``): when it is
    at most ``tol * P(w)``. The paper's epsilon (the violation that makes a constraint worth
    adding, and the precision of the QP) follows from ``tol``: half the target gap spread over
    the examples. The last row of ``history_`` always certifies the returned weights.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        :class:`~sklstruct.MultiClass` for 2-D ``X`` with 1-D ``y``,
        :class:`~sklstruct.ChainStructure` for sequences.
    C : float, default=1.0
        Weight of the summed structured hinge losses (``LinearSVC`` convention).
    fit_intercept : bool, default=True
        For multiclass models (a plain 2-D ``X``, or ``structure=MultiClass()``), whether to
        learn per-class intercepts as :class:`~sklearn.svm.LinearSVC` does: a constant
        feature of value 1 is appended to every sample, so the intercepts are regularised
        like the other weights (``intercept_``). Chain and grid models ignore it (they have
        start, end and transition scores).
    variant : {"auto", "1-slack", "n-slack"}, default="auto"
        The 1-slack formulation (Algorithms 3 and 4) or the n-slack formulation (Algorithms 1
        and 2), whose QP is re-optimised after every ``batch_size`` examples (section 4) by
        block coordinate ascent with the weights kept explicitly. ``"auto"`` takes n-slack
        for more than 1,000 training examples (of positive weight) and 1-slack otherwise:
        1-slack's iterations each cost one oracle pass over all examples, n-slack's passes
        re-optimise as they go, which pays on many examples (the measurements are in the
        user guide's "Choosing an estimator" page).
    rescale : {"margin", "slack"}, default="margin"
        Margin rescaling (Algorithms 1 and 3) or slack rescaling (Algorithms 2 and 4).
    tol : float, default=1e-2
        Stop when the duality gap is at most ``tol`` times the primal objective.
    max_iter : int, default=10000
        Maximum number of iterations (1-slack: QP iterations, each with an oracle call over
        the batch or a label-cache answer; n-slack: passes over the data). 1-slack iterations
        are cheap and their number grows with ``C`` (the paper's O(C R^2 / epsilon) bound);
        n-slack usually stops within tens of passes.
    cache_size : int, default=10
        1-slack only: number of recent most-violating labelings kept per example. Before
        calling the separation oracle, the most violating cached labeling of every example is
        tried; if the resulting constraint's summed violation exceeds ``tol * P / (2 C)``
        (``P`` the primal at the current weights) and half the violation of the last oracle
        constraint, the oracle call is skipped (the paper's section 4). ``0`` disables the
        cache.
    batch_size : int, default=100
        n-slack only: number of examples separated before the QP is re-optimised.
    inactive_window : int, default=50
        A constraint whose dual variable stayed zero for this many QP sub-problems (1-slack:
        iterations; n-slack: batch re-optimisations) is removed from the working set (the
        paper's section 4). Removal never changes the weights, only the size of the QP.
    kernel : {"linear", "rbf", "poly"} or callable, default="linear"
        Kernel on token feature vectors. A non-linear kernel is used through a low-rank basis
        of ``n_basis`` tokens (the paper's section 3.3, OP8/OP9): every token is mapped to its
        kernel values with the basis, whitened by the basis kernel matrix, and the chain is
        trained linearly on that map: mapping the ``n`` training tokens costs ``O(n k^2)``
        once (and ``n k`` kernel evaluations), and the training works on ``k`` features.
    gamma : float, default=None
        Kernel coefficient of "rbf" and "poly" (``None``: ``1 / n_features``).
    degree : int, default=3
        Degree of the "poly" kernel.
    coef0 : float, default=1.0
        Independent term of the "poly" kernel.
    n_basis : int, default=1000
        Number of basis tokens drawn at random from the training tokens (those of
        sequences of weight 0 included: the basis is part of the model's set-up, as the
        structure's is).
    basis : array-like of shape (k, n_features), default=None
        User-given basis tokens (then ``n_basis`` is ignored).
    random_state : int, RandomState instance or None, default=None
        Draws the kernel basis and the order of the n-slack QP sweeps.
    n_jobs : int, default=None
        Threads for the separation oracle.
    verbose : int, default=0
        Print one line per check (iteration or pass, primal, dual, gap, time, oracle calls).
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
    classes_ : ndarray of shape (n_classes,)
    structure_ : structure
        The structure bound to the training data.
    w_ : ndarray of shape (n_parameters,)
        All weights; ``coef_`` (and ``transition_`` for chains) are views of parts of it.
    variant_ : {"1-slack", "n-slack"}
        The formulation used.
    dual_coef_ : ndarray of shape (n_constraints,)
        Dual variables of the final working set (1-slack: one per constraint; n-slack: one
        per constraint of the examples' working sets, in the order the constraints were
        added, over the examples of positive weight).
    n_iter_ : int
    history_ : dict of ndarray
        Per iteration (per pass over the data for n-slack): ``primal``, ``dual``, ``gap``,
        ``time`` (s), ``oracle_calls`` (separation-oracle calls on single examples so far, as
        counted in the paper's Table 1), ``n_constraints``. ``primal`` and ``gap`` are NaN in
        iterations served by the label cache, where the exact hinge losses are not computed;
        the last iteration always calls the oracle, so its gap is a certificate.
    coef_ : ndarray of shape (n_classes, n_features)
        Per-class weights on token features (for two classes in the multiclass form, as
        ``LinearSVC``: shape (1, n_features), class 1's minus class 0's).
    intercept_ : ndarray of shape (n_classes,)
        Multiclass form: per-class intercepts (``(1,)`` for two classes; zeros without
        ``fit_intercept``).
    transition_ : ndarray of shape (n_classes, n_classes)
        Chains: transition scores ``T[a, b]`` of label ``a`` followed by ``b``.
    start_, end_ : ndarray of shape (n_classes,)
        Chains with ``start_end=True``: scores of each label at the start and the end of a
        sequence.
    pairwise_ : ndarray of shape (n, n_classes, n_classes)
        Graph and multi-label models: one interaction matrix per edge feature (graphs) or
        per label pair (multi-label).
    temperature_ : float
        Temperature of :meth:`predict_proba` (1 after ``fit``; set by
        :meth:`calibrate_temperature`); :meth:`predict_marginals` gives the marginals at
        temperature 1 whatever its value.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit``, when ``X`` was a pandas DataFrame with
        string column names.
    token_map_ : LowRankKernelMap or None
        The fitted kernel feature map (``None`` for the linear kernel); ``coef_`` then holds
        weights on its ``k`` basis features.
    n_inexact_examples_ : int
        Training examples on which the structure's max-oracle may be approximate (graphs
        with cycles beyond enumeration, decoded by TRW-S; the fit then warns that the gap of
        ``history_`` certifies nothing); 0 otherwise.
    inexact_gap_bound_ : float or None
        Set when ``n_inexact_examples_ > 0``: a true, looser certificate, an upper bound on
        the primal objective from the oracle's bounds (TRW-S's dual) minus the last dual
        value; None when the structure gives no such bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import StructSVMCuttingPlane
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    >>> [p.tolist() for p in model.predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _takes_oracle_losses = True

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "variant": [StrOptions({"auto", "1-slack", "n-slack"})],
        "rescale": [StrOptions({"margin", "slack"})],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "cache_size": [Interval(numbers.Integral, 0, None, closed="left")],
        "kernel": [StrOptions({"linear", "rbf", "poly"}), callable],
        "gamma": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "degree": [Interval(numbers.Integral, 1, None, closed="left")],
        "coef0": [numbers.Real],
        "n_basis": [Interval(numbers.Integral, 1, None, closed="left")],
        "basis": ["array-like", None],
        "random_state": ["random_state"],
        "inactive_window": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(self, structure="auto", *, C=1.0, fit_intercept=True, variant="auto",
                 rescale="margin", tol=1e-2, max_iter=10000, cache_size=10, batch_size=100,
                 inactive_window=50, kernel="linear", gamma=None, degree=3, coef0=1.0,
                 n_basis=1000, basis=None, random_state=None, n_jobs=None, verbose=0,
                 callback=None, max_time=None):
        self.structure = structure
        self.C = C
        self.fit_intercept = fit_intercept
        self.variant = variant
        self.rescale = rescale
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.batch_size = batch_size
        self.inactive_window = inactive_window
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_basis = n_basis
        self.basis = basis
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.max_time = max_time

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, lengths=None, sample_weight=None, sequence_ids=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass).
            Or a :class:`~sklstruct.distributed.ShardedSequences`: training data in shards on
            a dask cluster, fitted by the 1-slack variant with the shards' map-reduce as its
            separation oracle (``variant="auto"`` then means "1-slack"); the shards hold the
            labels, lengths and weights.
        y : list of array-like, or array-like of shape (n_tokens,), default=None
            The labels (required unless ``X`` is a ``ShardedSequences``).
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
            Per-sequence weights ``s_i``: the objective becomes
            ``1/2 ||w||^2 + C sum_i s_i H_i(w)`` (an integer weight equals repeating the
            sequence); sequences of weight 0 take no part in the optimisation (a kernel's
            basis is still drawn from all tokens, see ``n_basis``). One weight per token
            (per row of a flat ``X``, so that cross-validation can index them as it indexes
            ``sequence_ids``) is taken when the tokens of each sequence share it;
            :meth:`score` takes either form.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them); unlike ``lengths`` they pass through cross-validation.

        Returns
        -------
        self : object
        """
        return self._fit(X, y, lengths, sample_weight, sequence_ids)

    def _fit_staged(self, X, *args):
        if isinstance(X, ShardedSequences):
            self._fit_shards(X, *args)
        else:
            super()._fit_staged(X, *args)

    def _fit_shards(self, shards, *others):
        """The 1-slack fit on sharded data: the shards' labels, widths and weights validated
        and the structure bound as a local fit does, then the 1-slack solver on their
        map-reduce oracle. ``others`` (``y``, ``lengths``, ...) must be ``None``: the shards
        hold them."""
        if any(value is not None for value in others):
            raise ValueError("With X a ShardedSequences, the labels, lengths and sample "
                             "weights are in the shards: pass no y, lengths or sample_weight.")
        if self.kernel != "linear":
            raise ValueError("A ShardedSequences is fitted with the linear kernel only.")
        if self.variant == "n-slack":
            raise ValueError("A ShardedSequences is fitted by the 1-slack variant only: "
                             "variant='n-slack' keeps the token rows of its constraints in "
                             "the client.")
        summaries = shards.summaries()
        widths = {width for width, _, _, _ in summaries}
        if len(widths) > 1:
            raise ValueError(f"The shards have different numbers of features: "
                             f"{sorted(widths)}.")
        # the labels and weights are validated as a local fit validates them
        classes, _ = encode_targets(np.concatenate([np.asarray(labels, dtype=object)
                                                    for _, labels, _, _ in summaries]))
        if not sum(total for _, _, _, total in summaries) > 0:
            raise ValueError("sample_weight must not be all zero.")
        counts = np.zeros(classes.shape[0], dtype=np.int64)
        for _, labels, shard_counts, _ in summaries:
            counts[np.searchsorted(classes, labels)] += shard_counts
        self.n_features_in_ = widths.pop()
        self.token_map_ = None
        self._with_intercept = False
        self._spatial_form_ = None  # (shards hold sequences: images are refused at predict)
        # labels with the shards' counts (what class_weight="balanced" reads)
        self._bind_structure("list", self.n_features_in_, classes,
                             np.repeat(np.arange(classes.shape[0]), counts))
        if self.structure_.one_token_per_example and self.fit_intercept:
            raise ValueError("A ShardedSequences holds no intercept feature: fit a MultiClass "
                             "model on shards with fit_intercept=False (or a constant feature "
                             "in the shards).")
        self.variant_ = "1-slack"
        self._warn_unused_parameters(["batch_size"], "a ShardedSequences, fitted by 1-slack")
        # (shards hold sequences or rows, never graphs: their max-oracles are exact)
        self.n_inexact_examples_ = 0
        certificate = self._certificate(unit="iteration", extra_fields=("n_constraints",))
        oracle = ShardOracle(shards, self.structure_, classes, rescale=self.rescale,
                             cache_size=self.cache_size, n_jobs=self.n_jobs)
        self.w_, self.dual_coef_ = solve_one_slack(
            self.structure_, oracle, C=float(self.C), inactive_window=self.inactive_window,
            certificate=certificate)
        self._record(certificate)
        self.temperature_ = 1.0

    def _fit_token_map(self, X):
        if self.kernel == "linear":
            self.token_map_ = None
        else:
            self.token_map_ = LowRankKernelMap(
                self.kernel, self.gamma, self.degree, self.coef0, self.n_basis, self.basis,
                self.random_state,
            ).fit(X)

    def _fit_batch(self, batch, Y, sample_weight):
        if self.variant == "1-slack":
            self._warn_unused_parameters(["batch_size"], "variant='1-slack'")
        elif self.variant == "n-slack":
            self._warn_unused_parameters(["cache_size"], "variant='n-slack'")
        batch, Y, weights = weighted_examples(batch, Y, sample_weight)
        # (the solvers take the weights as an array: ones when every weight is 1)
        sample_weight = np.ones(batch.n_sequences) if weights is None else weights
        self.variant_ = self.variant if self.variant != "auto" else (
            "n-slack" if batch.n_sequences > AUTO_N_SLACK_ABOVE else "1-slack")
        common = dict(C=float(self.C), rescale=self.rescale,
                      inactive_window=self.inactive_window, n_jobs=self.n_jobs)
        if self.variant_ == "n-slack":
            certificate = self._certificate(extra_fields=("n_constraints",))
            w, self.dual_coef_ = fit_n_slack(
                self.structure_, batch, Y, sample_weight, batch_size=self.batch_size,
                random_state=self.random_state, certificate=certificate, **common)
        else:
            certificate = self._certificate(unit="iteration", extra_fields=("n_constraints",))
            w, self.dual_coef_ = fit_one_slack(
                self.structure_, batch, Y, sample_weight, cache_size=self.cache_size,
                certificate=certificate, **common)
        self._record(certificate)
        return w
