"""Reproduce the shape of Joachims, Finley and Yu (2009)'s findings on our data.

Prints tables, with ``--json PATH`` stores the rows (under ``table1``, ``cache``, ``tol``,
``C`` and ``scaling``) as a run of PATH (the committed run: ``--json
benchmarks/results/cutting_plane_paper.json``; ``--quick`` runs are named ``quick`` unless
``--run`` says otherwise) and, with ``--plots DIR``, draws the figures into ``DIR``
(matplotlib, when installed); ``--replot --plots DIR`` draws them from a stored run (of
``benchmarks/results/cutting_plane_paper.json`` unless ``--json`` names another file):

- Table 1: 1-slack (with the label cache) vs n-slack — wall time, calls of the separation
  oracle on single examples, support vectors (dual variables > 0) — on OCR letters (fold 1)
  and CoNLL-2000 chunking;
- Fig. 1: 1-slack fit time against the number of training sentences of CoNLL-2000;
- Fig. 6: oracle calls against the cache size (OCR);
- Figs. 8-9: iterations against ``tol`` and against ``C`` (OCR).

    python benchmarks/bench_cutting_plane_paper.py [--quick] [--plots DIR]
    python benchmarks/bench_cutting_plane_paper.py --replot --plots DIR

``--quick`` uses the first 2,000 CoNLL sentences for Table 1 and sizes up to 4,000 for Fig. 1.
``C`` follows the sum convention, so at fixed ``C`` the paper's ``C_J = n C`` grows with ``n``
in Fig. 1 (and with it the iteration bound of Theorem 5); the time per iteration is linear in n.
"""

import os
import time

import numpy as np

from _common import DEFAULT_RUN, ROOT, parser, print_table, pyplot, read_rows, write_json
from sklstruct import ChainStructure, StructSVMCuttingPlane
from sklstruct.datasets import load_conll2000, load_ocr_letters
from sklstruct.preprocessing import SequenceVectorizer, window_features

STORED = os.path.join(ROOT, "benchmarks", "results", "cutting_plane_paper.json")


def fit(X, y, **params):
    start = time.perf_counter()
    model = StructSVMCuttingPlane(**params).fit(X, y)
    seconds = time.perf_counter() - start
    return model, {
        "fit_s": seconds, "iterations": model.n_iter_,
        "oracle_calls": int(model.history_["oracle_calls"][-1]),
        "support_vectors": int(np.count_nonzero(model.dual_coef_ > 0)),
        "primal": model.history_["primal"][-1], "gap": model.history_["gap"][-1],
    }


def ocr(data_home):
    words = load_ocr_letters(data_home, folds=1)
    return words.data, words.target


def conll(data_home, n_sentences=None):
    train = load_conll2000(data_home, subset="train")
    feats = [window_features(w, p) for w, p in zip(train.words, train.pos)]
    X = SequenceVectorizer().fit_transform(feats)
    return X[:n_sentences], train.target[:n_sentences]


def table1(data_home, quick):
    rows = []
    data = {"OCR fold 1 (C=0.1)": (ocr(data_home), dict(
        structure=ChainStructure(start_end=False), C=0.1, tol=1e-3)),
        "CoNLL-2000 (C=0.05)": (conll(data_home, 2000 if quick else None), dict(
            C=0.05, tol=0.1))}
    for name, ((X, y), params) in data.items():
        for variant, extra in (("1-slack", dict(cache_size=10)), ("n-slack", {})):
            _, row = fit(X, y, variant=variant, **params, **extra)
            rows.append({"data": f"{name}, n={len(X)}", "variant": variant, **row})
            print_table(rows[-1:], list(rows[-1]))
    return rows


def scaling(data_home, quick):
    X, y = conll(data_home)
    sizes = [1000, 2000, 4000] if quick else [1000, 2000, 4000, 8936]
    rows = []
    for n in sizes:
        # (the paper's Fig. 1 is the 1-slack algorithm; variant="auto" takes n-slack above
        # 1,000 examples)
        _, row = fit(X[:n], y[:n], variant="1-slack", C=0.05, tol=0.1, cache_size=10)
        rows.append({"n_sentences": n, **row})
        print_table(rows[-1:], list(rows[-1]))
    return rows


def sweep(data_home, name, values, **fixed):
    X, y = ocr(data_home)
    rows = []
    for value in values:
        params = {"structure": ChainStructure(start_end=False), "C": 0.1, "tol": 1e-3,
                  **fixed, name: value}
        _, row = fit(X, y, **params)
        rows.append({name: value, **row})
        print_table(rows[-1:], list(rows[-1]))
    return rows


def plot(results, out):
    plt = pyplot()
    if plt is None:
        return
    specs = [
        ("fig1_time_vs_n.png", "scaling", "n_sentences", "fit_s",
         "training sentences (CoNLL-2000)", "fit time (s)"),
        ("fig6_oracle_calls_vs_cache.png", "cache", "cache_size", "oracle_calls",
         "cache size per example", "oracle calls"),
        ("fig8_iterations_vs_tol.png", "tol", "tol", "iterations", "tol (epsilon)", "iterations"),
        ("fig9_iterations_vs_C.png", "C", "C", "iterations", "C", "iterations"),
    ]
    for filename, key, x, y, xlabel, ylabel in specs:
        rows = results[key]
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([r[x] for r in rows], [r[y] for r in rows], "o-")
        ax.set_yscale("log")
        if key != "cache":  # the cache sizes start at 0
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=100)
        plt.close(fig)
    print(f"plots saved to {out}")


def main():
    p = parser(__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--plots", default=None, help="draw the figures into this folder")
    p.add_argument("--replot", action="store_true",
                   help="only draw the figures of the stored run (with --plots)")
    args = p.parse_args()
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
    if args.replot:
        path = args.json or STORED
        results = read_rows(path, args.run or DEFAULT_RUN)
        if results is None or not args.plots:
            raise SystemExit(f"--replot needs --plots DIR and a run {args.run or DEFAULT_RUN!r} "
                             f"in {path}")
        plot(results, args.plots)
        return
    results = {
        "table1": table1(args.data_home, args.quick),
        "cache": sweep(args.data_home, "cache_size", [0, 1, 2, 5, 10, 20]),
        "tol": sweep(args.data_home, "tol", [0.1, 0.03, 0.01, 0.003, 0.001], cache_size=0),
        "C": sweep(args.data_home, "C", [0.01, 0.03, 0.1, 0.3, 1.0], cache_size=0),
        "scaling": scaling(args.data_home, args.quick),
    }
    for key, rows in results.items():
        print(f"\n== {key}")
        print_table(rows, list(rows[0]))
    write_json(args.json, results, args.run or ("quick" if args.quick else None))
    if args.plots:
        plot(results, args.plots)


if __name__ == "__main__":
    main()
