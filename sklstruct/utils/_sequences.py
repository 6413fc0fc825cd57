"""The batch representation of sequence data and its validation.

Every estimator converts its input once into a :class:`SequenceBatch`: one stacked token matrix
(CSR or C-ordered dense, float64) plus an ``offsets`` array, so that oracles run over the whole
batch in compiled code.
"""

import itertools
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_array


@dataclass(frozen=True)
class SequenceBatch:
    """A batch of sequences stored as one token matrix plus offsets.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_tokens, n_features)
        Stacked token features.
    offsets : array-like of shape (n_sequences + 1,) of int
        Sequence ``i`` spans rows ``offsets[i]:offsets[i + 1]``; kept as an int64 array.
    widths : ndarray of shape (n_sequences,), dtype int64, default=None
        For image input: the number of pixels per row of every image (its rows are stored
        one after the other).
    output_offsets : ndarray of shape (n_outputs + 1,), dtype int64, default=None
        At prediction, the offsets of every input sequence including empty ones (which the
        batch leaves out), to split per-token outputs; None when they are ``offsets``.
    slice_shapes : ndarray of shape (n_sequences, 2), dtype int64, default=None
        For volume input: ``(n_rows, n_cols)`` of the slices of every volume (its slices are
        stored one after the other, each row by row).
    extras : dict of str to ExampleArrays, default=None
        Per-example data beside the token rows (a graph's edges and edge features), each
        an :class:`ExampleArrays` with one block of rows per example; :meth:`select` and
        :meth:`take` carry them to sub-batches. Read them with :meth:`extra`.

    Raises
    ------
    ValueError
        When ``offsets`` do not split the rows of ``X`` (non-decreasing, from 0 to
        ``X.shape[0]``) or a sparse ``X`` breaks its own format (see
        :func:`check_sparse_arrays`: a matrix whose arrays were changed after it was built):
        the compiled code reads the rows and columns these arrays name. Sub-batches of a
        checked batch (:meth:`select`, :meth:`take`) are not checked again.
    """

    X: object
    offsets: np.ndarray
    widths: object = None
    output_offsets: object = None
    slice_shapes: object = None
    extras: object = None

    def __post_init__(self):
        _check_batch_arrays(self.X, self.offsets)
        if not (isinstance(self.offsets, np.ndarray) and self.offsets.dtype == np.int64):
            # (a list, or another integer dtype: the compiled kernels read int64 offsets)
            object.__setattr__(self, "offsets", np.asarray(self.offsets, dtype=np.int64))

    @classmethod
    def _of_checked(cls, X, offsets, widths=None, output_offsets=None, slice_shapes=None,
                    extras=None):
        """A batch of arrays taken from a checked batch (rows of it): not checked again."""
        batch = object.__new__(cls)
        for name, value in (("X", X), ("offsets", offsets), ("widths", widths),
                            ("output_offsets", output_offsets),
                            ("slice_shapes", slice_shapes), ("extras", extras)):
            object.__setattr__(batch, name, value)
        return batch

    @property
    def n_tokens(self):
        """The number of token rows, ``offsets[-1]``."""
        return int(self.offsets[-1])

    @property
    def n_sequences(self):
        """The number of sequences, ``len(offsets) - 1``."""
        return self.offsets.shape[0] - 1

    @property
    def lengths(self):
        """The length of every sequence, shape (n_sequences,)."""
        return np.diff(self.offsets)

    @cached_property
    def sequence_index(self):
        """Index of the sequence of every token, shape (n_tokens,)."""
        return np.repeat(np.arange(self.n_sequences), self.lengths)

    def sum_per_sequence(self, values):
        """Sum per-token ``values`` over each sequence.

        Parameters
        ----------
        values : array-like of shape (n_tokens,)

        Returns
        -------
        sums : ndarray of shape (n_sequences,)
            0 for an empty sequence.
        """
        if self.n_tokens == 0:
            return np.zeros(self.n_sequences)
        values = np.asarray(values, dtype=np.float64)
        lengths = self.lengths
        if np.all(lengths > 0):
            return np.add.reduceat(values, self.offsets[:-1])
        sums = np.zeros(self.n_sequences)  # (an empty sequence sums to 0)
        sums[lengths > 0] = np.add.reduceat(values, self.offsets[:-1][lengths > 0])
        return sums

    @cached_property
    def csr_arrays(self):
        """``(indptr int64, indices int32, data float64)`` of the token matrix in CSR form,
        the arrays compiled per-example code reads a sequence's token rows from."""
        X = self.X if sp.issparse(self.X) else sp.csr_matrix(self.X)
        return (np.ascontiguousarray(X.indptr, dtype=np.int64),
                np.ascontiguousarray(X.indices, dtype=np.int32),
                np.ascontiguousarray(X.data, dtype=np.float64))

    def extra(self, name):
        """The per-example arrays ``name``, or ``None``.

        Parameters
        ----------
        name : str

        Returns
        -------
        arrays : ExampleArrays or None
        """
        return None if self.extras is None else self.extras.get(name)

    def _extras_of(self, indices):
        if self.extras is None:
            return None
        return {name: arrays.take(indices) for name, arrays in self.extras.items()}

    def take(self, indices):
        """The sub-batch made of the sequences ``indices`` (in that order).

        Parameters
        ----------
        indices : array-like of int or of bool
            Sequence positions (negative ones count from the end) or a mask over the
            sequences.

        Returns
        -------
        sub : SequenceBatch
        """
        return self.select(indices)[0]

    def select(self, indices):
        """The sub-batch made of the sequences ``indices`` (in that order) and its token rows.

        A run of consecutive sequences is a view of the token matrix; otherwise the rows are
        copied.

        Parameters
        ----------
        indices : array-like of int or of bool
            Sequence positions (negative ones count from the end) or a mask over the
            sequences.

        Returns
        -------
        sub : SequenceBatch
        rows : ndarray of shape (sub.n_tokens,)
            Rows of this batch's tokens in ``sub``.
        """
        indices = _positions(indices, self.n_sequences)
        lengths = self.lengths[indices]
        widths = None if self.widths is None else self.widths[indices]
        slice_shapes = None if self.slice_shapes is None else self.slice_shapes[indices]
        if indices.size and np.all(np.diff(indices) == 1):
            lo, hi = int(self.offsets[indices[0]]), int(self.offsets[indices[-1] + 1])
            if lo == 0 and hi == self.n_tokens:
                return self, np.arange(hi)
            sub = SequenceBatch._of_checked(_row_view(self.X, lo, hi),
                                            self.offsets[indices[0]: indices[-1] + 2] - lo,
                                            widths, slice_shapes=slice_shapes,
                                            extras=self._extras_of(indices))
            return sub, np.arange(lo, hi)
        rows = token_rows(self.offsets, indices)
        return SequenceBatch._of_checked(self.X[rows], offsets_from_lengths(lengths), widths,
                                         slice_shapes=slice_shapes,
                                         extras=self._extras_of(indices)), rows


