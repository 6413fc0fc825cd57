"""The safe learning rate of exponentiated gradient, ``eta = 0.4 / (B + lambda)`` (Bartlett et
al. 2004, Theorem 2), against the dual QP written out over every labelling of tiny problems:
``lambda`` as the largest eigenvalue of its dense Hessian along feasible directions, ``B``
against the exact spread of its gradient, and the progress Lemma 3 promises at that rate."""

import numpy as np
import pytest
from scipy.special import softmax

from sklstruct import ChainStructure, MultiClass
from sklstruct.learners.exp_grad._safe_rate import gradient_spread_bound, safe_learning_rate
from sklstruct.structures.grid import GridStructure
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import enumerate_labelings
from ._helpers import make_chain_data

STRUCTURES = {
    "chain": ChainStructure(),
    "chain without start/end": ChainStructure(start_end=False),
    "chain with class weights": ChainStructure(class_weight=[1.0, 3.0, 0.5]),
    "multiclass": MultiClass(),
    "multiclass with class weights": MultiClass(class_weight=[2.0, 1.0, 1.0]),
}


def _problem(name, seed):
    structure = STRUCTURES[name]
    n_states, n_features = 3, 2
    if isinstance(structure, MultiClass):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(5, n_features))
        Y = rng.integers(0, n_states, size=5).astype(np.intp)
        batch = SequenceBatch(X, np.arange(6, dtype=np.int64))
    else:
        X, y = make_chain_data(n_sequences=3, n_states=n_states, n_features=n_features,
                               max_length=3, seed=seed)
        batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
        Y = np.concatenate(y).astype(np.intp)
    return structure.bind(n_features, n_states, np.arange(n_states), Y), batch, Y


def _explicit_dual(structure, batch, Y, C):
    """``Q(a) = b . a + 1/2 a' A a`` (minus the dual of DESIGN section 1 with ``alpha = C a``)
    over every labelling; each example's ``a_i`` lies on a simplex.

    Returns ``(A, b, groups, Phi, losses, truth)`` with ``truth = sum_i Psi(x_i, y_i)``.
    """
    Phi, losses, groups = enumerate_labelings(structure, batch, Y)
    truth = structure.joint_feature(batch, Y)
    # F(a) = C sum a L - C^2/2 ||truth - a Phi||^2 (Theorem 1), Q = -F up to a constant
    A = C ** 2 * Phi @ Phi.T
    b = -C * losses - C ** 2 * Phi @ truth
    return A, b, groups, Phi, losses, truth


def _feasible_curvature(A, groups):
    """Largest eigenvalue of ``A`` on the directions summing to zero on every simplex."""
    same = groups[:, None] == groups[None, :]
    projector = np.eye(len(groups)) - same / np.bincount(groups)[groups][None, :]
    return np.linalg.eigvalsh(projector @ A @ projector)[-1]


def _exact_gradient_spread(C, Phi, losses, groups, truth):
    """``B = max_{a} (max_k grad_k Q(a) - min_k grad_k Q(a))`` over the product of simplices.

    ``grad_k - grad_l`` is affine in ``a`` and separable over examples, so its maximum takes,
    for every example, the labelling that maximises it.
    """
    grad_at_zero = -C * losses - C ** 2 * Phi @ truth  # the gradient is b + A a
    best = -np.inf
    for k in range(len(losses)):
        D = Phi[k] - Phi  # rows: Phi_k - Phi_l for every l
        value = grad_at_zero[k] - grad_at_zero  # b_k - b_l
        # + C^2 (Phi_k - Phi_l) . sum_i a_i Phi_i, maximised example by example
        products = C ** 2 * D @ Phi.T
        for i in np.unique(groups):
            value = value + products[:, groups == i].max(axis=1)
        best = max(best, value.max())
    return best


@pytest.mark.parametrize("name", list(STRUCTURES))
@pytest.mark.parametrize("seed", range(3))
def test_rate_is_theorem_2_with_the_dense_curvature(name, seed):
    C = [0.3, 1.0, 2.5][seed]
    structure, batch, Y = _problem(name, seed)
    A, _, groups, Phi, losses, truth = _explicit_dual(structure, batch, Y, C)
    curvature = _feasible_curvature(A, groups)
    B = gradient_spread_bound(structure, batch, Y, C)
    eta = safe_learning_rate(structure, batch, Y, C)
    assert eta == pytest.approx(0.4 / (B + curvature), rel=1e-9)
    # B bounds the spread of the gradient over the whole feasible set (Theorem 2's B)
    assert _exact_gradient_spread(C, Phi, losses, groups, truth) <= B * (1 + 1e-12)
    # so the rate is within Lemma 3's condition eta < 0.567 / (B + lambda) with the exact B
    assert eta * (_exact_gradient_spread(C, Phi, losses, groups, truth) + curvature) <= 0.4


@pytest.mark.parametrize("name", ["chain", "chain with class weights", "multiclass"])
@pytest.mark.parametrize("seed", range(2))
def test_lemma_3_progress_at_the_safe_rate(name, seed):
    # every EG-QP step at the safe rate decreases Q by at least
    # eta (1 - eta (B + lambda) e^{eta B}) sum_i var(X_i), with the exact B and lambda
    C = 2.0
    structure, batch, Y = _problem(name, seed)
    A, b, groups, Phi, losses, truth = _explicit_dual(structure, batch, Y, C)
    B = _exact_gradient_spread(C, Phi, losses, groups, truth)
    curvature = _feasible_curvature(A, groups)
    eta = safe_learning_rate(structure, batch, Y, C)
    factor = eta * (1.0 - eta * (B + curvature) * np.exp(eta * B))
    assert factor > 0
    n_groups = groups.max() + 1
    members = [np.flatnonzero(groups == i) for i in range(n_groups)]
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=len(groups))  # a random interior start
    a = np.concatenate([softmax(theta[m]) for m in members])[np.argsort(np.concatenate(members))]
    values = [b @ a + 0.5 * a @ A @ a]
    for _ in range(50):
        gradient = b + A @ a
        variance = sum(a[m] @ gradient[m] ** 2 - (a[m] @ gradient[m]) ** 2 for m in members)
        for m in members:
            a[m] = softmax(np.log(a[m]) - eta * gradient[m])
        values.append(b @ a + 0.5 * a @ A @ a)
        decrease = values[-2] - values[-1]
        assert factor * variance <= decrease + 1e-12 * (1 + abs(values[-1]))
    assert values[-1] < values[0]


def test_long_chains_underflow_with_a_clear_error():
    X = np.ones((1100, 2))
    Y = np.tile([0, 1], 550).astype(np.intp)
    structure = ChainStructure().bind(2, 2, np.arange(2), Y)
    batch = SequenceBatch(X, np.array([0, 1100], dtype=np.int64))
    with pytest.raises(ValueError, match="underflows"):
        safe_learning_rate(structure, batch, Y, 1.0)


def test_structures_without_the_covariance_operator_are_refused():
    structure = GridStructure().bind(1, 2, np.arange(2), np.zeros(4, dtype=np.intp))
    batch = SequenceBatch(np.ones((4, 1)), np.array([0, 4], dtype=np.int64),
                          widths=np.array([2]))
    with pytest.raises(ValueError, match="supports ChainStructure and MultiClass"):
        safe_learning_rate(structure, batch, np.zeros(4, dtype=np.intp), 1.0)
