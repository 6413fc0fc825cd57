"""Restricted simplicial decomposition on the reparametrized dual (Yu and Rousu 2007)."""

import numbers

from sklearn.utils import check_random_state

from ..._input import weighted_examples, weights_digest
from ...base import BaseStructuredClassifier
from ...utils._sklearn_compat import Interval, StrOptions
from ._solver import (compiled_kernels, initial_state, resolved_working_set, solve_compiled,
                      solve_general)

class M3NSimplicialDecomposition(BaseStructuredClassifier):
    """Max-margin Markov network trained by restricted simplicial decomposition (Yu and Rousu,
    "An efficient method for large margin parameter optimization in structured prediction
    problems", 2007).

    Minimises the objective shared by all sklstruct learners::

        P(w) = 1/2 ||w||^2 + C * sum_i s_i H_i(w)

    (``s_i`` the sample weights of :meth:`fit`, 1 unless given) through the paper's reduced
    dual (7) (section 3.1): the dual variables of example ``i`` enter only through
    ``b_i = C s_i E_{a_i}[Psi(x_i, y_i) - Psi(x_i, y)]`` and
    ``gamma_i = C s_i E_{a_i}[Delta(y_i, y)]``, and

        D = sum_i gamma_i - 1/2 ||w||^2,   w = sum_i b_i,

    over the product of the sets of feasible ``(b_i, gamma_i)``. Each iteration finds, for the
    examples of a working set, the extreme point of largest dual gradient by loss-augmented
    decoding at the current ``w`` (eq. (9)), then solves the master problem: the dual over the
    convex hull of at most ``max_points`` extreme points plus one retained iterate per block
    (restricted simplicial decomposition, section 2.1; when a block is full its lowest-weight
    point is dropped and the current iterate is kept instead, the paper's footnote 1). The
    master QP is solved by the suite's SMO solver (the compiled per-example passes: exactly,
    by an active-set method, SMO finishing where it gives up). The parameter ``C`` is the
    paper's ``C``.

    With ``blocks="per_example"`` and ``working_set_size=1``, every structure with compiled
    per-example kernels (chains, multiclass, grids; margin rescaling, ``max_points <= 63``)
    runs in a compiled pass over per-example sufficient statistics: per visit one call of the
    structure's compiled max-oracle (Viterbi, minimum cut), a master QP over the example's
    anchor and kept labellings, and an update of only the example's weights, so a pass costs
    about one oracle pass plus small QPs. ``max_points=1`` is then block-coordinate
    Frank-Wolfe with exact line search (where the examples have on average 2,048 or more
    stored feature entries times states and no weight is constrained, as on text, through
    the multi-point visits with one point, which take the same steps without per-token
    marginals and cost less there). A visit's step can take any labelling (it only
    ascends): on chains of 32 states or more the visits decode in single precision, which
    returns the most violating labelling or one within the rounding of float sums of it;
    the certificates decode in double precision, so the certified gap is exact.

    These compiled passes shrink (``shrinking=True``): a pass starts from a certificate that
    also gives every example's Frank-Wolfe gap at the same ``w`` (the gaps sum to the duality
    gap), then sweeps, each in a fresh random order, over the examples whose gap exceeds 3%
    of their share ``tol * P(w) / n_samples`` of the target gap; a sweep drops the examples
    whose gap at their visit fell to that threshold, and the sweeps end when the remaining
    examples' gaps sum to 30% of the certified gap, after ``10 * n_samples`` visits, or,
    after ``n_samples`` visits, once every example's gap at its last visit (or at the
    certificate) sums to the target ``tol * P(w)``, so that the next certificate comes
    where the fit may have converged.
    Per-example dual ascent can need thousands of sweeps when ``C max ||x||^2`` is large
    (about 5,600 passes on the digits data set, pixel values 0..16, at ``C=1``), while most
    examples then have no gap (about 300 of its 1,797 have one): the sweeps skip them, as the
    shrinking of dual coordinate descent in LIBLINEAR does (Hsieh et al. 2008; Keerthi et
    al. 2008) and as gap-based block selection does for block-coordinate Frank-Wolfe
    (Osokin et al. 2016). On digits the fit certifies in about 500 passes' worth of visits
    where the full passes do not within ``max_iter=1000`` (they certify after about 5,500);
    on OCR letters and CoNLL-2000, where most examples keep a gap, it takes a few passes'
    worth fewer than the full passes (``benchmarks/bench_defaults.py``: 5-7% less time).

    ``rescale="slack"`` is the paper's slack-rescaling variant I (section 4.2, problem (17)-(21)):
    the extreme points are ``C s_i Delta(ybar) (Psi(y_i) - Psi(ybar))`` with
    ``gamma = C s_i Delta(ybar)``, found by slack-rescaled loss-augmented decoding.

    With a structure that constrains weights to be non-negative (``GridStructure``'s edge
    weights, section 4.1, problem (10)) the dual has ``-1/2 ||[v_C]_+||^2`` on those coordinates
    (problem (15)) and ``w_C = [v_C]_+``; loss-augmented decoding is then a minimum cut.

    The fit stops when the duality gap ``P(w) - D`` is at most ``tol * P(w)``. The gap is the
    sum of the examples' Frank-Wolfe gaps at the same ``w``: with one block over all the data
    (``blocks="single"``, ``working_set_size=None``) it is read off each iteration's direction
    finding; with shrinking it is computed at the start of every pass; otherwise at the
    passes ``check_every`` chooses; each time with one loss-augmented decoding of the
    training set.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        Any structure with ``loss_augmented_decode`` and ``pairwise_statistics``.
    C : float, default=1.0
        Weight of the summed structured hinge losses.
    fit_intercept : bool, default=True
        For multiclass models (a plain 2-D ``X``, or ``structure=MultiClass()``), whether to
        learn per-class intercepts as :class:`~sklearn.svm.LinearSVC` does: a constant
        feature of value 1 is appended to every sample, so the intercepts are regularised
        like the other weights (``intercept_``). Chain and grid models ignore it (they have
        start, end and transition scores).
    max_points : int, default=10
        The dimension limit ``r`` of RSD: extreme points kept per block. 1 is (block-
        coordinate) Frank-Wolfe. More points make each pass cost more (a larger master
        problem per block) and reach a given duality gap in fewer passes;
        ``benchmarks/bench_simplicial.py`` measures the trade-off on OCR and CoNLL-2000.
    blocks : {"per_example", "single"}, default="per_example"
        "per_example": one simplex per example (a product of simplexes in the master
        problem); "single": one simplex per working set, in ``z = (sum_i b_i, sum_i gamma_i)``
        (the paper's section 3.2 (i) when the working set is all the data). One simplex over
        all the data with room for every point is the 1-slack cutting plane's dual
        (``StructSVMCuttingPlane(variant="1-slack")``) and progresses as it does: on the
        digits data set (``C=1``) both have a dual of 0.80 and a relative gap of 0.93 after
        300 iterations (``max_points=300``), and the 1-slack fit certifies ``tol=1e-2``
        after about 1,400 iterations, where the per-example passes take about 500.
    working_set_size : int, default=None
        Examples whose direction finding and master problem are solved together. ``None``:
        for ``blocks="per_example"`` 1 where the compiled pass applies, else 16; all examples
        for ``"single"``. With ``blocks="single"`` the working sets are a fixed partition of
        the examples.
    rescale : {"margin", "slack"}, default="margin"
        Margin rescaling or the paper's slack-rescaling variant I.
    shrinking : bool, default=True
        Whether the compiled per-example passes visit only the examples whose gap exceeds a
        threshold (see above); ``False`` visits every example in every pass. The other paths
        (``blocks="single"``, working sets, slack rescaling) ignore it.
    tol : float, default=1e-2
        Relative duality gap at which the fit stops.
    max_iter : int, default=1000
        Maximum number of passes over the data (with shrinking: of visits, in units of
        ``n_samples``).
    check_every : int, default=None
        Passes between two certificates (each costs about one loss-augmented decoding of the
        training set). ``None``: automatic, see :class:`~sklstruct._progress.CheckSchedule`.
        With shrinking every pass starts with a certificate, and ``check_every`` is ignored.
    warm_start : bool, default=False
        Keep this fit's dual state, and continue from that of the previous fit (made with
        ``warm_start=True`` too) when the training data (compared by a digest), the sample
        weights, the structure, ``C`` and the solver settings are the same; otherwise start
        afresh. The dual state is kept in memory only: it is not pickled.
    random_state : int, RandomState instance or None, default=None
        Order of the examples in every pass (and the partition for ``blocks="single"``).
    n_jobs : int, default=None
        Threads for the batched decoding, for the compiled passes' certificates (every
        example's oracle call at fixed weights), for the passes of the uncached mode (two
        stages, on at most two threads; see the user guide's Parallelism page) and for
        ``predict``. The weights are the same bits on any number of threads.
    verbose : int, default=0
        Print one line per certificate (pass, primal, dual, gap, time, oracle calls).
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
        As in :class:`StructSVMCuttingPlane`; ``n_iter_`` counts passes (with shrinking: the
        sweeps' visits divided by ``n_samples``, rounded up).
    transition_, start_, end_, pairwise_, temperature_
        As in :class:`StructSVMCuttingPlane`.
    n_inexact_examples_, inexact_gap_bound_
        As in :class:`StructSVMCuttingPlane`.
    token_map_ : None
        Always None here (:class:`StructSVMCuttingPlane`'s kernel maps set it).
    history_ : dict of ndarray
        Per certificate: ``primal``, ``dual``, ``gap``, ``time``, ``oracle_calls`` (decodings
        of single examples, certificates included), ``passes`` and ``fw_gap`` (the summed
        block Frank-Wolfe gaps found by the direction finding of the last pass, each at the
        ``w`` of its visit; with shrinking, every example's gap at its last visit or, if the
        pass did not visit it, at the pass's first certificate).

    Notes
    -----
    Sample weights (``fit(..., sample_weight=s)``): in the dual, example ``i``'s
    variables sum to ``C s_i``. The structure's set-up from the training labels
    (``class_weight="balanced"``, a multi-label Chow-Liu tree) reads all sequences
    unweighted, as scikit-learn's ``class_weight="balanced"`` ignores the weights.

    Memory: with ``max_points > 1`` (and with ``max_points=1`` where a pairwise table per
    example would take more than 256 MB and four times the per-token arrays, as with many
    labels on short sequences) the compiled pass keeps, besides the weights, each
    example's anchor as its non-zero node and pairwise entries (12 bytes each; an anchor mixes
    the few labellings its master used), ``max_points`` labels per token (int16), the
    masters' Gram terms (``max_points (max_points + 1) / 2`` doubles per sequence) and the
    upper triangles of token Gram matrices up to 64 MB (as bytes or in single precision when
    exact); about 0.3 KB per token above the data at 1M tokens
    with 20 states (``benchmarks/bench_scaling.py``). Otherwise with ``max_points=1`` it keeps node
    marginals (n_tokens x n_states), pairwise statistics (n_sequences x n_pairwise) and the
    loss matrix (n_tokens x n_states). The general solver keeps the points of a
    block as dense vectors in weight space when all of them fit in 256 MB
    (``n_blocks x (max_points + 1) x n_weights`` doubles), else per token: an anchor
    (n_tokens x n_states) and ``max_points`` labellings with their losses and pairwise
    statistics (``max_points x n_sequences x n_pairwise`` doubles), rebuilt into sparse rows
    for each working set.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import M3NSimplicialDecomposition
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> model = M3NSimplicialDecomposition(C=10.0, random_state=0).fit(X, y)
    >>> [p.tolist() for p in model.predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _keeps_nonnegative_weights = True

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "max_points": [Interval(numbers.Integral, 1, None, closed="left")],
        "blocks": [StrOptions({"per_example", "single"})],
        "working_set_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "rescale": [StrOptions({"margin", "slack"})],
        "shrinking": ["boolean"],
        "check_every": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, structure="auto", *, C=1.0, fit_intercept=True, max_points=10,
                 blocks="per_example", working_set_size=None, rescale="margin", shrinking=True,
                 tol=1e-2, max_iter=1000, check_every=None, warm_start=False,
                 random_state=None, n_jobs=None, verbose=0, callback=None, max_time=None):
        self.structure = structure
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_points = max_points
        self.blocks = blocks
        self.working_set_size = working_set_size
        self.rescale = rescale
        self.shrinking = shrinking
        self.tol = tol
        self.max_iter = max_iter
        self.check_every = check_every
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.max_time = max_time

    # ------------------------------------------------------------------ fit
    def _fit_batch(self, batch, Y, sample_weight):
        rng = check_random_state(self.random_state)
        batch, Y, weights = weighted_examples(batch, Y, sample_weight)
        has_kernels = compiled_kernels(self.structure_, batch, self.rescale,
                                       self.max_points) is not None
        working_set = resolved_working_set(self.working_set_size, self.blocks,
                                           batch.n_sequences, has_kernels)
        compiled = has_kernels and self.blocks == "per_example" and working_set == 1
        settings = (compiled, float(self.C), self.max_points, self.blocks, working_set,
                    self.rescale,
                    weights_digest(weights))
        state = self._warm_state(settings, batch, Y)
        if state is None:
            state = initial_state(self.structure_, batch, Y, C=self.C, compiled=compiled,
                                  max_points=self.max_points, blocks=self.blocks,
                                  working_set=working_set, rescale=self.rescale, rng=rng,
                                  sample_weight=weights)
        elif compiled:  # the previous fit's w_ is the state's weight array: keep it as is
            state.detach_weights()
        else:
            state.rng = rng
        certificate = self._certificate(extra_fields=("passes", "fw_gap"))
        if compiled:
            w = solve_compiled(state, self.structure_, batch, Y, C=float(self.C),
                               shrinking=self.shrinking, check_every=self.check_every,
                               rng=rng, n_jobs=self.n_jobs, certificate=certificate,
                               sample_weight=weights)
        else:
            w = solve_general(state, self.structure_, batch, Y, C=float(self.C),
                              rescale=self.rescale, check_every=self.check_every,
                              n_jobs=self.n_jobs, certificate=certificate,
                              sample_weight=weights)
        self._record(certificate)
        self._keep_warm_state(settings, batch, Y, state)
        return w