def _check_batch_arrays(X, offsets):
    """Raise ``ValueError`` unless ``offsets`` split the rows of ``X`` and a sparse ``X``
    keeps its format (see :class:`SequenceBatch`): O(n_sequences + stored entries), a small
    part of any pass over them."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"A batch's X must be 2-D (n_tokens, n_features); got "
                         f"{type(X).__name__} of shape {shape}.")
    offsets = np.asarray(offsets)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets.dtype.kind not in "iu":
        raise ValueError("A batch's offsets must be a 1-D integer array of n_sequences + 1 "
                         f"entries; got {offsets.dtype} of shape {offsets.shape}.")
    if offsets[0] != 0 or offsets[-1] != shape[0] or np.any(np.diff(offsets) < 0):
        raise ValueError(f"A batch's offsets must grow from 0 to the {shape[0]} rows of X; "
                         f"got {offsets[:5].tolist()}...{offsets[-1:].tolist()}.")
    if sp.issparse(X):
        check_sparse_arrays(X, "A batch's X")


def _row_view(X, lo, hi):
    """Rows ``lo:hi`` of ``X`` sharing its memory: a slice of an array; for a CSR matrix, one
    over its indices and data (scipy's row slice copies them)."""
    if not sp.issparse(X) or X.format != "csr":
        return X[lo:hi]
    first, last = int(X.indptr[lo]), int(X.indptr[hi])
    return sp.csr_matrix((X.data[first:last], X.indices[first:last],
                          X.indptr[lo:hi + 1] - first), shape=(hi - lo, X.shape[1]),
                         copy=False)


class PackedSequences(Sequence):
    """Sequences of token rows packed in one matrix: the flat ``X`` and its ``lengths``.

    What :class:`~sklstruct.preprocessing.SequenceVectorizer` returns. It reads as the list
    of per-sequence matrices it stands for (``len``, ``packed[i]``, iteration; each matrix a
    view of rows of ``X``), and every estimator takes it as that list, without stacking the
    sequences again (predictions come as a list of arrays, as for a list). A slice, an
    integer array or a boolean mask selects sequences (a new ``PackedSequences``).

    Parameters
    ----------
    X : scipy.sparse matrix or ndarray of shape (n_tokens, n_features)
        The token rows of all sequences, one after the other (a sparse matrix is kept in
        CSR form).
    lengths : array-like of int of shape (n_sequences,)
        Tokens per sequence (0 for an empty one), summing to ``n_tokens``.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix or ndarray of shape (n_tokens, n_features)
    lengths : ndarray of int64 of shape (n_sequences,)
    offsets : ndarray of int64 of shape (n_sequences + 1,)
        Sequence ``i`` is rows ``offsets[i]:offsets[i + 1]`` of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct.utils import PackedSequences
    >>> packed = PackedSequences(np.arange(10.0).reshape(5, 2), [2, 3])
    >>> len(packed), packed[1].tolist()
    (2, [[4.0, 5.0], [6.0, 7.0], [8.0, 9.0]])
    """

    def __init__(self, X, lengths):
        if sp.issparse(X):
            X = X if X.format == "csr" else sp.csr_matrix(X)
        else:
            X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_tokens, n_features), got {X.ndim} "
                             "dimension(s).")
        self.X = X
        if np.size(lengths) == 0 and X.shape[0] == 0:  # (no sequence: an empty selection)
            self.lengths = np.zeros(0, dtype=np.int64)
        else:
            self.lengths = check_lengths(lengths, X.shape[0], allow_empty=True)
        self.offsets = offsets_from_lengths(self.lengths)

    def __len__(self):
        return self.lengths.shape[0]

    def __getitem__(self, key):
        if isinstance(key, numbers.Integral):
            n = len(self)
            if not -n <= key < n:
                raise IndexError(f"sequence {key} out of range for {n} sequences.")
            key = int(key) % n
            return self.X[int(self.offsets[key]):int(self.offsets[key + 1])]
        if isinstance(key, slice):
            first, stop, step = key.indices(len(self))
            if step == 1:
                stop = max(first, stop)
                lo, hi = int(self.offsets[first]), int(self.offsets[stop])
                return PackedSequences(self.X[lo:hi], self.lengths[first:stop])
            key = np.arange(first, stop, step)
        key = _positions(key, len(self))
        return PackedSequences(self.X[token_rows(self.offsets, key)], self.lengths[key])

    def __iter__(self):
        bounds = self.offsets.tolist()
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            yield self.X[lo:hi]

    def __repr__(self):
        kind = f"{self.X.format} matrix" if sp.issparse(self.X) else "array"
        return (f"PackedSequences({len(self)} sequences, {self.X.shape[0]} tokens x "
                f"{self.X.shape[1]} features, {kind})")


