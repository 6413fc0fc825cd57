"""Yu and Rousu 2007: M3NSimplicialDecomposition on OCR letters, CoNLL-2000 and the Weizmann
horses.

Experiments (``--experiment``):

dimension
    OCR letters, train fold 1, test folds 0 and 2-9, C=0.1: the dimension limit r in {1, 5, 20}
    with one simplex per example and with one simplex for all the data; oracle calls (decodings
    of single examples, certificates included), passes and time to relative duality gaps 1e-1,
    1e-2 and 1e-3.
ocr
    Block-coordinate Frank-Wolfe (r=1, per example) beside StructSVMCuttingPlane (n-slack and
    1-slack) in the same run: time and passes to 1e-2 and 1e-3, test letter accuracy.
conll2000
    CoNLL-2000 chunking with the foundation benchmark features (``bench_chunking.py``), C=0.1:
    block-coordinate Frank-Wolfe with budgets of a few passes and a long run (time and passes to
    1e-2 and 1e-3), the n-slack cutting plane, sklearn-crfsuite's L-BFGS CRF and its
    passive-aggressive learner (20 iterations), all in the same run.
horses
    Weizmann horses 32 x 32: train on the first 200 images, test on the other 128; a binary
    grid model (GridStructure, min-cut) against a per-pixel LinearSVC on the same pixel
    features (intensity, local contrast and mean, intensity and position bins), and the
    prior mask (each pixel's majority class over the training masks) that both must beat.
"""

import os
import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import PeakMemory, ocr_fold1, parser, print_table, write_json  # noqa: E402

from sklstruct import (ChainStructure, GridStructure, M3NSimplicialDecomposition,  # noqa: E402
                       StructSVMCuttingPlane)
from sklstruct.datasets import (grid_pixel_features, load_conll2000,  # noqa: E402
                                load_weizmann_horses)
from sklstruct.learners.simplicial._solver import resolved_working_set  # noqa: E402
from sklstruct.metrics import chunk_f1_score, token_accuracy  # noqa: E402

OCR_C = 0.1


def _first(history, threshold, key):
    """``history[key]`` when the relative gap first reached ``threshold`` (else None)."""
    relative = history["gap"] / np.abs(history["primal"])
    hit = np.flatnonzero(relative <= threshold)
    return None if hit.size == 0 else float(history[key][hit[0]])


def _fit(model, X, y):
    with PeakMemory() as memory:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
    return memory


def _gap_row(name, model, memory, score_name, score):
    h = dict(model.history_)
    h.setdefault("passes", np.arange(len(h["gap"])))  # cutting planes: iterations
    row = {"model": name, "fit_s": memory.seconds, "peak_MB": memory.peak_mb,
           "passes": model.n_iter_}
    for threshold in (1e-2, 1e-3):
        row[f"t_{threshold:g}"] = _first(h, threshold, "time")
        row[f"passes_{threshold:g}"] = _first(h, threshold, "passes")
    row["final_rel_gap"] = float(h["gap"][-1] / h["primal"][-1])
    row["primal"] = float(h["primal"][-1])
    row[score_name] = score
    return row


def dimension(args):
    X, y, X_test, y_test = ocr_fold1(args.data_home)
    rows = []
    for blocks in ("per_example", "single"):
        for r in (1, 5, 20):
            per_example = blocks == "per_example"
            model = M3NSimplicialDecomposition(
                ChainStructure(start_end=False), C=OCR_C, max_points=r, blocks=blocks,
                tol=1e-3, max_iter=3000 if per_example else args.max_passes,
                check_every=(10 if r == 1 else 5) if per_example else 1, random_state=0)
            memory = _fit(model, X, y)
            h = model.history_
            # (the compiled passes visit one example at a time: per-example blocks on OCR)
            row = {"blocks": blocks, "r": r,
                   "working_set": resolved_working_set(None, blocks, len(X), per_example),
                   "fit_s": memory.seconds, "passes": model.n_iter_,
                   "oracle_calls": int(h["oracle_calls"][-1])}
            for threshold in (1e-1, 1e-2, 1e-3):
                calls = _first(h, threshold, "oracle_calls")
                row[f"calls_{threshold:g}"] = None if calls is None else int(calls)
                row[f"t_{threshold:g}"] = _first(h, threshold, "time")
            row["final_rel_gap"] = float(h["gap"][-1] / h["primal"][-1])
            row["test_accuracy"] = token_accuracy(y_test, model.predict(X_test))
            rows.append(row)
            print_table(rows[-1:], list(row))
    print()
    print_table(rows, list(rows[0]))
    return rows


