"""Online M3NExpGrad against the per-visit step cap (``ONLINE_MAX_CHANGE``): passes to a
relative duality gap of ``tol``.

An adaptive online step never moves a potential by more than the cap (nats) in one visit.
For every cap, ``M3NExpGrad(C=0.1, check_every=1, random_state=0)`` is fitted on the prepared
data of ``bench_defaults.py`` (OCR fold 1, or the first ``--n-sequences`` CoNLL-2000
sentences with the CRFsuite chunking features) and the row gives the passes and the fit time
(certificates after every pass included) at which the certified relative gap reached ``tol``,
or ``--max-passes`` and the gap then.

``--data-order`` makes every pass visit the examples in the data's order instead of a fresh
random order (the estimator's behaviour), to measure what the shuffling gains.

    python benchmarks/bench_exp_grad_cap.py --dataset ocr --caps 1 2 3 5 [--json out.json]
    python benchmarks/bench_exp_grad_cap.py --dataset conll2000 --n-sequences 3000
    python benchmarks/bench_exp_grad_cap.py --dataset ocr --caps 3 --data-order
"""

import os
import sys
import time
import warnings

import numpy as np

from sklearn.exceptions import ConvergenceWarning

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import ROOT, parser, print_table, write_json  # noqa: E402
from bench_defaults import _load, prepare  # noqa: E402

import sklstruct.learners.exp_grad._estimator as exp_grad  # noqa: E402
from sklstruct import M3NExpGrad  # noqa: E402


class _DataOrder:
    """Stands for the estimator's random generator: every pass in the data's order."""

    def permutation(self, n):
        return np.arange(n)


def main():
    p = parser(__doc__)
    p.add_argument("--dataset", choices=["ocr", "conll2000"], default="ocr")
    p.add_argument("--n-sequences", type=int, default=None,
                   help="train on the first N sequences (default: all)")
    p.add_argument("--caps", type=float, nargs="+", default=[1.0, 2.0, 3.0, 5.0])
    p.add_argument("--tol", type=float, default=1e-2)
    p.add_argument("--max-passes", type=int, default=400)
    p.add_argument("--C", type=float, default=0.1)
    p.add_argument("--data-order", action="store_true",
                   help="visit the examples in the data's order in every pass")
    p.add_argument("--cache", default=os.path.join(ROOT, "benchmarks", ".cache"))
    args = p.parse_args()
    X, y = _load(prepare(args.dataset, args.data_home, args.cache), "train")
    X, y = X[:args.n_sequences], y[:args.n_sequences]
    if args.data_order:
        exp_grad.check_random_state = lambda seed: _DataOrder()
    rows = []
    for cap in args.caps:
        exp_grad.ONLINE_MAX_CHANGE = cap
        model = M3NExpGrad(C=args.C, tol=args.tol, max_iter=args.max_passes, check_every=1,
                           random_state=0)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        elapsed = time.perf_counter() - start
        h = model.history_
        rows.append({"dataset": args.dataset, "n_sequences": len(X), "cap": cap,
                     "order": "data" if args.data_order else "shuffled",
                     "passes": model.n_iter_, "fit_s": elapsed,
                     "rel_gap": float(h["gap"][-1] / abs(h["primal"][-1]))})
        print(rows[-1], flush=True)
    print_table(rows, ["cap", "order", "passes", "fit_s", "rel_gap"])
    if args.json:
        write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
