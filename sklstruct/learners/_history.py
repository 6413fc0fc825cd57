"""Per-iteration records of a learner's progress."""

import time

import numpy as np

HISTORY_FIELDS = ("primal", "dual", "gap", "time", "oracle_calls")


class History:
    """Collects per-iteration rows (primal, dual, gap, wall time, oracle calls).

    ``time`` is measured from the creation of the recorder.
    """

    def __init__(self, extra_fields=()):
        self._fields = HISTORY_FIELDS + tuple(extra_fields)
        self._rows = {name: [] for name in self._fields}
        self._start = time.perf_counter()

    def elapsed(self):
        return time.perf_counter() - self._start

    def append(self, **row):
        row.setdefault("time", self.elapsed())
        for name in self._fields:
            self._rows[name].append(float(row.get(name, np.nan)))

    def as_dict(self):
        """The records as a dict of 1-D float arrays, one entry per iteration."""
        return {name: np.asarray(values) for name, values in self._rows.items()}
