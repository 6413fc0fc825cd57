"""Input forms: what ``X`` and ``y`` may be, and their conversion to one batch.

Every estimator converts its input once into a :class:`~sklstruct.utils.SequenceBatch` (one
stacked token matrix and offsets) plus flat labels, through :class:`InputMixin`: a list of
per-sequence matrices (arrays, sparse matrices or DataFrames, or a numpy object array of
them), a flat matrix with ``lengths`` or ``sequence_ids``, a plain 2-D ``X`` (the multiclass
form), a list of images or a list of volumes. Outputs follow the input form
(:meth:`InputMixin._format_output`).
"""

from collections.abc import Iterator, Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from .utils._sequences import (
    SequenceBatch,
    check_label_kinds,
    check_lengths,
    check_token_matrix,
    flatten_labels,
    image_rows,
    label_kinds,
    lengths_from_sequence_ids,
    offsets_from_lengths,
    split_flat,
    stack_sequences,
    volume_rows,
)
from .utils._sklearn_compat import (
    _check_feature_names,
    _check_n_features,
    _get_feature_names,
    _num_samples,
    validate_data,
)


def _is_image_list(X):
    """A non-empty list/tuple of 3-D (n_rows, n_cols, n_features) arrays."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and np.ndim(X[0]) == 3


def _is_volume_list(X):
    """A non-empty list/tuple whose first element is a 4-D (n_slices, n_rows, n_cols,
    n_features) array."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and np.ndim(X[0]) == 4


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


class InputMixin:
    """Input validation of the estimators: any accepted form to a batch, labels encoded, and
    outputs back in the input's form."""

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
        widths = slice_shapes = None
        if _is_image_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "images.")
            X, widths, y = image_rows(X, y)
        elif _is_volume_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "volumes.")
            X, slice_shapes, y = volume_rows(X, y)
        if _is_sequence_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "sequences.")
            names_of = X[0] if _sequence_feature_names(X) is not None else None
            stacked, seq_lengths = stack_sequences(X, allow_empty)
            stacked, _ = self._validate_matrix(stacked, None, reset, allow_empty,
                                               names_of=names_of)
            form = "images" if widths is not None else (
                "volumes" if slice_shapes is not None else "list")
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
            self._with_intercept = bool(self.fit_intercept) and \
                self._resolve_structure(form).one_token_per_example and self._linear_scores()
        if getattr(self, "token_map_", None) is not None:
            stacked = self.token_map_.transform(stacked)
        if getattr(self, "_with_intercept", False):  # (a multiclass model, in any form)
            stacked = _append_constant_column(stacked)
        offsets = offsets_from_lengths(seq_lengths)
        if np.all(seq_lengths > 0):
            batch = SequenceBatch(stacked, offsets, widths, slice_shapes=slice_shapes)
        else:  # (images and volumes are never empty: image_rows and volume_rows refuse it)
            batch = SequenceBatch(stacked, offsets_from_lengths(seq_lengths[seq_lengths > 0]),
                                  widths, output_offsets=offsets)
        return batch, y_flat, form

    def _check_form(self, form, reset):
        """A flat ``X`` without lengths is the multiclass form: refuse it for chains."""
        if form != "multiclass":
            return
        structure = self.structure if reset else self.structure_
        if structure == "auto" or structure.one_token_per_example:
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
        if form == "volumes":
            return [piece.reshape((-1, n_rows, n_cols) + piece.shape[1:])
                    for piece, (n_rows, n_cols)
                    in zip(split_flat(values, batch.offsets), batch.slice_shapes.tolist())]
        return values

    @staticmethod
    def _lengths_of(X, lengths, sequence_ids):
        """``lengths``, or those of ``sequence_ids`` over the rows of a flat ``X``."""
        if sequence_ids is None:
            return lengths
        if lengths is not None:
            raise ValueError("Give either lengths or sequence_ids, not both.")
        if _is_image_list(X) or _is_volume_list(X) or _is_sequence_list(X):
            raise ValueError("sequence_ids= is only used with a flat X, not a list of "
                             "sequences, images or volumes.")
        return lengths_from_sequence_ids(sequence_ids, _num_samples(X))

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


def _append_constant_column(X):
    """``[X, 1]``: the intercept feature of the multiclass form."""
    if sp.issparse(X):
        return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    return np.hstack([X, np.ones((X.shape[0], 1))])


def check_sequence_weights(sample_weight, n_sequences, allow_all_zero=False):
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
