"""Solvers of the l1-regularised max-margin Markov network (Zhu, Xing and Zhang 2008,
section 4).

* :class:`LPCuttingPlane`: Algorithm 1. Working sets of labellings per example; the LP over the
  working set (``w = mu - v``) is solved by HiGHS through :class:`~sklstruct._solvers.lp.
  IncrementalLP` (warm-started with the optional ``highspy``). The LP optimum is a lower bound
  on the optimum of P1 (a relaxation) and ``P1(w)`` an upper bound: their difference certifies.
* :func:`projected_subgradient`: Algorithm 2 on P1' (hinge loss on an l1 ball), with the exact
  Euclidean projection onto the l1 ball.
* :func:`fit_lp_cutting_plane` and :func:`fit_subgradient`: their outer loops, recorded on the
  fit's certificate (Algorithm 3, the EM, is in :mod:`._em`).

Both build the constraint directions ``Psi(x_i, y_i) - Psi(x_i, ybar_i)`` of many examples at
once from the CSR token rows (no loop over sequences).
"""

import numpy as np
import scipy.sparse as sp

from ..._progress import BestCertified
from ..._solvers.l1_ball import project_l1_ball
from ..._solvers.lp import IncrementalLP
from ...utils._sequences import ragged_arange
from ._em import P1


def constraint_directions(structure, batch, Y, Ybar, sequences):
    """Rows ``Psi(x_i, y_i) - Psi(x_i, ybar_i)`` for the given sequences (CSR, flat layout)."""
    indptr, indices, data = batch.csr_arrays
    S, d = structure.n_states_, structure.n_features_
    row_of_sequence = np.full(batch.n_sequences, -1, dtype=np.int64)
    row_of_sequence[sequences] = np.arange(len(sequences))
    tokens = np.flatnonzero((Y != Ybar) & (row_of_sequence[batch.sequence_index] >= 0))
    counts = indptr[tokens + 1] - indptr[tokens]
    entry = ragged_arange(indptr[tokens], counts)
    token_of_entry = np.repeat(tokens, counts)
    feature, value = indices[entry].astype(np.int64), data[entry]
    rows = np.repeat(row_of_sequence[batch.sequence_index[tokens]], counts)
    unary = sp.coo_matrix(
        (np.concatenate([value, -value]),
         (np.concatenate([rows, rows]),
          np.concatenate([feature * S + Y[token_of_entry], feature * S + Ybar[token_of_entry]]))),
        shape=(len(sequences), d * S)).tocsr()
    if structure.n_pairwise_ == 0:
        return unary
    pairwise = (structure.pairwise_statistics(batch, Y, per_sequence=True)
                - structure.pairwise_statistics(batch, Ybar, per_sequence=True))[sequences]
    return sp.hstack([unary, sp.csr_matrix(pairwise)], format="csr")


class LPCuttingPlane:
    """Algorithm 1: ``min 1/2 ||w||_1 + C sum_i s_i xi_i`` over the working sets (``s_i``
    the sample weights, 1 unless given).

    Variables ``[mu (K), v (K), xi (n)] >= 0``, one row ``-(mu - v) . g - xi_i <= -loss`` per
    constraint, in an :class:`~sklstruct._solvers.lp.IncrementalLP` (``backend`` "auto",
    "highspy" or "scipy").
    """

    def __init__(self, structure, batch, Y, C, backend="auto", sample_weight=None):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, float(C)
        self.n_weights = structure.size_joint_feature_
        n = batch.n_sequences
        slack_cost = np.full(n, self.C) if sample_weight is None else self.C * sample_weight
        self.lp = IncrementalLP(
            np.concatenate([np.full(2 * self.n_weights, 0.5), slack_cost]), backend)
        self.backend = self.lp.backend
        self.slack = np.zeros(n)

    def add(self, Ybar, losses, sequences):
        """Add the constraints of the labellings ``Ybar`` of ``sequences``."""
        directions = constraint_directions(self.structure, self.batch, self.Y, Ybar, sequences)
        sequences = np.asarray(sequences, dtype=np.int64)
        n, m = self.batch.n_sequences, len(sequences)
        slack_part = sp.csr_matrix((-np.ones(m), (np.arange(m), sequences)), shape=(m, n))
        self.lp.add_rows(sp.hstack([-directions, directions, slack_part], format="csr"),
                         -losses[sequences])

    @property
    def n_constraints(self):
        return self.lp.n_rows

    def solve(self, time_limit=None):
        """Solve the LP over the working set; return ``(w, optimal value)``, or None when
        ``time_limit`` seconds run out first."""
        solution = self.lp.solve(time_limit)
        if solution is None:
            return None
        x, value = solution
        K = self.n_weights
        w = x[:K] - x[K:2 * K]
        w[np.abs(w) <= 1e-12 * max(1.0, np.abs(w).max())] = 0.0
        self.slack = x[2 * K:]
        return w, value


def projected_subgradient(hinge_and_subgradient, size, radius, learning_rate, n_iter,
                          record):
    """Algorithm 2: ``min (1/n) sum_i H_i(w)`` over ``||w||_1 <= radius``.

    ``hinge_and_subgradient(w)`` returns the mean hinge loss and a subgradient of it; steps are
    ``learning_rate / sqrt(t)``; ``record(t, value, w)`` returns True to stop. Returns the
    iterate with the smallest objective.
    """
    w = np.zeros(size)
    best_w, best = w, np.inf
    for t in range(1, n_iter + 1):
        value, gradient = hinge_and_subgradient(w)
        if value < best:
            best_w, best = w, value
        if record(t, value, w) or not np.any(gradient):
            break
        w = project_l1_ball(w - learning_rate / np.sqrt(t) * gradient, radius)
    return best_w, best


