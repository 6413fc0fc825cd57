"""
Labelling the nodes of trees: a tree model beside a chain
=========================================================

Many outputs are trees: the elements of a web page (its DOM), the nodes of a parse, the
sections of a document. :func:`~sklstruct.datasets.make_tree_data` draws such trees (nodes
numbered in document order) whose labels come from a known top-down model: every child
keeps its parent's label with probability 0.7. Node features are noisy, so a node's
neighbours in the tree carry much of the evidence.

:class:`~sklstruct.TreeStructure` scores the labels along the true tree's edges (exact
belief propagation); a :class:`~sklstruct.ChainStructure` over the same nodes in document
order links each node to its predecessor, which is its parent only when it is a first child.
Both are trained by :class:`~sklstruct.M3NSimplicialDecomposition` at the same ``C``. The
picture shows one test tree: the true labels as colours, and a cross where each model errs.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklstruct import ChainStructure, M3NSimplicialDecomposition, TreeStructure
from sklstruct.datasets import make_tree_data

X, y = make_tree_data(400, n_nodes=(5, 25), random_state=0)
X_train, y_train, X_test, y_test = X[:200], y[:200], X[200:], y[200:]

# %%
# A tree model and a chain model
# ------------------------------
tree = M3NSimplicialDecomposition(TreeStructure(), C=1.0, random_state=0)
chain = M3NSimplicialDecomposition(ChainStructure(), C=1.0, random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    tree.fit(X_train, y_train)
    chain.fit([features for features, _ in X_train], y_train)
tree_labels = tree.predict(X_test)
chain_labels = chain.predict([features for features, _ in X_test])
truth = np.concatenate(y_test)
print(f"node accuracy: tree {np.mean(np.concatenate(tree_labels) == truth):.3f}, "
      f"chain {np.mean(np.concatenate(chain_labels) == truth):.3f}")
print("learned parent -> child interactions (rows: parent label):")
print(np.round(tree.pairwise_[0], 2))

# %%
# One test tree
# -------------
# Nodes are placed by depth (rows) and document order (columns).
k = int(np.argmax([labels.shape[0] for labels in y_test[:20]]))
edges = X_test[k][1]
n = y_test[k].shape[0]
depth = np.zeros(n, dtype=int)
for parent, child in edges:  # parents come first in document order
    depth[child] = depth[parent] + 1

fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for ax, (name, labels) in zip(axes, (("tree model", tree_labels[k]),
                                     ("chain model", chain_labels[k]))):
    for parent, child in edges:
        ax.plot([parent, child], [-depth[parent], -depth[child]], color="0.6", zorder=1)
    ax.scatter(np.arange(n), -depth, c=y_test[k], cmap="tab10", vmin=0, vmax=9, s=160,
               edgecolor="black", zorder=2)
    wrong = np.flatnonzero(labels != y_test[k])
    ax.scatter(wrong, -depth[wrong], marker="x", color="black", s=90, zorder=3)
    ax.set_title(f"{name}: {wrong.size} of {n} nodes wrong (crosses)")
    ax.set_xlabel("document order")
axes[0].set_ylabel("minus depth")
fig.tight_layout()
plt.show()
