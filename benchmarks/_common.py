"""Shared helpers of the benchmark scripts: paths, timing and peak memory, table printing."""

import argparse
import json
import os
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_HOME = os.path.join(ROOT, "..", "shared", "data")


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-home", default=DEFAULT_DATA_HOME)
    p.add_argument("--json", default=None, help="write the result rows to this JSON file")
    return p


def ocr_fold1(data_home):
    """OCR letters: the words of fold 1 for training, the other folds for testing."""
    from sklstruct.datasets import load_ocr_letters

    words = load_ocr_letters(data_home)
    train, test = np.flatnonzero(words.folds == 1), np.flatnonzero(words.folds != 1)
    return ([words.data[i] for i in train], [words.target[i] for i in train],
            [words.data[i] for i in test], [words.target[i] for i in test])


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """Peak resident memory above the level at entry, sampled every 5 ms (bytes)."""

    def __enter__(self):
        self.base = _rss_bytes()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        self.start = time.perf_counter()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())
        self.peak_mb = (self.peak - self.base) / 2**20


def print_table(rows, columns):
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(w) for c, w in zip(columns, widths)))


def _fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.6g}"
    return str(value)


def write_json(path, rows):
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=2, default=lambda o: o.tolist()
                      if isinstance(o, np.ndarray) else float(o))


def pyplot():
    """``matplotlib.pyplot`` with the Agg backend, or None (with a message) when not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return None
    return plt


def print_summary(rows, path):
    """Print all rows as one table and write them to ``path`` (JSON) when given."""
    print()
    print_table(rows, list(rows[0]))
    write_json(path, rows)
