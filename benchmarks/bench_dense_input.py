"""The same CoNLL-2000 sentences as CSR and as a dense array: fit time of an estimator.

The first ``--sentences`` training sentences (default 500) with the features of
``bench_defaults.py`` restricted to the columns they use, given once as CSR and once as a
dense array; the same estimator (``--estimator``, evaluated as Python) is fitted on each in
this process, and the table gives both fit times and objectives.

    python benchmarks/bench_dense_input.py --estimator "M3NSimplicialDecomposition(C=0.1)"
"""

import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklstruct  # noqa: E402
from _common import parser, print_table, write_json  # noqa: E402
from bench_defaults import _load, prepare  # noqa: E402


def main():
    p = parser(__doc__)
    p.add_argument("--estimator", default="M3NSimplicialDecomposition(C=0.1, random_state=0)")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".cache"))
    args = p.parse_args()
    X, y = _load(prepare("conll2000", args.data_home, args.cache), "train")
    X, y = X[: args.sentences], y[: args.sentences]
    import scipy.sparse as sp

    stacked = sp.vstack(X, format="csr")
    stacked = stacked[:, np.unique(stacked.indices)]
    lengths = [len(labels) for labels in y]
    flat_y = np.concatenate(y)
    rows = []
    for form, matrix in (("csr", stacked), ("dense", stacked.toarray())):
        estimator = eval(args.estimator, vars(sklstruct))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            estimator.fit(matrix, flat_y, lengths=lengths)
            elapsed = time.perf_counter() - start
        rows.append({"form": form, "shape": f"{matrix.shape[0]} x {matrix.shape[1]}",
                     "fit_s": elapsed, "objective": float(estimator.history_["primal"][-1])})
    print_table(rows, ["form", "shape", "fit_s", "objective"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
