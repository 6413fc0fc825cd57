"""Multi-label classification on Scene: structured models beside scikit-learn's baselines.

Scene (Boutell et al. 2004: 294 colour features of 2,407 images, 6 labels) from
``<data-home>/scene/scene.npz`` (arrays ``X_train``, ``y_train``, ``X_test``, ``y_test``;
1,211 training and 1,196 test images). Models, all linear in the 294 features:

- ``MultiOutputClassifier(LinearSVC())`` and ``ClassifierChain(LinearSVC())`` (scikit-learn);
- ``M3NSimplicialDecomposition`` with ``MultiLabelStructure(pairs=...)``: ``independent``
  (no interactions), ``tree`` (Chow-Liu tree of the training labels, exact belief
  propagation) and ``full`` (all 15 label pairs, exact by enumeration of the 64 labellings).

``C`` of every model (``LinearSVC``'s too) is chosen on a held-out quarter of the training
set (stratified by nothing, ``random_state=0``) by Hamming loss, among ``--grid``; the model is
then refitted on the whole training set with that ``C`` and scored on the test set: Hamming
loss, subset accuracy (exact match), example-based F1 and the fit time of the final fit.

    python benchmarks/bench_multilabel.py [--grid 0.03 0.1 0.3 1] [--json PATH]

With ``--json PATH`` the rows are stored as a run of PATH (the committed run: ``--json
benchmarks/results/multilabel.json``); without it nothing is written.
"""

import os
import sys
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, f1_score, hamming_loss
from sklearn.model_selection import train_test_split
from sklearn.multioutput import ClassifierChain, MultiOutputClassifier
from sklearn.svm import LinearSVC

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parser, print_summary  # noqa: E402

from sklstruct import M3NSimplicialDecomposition, MultiLabelStructure  # noqa: E402


def load_scene(data_home):
    data = np.load(os.path.join(data_home, "scene", "scene.npz"))
    return data["X_train"], data["y_train"], data["X_test"], data["y_test"]


def models():
    """``(name, estimator, name of its C parameter)``."""
    yield ("MultiOutputClassifier(LinearSVC)",
           MultiOutputClassifier(LinearSVC(random_state=0)), "estimator__C")
    yield ("ClassifierChain(LinearSVC)",
           ClassifierChain(LinearSVC(random_state=0), random_state=0), "estimator__C")
    for pairs in ("independent", "tree", "full"):
        yield (f"M3N {pairs}", M3NSimplicialDecomposition(
            MultiLabelStructure(pairs=pairs), random_state=0), "C")


def tune_and_fit(estimator, parameter, grid, X, Y, X_test):
    """``C`` by Hamming loss on a held-out quarter; the refitted model's test predictions."""
    X_fit, X_held, Y_fit, Y_held = train_test_split(X, Y, test_size=0.25, random_state=0)
    losses = []
    for C in grid:
        model = clone(estimator).set_params(**{parameter: C}).fit(X_fit, Y_fit)
        losses.append(hamming_loss(Y_held, model.predict(X_held)))
    best = grid[int(np.argmin(losses))]
    model = clone(estimator).set_params(**{parameter: best})
    start = time.perf_counter()
    model.fit(X, Y)
    seconds = time.perf_counter() - start
    return model, best, seconds, np.asarray(model.predict(X_test)).astype(int)


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--grid", type=float, nargs="+", default=[0.03, 0.1, 0.3, 1.0])
    args = p.parse_args()
    X, Y, X_test, Y_test = load_scene(args.data_home)
    rows = []
    for name, estimator, parameter in models():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model, C, seconds, P = tune_and_fit(estimator, parameter, args.grid, X, Y, X_test)
        row = dict(model=name, C=C, hamming_loss=hamming_loss(Y_test, P),
                   subset_accuracy=accuracy_score(Y_test, P),
                   f1_samples=f1_score(Y_test, P, average="samples", zero_division=0),
                   fit_seconds=seconds)
        if hasattr(model, "history_"):
            row["relative_gap"] = float(model.history_["gap"][-1] / model.history_["primal"][-1])
        rows.append(row)
        print(row, flush=True)
    structured = [r for r in rows if r["model"].startswith("M3N")]
    baselines = [r for r in rows if not r["model"].startswith("M3N")]
    best = min(structured, key=lambda r: (r["hamming_loss"], -r["subset_accuracy"]))
    print(f"\nbest structured model: {best['model']}; beats both baselines in Hamming loss: "
          f"{all(best['hamming_loss'] < r['hamming_loss'] for r in baselines)}, in subset "
          f"accuracy: {all(best['subset_accuracy'] > r['subset_accuracy'] for r in baselines)}")
    print_summary(rows, args.json, args.run)


if __name__ == "__main__":
    main()
