"""L1M3N (Zhu et al. 2008): sparsity pattern on synthetic chains, OCR error rates, cutting-
plane time.

``--experiment table1``
    The shape of the seed's Table 1 on ``make_sparse_chain`` data (1,000 chains of 8 binary
    labels, 100 input features of which 30 relevant): 10-fold CV as in the seed (train on one
    fold of 100 chains), weights averaged over the folds, and the number of non-zero averaged
    weights on the 70 irrelevant features (140 state-feature weights) and in total (200) for
    each regularisation value of the three L1M3N solvers, beside the l2 learners.
``--experiment ocr``
    OCR100 ... OCR250 (section 5.2): N words drawn at random from each of the 10 folds;
    train on one fold (N words), test on the other nine, for each fold; mean and standard
    deviation of the per-letter error of L1M3N (em) beside the l2 M3N (StructSVMCuttingPlane),
    and the wall time of the cutting-plane solver over the 10 folds of OCR100.

    python benchmarks/bench_l1.py --experiment table1 [--folds 10]
    python benchmarks/bench_l1.py --experiment ocr [--sizes 100 150 200 250]
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from _common import parser, print_summary, print_table
from sklstruct import ChainStructure, L1M3N, M3NExpGrad, StructSVMCuttingPlane
from sklstruct.datasets import load_ocr_letters, make_sparse_chain
from sklstruct.metrics import token_accuracy


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def table1(args):
    X, y = make_sparse_chain(1000, random_state=0)
    folds = np.array_split(np.arange(1000), args.folds)
    settings = [("L1M3N em", "em_lambda", v, dict(solver="em", C=1.0, em_lambda=v))
                for v in (10, 100, 300, 1000, 3000, 10000, 30000)]
    settings += [("L1M3N cutting_plane", "C", v, dict(solver="cutting_plane", C=v))
                 for v in (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)]
    settings += [("L1M3N subgradient", "radius", v,
                  dict(solver="subgradient", radius=v, learning_rate=0.1, max_iter=500))
                 for v in (1, 3, 10, 30)]
    rows = []
    for name, param, value, params in settings:
        rows.append(_table1_row(name, param, value, lambda: L1M3N(**params), X, y, folds))
    rows.append(_table1_row("StructSVMCuttingPlane (l2)", "C", 0.1,
                            lambda: StructSVMCuttingPlane(C=0.1), X, y, folds))
    rows.append(_table1_row("M3NExpGrad (l2)", "C", 0.1,
                            lambda: M3NExpGrad(C=0.1, tol=1e-2), X, y, folds))
    print_summary(rows, args.json, args.run or args.experiment)


def _table1_row(name, param, value, make, X, y, folds):
    weights, errors, start = [], [], time.perf_counter()
    for fold in folds:
        train = set(fold.tolist())
        model = _fit(make(), [X[i] for i in fold], [y[i] for i in fold])
        test = [i for i in range(len(X)) if i not in train]
        errors.append(1 - token_accuracy([y[i] for i in test], model.predict([X[i] for i in test])))
        weights.append(model.coef_)
    average = np.mean(weights, axis=0)  # (2 states, 100 features)
    row = {"model": name, "param": param, "value": value,
           "irrelevant_nonzero": int(np.count_nonzero(average[:, 30:])),
           "total_nonzero": int(np.count_nonzero(average)),
           "error": float(np.mean(errors)), "fit_s_per_fold": (time.perf_counter() - start)
           / len(folds)}
    print_table([row], list(row))
    return row


def ocr(args):
    words = load_ocr_letters(args.data_home)
    chain = ChainStructure(start_end=False)
    rng = np.random.default_rng(0)
    rows = []
    for size in args.sizes:
        chosen = [rng.choice(np.flatnonzero(words.folds == f), size, replace=False)
                  for f in range(10)]
        learners = {"L1M3N em": lambda: L1M3N(chain, solver="em", C=1.0, em_lambda=5.0,
                                              max_iter=args.em_iterations),
                    "M3N l2 (StructSVMCuttingPlane)": lambda: StructSVMCuttingPlane(chain,
                                                                                    C=0.1)}
        if size == 100 and not args.skip_cutting_plane:
            learners["L1M3N cutting_plane"] = lambda: L1M3N(chain, solver="cutting_plane",
                                                            C=0.1, max_iter=200)
        for name, make in learners.items():
            errors, start, nonzero = [], time.perf_counter(), []
            for f in range(10):
                test = np.concatenate([chosen[g] for g in range(10) if g != f])
                model = _fit(make(), [words.data[i] for i in chosen[f]],
                             [words.target[i] for i in chosen[f]])
                pred = model.predict([words.data[i] for i in test])
                errors.append(1 - token_accuracy([words.target[i] for i in test], pred))
                nonzero.append(np.count_nonzero(model.w_) / model.w_.size)
            rows.append({"data": f"OCR{size}", "model": name,
                         "error_mean": float(np.mean(errors)), "error_std": float(np.std(errors)),
                         "nonzero_fraction": float(np.mean(nonzero)),
                         "cv_fit_s": time.perf_counter() - start})
            print_table(rows[-1:], list(rows[-1]))
    print_summary(rows, args.json, args.run or args.experiment)


def main():
    p = parser(__doc__)
    p.add_argument("--experiment", choices=["table1", "ocr"], default="table1")
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="*", default=[100, 150, 200, 250])
    p.add_argument("--em-iterations", type=int, default=5)
    p.add_argument("--skip-cutting-plane", action="store_true")
    args = p.parse_args()
    {"table1": table1, "ocr": ocr}[args.experiment](args)


if __name__ == "__main__":
    main()
