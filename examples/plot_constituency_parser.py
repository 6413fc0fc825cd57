"""
A max-margin constituency parser on the Penn Treebank sample
============================================================

:class:`~sklstruct.parsing.ConstituencyParser` reads a grammar from binarised treebank trees
and learns its weights with a sklstruct learner: rule weights (Joachims, Finley and Yu's
``Psi_CFG``), label weights on span features (Taskar et al.'s max-margin parser) and
preterminal weights on word features. This example trains it on the sentences of at most 15
words of files wsj_0001-0159 of the Penn Treebank sample (gold part-of-speech tags as input),
compares it with the relative-frequency PCFG of the same grammar on files wsj_0160-0199, and
draws a predicted tree beside the gold one: brackets of the prediction that the gold tree has
are green, the others red.

The data are read from the directory in ``SKLSTRUCT_DATA``, else from ``../shared/data``
beside the project (the file ``ptb_sample/treebank.mrg.gz``, NLTK's 10% sample of the Wall
Street Journal treebank, and ``ptb_sample/files.tsv``, its file boundaries).
"""

import csv
import os
import warnings

import matplotlib.pyplot as plt

from sklstruct import M3NSimplicialDecomposition
from sklstruct.parsing import (
    ConstituencyParser,
    PCFGParser,
    bracket_scores,
    labelled_spans,
    read_ptb_trees,
    tree_tags,
    tree_words,
)

here = os.path.dirname(os.path.abspath(globals().get("__file__", "plot_constituency_parser.py")))
folder = os.path.join(os.environ.get("SKLSTRUCT_DATA", os.path.join(
    here, os.pardir, os.pardir, "shared", "data")), "ptb_sample")
trees = read_ptb_trees(os.path.join(folder, "treebank.mrg.gz"))
file_of = []
with open(os.path.join(folder, "files.tsv")) as f:
    for row in csv.DictReader(f, delimiter="\t"):
        file_of += [int(row["file"][4:8])] * int(row["n_sentences"])


def sentences(first, last):
    kept = [t for t, n in zip(trees, file_of) if first <= n <= last and len(tree_words(t)) <= 15]
    return [list(zip(tree_words(t), tree_tags(t))) for t in kept], kept


X_train, y_train = sentences(1, 159)
X_test, y_test = sentences(160, 199)
print(f"{len(X_train)} training and {len(X_test)} test sentences")

# %%
# Train the max-margin grammar and the PCFG
# ------------------------------------------
# The default learner certifies a relative duality gap of ``tol``; the PCFG counts rules.
parser = ConstituencyParser(0.3, learner=M3NSimplicialDecomposition(tol=0.05, random_state=0))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    parser.fit(X_train, y_train)
pcfg = PCFGParser().fit(X_train, y_train)
print(f"grammar: {parser.grammar_.grammar}")
for name, model in [("max-margin grammar", parser), ("relative-frequency PCFG", pcfg)]:
    scores = bracket_scores(y_test, model.predict(X_test))
    print(f"{name:24s} labelled P {scores['precision']:.3f}  R {scores['recall']:.3f}  "
          f"F1 {scores['f1']:.3f}")

# %%
# Draw a prediction beside the gold tree
# --------------------------------------


def draw(ax, tree, gold_spans, title):
    """Nodes at the mean position of their words, one level per depth, the preterminals
    and words at the bottom."""

    def height(node):
        if len(node) == 2 and isinstance(node[1], str):
            return 1
        return 1 + max(height(child) for child in node[1:])

    total = height(tree)

    def visit(node, start, level):
        if len(node) == 2 and isinstance(node[1], str):
            ax.text(start, -total, node[1], ha="center", va="top", fontsize=8)
            ax.text(start, -(total - 1), node[0], ha="center", va="center", fontsize=7,
                    color="grey")
            ax.plot([start, start], [-(total - 1) - 0.15, -total + 0.1], color="lightgrey")
            return start, start + 1
        positions, end = [], start
        for child in node[1:]:
            x, end = visit(child, end, level + 1)
            positions.append((x, child))
        x = sum(p for p, _ in positions) / len(positions)
        good = gold_spans[(node[0], start, end)] > 0
        ax.text(x, -level, node[0], ha="center", va="center", fontsize=8, weight="bold",
                color="green" if good else "red")
        for child_x, child in positions:
            child_level = -(total - 1) if len(child) == 2 and isinstance(child[1], str) \
                else -(level + 1)
            ax.plot([x, child_x], [-level - 0.15, child_level + 0.15], color="lightgrey")
        return x, end

    visit(tree, 0, 0)
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-1, len(tree_words(tree)))
    ax.set_ylim(-total - 0.8, 0.6)
    ax.axis("off")


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    predicted = parser.predict(X_test)
# the first test sentence of 8 to 12 words whose prediction is not exact
index = next(i for i, (gold, pred) in enumerate(zip(y_test, predicted))
             if 8 <= len(tree_words(gold)) <= 12 and gold != pred)
gold, pred = y_test[index], predicted[index]
fig, axes = plt.subplots(1, 2, figsize=(13, 5))
draw(axes[0], gold, labelled_spans(gold), "gold")
f1 = bracket_scores([gold], [pred])["f1"]
draw(axes[1], pred, labelled_spans(gold), f"max-margin grammar (bracket F1 {f1:.2f})")
fig.tight_layout()
plt.show()
