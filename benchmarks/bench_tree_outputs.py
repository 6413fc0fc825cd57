"""Tree-structured outputs: a tree model beside a chain over the same nodes.

Data from :func:`sklstruct.datasets.make_tree_data` (DOM-like random trees of 5 to 30
nodes numbered in document order, 4 labels drawn top-down from a known transition matrix,
noisy 10-dimensional features): ``--n-train`` trees for training and ``--n-test`` others
from the same model for testing, for every seed of ``--seeds``. Models, all
``M3NSimplicialDecomposition(C)``:

- ``tree``: :class:`~sklstruct.TreeStructure` on the true tree (exact belief propagation);
- ``chain``: :class:`~sklstruct.ChainStructure` over the same nodes in document order;
- ``independent``: :class:`~sklstruct.MultiClass` on the nodes one by one.

Prints node accuracy on the test trees and fit time for every model and seed, and the mean
accuracy per model.

    python benchmarks/bench_tree_outputs.py [--n-train 300] [--n-test 300] [--seeds 0 1 2]
        [--json PATH]

With ``--json PATH`` the rows are stored as a run of PATH (the committed run: ``--json
benchmarks/results/tree_outputs.json``); without it nothing is written.
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

from sklstruct import (ChainStructure, M3NSimplicialDecomposition, MultiClass,  # noqa: E402
                       TreeStructure)
from sklstruct.datasets import make_tree_data  # noqa: E402


def views(X):
    """The trees as trees, as chains in document order, and as independent nodes."""
    nodes = [features for features, _ in X]
    return {"tree": X, "chain": nodes, "independent": np.vstack(nodes)}


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--n-train", type=int, default=300)
    p.add_argument("--n-test", type=int, default=300)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--C", type=float, default=1.0)
    args = p.parse_args()
    structures = {"tree": TreeStructure, "chain": ChainStructure, "independent": MultiClass}
    rows = []
    for seed in args.seeds:
        X, y = make_tree_data(args.n_train + args.n_test, random_state=seed)
        train, test = views(X[:args.n_train]), views(X[args.n_train:])
        y_train, y_test = y[:args.n_train], np.concatenate(y[args.n_train:])
        for name, structure in structures.items():
            model = M3NSimplicialDecomposition(structure(), C=args.C, random_state=0)
            labels = np.concatenate(y_train) if name == "independent" else y_train
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(train[name], labels)
            seconds = time.perf_counter() - start
            predicted = model.predict(test[name])
            if name != "independent":
                predicted = np.concatenate(predicted)
            rows.append(dict(seed=seed, model=name, accuracy=float(np.mean(predicted == y_test)),
                             fit_seconds=seconds, n_iter=model.n_iter_))
            print(rows[-1], flush=True)
    print()
    for name in structures:
        accuracy = [r["accuracy"] for r in rows if r["model"] == name]
        print(f"{name:12s} mean accuracy {np.mean(accuracy):.4f} over seeds {args.seeds}")
    tree = {r["seed"]: r["accuracy"] for r in rows if r["model"] == "tree"}
    chain = {r["seed"]: r["accuracy"] for r in rows if r["model"] == "chain"}
    print(f"tree beats chain on {sum(tree[s] > chain[s] for s in tree)} of {len(tree)} seeds")
    print_summary(rows, args.json, args.run)


if __name__ == "__main__":
    main()
