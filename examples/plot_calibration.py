"""
Confidence of a tagger: temperature-scaled marginals
=====================================================

A max-margin model's scores ``w . Psi(x, y)`` are trained to separate the true labelling by a
margin, not to be log-probabilities, so the marginals of the Gibbs distribution
``p(y|x) ∝ exp(w . Psi(x, y))`` (``predict_marginals``) are usually too flat: the model is
right more often than they say. ``calibrate_temperature`` fits one temperature ``T`` on
held-out data (it minimises the per-token log loss of ``p_T(y|x) ∝ exp(w . Psi(x, y) / T)``),
and ``predict_proba`` then returns the marginals at that temperature. ``predict`` (the jointly
decoded labelling) does not change; the most probable letter of a token's marginals can.

This example trains a chain model on the 150 training words of the embedded OCR sample,
calibrates on 75 other words and draws the reliability diagram (accuracy against the
confidence of the most probable letter) on 75 more, before and after.
"""

import matplotlib.pyplot as plt
import numpy as np

from sklstruct import M3NSimplicialDecomposition
from sklstruct.datasets import load_ocr_sample

words = load_ocr_sample()
train = np.flatnonzero(words.folds == 0)
rest = np.flatnonzero(words.folds == 1)
calibration, evaluation = rest[::2], rest[1::2]


def part(indices):
    return [words.data[i] for i in indices], [words.target[i] for i in indices]


X_train, y_train = part(train)
X_cal, y_cal = part(calibration)
X_eval, y_eval = part(evaluation)

model = M3NSimplicialDecomposition(C=0.1, random_state=0).fit(X_train, y_train)
truth = np.concatenate(y_eval)


def reliability(proba, n_bins=10):
    """Confidence and accuracy per confidence bin, and the expected calibration error."""
    confidence = proba.max(axis=1)
    correct = model.classes_[proba.argmax(axis=1)] == truth
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    rows = [(confidence[bins == b].mean(), correct[bins == b].mean(), np.sum(bins == b))
            for b in range(n_bins) if np.any(bins == b)]
    mean_conf, accuracy, count = map(np.array, zip(*rows))
    ece = float(np.sum(count * np.abs(mean_conf - accuracy)) / count.sum())
    return mean_conf, accuracy, ece, correct.mean(), confidence.mean()


before = reliability(np.vstack(model.predict_proba(X_eval)))
model.calibrate_temperature(X_cal, y_cal)
after = reliability(np.vstack(model.predict_proba(X_eval)))
print(f"temperature {model.temperature_:.3f}")
for name, (_, _, ece, accuracy, confidence) in (("T = 1", before), ("calibrated", after)):
    print(f"{name:>10}: letter accuracy {accuracy:.3f}, mean confidence {confidence:.3f}, "
          f"expected calibration error {ece:.3f}")

fig, ax = plt.subplots(figsize=(5.5, 5))
ax.plot([0, 1], [0, 1], color="gray", linestyle=":", label="perfect calibration")
ax.plot(before[0], before[1], "o-", label=f"T = 1 (ECE {before[2]:.3f})")
ax.plot(after[0], after[1], "s-",
        label=f"T = {model.temperature_:.2f} (ECE {after[2]:.3f})")
ax.set_xlabel("confidence of the most probable letter")
ax.set_ylabel("accuracy")
ax.set_xlim(0, 1)
ax.set_ylim(0, 1.02)
ax.set_title("Reliability on 75 held-out words")
ax.legend(loc="upper left")
fig.tight_layout()
plt.show()