@dataclass(frozen=True)
class ExampleArrays:
    """Per-example blocks of rows stacked in one array: example ``i`` owns rows
    ``data[offsets[i]:offsets[i + 1]]`` (a graph's edges, or its edge features).

    Parameters
    ----------
    data : ndarray of shape (n_rows, ...)
    offsets : ndarray of shape (n_examples + 1,), dtype int64
        Non-decreasing, from 0 to ``n_rows``; an example may own no row.
    """

    data: np.ndarray
    offsets: np.ndarray

    @property
    def n_examples(self):
        return self.offsets.shape[0] - 1

    def of(self, i):
        """The rows of example ``i``.

        Parameters
        ----------
        i : int

        Returns
        -------
        rows : ndarray
        """
        i = operator.index(i)
        if not -self.n_examples <= i < self.n_examples:
            raise IndexError(f"example {i} out of range for {self.n_examples} examples.")
        i %= self.n_examples
        return self.data[self.offsets[i]:self.offsets[i + 1]]

    def take(self, indices):
        """The blocks of examples ``indices``, in that order.

        Parameters
        ----------
        indices : array-like of int

        Returns
        -------
        arrays : ExampleArrays
        """
        indices = _positions(indices, self.n_examples)
        counts = np.diff(self.offsets)[indices]
        if indices.size and np.all(np.diff(indices) == 1):
            lo, hi = int(self.offsets[indices[0]]), int(self.offsets[indices[-1] + 1])
            return ExampleArrays(self.data[lo:hi],
                                 self.offsets[indices[0]:indices[-1] + 2] - lo)
        rows = ragged_arange(self.offsets[:-1][indices], counts)
        return ExampleArrays(self.data[rows], offsets_from_lengths(counts))


