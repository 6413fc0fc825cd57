"""
A max-margin dependency parser
==============================

:class:`~sklstruct.parsing.DependencyParser` learns a first-order (arc-factored) model of
dependency trees with the default learner, :class:`~sklstruct.M3NSimplicialDecomposition`:
each candidate arc ``head -> modifier`` is scored from McDonald et al.'s features
(:class:`~sklstruct.parsing.ArcFeatures`), the best projective tree is found by Eisner's
algorithm, and relations come from a second multiclass model.

The data are the CoNLL-2007 Basque treebank when it is at hand (the directory in
``SKLSTRUCT_DATA``, or ``../shared/data`` beside the project), else sentences of a small
English-like grammar whose prepositional phrases attach by their words
(:func:`~sklstruct.datasets.make_dependency_treebank`). The figure draws a predicted tree
above the sentence and the gold tree below it, wrong arcs in red.
"""

import os

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Arc

from sklstruct.datasets import make_dependency_treebank
from sklstruct.parsing import ArcFeatures, DependencyParser, attachment_scores, read_conll

here = os.path.dirname(os.path.abspath(globals().get("__file__", "plot_dependency_parser.py")))
folder = os.path.join(os.environ.get(
    "SKLSTRUCT_DATA", os.path.join(here, os.pardir, os.pardir, "shared", "data")),
    "conll2007_eus")
if os.path.isdir(folder):
    train = read_conll(os.path.join(folder, "eus.train.gz"), encoding="latin-1")
    test = read_conll(os.path.join(folder, "eus.test.gz"), encoding="latin-1")
    train.sentences, train.heads, train.relations = (
        train.sentences[:800], train.heads[:800], train.relations[:800])
    features = ArcFeatures(tag="cpostag", extra=("postag", "lemma"))
    name = "CoNLL-2007 Basque (800 training sentences)"
else:
    train = make_dependency_treebank(300, random_state=0)
    test = make_dependency_treebank(200, random_state=1)
    features = ArcFeatures()
    name = "a synthetic treebank"

parser = DependencyParser(C=0.01, features=features)
parser.fit(train.sentences, list(zip(train.heads, train.relations)))
predicted = parser.predict(test.sentences)
scores = attachment_scores(test.heads, [p[0] for p in predicted], test.relations,
                           [p[1] for p in predicted])
print(f"{name}: UAS {scores['uas']:.3f}, LAS {scores['las']:.3f} on "
      f"{len(test.sentences)} test sentences")

# %%
# A predicted tree beside the gold one
# ------------------------------------
# The first test sentence of 8 to 14 tokens with an attachment error, if any.


def draw_tree(ax, heads, relations, wrong, above):
    sign = 1 if above else -1
    for m, (h, relation) in enumerate(zip(heads, relations), start=1):
        colour = "tab:red" if wrong[m - 1] else "tab:blue"
        if h == 0:
            ax.annotate("", xy=(m, 0.15 * sign), xytext=(m, 1.6 * sign),
                        arrowprops=dict(arrowstyle="->", color=colour))
            ax.text(m, 1.7 * sign, relation, ha="center", va="center", fontsize=7)
            continue
        width = abs(h - m)
        ax.add_patch(Arc(((h + m) / 2, 0.15 * sign), width, 0.5 * width,
                         theta1=0 if above else 180, theta2=180 if above else 360,
                         color=colour))
        ax.text((h + m) / 2, sign * (0.15 + 0.25 * width + 0.12), relation, ha="center",
                va="center", fontsize=7)
        ax.plot(m, 0.15 * sign, marker="v" if above else "^", color=colour, markersize=4)


lengths = np.array([len(s) for s in test.sentences])
candidates = [i for i in np.flatnonzero((lengths >= 8) & (lengths <= 14))
              if np.any(predicted[i][0] != test.heads[i])] or \
    list(np.flatnonzero((lengths >= 8) & (lengths <= 14)))
i = int(candidates[0]) if candidates else 0
words = [token["form"] for token in test.sentences[i]]
wrong = predicted[i][0] != test.heads[i]
fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(words)), 5))
draw_tree(ax, predicted[i][0], predicted[i][1], wrong, above=True)
draw_tree(ax, test.heads[i], test.relations[i], np.zeros(len(words), bool), above=False)
for m, word in enumerate(words, start=1):
    ax.text(m, 0, word, ha="center", va="center", fontsize=9)
span = max(len(words), 2)
ax.set_xlim(0.3, len(words) + 0.7)
ax.set_ylim(-0.25 * span - 0.8, 0.25 * span + 0.8)
ax.axis("off")
ax.set_title(f"predicted (above, wrong heads in red) and gold (below): {name}")
plt.tight_layout()
plt.show()
