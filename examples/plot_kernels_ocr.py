"""
Non-linear kernels on handwritten letters
=========================================

A linear chain model scores each letter with a linear function of its 128 pixels. Two
learners accept a kernel on the token (letter) features instead, through ``kernel=``:

* :class:`~sklstruct.StructSVMCuttingPlane` maps every letter to its kernel values with a
  random basis of ``n_basis`` training letters (a low-rank, Nystroem-type map: the
  cutting-plane paper's section 3.3) and trains linearly on that map, so its cost grows with
  ``n_basis``, not with the number of training letters squared;
* :class:`~sklstruct.M3NExcessiveGap` keeps the weights implicitly through the dual and forms
  the exact kernel matrix of all training letters (feasible for small data: see
  ``kernel_memory_mb``).

Transition weights stay linear in both. The data are the OCR sample shipped with the package:
150 words to train, 150 others to test.
"""

import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, M3NExcessiveGap, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct.datasets import load_ocr_sample

words = load_ocr_sample()
X_train = [x for x, fold in zip(words.data, words.folds) if fold == 0]
y_train = [labels for labels, fold in zip(words.target, words.folds) if fold == 0]
X_test = [x for x, fold in zip(words.data, words.folds) if fold == 1]
y_test = [labels for labels, fold in zip(words.target, words.folds) if fold == 1]

# %%
# Linear and kernel models
# ------------------------
# ``C = 1`` for every model; the linear model is trained by
# ``M3NSimplicialDecomposition``, the fastest linear learner here. The exact-kernel
# excessive gap model is stopped after 100 iterations (its certified gap is printed).

chain = ChainStructure(start_end=False)
models = {
    "linear": M3NSimplicialDecomposition(chain, C=1.0, random_state=0),
    "polynomial, low rank": StructSVMCuttingPlane(chain, C=1.0, kernel="poly", degree=3,
                                                  n_basis=500, random_state=0),
    "RBF, low rank": StructSVMCuttingPlane(chain, C=1.0, kernel="rbf", gamma=0.03,
                                           n_basis=500, random_state=0),
    "RBF, exact": M3NExcessiveGap(chain, C=1.0, kernel="rbf", gamma=0.03, max_iter=100),
}
results = {}
print(f"{'model':<22}{'learner':<28}{'fit (s)':>8}{'rel. gap':>10}{'letter acc.':>13}")
for name, model in models.items():
    start = time.perf_counter()
    with warnings.catch_warnings():  # the exact-kernel fit stops at max_iter
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X_train, y_train)
    elapsed = time.perf_counter() - start
    h = model.history_
    accuracy = model.score(X_test, y_test)
    results[name] = (elapsed, accuracy, model.predict(X_test))
    print(f"{name:<22}{type(model).__name__:<28}{elapsed:>8.2f}"
          f"{h['gap'][-1] / h['primal'][-1]:>10.1e}{accuracy:>13.3f}")

# %%
# Accuracy and time
# -----------------

names = list(results)
fig, (ax_acc, ax_time) = plt.subplots(1, 2, figsize=(10, 3.4))
ax_acc.barh(names, [results[n][1] for n in names], color=["C0", "C1", "C2", "C3"])
ax_acc.set_xlabel("test letter accuracy")
ax_acc.set_xlim(0.5, 0.85)
ax_acc.invert_yaxis()
ax_time.barh(names, [results[n][0] for n in names], color=["C0", "C1", "C2", "C3"])
ax_time.set_xlabel("fit time (s)")
ax_time.set_yticks([])
ax_time.invert_yaxis()
fig.tight_layout()
plt.show()

# %%
# Test words
# ----------
# The letters of a few test words (16 x 8 pixels each) with the linear and the low-rank RBF
# model's readings; red marks a wrong letter.

shown = [3, 8, 21, 30, 47]
fig, axes = plt.subplots(len(shown), 1, figsize=(7, 1.5 * len(shown)))
for ax, i in zip(axes, shown):
    strip = np.hstack([letter.reshape(16, 8) for letter in X_test[i]])
    ax.imshow(strip, cmap="gray_r", interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    for row, name in enumerate(("linear", "RBF, low rank")):
        predicted = results[name][2][i]
        for t, (guess, truth) in enumerate(zip(predicted, y_test[i])):
            ax.text(8 * t + 3.5, 19 + 5 * row, guess, ha="center", va="top", fontsize=9,
                    color="black" if guess == truth else "red")
    ax.text(-1, 19, "linear", ha="right", va="top", fontsize=8)
    ax.text(-1, 24, "RBF", ha="right", va="top", fontsize=8)
    ax.set_ylim(30, -1)
    ax.set_title(f"truth: {''.join(y_test[i])}", fontsize=9, loc="left")
fig.tight_layout()
plt.show()
