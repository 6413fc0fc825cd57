"""Exponentiated gradient on the factored dual of max-margin Markov networks (seed 001)."""

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..base import BaseStructuredClassifier
from ..utils._sklearn_compat import Interval, StrOptions, _fit_context
from ._history import History


class M3NExpGrad(BaseStructuredClassifier):
    """Max-margin Markov network trained by exponentiated gradient (Bartlett et al., seed 001).

    Maximises the dual of the objective shared by all sklstruct learners (DESIGN section 1,
    margin rescaling)::

        P(w) = 1/2 ||w||^2 + C * sum_i H_i(w)
        D(a) = C sum_i E_{a_i}[Delta(y_i, y)] - 1/2 ||w(a)||^2,
        w(a) = C sum_i (Psi(x_i, y_i) - E_{a_i}[Psi(x_i, y)])

    with every ``a_i`` a Gibbs distribution over labelings whose potentials are kept per part
    (the seed's Figure 2): per-token node potentials and, since transition features do not
    depend on ``x``, one shared table of pairwise potentials. An EG step adds
    ``eta * C * (loss_r + w . phi_r)`` to every part's potential and needs only the clique
    marginals (forward-backward in compiled code), never a QP. This is the seed's ``C``.

    The batch algorithm updates all examples at once, with a fixed or an adaptive step (see
    ``step``). Every iteration computes
    the dual, the primal objective at ``w(a)`` (one loss-augmented decoding) and their gap, and
    stops when ``gap <= tol * primal``.

    Parameters
    ----------
    structure : {"auto"} or structure instance, default="auto"
        Any structure with a ``marginals`` oracle (``MultiClass``, ``ChainStructure``).
    C : float, default=1.0
    eta : float, default=None
        (Initial) step size; ``None`` uses ``1 / (C * max_i ||x_i||^2 * L_max)`` with ``L_max``
        the longest sequence, a conservative scale of the curvature.
    step : {"adaptive", "fixed"}, default="adaptive"
        "adaptive": halve a step that would lower the dual and retry, let accepted steps grow
        by 5% (the dual never decreases). "fixed": every step uses ``eta`` as given (the
        seed's Figure 2 literally).
    tol : float, default=1e-3
        Stop when the duality gap is at most ``tol`` times the primal objective.
    max_iter : int, default=1000
    warm_start : bool, default=False
        Continue from the potentials of the previous fit (same data).
    n_jobs : int, default=None
        Threads for forward-backward and decoding.
    verbose : int, default=0

    Attributes
    ----------
    classes_, structure_, w_, coef_, n_iter_, n_features_in_
        As in :class:`StructSVMCuttingPlane`.
    history_ : dict of ndarray
        Per iteration: ``primal``, ``dual``, ``gap``, ``time``, ``oracle_calls`` (calls of the
        marginal oracle on single examples) and ``eta``.
    eta_ : float
        The step size at the end of the fit.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import M3NExpGrad
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> [p.tolist() for p in M3NExpGrad(C=10.0).fit(X, y).predict(X)]
    [['a', 'b'], ['b', 'a', 'a']]
    """

    _parameter_constraints = {
        **BaseStructuredClassifier._parameter_constraints,
        "eta": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "step": [StrOptions({"adaptive", "fixed"})],
        "warm_start": ["boolean"],
    }

    def __init__(self, structure="auto", *, C=1.0, eta=None, step="adaptive", tol=1e-3,
                 max_iter=1000, warm_start=False, n_jobs=None, verbose=0):
        self.structure = structure
        self.C = C
        self.eta = eta
        self.step = step
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, lengths=None):
        """Fit the model (same input forms as :class:`StructSVMCuttingPlane`)."""
        return self._fit(X, y, lengths)

    def _dual_state(self, batch, Y, node_potentials, pairwise_potentials):
        """Marginals of the current Gibbs distributions, ``w(a)`` and the dual value."""
        structure, C = self.structure_, float(self.C)
        theta = np.zeros(structure.size_joint_feature_)
        theta[structure.n_states_ * structure.n_features_:] = pairwise_potentials
        node, pairwise, _ = structure.marginals(batch, theta, n_jobs=self.n_jobs,
                                                unary=node_potentials)
        w = C * (structure.joint_feature(batch, Y)
                 - structure.expected_joint_feature(batch, node, pairwise))
        rows = np.arange(Y.shape[0])
        expected_loss = structure.loss_weights_[Y] @ (1.0 - node[rows, Y])
        return w, C * float(expected_loss) - 0.5 * float(w @ w)

    def _fit_batch(self, batch, Y, sample_weight):
        # fit takes no sample_weight, so every sequence weighs 1 here
        structure, C = self.structure_, float(self.C)
        n_states = structure.n_states_
        n_unary = n_states * structure.n_features_
        if self.warm_start and getattr(self, "_potentials", None) is not None \
                and self._potentials[0].shape == (batch.n_tokens, n_states):
            node_pot, pair_pot = (p.copy() for p in self._potentials)
            eta = self.eta_
        else:
            node_pot = np.zeros((batch.n_tokens, n_states))
            pair_pot = np.zeros(structure.n_pairwise_)
            eta = self.eta if self.eta is not None else self._default_eta(batch)
        # loss of every token and state: the part losses l_{i,r}
        node_loss = np.repeat(structure.loss_weights_[Y][:, None], n_states, axis=1)
        node_loss[np.arange(Y.shape[0]), Y] = 0.0
        history = History(extra_fields=("eta",))
        w, dual = self._dual_state(batch, Y, node_pot, pair_pot)
        oracle_calls = batch.n_sequences
        converged = False
        for iteration in range(1, self.max_iter + 1):
            hinge = self._structured_hinge(batch, Y, w, "margin")
            primal = 0.5 * float(w @ w) + C * float(hinge.sum())
            history.append(primal=primal, dual=dual, gap=primal - dual,
                           oracle_calls=oracle_calls, eta=eta)
            if self.verbose:
                print(f"[M3NExpGrad] iter {iteration:4d} primal {primal:.6g} dual {dual:.6g} "
                      f"gap {primal - dual:.3g} eta {eta:.3g}")
            if primal - dual <= self.tol * abs(primal):
                converged = True
                break
            # EG step on every part: theta_r += eta * C * (l_r + w . phi_r)
            node_grad = C * (node_loss + structure.unary_potentials(batch, w))
            pair_grad = C * w[n_unary:]
            while True:
                new_node = node_pot + eta * node_grad
                new_node -= new_node.max(axis=1, keepdims=True)  # shift: same distribution
                new_pair = pair_pot + eta * pair_grad
                new_w, new_dual = self._dual_state(batch, Y, new_node, new_pair)
                oracle_calls += batch.n_sequences
                if self.step == "fixed" or new_dual >= dual or eta < 1e-300:
                    break
                eta *= 0.5
            node_pot, pair_pot, w, dual = new_node, new_pair, new_w, new_dual
            if self.step == "adaptive":
                eta *= 1.05
        if not converged:
            warnings.warn(f"M3NExpGrad did not reach a relative duality gap of {self.tol} in "
                          f"{self.max_iter} iterations.", ConvergenceWarning)
        self._potentials = (node_pot, pair_pot)
        self.eta_ = eta
        self.n_iter_ = iteration
        self.history_ = history.as_dict()
        return w

    def _default_eta(self, batch):
        X = batch.X
        sq = X.multiply(X).sum(axis=1) if hasattr(X, "multiply") else (X * X).sum(axis=1)
        scale = float(np.max(sq)) * float(np.max(batch.lengths)) + 1.0
        return 1.0 / (float(self.C) * scale)
