"""
Label interactions in multi-label classification
================================================

:class:`~sklstruct.MultiLabelStructure` predicts several binary labels per sample, in
scikit-learn's indicator-matrix form, with pairwise interactions between labels. Here three
models are trained on the Scene images (294 colour features, 6 labels: beach, sunset, fall
foliage, field, mountain, urban): independent labels, the Chow-Liu tree of the training
labels (the maximum spanning tree of their mutual information) and all 15 label pairs (exact
inference by enumerating the 64 labellings). The left panel draws the Chow-Liu tree, the
right one the interactions the full model learned: for labels ``j`` and ``k`` the log-odds
ratio ``Theta[0, 0] + Theta[1, 1] - Theta[0, 1] - Theta[1, 0]`` of their interaction matrix,
positive (blue) when the model favours the two labels agreeing, negative (red) when it
favours them differing.

Scene is not shipped with the package: the script reads ``scene/scene.npz`` from
``$SKLSTRUCT_DATA`` or from ``../shared/data`` beside the repository. Without it, it draws
a synthetic stand-in (labels from noisy linear scores, two of them coupled) and says so.
"""

import os
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, hamming_loss

from sklstruct import M3NSimplicialDecomposition, MultiLabelStructure
from sklstruct.structures import chow_liu_tree

NAMES = ["beach", "sunset", "foliage", "field", "mountain", "urban"]


def load_data():
    here = Path(globals().get("__file__", "plot_multilabel_interactions.py")).resolve().parent
    for home in (os.environ.get("SKLSTRUCT_DATA"), here.parent.parent / "shared" / "data"):
        path = Path(home) / "scene" / "scene.npz" if home else None
        if path is not None and path.is_file():
            data = np.load(path)
            return data["X_train"], data["y_train"], data["X_test"], data["y_test"], True
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 20))
    Y = (X @ rng.normal(size=(20, 6)) + rng.normal(scale=2.0, size=(1200, 6)) > 1).astype(int)
    Y[:, 5] = np.where(rng.random(1200) < 0.8, Y[:, 4], Y[:, 5])  # "urban" follows "mountain"
    return X[:600], Y[:600], X[600:], Y[600:], False


X_train, Y_train, X_test, Y_test, real = load_data()
if not real:
    print("Scene not found: a synthetic stand-in")

# %%
# Three structured models, one ``C``
# ----------------------------------
models = {}
for pairs in ("independent", "tree", "full"):
    model = M3NSimplicialDecomposition(MultiLabelStructure(pairs=pairs), C=0.1,
                                       random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        models[pairs] = model.fit(X_train, Y_train)
    predicted = model.predict(X_test)
    print(f"{pairs:12s} Hamming loss {hamming_loss(Y_test, predicted):.4f}  "
          f"subset accuracy {accuracy_score(Y_test, predicted):.4f}")

# %%
# The label-interaction graphs
# ----------------------------
angles = np.linspace(0, 2 * np.pi, 6, endpoint=False) + np.pi / 2
position = np.column_stack([np.cos(angles), np.sin(angles)])
edges, information = chow_liu_tree(Y_train)
full = models["full"]
strength = {tuple(pair): theta[0, 0] + theta[1, 1] - theta[0, 1] - theta[1, 0]
            for pair, theta in zip(full.structure_.label_pairs_.tolist(), full.pairwise_)}

fig, axes = plt.subplots(1, 2, figsize=(10, 5))
largest = max(abs(v) for v in strength.values())
for ax, title in zip(axes, ("Chow-Liu tree (edge width: mutual information)",
                            "full pairwise model (log-odds ratio)")):
    ax.set_title(title, fontsize=10)
    if ax is axes[0]:
        for j, k in edges:
            ax.plot(*position[[j, k]].T, color="0.3",
                    linewidth=1 + 40 * information[j, k])
    else:
        for (j, k), value in strength.items():
            ax.plot(*position[[j, k]].T, color="tab:blue" if value > 0 else "tab:red",
                    linewidth=0.5 + 6 * abs(value) / largest, alpha=0.8)
    ax.scatter(*position.T, s=900, color="white", edgecolor="black", zorder=3)
    for label, (x, y) in enumerate(position):
        ax.text(x, y, NAMES[label], ha="center", va="center", fontsize=8, zorder=4)
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
fig.tight_layout()
plt.show()