def _positions(indices, n):
    """``indices`` of ``n`` items as non-negative positions: integers in ``[-n, n)`` (the
    negative ones counted from the end) or a boolean mask of length ``n``."""
    indices = np.asarray(indices)
    if indices.ndim != 1:
        raise IndexError(f"items are selected by a 1-D array of integers or a boolean mask; "
                         f"got shape {indices.shape}.")
    if indices.dtype == bool:
        if indices.shape != (n,):
            raise IndexError(f"a boolean mask selects among {n} items; got shape "
                             f"{indices.shape}.")
        return np.flatnonzero(indices)
    if indices.size and indices.dtype.kind not in "iu":
        raise IndexError(f"items are selected by integers or a boolean mask; got dtype "
                         f"{indices.dtype}.")
    indices = indices.astype(np.intp, copy=False)
    if indices.size and (indices.min() < -n or indices.max() >= n):
        raise IndexError(f"index out of range for {n} items: {indices.min()} to "
                         f"{indices.max()}.")
    return np.where(indices < 0, indices + n, indices)


def offsets_from_lengths(lengths):
    """Offsets (n + 1,) from sequence lengths (n,)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def ragged_arange(starts, counts):
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, vectorised."""
    starts = np.asarray(starts, dtype=np.intp)
    counts = np.asarray(counts, dtype=np.intp)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.intp)
    shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return np.arange(total, dtype=np.intp) + shift


def token_rows(offsets, indices):
    """Row indices of the tokens of sequences ``indices``, concatenated in that order."""
    starts = offsets[:-1][indices]
    return ragged_arange(starts, offsets[1:][indices] - starts)


def lengths_to_groups(lengths):
    """Group labels (one per token) for splitting flat data by sequence.

    Use them with :class:`~sklearn.model_selection.GroupKFold` when the data is given in the
    flat ``X`` + ``lengths`` form.

    Parameters
    ----------
    lengths : array-like of shape (n_sequences,)

    Returns
    -------
    groups : ndarray of shape (sum(lengths),)

    Examples
    --------
    >>> from sklstruct.utils import lengths_to_groups
    >>> lengths_to_groups([2, 3])
    array([0, 0, 1, 1, 1])
    """
    lengths = check_lengths(lengths, None)
    return np.repeat(np.arange(len(lengths)), lengths)


def lengths_from_sequence_ids(sequence_ids, n_tokens):
    """Sequence lengths from per-token sequence identifiers.

    The tokens of a sequence are consecutive rows sharing an identifier; a new sequence starts
    wherever the identifier changes (the form :func:`lengths_to_groups` gives, which survives
    the row indexing of cross-validation).

    Parameters
    ----------
    sequence_ids : array-like of shape (n_tokens,)
    n_tokens : int
        The number of rows of ``X``.

    Returns
    -------
    lengths : ndarray of shape (n_sequences,)

    Examples
    --------
    >>> from sklstruct.utils import lengths_from_sequence_ids
    >>> lengths_from_sequence_ids([4, 4, 7, 7, 7, 5], 6)
    array([2, 3, 1])
    """
    ids = np.asarray(sequence_ids)
    if ids.ndim != 1:
        raise ValueError(f"sequence_ids must be 1-D, got shape {ids.shape}.")
    if ids.dtype.kind in "US" and not hasattr(sequence_ids, "dtype") and not all(
            isinstance(value, (str, bytes)) for value in sequence_ids):
        raise TypeError("sequence_ids mixes strings with other values, which numpy would "
                        "turn into strings (1 and '1' would be one id): give ids of one "
                        "type.")
    if ids.shape[0] != n_tokens:
        raise ValueError(f"sequence_ids has {ids.shape[0]} entries for {n_tokens} rows of X.")
    if n_tokens == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    if np.unique(ids[starts]).shape[0] != starts.shape[0]:
        raise ValueError("sequence_ids must keep the tokens of a sequence together (an id "
                         "reappears after other ids): split with a splitter that keeps rows "
                         "in order, e.g. GroupKFold, or give every sequence its own id.")
    return np.diff(np.append(starts, n_tokens)).astype(np.int64)


def check_lengths(lengths, n_tokens, allow_empty=False):
    """Validate a ``lengths`` array (positive integers, or non-negative with
    ``allow_empty``, summing to ``n_tokens``)."""
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError("lengths must be a non-empty 1-D array of sequence lengths.")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"lengths must hold integers, got dtype {arr.dtype}.")
    arr = arr.astype(np.int64)
    if np.any(arr < 0) or (not allow_empty and np.any(arr == 0)):
        raise ValueError("Every sequence must contain at least one token (lengths must be > 0).")
    if n_tokens is not None and arr.sum() != n_tokens:
        raise ValueError(
            f"sum(lengths) = {arr.sum()} does not match the number of rows of X ({n_tokens})."
        )
    return arr


