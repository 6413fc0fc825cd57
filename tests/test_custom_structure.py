"""Structures written in user code against the documented interface train with every learner
whose oracles they provide, and reach the exact optimum (by enumeration) within the gap."""

import importlib.util
import os
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (L1M3N, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct.structures import BaseStructure

from ._enumeration import exact_optimum
from .test_l1 import _exact_p1

_PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "custom_structure.py")
_spec = importlib.util.spec_from_file_location("custom_structure", _PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

STRUCTURES = {
    "second order (Python oracles)": lambda: example.SecondOrderChain(),
    "confusion cost (compiled kernels)": lambda: example.ConfusionCostChain(
        cost=[[0.0, 1.0, 2.5], [3.0, 0.0, 0.5], [1.0, 1.0, 0.0]]),
}

L2_LEARNERS = {
    "1-slack": lambda s: StructSVMCuttingPlane(s, C=0.7, tol=1e-7),
    "n-slack": lambda s: StructSVMCuttingPlane(s, C=0.7, tol=1e-7, variant="n-slack"),
    "exp_grad": lambda s: M3NExpGrad(s, C=0.7, tol=1e-6, max_iter=20000),
    "exp_grad batch": lambda s: M3NExpGrad(s, C=0.7, tol=1e-6, max_iter=20000,
                                           algorithm="batch"),
    "excessive_gap": lambda s: M3NExcessiveGap(s, C=0.7, tol=1e-6, max_iter=20000),
    "simplicial": lambda s: M3NSimplicialDecomposition(s, C=0.7, tol=1e-7, max_iter=5000,
                                                       random_state=0),
    "simplicial working sets": lambda s: M3NSimplicialDecomposition(
        s, C=0.7, tol=1e-7, max_iter=5000, working_set_size=3, random_state=0),
    "frank_wolfe": lambda s: M3NSimplicialDecomposition(s, C=0.7, tol=1e-3, max_iter=5000,
                                                        max_points=1, random_state=0),
}


def _data():
    return example.tiny_problem(seed=3, n_sequences=5, n_states=3, n_features=2, max_length=4)


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("learner", L2_LEARNERS)
def test_l2_learners_reach_the_exact_optimum(structure, learner):
    X, y = _data()
    model = _fit(L2_LEARNERS[learner](STRUCTURES[structure]()), X, y)
    batch, y_flat, _ = model._validate_input(X, y, reset=False)
    Y = model._encode_known(np.asarray(y_flat))
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, model.C)
    h = model.history_
    objective = model.objective(X, y)
    assert objective == pytest.approx(h["primal"][-1], rel=1e-9)
    assert h["dual"][-1] <= upper + 1e-9
    assert objective >= lower - 1e-9
    assert objective - lower <= h["gap"][-1] + 1e-7 * upper


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("solver", ["cutting_plane", "em", "subgradient"])
def test_l1_learner_trains(structure, solver):
    X, y = _data()
    params = {"subgradient": dict(radius=2.0), "em": dict(tol=1e-8, max_iter=200)}.get(solver, {})
    model = _fit(L1M3N(STRUCTURES[structure](), C=0.7, solver=solver, **params), X, y)
    assert np.all(np.isfinite(model.w_)) and len(model.predict(X)) == len(X)
    if solver == "em":  # the default EM solves P1 at C, on compiled and Python oracles alike
        batch, y_flat, _ = model._validate_input(X, y, reset=False)
        Y = model._encode_known(np.asarray(y_flat))
        optimum, _ = _exact_p1(model.structure_, batch, Y, 0.7)
        assert optimum - 1e-9 <= model.objective(X, y) <= optimum * (1 + 1e-4)
    if solver == "cutting_plane":
        batch, y_flat, _ = model._validate_input(X, y, reset=False)
        Y = model._encode_known(np.asarray(y_flat))
        optimum, _ = _exact_p1(model.structure_, batch, Y, 0.7)
        assert model.objective(X, y) == pytest.approx(optimum, rel=1e-7, abs=1e-9)


def test_compiled_passes_use_the_structures_loss():
    """The confusion cost reaches the compiled passes through the structure's loss matrix:
    the compiled and the Python solver of the same learner agree."""
    X, y = _data()
    structure = STRUCTURES["confusion cost (compiled kernels)"]()
    compiled = _fit(M3NSimplicialDecomposition(structure, C=0.7, tol=1e-8, max_iter=5000,
                                               random_state=0), X, y)
    general = _fit(M3NSimplicialDecomposition(structure, C=0.7, tol=1e-8, max_iter=5000,
                                              working_set_size=2, random_state=0), X, y)
    tolerance = compiled.history_["gap"][-1] + general.history_["gap"][-1]
    assert abs(compiled.objective(X, y) - general.objective(X, y)) <= tolerance + 1e-9


class _NoOracles(BaseStructure):
    """A structure that gives neither oracle."""


@pytest.mark.parametrize("model", [StructSVMCuttingPlane(_NoOracles()),
                                   M3NExpGrad(_NoOracles()),
                                   M3NSimplicialDecomposition(_NoOracles())])
def test_a_missing_oracle_is_a_clear_error(model):
    X, y = _data()
    with pytest.raises(NotImplementedError, match="oracle"):
        model.fit(X, y)


class _ShadowingLoss(BaseStructure):
    """A structure whose parameter takes the name of a structure method."""

    def __init__(self, loss="hamming"):
        self.loss = loss


def test_a_parameter_named_like_a_method_is_refused():
    X, y = _data()
    with pytest.raises(TypeError, match=r"\['loss'\] have the names of structure methods"):
        StructSVMCuttingPlane(_ShadowingLoss()).fit(X, y)


BAD_COSTS = {
    "negative": ([[0.0, -1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], "negative"),
    "NaN": ([[0.0, np.nan, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], "NaN or infinite"),
    "infinite": ([[0.0, np.inf, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], "NaN or infinite"),
    "true state": ([[0.5, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], "zero at each"),
    "shape": ([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], "shape"),
}


@pytest.mark.parametrize("cost", BAD_COSTS)
@pytest.mark.parametrize("learner", list(L2_LEARNERS) + ["l1 em", "l1 cutting plane"])
def test_a_token_loss_outside_the_learners_assumptions_is_refused(cost, learner):
    """A loss that is negative, not finite, not zero at the true state or of the wrong shape
    went to the oracles and compiled passes as given (a NaN cost gave NaN objectives)."""
    X, y = _data()
    values, message = BAD_COSTS[cost]
    structure = example.ConfusionCostChain(cost=values)
    model = {"l1 em": lambda s: L1M3N(s, C=0.7, max_iter=3),
             "l1 cutting plane": lambda s: L1M3N(s, C=0.7, solver="cutting_plane")}.get(
        learner, L2_LEARNERS.get(learner))(structure)
    with pytest.raises(ValueError, match=message):
        _fit(model, X, y)


def test_a_token_loss_defined_without_a_module_is_checked():
    """A method made by ``exec`` without ``__name__`` in its globals has no module."""
    namespace = {}
    exec("def token_loss(self, Y):\n    return np.asarray(self.cost, dtype=float)[Y]\n",
         {"np": np}, namespace)
    assert namespace["token_loss"].__module__ is None
    structure_class = type("ExecCostChain", (example.ConfusionCostChain,),
                           {"token_loss": namespace["token_loss"]})
    X, y = _data()
    values, message = BAD_COSTS["true state"]
    with pytest.raises(ValueError, match=message):
        _fit(M3NSimplicialDecomposition(structure_class(cost=values), C=0.7,
                                        working_set_size=2), X, y)
