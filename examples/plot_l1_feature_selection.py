"""
Feature selection with the l1-regularised M3N
=============================================

``L1M3N`` minimises ``1/2 ||w||_1 + C sum_i H_i(w)``: the l1 norm sets the weights of
unhelpful features to exact zeros, where the l2 learners keep every weight non-zero.

The data come from :func:`~sklstruct.datasets.make_sparse_chain`: binary label chains of 8
tokens drawn from a linear-chain CRF whose state features use only the first 30 of the 100
input features (10 groups of 3 correlated copies); the other 70 are noise. We train on 100
chains and test on 500.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_selection import SelectFromModel
from sklearn.pipeline import make_pipeline

from sklstruct import L1M3N, M3NSimplicialDecomposition
from sklstruct.datasets import make_sparse_chain

X, y, true_coef, _ = make_sparse_chain(600, random_state=0, return_coef=True)
X_train, y_train, X_test, y_test = X[:100], y[:100], X[100:], y[100:]
n_relevant = 30

# %%
# Three models
# ------------
# An l2 model (``M3NSimplicialDecomposition``), ``L1M3N`` with its cutting-plane solver (the
# paper's Algorithm 1, which solves the l1 problem at this ``C``) and ``L1M3N``'s EM solver
# with a fixed ``em_lambda`` (the paper's adaptive M3N, whose ``em_lambda`` sets the
# sparsity; the default ``em_lambda=None`` solves the l1 problem at this ``C`` instead).

models = {
    "l2: M3NSimplicialDecomposition(C=0.1)": M3NSimplicialDecomposition(C=0.1,
                                                                         random_state=0),
    'L1M3N(solver="cutting_plane", C=0.01)': L1M3N(solver="cutting_plane", C=0.01),
    'L1M3N(solver="em", em_lambda=5000)': L1M3N(solver="em", C=1.0, em_lambda=5000.0),
}
print(f"{'model':<42}{'test acc.':>10}{'non-zero: relevant':>20}{'irrelevant':>12}")
for name, model in models.items():
    model.fit(X_train, y_train)
    nonzero = model.coef_ != 0
    print(f"{name:<42}{model.score(X_test, y_test):>10.3f}"
          f"{nonzero[:, :n_relevant].sum():>20}{nonzero[:, n_relevant:].sum():>12}")

# %%
# The weights
# -----------
# ``coef_`` has one row of weights on the input features per label. White is an exact zero;
# the dashed line separates the 30 relevant features from the noise. The l2 model spreads
# weight over all features; the cutting-plane l1 model keeps a handful of weights, most of
# them on relevant features; the EM model keeps most relevant weights and drops most of the
# noise.

panels = {"generating CRF": true_coef}
panels.update({name: model.coef_ for name, model in models.items()})
fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.3 * len(panels) + 0.6), sharex=True)
for ax, (name, coef) in zip(axes, panels.items()):
    magnitude = np.abs(coef) / np.abs(coef).max()
    shown = np.ma.masked_where(coef == 0, magnitude)
    ax.imshow(shown, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    ax.axvline(n_relevant - 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["label 0", "label 1"], fontsize=8)
    ax.set_title(f"{name}: {np.count_nonzero(coef)} non-zero weights", fontsize=9, loc="left")
axes[-1].set_xlabel("input feature (0-29 relevant, 30-99 noise)")
fig.tight_layout()
plt.show()

# %%
# The regularisation path
# -----------------------
# The smaller ``C``, the stronger the l1 penalty: the number of non-zero weights on relevant
# and irrelevant features, and the test accuracy, as ``C`` grows.

Cs = np.logspace(-3, 0, 7)
relevant, irrelevant, accuracy = [], [], []
for C in Cs:
    model = L1M3N(solver="cutting_plane", C=C).fit(X_train, y_train)
    relevant.append(np.count_nonzero(model.coef_[:, :n_relevant]))
    irrelevant.append(np.count_nonzero(model.coef_[:, n_relevant:]))
    accuracy.append(model.score(X_test, y_test))

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
ax1.semilogx(Cs, relevant, "o-", label="relevant features (60 weights)")
ax1.semilogx(Cs, irrelevant, "s-", label="noise features (140 weights)")
ax1.set_xlabel("C")
ax1.set_ylabel("non-zero weights")
ax1.legend(fontsize=8)
ax2.semilogx(Cs, accuracy, "o-", color="C2")
ax2.set_xlabel("C")
ax2.set_ylabel("test token accuracy")
for ax in (ax1, ax2):
    ax.grid(True, alpha=0.3)
fig.tight_layout()
plt.show()

# %%
# Selecting features in a pipeline
# --------------------------------
# Because unselected weights are exact zeros, ``SelectFromModel`` can keep the features that
# ``L1M3N`` uses and hand them to another learner. The flat input form (a token matrix with
# ``lengths``) lets the selector drop columns; ``lengths`` is routed to both steps.

lengths = [len(labels) for labels in y_train]
pipe = make_pipeline(
    SelectFromModel(L1M3N(solver="cutting_plane", C=0.01), threshold=1e-10),
    M3NSimplicialDecomposition(C=0.1, random_state=0),
)
pipe.fit(np.vstack(X_train), np.concatenate(y_train), selectfrommodel__lengths=lengths,
         m3nsimplicialdecomposition__lengths=lengths)
kept = np.flatnonzero(pipe[0].get_support())
predicted = pipe.predict(np.vstack(X_test), lengths=[len(labels) for labels in y_test])
print(f"SelectFromModel kept {kept.size} of 100 features ({np.sum(kept < n_relevant)} "
      f"relevant); the l2 model on them: test accuracy "
      f"{np.mean(predicted == np.concatenate(y_test)):.3f}")
