"""Time per sentence of the dependency-tree kernels against the sentence length.

Random sentences of ``n`` tokens for ``n`` in ``--lengths``, standard normal arc scores
(``hard``: scale 10 with the root arcs 20 lower, so that the single-root decoder makes many
swaps and contractions). The compiled batch functions run (input validation excluded) on
batches of about ``--tokens`` tokens, ``--repeats`` times; the best time per sentence is
reported. The ``slope`` row is the least-squares slope of log(time) against log(n): 2 for
an O(n^2) kernel (Chu-Liu-Edmonds), 3 for an O(n^3) one (Eisner's algorithm,
inside-outside, the matrix-tree theorem), lower where the O(n^2) parts still weigh.

    python benchmarks/bench_dependency_scaling.py [--lengths 10 20 40 70 100] [--json PATH]
"""

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parser, print_table, write_json  # noqa: E402

from sklstruct._inference import _dependency  # noqa: E402


def _decode(projective, single_root):
    def run(scores, lengths):
        heads = np.zeros(lengths.sum(), dtype=np.int64)
        best = np.zeros(lengths.shape[0])
        _dependency.decode_batch(scores, lengths, projective, single_root, heads, best)
    return run


def _marginals(projective):
    def run(scores, lengths):
        marginals = np.zeros(scores.shape[0])
        log_z = np.zeros(lengths.shape[0])
        _dependency.marginals_batch(scores, lengths, projective, False, marginals, log_z)
    return run


# (name, score type, kernel)
KERNELS = [
    ("chu_liu_edmonds", "normal", _decode(False, False)),
    ("cle_single_root", "normal", _decode(False, True)),
    ("cle_single_root_hard", "hard", _decode(False, True)),
    ("eisner", "normal", _decode(True, False)),
    ("inside_outside", "normal", _marginals(True)),
    ("matrix_tree", "normal", _marginals(False)),
]


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 30, 50, 70, 100])
    p.add_argument("--tokens", type=int, default=4000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for n in args.lengths:
        batch = max(1, args.tokens // n)
        lengths = np.full(batch, n, dtype=np.int64)
        normal = rng.normal(size=(batch, n + 1, n + 1))
        hard = 10.0 * normal
        hard[:, 0, :] -= 20.0
        inputs = {"normal": normal.ravel(), "hard": hard.ravel()}
        row = {"n": n}
        for name, score_type, kernel in KERNELS:
            best = np.inf
            for _ in range(args.repeats):
                start = time.perf_counter()
                kernel(inputs[score_type], lengths)
                best = min(best, time.perf_counter() - start)
            row[name] = 1e6 * best / batch  # microseconds per sentence
        rows.append(row)
    names = [name for name, _, _ in KERNELS]
    log_n = np.log([r["n"] for r in rows])
    slopes = {"n": "slope"}
    for name in names:
        slopes[name] = float(np.polyfit(log_n, np.log([r[name] for r in rows]), 1)[0])
    print("microseconds per sentence")
    print_table(rows + [slopes], ["n", *names])
    write_json(args.json, rows + [slopes], args.run)


if __name__ == "__main__":
    main()
