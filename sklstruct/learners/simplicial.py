"""Restricted simplicial decomposition on the reparametrized dual (Yu and Rousu, seed 003)."""

import hashlib
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..base import BaseStructuredClassifier
from ..structures import ChainStructure, MultiClass
from ..utils._sklearn_compat import Interval, StrOptions, _fit_context
from ._frank_wolfe import BlockFrankWolfeState, MultiPointFrankWolfeState
from ._history import History
from ._rsd import SimplicialDecompositionState


def _fingerprint(batch, Y, structure):
    """Digest of the training data and the bound structure (a warm start needs both equal)."""
    digest = hashlib.blake2b(digest_size=16)
    X = batch.X
    arrays = (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)
    for array in arrays + (batch.offsets, Y):
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update(repr(sorted(structure.get_params().items())).encode())
    digest.update(repr(structure.loss_weights_.tolist()).encode())
    return digest.hexdigest()


class M3NSimplicialDecomposition(BaseStructuredClassifier):
    """Max-margin Markov network trained by restricted simplicial decomposition (seed 003).

    Minimises the objective shared by all sklstruct learners (DESIGN section 1)::

        P(w) = 1/2 ||w||^2 + C * sum_i H_i(w)

    through the seed's reduced dual (7) (section 3.1): the dual variables of example ``i`` enter
    only through ``b_i = C E_{a_i}[Psi(x_i, y_i) - Psi(x_i, y)]`` and
    ``gamma_i = C E_{a_i}[Delta(y_i, y)]``, and

        D = sum_i gamma_i - 1/2 ||w||^2,   w = sum_i b_i,

    over the product of the sets of feasible ``(b_i, gamma_i)``. Each iteration finds, for the
    examples of a working set, the extreme point of largest dual gradient by loss-augmented
    decoding at the current ``w`` (eq. (9)), then solves the master problem: the dual over the
    convex hull of at most ``max_points`` extreme points plus one retained iterate per block
    (restricted simplicial decomposition, section 2.1; when a block is full its lowest-weight
    point is dropped and the current iterate is kept instead, the seed's footnote 1). The
    master QP is solved by the suite's SMO solver. The parameter ``C`` is the seed's ``C``.

    With ``blocks="per_example"`` and ``working_set_size=1``, chains and multiclass data (margin
    rescaling, ``max_points <= 63``) run in a compiled pass over per-example sufficient
    statistics: per visit one loss-augmented Viterbi, a master QP over the example's anchor and
    kept labellings (its Gram matrix from the example's token Gram matrix), and an update of
    only the example's weights, so a pass costs about one oracle pass plus small QPs.
    ``max_points=1`` is then block-coordinate Frank-Wolfe with exact line search (its own
    compiled pass).

    ``rescale="slack"`` is the seed's slack-rescaling variant I (section 4.2, problem (17)-(21)):
    the extreme points are ``C Delta(ybar) (Psi(y_i) - Psi(ybar))`` with
    ``gamma = C Delta(ybar)``, found by slack-rescaled loss-augmented decoding.

    With a structure that constrains weights to be non-negative (``GridStructure``'s edge
    weights, section 4.1, problem (10)) the dual has ``-1/2 ||[v_C]_+||^2`` on those coordinates
    (problem (15)) and ``w_C = [v_C]_+``; loss-augmented decoding is then a minimum cut.

    The fit stops when the duality gap ``P(w) - D`` is at most ``tol * P(w)``. The gap is the
    sum of the examples' Frank-Wolfe gaps at the same ``w``: with one block over all the data
    (``blocks="single"``, ``working_set_size=None``) it is read off each iteration's direction
    finding; otherwise it is computed every ``check_every`` passes with one loss-augmented
    decoding of the training set.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        Any structure with ``loss_augmented_decode`` and ``pairwise_statistics``.
    C : float, default=1.0
    max_points : int, default=5
        The dimension limit ``r`` of RSD: extreme points kept per block. 1 is (block-
        coordinate) Frank-Wolfe; 5 reaches a given duality gap in fewer passes and less time
        than 1 on OCR letters and CoNLL-2000 (``benchmarks/bench_simplicial.py``).
    blocks : {"per_example", "single"}, default="per_example"
        "per_example": one simplex per example (a product of simplexes in the master
        problem); "single": one simplex per working set, in ``z = (sum_i b_i, sum_i gamma_i)``
        (the seed's section 3.2 (i) when the working set is all the data).
    working_set_size : int, default=None
        Examples whose direction finding and master problem are solved together. ``None``:
        for ``blocks="per_example"`` 1 where the compiled pass applies, else 16; all examples
        for ``"single"``. With ``blocks="single"`` the working sets are a fixed partition of
        the examples.
    rescale : {"margin", "slack"}, default="margin"
    tol : float, default=1e-3
        Relative duality gap at which the fit stops.
    max_iter : int, default=1000
        Maximum number of passes over the data.
    check_every : int, default=1
        Passes between two certificates.
    warm_start : bool, default=False
        Continue from the dual of the previous fit when the training data (compared by a
        digest), the structure, ``C`` and the solver settings are the same; otherwise start
        afresh.
    random_state : int, RandomState instance or None, default=None
        Order of the examples in every pass (and the partition for ``blocks="single"``).
    n_jobs : int, default=None
        Threads for the batched decoding.
    verbose : int, default=0

    Attributes
    ----------
    classes_, structure_, w_, coef_, n_iter_, n_features_in_
        As in :class:`StructSVMCuttingPlane`; ``n_iter_`` counts passes.
    history_ : dict of ndarray
        Per certificate: ``primal``, ``dual``, ``gap``, ``time``, ``oracle_calls`` (decodings
        of single examples, certificates included), ``passes`` and ``fw_gap`` (the summed
        block Frank-Wolfe gaps found by the direction finding of the last pass, each at the
        ``w`` of its visit).

    Notes
    -----
    Memory: the compiled passes keep node marginals (n_tokens x n_states), pairwise statistics
    (n_sequences x n_pairwise) and the weights; with ``max_points > 1`` also an anchor of the
    same size and ``max_points`` labels per token. The general solver keeps the points of a
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
        "check_every": [Interval(numbers.Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(self, structure="auto", *, C=1.0, max_points=5, blocks="per_example",
                 working_set_size=None, rescale="margin", tol=1e-3, max_iter=1000,
                 check_every=1, warm_start=False, random_state=None, n_jobs=None, verbose=0):
        self.structure = structure
        self.C = C
        self.max_points = max_points
        self.blocks = blocks
        self.working_set_size = working_set_size
        self.rescale = rescale
        self.tol = tol
        self.max_iter = max_iter
        self.check_every = check_every
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, lengths=None):
        """Fit the model (same input forms as :class:`StructSVMCuttingPlane`)."""
        return self._fit(X, y, lengths)

    def __getstate__(self):
        # the dual state (which holds the training data) is kept for warm starts in this
        # process only; a pickled model is the fitted weights
        state = dict(super().__getstate__())
        state.pop("_rsd_state", None)
        return state

    # ------------------------------------------------------------------ set-up
    def _compiled_structure(self):
        """Whether the compiled per-example passes apply to this structure and rescaling."""
        structure = self.structure_
        return (self.rescale == "margin" and self.max_points <= 63
                and isinstance(structure, (ChainStructure, MultiClass))
                and getattr(structure, "nonnegative_", np.zeros(0)).size == 0)

    def _resolved_working_set(self, n_sequences):
        if self.working_set_size is not None:
            return min(int(self.working_set_size), n_sequences)
        if self.blocks == "single":
            return n_sequences
        return 1 if self._compiled_structure() else min(16, n_sequences)

    def _uses_compiled_pass(self, working_set):
        return self.blocks == "per_example" and working_set == 1 and self._compiled_structure()

    def _previous_state(self, signature):
        if not self.warm_start:
            return None
        previous = getattr(self, "_rsd_state", None)
        if previous is None or previous[0] != signature:
            return None
        return previous[1]

    def _fit_batch(self, batch, Y, sample_weight):
        # fit takes no sample_weight, so every sequence weighs 1 here
        rng = check_random_state(self.random_state)
        working_set = self._resolved_working_set(batch.n_sequences)
        compiled = self._uses_compiled_pass(working_set)
        signature = (compiled, float(self.C), self.max_points, self.blocks, working_set,
                     self.rescale, _fingerprint(batch, Y, self.structure_))
        state = self._previous_state(signature)
        if state is None:
            if compiled and self.max_points == 1:
                state = BlockFrankWolfeState(self.structure_, batch, Y, self.C)
            elif compiled:
                state = MultiPointFrankWolfeState(self.structure_, batch, Y, self.C,
                                                  self.max_points)
            else:
                state = SimplicialDecompositionState(
                    self.structure_, batch, Y, self.C, rescale=self.rescale,
                    max_points=self.max_points, blocks=self.blocks,
                    working_set_size=working_set, random_state=rng)
        elif not compiled:
            state.rng = rng
        history = History(extra_fields=("passes", "fw_gap"))
        run = self._run_compiled if compiled else self._run_general
        w, converged = run(state, batch, Y, rng, history)
        if not converged:
            warnings.warn(f"M3NSimplicialDecomposition did not reach a relative duality gap of "
                          f"{self.tol} in {self.max_iter} passes.", ConvergenceWarning)
        self._rsd_state = (signature, state)
        self.history_ = history.as_dict()
        return w

    def _record(self, history, batch, Y, w, dual, passes, calls, fw_gap, primal=None):
        """Append a certificate at ``w``; return whether the gap is small enough."""
        if primal is None:
            hinge = self._structured_hinge(batch, Y, w, self.rescale)
            primal = 0.5 * float(w @ w) + float(self.C) * float(hinge.sum())
            calls += batch.n_sequences
        history.append(primal=primal, dual=dual, gap=primal - dual, oracle_calls=calls,
                       passes=passes, fw_gap=fw_gap)
        if self.verbose:
            print(f"[M3NSimplicialDecomposition] pass {passes:4d} primal {primal:.6g} "
                  f"dual {dual:.6g} gap {primal - dual:.3g}")
        return primal - dual <= self.tol * abs(primal), calls

    # ------------------------------------------------------------------ solvers
    def _run_compiled(self, state, batch, Y, rng, history):
        w, dual = state.certificate()
        calls, passes = 0, 0
        converged, calls = self._record(history, batch, Y, w, dual, 0, calls, np.nan)
        while not converged and passes < self.max_iter:
            fw_gap = state.run_pass(rng.permutation(batch.n_sequences))
            calls += batch.n_sequences
            passes += 1
            if passes % self.check_every == 0 or passes == self.max_iter:
                w, dual = state.certificate()
                converged, calls = self._record(history, batch, Y, w, dual, passes, calls,
                                                fw_gap)
        self.n_iter_ = passes
        return w, converged

    def _run_general(self, state, batch, Y, rng, history):
        # one block over all the data: each iteration's direction finding is a certificate
        free_certificate = state.n_blocks == 1
        calls, passes = 0, 0
        converged = False
        if not free_certificate:
            converged, calls = self._record(history, batch, Y, state.w.copy(), state.dual(), 0,
                                            calls, np.nan)
        while not converged and passes < self.max_iter:
            w_before, dual_before = state.w.copy(), state.dual()
            n_calls, fw_gap = state.run_pass(n_jobs=self.n_jobs)
            calls += n_calls
            if free_certificate:  # certifies the iterate the direction finding was done at
                converged, calls = self._record(history, batch, Y, None, dual_before, passes,
                                                calls, fw_gap, primal=dual_before + fw_gap)
                if converged:
                    self.n_iter_ = passes
                    return w_before, True
            passes += 1
            if not free_certificate and (passes % self.check_every == 0
                                         or passes == self.max_iter):
                converged, calls = self._record(history, batch, Y, state.w.copy(),
                                                state.dual(), passes, calls, fw_gap)
        if free_certificate:  # the last row certifies the weights returned
            converged, calls = self._record(history, batch, Y, state.w.copy(), state.dual(),
                                            passes, calls, np.nan)
        self.n_iter_ = passes
        return state.w.copy(), converged
