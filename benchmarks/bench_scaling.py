"""Fit time and memory of the default estimator against the number of tokens.

Synthetic chains (sentences of 10 to 40 tokens, 20 states, 1,000 sparse binary features with 5
per token, labels from a random linear model plus a transition bonus) of ``--sizes`` tokens;
each size is fitted by ``M3NSimplicialDecomposition(C=0.1)`` (or ``--estimator``) in its own
process, which reports the fit's wall time, the process's resident memory before the fit
(the data) and its peak, the memory above the data per token, the passes and the certified
gap. Fit time and memory should grow linearly with the tokens (at a fixed number of passes):
the table also gives, against the previous size, the ratio of the fit time per token and the
memory per added token above the data.

    python benchmarks/bench_scaling.py --sizes 10000 100000 1000000 [--json out.json]
"""

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parser, peak_rss_mb, print_table, write_json  # noqa: E402


def _chains(n_tokens, seed=0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, 41, size=n_tokens // 10 + 1)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n_tokens) + 1]
    lengths[-1] -= lengths.sum() - n_tokens
    lengths = lengths[lengths > 0]
    d, S = 1000, 20
    columns = rng.integers(0, d, size=(n_tokens, 5))
    X = sp.csr_matrix((np.ones(n_tokens * 5), columns.ravel(),
                       np.arange(0, n_tokens * 5 + 1, 5)), shape=(n_tokens, d))
    X.sum_duplicates()
    scores = np.asarray(X @ rng.normal(size=(d, S)))
    y = scores.argmax(axis=1)
    return X, y, lengths


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(n_tokens, estimator_code):
    import sklstruct

    X, y, lengths = _chains(n_tokens)
    estimator = eval(estimator_code, vars(sklstruct))
    before = _rss_mb()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        estimator.fit(X, y, lengths=lengths)
        elapsed = time.perf_counter() - start
    peak = peak_rss_mb()
    history = estimator.history_
    print(json.dumps({"tokens": n_tokens, "fit_s": elapsed, "rss_before_MB": before,
                      "peak_RSS_MB": peak,
                      "KB_per_token_above_data": (peak - before) * 1024 / n_tokens,
                      "passes": int(estimator.n_iter_),
                      "rel_gap": float(history["gap"][-1] / history["primal"][-1])}))


def main():
    p = parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[10000, 100000, 1000000])
    p.add_argument("--estimator", default="M3NSimplicialDecomposition(C=0.1, random_state=0)")
    p.add_argument("--worker", type=int, default=None)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.estimator)
    rows = []
    for n in args.sizes:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", str(n),
                              "--estimator", args.estimator], capture_output=True, text=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0
                    else {"tokens": n, "error": out.stderr.strip()[-300:]})
        print(json.dumps(rows[-1]), flush=True)
    # per token, against the previous size: the fit time's ratio and the memory the added
    # tokens took (which leaves out the fit's fixed memory: code, workspaces)
    for previous, row in zip(rows, rows[1:]):
        if "fit_s" in row and "fit_s" in previous:
            row["time_per_token_vs_previous"] = (row["fit_s"] / row["tokens"]) / (
                previous["fit_s"] / previous["tokens"])
            above = [r["peak_RSS_MB"] - r["rss_before_MB"] for r in (previous, row)]
            row["KB_per_added_token"] = (above[1] - above[0]) * 1024 / (
                row["tokens"] - previous["tokens"])
    print_table(rows, ["tokens", "fit_s", "rss_before_MB", "peak_RSS_MB",
                       "KB_per_token_above_data", "KB_per_added_token", "passes", "rel_gap",
                       "time_per_token_vs_previous"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
