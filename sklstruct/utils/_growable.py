"""Arrays that grow along their first axis, for working sets of constraints."""

import numpy as np


class GrowableArray:
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
