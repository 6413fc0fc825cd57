"""Time of one pass of each compiled solver beside the floor, on CoNLL-2000, in one run.

The floor of a pass over the data is one unary-score product (token matrix times weights)
plus one Viterbi over all tokens. The passes are timed inside real fits at ``C = 0.1`` on the
features of ``bench_defaults.py`` (CRFsuite's chunking template plus lowercased words), by
wrapping each solver's pass:

- ``bcfw``: ``M3NSimplicialDecomposition(max_points=1)``, one compiled block-coordinate
  Frank-Wolfe pass (oracle, line search, weight update per sentence; on CoNLL-2000 through
  the multi-point visits with one point, one stage);
- ``rsd``: ``M3NSimplicialDecomposition()`` (``max_points=10``), one compiled multi-point pass
  (oracle, master QP over the kept labellings, weight update);
- ``eg``: ``M3NExpGrad()``, one compiled online exponentiated-gradient pass
  (forward-backward per sentence, adaptive step);
- ``n_slack``: ``StructSVMCuttingPlane(variant="n-slack")``, one pass of separation and block
  re-optimisation (its ``optimise`` and ``separate`` calls over the data).

For ``bcfw`` and ``rsd`` a pass is one visit per example, as the fits count them: the time of
their shrinking sweeps over the visits they make, times the number of sentences. For ``eg`` a
pass is one call of its pass; for ``n_slack`` the time of its separation and QP calls between
two gap certificates (each pass ends with one, whose oracle call over the data it includes).

The floor is measured at the weights the ``rsd`` fit ends with (after the same number of
passes), median of five. Its Viterbi is the passes' oracle: loss-augmented (Hamming) decoding
over all tokens. (Plain decoding with trained weights prunes most previous states and costs
less; before it did, the two cost the same and the floor used plain decoding.) Each row gives
the median time of the passes after the first (the first ones run at w = 0 with few points,
and touch the weights' pages for the first time), its ratio to the floor, and the first
pass's time (``first_s``). (Before ``stop44`` of ``results/pass_floor.json`` the ``eg`` and
``n_slack`` rows gave the mean over all passes, the first included.)

With ``--repeats R`` the fits and the floor run R times in turn; each row then gives the
medians over the rounds (its ``x_floor`` the median of the rounds' ratios) and the range of
its ratio (``x_floor_range``): the machine's noise moves the floor as much as the passes.

    python benchmarks/bench_pass_floor.py [--passes 6] [--repeats 1] [--json out.json]
"""

import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parser, print_table, write_json  # noqa: E402
from bench_defaults import _load, prepare  # noqa: E402


def _timed(cls, name, sink, per_visit=False):
    """Wrap ``cls.name`` so that each call's wall time is added to the last entry of ``sink``
    (with ``per_visit``, appended: the time of one pass's worth of visits, the call's time over
    the visits it returns times the number of examples)."""
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        start = time.perf_counter()
        result = original(self, *args, **kwargs)
        seconds = time.perf_counter() - start
        if not per_visit:
            sink[-1] += seconds
        elif result > 0:
            sink.append(seconds * self.batch.n_sequences / result)
        return result

    setattr(cls, name, wrapper)
    return original


def _pass_end(cls, name, sink):
    """Wrap ``cls.name``, called once at the end of each pass, to start a new entry of
    ``sink``."""
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        sink.append(0.0)
        return result

    setattr(cls, name, wrapper)
    return original


def _floor(model, X, y):
    from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

    import scipy.sparse as sp

    batch = SequenceBatch(sp.vstack(X, format="csr"),
                          offsets_from_lengths([x.shape[0] for x in X]))
    code = {label: k for k, label in enumerate(model.classes_)}
    Y = np.array([code[label] for labels in y for label in labels], dtype=np.int64)
    structure, w = model.structure_, model.w_
    unary_times, viterbi_times = [], []
    for _ in range(5):
        start = time.perf_counter()
        unary, pairwise = structure.potentials(batch, w)
        middle = time.perf_counter()
        structure.loss_augmented_decode(batch, unary, pairwise, Y)
        viterbi_times.append(time.perf_counter() - middle)
        unary_times.append(middle - start)
    return float(np.median(unary_times)), float(np.median(viterbi_times))


