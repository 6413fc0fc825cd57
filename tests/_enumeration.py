"""Exact optima of tiny structured SVM problems by enumerating every labeling.

The n-slack dual of DESIGN section 1 is written out over all labelings and solved by a generic
solver (SciPy's SLSQP), independently of sklstruct's own QP code.
"""

import itertools

import numpy as np
from scipy.optimize import minimize, nnls


def all_labelings(n_states, length):
    return np.array(list(itertools.product(range(n_states), repeat=length)), dtype=np.intp)


def _labelings_of(structure, labelings, i, length):
    """The labelings of example ``i``: ``labelings(i, length)`` when given, else all."""
    if labelings is not None:
        return labelings(i, length)
    return all_labelings(structure.n_states_, length)


def enumerate_labelings(structure, batch, Y, labelings=None):
    """Joint feature ``Psi(x_i, y)`` and loss ``Delta(y_i, y)`` of every labeling ``y`` of
    every example ``i`` (``y_i`` included), with the example index.

    Returns ``(features (K, size), losses (K,), groups (K,))``.
    """
    features, losses, groups = [], [], []
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = batch.take([i])
        for ybar in _labelings_of(structure, labelings, i, hi - lo):
            features.append(structure.joint_feature(sub, ybar))
            losses.append(float(structure.loss(sub, Y[lo:hi], ybar)[0]))
            groups.append(i)
    return np.array(features), np.array(losses), np.array(groups)


def enumerate_constraints(structure, batch, Y, rescale="margin", labelings=None):
    """Directions ``Delta-scaled (Psi(y_i) - Psi(y))`` and offsets for every example and labeling
    (every labeling of the states, or those ``labelings(i, length)`` lists for example ``i``).

    Returns ``(directions (K, size), offsets (K,), groups (K,))``.
    """
    directions, offsets, groups = [], [], []
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = batch.take([i])
        y_i = Y[lo:hi]
        psi_true = structure.joint_feature(sub, y_i)
        for ybar in _labelings_of(structure, labelings, i, hi - lo):
            loss = float(structure.loss(sub, y_i, ybar)[0])
            if loss == 0:
                continue
            scale = 1.0 if rescale == "margin" else loss
            directions.append(scale * (psi_true - structure.joint_feature(sub, ybar)))
            offsets.append(loss)
            groups.append(i)
    return np.array(directions), np.array(offsets), np.array(groups)


def exact_optimum(structure, batch, Y, C, rescale="margin", nonnegative=(), labelings=None,
                  kkt=False):
    """Certified optimum of ``1/2||w||^2 + C sum_i H_i(w)`` over all enumerated labelings.

    Solves the primal QP in ``(w, xi)`` with one constraint per (example, labeling) by SLSQP and
    reads the dual variables off its Lagrange multipliers. Returns ``(lower, upper, w)``: the
    dual value of the (feasible) multipliers and the primal value of ``w``, computed by
    enumeration, bracket the optimum. Weights listed in ``nonnegative`` are constrained to be
    ``>= 0`` (the dual then has ``w(alpha)`` projected onto that constraint). ``labelings``
    restricts the outputs as in :func:`enumerate_constraints`. The multipliers come from
    :func:`kkt_multipliers` where SLSQP does not report them (SciPy < 1.16), or with
    ``kkt``.
    """
    directions, c, groups = enumerate_constraints(structure, batch, Y, rescale, labelings)
    n_constraints, size = directions.shape
    n = batch.n_sequences
    A = np.hstack([directions, np.eye(n)[groups]])  # directions . w + xi_i >= c
    res = minimize(
        lambda z: 0.5 * z[:size] @ z[:size] + C * z[size:].sum(),
        np.zeros(size + n),
        jac=lambda z: np.concatenate([z[:size], C * np.ones(n)]),
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda z: A @ z - c, "jac": lambda z: A}],
        bounds=[(0, None) if k in set(nonnegative) else (None, None) for k in range(size)]
        + [(0, None)] * n,
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    w = res.x[:size]
    multipliers = None if kkt else getattr(res, "multipliers", None)  # (SciPy >= 1.16)
    if multipliers is None:
        alpha = kkt_multipliers(directions, A @ res.x - c, w, res.x[size:], groups, C,
                                nonnegative)
    else:
        if isinstance(multipliers, dict):
            multipliers = multipliers["ineq"]
        alpha = np.maximum(np.asarray(multipliers)[:n_constraints], 0.0)
    mass = np.bincount(groups, weights=alpha, minlength=n)
    alpha *= np.minimum(1.0, C / np.maximum(mass, 1e-300))[groups]  # exactly feasible
    v = alpha @ directions
    v[list(nonnegative)] = np.maximum(v[list(nonnegative)], 0.0)
    lower = float(alpha @ c - 0.5 * v @ v)
    upper = primal_objective(structure, batch, Y, w, C, rescale, labelings)
    return lower, upper, w


def kkt_multipliers(directions, slack, w, xi, groups, C, nonnegative=()):
    """Multipliers of the constraints ``directions . w + xi_i >= c`` at the primal solution
    ``(w, xi)`` where SLSQP does not report them (SciPy < 1.16), from the KKT conditions:
    ``w = sum_k alpha_k directions_k`` (over the weights not held at zero by
    ``nonnegative``) and ``sum_{k of i} alpha_k = C`` for every example with ``xi_i > 0``,
    with ``alpha >= 0`` on the active constraints (slack at most 1e-8), by non-negative
    least squares (the mass rows weighted up). Any such ``alpha``, made feasible, gives a
    valid lower bound; these make it tight, and are scaled by ``1 - 1e-12`` so that the
    rounding of the dual's sums cannot lift it above the primal (the tests' tolerances are
    1e-8 and looser)."""
    active = np.flatnonzero(slack <= 1e-8 * max(1.0, float(np.abs(slack).max())))
    nonnegative = set(nonnegative)
    free = np.array([k for k in range(w.shape[0]) if k not in nonnegative or w[k] > 1e-9],
                    dtype=np.intp)
    alpha = np.zeros(directions.shape[0])
    if not active.shape[0]:
        return alpha
    loaded = np.flatnonzero(xi > 1e-9)
    weight = 1e3 * max(1.0, float(np.abs(directions).max()))
    mass = weight * (groups[active][None, :] == loaded[:, None])
    matrix = np.vstack([directions[np.ix_(active, free)].T, mass])
    target = np.concatenate([w[free], weight * C * np.ones(loaded.shape[0])])
    alpha[active] = nnls(matrix, target, maxiter=100 * (active.shape[0] + 1))[0]
    return alpha * (1.0 - 1e-12)


def primal_objective(structure, batch, Y, w, C, rescale="margin", labelings=None):
    """``1/2||w||^2 + C sum_i H_i(w)`` by enumeration (independent of the oracles)."""
    total = 0.5 * w @ w
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = batch.take([i])
        y_i = Y[lo:hi]
        s_true = w @ structure.joint_feature(sub, y_i)
        best = 0.0
        for ybar in _labelings_of(structure, labelings, i, hi - lo):
            loss = float(structure.loss(sub, y_i, ybar)[0])
            s = w @ structure.joint_feature(sub, ybar)
            value = loss + s - s_true if rescale == "margin" else loss * (1 + s - s_true)
            best = max(best, value)
        total += C * best
    return total
