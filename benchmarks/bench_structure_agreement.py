"""Every learner on every graph structure: objectives and certified gaps agree.

On small problems of each new structure, every L2 learner is fitted at the same ``C`` with a
tight tolerance; each reports its primal objective ``P`` and duality gap ``g``, so the
optimum lies in ``[P - g, P]``. The learners agree when these intervals share a point:
``max(P - g) <= min(P)`` (all oracles here are exact: trees, enumerable loopy graphs,
multi-label graphs of 4 labels). Problems:

- ``tree``: :class:`~sklstruct.TreeStructure` on 20 trees of ``make_tree_data``;
- ``graph+edge features``: :class:`~sklstruct.GraphStructure` on 20 random graphs with
  cycles (at most 7 nodes, 3 states, enumerated) and 2 edge features;
- ``multilabel independent/tree/full``: :class:`~sklstruct.MultiLabelStructure` on 60
  samples, 4 labels;
- ``hierarchy``: :class:`~sklstruct.MultiLabelStructure` with a 6-label hierarchy.

    python benchmarks/bench_structure_agreement.py [--C 1.0] [--json PATH]

With ``--json PATH`` the rows are stored as a run of PATH (the committed run: ``--json
benchmarks/results/structure_agreement.json``); without it nothing is written.
"""

import os
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parser, print_summary  # noqa: E402

from sklstruct import (GraphStructure, M3NExcessiveGap, M3NExpGrad,  # noqa: E402
                       M3NSimplicialDecomposition, MultiLabelStructure,
                       StructSVMCuttingPlane, TreeStructure)
from sklstruct.datasets import make_tree_data  # noqa: E402

LEARNERS = {
    "cutting plane 1-slack": lambda s, C: StructSVMCuttingPlane(s, C=C, tol=1e-6),
    "cutting plane n-slack": lambda s, C: StructSVMCuttingPlane(s, C=C, tol=1e-6,
                                                                variant="n-slack"),
    "exp. gradient online": lambda s, C: M3NExpGrad(s, C=C, tol=1e-5, max_iter=20000,
                                                    algorithm="online"),
    "exp. gradient batch": lambda s, C: M3NExpGrad(s, C=C, tol=1e-5, max_iter=20000,
                                                   algorithm="batch"),
    "excessive gap": lambda s, C: M3NExcessiveGap(s, C=C, tol=1e-5, max_iter=20000),
    "simplicial (RSD)": lambda s, C: M3NSimplicialDecomposition(s, C=C, tol=1e-6,
                                                                max_iter=5000, random_state=0),
    "Frank-Wolfe (BCFW)": lambda s, C: M3NSimplicialDecomposition(
        s, C=C, tol=1e-4, max_iter=20000, max_points=1, random_state=0),
}


def random_graphs(seed, n_graphs=20):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_graphs):
        n = int(rng.integers(3, 8))
        pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.5]
        pairs += [(v - 1, v) for v in range(1, n) if (v - 1, v) not in pairs]
        labels = rng.integers(0, 3, size=n)
        features = np.eye(3)[labels] + rng.normal(scale=1.0, size=(n, 3))
        X.append((features, np.array(pairs), rng.normal(size=(len(pairs), 2))))
        y.append(labels)
    return X, y


def multilabel(seed, n_samples=60, n_labels=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, 5))
    Y = (X @ rng.normal(size=(5, n_labels)) + rng.normal(size=(n_samples, n_labels))
         > 0).astype(int)
    Y[:, -1] = Y[:, -2]
    return X, Y


def hierarchy_problem(seed, n_samples=60):
    rng = np.random.default_rng(seed)
    parents = np.array([-1, 0, 0, 1, 1, 2])
    X = rng.normal(size=(n_samples, 3))
    Y = np.zeros((n_samples, 6), dtype=int)
    Y[:, 0] = 1
    Y[:, 1] = X[:, 0] + 0.5 * rng.normal(size=n_samples) > 0
    Y[:, 2] = 1 - Y[:, 1]
    Y[:, 3] = Y[:, 1] * (X[:, 1] > 0)
    Y[:, 4] = Y[:, 1] * (X[:, 1] <= 0)
    Y[:, 5] = Y[:, 2] * (X[:, 2] > 0)
    return parents, X, Y


def problems():
    X, y = make_tree_data(20, n_nodes=(3, 10), random_state=0)
    yield "tree", TreeStructure(), X, y
    X, y = random_graphs(1)
    yield "graph+edge features", GraphStructure(), X, y
    X, Y = multilabel(2)
    for pairs in ("independent", "tree", "full"):
        yield f"multilabel {pairs}", MultiLabelStructure(pairs=pairs), X, Y
    parents, X, Y = hierarchy_problem(3)
    yield "hierarchy", MultiLabelStructure(hierarchy=parents), X, Y


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--C", type=float, default=1.0)
    args = p.parse_args()
    rows, verdicts = [], []
    for problem, structure, X, y in problems():
        results = []
        for name, make in LEARNERS.items():
            model = make(structure, args.C)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X, y)
            seconds = time.perf_counter() - start
            primal, gap = float(model.history_["primal"][-1]), float(model.history_["gap"][-1])
            results.append((primal, gap))
            rows.append(dict(problem=problem, learner=name, primal=primal, gap=gap,
                             objective=model.objective(X, y), fit_seconds=seconds,
                             n_inexact=model.n_inexact_examples_))
            print(rows[-1], flush=True)
        lower = max(P - g for P, g in results)
        upper = min(P for P, _ in results)
        verdicts.append((problem, lower, upper, lower <= upper + 1e-9 * abs(upper)))
    print()
    for problem, lower, upper, ok in verdicts:
        print(f"{problem:22s} optimum in [{lower:.6f}, {upper:.6f}]: learners "
              f"{'agree' if ok else 'DISAGREE'} within their certified gaps")
    print_summary(rows, args.json, args.run)


if __name__ == "__main__":
    main()