def stack_sequences(X, allow_empty=False):
    """Stack a list of per-sequence matrices; return the stacked matrix and lengths.

    With ``allow_empty`` a sequence may have no token (length 0).

    Raises clear errors for an empty list, a non-2-D element, an empty sequence or a feature
    count that differs between sequences.
    """
    if len(X) == 0:
        raise ValueError("X is an empty list: at least one sequence is required.")
    if all(map(sp.issparse, X)) and set(map(operator.attrgetter("format"), X)) == {"csr"}:
        # CSR sequences (the usual sparse input): checked and stacked without a Python step
        # per sequence
        shapes = np.array(list(map(operator.attrgetter("shape"), X)), dtype=np.int64)
        widths = np.unique(shapes[:, 1])
        if widths.shape[0] > 1:
            raise ValueError("All sequences must have the same number of features; found "
                             f"{widths.tolist()}.")
        if not allow_empty and not np.all(shapes[:, 0] > 0):
            raise ValueError(f"Sequence {int(np.argmin(shapes[:, 0]))} of X is empty; every "
                             "sequence needs a token.")
        stacked = _stack_csr(X)
        check_sparse_arrays(stacked)  # (a block's broken arrays break the stacked ones)
        return stacked, shapes[:, 0]
    any_sparse = False
    widths = set()
    blocks = []
    for i, x in enumerate(X):
        if sp.issparse(x):
            any_sparse = True
            check_sparse_arrays(x, f"Sequence {i} of X")
            block = x
        else:
            try:
                block = np.asarray(x)
            except ValueError as exc:
                raise ValueError(
                    f"Sequence {i} of X is not a rectangular array (a sequence is a 2-D "
                    "(n_tokens, n_features) matrix; a graph a tuple (node_features, edges[, "
                    "edge_features]), or a list with a GraphStructure).") from exc
            if block.dtype.kind not in "biuf" or block.dtype.kind == "O":
                # let check_array convert object arrays of numbers or raise a clear error later
                pass
        if block.ndim != 2:
            raise ValueError(
                f"Each sequence of X must be a 2-D array (n_tokens, n_features); "
                f"sequence {i} has {block.ndim} dimension(s)."
            )
        if block.shape[0] == 0 and not allow_empty:
            raise ValueError(f"Sequence {i} of X is empty; every sequence needs a token.")
        widths.add(block.shape[1])
        blocks.append(block)
    if len(widths) > 1:
        raise ValueError(
            f"All sequences must have the same number of features; found {sorted(widths)}."
        )
    lengths = np.array([b.shape[0] for b in blocks], dtype=np.int64)
    if any_sparse:
        stacked = _stack_csr([b if sp.issparse(b) and b.format == "csr" else sp.csr_matrix(b)
                              for b in blocks])
    else:
        stacked = np.concatenate([np.asarray(b) for b in blocks], axis=0) if len(blocks) > 1 \
            else blocks[0]
    return stacked, lengths


# a dense token matrix with at most this fraction of non-zeros is handled as CSR
DENSE_TO_CSR_DENSITY = 0.1


def check_sparse_arrays(X, name="X"):
    """Raise ``ValueError`` when the arrays of a scipy.sparse matrix break its format.

    scipy checks a CSR, CSC or BSR matrix's index pointers and column (row) indices only when
    the matrix is built; arrays changed afterwards (``X.indices[0] = 10**6``) reach its own
    conversions and products unchecked, and so the compiled code, which reads the weights at
    those indices. Checked: the pointers grow from 0 to at most the stored entries, as many
    values are stored as the pointers use, and the indices (COO: rows and columns, of one
    length with the values) lie in the matrix's shape. O(stored entries); other formats
    pass.
    """
    fmt = getattr(X, "format", None)
    if fmt in ("csr", "csc", "bsr"):
        n_major, n_minor = X.shape if fmt != "csc" else X.shape[::-1]
        if fmt == "bsr":
            n_major //= X.blocksize[0]
            n_minor //= X.blocksize[1]
        indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
        if (indptr.ndim != 1 or indptr.shape[0] != n_major + 1 or indptr[0] != 0
                or indptr[-1] > indices.shape[0] or np.any(np.diff(indptr) < 0)):
            raise ValueError(f"{name} is a {fmt.upper()} matrix whose indptr does not grow from "
                             "0 to at most its stored entries (its arrays were changed after "
                             "it was built?).")
        if np.shape(X.data)[0] < indptr[-1]:
            raise ValueError(f"{name} is a {fmt.upper()} matrix with {np.shape(X.data)[0]} "
                             f"stored values for the {int(indptr[-1])} entries of its indptr "
                             "(its arrays were changed after it was built?).")
        used = indices[:indptr[-1]]
        if used.shape[0] and (used.min() < 0 or used.max() >= n_minor):
            raise ValueError(f"{name} is a {fmt.upper()} matrix with indices outside "
                             f"[0, {n_minor}) (its arrays were changed after it was built?): "
                             f"min {int(used.min())}, max {int(used.max())}.")
    elif fmt == "coo" and (X.row.shape[0] or X.col.shape[0] or np.shape(X.data)[0]):
        if not X.row.shape[0] == X.col.shape[0] == np.shape(X.data)[0]:
            raise ValueError(f"{name} is a COO matrix whose rows, columns and values differ "
                             "in length (its arrays were changed after it was built?).")
        for axis, index in enumerate((X.row, X.col)):
            if index.min() < 0 or index.max() >= X.shape[axis]:
                raise ValueError(f"{name} is a COO matrix with {('row', 'column')[axis]} "
                                 f"indices outside [0, {X.shape[axis]}) (its arrays were "
                                 "changed after it was built?).")


