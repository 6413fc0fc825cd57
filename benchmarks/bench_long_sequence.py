"""One long sequence: fit time and peak memory of an estimator on a single chain.

The chain has ``--tokens`` tokens (default 200,000), 20 states and 1,000 sparse binary
features (5 per token), labelled by the best state of a random linear model; the estimator
(``--estimator``, evaluated as Python) is fitted on it as one sequence in this process, which
reports the fit's wall time, its peak resident memory, the passes and the certified gap.

    python benchmarks/bench_long_sequence.py --estimator "M3NSimplicialDecomposition(C=0.1)"
"""

import argparse
import resource
import time
import warnings

import numpy as np
import scipy.sparse as sp

import sklstruct


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--estimator", default="M3NSimplicialDecomposition(C=0.1, max_time=120)")
    p.add_argument("--tokens", type=int, default=200000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    n, d, S = args.tokens, 1000, 20
    columns = rng.integers(0, d, size=(n, 5))
    X = sp.csr_matrix((np.ones(n * 5), columns.ravel(), np.arange(0, n * 5 + 1, 5)),
                      shape=(n, d))
    X.sum_duplicates()
    y = np.asarray((X @ rng.normal(size=(d, S))).argmax(axis=1)).ravel()
    estimator = eval(args.estimator, vars(sklstruct))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        estimator.fit([X], [y])
        elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    history = estimator.history_
    print(f"{args.estimator} on {n} tokens: fit {elapsed:.1f} s, peak {peak:.0f} MB, "
          f"{estimator.n_iter_} iterations, relative gap "
          f"{history['gap'][-1] / history['primal'][-1]:.2e}")


if __name__ == "__main__":
    main()
