"""Randomised inputs across magnitudes, lengths, label counts and input forms.

Every estimator must give finite weights, predictions among its classes and finite marginals
that sum to one, and equal inputs in different forms (dense, CSR, read-only, non-canonical
CSR) must give the same model. The short profile runs in the test suite; set
``SKLSTRUCT_FUZZ=long`` for the long one (more seeds, longer sequences, more labels).
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from sklstruct import (L1M3N, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)

# the fits are deliberately short (and some data absurdly scaled): non-convergence is expected
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

LONG = os.environ.get("SKLSTRUCT_FUZZ") == "long"
SEEDS = range(6 if LONG else 2)
SCALES = [1e-300, 1e-8, 1.0, 1e8, 1e150]
ESTIMATORS = [
    StructSVMCuttingPlane(C=1.0, max_iter=30),
    StructSVMCuttingPlane(C=1.0, variant="n-slack", max_iter=5, random_state=0),
    M3NExpGrad(C=1.0, max_iter=10, random_state=0),
    M3NExcessiveGap(C=1.0, max_iter=20),
    M3NSimplicialDecomposition(C=1.0, max_iter=20, random_state=0),
    M3NSimplicialDecomposition(C=1.0, max_points=1, max_iter=20, random_state=0),
    L1M3N(C=1.0, max_iter=2),
]


def _random_chains(seed, scale):
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(2, 40 if LONG else 8))
    max_length = 2000 if LONG else 30
    lengths = rng.integers(1, max_length, size=int(rng.integers(2, 12)))
    n_features = int(rng.integers(1, 30))
    X = []
    for length in lengths:
        x = rng.normal(size=(length, n_features)) * (rng.random((length, n_features)) < 0.3)
        X.append(x * scale)
    y = [rng.integers(0, n_states, size=length) for length in lengths]
    y[0][: min(n_states, lengths[0])] = np.arange(min(n_states, lengths[0]))
    return X, y


def _check_model(model, X, y):
    assert np.all(np.isfinite(model.w_))
    classes = set(model.classes_.tolist())
    for predicted, truth in zip(model.predict(X), y):
        assert predicted.shape == truth.shape
        assert set(predicted.tolist()) <= classes
    for marginals in model.predict_marginals(X):
        assert np.all(np.isfinite(marginals))
        np.testing.assert_allclose(marginals.sum(axis=1), 1.0, rtol=1e-9)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e)[:60])
def test_finite_models_at_every_magnitude(estimator, scale):
    for seed in SEEDS:
        X, y = _random_chains(seed, scale)
        model = clone(estimator)
        try:
            model.fit(X, y)
        except ValueError as error:
            # M3NExcessiveGap's smoothing bound (n C max_i (sum_t ||x_t||)^2) may not be
            # representable: then a clear error, not a wrong model
            log_bound = np.log10(len(X)) + 2 * max(
                np.log10(np.linalg.norm(x / scale, axis=1).sum()) for x in X) \
                + 2 * np.log10(scale)
            assert isinstance(model, M3NExcessiveGap) and "rescale X" in str(error)
            assert log_bound > 300
            continue
        _check_model(model, X, y)


def _forms(X):
    """The same token matrices as dense, CSR, read-only CSR and CSR with split entries."""
    dense = [np.asarray(x) for x in X]
    csr = [sp.csr_matrix(x) for x in X]
    read_only = []
    for x in csr:
        x = x.copy()
        for array in (x.data, x.indices, x.indptr):
            array.setflags(write=False)
        read_only.append(x)
    split = []
    for x in csr:
        halves = sp.csr_matrix((np.repeat(x.data / 2.0, 2), np.repeat(x.indices, 2),
                                2 * x.indptr), shape=x.shape)
        split.append(halves)
    return {"dense": dense, "csr": csr, "read_only": read_only, "split": split}


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e)[:60])
def test_equal_inputs_in_other_forms_give_the_same_model(estimator):
    """The sparse forms give the same weights as CSR; a dense matrix (whose products round
    differently) gives the same objective within the two fits' certified gaps."""
    for seed in SEEDS:
        X, y = _random_chains(seed, 1.0)
        models = {name: clone(estimator).fit(Xf, y) for name, Xf in _forms(X).items()}
        reference, dense = models.pop("csr"), models.pop("dense")
        for name, model in models.items():
            np.testing.assert_allclose(model.w_, reference.w_, rtol=1e-9, atol=1e-12,
                                       err_msg=name)
        gaps = [m.history_["gap"][-1] for m in (reference, dense)]
        if np.all(np.isfinite(gaps)):
            assert abs(dense.objective(X, y) - reference.objective(X, y)) <= \
                sum(gaps) + 1e-9 * abs(reference.objective(X, y))


@pytest.mark.parametrize("estimator", ESTIMATORS[:1] + ESTIMATORS[4:5],
                         ids=lambda e: repr(e)[:60])
def test_float32_input_equals_its_float64_values(estimator):
    X, y = _random_chains(3, 1.0)
    X32 = [x.astype(np.float32) for x in X]
    a = clone(estimator).fit(X32, y)
    b = clone(estimator).fit([x.astype(np.float64) for x in X32], y)
    np.testing.assert_array_equal(a.w_, b.w_)


@pytest.mark.skipif(not LONG, reason="long profile (SKLSTRUCT_FUZZ=long)")
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e)[:60])
def test_long_sequences_and_many_labels(estimator):
    """One sequence of 100,000 tokens, and 1,000 labels over 1,200 tokens: finite models."""
    rng = np.random.default_rng(7)
    n, d = 100_000, 50
    X = sp.random(n, d, density=0.1, format="csr", random_state=1)
    y = np.asarray((X @ rng.normal(size=(d, 5))).argmax(axis=1)).ravel()
    model = clone(estimator).set_params(max_iter=2).fit([X], [y])
    _check_model(model, [X], [y])
    X = [rng.normal(size=(24, 10)) for _ in range(50)]
    y = [rng.integers(0, 1000, size=24) for _ in range(50)]
    model = clone(estimator).set_params(max_iter=2).fit(X, y)
    _check_model(model, X[:5], y[:5])
