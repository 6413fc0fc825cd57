"""Shared helpers of the benchmark scripts: paths, timing and peak memory, table printing,
results files."""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_HOME = os.environ.get("SKLSTRUCT_DATA",
                                   os.path.join(ROOT, "..", "shared", "data"))
DEFAULT_RUN = "default"
_LOAD_AT_START = os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-home", default=DEFAULT_DATA_HOME)
    p.add_argument("--json", default=None,
                   help="store the result rows in this results file (see write_json)")
    p.add_argument("--run", default=None,
                   help="name of this run in the --json file, whose other runs are kept "
                        f"(default: the experiment or data set, else {DEFAULT_RUN!r})")
    return p


def not_installed(module, package):
    """A message naming ``package`` when ``module`` cannot be imported, else None: the row of a
    peer that is not installed, instead of a worker's traceback."""
    if importlib.util.find_spec(module) is not None:
        return None
    message = f"{package} is not installed (pip install {package}): skipped"
    print(message)
    return message


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


def peak_rss_mb():
    """This process's peak resident memory in MB (``VmHWM``). Unlike ``ru_maxrss``, which
    Linux carries over from the parent through ``fork`` and ``execve``, it counts this
    process only."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


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


def _git(*args):
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def provenance():
    """The commit, date, command and machine of this run, stored beside its rows."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    try:
        memory = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB"
    except (ValueError, OSError, AttributeError):
        memory = ""
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs{memory}, {platform.system()} "
               f"{platform.release()}, Python {platform.python_version()}")
    if _LOAD_AT_START is not None:
        machine += f"; load average {_LOAD_AT_START:.1f} at the start"
    return {"commit": commit, "date": datetime.date.today().isoformat(),
            "command": "python " + shlex.join([script, *sys.argv[1:]]), "machine": machine}


def write_json(path, rows, run=None):
    """Store ``rows`` as the run ``run`` (default: ``DEFAULT_RUN``) of the results file ``path``.

    A results file holds ``{"runs": {name: {"commit", "date", "command", "machine",
    "rows"}}}`` (and optionally a ``"description"``); the file's other runs are kept and a run
    of the same name is replaced. A file of another form at ``path`` is overwritten.
    """
    if not path:
        return
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
            print(f"{path} held no runs: overwritten")
            data = {}
    runs = data.setdefault("runs", {})
    run = run or DEFAULT_RUN
    runs.pop(run, None)
    runs[run] = {**provenance(), "rows": rows}
    with open(path, "w") as f:
        json.dump(data, f, indent=2, default=lambda o: o.tolist()
                  if isinstance(o, np.ndarray) else float(o))
        f.write("\n")
    print(f"rows stored as run {run!r} of {path}")


def read_rows(path, run):
    """The rows of the run ``run`` of the results file ``path`` (None when it has none)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    record = data.get("runs", {}).get(run) if isinstance(data, dict) else None
    return None if record is None else record["rows"]


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


def print_summary(rows, path, run=None):
    """Print all rows as one table and store them as run ``run`` of ``path`` when given."""
    print()
    print_table(rows, list(rows[0]))
    write_json(path, rows, run)
