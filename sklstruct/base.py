"""The estimator base shared by every learner: input handling, labels, predict and score, and
the one path every fit takes (staging, certificates, convergence, verbose output, warm starts).

Learners subclass :class:`BaseStructuredClassifier` and implement ``_fit_batch``; everything a
user touches (input forms, label encoding, output forms, ``score``, ``objective``) lives here.
"""

import hashlib
import numbers
import time
import warnings
from abc import abstractmethod
from collections.abc import Iterator, Mapping

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _num_samples, check_array, check_is_fitted, column_or_1d

from .structures import BaseStructure, ChainStructure, GridStructure, MultiClass
from .structures._base import structured_hinge
from .utils._sequences import (
    SequenceBatch,
    check_lengths,
    image_rows,
    check_token_matrix,
    check_label_kinds,
    flatten_labels,
    label_kinds,
    lengths_from_sequence_ids,
    offsets_from_lengths,
    split_flat,
    stack_sequences,
)
from .utils._sklearn_compat import (
    Interval,
    StrOptions,
    _check_feature_names,
    _check_n_features,
    _fit_context,
    _get_feature_names,
    validate_data,
)



def _is_image_list(X):
    """A non-empty list/tuple of 3-D (n_rows, n_cols, n_features) arrays."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and np.ndim(X[0]) == 3


def _check_not_feature_dicts(X):
    """Token feature dicts need a vectoriser first: say which."""
    first = X
    for _ in range(2):
        if not isinstance(first, (list, tuple)) or len(first) == 0:
            return
        first = first[0]
        if isinstance(first, Mapping):
            raise TypeError(
                "X holds token feature dicts; vectorise them first, e.g. with "
                "sklstruct.pipeline.make_sequence_pipeline(estimator), a Pipeline of "
                "SequenceVectorizer and the estimator."
            )


def _sequences_of_object_array(X):
    """A 1-D numpy object array whose elements are 2-D arrays or sparse matrices (what
    ``np.array(list_of_matrices, dtype=object)`` gives) as the list of sequences it holds;
    any other ``X`` unchanged."""
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1 and X.shape[0] and \
            all(sp.issparse(x) or np.ndim(x) == 2 for x in X):
        return list(X)
    return X


def _sequence_feature_names(X):
    """The column names shared by every sequence of a list (``None`` when none has names,
    e.g. numpy arrays); a ``ValueError`` when sequences disagree, since their columns would
    then be read by position."""
    names = [_get_feature_names(x) for x in X]
    if not names:
        return None
    first = names[0]
    for i, current in enumerate(names):
        if (current is None) != (first is None) or (
                current is not None and (current.shape != first.shape
                                         or np.any(current != first))):
            described = ("no column names" if current is None
                         else f"columns {current.tolist()}")
            expected = ("no column names" if first is None
                        else f"columns {first.tolist()}")
            raise ValueError(
                f"All sequences of X must have the same columns in the same order: sequence "
                f"{i} has {described} where sequence 0 has {expected}.")
    return first


def _is_sequence_list(X):
    """A list/tuple whose elements are 2-D (arrays, sparse matrices or nested lists), or
    that holds any sparse matrix or 2-D array or nested list (a malformed list of sequences,
    which :func:`stack_sequences` rejects with a message naming the element)."""
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return isinstance(X, (list, tuple)) and len(X) == 0
    first = X[0]
    if sp.issparse(first) or np.ndim(first) == 2:
        return True
    return any(sp.issparse(x) or (isinstance(x, np.ndarray) and x.ndim == 2)
               or (isinstance(x, (list, tuple)) and len(x) > 0
                   and isinstance(x[0], (list, tuple, np.ndarray)))
               for x in X)


def _check_not_label_sequences(X, y):
    """A list of 1-D feature vectors is read as multiclass rows: refuse labels given as a
    list of per-sequence label arrays with it (the user meant sequences). One label per
    element (a column vector of labels) stays accepted, as scikit-learn's classifiers do."""
    if isinstance(X, (list, tuple)) and isinstance(y, (list, tuple)) and any(
            np.size(labels) != 1 for labels in y):
        raise ValueError(
            "X is a list of 1-D feature vectors, read as multiclass samples, but y is a list "
            "of label sequences: give every sequence of X as a 2-D array (n_tokens, "
            "n_features), one row per token (a one-token sequence included).")


