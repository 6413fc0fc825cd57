"""One objective, four solvers: the L2 learners reach the same model at the same ``C``.

Trains StructSVMCuttingPlane (1-slack), M3NExpGrad (online exponentiated gradient),
M3NExcessiveGap (Nesterov's excessive gap) and M3NSimplicialDecomposition (restricted
simplicial decomposition) on the embedded OCR sample and prints, for each,
the fit time, the certified duality gap and the objective. Since every learner minimises
``1/2 ||w||^2 + C sum_i H_i(w)``, the objectives agree within the reported gaps (the excessive
gap learner, the slowest, stops at its ``tol=1e-2`` or at 500 iterations, whichever comes
first: its gap shows how far it is).
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct.datasets import load_ocr_sample


def main():
    words = load_ocr_sample()
    train = np.flatnonzero(words.folds == 0)
    X = [words.data[i] for i in train]
    y = [words.target[i] for i in train]
    chain, C = ChainStructure(start_end=False), 0.1
    learners = {
        "StructSVMCuttingPlane": StructSVMCuttingPlane(chain, C=C, tol=1e-3),
        "M3NExpGrad (online)": M3NExpGrad(chain, C=C, tol=1e-2, max_iter=2000, random_state=0),
        "M3NExcessiveGap": M3NExcessiveGap(chain, C=C, tol=1e-2, max_iter=500),
        "M3NSimplicialDecomposition": M3NSimplicialDecomposition(chain, C=C, tol=1e-3,
                                                                 random_state=0),
    }
    print(f"{'learner':<28}{'fit (s)':>9}{'iterations':>12}{'objective':>12}{'gap':>11}")
    for name, model in learners.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        seconds = time.perf_counter() - start
        print(f"{name:<28}{seconds:>9.2f}{model.n_iter_:>12}{model.objective(X, y):>12.4f}"
              f"{model.history_['gap'][-1]:>11.2e}")


if __name__ == "__main__":
    main()
