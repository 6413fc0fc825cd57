"""Low-rank kernel feature maps on token features (Joachims, Finley and Yu 2009, section 3.3)."""

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state


def token_kernel(X, Y, kernel, gamma, degree, coef0):
    """Kernel matrix between token feature matrices (``kernel`` a name or a callable)."""
    if callable(kernel):
        K = np.asarray(kernel(X, Y), dtype=np.float64)
        if K.shape != (X.shape[0], Y.shape[0]):
            raise ValueError(f"The kernel callable returned shape {K.shape}, expected "
                             f"{(X.shape[0], Y.shape[0])}.")
        return K
    params = {}
    if kernel in ("rbf", "poly"):
        params["gamma"] = gamma
    if kernel == "poly":
        params.update(degree=degree, coef0=coef0)
    return np.asarray(pairwise_kernels(X, Y, metric=kernel, **params), dtype=np.float64)


class LowRankKernelMap:
    """Map tokens to ``phi(x) = S^{-1/2} U^T k(B, x)`` for a basis ``B`` of ``k`` tokens.

    With ``K_BB = U S U^T`` the kernel matrix of the basis, ``phi(x) . phi(x') `` is the
    Nystroem approximation of ``k(x, x')``, exact on the span of the basis. This is the
    paper's ``L^{-1} (K(x, b_1), ..., K(x, b_k))`` up to an orthogonal rotation (which leaves
    an L2-regularised linear model unchanged); the eigendecomposition also copes with a
    rank-deficient basis by dropping directions with eigenvalues below ``1e-10 * max``.

    Parameters
    ----------
    kernel : {"rbf", "poly"} or callable
        Kernel on token feature vectors; a callable takes two 2-D arrays and returns their
        kernel matrix.
    gamma, degree, coef0 : float
        Kernel parameters as in :func:`sklearn.metrics.pairwise.pairwise_kernels`.
    n_basis : int
        Number of basis tokens drawn at random when ``basis`` is None.
    basis : array-like of shape (k, n_features) or None
        User-given basis tokens.
    random_state : int, RandomState or None
    """

    def __init__(self, kernel, gamma, degree, coef0, n_basis, basis, random_state):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_basis = n_basis
        self.basis = basis
        self.random_state = random_state

    def _kernel(self, A, B):
        return token_kernel(A, B, self.kernel, self.gamma, self.degree, self.coef0)

    def fit(self, X):
        """Choose the basis among the tokens ``X`` (unless given) and factor its kernel."""
        if self.basis is not None:
            basis = np.asarray(self.basis, dtype=np.float64)
            if basis.ndim != 2 or basis.shape[1] != X.shape[1]:
                raise ValueError(
                    f"basis must have shape (k, {X.shape[1]}), got {basis.shape}."
                )
        else:
            rng = check_random_state(self.random_state)
            size = min(self.n_basis, X.shape[0])
            rows = np.sort(rng.choice(X.shape[0], size=size, replace=False))
            basis = X[rows]
            basis = basis.toarray() if hasattr(basis, "toarray") else np.asarray(basis)
        values, vectors = np.linalg.eigh(self._kernel(basis, basis))
        keep = values > 1e-10 * max(values.max(), 1e-300)
        if not np.all(np.isfinite(values)) or not keep.any():
            raise ValueError("The kernel matrix of the basis is not positive semi-definite.")
        self.basis_ = basis
        self.projection_ = vectors[:, keep] / np.sqrt(values[keep])
        return self

    def transform(self, X):
        """Token features in the basis space, shape (n_tokens, rank)."""
        return np.ascontiguousarray(self._kernel(X, self.basis_) @ self.projection_)
