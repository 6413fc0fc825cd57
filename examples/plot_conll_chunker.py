"""
A chunker from feature dicts, as in the sklearn-crfsuite tutorial
=================================================================

Text chunking on CoNLL-2000: each sentence is a list of per-token feature dicts (words, POS
tags and their neighbours, from :func:`~sklstruct.preprocessing.window_features`) and its
labels a list of IOB2 tags (``B-NP``, ``I-NP``, ``O``, ...), exactly the data a
sklearn-crfsuite user has. :func:`~sklstruct.pipeline.make_sequence_pipeline` vectorises the
dicts and trains a max-margin chain model on them; ``RandomizedSearchCV`` picks ``C`` by chunk
F1 over 3 folds of sentences; the per-type report has conlleval's figures; the inspection
functions list the strongest features and transitions, and ``predict_proba`` and
``predict_topk`` give per-token probabilities and the best alternative taggings.

To stay under a minute on two cores the example trains on 1,200 of the 8,936 training
sentences, calibrates the probabilities on 300 others and tests on 500 test sentences. The
data are read from the directory in ``SKLSTRUCT_DATA``, else from ``../shared/data`` beside the
project when it holds them, else from ``~/sklstruct_data``, where
:func:`~sklstruct.datasets.load_conll2000` downloads them when they are missing.
"""

import os

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import loguniform
from sklearn.model_selection import RandomizedSearchCV

from sklstruct import M3NSimplicialDecomposition
from sklstruct.datasets import load_conll2000
from sklstruct.inspection import format_state_features, state_features, transition_table
from sklstruct.metrics import chunk_f1_scorer, sequence_classification_report
from sklstruct.pipeline import make_sequence_pipeline
from sklstruct.preprocessing import window_features

here = os.path.dirname(os.path.abspath(globals().get("__file__", "plot_conll_chunker.py")))
shared = os.path.join(here, os.pardir, os.pardir, "shared", "data")
data_home = os.environ.get(  # None: the loader's default, ~/sklstruct_data
    "SKLSTRUCT_DATA", shared if os.path.isdir(os.path.join(shared, "conll2000")) else None)
train = load_conll2000(data_home, subset="train")
test = load_conll2000(data_home, subset="test")


def sentences(data, n):
    X = [window_features(w, p) for w, p in zip(data.words[:n], data.pos[:n])]
    y = [list(tags) for tags in data.target[:n]]  # lists of str, as crfsuite users have them
    return X, y


X_train, y_train = sentences(train, 1500)
X_train, y_train, X_held, y_held = X_train[:1200], y_train[:1200], X_train[1200:], y_train[1200:]
X_test, y_test = sentences(test, 500)
print(X_train[0][1])

# %%
# Choose ``C`` by cross-validation
# --------------------------------
# The pipeline's steps are named after their classes, so the search space is
# ``m3nsimplicialdecomposition__C``. The folds are folds of sentences.
tagger = make_sequence_pipeline(M3NSimplicialDecomposition(random_state=0))
search = RandomizedSearchCV(
    tagger, {"m3nsimplicialdecomposition__C": loguniform(0.01, 1.0)}, n_iter=3, cv=3,
    scoring=chunk_f1_scorer, random_state=0,
).fit(X_train, y_train)
for C, f1 in zip(search.cv_results_["param_m3nsimplicialdecomposition__C"],
                 search.cv_results_["mean_test_score"]):
    print(f"C = {C:.3f}: cross-validated chunk F1 {f1:.4f}")
tagger = search.best_estimator_

# %%
# Per-type report
# ---------------
y_pred = tagger.predict(X_test)
print(sequence_classification_report(y_test, y_pred, digits=3))

# %%
# What the model learned
# ----------------------
# The strongest positive and negative features of two labels, and the transition scores.
features = state_features(tagger, top=6)
print(format_state_features({label: features[label] for label in ("B-NP", "B-VP")}))
table = transition_table(tagger)
print(table)

# %%
# Per-token probabilities and alternative taggings
# ------------------------------------------------
# ``predict_proba`` gives the marginal probability of each label at each token under the
# model's Gibbs distribution, at a temperature calibrated on held-out sentences (max-margin
# scores are not log-probabilities: at temperature 1 the marginals are far too flat);
# ``predict_topk`` gives the best labellings of a sentence with their scores.
tagger.calibrate_temperature(X_held, y_held)
print(f"temperature {tagger[-1].temperature_:.3f}")
proba = tagger.predict_proba(X_test[:1])[0]
labels = tagger.classes_
words = test.words[0]
for word, p in list(zip(words, proba))[:8]:
    top = np.argsort(p)[::-1][:2]
    print(f"{word:>12}  " + "  ".join(f"{labels[k]} {p[k]:.2f}" for k in top))
paths, scores = tagger.predict_topk(X_test[:1], k=3)
for path, score in zip(paths[0], scores[0]):
    print(f"{score:8.3f}  " + " ".join(path[:8]))

# %%
# The figure: the transition scores and each chunk type's F1.
report = sequence_classification_report(y_test, y_pred, output_dict=True)
types = [t for t in report if t not in ("micro avg", "macro avg", "weighted avg")
         and report[t]["support"] >= 20]
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
values = np.asarray(table.values, dtype=float)
image = left.imshow(values, cmap="RdBu_r", vmin=-np.abs(values).max(), vmax=np.abs(values).max())
left.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
left.set_yticks(range(len(labels)), labels, fontsize=7)
left.set_xlabel("to label")
left.set_ylabel("from label")
left.set_title("transition scores")
fig.colorbar(image, ax=left, shrink=0.8)
right.barh(types, [report[t]["f1-score"] for t in types])
right.set_xlim(0, 1)
right.set_xlabel("chunk F1 on 500 test sentences")
right.set_title(f"overall F1 {report['micro avg']['f1-score']:.3f}")
fig.tight_layout()
plt.show()
