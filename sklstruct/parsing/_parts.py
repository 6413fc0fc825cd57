"""What the task-level parsers share: a sklstruct learner trained on part rows (private).

A parser turns its task's input (sentences) into one flat matrix of part rows (candidate
arcs, spans) with the rows per sentence, through a feature extractor with ``fit(X, y)`` and
``transform_flat(X) -> (rows, n_rows)``, and its outputs (trees) into one state per row;
any sklstruct learner, cloned with the task's structure and the parser's ``C``, then trains
on them (:class:`PartsParser`).
"""

import inspect
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import HasMethods, Interval

from .._input import check_sequence_weights
from ..utils._warnings import warn_user


def default_learner():
    """The learner of a parser given ``learner=None``."""
    from ..learners import M3NSimplicialDecomposition

    return M3NSimplicialDecomposition()


def weighted_sentences(X, y, sample_weight, check=None):
    """``(X, y, weights)`` of a weighted fit: the sentences of weight 0 left out (as if
    absent: features, grammar and relations included), ``weights`` ``None`` without
    ``sample_weight``. ``X`` is a list; ``y`` of another length is left to the fit's
    checks. ``check(X, y)``, when given, validates every sentence and tree before any is
    left out, so that its errors name them by their positions in the caller's lists (and
    a broken tree of weight 0 is an error, as scikit-learn validates every sample)."""
    if sample_weight is None:
        return X, y, None
    weights = check_sequence_weights(sample_weight, len(X))  # (finite, >= 0, not all 0)
    if np.all(weights > 0) or y is None:  # (y=None: the fit's own error)
        return X, y, weights
    y = check_sentences(y, "y")
    if len(y) != len(X):
        return X, y, weights
    if check is not None:
        check(X, y)
    kept = np.flatnonzero(weights > 0)
    return [X[i] for i in kept], [y[i] for i in kept], weights[kept]


def check_sentences(X, name="X"):
    """``X`` as a list (a str, a dict or a non-iterable is refused)."""
    if isinstance(X, (str, bytes, dict)) or not hasattr(X, "__iter__"):
        raise TypeError(f"{name} must be a list of sentences; got {type(X).__name__}.")
    return list(X)


class PartsParser(BaseEstimator):
    """Base of the parsers: ``C``, ``learner`` and ``features`` parameters, and a learner
    trained on the part rows of the sentences.

    ``learner`` (None: :func:`default_learner`) is cloned with ``C`` and the task's
    structure set (its own ``C`` is not used), so that ``GridSearchCV`` searches the
    parser's ``C``, and with ``random_state`` when that is not None (else the learner keeps
    its own); ``features_`` and ``learner_`` are the fitted feature extractor and learner.
    """

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "learner": [HasMethods(["fit", "predict"]), None],
        "features": [HasMethods(["fit", "transform_flat"]), None],
        "random_state": ["random_state"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # (lists of sentences)
        tags.target_tags.required = True  # (their trees)
        return tags

    def _learner_for(self, structure, role):
        """A clone of the learner with the parser's ``C``, ``structure`` and (when not None)
        ``random_state``; its warnings and verbose lines name it as the parser's ``role``
        learner (a parser may train two)."""
        learner = default_learner() if self.learner is None else clone(self.learner)
        params = learner.get_params(deep=False)
        if "structure" not in params:
            raise TypeError(f"learner must be a sklstruct estimator with a structure "
                            f"parameter (StructSVMCuttingPlane, M3NSimplicialDecomposition, "
                            f"...); got {type(self.learner).__name__}.")
        if self.random_state is not None and "random_state" in params:
            learner.set_params(random_state=self.random_state)
        learner._progress_name = f"{type(self).__name__}'s {role} {type(learner).__name__}"
        return learner.set_params(C=self.C, structure=structure)

    def _warn_unused_learner_C(self):
        """Warn (once per fit) when the learner has a ``C`` of its own, which the parser
        replaces by its ``C`` (e.g. a search over ``learner__C``, which changes nothing)."""
        if self.learner is None:
            return
        default_C = inspect.signature(type(self.learner).__init__).parameters.get("C")
        C = self.learner.get_params(deep=False).get("C")
        if default_C is not None and C != default_C.default:
            warn_user(f"{type(self).__name__} sets its learner's C to its own (C="
                      f"{self.C}); the learner's C={C!r} is not used. Set the parser's C (in "
                      "a search: the parameter \"C\", not \"learner__C\").", UserWarning)

    def _fit_features(self, default, X, y):
        """The fitted feature extractor (a clone of ``features``, or ``default``) and the
        part rows of ``X`` with their number per sentence."""
        features = default if self.features is None else clone(self.features)
        features.fit(X, y)
        rows, n_rows = features.transform_flat(X)
        return features, rows, np.asarray(n_rows, dtype=np.int64)

    def _fit_parts(self, rows, states, n_rows, structure, sample_weight=None, role="tree"):
        """A clone of the learner fitted with ``structure`` on the part rows (with one weight
        per sentence, when given)."""
        learner = self._learner_for(structure, role)
        learner.fit(rows, states, lengths=np.asarray(n_rows, dtype=np.int64),
                    **({} if sample_weight is None else {"sample_weight": sample_weight}))
        return learner

    def _decode_parts(self, X, n_words):
        """Decoded row states of the non-empty sentences of ``X``.

        Returns ``(kept, rows, n_rows, states)``: the indices of the sentences with words,
        their part rows and rows per sentence, and the best output's state of every row
        (flat). An empty sentence has no part.
        """
        kept = np.flatnonzero(np.asarray(n_words) > 0)
        if not kept.shape[0]:
            return kept, None, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows, n_rows = self.features_.transform_flat([X[i] for i in kept])
        n_rows = np.asarray(n_rows, dtype=np.int64)
        states = np.asarray(self.learner_.predict(rows, lengths=n_rows))
        return kept, rows, n_rows, states


class PartRowsTransformerMixin:
    """``transform(X)``: one sparse matrix of part rows per sentence, from
    ``transform_flat``."""

    def transform(self, X):
        """Features of the part rows, one sparse matrix per sentence.

        Parameters
        ----------
        X : list of sentences

        Returns
        -------
        features : list of scipy.sparse.csr_matrix
            Sentence ``i``'s rows, ``n_rows[i]`` of them (see ``transform_flat``).
        """
        features, n_rows = self.transform_flat(X)
        offsets = np.concatenate(([0], np.cumsum(n_rows)))
        return [features[offsets[i]:offsets[i + 1]] for i in range(n_rows.shape[0])]