def _stack_csr(blocks):
    """Stack CSR matrices of one width row-wise from their arrays: one concatenation each
    of their pointers, indices and values, the pointers shifted in one vectorised step
    (``scipy.sparse.vstack`` checks every block)."""
    get = operator.attrgetter
    if len(blocks) == 1:
        return blocks[0] if type(blocks[0]) is sp.csr_matrix else sp.csr_matrix(blocks[0])
    indptrs = list(map(get("indptr"), blocks))
    rows = np.fromiter(map(len, indptrs), dtype=np.int64, count=len(blocks)) - 1
    pointers = np.concatenate(indptrs).astype(np.int64)
    ends = np.cumsum(rows + 1)  # (one past each block's last pointer)
    nnz = pointers[ends - 1]
    pointers += np.repeat(np.cumsum(nnz) - nnz, rows + 1)
    keep = np.ones(pointers.shape[0], dtype=bool)
    keep[ends[:-1]] = False  # the leading 0 of every block but the first
    indptr = pointers[keep]
    indices, data = (np.concatenate(list(map(get(name), blocks))) for name in ("indices",
                                                                               "data"))
    if indices.shape[0] != indptr[-1]:  # (blocks whose arrays hold more than their entries)
        indices = np.concatenate([b.indices[:b.indptr[-1]] for b in blocks])
        data = np.concatenate([b.data[:b.indptr[-1]] for b in blocks])
    return sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1,
                                                         blocks[0].shape[1]))


def check_token_matrix(X, validated=False):
    """Validate a stacked token matrix: finite, numeric, canonical CSR (sorted indices, no
    duplicate entries, no stored zeros: equal matrices then take the same arithmetic paths;
    a copy when the input is not) or C-ordered float64 (the callers have
    checked its number of rows); ``validated``: ``X`` has passed ``check_array`` with these
    settings already (its values are not scanned again).

    A dense matrix with at most ``DENSE_TO_CSR_DENSITY`` non-zeros is returned in CSR form
    (the same values; products with it then cost its non-zeros, not
    ``n_tokens * n_features``).
    """
    if sp.issparse(X):
        check_sparse_arrays(X)
    if not validated:
        X = check_array(
            X, accept_sparse="csr", dtype=np.float64, order="C", ensure_all_finite=True,
            input_name="X", ensure_min_samples=0,
        )
    if sp.issparse(X):
        # sorted, summed duplicates, no stored zeros; the user's matrix stays as it is
        if not X.has_canonical_format or not np.all(X.data):
            X = X.copy()
            X.sum_duplicates()
            X.eliminate_zeros()
    elif X.size and np.count_nonzero(X) <= DENSE_TO_CSR_DENSITY * X.size:
        X = sp.csr_matrix(X)
    return X


