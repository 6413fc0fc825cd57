"""Cutting-plane training of structural SVMs (Joachims, Finley and Yu; seed 002)."""

import numbers
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..base import BaseStructuredClassifier
from ..utils._sklearn_compat import Interval, StrOptions, _fit_context
from ._history import History
from ._qp import solve_capped_simplex_qp
from ._working_set import WorkingSet


class StructSVMCuttingPlane(BaseStructuredClassifier):
    """Structural SVM trained by the 1-slack cutting-plane algorithm (seed 002, Algorithm 3/4).

    Minimises the objective shared by all sklstruct learners (DESIGN section 1)::

        P(w) = 1/2 ||w||^2 + C * sum_i H_i(w)

    with ``H_i`` the structured hinge loss under margin rescaling
    ``max_y [Delta(y_i, y) + w.Psi(x_i, y)] - w.Psi(x_i, y_i)`` or slack rescaling
    ``max_y Delta(y_i, y) [1 + w.Psi(x_i, y) - w.Psi(x_i, y_i)]``. In the paper's notation
    (OP4/OP5 with ``C_J/n sum xi``), ``C_J = n * C``.

    Each iteration calls the separation oracle (loss-augmented inference over the whole batch in
    compiled code), adds the most violated 1-slack constraint to the working set, grows the
    Gram matrix of the working set by one row and column and re-solves the dual QP
    ``max_a sum_k a_k c_k - 1/2 ||sum_k a_k g_k||^2, a >= 0, sum_k a_k <= C`` warm-started
    from the previous solution. It stops when the new constraint is violated by at most
    ``tol`` per example beyond the current slack (the paper's epsilon), which guarantees
    ``P(w) - min P <= C * n * tol``; the exact duality gap ``P(w) - D(a)`` is recorded too.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        :class:`~sklstruct.structures.MultiClass` for 2-D ``X`` with 1-D ``y``,
        :class:`~sklstruct.structures.ChainStructure` for sequences.
    C : float, default=1.0
        Weight of the summed structured hinge losses (``LinearSVC`` convention).
    rescale : {"margin", "slack"}, default="margin"
        Margin rescaling (Algorithm 3) or slack rescaling (Algorithm 4).
    tol : float, default=1e-3
        Per-example violation tolerance (the paper's epsilon).
    max_iter : int, default=1000
        Maximum number of cutting-plane iterations (oracle calls).
    inactive_window : int, default=50
        A constraint whose dual variable stayed zero for this many iterations is removed from
        the working set (seed 002, section 4). Removal never changes the optimum of the final
        QP, only its size.
    n_jobs : int, default=None
        Threads for the separation oracle.
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    structure_ : structure
        The structure bound to the training data.
    w_ : ndarray of shape (n_parameters,)
        All weights; ``coef_`` (and ``transition_`` for chains) are views of parts of it.
    dual_coef_ : ndarray of shape (n_constraints,)
        Dual variables of the final working set.
    n_iter_ : int
    history_ : dict of ndarray
        Per iteration: ``primal``, ``dual``, ``gap``, ``time`` (s), ``oracle_calls``,
        ``n_constraints``.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import StructSVMCuttingPlane
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    >>> [list(p) for p in model.predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "rescale": [StrOptions({"margin", "slack"})],
        "inactive_window": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(self, structure="auto", *, C=1.0, rescale="margin", tol=1e-3, max_iter=1000,
                 inactive_window=50, n_jobs=None, verbose=0):
        self.structure = structure
        self.C = C
        self.rescale = rescale
        self.tol = tol
        self.max_iter = max_iter
        self.inactive_window = inactive_window
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, lengths=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass).
        y : list of array-like, or array-like of shape (n_tokens,)
        lengths : array-like of shape (n_sequences,), default=None

        Returns
        -------
        self : object
        """
        return self._fit(X, y, lengths)

    def _fit_batch(self, batch, Y):
        structure = self.structure_
        n = batch.n_sequences
        C = float(self.C)
        working_set = WorkingSet(structure, batch, Y)
        history = History(extra_fields=("n_constraints",))
        w = np.zeros(structure.size_joint_feature_)
        alpha = np.zeros(0)
        last_active = np.zeros(0, dtype=np.int64)
        qp_tol = 0.1 * self.tol * n
        converged = False
        for iteration in range(1, self.max_iter + 1):
            unary = structure.unary_potentials(batch, w)
            Ybar, losses, scores = structure.loss_augmented_decode(
                batch, w, Y, rescale=self.rescale, n_jobs=self.n_jobs, unary=unary
            )
            margins = structure.score_labels(batch, w, Y, unary=unary) - scores
            if self.rescale == "margin":
                hinge = losses - margins
                scale = np.ones(n)
            else:
                hinge = losses * (1.0 - margins)
                scale = losses
            hinge = np.maximum(hinge, 0.0)
            norm2 = float(alpha @ working_set.gram @ alpha) if alpha.size else 0.0
            primal = 0.5 * norm2 + C * hinge.sum()
            offsets = working_set.offsets
            dual = float(alpha @ offsets) - 0.5 * norm2 if alpha.size else 0.0
            slack = max(0.0, float(np.max(offsets - working_set.gram @ alpha))) \
                if alpha.size else 0.0
            history.append(primal=primal, dual=dual, gap=primal - dual, oracle_calls=iteration,
                           n_constraints=len(working_set))
            violation = hinge.sum() - slack
            if self.verbose:
                print(f"[{type(self).__name__}] iter {iteration:4d} primal {primal:.6g} "
                      f"dual {dual:.6g} gap {primal - dual:.3g} violation/n {violation / n:.3g} "
                      f"constraints {len(working_set)}")
            if violation <= self.tol * n:
                converged = True
                break
            working_set.add(Ybar, scale, offset=float(losses.sum()))
            alpha = np.append(alpha, 0.0)
            last_active = np.append(last_active, iteration)
            alpha, _, _ = solve_capped_simplex_qp(
                working_set.gram, working_set.offsets, C, alpha0=alpha, tol=qp_tol
            )
            last_active[alpha > 0] = iteration
            stale = iteration - last_active >= self.inactive_window
            if stale.any():
                working_set.remove(~stale)
                alpha, last_active = alpha[~stale], last_active[~stale]
            w = working_set.combine(alpha)
        if not converged:
            warnings.warn(
                f"StructSVMCuttingPlane did not converge in {self.max_iter} iterations "
                f"(last violation per example {violation / n:.3g} > tol={self.tol}).",
                ConvergenceWarning,
            )
        self.n_iter_ = iteration
        self.history_ = history.as_dict()
        self.dual_coef_ = alpha
        return w
