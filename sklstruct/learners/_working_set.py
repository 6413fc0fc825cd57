"""Cutting-plane constraints stored as labelings, not as parameter-sized vectors.

A constraint direction ``g = sum_i s_i (Psi(x_i, y_i) - Psi(x_i, ybar_i))`` is kept through the
tokens where ``ybar`` differs from ``y`` (their index, the wrong label and the per-token scale
``s_i``) plus its small pairwise part. All constraints share flat, growable arrays, so the inner
products of a new direction with every stored one are one unary-score computation, a gather and
a ``bincount``, and ``w = sum_k alpha_k g_k`` is one product ``M^T X`` with a dense token x state
matrix ``M``. A working set of hundreds of constraints over millions of parameters stays cheap.

When the parameter vector is small (``size * 8 bytes`` at most ``DENSE_BYTES_PER_CONSTRAINT``),
the directions are kept as dense rows instead, and Gram rows and combinations become plain
matrix-vector products.
"""

import numpy as np

from .._inference._constraints import constraint_dots, scatter_constraints

DENSE_BYTES_PER_CONSTRAINT = 2**19


class _GrowableArray:
    """An array grown along axis 0 by amortised doubling; ``data`` is the used part."""

    def __init__(self, shape_tail=(), dtype=np.float64):
        self._store = np.zeros((16, *shape_tail), dtype=dtype)
        self._used = 0

    @property
    def data(self):
        return self._store[: self._used]

    def extend(self, rows):
        needed = self._used + rows.shape[0]
        if needed > self._store.shape[0]:
            grown = np.zeros((max(needed, 2 * self._store.shape[0]), *self._store.shape[1:]),
                             dtype=self._store.dtype)
            grown[: self._used] = self.data
            self._store = grown
        self._store[self._used: needed] = rows
        self._used = needed

    def select(self, mask):
        self.assign(self.data[mask])

    def assign(self, rows):
        """Replace the contents by ``rows`` (at most the current length)."""
        self._store[: rows.shape[0]] = rows
        self._used = rows.shape[0]


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
        self.gram = np.zeros((0, 0))
        self._offsets = _GrowableArray()
        self._pairwise = _GrowableArray((structure.n_pairwise_,))
        size = structure.size_joint_feature_
        self.dense = 8 * size <= DENSE_BYTES_PER_CONSTRAINT
        if self.dense:
            self._directions = _GrowableArray((size,))
        else:
            # flat indices t * n_states + state of the true and the wrong state of each entry
            self._true_index = _GrowableArray(dtype=np.int64)
            self._wrong_index = _GrowableArray(dtype=np.int64)
            self._scale = _GrowableArray()
            self._owner = _GrowableArray(dtype=np.int64)

    def __len__(self):
        return self._offsets.data.shape[0]

    @property
    def offsets(self):
        """The constraint offsets ``c_k``."""
        return self._offsets.data

    def _direction(self, M, pairwise):
        """Flat direction ``[M^T X, pairwise]`` for a flat token x state matrix ``M``."""
        M = M.reshape(self.batch.n_tokens, self.structure.n_states_)
        return np.concatenate([self.structure.unary_features(self.batch, M).ravel(), pairwise])

    def add(self, Ybar, sequence_scale, offset):
        """Add ``g = sum_i s_i (Psi(y_i) - Psi(ybar_i))`` with offset ``c``.

        The Gram matrix grows by one row and column.
        """
        structure, batch, Y = self.structure, self.batch, self.Y
        n_states = structure.n_states_
        tokens = np.flatnonzero(Y != Ybar)
        true_index = tokens * n_states + Y[tokens]
        wrong_index = tokens * n_states + Ybar[tokens]
        scale = sequence_scale[batch.sequence_index[tokens]]
        pairwise = structure.pairwise_statistics(batch, Y, sequence_scale) - \
            structure.pairwise_statistics(batch, Ybar, sequence_scale)
        M = np.zeros(batch.n_tokens * n_states)
        M[true_index] = scale
        M[wrong_index] = -scale
        g = self._direction(M, pairwise)
        k = len(self)
        row = np.empty(k + 1)
        if self.dense:
            row[:k] = self._directions.data @ g
            self._directions.extend(g[None, :])
        else:
            if k:
                unary = structure.unary_potentials(batch, g).ravel()
                row[:k] = self._pairwise.data @ pairwise
                constraint_dots(unary, self._true_index.data, self._wrong_index.data,
                                self._scale.data, self._owner.data, row)
            self._true_index.extend(true_index)
            self._wrong_index.extend(wrong_index)
            self._scale.extend(scale)
            self._owner.extend(np.full(tokens.shape[0], k, dtype=np.int64))
        row[k] = g @ g
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :] = row
        gram[:, k] = row
        self.gram = gram
        self._pairwise.extend(pairwise[None, :])
        self._offsets.extend(np.array([float(offset)]))

    def remove(self, keep):
        """Keep only the constraints whose mask entry is true (Gram rows/columns dropped)."""
        keep = np.asarray(keep, dtype=bool)
        if not self.dense:
            on_tokens = keep[self._owner.data]
            new_index = np.cumsum(keep) - 1
            owner = new_index[self._owner.data[on_tokens]]
            for array in (self._true_index, self._wrong_index, self._scale):
                array.select(on_tokens)
            self._owner.select(on_tokens)
            self._owner.data[:] = owner
        else:
            self._directions.select(keep)
        self._pairwise.select(keep)
        self._offsets.select(keep)
        self.gram = self.gram[np.ix_(keep, keep)]

    def combine(self, alpha):
        """``w = sum_k alpha_k g_k`` as a flat weight vector."""
        if self.dense:
            return alpha @ self._directions.data
        M = np.zeros(self.batch.n_tokens * self.structure.n_states_)
        scatter_constraints(M, self._true_index.data, self._wrong_index.data, self._scale.data,
                            self._owner.data, np.ascontiguousarray(alpha, dtype=np.float64))
        return self._direction(M, alpha @ self._pairwise.data)