def fit_lp_cutting_plane(structure, batch, Y, *, C, n_jobs, certificate, sample_weight=None):
    """Algorithm 1 to a certified gap: rounds of loss-augmented decoding, the constraints of
    the examples violated beyond their slack added to the LP, the LP re-solved.

    The LP optimum is a lower bound on min P1 and ``P1(w)`` an upper bound; the fit stops when
    their difference is at most ``tol`` times ``P1(w)``, when no example is violated, or at
    the certificate's budgets. Each round certifies the weights it decodes with; the last
    one (``max_iter``) solves no LP. With ``max_time`` each LP solve gets the time left: one
    that runs out of it ends the fit. The fit returns the certified weights of lowest P1
    (the LP's solutions need not lower it from round to round), and its last record then
    certifies them.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    C : float
    n_jobs : int or None
    certificate : Certificate
    sample_weight : ndarray of shape (n_sequences,) or None
        The examples' weights ``s_i`` in P1.

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    """
    p1 = P1(structure, batch, Y, C, n_jobs, sample_weight)
    solver = LPCuttingPlane(structure, batch, Y, C, sample_weight=sample_weight)
    w = np.zeros(structure.size_joint_feature_)
    lower, calls = 0.0, 0
    best = BestCertified()
    for round_ in range(1, certificate.max_iter + 1):
        hinge, Ybar, losses = p1.hinge(w)
        calls += batch.n_sequences
        primal = p1.of_hinge(w, hinge)
        best.record(w, primal, lower)
        violated = np.flatnonzero(hinge > solver.slack + 1e-9 * max(1.0, hinge.max()))
        if certificate.check(round_, primal, lower, calls, w=w,
                             converged=primal - lower <= certificate.tol * abs(primal)
                             or violated.size == 0,
                             n_nonzero=np.count_nonzero(w),
                             n_constraints=solver.n_constraints) \
                or round_ == certificate.max_iter:  # (the LP after it would be uncertified)
            break
        solver.add(Ybar, losses, violated)
        time_left = None if certificate.max_time is None else \
            certificate.max_time - certificate.elapsed()
        solution = solver.solve(time_left)
        if solution is None:
            certificate.stop_reason = "max_time"
            break
        w, lower = solution
    certificate.finish(round_)
    # (the LP's solutions need not lower P1 from round to round: a fit stopped early returns
    # the best weights it certified)
    w = best.result(certificate, w, copy=False)
    if certificate.rows.get("n_nonzero"):  # (the last record describes the returned weights)
        certificate.rows["n_nonzero"][-1] = float(np.count_nonzero(w))
    return w


def fit_subgradient(structure, batch, Y, *, C, radius, learning_rate, n_jobs, certificate,
                    sample_weight=None):
    """Algorithm 2 on P1' with the l1 ball of ``radius``: the step budget
    (``certificate.max_iter``) is its stopping rule, since P1' has no duality-gap
    certificate here (the history's ``dual`` and ``gap`` are NaN; ``primal`` is P1's
    ``(1/n) sum_i H_i``, with sample weights ``sum_i s_i H_i / sum_i s_i``: an integer weight
    is a repeated sequence).

    Parameters
    ----------
    structure, batch, Y, C, n_jobs, certificate, sample_weight
        As for :func:`fit_lp_cutting_plane` (``C`` is unused by the steps: P1' has no ``C``).
    radius : float
    learning_rate : float

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
        The iterate with the smallest objective.
    """
    p1 = P1(structure, batch, Y, C, n_jobs, sample_weight)
    n = batch.n_sequences
    all_sequences = np.arange(n)

    def hinge_and_subgradient(w):
        hinge, Ybar, _ = p1.hinge(w)
        active = all_sequences[hinge > 0]
        if active.size == 0:
            return 0.0, np.zeros_like(w)
        directions = constraint_directions(structure, batch, Y, Ybar, active)
        if sample_weight is None:
            return float(hinge.sum()) / n, -np.asarray(directions.sum(axis=0)).ravel() / n
        total = float(sample_weight.sum())
        return p1.weighted(hinge) / total, \
            -np.asarray(directions.T @ sample_weight[active]).ravel() / total

    def record(t, value, w):
        return certificate.check(t, value, np.nan, t * n, converged=False, w=w,
                                 n_nonzero=np.count_nonzero(w))

    w, best = projected_subgradient(hinge_and_subgradient, structure.size_joint_feature_,
                                    radius, learning_rate, certificate.max_iter, record)
    if best < certificate.last("primal"):  # (the last record describes the returned weights)
        certificate.amend_last(best, np.nan, n_nonzero=float(np.count_nonzero(w)))
    # (the step budget is the stopping rule: only a stop by max_time before it warns)
    certificate.finish(len(certificate.rows["primal"]), what=f"the end of its "
                       f"{certificate.max_iter} steps (max_iter)",
                       warn=certificate.stop_reason == "max_time")
    return w
