"""Results that do not depend on threads: for a given ``random_state``, every learner's weights
are the same bits whatever ``n_jobs`` is and however many threads BLAS and OpenMP run, and
GridSearchCV scores the same sequentially, in loky processes and on a dask cluster.

The optimisers' reductions run in compiled code in a fixed order (or over whole examples,
each on one thread), so that the iterates, the certificates and hence the stopping iteration
are those of one thread."""

import hashlib
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklstruct import (GridStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, StructSVMCuttingPlane)

from sklstruct._inference import chain as chain_inference

from ._helpers import make_chain_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHAINS = make_chain_data(n_sequences=300, n_states=4, n_features=6, max_length=6, seed=3,
                         sparse=True)
DENSE_CHAINS = make_chain_data(n_sequences=200, n_states=4, n_features=6, max_length=6, seed=4)


def _grid_data(n_images, side=3, seed=0):
    """Binary images whose labels are smooth, with a noisy copy of the label as feature."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_images):
        field = rng.normal(size=(side, side))
        labels = ((field + np.roll(field, 1, 0) + np.roll(field, 1, 1)) > 0).astype(int).ravel()
        X.append(np.column_stack([labels + rng.normal(scale=1.2, size=side * side),
                                  np.ones(side * side)]))
        y.append(labels)
    return X, y


def _digits():
    X, y = load_digits(return_X_y=True)
    return X[:400] / 16.0, y[:400]


# (estimator, data): every learner, its main variants, chains (sparse and dense), a grid and
# multiclass data
CASES = {
    "rsd": (lambda: M3NSimplicialDecomposition(C=1.0, tol=1e-3, random_state=0), CHAINS),
    "bcfw": (lambda: M3NSimplicialDecomposition(C=1.0, tol=1e-3, max_points=1,
                                                random_state=0), CHAINS),
    "rsd-full-passes": (lambda: M3NSimplicialDecomposition(C=1.0, shrinking=False, max_iter=15,
                                                           random_state=0), DENSE_CHAINS),
    "rsd-grid": (lambda: M3NSimplicialDecomposition(structure=GridStructure(width=3), C=1.0,
                                                    tol=1e-3, random_state=0),
                 _grid_data(150)),
    "rsd-multiclass": (lambda: M3NSimplicialDecomposition(C=1.0, max_iter=30, random_state=0),
                       _digits()),
    "eg-online": (lambda: M3NExpGrad(C=1.0, algorithm="online", tol=1e-3, random_state=0),
                  CHAINS),
    "eg-batch": (lambda: M3NExpGrad(C=1.0, algorithm="batch", max_iter=40, random_state=0),
                 DENSE_CHAINS),
    "one-slack": (lambda: StructSVMCuttingPlane(C=1.0, variant="1-slack", tol=1e-3), CHAINS),
    "n-slack": (lambda: StructSVMCuttingPlane(C=1.0, variant="n-slack", tol=1e-3,
                                              batch_size=50, random_state=0), CHAINS),
    "n-slack-multiclass": (lambda: StructSVMCuttingPlane(C=1.0, variant="n-slack",
                                                         random_state=0), _digits()),
    "excessive-gap": (lambda: M3NExcessiveGap(C=1.0, max_iter=40), DENSE_CHAINS),
    "l1": (lambda: L1M3N(C=1.0, max_iter=5), DENSE_CHAINS),
}


def _fit(case, n_jobs):
    make, (X, y) = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return make().set_params(n_jobs=n_jobs).fit(X, y)


def _digest(model):
    return hashlib.sha256(np.ascontiguousarray(model.coef_).tobytes()).hexdigest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_weights_do_not_depend_on_n_jobs(case, monkeypatch):
    # batch sums over chunks of a few tokens, so that they take several chunks here
    monkeypatch.setattr(chain_inference, "REDUCTION_CHUNK_TOKENS", 64)
    reference = _fit(case, None)
    for n_jobs in (2, 4, -1):
        model = _fit(case, n_jobs)
        assert np.array_equal(model.coef_, reference.coef_), n_jobs
        assert model.n_iter_ == reference.n_iter_
        for field in ("primal", "dual", "gap"):  # (NaN where a check has no primal)
            np.testing.assert_array_equal(model.history_[field], reference.history_[field])


_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tests.test_thread_independence import _digest, _fit
    for case in {cases!r}:
        print(case, _digest(_fit(case, {n_jobs})))
""")


def test_weights_do_not_depend_on_blas_threads():
    """Fresh processes whose BLAS and OpenMP run 1 or 2 threads (dense data, where the
    potentials are BLAS products)."""
    cases = ["rsd-full-passes", "rsd-multiclass", "eg-batch", "n-slack-multiclass",
             "excessive-gap", "l1"]
    outputs = set()
    for threads, n_jobs in [("1", 1), ("2", 1), ("2", 2)]:
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads,
                   MKL_NUM_THREADS=threads, PYTHONPATH=ROOT)
        script = _SCRIPT.format(root=ROOT, cases=cases, n_jobs=n_jobs)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        outputs.add(out.stdout)
    assert len(outputs) == 1, outputs
    here = "".join(f"{case} {_digest(_fit(case, None))}\n" for case in cases)
    assert outputs == {here}


def _scores(n_jobs):
    X, y = CHAINS
    search = GridSearchCV(M3NSimplicialDecomposition(random_state=0, tol=1e-3),
                          {"C": [0.1, 1.0]}, cv=KFold(3), n_jobs=n_jobs)
    results = search.fit(X, y).cv_results_
    return np.array([results[f"split{k}_test_score"] for k in range(3)])


def test_grid_search_scores_do_not_depend_on_the_backend():
    import joblib

    sequential = _scores(None)
    assert np.array_equal(_scores(2), sequential)  # loky processes
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster), joblib.parallel_backend("dask"):
        assert np.array_equal(_scores(None), sequential)