def ocr(args):
    X, y, X_test, y_test = ocr_fold1(args.data_home)
    structure = ChainStructure(start_end=False)
    learners = [
        ("BCFW (r=1, per example)", M3NSimplicialDecomposition(
            structure, C=OCR_C, max_points=1, tol=1e-3, max_iter=3000, check_every=10,
            random_state=0)),
        ("RSD r=5, per example", M3NSimplicialDecomposition(
            structure, C=OCR_C, max_points=5, tol=1e-3, max_iter=1000, check_every=5,
            random_state=0)),
        ("RSD r=10, per example", M3NSimplicialDecomposition(
            structure, C=OCR_C, max_points=10, tol=1e-3, max_iter=1000, check_every=5,
            random_state=0)),
        ("StructSVMCuttingPlane n-slack", StructSVMCuttingPlane(
            structure, C=OCR_C, variant="n-slack", tol=1e-3, max_iter=300, random_state=0)),
        ("StructSVMCuttingPlane 1-slack", StructSVMCuttingPlane(
            structure, C=OCR_C, variant="1-slack", tol=1e-3, max_iter=5000, cache_size=0)),
    ]
    rows = []
    for name, model in learners:
        memory = _fit(model, X, y)
        rows.append(_gap_row(name, model, memory, "test_accuracy",
                             token_accuracy(y_test, model.predict(X_test))))
        print_table(rows[-1:], list(rows[-1]))
    print()
    print_table(rows, list(rows[0]))
    return rows


def conll2000(args):
    from bench_chunking import featurize, run_crfsuite

    from sklstruct.preprocessing import SequenceVectorizer

    train = load_conll2000(args.data_home, subset="train")
    test = load_conll2000(args.data_home, subset="test")
    feats_train, feats_test = featurize(train), featurize(test)
    vectorizer = SequenceVectorizer()
    X, X_test = vectorizer.fit_transform(feats_train), vectorizer.transform(feats_test)
    y, y_test = train.target, test.target
    rows = []
    for r in (1, 5):
        for passes in args.budgets:
            model = M3NSimplicialDecomposition(C=0.1, max_points=r, max_iter=passes,
                                               check_every=passes, random_state=0)
            memory = _fit(model, X, y)
            name = "BCFW (r=1)" if r == 1 else f"RSD r={r}"
            rows.append(_gap_row(f"{name}, {passes} passes", model, memory, "chunk_F1",
                                 chunk_f1_score(y_test, model.predict(X_test))))
            print_table(rows[-1:], list(rows[-1]))
    long_runs = [
        (f"{name} to 1e-3", M3NSimplicialDecomposition(
            C=0.1, max_points=r, tol=1e-3, max_iter=args.max_passes, check_every=5,
            random_state=0)) for r, name in ((1, "BCFW (r=1)"), (5, "RSD r=5"))
    ] + [
        ("StructSVMCuttingPlane n-slack", StructSVMCuttingPlane(
            C=0.1, variant="n-slack", tol=1e-3, max_iter=40, random_state=0)),
    ]
    for name, model in long_runs:
        memory = _fit(model, X, y)
        rows.append(_gap_row(name, model, memory, "chunk_F1",
                             chunk_f1_score(y_test, model.predict(X_test))))
        print_table(rows[-1:], list(rows[-1]))
    try:
        import sklearn_crfsuite  # noqa: F401
    except ImportError:
        print("sklearn-crfsuite is not installed: skipping it")
    else:
        for algorithm, params in (("lbfgs", dict(c1=0.1, c2=0.1, max_iterations=100)),
                                  ("pa", dict(max_iterations=20))):
            row, pred = run_crfsuite(feats_train, y, feats_test, algorithm, **params)
            row["chunk_F1"] = chunk_f1_score(y_test, pred)
            rows.append(row)
            print_table(rows[-1:], list(rows[-1]))
    print()
    print_table(rows, ["model", "fit_s", "peak_MB", "passes", "t_0.01", "passes_0.01",
                       "t_0.001", "passes_0.001", "final_rel_gap", "chunk_F1"])
    return rows


