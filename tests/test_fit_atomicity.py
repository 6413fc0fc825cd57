"""A fit that fails or is interrupted leaves the estimator as it was."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, StructSVMCuttingPlane)

from ._helpers import make_chain_data


class _InterruptedChain(ChainStructure):
    """A chain whose oracles and unary statistics raise KeyboardInterrupt from their second
    call on (the compiled passes call neither; their certificates do)."""

    def __init__(self, *, start_end=True, class_weight=None):
        super().__init__(start_end=start_end, class_weight=class_weight)

    def _tick(self):
        self.calls_ = getattr(self, "calls_", 0) + 1
        if self.calls_ >= 2:
            raise KeyboardInterrupt

    def loss_augmented_decode(self, *args, **kwargs):
        self._tick()
        return super().loss_augmented_decode(*args, **kwargs)

    def marginals(self, *args, **kwargs):
        self._tick()
        return super().marginals(*args, **kwargs)

    def unary_features(self, *args, **kwargs):
        self._tick()
        return super().unary_features(*args, **kwargs)


class _InterruptedCallback:
    """A progress callback that raises KeyboardInterrupt from its second call on."""

    def __init__(self):
        self.calls = 0

    def __call__(self, estimator, info):
        self.calls += 1
        if self.calls >= 2:
            raise KeyboardInterrupt
        return False


LEARNERS = [
    StructSVMCuttingPlane(C=0.5),
    StructSVMCuttingPlane(C=0.5, variant="n-slack"),
    M3NExpGrad(C=0.5, max_iter=20),
    M3NExpGrad(C=0.5, max_iter=20, algorithm="batch"),
    M3NExcessiveGap(C=0.5, max_iter=20),
    L1M3N(C=0.5, solver="cutting_plane"),
    L1M3N(C=0.5, max_iter=2),
    M3NSimplicialDecomposition(C=0.5, max_iter=20, random_state=0),
    M3NSimplicialDecomposition(C=0.5, max_iter=20, random_state=0, working_set_size=4),
]


def _snapshot(model):
    return {k: v for k, v in vars(model).items() if k.endswith("_")}


@pytest.mark.parametrize("model", LEARNERS, ids=repr)
def test_interrupted_refit_leaves_the_previous_model(model):
    X, y = make_chain_data(n_sequences=20, seed=2)
    names = np.array(["alpha", "beta", "gamma"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, [names[labels] for labels in y])
    before = _snapshot(model)
    predicted = model.predict(X)
    # new labels and an interrupted oracle (or, for the compiled passes, which call no
    # structure method after their set-up, an interrupted progress callback)
    model.set_params(structure=_InterruptedChain(), callback=_InterruptedCallback())
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, [labels % 2 for labels in y])
    after = _snapshot(model)
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] is value, key
    for a, b in zip(model.predict(X), predicted):
        np.testing.assert_array_equal(a, b)


def test_failed_refit_leaves_the_previous_model():
    X, y = make_chain_data(n_sequences=20, seed=2)
    model = StructSVMCuttingPlane(C=0.5).fit(X, y)
    before = _snapshot(model)
    bad = [x.copy() for x in X]
    bad[3][0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(bad, [labels % 2 for labels in y])
    with pytest.raises(ValueError, match="one class"):
        model.fit(X, [np.zeros_like(labels) for labels in y])
    after = _snapshot(model)
    assert after.keys() == before.keys()
    assert all(after[key] is value for key, value in before.items())


def test_an_unfitted_estimator_stays_unfitted():
    X, y = make_chain_data(n_sequences=10, seed=2)
    model = StructSVMCuttingPlane(_InterruptedChain(), C=0.5)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, y)
    assert not [k for k in vars(model) if k.endswith("_")]


@pytest.mark.parametrize("model", [
    M3NExpGrad(C=0.5, tol=0.2, warm_start=True, random_state=0),
    M3NExpGrad(C=0.5, tol=0.2, warm_start=True, random_state=0, algorithm="batch"),
    M3NSimplicialDecomposition(C=0.5, tol=0.2, warm_start=True, random_state=0),
    M3NSimplicialDecomposition(C=0.5, tol=0.2, warm_start=True, random_state=0, max_points=1),
    M3NSimplicialDecomposition(C=0.5, tol=0.2, warm_start=True, random_state=0,
                               blocks="single"),
], ids=repr)
def test_interrupted_warm_start_leaves_no_changed_dual_state(model):
    """A continued fit changes the previous dual state in place: when it is interrupted the
    state is dropped with it, so the next fit equals a fit from scratch, not a continuation
    of the interrupted passes."""
    X, y = make_chain_data(n_sequences=20, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
        before = _snapshot(model)
        model.set_params(tol=1e-9, max_iter=10**4, callback=_InterruptedCallback())
        with pytest.raises(KeyboardInterrupt):
            model.fit(X, y)
        after = _snapshot(model)
        assert all(after[key] is value for key, value in before.items())
        model.set_params(tol=0.2, max_iter=1000, callback=None).fit(X, y)
        fresh = clone(model).set_params(warm_start=False).fit(X, y)
    np.testing.assert_array_equal(model.coef_, fresh.coef_)
    assert model.n_iter_ == fresh.n_iter_ > 0
