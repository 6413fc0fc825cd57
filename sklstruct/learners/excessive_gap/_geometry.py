"""Inner products of weights kept as token x state coefficients ``A`` (w's unary part).

A dual learner keeps the unary part of ``w`` as ``W^T = X^T A`` for a token x state matrix
``A = C (onehot(y) - marginals)``. :class:`LinearGeometry` forms ``W^T`` explicitly (memory
n_features x n_states); :class:`KernelGeometry` never forms it and works with the token kernel
matrix ``K`` instead (``X W^T = K A``, ``||W||^2 = <A, K A>``), which is what a non-linear
kernel needs (Zhang, Saha and Vishwanathan, section 4.3, Theorem 9).

Both represent a weight vector's unary part by an opaque ``rep`` that supports ``scores(rep)``
(token x state scores on the training tokens), ``norm_sq(rep)`` and linear combinations
``combine(a, rep1, b, rep2)``.
"""

import numpy as np
from sklearn.utils.extmath import safe_sparse_dot


class LinearGeometry:
    """``rep = W^T`` (n_features x n_states)."""

    def __init__(self, structure, batch):
        self.structure, self.batch = structure, batch

    def represent(self, A):
        return self.structure.unary_features(self.batch, A)

    def scores(self, rep):
        return np.ascontiguousarray(safe_sparse_dot(self.batch.X, rep, dense_output=True))

    @staticmethod
    def norm_sq(rep):
        return float(np.vdot(rep, rep))

    @staticmethod
    def combine(a, rep1, b, rep2):
        return a * rep1 + b * rep2


class KernelGeometry:
    """``rep = (A, K A)`` with ``K`` the kernel matrix of the training tokens."""

    def __init__(self, K):
        self.K = K

    def represent(self, A):
        return A, self.K @ A

    @staticmethod
    def scores(rep):
        return rep[1]

    @staticmethod
    def norm_sq(rep):
        return float(np.vdot(rep[0], rep[1]))

    @staticmethod
    def combine(a, rep1, b, rep2):
        return a * rep1[0] + b * rep2[0], a * rep1[1] + b * rep2[1]