def _segmentation_scores(pred, truth):
    pred, truth = list(pred), list(truth)
    accuracy = float(np.mean(np.concatenate(pred) == np.concatenate(truth)))
    iou = [np.sum((p == 1) & (t == 1)) / max(np.sum((p == 1) | (t == 1)), 1)
           for p, t in zip(pred, truth)]
    return accuracy, float(np.mean(iou))


def horses(args):
    from sklearn.svm import LinearSVC

    data = load_weizmann_horses(args.data_home)
    X = grid_pixel_features(data.gray)
    y = [mask.ravel().astype(np.int64) for mask in data.masks]
    X_train, y_train, X_test, y_test = X[:200], y[:200], X[200:], y[200:]
    # the baseline any model must beat: each pixel takes its majority class over the
    # training masks, whatever the image
    prior = (np.mean(y_train, axis=0) > 0.5).astype(np.int64)
    accuracy, iou = _segmentation_scores([prior] * len(y_test), y_test)
    rows = [{"model": "prior mask (majority per pixel)", "fit_s": 0.0,
             "pixel_accuracy": accuracy, "mean_fg_IoU": iou}]
    print_table(rows[-1:], list(rows[-1]))
    svc = LinearSVC(C=args.C)
    with PeakMemory() as memory:
        svc.fit(np.vstack(X_train), np.concatenate(y_train))
    flat = svc.predict(np.vstack(X_test))
    pred = np.split(flat, np.cumsum([x.shape[0] for x in X_test])[:-1])
    accuracy, iou = _segmentation_scores(pred, y_test)
    rows.append({"model": f"LinearSVC per pixel C={args.C}", "fit_s": memory.seconds,
                 "peak_MB": memory.peak_mb, "pixel_accuracy": accuracy, "mean_fg_IoU": iou})
    print_table(rows[-1:], list(rows[-1]))
    for name, params in (("grid r=5 per example", dict(max_points=5)),
                         ("grid BCFW (r=1 per example)", dict(max_points=1))):
        model = M3NSimplicialDecomposition(
            GridStructure(width=32, contrast_gamma=20.0), C=args.C, tol=1e-2,
            max_iter=args.max_passes, random_state=0, **params)
        memory = _fit(model, X_train, y_train)
        accuracy, iou = _segmentation_scores(model.predict(X_test), y_test)
        h = model.history_
        edge = model.w_[model.structure_.nonnegative_]
        rows.append({"model": name, "fit_s": memory.seconds, "peak_MB": memory.peak_mb,
                     "pixel_accuracy": accuracy, "mean_fg_IoU": iou, "passes": model.n_iter_,
                     "final_rel_gap": float(h["gap"][-1] / h["primal"][-1]),
                     "edge_weights": " ".join(f"{v:.3g}" for v in edge)})
        print_table(rows[-1:], list(rows[-1]))
    print()
    print_table(rows, ["model", "fit_s", "peak_MB", "pixel_accuracy", "mean_fg_IoU", "passes",
                       "final_rel_gap", "edge_weights"])
    return rows


def main():
    p = parser(__doc__)
    p.add_argument("--experiment", choices=["dimension", "ocr", "conll2000", "horses"],
                   required=True)
    p.add_argument("--max-passes", type=int, default=300,
                   help="pass limit of the long runs of 'conll2000' and 'horses' and of the "
                        "single-block runs of 'dimension' ('ocr' has a limit per learner)")
    p.add_argument("--budgets", type=int, nargs="*", default=[5, 10],
                   help="'conll2000': the short pass budgets")
    p.add_argument("--C", type=float, default=0.1, help="C of the horses experiment")
    args = p.parse_args()
    rows = {"dimension": dimension, "ocr": ocr, "conll2000": conll2000,
            "horses": horses}[args.experiment](args)
    write_json(args.json, rows, args.run or args.experiment)


if __name__ == "__main__":
    main()
