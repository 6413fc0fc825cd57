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

ocr_{cp,eg,exgap,l1,rsd} and conll2k_{cp,eg,exgap,l1,rsd}
    Every learner with its defaults (``random_state=0``; ``M3NExcessiveGap`` capped at 40
    iterations on CoNLL, ``M3NSimplicialDecomposition`` without shrinking when the other build
    lacks it) on OCR fold 1 and on the first 2,000 CoNLL-2000 training sentences: with
    ``--weights-dir`` the weights of both builds are compared (largest difference relative to
    the largest weight).
classes_rsd, classes_eg
    Plain multiclass data with many classes: 4,000 training and 2,000 test samples of 50
    Gaussian features, 300 classes given by a random linear teacher (``MultiClass``):
    ``M3NSimplicialDecomposition(max_iter=5)`` and ``M3NExpGrad(max_iter=5)`` (five passes).

    python benchmarks/bench_engine.py --baseline-python ../baseline/.venv/bin/python \\
        [--cases ocr_rsd horses] [--repeats 3] [--json results/engine.json]
    python benchmarks/bench_engine.py --baseline-path ../baseline --weights-dir /tmp/w \\
        --cases ocr_cp conll2k_cp

The baseline interpreter must have the other build installed (e.g. ``pip install -e``), or
``--baseline-path`` names a checkout with its compiled modules built in place; the workers
run from a temporary directory so that each imports its own build.
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
ROOT = os.path.dirname(HERE)
LEARNER_CASES = [f"{data}_{learner}" for data in ("ocr", "conll2k")
                 for learner in ("cp", "eg", "exgap", "l1", "rsd")]
CASES = ["ocr_rsd", "ocr_one_slack", "ocr_bcfw", "conll_bcfw", "horses"] + [
    case for case in LEARNER_CASES if case != "ocr_rsd"] + ["classes_rsd", "classes_eg"]
C = 0.1


def _conll(data_home, n_train=None):
    from sklstruct.datasets import load_conll2000
    from sklstruct.preprocessing import SequenceVectorizer, window_features

    train = load_conll2000(data_home, subset="train")
    if n_train is not None:
        train.words, train.pos, train.target = (train.words[:n_train], train.pos[:n_train],
                                                train.target[:n_train])
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


def _many_classes(n_train=4000, n_test=2000, n_features=50, n_classes=300, seed=0):
    """Gaussian samples labelled by the best class of a random linear teacher."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, n_features)
    y = np.argmax(X @ rng.randn(n_features, n_classes), axis=1)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _model(case):
    from sklstruct import (L1M3N, GridStructure, M3NExcessiveGap, M3NExpGrad,
                           M3NSimplicialDecomposition, StructSVMCuttingPlane)

    if case in LEARNER_CASES:
        data, learner = case.split("_")
        rsd = {"random_state": 0}
        if "shrinking" in M3NSimplicialDecomposition().get_params():
            rsd["shrinking"] = False  # (the algorithm of a build without it)
        return {
            "cp": lambda: StructSVMCuttingPlane(C=C, random_state=0),
            "eg": lambda: M3NExpGrad(C=C, random_state=0),
            "exgap": lambda: M3NExcessiveGap(C=C, **({"max_iter": 40} if data == "conll2k"
                                                       else {})),
            "l1": lambda: L1M3N(C=C),
            "rsd": lambda: M3NSimplicialDecomposition(C=C, **rsd),
        }[learner]()
    return {
        "ocr_rsd": lambda: M3NSimplicialDecomposition(C=C, random_state=0),
        "ocr_one_slack": lambda: StructSVMCuttingPlane(C=C),
        "ocr_bcfw": lambda: M3NSimplicialDecomposition(C=C, max_points=1, tol=1e-2,
                                                       random_state=0),
        "conll_bcfw": lambda: M3NSimplicialDecomposition(C=C, max_points=1, max_iter=10,
                                                         random_state=0),
        "horses": lambda: M3NSimplicialDecomposition(GridStructure(), C=C, random_state=0),
        "classes_rsd": lambda: M3NSimplicialDecomposition(C=C, max_iter=5, random_state=0),
        "classes_eg": lambda: M3NExpGrad(C=C, max_iter=5, random_state=0),
    }[case]()


def worker(case, data_home, weights=None):
    """Fit one case in this process; print a JSON row (and save the weights to ``weights``,
    an ``.npy`` path, when given)."""
    sys.path.insert(0, HERE)
    from sklearn.exceptions import ConvergenceWarning

    import sklstruct
    from sklstruct.metrics import chunk_f1_score, token_accuracy

    from _common import ocr_fold1

    if case == "horses":
        X_train, y_train, X_test, y_test = _horses(data_home)
    elif case.startswith("classes"):
        X_train, y_train, X_test, y_test = _many_classes()
    elif case.startswith("conll2k"):
        X_train, y_train, X_test, y_test = _conll(data_home, n_train=2000)
    elif case.startswith("conll"):
        X_train, y_train, X_test, y_test = _conll(data_home)
    else:
        X_train, y_train, X_test, y_test = ocr_fold1(data_home)
    model = _model(case)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    predicted = model.predict(X_test)
    if weights is not None:
        np.save(weights, model.w_)
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
    elif case.startswith("classes"):
        row["accuracy"] = float(np.mean(np.asarray(y_test) == np.asarray(predicted)))
    else:
        row["letter_accuracy"] = float(token_accuracy(y_test, predicted))
    print(json.dumps(row))


def _run(python, path, case, data_home, weights=None):
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.path.abspath(path)
    command = [python, os.path.abspath(__file__), "--worker", case,
               "--data-home", os.path.abspath(data_home)]
    if weights is not None:
        command += ["--weights", weights]
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run(command, cwd=scratch, capture_output=True, text=True, check=True,
                             env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    sys.path.insert(0, HERE)
    from _common import parser, print_table, write_json

    p = parser(__doc__)
    p.add_argument("--worker", default=None, help=argparse_hidden())
    p.add_argument("--baseline-python", default=None,
                   help="interpreter with the other build installed")
    p.add_argument("--baseline-path", default=None,
                   help="checkout of the other build, its compiled modules built in place")
    p.add_argument("--weights-dir", default=None,
                   help="save both builds' weights here and compare them")
    p.add_argument("--weights", default=None, help=argparse_hidden())
    p.add_argument("--cases", nargs="*", default=CASES, choices=CASES)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.data_home, args.weights)
    builds = {"this": (sys.executable, ROOT)}
    if args.baseline_python or args.baseline_path:
        builds["baseline"] = (args.baseline_python or sys.executable, args.baseline_path)
    if args.weights_dir:
        os.makedirs(args.weights_dir, exist_ok=True)
    rows = []
    for case in args.cases:
        results = {name: [] for name in builds}
        for repeat in range(args.repeats):
            for name, (python, path) in builds.items():  # alternate: load drifts hit both
                weights = None if args.weights_dir is None or repeat else \
                    os.path.join(args.weights_dir, f"{case}_{name}.npy")
                results[name].append(_run(python, path, case, args.data_home, weights))
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
            if args.weights_dir:
                this, base = (np.load(os.path.join(args.weights_dir, f"{case}_{name}.npy"))
                              for name in ("this", "baseline"))
                row["weights_rel_diff"] = float(np.abs(this - base).max()
                                                / max(np.abs(base).max(), 1e-300))
        rows.append(row)
        print(json.dumps(row), flush=True)
    columns = sorted({key for row in rows for key in row}, key=lambda k: (k != "case", k))
    print_table(rows, columns)
    write_json(args.json, rows, args.run)


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
