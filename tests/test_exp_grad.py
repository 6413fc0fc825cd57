"""M3NExpGrad (seed 001) against exact optima and the cutting-plane learner."""

import numpy as np
import pytest

from sklstruct import ChainStructure, M3NExpGrad, StructSVMCuttingPlane
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from .conftest import make_chain_data


@pytest.mark.parametrize("structure", [ChainStructure(start_end=False),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5])])
def test_reaches_exact_optimum_on_tiny_chains(structure):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    model = M3NExpGrad(structure, C=0.5, tol=1e-6, max_iter=20000).fit(X, y)
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = model._encode_known(np.concatenate(y))
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, 0.5)
    ours = primal_objective(model.structure_, batch, Y, model.w_, 0.5)
    gap = model.history_["gap"][-1]
    assert lower - 1e-9 <= ours <= upper + gap + 1e-9
    assert gap <= 1e-6 * ours + 1e-12


def test_matches_cutting_plane_and_dual_never_decreases():
    X, y = make_chain_data(n_sequences=40, seed=0)
    eg = M3NExpGrad(C=1.0, tol=1e-5, max_iter=10000).fit(X, y)
    cp = StructSVMCuttingPlane(C=1.0, tol=1e-6).fit(X, y)
    h = eg.history_
    assert np.all(np.diff(h["dual"]) >= -1e-9 * abs(h["dual"][-1]))
    assert np.all(h["gap"] >= -1e-9)
    tolerance = h["gap"][-1] + cp.history_["gap"][-1]
    assert abs(eg.objective(X, y) - cp.objective(X, y)) <= tolerance + 1e-9


def test_warm_start_continues_from_the_last_dual():
    X, y = make_chain_data(n_sequences=20, seed=1)
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NExpGrad(C=1.0, tol=1e-8, max_iter=50, warm_start=True).fit(X, y)
        first_dual = model.history_["dual"][-1]
        model.fit(X, y)
    assert model.history_["dual"][0] >= first_dual - 1e-12
    fresh = M3NExpGrad(C=1.0, tol=1e-8, max_iter=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fresh.fit(X, y)
    assert model.history_["dual"][-1] > fresh.history_["dual"][-1]


def test_sample_weight_is_refused():
    X, y = make_chain_data(n_sequences=5, seed=1)
    with pytest.raises(TypeError):
        M3NExpGrad().fit(X, y, sample_weight=np.ones(5))
