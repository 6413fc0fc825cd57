"""Cutting-plane constraints stored as labelings, not as parameter-sized vectors.

A constraint direction ``g = sum_i s_i (Psi(x_i, y_i) - Psi(x_i, ybar_i))`` is kept through the
tokens where ``ybar`` differs from ``y`` (their index, the wrong label and the per-token scale
``s_i``) plus its small pairwise part. All constraints share flat arrays, so the inner products
of a new direction with every stored one are one unary-score computation, a gather and a
``bincount``, and ``w = sum_k alpha_k g_k`` is one product ``M^T X`` with a dense token x state
matrix ``M``. A working set of hundreds of constraints over millions of parameters stays cheap.

When the parameter vector is small (``size * 8 bytes`` under ``DENSE_BYTES_PER_CONSTRAINT``),
the directions are also kept as dense rows, and Gram rows and combinations become plain
matrix-vector products.
"""

import numpy as np

DENSE_BYTES_PER_CONSTRAINT = 2**19


class WorkingSet:
    """A set of cutting-plane constraints ``w . g_k >= c_k - xi`` with their Gram matrix.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of shape (n_tokens,)
        Encoded true labels.
    """

    def __init__(self, structure, batch, Y):
        self.structure = structure
        self.batch = batch
        self.Y = Y
        self.tokens = np.zeros(0, dtype=np.int64)
        self.labels = np.zeros(0, dtype=np.int32)
        self.scale = np.zeros(0)
        self.owner = np.zeros(0, dtype=np.int32)
        self.pairwise = np.zeros((0, structure.n_pairwise_))
        self.offsets = np.zeros(0)
        self.gram = np.zeros((0, 0))
        size = structure.size_joint_feature_
        self.directions = np.zeros((0, size)) if 8 * size <= DENSE_BYTES_PER_CONSTRAINT \
            else None

    def __len__(self):
        return self.offsets.shape[0]

    def _token_state_matrix(self, tokens, labels, values):
        """Dense (n_tokens, n_states) ``M`` with ``+v`` at ``(t, y_t)`` and ``-v`` at ``(t, l)``."""
        n_states = self.structure.n_states_
        size = self.batch.n_tokens * n_states
        M = np.bincount(tokens * n_states + self.Y[tokens], weights=values, minlength=size)
        M -= np.bincount(tokens * n_states + labels, weights=values, minlength=size)
        return M.reshape(self.batch.n_tokens, n_states)

    def _direction(self, tokens, labels, values, pairwise):
        unary = self.structure.unary_features(
            self.batch, self._token_state_matrix(tokens, labels, values)
        )
        return np.concatenate([unary.ravel(), pairwise])

    def add(self, Ybar, sequence_scale, offset):
        """Add ``g = sum_i s_i (Psi(y_i) - Psi(ybar_i))`` with offset ``c``.

        The Gram matrix grows by one row and column: the new direction's inner products with
        the stored ones come from the unary scores it induces, gathered at their tokens.
        """
        structure, batch, Y = self.structure, self.batch, self.Y
        tokens = np.flatnonzero(Y != Ybar)
        labels = Ybar[tokens].astype(np.int32)
        scale = sequence_scale[batch.sequence_index[tokens]]
        pairwise = structure.pairwise_statistics(batch, Y, sequence_scale) - \
            structure.pairwise_statistics(batch, Ybar, sequence_scale)
        g = self._direction(tokens, labels, scale, pairwise)
        k = len(self)
        row = np.empty(k + 1)
        if self.directions is not None:
            if k == self.directions.shape[0]:
                grown = np.zeros((max(2 * k, 16), g.shape[0]))
                grown[:k] = self.directions
                self.directions = grown
            self.directions[k] = g
            row[:k] = self.directions[:k] @ g
        elif k:
            unary = structure.unary_potentials(batch, g)
            t = self.tokens
            gathered = self.scale * (unary[t, Y[t]] - unary[t, self.labels])
            row[:k] = np.bincount(self.owner, weights=gathered, minlength=k) + \
                self.pairwise @ pairwise
        row[k] = g @ g
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :] = row
        gram[:, k] = row
        self.gram = gram
        if self.directions is None:
            self.tokens = np.concatenate([self.tokens, tokens])
            self.labels = np.concatenate([self.labels, labels])
            self.scale = np.concatenate([self.scale, scale])
            self.owner = np.concatenate([self.owner, np.full(tokens.shape[0], k, dtype=np.int32)])
        self.pairwise = np.vstack([self.pairwise, pairwise])
        self.offsets = np.append(self.offsets, float(offset))

    def remove(self, keep):
        """Keep only the constraints whose mask entry is true (rows/columns dropped)."""
        keep = np.asarray(keep, dtype=bool)
        new_index = np.cumsum(keep) - 1
        on_tokens = keep[self.owner]
        self.tokens = self.tokens[on_tokens]
        self.labels = self.labels[on_tokens]
        self.scale = self.scale[on_tokens]
        self.owner = new_index[self.owner[on_tokens]].astype(np.int32)
        self.pairwise = self.pairwise[keep]
        self.offsets = self.offsets[keep]
        self.gram = self.gram[np.ix_(keep, keep)]
        if self.directions is not None:
            self.directions = self.directions[: keep.shape[0]][keep]

    def combine(self, alpha):
        """``w = sum_k alpha_k g_k`` as a flat weight vector."""
        if self.directions is not None:
            return alpha @ self.directions[: alpha.shape[0]]
        values = alpha[self.owner] * self.scale
        return self._direction(self.tokens, self.labels, values, alpha @ self.pairwise)