class BaseStructuredClassifier(ClassifierMixin, BaseEstimator):
    """Common base of sklstruct's learners.

    Input forms accepted by ``fit``, ``predict``, ``score`` and the other methods:

    - a list of per-sequence feature matrices (numpy 2-D or scipy.sparse, one row per token)
      with ``y`` a list of 1-D label arrays;
    - a flat ``X`` of shape (n_tokens, n_features) with ``lengths=`` (or per-token
      ``sequence_ids=``, the form that survives cross-validation's row indexing) and a flat
      ``y``;
    - a plain 2-D ``X`` with 1-D ``y`` and neither ``lengths`` nor ``sequence_ids``: multiclass
      classification (with ``structure="auto"``; a chain structure refuses it, and a model
      fitted on sequences refuses a flat ``X`` without lengths at prediction);
    - a list of images, 3-D arrays (n_rows, n_cols, n_features), with ``y`` a list of 2-D label
      masks: pixel grids (``structure="auto"`` gives :class:`~sklstruct.GridStructure`).

    Outputs follow the input form.

    In the multiclass form the estimator is a drop-in for :class:`~sklearn.svm.LinearSVC`:
    with ``fit_intercept`` a constant feature of value 1 is appended to every sample (its
    weights, regularised like the others, are ``intercept_``), ``coef_`` has shape
    (1, n_features) for two classes, and ``predict_proba`` gives the (temperature-scaled)
    softmax of the class scores.

    scikit-learn stratifies the integer ``cv`` folds of classifiers by their labels, which
    sequence labels cannot be; so the estimators declare themselves classifiers to
    scikit-learn (:func:`~sklearn.base.is_classifier`) only with ``structure=MultiClass()``,
    and ``GridSearchCV(cv=3)`` and ``cross_validate`` then take plain (unstratified) folds of
    sequences whatever form ``y`` has (lists of lists of str included). Pass
    ``structure=MultiClass()`` for stratified folds of plain multiclass data.

    A fit runs on a staged copy of the estimator whose fitted attributes replace the
    estimator's own only when the fit completes: a fit that fails or is interrupted leaves the
    estimator as it was.
    """

    _parameter_constraints = {
        "structure": [StrOptions({"auto"}), BaseStructure],
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        # scikit-learn's convention: None (one, unless in a joblib context), a positive
        # count, or -1, -2, ... (all processors, all but one, ...); 0 has no meaning
        "n_jobs": [Interval(numbers.Integral, None, -1, closed="right"),
                   Interval(numbers.Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "callback": [callable, None],
        "max_time": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "fit_intercept": ["boolean"],
    }

    # whether the learner keeps the weights a structure constrains (``nonnegative_``) feasible
    _keeps_nonnegative_weights = False

    def _rescale(self):
        """The rescaling of the structured hinge used by :meth:`objective`."""
        return getattr(self, "rescale", "margin")

    # ------------------------------------------------------------------ input handling
    def _validate_input(self, X, y=None, lengths=None, *, reset, allow_empty=False,
                        sequence_ids=None):
        """Convert any accepted input form to a :class:`SequenceBatch` (+ flat labels).

        With ``allow_empty`` (prediction) sequences may be empty: the batch holds the others
        and ``batch.output_offsets`` the offsets of all of them, for the outputs."""
        _check_not_feature_dicts(X)
        X = _sequences_of_object_array(X)
        if isinstance(X, Iterator):
            raise TypeError(f"X must be a list of per-sequence feature matrices, an array or "
                            f"a sparse matrix, not {type(X).__name__}; pass list(X).")
        if sequence_ids is not None and lengths is not None:
            raise ValueError("Give either lengths or sequence_ids, not both.")
        flat_only = "lengths" if lengths is not None else (
            "sequence_ids" if sequence_ids is not None else None)
        widths = None
        if _is_image_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "images.")
            X, widths, y = image_rows(X, y)
        if _is_sequence_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "sequences.")
            names_of = X[0] if _sequence_feature_names(X) is not None else None
            stacked, seq_lengths = stack_sequences(X, allow_empty)
            stacked, _ = self._validate_matrix(stacked, None, reset, allow_empty,
                                               names_of=names_of)
            form = "list" if widths is None else "images"
            y_flat = None if y is None else flatten_labels(y, seq_lengths)
        else:
            _check_not_label_sequences(X, y)
            if y is not None:
                check_label_kinds(label_kinds(y if isinstance(y, np.ndarray) else
                                              np.asarray(y, dtype=object)))
            stacked, y_flat = self._validate_matrix(X, y, reset, allow_empty and bool(flat_only))
            if sequence_ids is not None:
                lengths = lengths_from_sequence_ids(sequence_ids, stacked.shape[0])
            if lengths is not None:
                seq_lengths = check_lengths(lengths, stacked.shape[0], allow_empty)
                form = "flat"
            else:
                seq_lengths = np.ones(stacked.shape[0], dtype=np.int64)
                form = "multiclass"
        self._check_form(form, reset)
        stacked = check_token_matrix(stacked)
        if reset:
            self._fit_token_map(stacked)
            self._with_intercept = bool(self.fit_intercept) and isinstance(
                self._resolve_structure(form), MultiClass) and self._linear_scores()
        if getattr(self, "token_map_", None) is not None:
            stacked = self.token_map_.transform(stacked)
        if getattr(self, "_with_intercept", False):  # (a multiclass model, in any form)
            stacked = _append_constant_column(stacked)
        offsets = offsets_from_lengths(seq_lengths)
        if np.all(seq_lengths > 0):
            batch = SequenceBatch(stacked, offsets, widths)
        else:
            batch = SequenceBatch(stacked, offsets_from_lengths(seq_lengths[seq_lengths > 0]),
                                  widths, output_offsets=offsets)
        return batch, y_flat, form

    def _check_form(self, form, reset):
        """A flat ``X`` without lengths is the multiclass form: refuse it for chains."""
        if form != "multiclass":
            return
        structure = self.structure if reset else self.structure_
        if structure == "auto" or isinstance(structure, MultiClass):
            return
        what = (f"{type(self).__name__} with {type(structure).__name__}" if reset else
                f"This {type(self).__name__} was fitted with {type(structure).__name__} and")
        routing = "" if reset else (
            " Under cross-validation, sequence_ids reach score and the scorers only through "
            "metadata routing: sklearn.set_config(enable_metadata_routing=True) and "
            "estimator.set_score_request(sequence_ids=True).")
        raise ValueError(
            f"{what} needs to know where the sequences of a flat X end: pass lengths= "
            "(tokens per sequence) or sequence_ids= (one id per token), or X as a list of "
            f"per-sequence matrices.{routing}"
        )

    def _validate_matrix(self, X, y, reset, allow_empty=False, names_of=False):
        """``validate_data`` for a 2-D token matrix (with flat labels when given; no row at
        all only with ``allow_empty``).

        ``names_of`` (the list form): the stacked sequences' feature names are checked
        (or recorded, with ``reset``) from this sequence, ``None`` when they have none;
        ``False``: from ``X`` itself."""
        params = dict(reset=reset, accept_sparse="csr", dtype=np.float64, order="C",
                      ensure_min_samples=0 if allow_empty else 1)
        if names_of is not False:
            X = check_array(X, input_name="X", **{k: v for k, v in params.items()
                                                   if k != "reset"})
            _check_n_features(self, X, reset=reset)
            _check_feature_names(self, X if names_of is None else names_of, reset=reset)
            return X, None
        if y is None:
            return validate_data(self, X, **params), None
        return validate_data(self, X, y, **params)

    def _linear_scores(self):
        """Whether token scores are linear in (mapped) features, so that an intercept is a
        constant feature (False for exact kernels)."""
        return True

    def _fit_token_map(self, X):
        """Fit the token feature map (``token_map_``; ``None`` for a linear model)."""
        self.token_map_ = None

    def _format_output(self, values, batch, form):
        """Per-token values in the form of the input (list of arrays, images, or flat)."""
        if form == "list":
            return split_flat(values, batch.offsets if batch.output_offsets is None
                              else batch.output_offsets)
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
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, lengths=None, sequence_ids=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, plain samples (multiclass) or
            a list of images (n_rows, n_cols, n_features).
        y : list of array-like, or array-like of shape (n_tokens,)
            Labels in the form of ``X`` (2-D masks for images); a sequence's labels may be
            any 1-D array-like, e.g. a list of str.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, lengths, sequence_ids=sequence_ids)

    def _fit(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """Fit on a staged copy; its fitted attributes replace ours only at the end."""
        staged = object.__new__(type(self))
        # parameters and the warm-start state carry over; fitted attributes ("_" suffix) do not
        staged.__dict__.update({k: v for k, v in vars(self).items() if not k.endswith("_")})
        staged._fit_staged(X, y, lengths, sample_weight, sequence_ids)
        self.__dict__ = staged.__dict__
        return self

    def _fit_staged(self, X, y, lengths, sample_weight, sequence_ids):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        batch, y_flat, form = self._validate_input(X, y, lengths, reset=True,
                                                   sequence_ids=sequence_ids)
        y_flat = column_or_1d(y_flat, warn=True) if form not in ("list", "images") else y_flat
        self.classes_, Y = encode_targets(y_flat)
        structure = self._resolve_structure(form)
        self.structure_ = structure.bind(
            batch.X.shape[1], self.classes_.shape[0], self.classes_, Y
        )
        if len(self.structure_.nonnegative_) and not self._keeps_nonnegative_weights:
            raise ValueError(
                f"{type(structure).__name__} constrains weights to be non-negative, which "
                f"{type(self).__name__} does not support; use M3NSimplicialDecomposition."
            )
        weights = _check_sequence_weights(sample_weight, batch.n_sequences)
        self.w_ = self._fit_batch(batch, Y, weights)
        self.temperature_ = 1.0

    @abstractmethod
    def _fit_batch(self, batch, Y, sample_weight):
        """Optimise on a validated batch with encoded labels; return the flat weights.

        ``self.structure_`` is bound; the learner records its progress with a
        :class:`Certificate` and sets its other fitted attributes on ``self``.
        """

    # ------------------------------------------------------------------ warm starts
    def _warm_state(self, settings, batch, Y):
        """The dual state of the previous fit if ``warm_start`` is set and it was made on the
        same data (compared by a digest of ``X``, ``y`` and the bound structure) with the same
        ``settings``; else ``None``."""
        if not getattr(self, "warm_start", False):
            return None
        previous = getattr(self, "_dual_state", None)
        if previous is None or previous[0] != (settings, _digest(batch, Y, self.structure_)):
            return None
        return previous[1]

    def _keep_warm_state(self, settings, batch, Y, state):
        """Keep ``state`` for a later warm start (in this process: it is not pickled)."""
        self._dual_state = ((settings, _digest(batch, Y, self.structure_)), state)

    def __getstate__(self):
        # the dual state holds the training data; a pickled model is its fitted parameters
        state = dict(super().__getstate__())
        state.pop("_dual_state", None)
        return state

    # ------------------------------------------------------------------ fitted parameters
    def _fitted_view(self):
        """This estimator as one fit left it, for the length of a call.

        A fit replaces the estimator's ``__dict__`` as a whole when it completes, so a view
        that holds the current dict reads every fitted attribute (``w_``, ``structure_``,
        ``classes_``...) from the same fit even while another thread refits the estimator.
        """
        check_is_fitted(self)
        view = object.__new__(type(self))
        view.__dict__ = self.__dict__
        return view

    def _unary_weights(self):
        """Per-class weights on the token features and the intercepts (zeros without)."""
        weights = self.structure_.split_weights(self.w_)[0].T
        if getattr(self, "_with_intercept", False):
            return weights[:, :-1], weights[:, -1].copy()
        return weights, np.zeros(weights.shape[0])

    def _binary_multiclass(self):
        return isinstance(self.structure_, MultiClass) and self.classes_.shape[0] == 2

    @property
    def coef_(self):
        """Per-class weights on token features, shape (n_classes, n_features).

        For two classes in the multiclass form, as ``LinearSVC``: the weights of class 1 minus
        those of class 0, shape (1, n_features).
        """
        model = self._fitted_view()
        weights, _ = model._unary_weights()
        if model._binary_multiclass():
            return (weights[1] - weights[0])[None, :]
        return weights

    @property
    def intercept_(self):
        """Per-class intercepts of the multiclass form, shape (n_classes,) (for two classes
        ``(1,)``: class 1's minus class 0's); zeros without ``fit_intercept``. Sequence models
        have ``start_`` and ``end_`` biases and ``transition_`` scores instead."""
        model = self._fitted_view()
        if not isinstance(model.structure_, MultiClass):
            raise AttributeError("intercept_ exists only for the multiclass form; chains have "
                                 "start_, end_ and transition_.")
        _, intercept = model._unary_weights()
        if model._binary_multiclass():
            return np.array([intercept[1] - intercept[0]])
        return intercept

    def _chain_parameters(self, name):
        model = self._fitted_view()
        if not isinstance(model.structure_, ChainStructure):
            raise AttributeError(f"{name} exists only for chain structures.")
        return model.structure_.pairwise_parameters(model.structure_.split_weights(model.w_)[1])

    @property
    def transition_(self):
        """Transition scores ``T[a, b]`` of a chain model, shape (n_classes, n_classes)."""
        return self._chain_parameters("transition_")[0]

    @property
    def start_(self):
        """Scores of each label at the start of a sequence, shape (n_classes,) (chains with
        ``start_end=True``)."""
        start = self._chain_parameters("start_")[1]
        if start is None:
            raise AttributeError("start_ exists only for chains with start_end=True.")
        return start

    @property
    def end_(self):
        """Scores of each label at the end of a sequence, shape (n_classes,) (chains with
        ``start_end=True``)."""
        end = self._chain_parameters("end_")[2]
        if end is None:
            raise AttributeError("end_ exists only for chains with start_end=True.")
        return end

    # ------------------------------------------------------------------ prediction
    def _potentials(self, batch):
        """``(unary, pairwise)`` potentials of the fitted model on ``batch``."""
        return self.structure_.potentials(batch, self.w_)

    def _weight_norm_sq(self):
        """``||w||^2`` of the fitted model."""
        return float(self.w_ @ self.w_)

    def _regularizer(self):
        """The regulariser of the objective at the fitted weights (``1/2 ||w||^2``)."""
        return 0.5 * self._weight_norm_sq()

    def _predict_encoded(self, X, lengths, sequence_ids=None):
        batch, form = self._prediction_batch(X, lengths, sequence_ids)
        labels = self.structure_.decode(batch, *self._potentials(batch), n_jobs=self.n_jobs)
        return batch, labels, form

    def _prediction_batch(self, X, lengths, sequence_ids):
        batch, _, form = self._validate_input(X, None, lengths, reset=False, allow_empty=True,
                                              sequence_ids=sequence_ids)
        return batch, form

    def predict(self, X, lengths=None, sequence_ids=None):
        """Predicted labels, in the form of ``X``.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, plain samples (multiclass) or
            a list of images (n_rows, n_cols, n_features). A sequence may be empty (0 rows,
            or a length of 0): its output is empty (the same holds for
            :meth:`decision_function` and :meth:`predict_marginals`).
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        y : list of ndarray, or ndarray of shape (n_tokens,)
            Labels in the form of ``X`` (a list of label arrays, a flat array, or a list of
            2-D masks for images).
        """
        model = self._fitted_view()
        batch, Y, form = model._predict_encoded(X, lengths, sequence_ids)
        return model._format_output(model.classes_[Y], batch, form)

    def decision_function(self, X, lengths=None, sequence_ids=None):
        """Per-token class scores (the unary part of the model's score, ``X W^T``).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        scores : list of ndarray of shape (n_tokens, n_classes), or ndarray
            For the multiclass form, shape (n_samples, n_classes) (for two classes, the score
            difference of class 1 over class 0, shape (n_samples,), as ``LinearSVC``); for
            sequences, in the form of ``X``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        scores, _ = model._potentials(batch)
        if form == "multiclass" and scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return model._format_output(scores, batch, form)

    def predict_marginals(self, X, lengths=None, sequence_ids=None):
        """Per-token class probabilities under ``p(y|x) ∝ exp(w . Psi(x, y))``.

        Computed by forward-backward on the model's scores (softmax for multiclass).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        marginals : list of ndarray of shape (n_tokens, n_classes), or ndarray
            In the form of ``X``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        return model._format_output(model._marginals(batch, 1.0), batch, form)

    def _marginals(self, batch, temperature, potentials=None):
        """Node marginals of ``batch`` under the model's scores divided by ``temperature``."""
        if batch.n_tokens == 0:  # only empty sequences
            return np.zeros((0, self.classes_.shape[0]))
        unary, pairwise = self._potentials(batch) if potentials is None else potentials
        if temperature != 1.0:
            unary, pairwise = unary / temperature, pairwise / temperature
        return self.structure_.node_marginals(batch, unary, pairwise, n_jobs=self.n_jobs)

    def predict_proba(self, X, lengths=None, sequence_ids=None):
        """Per-token class probabilities: the marginals at the calibrated temperature.

        ``p_T(y|x) ∝ exp(w . Psi(x, y) / T)`` with ``T = temperature_`` (1 after ``fit``; set it
        on held-out data with :meth:`calibrate_temperature`, since max-margin scores are not
        log-probabilities). The argmax of a token's probabilities is its most probable label,
        which may differ from the jointly decoded :meth:`predict` for sequences.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        proba : list of ndarray of shape (n_tokens, n_classes), or ndarray
            In the form of ``X``; columns follow ``classes_``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        return model._format_output(model._marginals(batch, model.temperature_), batch, form)

    def predict_topk(self, X, k=5, lengths=None, sequence_ids=None):
        """The ``k`` highest-scoring labellings of each sequence, with their scores.

        Exact k-best Viterbi in compiled code (Huang and Chiang 2005, algorithm 3) for chain
        models; the ``k`` best classes of each sample for the multiclass form. Labellings of
        equal score are ranked as :meth:`predict` breaks ties, so the first labelling is always
        the one :meth:`predict` returns.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass);
            a sequence may be empty.
        k : int, default=5
            Labellings per sequence; a sequence of length ``L`` gets
            ``min(k, n_classes ** L)``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        labels : list of ndarray of shape (k_i, length_i), or ndarray of shape (n_samples, k_c)
            Per sequence, row ``j`` is the labelling of rank ``j`` (an empty sequence has one,
            empty, labelling); for plain samples, the ``k_c = min(k, n_classes)`` best classes
            of each, best first.
        scores : list of ndarray of shape (k_i,), or ndarray of shape (n_samples, k_c)
            The model score ``w . Psi(x, y)`` of each labelling, non-increasing.
        """
        from ._topk import predict_topk

        return predict_topk(self._fitted_view(), X, k,
                            self._lengths_of(X, lengths, sequence_ids))

    def sequence_confidence(self, X, lengths=None, sequence_ids=None):
        """Probability of each predicted labelling under the model's Gibbs distribution.

        ``exp(w . Psi(x, y_hat) / T - log Z_T(x))`` with ``y_hat`` the labelling
        :meth:`predict` returns, ``T = temperature_`` (see :meth:`calibrate_temperature`) and
        ``Z_T(x)`` the sum over all labellings (forward recursion): the distribution whose
        marginals :meth:`predict_proba` gives. Max-margin weights are not fitted to calibrate
        it (and one temperature fitted on token marginals need not calibrate whole
        sequences): it is a score for ranking or thresholding predictions, not the
        probability that they are right.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict_topk`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        confidence : ndarray of shape (n_sequences,) or (n_samples,)
            In ``[0, 1]``; 1 for an empty sequence.
        """
        from ._topk import sequence_confidence

        return sequence_confidence(self._fitted_view(), X,
                                   self._lengths_of(X, lengths, sequence_ids))

    @staticmethod
    def _lengths_of(X, lengths, sequence_ids):
        """``lengths``, or those of ``sequence_ids`` over the rows of a flat ``X``."""
        if sequence_ids is None:
            return lengths
        if lengths is not None:
            raise ValueError("Give either lengths or sequence_ids, not both.")
        if _is_image_list(X) or _is_sequence_list(X):
            raise ValueError("sequence_ids= is only used with a flat X, not a list of "
                             "sequences or images.")
        return lengths_from_sequence_ids(sequence_ids, _num_samples(X))

    def calibrate_temperature(self, X, y, lengths=None, sequence_ids=None):
        """Set ``temperature_`` to minimise the per-token log loss of :meth:`predict_proba`
        on held-out data (temperature scaling; predictions do not change).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Held-out input, in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            Its true labels; every label must have been seen in fit.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        self : object
            The estimator, with ``temperature_`` set.
        """
        model = self._fitted_view()
        batch, y_flat, _ = model._validate_input(X, y, lengths, reset=False,
                                                 sequence_ids=sequence_ids)
        Y = model._encode_known(np.asarray(y_flat))
        potentials = model._potentials(batch)
        rows = np.arange(Y.shape[0])

        def log_loss(log_temperature):
            node = model._marginals(batch, float(np.exp(log_temperature)), potentials)
            return -float(np.mean(np.log(np.maximum(node[rows, Y], 1e-300))))

        best = minimize_scalar(log_loss, bounds=(np.log(1e-4), np.log(1e4)), method="bounded",
                               options={"xatol": 1e-4})
        model.temperature_ = float(np.exp(best.x))
        return self

    def score(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """Token accuracy (plain accuracy for the multiclass form).

        Labels in ``y`` that were never seen in training count as errors; for the multiclass
        form of ``structure="auto"`` a ``UserWarning`` then says how to get stratified folds
        (an integer ``cv`` gives this estimator plain folds: see the class docstring).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels, in the form of ``X``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_tokens,), default=None
            Per-token weights of the accuracy.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        score : float
        """
        model = self._fitted_view()
        batch, Y, form = model._predict_encoded(X, lengths, sequence_ids)
        if form == "images":
            y_flat = flatten_labels(image_rows(X, y)[2], batch.lengths)
        elif form == "list":
            y_flat = flatten_labels(y, batch.lengths if batch.output_offsets is None
                                    else np.diff(batch.output_offsets))
        else:
            y_flat = column_or_1d(y)
            if y_flat.shape[0] != batch.n_tokens:
                raise ValueError(f"y has {y_flat.shape[0]} labels for {batch.n_tokens} tokens.")
        model._check_label_kinds_match(y_flat)
        if form == "multiclass" and model.structure == "auto":
            _warn_unseen_classes(y_flat, model.classes_)
        correct = (model.classes_[Y] == y_flat).astype(np.float64)
        if sample_weight is not None:
            return float(np.average(correct, weights=sample_weight))
        return float(correct.mean())

    # ------------------------------------------------------------------ objective
    def _check_label_kinds_match(self, y_flat):
        """Refuse labels of another kind than ``classes_`` (strings against numbers), which
        would all compare unequal: the message of scikit-learn's classifiers."""
        given, fitted = label_kinds(y_flat), label_kinds(self.classes_)
        if ("str" in given) != ("str" in fitted):
            raise ValueError(
                f"Mix of label input types (string and number): y holds "
                f"{'/'.join(sorted(given))} labels but the model was fitted on "
                f"{'/'.join(sorted(fitted))} labels (classes_ = {self.classes_.tolist()[:5]}"
                f"{' ...' if self.classes_.shape[0] > 5 else ''}).")

    def _encode_known(self, y_flat):
        self._check_label_kinds_match(y_flat)
        index = np.searchsorted(self.classes_, y_flat)
        index = np.clip(index, 0, self.classes_.shape[0] - 1)
        if not np.all(self.classes_[index] == y_flat):
            raise ValueError("y contains labels that were not seen in fit.")
        return index.astype(np.intp)

    def _structured_hinge(self, batch, Y, unary, pairwise, rescale, token_loss=None):
        """Per-sequence hinge losses, most violating labellings and their losses
        (:func:`~sklstruct.structures._base.structured_hinge` on the fitted structure)."""
        return structured_hinge(self.structure_, batch, Y, unary, pairwise, rescale,
                                self.n_jobs, token_loss)

    def _primal(self, batch, Y, w, weights=None):
        """``1/2 ||w||^2 + C sum_i s_i H_i(w)`` and the hinge terms (margin/slack as fitted)."""
        hinge, _, _ = self._structured_hinge(batch, Y, *self.structure_.potentials(batch, w),
                                             self._rescale())
        total = hinge.sum() if weights is None else weights @ hinge
        return 0.5 * float(w @ w) + float(self.C) * float(total), hinge

    def objective(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """The training objective at the fitted weights.

        ``1/2 ||w||^2 + C sum_i s_i H_i(w)`` (``L1M3N``: ``1/2 ||w||_1 + ...``) with ``H_i``
        the structured hinge loss of the learner's rescaling and ``s_i`` the sequence weights.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels, in the form of ``X``; every label must have been seen in fit.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_sequences,), default=None
            Per-sequence weights ``s_i`` (ones by default).
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        objective : float
        """
        model = self._fitted_view()
        batch, y_flat, form = model._validate_input(X, y, lengths, reset=False,
                                                    sequence_ids=sequence_ids)
        Y = model._encode_known(np.asarray(y_flat))
        weights = _check_sequence_weights(sample_weight, batch.n_sequences)
        hinge, _, _ = model._structured_hinge(batch, Y, *model._potentials(batch),
                                              model._rescale())
        return model._regularizer() + model.C * float(weights @ hinge)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        if not isinstance(self.structure, MultiClass):
            # folds of sequences cannot be stratified (see the class docstring)
            tags.estimator_type = None
        return tags


def encode_targets(y_flat):
    """The classes of training labels and the labels' indices in them.

    The one validation of training labels, shared by local and sharded fits: labels of one
    kind (no strings beside numbers), discrete (scikit-learn's classification targets), at
    least two classes.

    Parameters
    ----------
    y_flat : ndarray of shape (n_tokens,)

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        Sorted, as :func:`numpy.unique` gives them.
    Y : ndarray of int of shape (n_tokens,)
    """
    y_flat = np.asarray(y_flat)
    check_label_kinds(label_kinds(y_flat))
    if y_flat.dtype == object and y_flat.size and \
            label_kinds(y_flat) <= {"str", "number", "bool"}:  # one kind: its numpy dtype
        y_flat = np.asarray(y_flat.tolist())
    try:
        check_classification_targets(y_flat)
        classes, Y = np.unique(y_flat, return_inverse=True)
    except TypeError as exc:  # e.g. None twice, tuples: not comparable
        kinds = sorted({type(v).__name__ for v in np.asarray(y_flat, dtype=object)})
        raise TypeError(f"the labels must be mutually comparable values of one kind; y "
                        f"mixes {', '.join(kinds)}.") from exc
    if classes.shape[0] < 2:
        raise ValueError(
            "Classifier can't train when only one class is present: "
            f"y holds the single class {classes.tolist()[0]!r}."
        )
    return classes, Y.astype(np.intp)


def _warn_unseen_classes(y, classes):
    """Warn when multiclass labels hold classes the model never saw: the sign of unstratified
    folds of class-sorted data, which an integer ``cv`` gives ``structure="auto"``."""
    try:
        unseen = np.setdiff1d(np.unique(y), classes).tolist()
    except TypeError:  # labels of mixed types: the accuracy alone tells
        return
    if unseen:
        warnings.warn(
            f"y holds {len(unseen)} class(es) not seen in fit (e.g. {unseen[0]!r}), scored as "
            "errors. An integer cv gives structure='auto' plain, unstratified folds (sequence "
            "labels cannot be stratified), so data sorted by class leaves classes out of the "
            "training folds: pass structure=MultiClass() or cv=StratifiedKFold(...).",
            UserWarning)


def _append_constant_column(X):
    """``[X, 1]``: the intercept feature of the multiclass form."""
    if sp.issparse(X):
        return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    return np.hstack([X, np.ones((X.shape[0], 1))])


class Certificate:
    """The progress record of one fit: certificates, stopping, verbose lines, warnings.

    Every learner records its checks through :meth:`check` (primal, dual, their gap, wall time
    from the start of the fit and oracle calls, plus learner-specific fields) and ends with
    :meth:`finish`, which sets ``history_`` and ``n_iter_`` and warns when the fit stopped
    before converging. A check stops the fit when it converges (by default
    ``gap <= tol * |primal|``), when the estimator's ``callback`` returns True, or when the
    fit has run ``max_time`` seconds.

    With ``verbose=1`` a check prints one line (the unit and its count, primal, dual, gap and
    relative gap, seconds since the start, oracle calls), at most about one a second plus
    the first and the last; ``verbose=2`` prints every check with the learner's extra fields.

    Parameters
    ----------
    estimator : BaseStructuredClassifier
    unit : str, default="pass"
        What ``n_iter_`` counts ("pass", "iteration", "round").
    extra_fields : tuple of str, default=()
        Fields of ``history_`` beyond primal, dual, gap, time and oracle_calls.
    """

    FIELDS = ("primal", "dual", "gap", "time", "oracle_calls")

    def __init__(self, estimator, unit="pass", extra_fields=()):
        self.estimator = estimator
        self.unit = unit
        self.fields = self.FIELDS + tuple(extra_fields)
        self.rows = {name: [] for name in self.fields}
        self.start = time.perf_counter()
        self.stop_reason = None
        self.last_print = None
        # a function giving fitted attributes besides ``w_`` that prediction needs (e.g. the
        # dual coefficients of a kernel model) at the current iterate, for the callback
        self.current_attributes = None

    @property
    def converged(self):
        return self.stop_reason == "converged"

    def elapsed(self):
        """Seconds since the start of the fit."""
        return time.perf_counter() - self.start

    def check(self, iteration, primal, dual, oracle_calls, converged=None, w=None, **extra):
        """Record one check; return whether the fit stops here.

        ``converged`` overrides the relative-gap test (for learners with another stopping
        rule); a NaN primal (no certificate at this check) never converges by the gap. A copy
        of ``w`` (the current weights, often an array the learner keeps updating) is handed to
        the callback.
        """
        estimator = self.estimator
        gap = primal - dual
        row = dict(primal=primal, dual=dual, gap=gap, time=self.elapsed(),
                   oracle_calls=oracle_calls, **extra)
        for name in self.fields:
            self.rows[name].append(float(row.get(name, np.nan)))
        if converged is None:
            converged = bool(gap <= estimator.tol * abs(primal))
        self.stop_reason = "converged" if converged else None
        callback = getattr(estimator, "callback", None)
        if callback is not None:
            w = None if w is None else np.array(w, copy=True)
            if callback(self._model_at(w), dict(row, iteration=iteration, w=w)):
                self.stop_reason = self.stop_reason or "callback"
        max_time = getattr(estimator, "max_time", None)
        if self.stop_reason is None and max_time is not None and row["time"] >= max_time:
            self.stop_reason = "max_time"
        max_iter = getattr(estimator, "max_iter", None)
        stops = self.stop_reason is not None or (max_iter is not None and iteration >= max_iter)
        # verbose=1: the first and last checks and at most one a second, skipping checks
        # that certify nothing (no primal value)
        if estimator.verbose >= 2 or (estimator.verbose and (stops or np.isfinite(primal) and (
                self.last_print is None or row["time"] - self.last_print >= 1.0))):
            self.last_print = row["time"]
            relative = gap / abs(primal) if primal else np.nan
            more = "".join(f"  {name} {value:.4g}" for name, value in extra.items()
                           if estimator.verbose >= 2)
            print(f"[{type(estimator).__name__}] {self.unit} {iteration:5d}  "
                  f"primal {primal:.6g}  dual {dual:.6g}  gap {gap:.3g} ({relative:.2e})  "
                  f"time {row['time']:.2f}s  oracle calls {int(oracle_calls)}{more}",
                  flush=True)
        return self.stop_reason is not None

    def _model_at(self, w):
        """A fitted copy of the estimator with the weights ``w`` (and the learner's other
        current fitted attributes, from ``current_attributes``), for the callback: its
        ``predict``, ``score`` and ``objective`` work as if the fit had stopped here."""
        model = object.__new__(type(self.estimator))
        model.__dict__ = dict(self.estimator.__dict__)
        if w is not None:
            model.w_ = w
            model.temperature_ = 1.0
            if self.current_attributes is not None:
                model.__dict__.update(self.current_attributes())
        return model

    def amend_last(self, primal, dual):
        """Make the last record certify other weights than the last iterate's: ``primal``
        their objective, ``dual`` the best lower bound seen."""
        self.rows["primal"][-1] = float(primal)
        self.rows["dual"][-1] = float(dual)
        self.rows["gap"][-1] = float(primal - dual)
        if self.stop_reason is None and primal - dual <= self.estimator.tol * abs(primal):
            self.stop_reason = "converged"

    def precision_lost(self, why):
        """Stop the fit with a warning: the learner cannot make progress in floating point."""
        self.stop_reason = "precision"
        warnings.warn(f"{type(self.estimator).__name__} stopped early: {why}.",
                      ConvergenceWarning)

    def history(self):
        """The records as a dict of 1-D float arrays."""
        return {name: np.asarray(values) for name, values in self.rows.items()}

    def finish(self, n_iter, what=None, warn=True):
        """Set ``history_`` and ``n_iter_``; warn if the fit stopped before converging.

        ``what`` names the stopping rule in the warning (default: the relative duality gap).
        A stop asked for by the callback is not a warning; nor is any stop with ``warn=False``
        (learners whose budget is their stopping rule).
        """
        estimator = self.estimator
        estimator.history_ = self.history()
        estimator.n_iter_ = int(n_iter)
        if warn and self.stop_reason in (None, "max_time"):
            what = what or f"a relative duality gap of {estimator.tol}"
            units = self.unit + ("es" if self.unit.endswith("s") else "s")
            budget = f"{estimator.max_time} s (max_time)" if self.stop_reason == "max_time" \
                else f"{n_iter} {units}"
            warnings.warn(f"{type(estimator).__name__} did not reach {what} in {budget}.",
                          ConvergenceWarning)


class CheckSchedule:
    """When a learner that makes passes over the data certifies its iterate.

    ``check_every`` an integer: every that many passes. ``None`` (automatic): after a pass whose
    own estimate of the duality gap (when the learner has one, e.g. the summed block gaps of a
    Frank-Wolfe pass) is within the target, and otherwise after a number of passes that grows
    geometrically by ``growth`` (rounded up), so that certificates cost a small part of a long
    fit: 1, 2, 4, 8, ... for learners whose passes estimate their gap (the estimate usually
    triggers the last check); 1, 2, 3, 4, 5, 7, 9, 12, ... with ``growth=1.25`` for learners
    without an estimate, which then run at most about a quarter more passes than they need
    to reach the target. With ``predict`` (learners without an estimate), once a certified
    relative gap is within ten times ``tol``, the next check comes no later than the pass
    where a power law through it and an earlier certificate (at least 15% fewer passes
    before, with a larger gap) reaches ``tol``, and no sooner than 3% more passes (doubled
    after each prediction that missed): replayed on the certificates of every pass of an
    online exponentiated-gradient fit at ``tol=1e-2``, it stops after 86 passes instead of 94
    on CoNLL-2000 and 66 instead of 75 on OCR letters, with at most one more check. The last
    pass (``max_iter``) and a pass that ends after ``max_time`` are always certified.
    """

    def __init__(self, estimator, certificate, growth=2.0, predict=False):
        self.estimator, self.certificate, self.growth = estimator, certificate, growth
        self.predict = predict
        self.next = 1
        self._certified = []  # (passes, relative gap) of the checks so far
        self._predicted = False  # whether the next check is a prediction
        self._missed = 0  # predicted checks so far that did not reach tol

    def due(self, passes, estimate=None, primal=None):
        """Whether to certify after ``passes`` passes (``estimate``: the pass's own gap
        estimate; ``primal``: the last certified primal)."""
        estimator = self.estimator
        if passes >= estimator.max_iter:
            return True
        max_time = getattr(estimator, "max_time", None)
        if max_time is not None and self.certificate.elapsed() >= max_time:
            return True
        if estimator.check_every is not None:
            return passes % estimator.check_every == 0
        if estimate is not None and primal is not None and \
                estimate <= estimator.tol * abs(primal):
            return True
        return passes >= self.next

    def checked(self, passes):
        """Record a certificate after ``passes`` passes (the last row of the certificate)."""
        self.next = max(passes + 1, int(np.ceil(self.growth * passes)))
        if not self.predict:
            return
        rows, tol = self.certificate.rows, self.estimator.tol
        primal, gap = rows["primal"][-1], rows["gap"][-1]
        relative = gap / abs(primal) if primal else np.nan
        if not np.isfinite(relative):
            return
        self._certified.append((passes, relative))
        if self._predicted and relative > tol:
            self._missed += 1
        self._predicted = False
        if not tol < relative <= 10.0 * tol:
            return
        earlier = [(p, g) for p, g in self._certified[:-1]
                   if 0 < p <= passes / 1.15 and g > relative]
        if earlier:
            p, g = earlier[-1]
            rate = np.log(g / relative) / np.log(passes / p)
            # log of the pass where the power law reaches tol (a flat stretch: far away)
            log_crossing = np.log(passes) + np.log(relative / tol) / rate
            if log_crossing < np.log(self.next):
                # at least 3% more passes, twice that after each missed prediction, so that
                # a gap stalling just above tol soon returns to the geometric checks
                least = passes + max(1, int(np.ceil(0.03 * 2.0**self._missed * passes)))
                crossing = max(least, int(np.ceil(np.exp(log_crossing) - 1e-9)))
                if crossing < self.next:
                    self.next, self._predicted = crossing, True


def _digest(batch, Y, structure):
    """Digest of the training data and the bound structure (a warm start needs both equal)."""
    digest = hashlib.blake2b(digest_size=16)
    X = batch.X
    arrays = (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)
    for array in arrays + (batch.offsets, Y):
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update(repr(sorted(structure.get_params().items())).encode())
    digest.update(repr(structure.loss_weights_.tolist()).encode())
    return digest.hexdigest()


def _check_sequence_weights(sample_weight, n_sequences, allow_all_zero=False):
    """Per-sequence weights: ones by default; finite, non-negative, not all zero (unless
    ``allow_all_zero``: a shard's weights, whose total is checked over all shards)."""
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
    if not allow_all_zero and not np.any(weights > 0):
        raise ValueError("sample_weight must not be all zero.")
    return weights
