"""Fit and ``predict_marginals`` with 1,000 labels on 1,200 tokens: time and peak memory.

50 random sequences of 24 tokens with 20 dense features and labels drawn from 1,000 classes;
every estimator runs a few passes (``--estimator`` is evaluated as Python, e.g.
``"M3NExcessiveGap(C=0.1, max_iter=5)"``) in this process, which reports the fit's and the
marginals' wall time and the process's peak resident memory after each.

    python benchmarks/bench_many_labels.py --estimator "M3NSimplicialDecomposition(max_iter=5)"
"""

import argparse
import resource
import time
import warnings

import numpy as np

import sklstruct


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--estimator", default="M3NSimplicialDecomposition(C=0.1, max_iter=5)")
    p.add_argument("--n-labels", type=int, default=1000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(24, 20)) for _ in range(50)]
    y = [rng.integers(0, args.n_labels, 24) for _ in range(50)]
    estimator = eval(args.estimator, vars(sklstruct))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        estimator.fit(X, y)
        fit_s = time.perf_counter() - start
    fit_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    estimator.predict_marginals(X)
    marginals_s = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.estimator}: fit {fit_s:.1f} s (peak {fit_mb:.0f} MB), predict_marginals "
          f"{marginals_s:.1f} s (peak {peak_mb:.0f} MB)")


if __name__ == "__main__":
    main()
