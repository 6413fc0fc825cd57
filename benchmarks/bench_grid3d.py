"""3-D grids: Grid3DStructure on synthetic 64^3 volumes (make_noisy_volumes).

Two tables from one run:

fit
    ``M3NSimplicialDecomposition(Grid3DStructure())`` (C, tol 1e-2) on the training volumes
    beside a per-voxel ``LinearSVC`` on the same voxel features (two noisy channels and a
    constant): fit time, peak memory, passes and certified relative gap of the grid model,
    voxel accuracy and mean foreground Dice on the test volumes.
min-cut
    The cut of one volume by sklstruct's compiled Boykov-Kolmogorov maximum flow
    (``grid3d_map``: validation, graph and flow) beside PyMaxflow (``import maxflow``, the
    authors' implementation of the same algorithm; optional: skipped when not installed) on
    the same graphs: the fitted model's decoding potentials on every test volume, and its
    loss-augmented potentials on every training volume (what the learner's oracle solves) at
    the fitted weights and at the weights of the first certificate after two passes (early
    weights, whose cuts are the hardest of a fit).
    PyMaxflow's time is split into building its graph and the flow. Both cuts must have the
    same energy (``sum_t max(unary_t) - best score`` = the maximum flow), checked to a
    relative 1e-9, and the differing voxels are counted (both return the source side with
    the fewest voxels, so only exact ties could differ). Each time is the best of
    ``--repeats`` runs.

Usage::

    python benchmarks/bench_grid3d.py [--n-train 4] [--n-test 2] [--size 64] [--C 0.01]
        [--max-iter 300] [--repeats 3] [--json results/grid3d.json]
"""

import os
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import PeakMemory, parser, print_table, write_json  # noqa: E402

from sklstruct import Grid3DStructure, M3NSimplicialDecomposition  # noqa: E402
from sklstruct._inference.graph import grid3d_map  # noqa: E402
from sklstruct.datasets import make_noisy_volumes  # noqa: E402

try:
    import maxflow
except ImportError:  # optional peer
    maxflow = None


def _scores(pred, truth):
    """Voxel accuracy and mean foreground Dice over volumes."""
    accuracy = float(np.mean(np.concatenate([(p == t).ravel() for p, t in zip(pred, truth)])))
    dice = [2 * np.sum((p == 1) & (t == 1)) / max(np.sum(p == 1) + np.sum(t == 1), 1)
            for p, t in zip(pred, truth)]
    return accuracy, float(np.mean(dice))


def _best_time(function, repeats):
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def _pymaxflow_cut(unary, shape, costs):
    """PyMaxflow on the same graph: ``(build_s, flow_s, labels, flow)``; label 1 = source
    side (``get_grid_segments`` is True on the sink side)."""
    start = time.perf_counter()
    graph = maxflow.Graph[float]()
    nodes = graph.add_grid_nodes(shape)
    for axis in range(3):
        structure = np.zeros((3, 3, 3))
        structure[tuple(2 if a == axis else 1 for a in range(3))] = 1
        graph.add_grid_edges(nodes, weights=costs[:, axis].reshape(shape), structure=structure,
                             symmetric=True)
    d = unary[:, 1] - unary[:, 0]
    graph.add_grid_tedges(nodes, np.maximum(d, 0).reshape(shape),
                          np.maximum(-d, 0).reshape(shape))
    built = time.perf_counter()
    flow = graph.maxflow()
    done = time.perf_counter()
    labels = (~graph.get_grid_segments(nodes)).ravel().astype(np.int64)
    return built - start, done - built, labels, flow


def _energy(unary, shape, costs, labels):
    """``sum_t max(unary_t) - score(labels)``: the cut value of a labelling."""
    score = unary[np.arange(unary.shape[0]), labels].sum()
    index = np.arange(unary.shape[0]).reshape(shape)
    for axis in range(3):
        left = np.take(index, np.arange(shape[axis] - 1), axis=axis).ravel()
        right = np.take(index, np.arange(1, shape[axis]), axis=axis).ravel()
        score -= costs[left, axis] @ (labels[left] != labels[right])
    return float(unary.max(axis=1).sum() - score)


