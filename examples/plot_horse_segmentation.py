"""
Figure/ground segmentation of horses on a pixel grid
====================================================

Each 32 x 32 grey image of the Weizmann horses is a 4-connected grid of pixels with a binary
label (horse or background). :class:`~sklstruct.GridStructure` scores a labelling with
per-pixel weights on simple features (intensity, local contrast and mean, intensity and
position bins, :func:`~sklstruct.datasets.grid_pixel_features`) minus non-negative costs on
neighbouring pixels that disagree, cheaper across strong edges. Decoding is an exact minimum
cut. :class:`~sklstruct.M3NSimplicialDecomposition`, the learner that keeps the edge weights
non-negative, trains it; a per-pixel ``LinearSVC`` on the same features is the baseline.

The horses are not shipped with the package: the script reads
``weizmann_horse/horses_32x32.npz`` from ``$SKLSTRUCT_DATA``, from ``../shared/data`` beside
the repository, or from ``~/sklstruct_data`` (see
:func:`~sklstruct.datasets.load_weizmann_horses`). Without them it builds a synthetic
stand-in (noisy, shaded blobs on a textured background) and says so.
"""

import os
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from sklstruct import GridStructure, M3NSimplicialDecomposition
from sklstruct.datasets import get_data_home, grid_pixel_features, load_weizmann_horses


def find_data_home():
    """The first data home that holds the horses, or None."""
    here = Path(globals().get("__file__", "plot_horse_segmentation.py")).resolve().parent
    candidates = [os.environ.get("SKLSTRUCT_DATA"), here.parent.parent / "shared" / "data",
                  get_data_home()]
    for home in candidates:
        if home and (Path(home) / "weizmann_horse" / "horses_32x32.npz").is_file():
            return home
    return None


def synthetic_images(n_images, size=32, seed=0):
    """Grey images of one shaded ellipse each on a textured background, with their masks."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:size, :size]
    gray, masks = [], []
    for _ in range(n_images):
        cy, cx = rng.uniform(10, 22, size=2)
        ry, rx = rng.uniform(5, 10), rng.uniform(8, 14)
        mask = ((rows - cy) / ry) ** 2 + ((cols - cx) / rx) ** 2 <= 1
        background = rng.uniform(80, 200) + 25 * np.sin(cols / rng.uniform(2, 5))
        figure = rng.uniform(20, 120) + 0.8 * (rows - cy)
        image = np.where(mask, figure, background) + rng.normal(0, 35, (size, size))
        gray.append(np.clip(image, 0, 255))
        masks.append(mask.astype(np.uint8))
    return np.array(gray), np.array(masks)


data_home = find_data_home()
if data_home is not None:
    horses = load_weizmann_horses(data_home)
    gray, masks, source = horses.gray, horses.masks, "Weizmann horses"
else:
    gray, masks = synthetic_images(328)
    source = "synthetic stand-in (the horses were not found)"
print(f"data: {source}, {len(gray)} images of {gray.shape[1]} x {gray.shape[2]} pixels")

X = grid_pixel_features(gray)            # one (1024, 28) feature matrix per image
y = [mask.ravel() for mask in masks]     # one label per pixel, row by row
n_train = 200
X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]

# %%
# Training
# --------
# The grid model: ``width=32`` pixels per row; the contrast edge feature
# ``exp(-contrast_gamma ||x_u - x_v||^2)`` makes boundaries cheap where neighbours differ.
# ``max_points=5`` keeps five labellings per image in the simplicial decomposition. The fit
# stops at the default relative duality gap of ``1e-2`` or after 30 passes, whichever comes
# first; the certified gap printed below says where it stopped.

start = time.perf_counter()
svc = LinearSVC(C=0.1).fit(np.vstack(X_train), np.concatenate(y_train))
svc_time = time.perf_counter() - start
svc_pred = np.split(svc.predict(np.vstack(X_test)), len(X_test))

grid = M3NSimplicialDecomposition(GridStructure(width=32, contrast_gamma=20.0), C=0.1,
                                  max_points=5, max_iter=30, random_state=0)
start = time.perf_counter()
with warnings.catch_warnings():  # a stop at 30 passes warns; the gap says how far it is
    warnings.simplefilter("ignore", ConvergenceWarning)
    grid.fit(X_train, y_train)
grid_time = time.perf_counter() - start
grid_pred = grid.predict(X_test)


def scores(pred, truth):
    """Pixel accuracy and mean foreground intersection-over-union."""
    accuracy = np.mean(np.concatenate(pred) == np.concatenate(truth))
    iou = np.mean([np.sum((p == 1) & (t == 1)) / max(np.sum((p == 1) | (t == 1)), 1)
                   for p, t in zip(pred, truth)])
    return accuracy, iou


print(f"{'model':<26}{'fit (s)':>8}{'pixel acc.':>12}{'mean fg IoU':>13}")
for name, pred, seconds in (("LinearSVC per pixel", svc_pred, svc_time),
                            ("grid model (min-cut)", grid_pred, grid_time)):
    accuracy, iou = scores(pred, y_test)
    print(f"{name:<26}{seconds:>8.1f}{accuracy:>12.3f}{iou:>13.3f}")
h = grid.history_
print(f"grid model: {grid.n_iter_} passes, certified relative duality gap "
      f"{h['gap'][-1] / h['primal'][-1]:.3g}")
edge = grid.w_[grid.structure_.nonnegative_]
print("edge weights (horizontal Potts, contrast; vertical Potts, contrast):",
      np.round(edge, 3))

# %%
# Test images
# -----------
# Input, ground truth, the per-pixel ``LinearSVC`` and the grid model on six test images.
# The per-pixel classifier decides every pixel alone and leaves speckles; the grid model's
# disagreement costs give connected regions that follow the image's edges.

shown = [0, 5, 17, 42, 77, 101]
columns = [("input", [gray[n_train + i] for i in shown], "gray"),
           ("truth", [masks[n_train + i] for i in shown], "binary_r"),
           ("LinearSVC", [svc_pred[i].reshape(32, 32) for i in shown], "binary_r"),
           ("grid model", [grid_pred[i].reshape(32, 32) for i in shown], "binary_r")]
fig, axes = plt.subplots(len(columns), len(shown), figsize=(1.6 * len(shown), 6.6))
for row, (title, images, cmap) in enumerate(columns):
    for col, image in enumerate(images):
        ax = axes[row, col]
        ax.imshow(image, cmap=cmap, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if col == 0:
            ax.set_ylabel(title)
fig.suptitle(source)
fig.tight_layout()
plt.show()
