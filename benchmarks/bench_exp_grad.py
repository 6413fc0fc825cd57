"""The dual learners beside StructSVMCuttingPlane: convergence, time, memory, accuracy.

M3NExpGrad (Bartlett et al. 2004) and M3NExcessiveGap (Zhang et al. 2011) against the
cutting-plane learners (Joachims et al. 2009), all minimising the same objective at the same
``C``.

Three experiments:

``--experiment figure4``
    The shape of the seed's Figure 4 on the first 1,000 sentences of CoNLL-2002 Spanish NER
    (the seed used CoNLL-2003 English): the dual objective after each pass over the training
    set for batch EG, online EG (adaptive and fixed steps, uniform and biased initial
    potentials as in the seed's Figure 4(b)) and the cutting-plane learners.
    With ``--json PATH`` its rows are stored as run ``figure4`` (or ``--run``) of PATH and the
    plot is drawn beside it as ``<PATH without .json>_figure4.png`` (the committed run:
    ``--json benchmarks/results/exp_grad.json``); ``--replot`` redraws the plot from the stored
    run (of ``benchmarks/results/exp_grad.json`` unless ``--json`` names another file).
``--experiment ocr``
    OCR letters, train fold 1, test folds 0 and 2-9, C=0.1, chain without start/end biases.
``--experiment conll2000``
    CoNLL-2000 chunking, full train / test, the window features of bench_chunking.py, C=0.1.

For ``ocr`` and ``conll2000`` every learner runs with ``tol=1e-3`` and a pass limit, and the table
gives the wall time and passes at which the certified relative duality gap first fell to 1e-2 and
1e-3 ("-" when not within the limit), the peak memory, and test accuracy (OCR) or chunk F1.

    python benchmarks/bench_exp_grad.py --experiment ocr [--max-passes 1000] [--skip NAME ...]
    python benchmarks/bench_exp_grad.py --experiment conll2000 [--max-passes 300]
    python benchmarks/bench_exp_grad.py --experiment figure4 [--passes 60] [--replot]

With ``--json PATH`` every run is stored under its ``--run`` name (default: the experiment) in
PATH; without it nothing is written.
"""

import os
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from _common import ROOT, PeakMemory, parser, print_table, pyplot, read_rows, write_json
from sklstruct import ChainStructure, M3NExcessiveGap, M3NExpGrad, StructSVMCuttingPlane
from sklstruct.datasets import load_conll2000, load_conll2002, load_ocr_letters
from sklstruct.metrics import chunk_f1_score, token_accuracy
from sklstruct.preprocessing import SequenceVectorizer, window_features

RESULTS = os.path.join(ROOT, "benchmarks", "results")
FIGURE4_JSON = os.path.join(RESULTS, "exp_grad.json")


def _first(history, threshold):
    """(time, passes) when the relative gap first reached ``threshold``, else (None, None)."""
    relative = history["gap"] / np.abs(history["primal"])
    hit = np.flatnonzero(relative <= threshold)
    if hit.size == 0:
        return None, None
    passes = history["passes"] if "passes" in history else np.arange(len(relative))
    return float(history["time"][hit[0]]), int(passes[hit[0]])


def _learners(C, max_passes, structure):
    return [
        ("M3NExpGrad online", M3NExpGrad(structure, C=C, algorithm="online", tol=1e-3,
                                         max_iter=max_passes)),
        ("M3NExpGrad batch", M3NExpGrad(structure, C=C, algorithm="batch", tol=1e-3,
                                        max_iter=max_passes)),
        ("StructSVMCuttingPlane n-slack", StructSVMCuttingPlane(
            structure, C=C, variant="n-slack", tol=1e-3, max_iter=max_passes,
            random_state=0)),
        ("StructSVMCuttingPlane 1-slack", StructSVMCuttingPlane(
            structure, C=C, variant="1-slack", tol=1e-3, max_iter=20 * max_passes,
            cache_size=0)),
        ("M3NExcessiveGap", M3NExcessiveGap(structure, C=C, tol=1e-3, max_iter=max_passes)),
    ]


def time_to_gap(X_train, y_train, X_test, y_test, C, max_passes, structure, score_name, skip):
    rows = []
    for name, model in _learners(C, max_passes, structure):
        if any(s in name for s in skip):
            continue
        with PeakMemory() as m:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X_train, y_train)
        h = model.history_
        pred = model.predict(X_test)
        score = chunk_f1_score(y_test, pred) if score_name == "chunk_F1" \
            else token_accuracy(y_test, pred)
        t2, p2 = _first(h, 1e-2)
        t3, p3 = _first(h, 1e-3)
        rows.append({"model": name, "fit_s": m.seconds, "peak_MB": m.peak_mb,
                     "iterations": model.n_iter_, "t_1e-2": t2, "it_1e-2": p2,
                     "t_1e-3": t3, "it_1e-3": p3,
                     "final_rel_gap": float(h["gap"][-1] / h["primal"][-1]),
                     "primal": float(h["primal"][-1]), score_name: score})
        print_table(rows[-1:], list(rows[-1]))
    print()
    print_table(rows, list(rows[0]))
    return rows


def ocr(args):
    words = load_ocr_letters(args.data_home)
    train, test = np.flatnonzero(words.folds == 1), np.flatnonzero(words.folds != 1)
    return time_to_gap([words.data[i] for i in train], [words.target[i] for i in train],
                       [words.data[i] for i in test], [words.target[i] for i in test],
                       args.C or 0.1, args.max_passes or 1000, ChainStructure(start_end=False),
                       "test_accuracy", args.skip)


