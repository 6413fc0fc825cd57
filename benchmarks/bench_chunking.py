"""CoNLL-2000 chunking: StructSVMCuttingPlane beside sklearn-crfsuite and a per-token LinearSVC.

Full training set (8,936 sentences, 211,727 tokens), official test set, the standard window
features of :func:`sklstruct.preprocessing.window_features` (words and POS tags in a +-2 window,
suffixes, shape flags, POS bigrams). Reports fit time, peak memory (resident set above the level
before fitting), test chunk F1 (conlleval semantics) and token accuracy; the peers run in the
same process when installed.

    python benchmarks/bench_chunking.py [--C 0.05] [--n-slack-C 0.1] [--passes 10] [--tol 0.1]
                                        [--skip-one-slack] [--skip-peers]
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from _common import PeakMemory, parser, print_table, write_json
from sklstruct import StructSVMCuttingPlane
from sklstruct.datasets import load_conll2000
from sklstruct.metrics import chunk_f1_score, token_accuracy
from sklstruct.preprocessing import SequenceVectorizer, window_features


def featurize(data):
    return [window_features(w, p) for w, p in zip(data.words, data.pos)]


def run_sklstruct(X_train, y_train, X_test, verbose, **params):
    model = StructSVMCuttingPlane(verbose=verbose, **params)
    with PeakMemory() as m:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, y_train)
    name = "StructSVMCuttingPlane " + " ".join(f"{k}={v}" for k, v in params.items())
    row = {"model": name, "fit_s": m.seconds, "peak_MB": m.peak_mb,
           "iterations": model.n_iter_, "primal": model.history_["primal"][-1],
           "gap": model.history_["gap"][-1]}
    return row, model.predict(X_test)


def run_crfsuite(feats_train, y_train, feats_test, algorithm, **params):
    import sklearn_crfsuite

    crf = sklearn_crfsuite.CRF(algorithm=algorithm, **params)
    with PeakMemory() as m:
        crf.fit(feats_train, [list(y) for y in y_train])
    name = f"sklearn-crfsuite {algorithm} " + " ".join(f"{k}={v}" for k, v in params.items())
    return {"model": name, "fit_s": m.seconds, "peak_MB": m.peak_mb}, \
        [np.array(p) for p in crf.predict(feats_test)]


def run_linear_svc(X_train, y_train, X_test):
    import scipy.sparse as sp
    from sklearn.svm import LinearSVC

    svc = LinearSVC(C=0.1)
    with PeakMemory() as m:
        svc.fit(sp.vstack(X_train), np.concatenate(y_train))
    flat = svc.predict(sp.vstack(X_test))
    pred = np.split(flat, np.cumsum([x.shape[0] for x in X_test])[:-1])
    return {"model": "LinearSVC per token C=0.1", "fit_s": m.seconds, "peak_MB": m.peak_mb}, pred


def main():
    p = parser(__doc__)
    p.add_argument("--C", type=float, default=0.05)
    p.add_argument("--tol", type=float, default=0.1)
    p.add_argument("--cache-size", type=int, default=0,
                   help="label cache per example (Viterbi is cheaper than evaluating a cache)")
    p.add_argument("--verbose", type=int, default=0)
    p.add_argument("--n-slack-C", type=float, default=0.1)
    p.add_argument("--passes", type=int, default=10, help="n-slack passes over the data")
    p.add_argument("--skip-one-slack", action="store_true")
    p.add_argument("--skip-peers", action="store_true")
    args = p.parse_args()

    train = load_conll2000(args.data_home, subset="train")
    test = load_conll2000(args.data_home, subset="test")
    feats_train, feats_test = featurize(train), featurize(test)
    vectorizer = SequenceVectorizer()
    X_train = vectorizer.fit_transform(feats_train)
    X_test = vectorizer.transform(feats_test)
    y_train, y_test = train.target, test.target
    print(f"CoNLL-2000: {len(X_train)} train / {len(X_test)} test sentences, "
          f"{X_train[0].shape[1]} features, {len(set(np.concatenate(y_train)))} train tags")

    runs = [
        # n-slack: 10 passes over the data (the row's gap certifies how far from the optimum)
        lambda: run_sklstruct(X_train, y_train, X_test, args.verbose, variant="n-slack",
                              C=args.n_slack_C, tol=args.tol, max_iter=args.passes,
                              random_state=0),
    ]
    if not args.skip_one_slack:
        runs.append(lambda: run_sklstruct(X_train, y_train, X_test, args.verbose,
                                          variant="1-slack", C=args.C, tol=args.tol,
                                          cache_size=args.cache_size))
    if not args.skip_peers:
        try:
            import sklearn_crfsuite  # noqa: F401

            runs.append(lambda: run_crfsuite(feats_train, y_train, feats_test, "lbfgs",
                                             c1=0.1, c2=0.1, max_iterations=100))
            runs.append(lambda: run_crfsuite(feats_train, y_train, feats_test, "pa",
                                             max_iterations=20))
        except ImportError:
            print("sklearn-crfsuite is not installed: skipping it")
        runs.append(lambda: run_linear_svc(X_train, y_train, X_test))
    rows = []
    for run in runs:
        row, pred = run()
        row["chunk_F1"] = chunk_f1_score(y_test, pred)
        row["token_acc"] = token_accuracy(y_test, pred)
        rows.append(row)
        print_table([row], list(row))
    print()
    print_table(rows, ["model", "fit_s", "peak_MB", "chunk_F1", "token_acc", "iterations",
                       "primal", "gap"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
