"""The estimator base shared by every learner: input handling, labels, predict and score.

Learners subclass :class:`BaseStructuredClassifier` and implement ``_fit_batch``; everything a
user touches (input forms, label encoding, output forms, ``score``, ``objective``) lives here.
"""

import numbers
from abc import abstractmethod

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from .structures import BaseStructure, ChainStructure, GridStructure, MultiClass
from .utils._sequences import (
    SequenceBatch,
    check_lengths,
    image_rows,
    check_token_matrix,
    flatten_labels,
    offsets_from_lengths,
    split_flat,
    stack_sequences,
)
from .utils._sklearn_compat import Interval, StrOptions, validate_data



def _is_image_list(X):
    """A non-empty list/tuple of 3-D (n_rows, n_cols, n_features) arrays."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and np.ndim(X[0]) == 3


def _is_sequence_list(X):
    """A list/tuple whose elements are 2-D (arrays, sparse matrices or nested lists)."""
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return isinstance(X, (list, tuple)) and len(X) == 0
    first = X[0]
    return sp.issparse(first) or np.ndim(first) == 2


class BaseStructuredClassifier(ClassifierMixin, BaseEstimator):
    """Common base of sklstruct's learners.

    Input forms accepted by ``fit``, ``predict``, ``score`` and the other methods:

    - a list of per-sequence feature matrices (numpy 2-D or scipy.sparse, one row per token)
      with ``y`` a list of 1-D label arrays;
    - a flat ``X`` of shape (n_tokens, n_features) with ``lengths=`` and a flat ``y``;
    - a plain 2-D ``X`` with 1-D ``y`` and no ``lengths``: multiclass classification;
    - a list of images, 3-D arrays (n_rows, n_cols, n_features), with ``y`` a list of 2-D label
      masks: pixel grids (``structure="auto"`` gives :class:`~sklstruct.GridStructure`).

    Outputs follow the input form.
    """

    _parameter_constraints = {
        "structure": [StrOptions({"auto"}), BaseStructure],
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_jobs": [numbers.Integral, None],
        "verbose": ["verbose"],
    }

    # whether the learner keeps the weights a structure constrains (``nonnegative_``) feasible
    _keeps_nonnegative_weights = False

    def _rescale(self):
        """The rescaling of the structured hinge used by :meth:`objective`."""
        return getattr(self, "rescale", "margin")

    # ------------------------------------------------------------------ input handling
    def _validate_input(self, X, y=None, lengths=None, *, reset):
        """Convert any accepted input form to a :class:`SequenceBatch` (+ flat labels)."""
        widths = None
        if _is_image_list(X):
            if lengths is not None:
                raise ValueError("lengths= is only used with a flat X, not a list of images.")
            X, widths, y = image_rows(X, y)
        if _is_sequence_list(X):
            if lengths is not None:
                raise ValueError("lengths= is only used with a flat X, not a list of sequences.")
            stacked, seq_lengths = stack_sequences(X)
            stacked, _ = self._validate_matrix(stacked, None, reset)
            form = "list" if widths is None else "images"
            y_flat = None if y is None else flatten_labels(y, seq_lengths)
        else:
            stacked, y_flat = self._validate_matrix(X, y, reset)
            if lengths is not None:
                seq_lengths = check_lengths(lengths, stacked.shape[0])
                form = "flat"
            else:
                seq_lengths = np.ones(stacked.shape[0], dtype=np.int64)
                form = "multiclass"
        stacked = check_token_matrix(stacked)
        if reset:
            self._fit_token_map(stacked)
        if getattr(self, "token_map_", None) is not None:
            stacked = self.token_map_.transform(stacked)
        batch = SequenceBatch(stacked, offsets_from_lengths(seq_lengths), widths)
        return batch, y_flat, form

    def _validate_matrix(self, X, y, reset):
        """``validate_data`` for a 2-D token matrix (with flat labels when given)."""
        params = dict(reset=reset, accept_sparse="csr", dtype=np.float64, order="C")
        if y is None:
            return validate_data(self, X, **params), None
        return validate_data(self, X, y, **params)

    def _fit_token_map(self, X):
        """Fit the token feature map (``token_map_``; ``None`` for a linear model)."""
        self.token_map_ = None

    def _format_output(self, values, batch, form):
        """Per-token values in the form of the input (list of arrays, images, or flat)."""
        if form == "list":
            return split_flat(values, batch.offsets)
        if form == "images":
            return [piece.reshape((-1, width) + piece.shape[1:]) for piece, width
                    in zip(split_flat(values, batch.offsets), batch.widths)]
        return values

    def _resolve_structure(self, form):
        if self.structure == "auto":
            if form == "images":
                return GridStructure()
            return MultiClass() if form == "multiclass" else ChainStructure()
        return self.structure

    # ------------------------------------------------------------------ fit
    def _fit(self, X, y, lengths=None, sample_weight=None):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        batch, y_flat, form = self._validate_input(X, y, lengths, reset=True)
        y_flat = column_or_1d(y_flat, warn=True) if form not in ("list", "images") else y_flat
        check_classification_targets(y_flat)
        self.classes_, Y = np.unique(y_flat, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                "Classifier can't train when only one class is present: "
                f"y holds the single class {self.classes_[0]!r}."
            )
        structure = self._resolve_structure(form)
        self.structure_ = structure.bind(
            batch.X.shape[1], self.classes_.shape[0], self.classes_, Y
        )
        if len(getattr(self.structure_, "nonnegative_", ())) and \
                not self._keeps_nonnegative_weights:
            raise ValueError(
                f"{type(structure).__name__} constrains weights to be non-negative, which "
                f"{type(self).__name__} does not support; use M3NSimplicialDecomposition."
            )
        Y = Y.astype(np.intp)
        weights = _check_sequence_weights(sample_weight, batch.n_sequences)
        self.w_ = self._fit_batch(batch, Y, weights)
        return self

    @abstractmethod
    def _fit_batch(self, batch, Y, sample_weight):
        """Optimise on a validated batch with encoded labels; return the flat weights."""

    # ------------------------------------------------------------------ fitted parameters
    @property
    def coef_(self):
        """Per-class weights on token features, shape (n_classes, n_features)."""
        check_is_fitted(self)
        return self.structure_.split_weights(self.w_)[0].T

    @property
    def transition_(self):
        """Transition scores ``T[a, b]`` of a chain model, shape (n_classes, n_classes)."""
        check_is_fitted(self)
        if not isinstance(self.structure_, ChainStructure):
            raise AttributeError("transition_ exists only for chain structures.")
        return self.structure_.pairwise_parameters(self.w_)[0]

    # ------------------------------------------------------------------ prediction
    def _unary_scores(self, batch):
        """Token x state scores of the fitted model (``X W^T`` for a linear model)."""
        return self.structure_.unary_potentials(batch, self.w_)

    def _weight_norm_sq(self):
        """``||w||^2`` of the fitted model."""
        return float(self.w_ @ self.w_)

    def _regularizer(self):
        """The regulariser of the objective at the fitted weights (``1/2 ||w||^2``)."""
        return 0.5 * self._weight_norm_sq()

    def _predict_encoded(self, X, lengths):
        check_is_fitted(self)
        batch, _, form = self._validate_input(X, None, lengths, reset=False)
        labels = self.structure_.decode(batch, self.w_, n_jobs=self.n_jobs,
                                        unary=self._unary_scores(batch))
        return batch, labels, form

    def predict(self, X, lengths=None):
        """Predicted labels, in the form of ``X``.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.

        Returns
        -------
        y : list of ndarray or ndarray of shape (n_tokens,)
        """
        batch, Y, form = self._predict_encoded(X, lengths)
        return self._format_output(self.classes_[Y], batch, form)

    def decision_function(self, X, lengths=None):
        """Per-token class scores ``X W^T`` (unary part of the model's score).

        For the multiclass form this is the score of every class, shape (n_samples, n_classes)
        (for two classes, the score difference of class 1 over class 0, as ``LinearSVC``);
        for sequences, a list (or flat array) of (n_tokens, n_classes) arrays.
        """
        check_is_fitted(self)
        batch, _, form = self._validate_input(X, None, lengths, reset=False)
        scores = self._unary_scores(batch)
        if form == "multiclass" and scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return self._format_output(scores, batch, form)

    def predict_marginals(self, X, lengths=None):
        """Per-token class probabilities under ``p(y|x) ∝ exp(w . Psi(x, y))``.

        Computed by forward-backward on the model's scores (softmax for multiclass).

        Returns
        -------
        marginals : list of ndarray of shape (n_tokens, n_classes), or ndarray
        """
        check_is_fitted(self)
        batch, _, form = self._validate_input(X, None, lengths, reset=False)
        node, _, _ = self.structure_.marginals(batch, self.w_, n_jobs=self.n_jobs,
                                               unary=self._unary_scores(batch))
        return self._format_output(node, batch, form)

    def score(self, X, y, lengths=None, sample_weight=None):
        """Token accuracy (plain accuracy for the multiclass form).

        Labels in ``y`` that were never seen in training count as errors.
        """
        batch, Y, form = self._predict_encoded(X, lengths)
        if form == "images":
            y_flat = flatten_labels(image_rows(X, y)[2], batch.lengths)
        elif form == "list":
            y_flat = flatten_labels(y, batch.lengths)
        else:
            y_flat = column_or_1d(y)
            if y_flat.shape[0] != batch.n_tokens:
                raise ValueError(f"y has {y_flat.shape[0]} labels for {batch.n_tokens} tokens.")
        correct = (self.classes_[Y] == y_flat).astype(np.float64)
        if sample_weight is not None:
            return float(np.average(correct, weights=sample_weight))
        return float(correct.mean())

    # ------------------------------------------------------------------ objective
    def _encode_known(self, y_flat):
        index = np.searchsorted(self.classes_, y_flat)
        index = np.clip(index, 0, self.classes_.shape[0] - 1)
        if not np.all(self.classes_[index] == y_flat):
            raise ValueError("y contains labels that were not seen in fit.")
        return index.astype(np.intp)

    def _structured_hinge(self, batch, Y, w, rescale, unary=None):
        """Per-sequence structured hinge losses ``H_i(w)`` (DESIGN section 1).

        ``unary`` (token x state scores) replaces ``X W^T`` when given; the pairwise part of
        the model is read from ``w``.
        """
        structure = self.structure_
        if unary is None:
            unary = structure.unary_potentials(batch, w)
        _, losses, scores = structure.loss_augmented_decode(
            batch, w, Y, rescale=rescale, n_jobs=self.n_jobs, unary=unary
        )
        true_scores = structure.score_labels(batch, w, Y, unary=unary)
        if rescale == "margin":
            return np.maximum(losses + scores - true_scores, 0.0)
        return np.maximum(losses * (1.0 + scores - true_scores), 0.0)

    def objective(self, X, y, lengths=None, sample_weight=None):
        """The training objective ``1/2 ||w||^2 + C sum_i s_i H_i(w)`` at the fitted weights.

        ``H_i`` is the structured hinge loss of DESIGN section 1 with this learner's rescaling
        and ``s_i`` the sequence weights (all ones by default).
        """
        check_is_fitted(self)
        batch, y_flat, form = self._validate_input(X, y, lengths, reset=False)
        Y = self._encode_known(np.asarray(y_flat))
        weights = _check_sequence_weights(sample_weight, batch.n_sequences)
        hinge = self._structured_hinge(batch, Y, self.w_, self._rescale(),
                                       unary=self._unary_scores(batch))
        return self._regularizer() + self.C * float(weights @ hinge)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _check_sequence_weights(sample_weight, n_sequences):
    """Per-sequence weights: ones by default; finite, non-negative, not all zero."""
    if sample_weight is None:
        return np.ones(n_sequences)
    try:
        weights = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("sample_weight must be numeric.") from exc
    if weights.ndim == 0:
        weights = np.full(n_sequences, float(weights))
    if weights.shape != (n_sequences,):
        raise ValueError(
            f"sample_weight.shape == {weights.shape}, expected ({n_sequences},): one weight "
            "per sequence (per sample for plain classification)."
        )
    if not np.all(np.isfinite(weights)):
        raise ValueError("sample_weight must be finite (no NaN or inf).")
    if np.any(weights < 0):
        raise ValueError("Negative values in sample_weight are not allowed.")
    if not np.any(weights > 0):
        raise ValueError("sample_weight must not be all zero.")
    return weights