def split_flat(values, offsets):
    """Split a flat per-token array into a list of per-sequence arrays (views)."""
    bounds = offsets.tolist()
    return [values[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]


def image_rows(X, y=None):
    """Image input as pixel rows: ``X`` a list of (n_rows, n_cols, n_features) arrays.

    Returns the per-image (n_rows * n_cols, n_features) matrices, the widths ``n_cols`` and,
    when ``y`` is given, the per-image label masks (n_rows, n_cols) flattened row by row.
    """
    images = [np.asarray(x) for x in X]
    for i, image in enumerate(images):
        if image.ndim != 3:
            raise ValueError(f"Image {i} must be 3-D (n_rows, n_cols, n_features), got shape "
                             f"{image.shape}.")
        if image.shape[0] == 0 or image.shape[1] == 0:
            raise ValueError(f"Image {i} has shape {image.shape}: an image needs at least one "
                             "pixel.")
    widths = np.array([image.shape[1] for image in images], dtype=np.int64)
    rows = [image.reshape(-1, image.shape[2]) for image in images]
    if y is None:
        return rows, widths, None
    if isinstance(y, np.ndarray) and y.dtype == object and y.ndim == 1:
        y = list(y)  # (a numpy object array of masks, as of images)
    if not isinstance(y, (list, tuple)) or len(y) != len(images):
        raise ValueError("With X given as a list of images, y must be a list of as many 2-D "
                         "label masks.")
    masks = []
    for i, (image, mask) in enumerate(zip(images, y)):
        mask = np.asarray(mask)
        if mask.shape != image.shape[:2]:
            raise ValueError(f"Image {i} has shape {image.shape[:2]} but its labels have shape "
                             f"{mask.shape} (a list of 3-D arrays is read as images, "
                             "(n_rows, n_cols, n_features) each, with 2-D label masks; a "
                             "sequence is a 2-D (n_tokens, n_features) matrix; a graph a "
                             "tuple (node_features, edges[, edge_features])).")
        masks.append(mask.ravel())
    return rows, widths, masks


def volume_rows(X, y=None):
    """Volume input as voxel rows: ``X`` a list of (n_slices, n_rows, n_cols, n_features)
    arrays.

    Returns the per-volume (n_slices * n_rows * n_cols, n_features) matrices (voxels slice by
    slice, row by row: C order), the slice shapes ``(n_rows, n_cols)`` (n_volumes, 2) and,
    when ``y`` is given, the per-volume label masks (n_slices, n_rows, n_cols) flattened in
    the same order.
    """
    volumes = [np.asarray(x) for x in X]
    for i, volume in enumerate(volumes):
        if volume.ndim != 4:
            raise ValueError(f"Volume {i} must be 4-D (n_slices, n_rows, n_cols, n_features), "
                             f"got shape {volume.shape}; give every volume of a list in "
                             "that form.")
        if 0 in volume.shape[:3]:
            raise ValueError(f"Volume {i} has shape {volume.shape}: a volume needs at least "
                             "one voxel.")
    slice_shapes = np.array([volume.shape[1:3] for volume in volumes],
                            dtype=np.int64).reshape(-1, 2)
    rows = [volume.reshape(-1, volume.shape[3]) for volume in volumes]
    if y is None:
        return rows, slice_shapes, None
    if isinstance(y, np.ndarray) and y.dtype == object and y.ndim == 1:
        y = list(y)  # (a numpy object array of masks, as of volumes)
    if not isinstance(y, (list, tuple)) or len(y) != len(volumes):
        raise ValueError("With X given as a list of volumes, y must be a list of as many 3-D "
                         "label masks.")
    masks = []
    for i, (volume, mask) in enumerate(zip(volumes, y)):
        mask = np.asarray(mask)
        if mask.shape != volume.shape[:3]:
            raise ValueError(f"Volume {i} has shape {volume.shape[:3]} but its labels have "
                             f"shape {mask.shape}.")
        masks.append(mask.ravel())
    return rows, slice_shapes, masks


def _kind_of_type(kind):
    """The kind of a label's Python type: "str", "bool", "number" or the type's name."""
    if issubclass(kind, (str, np.str_, bytes, np.bytes_)):
        return "str"
    if issubclass(kind, (bool, np.bool_)):
        return "bool"
    if issubclass(kind, numbers.Number):
        return "number"
    return kind.__name__


def label_kinds(values):
    """The kinds of labels in ``values`` (an array or a list): a set of "str", "bool",
    "number" or other type names, read from the dtype where it has one kind and from the
    values otherwise (object arrays, lists, whose values numpy would turn into strings)."""
    array = values if isinstance(values, np.ndarray) else None
    if array is not None and array.dtype != object:
        return {{"U": "str", "S": "str", "b": "bool"}.get(array.dtype.kind, "number")}
    return {_kind_of_type(kind) for kind in set(map(type, np.ravel(values).tolist()
                                                    if array is not None else values))}


def check_label_kinds(kinds):
    """Raise a ``TypeError`` when labels mix kinds (str with numbers, bools, None...)."""
    if len(kinds) > 1:
        raise TypeError(f"the labels must be mutually comparable values of one kind; y "
                        f"mixes {', '.join(sorted(kinds))}.")


def flatten_labels(y, lengths):
    """Concatenate per-sequence label arrays, checking their lengths against ``lengths``."""
    if isinstance(y, np.ndarray) and y.dtype == object and y.ndim == 1:
        y = list(y)  # a numpy object array of per-sequence label arrays
    if not isinstance(y, (list, tuple)):
        raise TypeError(
            "With X given as a list of sequences, y must be a list of 1-D label arrays."
        )
    if len(y) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but y has {len(y)} label sequences."
        )
    flat = _flat_labels(y, lengths)
    if flat is not None:
        return flat
    parts = []
    kinds_seen = set()
    for i, (yi, n) in enumerate(zip(y, lengths)):
        arr = np.asarray(yi)
        if arr.ndim != 1:
            image = (" For an image give X as a (n_rows, n_cols, n_features) array per image, or "
                     "ravel the mask row by row with structure=GridStructure(width=n_cols)."
                     if arr.ndim == 2 and arr.size == n else
                     " For a volume give X as a (n_slices, n_rows, n_cols, n_features) array "
                     "per volume, or ravel the mask (C order) with structure="
                     "Grid3DStructure(slice_shape=(n_rows, n_cols))."
                     if arr.ndim == 3 and arr.size == n else "")
            raise ValueError(f"Labels of sequence {i} must be 1-D, got shape {arr.shape}."
                             f"{image}")
        if arr.shape[0] != n:
            raise ValueError(
                f"Sequence {i} has {n} tokens but {arr.shape[0]} labels."
            )
        parts.append(arr)
        kinds_seen.update(label_kinds(yi if not isinstance(yi, np.ndarray) else arr))
    check_label_kinds(kinds_seen)
    kinds = {p.dtype.kind for p in parts}
    if kinds == {"i", "u"}:
        parts = _common_integer_labels(parts)
    elif len(kinds) > 1 and not kinds <= {"U", "S"}:
        parts = [p.astype(object) for p in parts]
    return np.concatenate(parts)


