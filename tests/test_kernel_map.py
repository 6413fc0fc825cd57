"""Non-linear chain SVMs through a low-rank kernel basis (Joachims et al. 2009, section 3.3)."""

import numpy as np
import pytest

from sklstruct import ChainStructure, StructSVMCuttingPlane

from ._helpers import make_chain_data


def test_linear_kernel_through_the_basis_matches_the_linear_model():
    # with the linear kernel and a basis spanning the feature space, the map is an isometry
    # on the span of the data, so the optimum is the same
    X, y = make_chain_data(n_sequences=20, n_features=4, seed=3)
    linear = StructSVMCuttingPlane(ChainStructure(), C=1.0, tol=1e-6, cache_size=0).fit(X, y)
    mapped = StructSVMCuttingPlane(
        ChainStructure(), C=1.0, tol=1e-6, cache_size=0, kernel=lambda A, B: A @ B.T,
        basis=np.vstack(X)[:12],
    ).fit(X, y)
    assert mapped.token_map_.projection_.shape[1] == 4
    gap = linear.history_["gap"][-1] + mapped.history_["gap"][-1]
    assert abs(linear.objective(X, y) - mapped.objective(X, y)) <= gap + 1e-9
    for a, b in zip(linear.predict(X), mapped.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_rbf_kernel_learns_a_non_linear_token_rule():
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(60):
        length = rng.integers(2, 6)
        feats = rng.uniform(-1, 1, size=(length, 2))
        X.append(feats)
        y.append((feats[:, 0] * feats[:, 1] > 0).astype(int))  # XOR of signs
    linear = StructSVMCuttingPlane(C=10.0, tol=1e-6).fit(X, y)
    rbf = StructSVMCuttingPlane(C=10.0, tol=1e-3, kernel="rbf", gamma=2.0, n_basis=100,
                                random_state=0).fit(X, y)
    assert linear.score(X, y) < 0.75
    assert rbf.score(X, y) > 0.9
    assert rbf.coef_.shape == (2, rbf.token_map_.projection_.shape[1])
    assert rbf.n_features_in_ == 2


def test_kernel_basis_is_reproducible_and_validated():
    X, y = make_chain_data(n_sequences=15, seed=2)
    a = StructSVMCuttingPlane(kernel="poly", degree=2, n_basis=10, random_state=1).fit(X, y)
    b = StructSVMCuttingPlane(kernel="poly", degree=2, n_basis=10, random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.token_map_.basis_, b.token_map_.basis_)
    with pytest.raises(ValueError, match="basis must have shape"):
        StructSVMCuttingPlane(kernel="rbf", basis=np.ones((3, 7))).fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        StructSVMCuttingPlane(kernel="sigmoid-ish").fit(X, y)
