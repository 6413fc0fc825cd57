"""M3NExcessiveGap (Zhang et al. 2011): empirical rate of the duality gap, and the kernelized
model.

``--experiment rate`` (OCR letters, train fold 1, C=0.1, chain without start/end biases)
    Runs M3NExcessiveGap (adaptive and worst-case smoothing), M3NExpGrad (online and batch) and
    StructSVMCuttingPlane (1-slack) for a fixed budget of iterations and plots the certified
    duality gap against iterations and against wall time. With ``--json PATH`` the rows are
    stored as run ``rate`` (or ``--run``) of PATH and the plot is drawn beside it as
    ``<PATH without .json>_rate.png`` (the committed run: ``--json
    benchmarks/results/excessive_gap.json``).
    The slope of log(gap) against log(k) is fitted over the second half of each run (the seed's
    theory: about -2 for excessive gap, -1 for exponentiated gradient).
``--experiment kernel``
    Per-letter test accuracy of the kernelized model (section 4.3) trained on OCR fold 1 and
    tested on folds 0 and 2-9, beside the linear one.

    python benchmarks/bench_excessive_gap.py --experiment rate [--iterations 2000] [--json PATH]
    python benchmarks/bench_excessive_gap.py --experiment kernel [--iterations 1000] [--json PATH]

Without ``--json`` nothing is written.

Time to a relative gap of 1e-2 / 1e-3, memory and accuracy on OCR and CoNLL-2000 beside the
other learners: ``benchmarks/bench_exp_grad.py --experiment ocr|conll2000``.
"""

import os
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from _common import PeakMemory, parser, print_summary, print_table, pyplot, write_json
from sklstruct import ChainStructure, M3NExcessiveGap, M3NExpGrad, StructSVMCuttingPlane
from sklstruct.datasets import load_ocr_letters
from sklstruct.metrics import token_accuracy

def _ocr(data_home):
    words = load_ocr_letters(data_home)
    train, test = np.flatnonzero(words.folds == 1), np.flatnonzero(words.folds != 1)
    return ([words.data[i] for i in train], [words.target[i] for i in train],
            [words.data[i] for i in test], [words.target[i] for i in test])


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with PeakMemory() as m:
            model.fit(X, y)
    return m


def _slope(gaps):
    """Least-squares slope of log(gap) against log(k) over the second half of the run."""
    k = np.arange(1, len(gaps) + 1)
    keep = (k > len(gaps) // 2) & (gaps > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(k[keep]), np.log(gaps[keep]), 1)[0])


def rate(args):
    X, y, X_test, y_test = _ocr(args.data_home)
    chain, C, budget = ChainStructure(start_end=False), 0.1, args.iterations
    learners = {
        "M3NExcessiveGap adaptive": M3NExcessiveGap(chain, C=C, tol=1e-12, max_iter=budget),
        "M3NExcessiveGap worst_case": M3NExcessiveGap(chain, C=C, smoothing="worst_case",
                                                      tol=1e-12, max_iter=budget),
        "M3NExpGrad online": M3NExpGrad(chain, C=C, tol=1e-12, max_iter=budget),
        "M3NExpGrad batch": M3NExpGrad(chain, C=C, algorithm="batch", tol=1e-12,
                                       max_iter=budget),
        "StructSVMCuttingPlane 1-slack": StructSVMCuttingPlane(chain, C=C, tol=1e-5,
                                                               max_iter=budget, cache_size=0),
    }
    rows = []
    for name, model in learners.items():
        m = _fit(model, X, y)
        h = model.history_
        relative = h["gap"] / np.abs(h["primal"])
        rows.append({"model": name, "fit_s": m.seconds, "peak_MB": m.peak_mb,
                     "iterations": len(h["gap"]), "final_rel_gap": float(relative[-1]),
                     "slope": _slope(h["gap"]),
                     "test_accuracy": token_accuracy(y_test, model.predict(X_test)),
                     "gap": h["gap"], "primal": h["primal"], "time": h["time"]})
        print_table(rows[-1:], ["model", "fit_s", "peak_MB", "iterations", "final_rel_gap",
                                "slope", "test_accuracy"])
    print()
    print_table(rows, ["model", "fit_s", "peak_MB", "iterations", "final_rel_gap", "slope",
                       "test_accuracy"])
    write_json(args.json, rows, args.run or "rate")
    if args.json:
        _plot(rows, os.path.splitext(args.json)[0] + "_rate.png")


def _plot(rows, path):
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in rows:
        relative = np.asarray(r["gap"]) / np.abs(np.asarray(r["primal"]))
        k = np.arange(1, len(relative) + 1)
        label = f"{r['model']} (slope {r['slope']:.2f})"
        axes[0].loglog(k, relative, label=label)
        axes[1].semilogy(r["time"], relative, label=r["model"])
    axes[0].set_xlabel("iteration (pass) k")
    axes[1].set_xlabel("wall time (s)")
    for ax in axes:
        ax.set_ylabel("relative duality gap")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("OCR letters, fold 1, C = 0.1")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def kernel(args):
    X, y, X_test, y_test = _ocr(args.data_home)
    chain, C = ChainStructure(start_end=False), args.C
    models = {
        "linear": M3NExcessiveGap(chain, C=C, max_iter=args.iterations),
        "poly degree 3": M3NExcessiveGap(chain, C=C, kernel="poly", degree=3, gamma=1 / 30,
                                         max_iter=args.iterations),
        "rbf gamma 0.03": M3NExcessiveGap(chain, C=C, kernel="rbf", gamma=0.03,
                                          max_iter=args.iterations),
    }
    rows = []
    for name, model in models.items():
        m = _fit(model, X, y)
        h = model.history_
        rows.append({"kernel": name, "C": C, "fit_s": m.seconds, "peak_MB": m.peak_mb,
                     "iterations": model.n_iter_,
                     "final_rel_gap": float(h["gap"][-1] / h["primal"][-1]),
                     "test_accuracy": token_accuracy(y_test, model.predict(X_test))})
        print_table(rows[-1:], list(rows[-1]))
    print_summary(rows, args.json, args.run or "kernel")


def main():
    p = parser(__doc__)
    p.add_argument("--experiment", choices=["rate", "kernel"], default="rate")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--C", type=float, default=1.0, help="C of the kernel experiment")
    args = p.parse_args()
    {"rate": rate, "kernel": kernel}[args.experiment](args)


if __name__ == "__main__":
    main()
