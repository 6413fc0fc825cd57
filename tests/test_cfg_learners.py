"""Every learner trains ConstituencyTree through the structure interface and reaches the exact
optimum (the dual QP over every tree, by enumeration) within its reported gap."""

import warnings

import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (
    L1M3N,
    M3NExcessiveGap,
    M3NExpGrad,
    M3NSimplicialDecomposition,
    StructSVMCuttingPlane,
)
from sklstruct._inference.cfg import Grammar
from sklstruct.structures import ConstituencyTree

from ._cfg_reference import random_cfg_problem, tree_labelings
from ._enumeration import enumerate_constraints, exact_optimum

C = 0.7

L2_LEARNERS = {
    "1-slack": lambda s: StructSVMCuttingPlane(s, C=C, tol=1e-7, variant="1-slack"),
    "n-slack": lambda s: StructSVMCuttingPlane(s, C=C, tol=1e-7, variant="n-slack"),
    "exp_grad online": lambda s: M3NExpGrad(s, C=C, tol=1e-6, max_iter=20000),
    "exp_grad batch": lambda s: M3NExpGrad(s, C=C, tol=1e-6, max_iter=20000,
                                           algorithm="batch"),
    "excessive_gap": lambda s: M3NExcessiveGap(s, C=C, tol=1e-6, max_iter=20000),
    "simplicial": lambda s: M3NSimplicialDecomposition(s, C=C, tol=1e-7, max_iter=5000,
                                                       random_state=0),
    "simplicial working sets": lambda s: M3NSimplicialDecomposition(
        s, C=C, tol=1e-7, max_iter=5000, working_set_size=3, random_state=0),
    "frank_wolfe": lambda s: M3NSimplicialDecomposition(s, C=C, tol=1e-4, max_iter=5000,
                                                        max_points=1, random_state=0),
}


def _data(seed):
    spec, X, Y, lengths, _ = random_cfg_problem(seed, n_sentences=3, max_length=4,
                                                n_features=2, all_states=True)
    return spec, Grammar(**spec), X, Y, lengths


def _fit(model, X, Y, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, Y, lengths=lengths)


def _check_optimum(model, spec, X, Y, lengths, rescale="margin"):
    batch, y_flat, _ = model._validate_input(X, Y, lengths, reset=False)
    encoded = model._encode_known(np.asarray(y_flat))
    lower, upper, _ = exact_optimum(model.structure_, batch, encoded, model.C, rescale,
                                    labelings=tree_labelings(spec))
    h = model.history_
    objective = model.objective(X, Y, lengths=lengths)
    assert objective == pytest.approx(h["primal"][-1], rel=1e-9)
    assert h["dual"][-1] <= upper + 1e-9
    assert objective >= lower - 1e-9
    assert objective - lower <= h["gap"][-1] + 1e-7 * upper


@pytest.mark.parametrize("learner", L2_LEARNERS)
@pytest.mark.parametrize("seed", [0, 1])
def test_l2_learners_reach_the_exact_optimum(learner, seed):
    spec, grammar, X, Y, lengths = _data(seed)
    model = _fit(L2_LEARNERS[learner](ConstituencyTree(grammar)), X, Y, lengths)
    _check_optimum(model, spec, X, Y, lengths)
    predicted = model.predict(X, lengths=lengths)
    assert predicted.shape == Y.shape


@pytest.mark.parametrize("rescale", ["margin", "slack"])
@pytest.mark.parametrize("variant", ["1-slack", "n-slack"])
def test_cutting_planes_train_the_zero_one_loss(variant, rescale):
    """The paper's loss, Delta = 100 [y != ybar], through 2-best CKY."""
    spec, grammar, X, Y, lengths = _data(2)
    structure = ConstituencyTree(grammar, loss_type="zero_one", loss_scale=100.0)
    model = _fit(StructSVMCuttingPlane(structure, C=C / 100, tol=1e-7, variant=variant,
                                       rescale=rescale), X, Y, lengths)
    _check_optimum(model, spec, X, Y, lengths, rescale)


@pytest.mark.parametrize("model", [M3NExpGrad, M3NExcessiveGap, M3NSimplicialDecomposition,
                                   L1M3N])
def test_learners_needing_a_decomposable_loss_refuse_the_zero_one_loss(model):
    _, grammar, X, Y, lengths = _data(2)
    with pytest.raises(ValueError, match="does not decompose"):
        model(ConstituencyTree(grammar, loss_type="zero_one")).fit(X, Y, lengths=lengths)


def _exact_p1(structure, batch, Y, spec):
    """min 1/2 ||w||_1 + C sum_i xi_i over every tree, by scipy's LP."""
    G, c, groups = enumerate_constraints(structure, batch, Y, labelings=tree_labelings(spec))
    K, n = G.shape[1], batch.n_sequences
    A = np.hstack([-G, G, -np.eye(n)[groups]])
    cost = np.concatenate([np.full(2 * K, 0.5), np.full(n, C)])
    result = linprog(cost, A_ub=A, b_ub=-c, bounds=(0, None), method="highs")
    assert result.status == 0
    return result.fun


@pytest.mark.parametrize("solver", ["cutting_plane", "em"])
def test_l1_learner_reaches_the_exact_optimum(solver):
    spec, grammar, X, Y, lengths = _data(3)
    params = {"tol": 1e-9} if solver == "cutting_plane" else {"tol": 1e-8, "max_iter": 200}
    model = _fit(L1M3N(ConstituencyTree(grammar), C=C, solver=solver, **params), X, Y,
                 lengths)
    batch, y_flat, _ = model._validate_input(X, Y, lengths, reset=False)
    optimum = _exact_p1(model.structure_, batch, model._encode_known(np.asarray(y_flat)),
                        spec)
    objective = model.objective(X, Y, lengths=lengths)
    if solver == "cutting_plane":
        assert objective == pytest.approx(optimum, rel=1e-7, abs=1e-9)
    else:  # the EM solver of P1 at C
        assert optimum - 1e-9 <= objective <= optimum * (1 + 1e-4)


def test_a_label_missing_from_the_training_rows_is_a_clear_error():
    _, grammar, X, Y, lengths = _data(0)
    rows = np.arange(lengths[0])  # the first sentence alone lacks some labels
    if np.unique(Y[rows]).shape[0] == grammar.n_labels + 1:
        pytest.skip("the first sentence has every label")
    with pytest.raises(ValueError, match="states"):
        StructSVMCuttingPlane(ConstituencyTree(grammar)).fit(X[rows], Y[rows],
                                                             lengths=lengths[:1])
