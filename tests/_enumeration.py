"""Exact optima of tiny structured SVM problems by enumerating every labeling.

The n-slack dual of DESIGN section 1 is written out over all labelings and solved by a generic
solver (SciPy's SLSQP), independently of sklstruct's own QP code.
"""

import itertools

import numpy as np
from scipy.optimize import minimize


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


def exact_optimum(structure, batch, Y, C, rescale="margin", nonnegative=(), labelings=None):
    """Certified optimum of ``1/2||w||^2 + C sum_i H_i(w)`` over all enumerated labelings.

    Solves the primal QP in ``(w, xi)`` with one constraint per (example, labeling) by SLSQP and
    reads the dual variables off its Lagrange multipliers. Returns ``(lower, upper, w)``: the
    dual value of the (feasible) multipliers and the primal value of ``w``, computed by
    enumeration, bracket the optimum. Weights listed in ``nonnegative`` are constrained to be
    ``>= 0`` (the dual then has ``w(alpha)`` projected onto that constraint). ``labelings``
    restricts the outputs as in :func:`enumerate_constraints`.
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
    multipliers = res.multipliers
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
