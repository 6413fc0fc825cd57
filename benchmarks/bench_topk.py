"""Top-k decoding and sequence confidence on CoNLL-2000 beside Viterbi, in one run.

The chain model is ``M3NSimplicialDecomposition(C=0.1, max_iter=3)`` fitted on the full
CoNLL-2000 training set with the features of ``bench_defaults.py`` (cached in ``--cache``;
the fitted model is cached there too). On the official test set (2,012 sentences, 47,377
tokens) every operation is timed ``--repeats`` times, interleaved, and the best time is
reported as tokens per second:

- ``kernel`` rows run on precomputed potentials (the unary product ``X W^T`` excluded):
  ``viterbi``, ``topk_viterbi`` for every ``--k``, ``log_partition`` and ``forward_backward``;
- ``end-to-end`` rows run the estimator-facing functions on the flat test matrix with
  ``lengths=`` (input validation, the unary product and the per-sentence outputs included):
  ``predict``, ``predict_topk`` for every ``--k`` and ``sequence_confidence``.

The first labelling of every top-k list is checked against ``predict``.

    python benchmarks/bench_topk.py [--k 1 10] [--repeats 5] [--json PATH]

With ``--json PATH`` the rows are stored as a run of PATH (the committed runs: ``--json
benchmarks/results/topk.json``); without it nothing is written.
"""

import os
import pickle
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import ROOT, parser, print_table, write_json  # noqa: E402
from bench_defaults import _load, prepare  # noqa: E402

from sklstruct import M3NSimplicialDecomposition  # noqa: E402
from sklstruct._inference.chain import (  # noqa: E402
    forward_backward,
    log_partition,
    topk_viterbi,
    viterbi,
)


def fitted_model(folder, C, max_iter):
    """The chain model fitted on the training set, from the cache when it is there."""
    path = os.path.join(folder, f"topk_model_C{C:g}_iter{max_iter}.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f), None
    X, y = _load(folder, "train")
    model = M3NSimplicialDecomposition(C=C, max_iter=max_iter)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    fit_s = time.perf_counter() - start
    with open(path, "wb") as f:
        pickle.dump(model, f)
    return model, fit_s


def seconds(function):
    """The wall time of one call."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main():
    p = parser(__doc__)
    p.add_argument("--cache", default=os.path.join(ROOT, "benchmarks", ".cache"))
    p.add_argument("--C", type=float, default=0.1)
    p.add_argument("--max-iter", type=int, default=3)
    p.add_argument("--k", type=int, nargs="*", default=[1, 10])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    folder = prepare("conll2000", args.data_home, args.cache)
    model, fit_s = fitted_model(folder, args.C, args.max_iter)
    X_test, _ = _load(folder, "test")
    X_flat = sp.vstack(X_test, format="csr")
    lengths = np.array([x.shape[0] for x in X_test])
    n_tokens = int(lengths.sum())
    print(f"CoNLL-2000 test: {len(X_test)} sentences, {n_tokens} tokens, "
          f"{model.classes_.shape[0]} classes, {X_flat.shape[1]} features"
          + ("" if fit_s is None else f" (model fitted in {fit_s:.1f} s)"))

    batch, _, _ = model._validate_input(X_flat, None, lengths, reset=False)
    unary, pairwise = model._potentials(batch)
    chain = (unary, batch.offsets) + model.structure_.pairwise_parameters(pairwise)

    predicted = model.predict(X_flat, lengths=lengths)
    for k in args.k:
        labels, _ = model.predict_topk(X_flat, k=k, lengths=lengths)
        first = np.concatenate([labelling[0] for labelling in labels])
        assert np.array_equal(first, predicted), f"top-{k} disagrees with predict"

    operations = [("kernel", "viterbi", lambda: viterbi(*chain))]
    operations += [("kernel", f"topk_viterbi k={k}", lambda k=k: topk_viterbi(*chain, k=k))
                   for k in args.k]
    operations += [("kernel", "log_partition", lambda: log_partition(*chain)),
                   ("kernel", "forward_backward", lambda: forward_backward(*chain)),
                   ("end-to-end", "predict", lambda: model.predict(X_flat, lengths=lengths))]
    operations += [("end-to-end", f"predict_topk k={k}",
                    lambda k=k: model.predict_topk(X_flat, k=k, lengths=lengths))
                   for k in args.k]
    operations += [("end-to-end", "sequence_confidence",
                    lambda: model.sequence_confidence(X_flat, lengths=lengths))]
    times = {name: np.inf for _, name, _ in operations}
    for _ in range(args.repeats):
        for _, name, function in operations:
            times[name] = min(times[name], seconds(function))
    rows = [{"scope": scope, "operation": name, "tokens": n_tokens, "seconds": times[name],
             "tokens_per_s": n_tokens / times[name]} for scope, name, _ in operations]
    print()
    print_table(rows, ["scope", "operation", "seconds", "tokens_per_s"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
