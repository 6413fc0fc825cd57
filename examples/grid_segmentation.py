"""Figure/ground segmentation of the Weizmann horses with a binary grid model.

Each 32 x 32 image is a 4-connected grid of pixels. ``GridStructure`` scores a labelling with
per-pixel weights on simple features (intensity, local contrast, intensity and position bins)
minus non-negative costs on neighbouring pixels that disagree; decoding is an exact minimum
cut. ``M3NSimplicialDecomposition`` (Yu and Rousu 2007) trains it and keeps the edge weights
non-negative. A per-pixel ``LinearSVC`` on the same features is the baseline.

The images are read from ``weizmann_horse/`` in ``--data-home`` (default ``SKLSTRUCT_DATA``, or
``../shared/data`` beside the project); they are not shipped with the package.
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from sklstruct import GridStructure, M3NSimplicialDecomposition
from sklstruct.datasets import grid_pixel_features, load_weizmann_horses

DATA_HOME = os.environ.get("SKLSTRUCT_DATA", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"))


def scores(pred, truth):
    """Pixel accuracy and mean foreground intersection-over-union."""
    accuracy = np.mean(np.concatenate(pred) == np.concatenate(truth))
    iou = np.mean([np.sum((p == 1) & (t == 1)) / max(np.sum((p == 1) | (t == 1)), 1)
                   for p, t in zip(pred, truth)])
    return accuracy, iou


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-home", default=DATA_HOME)
    args = p.parse_args()
    horses = load_weizmann_horses(args.data_home)
    X = grid_pixel_features(horses.gray)
    y = [mask.ravel() for mask in horses.masks]
    X_train, y_train, X_test, y_test = X[:200], y[:200], X[200:], y[200:]

    start = time.perf_counter()
    svc = LinearSVC(C=0.1).fit(np.vstack(X_train), np.concatenate(y_train))
    svc_time = time.perf_counter() - start
    svc_pred = np.split(svc.predict(np.vstack(X_test)), len(X_test))

    grid = M3NSimplicialDecomposition(GridStructure(width=32, contrast_gamma=20.0), C=0.1,
                                      max_points=5, tol=1e-2, max_iter=30, random_state=0)
    start = time.perf_counter()
    with warnings.catch_warnings():  # 30 passes: the certified gap below says how far it is
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid.fit(X_train, y_train)
    grid_time = time.perf_counter() - start

    print(f"{'model':<34}{'fit (s)':>8}{'pixel acc.':>12}{'mean fg IoU':>13}")
    for name, pred, seconds in (("LinearSVC per pixel", svc_pred, svc_time),
                                ("grid model (min-cut)", grid.predict(X_test), grid_time)):
        accuracy, iou = scores(pred, y_test)
        print(f"{name:<34}{seconds:>8.1f}{accuracy:>12.3f}{iou:>13.3f}")
    gap = grid.history_["gap"][-1] / grid.history_["primal"][-1]
    print(f"grid model: {grid.n_iter_} passes, certified relative duality gap {gap:.3g}")
    edge = grid.w_[grid.structure_.nonnegative_]
    print("edge weights (horizontal Potts, contrast; vertical Potts, contrast):",
          np.round(edge, 3))


if __name__ == "__main__":
    main()