def conll2000(args):
    train = load_conll2000(args.data_home, subset="train")
    test = load_conll2000(args.data_home, subset="test")
    vectorizer = SequenceVectorizer()
    X_train = vectorizer.fit_transform([window_features(w, p)
                                        for w, p in zip(train.words, train.pos)])
    X_test = vectorizer.transform([window_features(w, p) for w, p in zip(test.words, test.pos)])
    return time_to_gap(X_train, train.target, X_test, test.target, args.C or 0.1,
                       args.max_passes or 300, "auto", "chunk_F1",
                       args.skip or ["1-slack"])


def figure4(args):
    data = load_conll2002(args.data_home, subset="train", language="esp")
    n = 1000
    X = SequenceVectorizer().fit_transform([window_features(w, p) for w, p in
                                            zip(data.words[:n], data.pos[:n])])
    y = data.target[:n]
    C, passes = args.C or 0.1, args.passes
    print(f"CoNLL-2002 esp, first {n} sentences: {sum(len(t) for t in y)} tokens, "
          f"{X[0].shape[1]} features, {len(set(np.concatenate(y)))} tags, C={C}")
    scale = np.median([x.multiply(x).sum() + x.shape[0] for x in X])
    curves = {
        "EG batch (adaptive)": M3NExpGrad(C=C, algorithm="batch", tol=1e-12, max_iter=passes),
        "EG online (adaptive)": M3NExpGrad(C=C, algorithm="online", tol=1e-12, max_iter=passes),
        "EG online (fixed eta = 1/(C R))": M3NExpGrad(
            C=C, algorithm="online", step="fixed", eta=1 / (C * scale), tol=1e-12,
            max_iter=passes),
        "EG online (fixed eta = 10/(C R))": M3NExpGrad(
            C=C, algorithm="online", step="fixed", eta=10 / (C * scale), tol=1e-12,
            max_iter=passes),
        "EG online (adaptive, init_bias=5)": M3NExpGrad(C=C, algorithm="online", init_bias=5.0,
                                                        tol=1e-12, max_iter=passes),
        "cutting plane n-slack": StructSVMCuttingPlane(C=C, variant="n-slack", tol=1e-9,
                                                       max_iter=passes, random_state=0),
        "cutting plane 1-slack": StructSVMCuttingPlane(C=C, variant="1-slack", tol=1e-9,
                                                       max_iter=passes, cache_size=0),
    }
    rows = []
    for name, model in curves.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with PeakMemory() as m:
                model.fit(X, y)
        h = model.history_
        passes_axis = h["passes"] if "passes" in h else np.arange(1, len(h["dual"]) + 1)
        rows.append({"curve": name, "fit_s": m.seconds, "passes": passes_axis,
                     "dual": h["dual"], "primal": h["primal"], "time": h["time"]})
        last = int(passes_axis[-1])
        shown = [k for k in (1, 5, 20) if k < last] + [last]
        print(f"{name:36s} {m.seconds:7.2f} s  dual after pass "
              + "/".join(map(str, shown)) + ": "
              + " / ".join(f"{_at(passes_axis, h['dual'], k):.5g}" for k in shown))
    write_json(args.json, rows, args.run or "figure4")
    if args.json:
        _plot(rows, _figure4_png(args.json))
    return rows


def _figure4_png(json_path):
    return os.path.splitext(json_path)[0] + "_figure4.png"


def _at(passes, values, k):
    """Value recorded after ``k`` passes (the last one recorded before, if none at k)."""
    index = np.searchsorted(passes, k, side="right") - 1
    return float(values[max(index, 0)])


def _plot(rows, path):
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    best = max(float(np.max(r["dual"])) for r in rows)
    for r in rows:
        passes, dual = np.asarray(r["passes"]), np.asarray(r["dual"])
        keep = passes >= 1
        axes[0].plot(passes[keep], dual[keep], label=r["curve"])
        axes[1].semilogy(passes[keep], np.maximum(best - dual[keep], 1e-6), label=r["curve"])
    axes[0].set_ylim(0.5 * best, 1.02 * best)
    axes[0].set_ylabel("dual objective")
    axes[1].set_ylabel("best dual seen - dual")
    for ax in axes:
        ax.set_xlabel("passes over the training set")
    axes[1].legend(fontsize=7)
    fig.suptitle("CoNLL-2002 esp, 1,000 sentences (cf. Bartlett et al. 2004, Figure 4)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    p = parser(__doc__)
    p.add_argument("--experiment", choices=["ocr", "conll2000", "figure4"], default="ocr")
    p.add_argument("--C", type=float, default=None)
    p.add_argument("--max-passes", type=int, default=None,
                   help="pass limit (1-slack: 20x as many iterations)")
    p.add_argument("--passes", type=int, default=60, help="passes in figure4")
    p.add_argument("--replot", action="store_true",
                   help="figure4: redraw the plot from the stored run of --json "
                        "(default benchmarks/results/exp_grad.json)")
    p.add_argument("--skip", nargs="*", default=[],
                   help="skip learners whose name contains one of these strings")
    args = p.parse_args()
    if args.replot:
        path = args.json or FIGURE4_JSON
        rows = read_rows(path, args.run or "figure4")
        if rows is None:
            raise SystemExit(f"no run {args.run or 'figure4'!r} in {path}")
        _plot(rows, _figure4_png(path))
        return
    rows = {"ocr": ocr, "conll2000": conll2000, "figure4": figure4}[args.experiment](args)
    if args.experiment != "figure4":
        write_json(args.json, rows, args.run or args.experiment)


if __name__ == "__main__":
    main()
