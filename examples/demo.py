"""Chain structural SVM on handwritten words (the embedded OCR sample).

Trains :class:`~sklstruct.StructSVMCuttingPlane` on 150 words and tests on 150 others, beside
a per-letter ``LinearSVC`` that ignores the word structure, to the default certified relative
duality gap of 1e-2. Runs offline; the fit takes about half a second (0.5-0.6 s on a 2-core
machine; the whole script, with the imports, a few seconds).
"""

import time

import numpy as np
from sklearn.svm import LinearSVC

from sklstruct import ChainStructure, StructSVMCuttingPlane
from sklstruct.datasets import load_ocr_sample
from sklstruct.metrics import sequence_accuracy, token_accuracy


def main():
    words = load_ocr_sample()
    train = np.flatnonzero(words.folds == 0)
    test = np.flatnonzero(words.folds == 1)
    X_train = [words.data[i] for i in train]
    y_train = [words.target[i] for i in train]
    X_test = [words.data[i] for i in test]
    y_test = [words.target[i] for i in test]
    n_letters = sum(len(y) for y in y_train)
    print(f"OCR sample: {len(train)} training words ({n_letters} letters), "
          f"{len(test)} test words, 16x8 binary pixels per letter\n")

    start = time.perf_counter()
    model = StructSVMCuttingPlane(ChainStructure(start_end=False), C=0.1)
    model.fit(X_train, y_train)
    fit_time = time.perf_counter() - start
    predicted = model.predict(X_test)

    start = time.perf_counter()
    letters = LinearSVC(C=0.1, max_iter=10000)
    letters.fit(np.vstack(X_train), np.concatenate(y_train))
    svc_time = time.perf_counter() - start
    flat_pred = letters.predict(np.vstack(X_test))
    svc_pred = np.split(flat_pred, np.cumsum([len(y) for y in y_test])[:-1])

    h = model.history_
    print(f"{'model':<32}{'fit (s)':>9}{'letter acc.':>13}{'word acc.':>11}")
    print(f"{'StructSVMCuttingPlane (chain)':<32}{fit_time:>9.2f}"
          f"{token_accuracy(y_test, predicted):>13.3f}"
          f"{sequence_accuracy(y_test, predicted):>11.3f}")
    print(f"{'LinearSVC (letter by letter)':<32}{svc_time:>9.2f}"
          f"{token_accuracy(y_test, svc_pred):>13.3f}{sequence_accuracy(y_test, svc_pred):>11.3f}")
    print(f"\nCutting plane: {model.n_iter_} iterations, primal objective {h['primal'][-1]:.4f}, "
          f"certified duality gap {h['gap'][-1]:.2e} "
          f"(relative {h['gap'][-1] / h['primal'][-1]:.1e})")
    print("Three test words (the data set omits each word's first, capital letter):")
    for i in range(3):
        print(f"  true {''.join(y_test[i]):<14} predicted {''.join(predicted[i])}")


if __name__ == "__main__":
    main()
