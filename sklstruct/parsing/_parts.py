"""What the task-level parsers share: a sklstruct learner trained on part rows (private).

A parser turns its task's input (sentences) into one flat matrix of part rows (spans, arcs)
with the rows per sentence, and its outputs (trees) into one state per row; any sklstruct
learner, cloned with the task's structure, then trains on them (the ``learner`` parameter).
"""

import numpy as np
from sklearn.base import clone

from ..base import BaseStructuredClassifier


def default_learner():
    """The learner of a parser given ``learner=None``."""
    from ..learners import M3NSimplicialDecomposition
    return M3NSimplicialDecomposition()


class PartsLearnerMixin:
    """A ``learner`` parameter (None: :func:`default_learner`) trained on part rows.

    ``set_params(learner__C=...)`` works with ``learner=None`` too (it sets the parameter of
    a default learner), so ``GridSearchCV`` searches the learner's ``C`` of a default parser.
    """

    def set_params(self, **params):
        """Set parameters; ``learner__*`` ones also with ``learner=None`` (they then set
        those of a default learner, which becomes ``learner``).

        Parameters
        ----------
        **params : dict
            Estimator parameters, nested ones as ``learner__C``.

        Returns
        -------
        self : estimator
        """
        if self.learner is None and "learner" not in params \
                and any(key.startswith("learner__") for key in params):
            self.learner = default_learner()
        return super().set_params(**params)

    def _learner_for(self, structure):
        learner = default_learner() if self.learner is None else self.learner
        if not isinstance(learner, BaseStructuredClassifier):
            raise TypeError(f"learner must be a sklstruct learner (StructSVMCuttingPlane, "
                            f"M3NSimplicialDecomposition, ...); got {type(learner).__name__}.")
        return clone(learner).set_params(structure=structure)

    def _fit_parts(self, rows, states, lengths, structure):
        """Fit a clone of the learner with ``structure`` on the part rows; sets ``learner_``."""
        learner = self._learner_for(structure)
        learner.fit(rows, states, lengths=np.asarray(lengths, dtype=np.int64))
        self.learner_ = learner

    def _predict_parts(self, rows, lengths):
        """Decoded part states (flat), per row."""
        return np.asarray(self.learner_.predict(rows, lengths=np.asarray(lengths,
                                                                          dtype=np.int64)))


def check_sentences(X, name="X"):
    """``X`` as a list (a str or a non-iterable is refused)."""
    if isinstance(X, (str, bytes)) or not hasattr(X, "__iter__"):
        raise TypeError(f"{name} must be a list of sentences; got {type(X).__name__}.")
    return list(X)
