"""Feature selection for sequence labelling with the l1-regularised M3N.

Synthetic chains (``make_sparse_chain``: 100 input features, of which only the first 30 carry
information) are labelled by L1M3N and by the L2 cutting-plane learner. L1M3N sets the weights
of most irrelevant features to exact zeros; the L2 model uses all of them. The cutting plane and
the default EM solve the same l1 problem (at C=0.01; the EM less exactly, with more small
weights); the paper's EM with a fixed lambda solves it at a C of its own. The last column is
the relative duality gap each fit certifies: the EM stops when its objective stalls, which
here is before its gap reaches ``tol`` (it warns so; the example records the gap instead).
``SelectFromModel`` then keeps the selected features in a Pipeline.
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectFromModel
from sklearn.pipeline import make_pipeline

from sklstruct import L1M3N, StructSVMCuttingPlane
from sklstruct.datasets import make_sparse_chain


def main():
    X, y = make_sparse_chain(600, random_state=0)
    X_train, y_train, X_test, y_test = X[:100], y[:100], X[100:], y[100:]
    print(f"{'model':<36}{'test acc.':>10}{'irrelevant non-zero':>21}{'total non-zero':>16}"
          f"{'rel. gap':>10}")
    models = {
        "StructSVMCuttingPlane (l2), C=0.1": StructSVMCuttingPlane(C=0.1),
        "L1M3N cutting_plane, C=0.01": L1M3N(solver="cutting_plane", C=0.01),
        "L1M3N em (default), C=0.01": L1M3N(C=0.01),
        "L1M3N em, paper's lambda=1000": L1M3N(solver="em", C=1.0, em_lambda=1000.0),
    }
    for name, model in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # (the gap is shown)
            model.fit(X_train, y_train)
        gap = model.history_["gap"][-1] / abs(model.history_["primal"][-1])
        print(f"{name:<36}{model.score(X_test, y_test):>10.3f}"
              f"{np.count_nonzero(model.coef_[:, 30:]):>21}{np.count_nonzero(model.coef_):>16}"
              f"{gap:>10.2g}")

    # flat form (tokens x features + lengths) so that SelectFromModel can drop columns
    lengths = [len(s) for s in y_train]
    pipe = make_pipeline(SelectFromModel(L1M3N(solver="cutting_plane", C=0.01), threshold=1e-10),
                         StructSVMCuttingPlane(C=0.1))
    pipe.fit(np.vstack(X_train), np.concatenate(y_train), selectfrommodel__lengths=lengths,
             structsvmcuttingplane__lengths=lengths)
    kept = np.flatnonzero(pipe[0].get_support())
    accuracy = np.mean(pipe.predict(np.vstack(X_test), lengths=[len(s) for s in y_test])
                       == np.concatenate(y_test))
    print(f"\nSelectFromModel kept {kept.size} features ({np.sum(kept < 30)} relevant); "
          f"L2 model on them: test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
