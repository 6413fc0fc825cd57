"""This build of sklstruct beside another one (e.g. the previous ``main``), in the same run.

Every case is fitted in its own fresh process, alternating between the two builds, ``--repeats``
times; the table gives the median fit time of each build, their ratio and the objectives.

Cases (C = 0.1 throughout):

ocr_rsd
    OCR letters, train fold 1 (704 words), test the other folds:
    ``M3NSimplicialDecomposition()`` defaults.
ocr_one_slack
    The same data, ``StructSVMCuttingPlane()`` defaults (1-slack).
ocr_bcfw
    The same data, ``M3NSimplicialDecomposition(max_points=1, tol=1e-2)`` (block-coordinate
    Frank-Wolfe to a relative gap of 1e-2).
conll_bcfw
    CoNLL-2000 chunking, the window features of ``bench_chunking.py``, full training set:
    ``M3NSimplicialDecomposition(max_points=1, max_iter=10)`` (10 passes), test chunk F1.
horses
    Weizmann horses 32 x 32 as images with ``grid_pixel_features``, first 200 images for
    training, the other 128 for testing: ``M3NSimplicialDecomposition(GridStructure())``
    defaults; test pixel accuracy and mean foreground IoU.

    python benchmarks/bench_engine.py --baseline-python ../baseline/.venv/bin/python \\
        [--cases ocr_rsd horses] [--repeats 3] [--json results/engine.json]

The baseline interpreter must have the other build installed (e.g. ``pip install -e``); the
workers run from a temporary directory so that each imports its own installation.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["ocr_rsd", "ocr_one_slack", "ocr_bcfw", "conll_bcfw", "horses"]
C = 0.1


def _conll(data_home):
    from sklstruct.datasets import load_conll2000
    from sklstruct.preprocessing import SequenceVectorizer, window_features

    train = load_conll2000(data_home, subset="train")
    test = load_conll2000(data_home, subset="test")
    vectorizer = SequenceVectorizer()
    X_train = vectorizer.fit_transform([window_features(w, p)
                                        for w, p in zip(train.words, train.pos)])
    X_test = vectorizer.transform([window_features(w, p) for w, p in zip(test.words, test.pos)])
    return X_train, list(train.target), X_test, list(test.target)


def _horses(data_home):
    from sklstruct.datasets import grid_pixel_features, load_weizmann_horses

    data = load_weizmann_horses(data_home)
    features = grid_pixel_features(data.gray)
    images = [f.reshape(32, 32, -1) for f in features]
    masks = [m.astype(np.int64) for m in data.masks]
    return images[:200], masks[:200], images[200:], masks[200:]


def _model(case):
    from sklstruct import GridStructure, M3NSimplicialDecomposition, StructSVMCuttingPlane

    return {
        "ocr_rsd": lambda: M3NSimplicialDecomposition(C=C, random_state=0),
        "ocr_one_slack": lambda: StructSVMCuttingPlane(C=C),
        "ocr_bcfw": lambda: M3NSimplicialDecomposition(C=C, max_points=1, tol=1e-2,
                                                       random_state=0),
        "conll_bcfw": lambda: M3NSimplicialDecomposition(C=C, max_points=1, max_iter=10,
                                                         random_state=0),
        "horses": lambda: M3NSimplicialDecomposition(GridStructure(), C=C, random_state=0),
    }[case]()


def worker(case, data_home):
    """Fit one case in this process; print a JSON row."""
    sys.path.insert(0, HERE)
    from sklearn.exceptions import ConvergenceWarning

    import sklstruct
    from sklstruct.metrics import chunk_f1_score, token_accuracy

    from _common import ocr_fold1

    load = _horses if case == "horses" else _conll if case.startswith("conll") else ocr_fold1
    X_train, y_train, X_test, y_test = load(data_home)
    model = _model(case)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    predicted = model.predict(X_test)
    h = model.history_
    row = {"case": case, "build": os.path.dirname(sklstruct.__file__), "fit_s": seconds,
           "n_iter": int(model.n_iter_), "objective": float(model.objective(X_train, y_train)),
           "final_rel_gap": float(h["gap"][-1] / h["primal"][-1])}
    if case == "horses":
        truth = np.concatenate([m.ravel() for m in y_test])
        guess = np.concatenate([np.asarray(p).ravel() for p in predicted])
        row["pixel_accuracy"] = float(np.mean(truth == guess))
        ious = [np.sum((t == 1) & (p == 1)) / max(np.sum((t == 1) | (p == 1)), 1)
                for t, p in zip(y_test, predicted)]
        row["mean_fg_IoU"] = float(np.mean(ious))
    elif case.startswith("conll"):
        row["chunk_F1"] = float(chunk_f1_score(y_test, predicted))
    else:
        row["letter_accuracy"] = float(token_accuracy(y_test, predicted))
    print(json.dumps(row))


def _run(python, case, data_home):
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run([python, os.path.abspath(__file__), "--worker", case,
                              "--data-home", os.path.abspath(data_home)],
                             cwd=scratch, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    sys.path.insert(0, HERE)
    from _common import parser, print_table, write_json

    p = parser(__doc__)
    p.add_argument("--worker", default=None, help=argparse_hidden())
    p.add_argument("--baseline-python", default=None,
                   help="interpreter with the other build installed")
    p.add_argument("--cases", nargs="*", default=CASES, choices=CASES)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.data_home)
    builds = {"this": sys.executable}
    if args.baseline_python:
        builds["baseline"] = args.baseline_python
    rows = []
    for case in args.cases:
        results = {name: [] for name in builds}
        for _ in range(args.repeats):
            for name, python in builds.items():  # alternate, so load drifts hit both
                results[name].append(_run(python, case, args.data_home))
        row = {"case": case}
        for name, runs in results.items():
            row[f"{name}_fit_s"] = float(np.median([r["fit_s"] for r in runs]))
            for key, value in runs[0].items():
                if key not in ("case", "build", "fit_s"):
                    row[f"{name}_{key}"] = value
        if "baseline" in builds:
            row["time_ratio"] = row["this_fit_s"] / row["baseline_fit_s"]
            row["objective_rel_diff"] = (row["this_objective"] - row["baseline_objective"]) \
                / row["baseline_objective"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    columns = sorted({key for row in rows for key in row}, key=lambda k: (k != "case", k))
    print_table(rows, columns)
    write_json(args.json, rows)


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
