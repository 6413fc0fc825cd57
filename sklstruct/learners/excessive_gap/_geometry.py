"""Inner products of weights kept as token x state coefficients ``A`` (w's unary part).

A dual learner keeps the unary part of ``w`` as ``W^T = X^T A`` for a token x state matrix
``A = C (onehot(y) - marginals)``. :class:`LinearGeometry` forms ``W^T`` explicitly (memory
n_features x n_states); :class:`KernelGeometry` never forms it and works with the token kernel
matrix ``K`` instead (``X W^T = K A``, ``||W||^2 = <A, K A>``), which is what a non-linear
kernel needs (Zhang, Saha and Vishwanathan, section 4.3, Theorem 9).

Both represent a weight vector's unary part by an opaque ``rep`` that supports ``scores(rep)``
(token x state scores on the training tokens), ``norm_sq(rep)`` and linear combinations
``combine_into(out, a, rep1, b, rep2)`` into the arrays of another ``rep`` (``empty_like``).
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import safe_sparse_dot

from ..._inference.chain import csr_product
from ...structures._base import BaseStructure


class LinearGeometry:
    """``rep = W^T`` (n_features x n_states).

    With sparse token features and the structure's plain unary feature map ``X^T A``, both
    products (``X^T A`` through the rows of ``X^T``, kept in CSR form, and ``X W^T``) run
    in compiled code on ``n_jobs`` threads into arrays they are given, with scipy's doubles.
    """

    def __init__(self, structure, batch, n_jobs=None):
        self.structure, self.batch, self.n_jobs = structure, batch, n_jobs
        self.csr = self.csr_t = None
        plain = type(structure).unary_features is BaseStructure.unary_features
        n_tokens, n_features = batch.X.shape
        small = max(n_tokens, n_features) <= np.iinfo(np.int32).max  # (int32 indices)
        if plain and small and sp.issparse(batch.X) and n_tokens and n_features:
            self.csr = batch.csr_arrays
            # X^T's rows hold their tokens in increasing order: each entry of X^T A sums
            # its terms in the order of scipy's product with the transpose
            X_t = sp.csr_matrix(batch.X).T.tocsr()
            X_t.sort_indices()
            self.csr_t = (np.ascontiguousarray(X_t.indptr, dtype=np.int64),
                          np.ascontiguousarray(X_t.indices, dtype=np.int32),
                          np.ascontiguousarray(X_t.data, dtype=np.float64))

    def represent(self, A, out=None):
        """``X^T A``, into ``out`` when given and the product is compiled (else a new
        array)."""
        if self.csr_t is None:
            return self.structure.unary_features(self.batch, A)
        if out is None:
            out = np.empty((self.batch.X.shape[1], A.shape[1]))
        return csr_product(self.csr_t, A, out, self.n_jobs)

    def scores(self, rep, out=None):
        """``X W^T``, into ``out`` when given and the product is compiled (else a new
        array)."""
        if self.csr is None:
            return np.ascontiguousarray(safe_sparse_dot(self.batch.X, rep, dense_output=True))
        if out is None:
            out = np.empty((self.batch.X.shape[0], rep.shape[1]))
        return csr_product(self.csr, rep, out, self.n_jobs)

    @staticmethod
    def norm_sq(rep):
        return float(np.vdot(rep, rep))

    @staticmethod
    def empty_like(rep):
        return np.empty_like(rep)

    @staticmethod
    def combine_into(out, a, rep1, b, rep2):
        """``out = a rep1 + b rep2`` (the bits of that expression); ``rep2`` is overwritten."""
        _combine_into(out, a, rep1, b, rep2)


class KernelGeometry:
    """``rep = (A, K A)`` with ``K`` the kernel matrix of the training tokens."""

    def __init__(self, K):
        self.K = K

    def represent(self, A, out=None):
        return A.copy(), self.K @ A

    @staticmethod
    def scores(rep, out=None):
        return rep[1]

    @staticmethod
    def norm_sq(rep):
        return float(np.vdot(rep[0], rep[1]))

    @staticmethod
    def empty_like(rep):
        return np.empty_like(rep[0]), np.empty_like(rep[1])

    @staticmethod
    def combine_into(out, a, rep1, b, rep2):
        """``out = a rep1 + b rep2`` (the bits of that expression); ``rep2`` is overwritten."""
        for part in range(2):
            _combine_into(out[part], a, rep1[part], b, rep2[part])


def _combine_into(out, a, x, b, y):
    """``out = a x + b y`` in place, as numpy evaluates the expression (``y`` is overwritten;
    ``out`` may be ``x``): no array is allocated."""
    np.multiply(x, a, out=out)
    y *= b
    out += y
