"""Cutting-plane constraints stored as labelings, not as parameter-sized vectors.

A constraint direction ``g = sum_i s_i (Psi(x_i, y_i) - Psi(x_i, ybar_i))`` is kept through the
tokens where ``ybar`` differs from ``y`` (their index, the wrong label and the per-token scale
``s_i``) plus its small pairwise part. Inner products with any weight vector then cost one
unary-score computation and a gather, and ``w = sum_k alpha_k g_k`` is one sparse product
``M^T X`` -- so a working set of hundreds of constraints over millions of parameters stays cheap.
"""

import numpy as np
import scipy.sparse as sp


class ConstraintDirection:
    """One constraint direction ``g`` and its offset ``c`` (``w . g >= c - xi``)."""

    __slots__ = ("tokens", "labels", "scale", "pairwise", "offset")

    def __init__(self, tokens, labels, scale, pairwise, offset):
        self.tokens = tokens
        self.labels = labels
        self.scale = scale
        self.pairwise = pairwise
        self.offset = offset

    @classmethod
    def from_labelings(cls, structure, batch, Y, Ybar, sequence_scale, offset):
        """Direction ``sum_i s_i (Psi(y_i) - Psi(ybar_i))`` for per-sequence scales ``s_i``."""
        differs = np.flatnonzero(Y != Ybar)
        token_scale = sequence_scale[batch.sequence_index[differs]]
        pairwise = sequence_scale @ (
            structure.pairwise_statistics(batch, Y) - structure.pairwise_statistics(batch, Ybar)
        )
        return cls(differs, Ybar[differs].astype(np.int32), token_scale, pairwise, float(offset))

    def dot_unary(self, Y, unary):
        """``g_unary . v`` given ``unary = X V^T`` for the unary part ``V`` of ``v``."""
        t = self.tokens
        return float(self.scale @ (unary[t, Y[t]] - unary[t, self.labels]))


class WorkingSet:
    """A growing/shrinking set of constraints with its Gram matrix kept up to date."""

    def __init__(self, structure, batch, Y):
        self.structure = structure
        self.batch = batch
        self.Y = Y
        self.constraints = []
        self.gram = np.zeros((0, 0))

    def __len__(self):
        return len(self.constraints)

    @property
    def offsets(self):
        return np.array([c.offset for c in self.constraints])

    def dense_direction(self, constraint):
        """The full direction vector of one constraint, shape (size_joint_feature,)."""
        return self._combination([(1.0, constraint)])

    def add(self, constraint):
        """Append a constraint and grow the Gram matrix by one row and column."""
        g = self.dense_direction(constraint)
        unary = self.structure.unary_potentials(self.batch, g)
        row = np.array(
            [c.dot_unary(self.Y, unary) + c.pairwise @ constraint.pairwise
             for c in self.constraints] + [float(g @ g)]
        )
        k = len(self.constraints)
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :] = row
        gram[:, k] = row
        self.gram = gram
        self.constraints.append(constraint)

    def remove(self, keep):
        """Keep only the constraints whose mask entry is true (rows/columns dropped)."""
        keep = np.asarray(keep, dtype=bool)
        self.constraints = [c for c, k in zip(self.constraints, keep) if k]
        self.gram = self.gram[np.ix_(keep, keep)]

    def combine(self, alpha):
        """``w = sum_k alpha_k g_k`` as a flat weight vector."""
        return self._combination([(a, c) for a, c in zip(alpha, self.constraints) if a > 0])

    def _combination(self, weighted):
        structure, batch = self.structure, self.batch
        if not weighted:
            return np.zeros(structure.size_joint_feature_)
        rows = np.concatenate([np.concatenate([c.tokens, c.tokens]) for _, c in weighted])
        cols = np.concatenate([np.concatenate([self.Y[c.tokens], c.labels]) for _, c in weighted])
        vals = np.concatenate([a * np.concatenate([c.scale, -c.scale]) for a, c in weighted])
        D = sp.csr_matrix((vals, (rows, cols)), shape=(batch.n_tokens, structure.n_states_))
        unary = structure.unary_features(batch, D)
        pairwise = np.zeros(structure.n_pairwise_)
        for a, c in weighted:
            pairwise += a * c.pairwise
        return np.concatenate([unary.ravel(), pairwise])
