"""Solvers of the l1-regularised max-margin Markov network (seed 004, section 4).

* :class:`LPCuttingPlane`: Algorithm 1. Working sets of labelings per example; the LP over the
  working set (``w = mu - v``) is solved by HiGHS (warm-started through ``highspy`` when
  installed, else from scratch by ``scipy.optimize.linprog``). The LP optimum is a lower bound
  on the optimum of P1 (it is a relaxation) and ``P1(w)`` an upper bound: their difference
  certifies.
* :func:`projected_subgradient`: Algorithm 2 on P1' (hinge loss on an l1 ball), with the exact
  Euclidean projection onto the l1 ball of Duchi et al. (2008).

Both build the constraint directions ``Psi(x_i, y_i) - Psi(x_i, ybar_i)`` of many examples at
once from the CSR token rows (no loop over sequences).
"""

import os
import sys

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog


def project_l1_ball(v, radius):
    """Euclidean projection of ``v`` onto ``{w : ||w||_1 <= radius}`` (Duchi et al. 2008).

    Sorting costs O(d log d). Coordinates whose magnitude is below the soft threshold become
    exact zeros.
    """
    v = np.asarray(v, dtype=np.float64)
    magnitude = np.abs(v)
    if magnitude.sum() <= radius:
        return v.copy()
    if radius <= 0:
        return np.zeros_like(v)
    ordered = np.sort(magnitude)[::-1]
    cumulative = np.cumsum(ordered) - radius
    index = np.arange(1, ordered.shape[0] + 1)
    rho = np.flatnonzero(ordered - cumulative / index > 0)[-1]
    threshold = cumulative[rho] / (rho + 1.0)
    return np.sign(v) * np.maximum(magnitude - threshold, 0.0)


def constraint_directions(structure, batch, Y, Ybar, sequences):
    """Rows ``Psi(x_i, y_i) - Psi(x_i, ybar_i)`` for the given sequences (CSR, flat layout)."""
    X = batch.X if sp.issparse(batch.X) else sp.csr_matrix(batch.X)
    S, d = structure.n_states_, structure.n_features_
    row_of_sequence = np.full(batch.n_sequences, -1, dtype=np.int64)
    row_of_sequence[sequences] = np.arange(len(sequences))
    tokens = np.flatnonzero((Y != Ybar) & (row_of_sequence[batch.sequence_index] >= 0))
    counts = np.diff(X.indptr)[tokens]
    starts = X.indptr[tokens]
    entry = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    token_of_entry = np.repeat(tokens, counts)
    feature, value = X.indices[entry], X.data[entry]
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


def _quiet_highs():
    """A ``highspy.Highs`` instance without its start-up banner (printed to fd 1)."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 1)
        try:
            highs = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    highs.setOptionValue("output_flag", False)
    return highs


def _highspy_available():
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


class LPCuttingPlane:
    """Algorithm 1 of seed 004: ``min 1/2 ||w||_1 + C sum_i xi_i`` over the working sets.

    Variables ``[mu (K), v (K), xi (n)] >= 0``, one row ``-(mu - v) . g - xi_i <= -loss`` per
    constraint. With ``backend="highspy"`` (the default when the optional ``highspy`` package
    is installed) the LP is kept in one HiGHS instance: new constraints are appended as rows
    and the dual simplex restarts from the previous optimal basis. ``backend="scipy"`` solves
    every round from scratch with ``scipy.optimize.linprog`` (HiGHS too, but scipy takes no
    starting basis).
    """

    def __init__(self, structure, batch, Y, C, backend="auto"):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, float(C)
        if backend == "auto":
            backend = "highspy" if _highspy_available() else "scipy"
        self.backend = backend
        self.n_weights = structure.size_joint_feature_
        n = batch.n_sequences
        self.cost = np.concatenate([np.full(2 * self.n_weights, 0.5), np.full(n, self.C)])
        self.rows, self.losses, self.owners = [], [], []
        self.slack = np.zeros(n)
        if backend == "highspy":
            import highspy

            self.highs = _quiet_highs()
            n_cols = self.cost.shape[0]
            self.highs.addVars(n_cols, np.zeros(n_cols), np.full(n_cols, highspy.kHighsInf))
            self.highs.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32), self.cost)

    def add(self, Ybar, losses, sequences):
        directions = constraint_directions(self.structure, self.batch, self.Y, Ybar, sequences)
        sequences = np.asarray(sequences, dtype=np.int64)
        n, m = self.batch.n_sequences, len(sequences)
        slack_part = sp.csr_matrix((-np.ones(m), (np.arange(m), sequences)), shape=(m, n))
        rows = sp.hstack([-directions, directions, slack_part], format="csr")
        rhs = -losses[sequences]
        if self.backend == "highspy":
            import highspy

            self.highs.addRows(m, np.full(m, -highspy.kHighsInf), rhs, rows.nnz,
                               rows.indptr[:-1].astype(np.int32),
                               rows.indices.astype(np.int32), rows.data)
        else:
            self.rows.append(rows)
            self.losses.append(rhs)
        self.owners.append(sequences)

    @property
    def n_constraints(self):
        return int(sum(len(o) for o in self.owners))

    def solve(self):
        """Solve the LP over the working set; return ``(w, optimal value)``."""
        if self.backend == "highspy":
            self.highs.run()
            status = self.highs.getModelStatus()
            if self.highs.modelStatusToString(status) != "Optimal":
                raise RuntimeError("the working-set LP failed: "
                                   f"{self.highs.modelStatusToString(status)}")
            x = np.asarray(self.highs.getSolution().col_value)
            value = float(self.highs.getInfo().objective_function_value)
        else:
            result = linprog(self.cost, A_ub=sp.vstack(self.rows, format="csr"),
                             b_ub=np.concatenate(self.losses), bounds=(0, None),
                             method="highs")
            if result.status != 0:
                raise RuntimeError(f"the working-set LP failed: {result.message}")
            x, value = result.x, float(result.fun)
        K = self.n_weights
        w = x[:K] - x[K:2 * K]
        w[np.abs(w) <= 1e-12 * max(1.0, np.abs(w).max())] = 0.0
        self.slack = x[2 * K:]
        return w, value


def projected_subgradient(hinge_and_subgradient, size, radius, learning_rate, n_iter,
                          record):
    """Algorithm 2 of seed 004: ``min (1/n) sum_i H_i(w)`` over ``||w||_1 <= radius``.

    ``hinge_and_subgradient(w)`` returns the mean hinge loss and a subgradient of it; steps are
    ``learning_rate / sqrt(t)``. Returns the iterate with the smallest objective.
    """
    w = np.zeros(size)
    best_w, best = w, np.inf
    for t in range(1, n_iter + 1):
        value, gradient = hinge_and_subgradient(w)
        if value < best:
            best_w, best = w, value
        record(t, value, w)
        if not np.any(gradient):
            break
        w = project_l1_ball(w - learning_rate / np.sqrt(t) * gradient, radius)
    return best_w, best