def comparable_labels(classes, labels):
    """``classes`` and ``labels`` in one dtype for ``np.searchsorted`` and ``==``: signed
    beside unsigned integers in one integer dtype (numpy would compare them as float64,
    where labels above 2**53 merge); other pairs unchanged. Labels that no integer dtype
    holds beside the classes cannot be among them: they come back as float NaN, which
    matches no class."""
    classes, labels = np.asarray(classes), np.asarray(labels)
    if {classes.dtype.kind, labels.dtype.kind} != {"i", "u"}:
        return classes, labels
    try:
        return tuple(_common_integer_labels([classes, labels]))
    except ValueError:
        return classes, np.full(labels.shape, np.nan)


def _common_integer_labels(parts):
    """Signed and unsigned integer label arrays in one integer dtype that holds all their
    values (numpy would promote int64 and uint64 to float64, where large labels merge)."""
    signed = [p for p in parts if p.dtype.kind == "i" and p.size]
    unsigned = [p for p in parts if p.dtype.kind == "u" and p.size]
    if all(int(p.max()) <= np.iinfo(np.int64).max for p in unsigned):
        return [p.astype(np.int64) for p in parts]
    if all(int(p.min()) >= 0 for p in signed):
        return [p.astype(np.uint64) for p in parts]
    raise ValueError("The labels mix negative integers with unsigned ones above 2**63 - 1, "
                     "which no integer dtype holds together; give them in one dtype, or as "
                     "str.")


def _flat_labels(y, lengths):
    """The labels of every sequence in one array, without a Python step per label or per
    sequence (beyond C-level ``map``): for sequences that are all lists or tuples of
    labels of one kind, or all 1-D arrays of labels of one kind, whose lengths match
    ``lengths``; ``None`` otherwise (:func:`flatten_labels` then checks each sequence and
    names the culprit)."""
    types = set(map(type, y))
    if not types or not (types <= {list, tuple} or types == {np.ndarray}):
        return None
    try:
        counts = np.fromiter(map(len, y), dtype=np.int64, count=len(y))
    except TypeError:  # (a 0-d array)
        return None
    if not np.array_equal(counts, lengths):
        return None
    if types == {np.ndarray}:
        dtypes = set(map(operator.attrgetter("dtype"), y))
        kinds = {{"U": "str", "S": "str", "b": "bool"}.get(dtype.kind, "number")
                 for dtype in dtypes}
        if object in dtypes or len(kinds) > 1 or len(
                set(map(operator.attrgetter("ndim"), y))) > 1 or \
                {dtype.kind for dtype in dtypes} >= {"i", "u"}:
            return None
        flat = np.concatenate(y) if y else np.zeros(0)
        return flat if flat.ndim == 1 else None
    values = list(itertools.chain.from_iterable(y))
    kinds = {_kind_of_type(kind) for kind in set(map(type, values))}
    if not kinds <= {"str", "number", "bool"}:
        return None
    check_label_kinds(kinds)
    flat = np.asarray(values)
    return flat if flat.ndim == 1 and flat.dtype != object else None