def fit_table(args, X_train, y_train, X_test, y_test):
    rows = []
    svc = LinearSVC(C=args.C)
    n_features = X_train[0].shape[3]
    with PeakMemory() as memory:
        svc.fit(np.vstack([x.reshape(-1, n_features) for x in X_train]),
                np.concatenate([m.ravel() for m in y_train]))
    pred = [svc.predict(x.reshape(-1, n_features)).reshape(x.shape[:3]) for x in X_test]
    accuracy, dice = _scores(pred, y_test)
    rows.append({"model": f"LinearSVC per voxel C={args.C}", "fit_s": memory.seconds,
                 "peak_MB": memory.peak_mb, "voxel_accuracy": accuracy, "mean_dice": dice})
    print_table(rows[-1:], list(rows[-1]))
    early = {}

    def keep_early_weights(fitted, info):
        """Keep the weights of the first certificate after two passes (no early stop)."""
        if info["iteration"] >= 2 and "w" not in early:
            early["w"] = fitted.w_.copy()
        return False

    model = M3NSimplicialDecomposition(Grid3DStructure(), C=args.C, tol=1e-2,
                                       max_iter=args.max_iter, random_state=0,
                                       callback=keep_early_weights)
    with PeakMemory() as memory:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, y_train)
    start = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - start
    accuracy, dice = _scores(pred, y_test)
    h = model.history_
    rows.append({"model": f"Grid3DStructure RSD C={args.C}", "fit_s": memory.seconds,
                 "peak_MB": memory.peak_mb, "voxel_accuracy": accuracy, "mean_dice": dice,
                 "passes": model.n_iter_, "oracle_calls": int(h["oracle_calls"][-1]),
                 "final_rel_gap": float(h["gap"][-1] / h["primal"][-1]),
                 "predict_s_per_volume": predict_s / len(X_test),
                 "edge_weights": " ".join(f"{v:.3g}" for v in
                                          model.w_[model.structure_.nonnegative_])})
    print_table(rows[-1:], list(rows[-1]))
    return rows, model, early.get("w")


def cut_table(args, model, early_w, X_train, y_train, X_test):
    structure = model.structure_
    rows = []
    cases = [(f"decode test {i}", x, None, model.w_) for i, x in enumerate(X_test)]
    cases += [(f"loss-aug train {i}", x, m, model.w_)
              for i, (x, m) in enumerate(zip(X_train, y_train))]
    if early_w is not None:
        cases += [(f"loss-aug train {i}, pass 2", x, m, early_w)
                  for i, (x, m) in enumerate(zip(X_train, y_train))]
    for name, volume, mask, w in cases:
        batch, _, _ = model._validate_input([volume], None, reset=False)
        unary, pairwise = structure.potentials(batch, w)
        if mask is not None:
            Y = model._encode_known(mask.ravel())
            unary = unary + structure.token_loss(Y)
        shape = volume.shape[:3]
        costs = structure._edge_costs(batch, pairwise)
        ours_s, (labels, scores) = _best_time(lambda: grid3d_map(unary, shape, costs),
                                              args.repeats)
        ours_energy = float(unary.max(axis=1).sum() - scores[0])
        row = {"case": name, "voxels": int(np.prod(shape)), "ours_s": ours_s,
               "ours_energy": ours_energy}
        if maxflow is not None:
            runs = [_pymaxflow_cut(unary, shape, costs) for _ in range(args.repeats)]
            build_s = min(r[0] for r in runs)
            flow_s = min(r[1] for r in runs)
            _, _, peer_labels, flow = runs[-1]
            peer_energy = _energy(unary, shape, costs, peer_labels)
            scale = max(abs(ours_energy), 1.0)
            row.update({"pymaxflow_build_s": build_s, "pymaxflow_flow_s": flow_s,
                        "pymaxflow_total_s": build_s + flow_s,
                        "same_energy": bool(abs(flow - ours_energy) <= 1e-9 * scale
                                            and abs(peer_energy - ours_energy) <= 1e-9 * scale),
                        "rel_energy_diff": abs(peer_energy - ours_energy) / scale,
                        "differing_voxels": int(np.sum(peer_labels != labels))})
        rows.append(row)
        print_table(rows[-1:], list(rows[-1]))
    return rows


def main():
    p = parser(__doc__)
    p.add_argument("--n-train", type=int, default=4)
    p.add_argument("--n-test", type=int, default=2)
    p.add_argument("--size", type=int, default=64, help="volumes of size^3 voxels")
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--C", type=float, default=0.01)
    p.add_argument("--max-iter", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    X, y = make_noisy_volumes(args.n_train + args.n_test, shape=(args.size,) * 3,
                              noise=args.noise, random_state=0)
    X_train, y_train = X[:args.n_train], y[:args.n_train]
    X_test, y_test = X[args.n_train:], y[args.n_train:]
    print(f"{len(X)} volumes of {args.size}^3 voxels ({args.n_train} train, {args.n_test} "
          f"test), {X[0].shape[3]} features, noise {args.noise}, foreground "
          f"{np.mean([m.mean() for m in y]):.3f}")
    if maxflow is None:
        print("PyMaxflow (import maxflow) is not installed: no peer in the min-cut table")
    fit_rows, model, early_w = fit_table(args, X_train, y_train, X_test, y_test)
    cut_rows = cut_table(args, model, early_w, X_train, y_train, X_test)
    print()
    print_table(fit_rows, ["model", "fit_s", "peak_MB", "voxel_accuracy", "mean_dice",
                           "passes", "oracle_calls", "final_rel_gap", "predict_s_per_volume",
                           "edge_weights"])
    print()
    print_table(cut_rows, list(cut_rows[0]))
    write_json(args.json, {"fit": fit_rows, "min_cut": cut_rows}, args.run)


if __name__ == "__main__":
    main()