def _cases(n):
    """``(name, model, timed calls, the call that ends a pass or None)`` of every solver."""
    from sklstruct import M3NExpGrad, M3NSimplicialDecomposition, StructSVMCuttingPlane
    from sklstruct.learners._frank_wolfe import BlockFrankWolfeState, MultiPointFrankWolfeState
    from sklstruct.learners.cutting_plane._n_slack import NSlackSolver
    from sklstruct.learners.exp_grad._online import OnlineEGState

    return [
        ("bcfw", M3NSimplicialDecomposition(C=0.1, max_points=1, max_iter=n, random_state=0),
         [(BlockFrankWolfeState, "run_active"), (MultiPointFrankWolfeState, "run_active")],
         None),
        ("rsd", M3NSimplicialDecomposition(C=0.1, max_iter=n, random_state=0),
         [(MultiPointFrankWolfeState, "run_active")], None),
        ("eg", M3NExpGrad(C=0.1, max_iter=n), [(OnlineEGState, "run_pass")],
         (OnlineEGState, "run_pass")),
        ("n_slack", StructSVMCuttingPlane(C=0.1, variant="n-slack", max_iter=n, random_state=0),
         [(NSlackSolver, "separate"), (NSlackSolver, "optimise")], (NSlackSolver, "dual")),
    ]


def _round(X, y, n):
    """One fit of every solver and the floor after them: rows with ``x_floor``."""
    rows, floor_model = [], None
    for name, model, targets, end in _cases(n):
        times = [0.0]
        originals = [(cls, attr, _timed(cls, attr, times, per_visit=end is None))
                     for cls, attr in targets]
        if end is not None:
            originals.append((*end, _pass_end(*end, times)))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X, y)
        finally:
            for cls, attr, original in reversed(originals):
                setattr(cls, attr, original)
        # one entry per pass (per-visit solvers: per run of visits), after the first
        times = times[1:] if end is None else times[:-1]
        calls = model.history_["oracle_calls"][-1]
        rows.append({"solver": name, "passes": int(model.n_iter_), "oracle_calls": int(calls),
                     "pass_s": float(np.median(times[1:] if len(times) > 1 else times)),
                     "first_s": float(times[0])})
        if name == "rsd":
            floor_model = model
    unary_s, viterbi_s = _floor(floor_model, X, y)
    floor = unary_s + viterbi_s
    for row in rows:
        row["x_floor"] = row["pass_s"] / floor
    rows.insert(0, {"solver": FLOOR, "pass_s": floor, "x_floor": 1.0, "unary_s": unary_s,
                    "viterbi_s": viterbi_s})
    return rows


FLOOR = "floor (unary product + loss-augmented Viterbi)"


def main():
    p = parser(__doc__)
    p.add_argument("--passes", type=int, default=6)
    p.add_argument("--repeats", type=int, default=1,
                   help="rounds of all the fits and the floor; each row then gives the "
                        "medians over the rounds, and the range of its ratio")
    p.add_argument("--cache", default=os.path.join(os.path.dirname(__file__), ".cache"))
    args = p.parse_args()
    folder = prepare("conll2000", args.data_home, args.cache)
    X, y = _load(folder, "train")
    rounds = [_round(X, y, args.passes) for _ in range(args.repeats)]
    rows = rounds[0]
    if args.repeats > 1:
        for k, row in enumerate(rows):
            same = [r[k] for r in rounds]
            for key, value in row.items():
                if isinstance(value, float):
                    row[key] = float(np.median([r[key] for r in same]))
            ratios = [r["x_floor"] for r in same]
            row["x_floor_range"] = f"{min(ratios):.3g}-{max(ratios):.3g}"
            row["repeats"] = args.repeats
    print_table(rows, ["solver", "pass_s", "x_floor", "x_floor_range", "first_s", "passes",
                       "oracle_calls"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
