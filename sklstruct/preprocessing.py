"""Feature extraction for sequences of tokens.

:class:`SequenceVectorizer` turns sequences of per-token feature dicts into
one sparse matrix and the sequences' lengths (:class:`HashingSequenceVectorizer` turns them
into one matrix per sequence without a vocabulary, by feature hashing), and
:func:`window_features` builds the usual chunking feature dicts of a sentence.
"""

import itertools
import math
import numbers
import operator
from array import array
from collections.abc import Iterable, Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction import DictVectorizer, FeatureHasher
from sklearn.utils.validation import check_is_fitted

from .utils._sequences import PackedSequences

__all__ = ["HashingSequenceVectorizer", "SequenceVectorizer", "window_features"]


def _flatten_sequences(X, allow_empty=False):
    """Validate a list of sequences of dicts; return the tokens and lengths (sequences
    without a token only with ``allow_empty``: prediction)."""
    if not isinstance(X, (list, tuple)):
        raise TypeError(
            "X must be a list of sequences, each a list of dicts (one per "
            f"token); got {type(X).__name__}."
        )
    if len(X) == 0:
        raise ValueError("X must contain at least one sequence.")
    for i, seq in enumerate(X):
        if not isinstance(seq, (list, tuple)):
            raise TypeError(
                f"X[{i}] must be a list of dicts (one per token); got "
                f"{type(seq).__name__}."
            )
        if len(seq) == 0 and not allow_empty:
            raise ValueError(f"X[{i}] is an empty sequence; sequences need a token to be "
                             "fitted on (transform accepts them).")
    lengths = np.fromiter((len(seq) for seq in X), dtype=np.intp, count=len(X))
    tokens = list(itertools.chain.from_iterable(X))
    if not all(isinstance(token, Mapping) for token in tokens):
        bad = next(token for token in tokens if not isinstance(token, Mapping))
        raise TypeError(
            f"Every token must be a dict of features; got {type(bad).__name__}."
        )
    for index, token in enumerate(tokens):
        if any(value is None for value in token.values()):
            sequence = int(np.searchsorted(np.cumsum(lengths), index, side="right"))
            name = next(key for key, value in token.items() if value is None)
            raise ValueError(
                f"Feature {name!r} of token {index - int(lengths[:sequence].sum())} of "
                f"sequence {sequence} is None; leave the feature out of the token's dict "
                "(absent) or give it a string, number or boolean value."
            )
    return tokens, lengths


def _split_rows(matrix, lengths):
    """Split the rows of a CSR matrix into consecutive blocks of ``lengths``."""
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    n_features = matrix.shape[1]
    csr = type(matrix)
    blocks = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        first, last = indptr[start], indptr[stop]
        blocks.append(
            csr(
                (
                    data[first:last],
                    indices[first:last],
                    indptr[start : stop + 1] - first,
                ),
                shape=(stop - start, n_features),
            )
        )
    return blocks


class SequenceVectorizer(TransformerMixin, BaseEstimator,
                         auto_wrap_output_keys=None):
    """Turn sequences of per-token feature dicts into one sparse matrix and lengths.

    Each sequence is a list of dicts, one per token, mapping feature names
    to values, as :class:`~sklearn.feature_extraction.DictVectorizer`
    expects: a string value ``v`` of feature ``k`` becomes the binary feature
    ``"k=v"``, an iterable of strings one such feature per string, a number is kept as the
    value of feature ``k`` and a boolean becomes 1 or 0; a value of ``None`` is an error
    (leave the feature out instead). The columns are those ``DictVectorizer`` gives the
    tokens (sorted feature names with ``sort``), and so are the values.

    The output is a :class:`~sklstruct.utils.PackedSequences`: the rows of all tokens in
    one CSR matrix (int32 indices while they fit) and the sequences' lengths. It reads as
    the list of per-sequence matrices (``len``, indexing, iteration), and the estimators
    take it as such without stacking the sequences again, so that a pipeline holds the
    data once. The vectoriser reads the dicts in one pass, without building the feature
    name of every token's feature: it keeps, per feature key, the column of each string
    value (the feature names are formed once, at the end of ``fit``).

    Parameters
    ----------
    dtype : dtype, default=np.float64
        Type of the feature values.
    separator : str, default="="
        Separator between feature name and string value in the one-hot
        feature names.
    sort : bool, default=True
        Whether ``feature_names_`` and ``vocabulary_`` are sorted.

    Attributes
    ----------
    n_features_out_ : int
        Number of columns.
    vocabulary_ : dict
        Mapping from feature name to column index (formed when read).
    feature_names_ : list of str
        Feature name of each column (formed when read).
    dict_vectorizer_ : :class:`~sklearn.feature_extraction.DictVectorizer`
        A ``DictVectorizer`` with this vocabulary (formed when read).

    See Also
    --------
    window_features : Chunking features of a sentence, one dict per token.

    Examples
    --------
    >>> from sklstruct.preprocessing import SequenceVectorizer
    >>> X = [[{"word": "the"}, {"word": "cat"}], [{"word": "sat", "len": 3}]]
    >>> vec = SequenceVectorizer()
    >>> Xt = vec.fit_transform(X)
    >>> [m.shape for m in Xt], Xt.lengths.tolist()
    ([(2, 4), (1, 4)], [2, 1])
    >>> vec.get_feature_names_out().tolist()
    ['len', 'word=cat', 'word=sat', 'word=the']
    """

    def __init__(self, *, dtype=np.float64, separator="=", sort=True):
        self.dtype = dtype
        self.separator = separator
        self.sort = sort

    def fit(self, X, y=None):
        """Learn the feature names of all tokens.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted vectorizer.
        """
        self.fit_transform(X)
        return self

    def fit_transform(self, X, y=None):
        """Learn the feature names and return the sequences' rows in one matrix.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.
        y : None
            Ignored.

        Returns
        -------
        Xt : :class:`~sklstruct.utils.PackedSequences`
            One CSR matrix of shape (n_tokens, n_features) and the sequences' lengths; it
            reads as a list of one matrix of shape (n_tokens_i, n_features) per sequence.
        """
        if not isinstance(self.sort, (bool, np.bool_)):
            raise ValueError(f"sort must be a bool; got {self.sort!r}.")
        string_ids, number_ids = {}, {}
        indices, indptr, values, lengths, n_ids = _encode_tokens(
            X, string_ids, number_ids, fitting=True)
        columns, n_columns, by_value = _columns_of_ids(string_ids, number_ids, n_ids,
                                                       self.separator, self.sort)
        if not np.array_equal(columns, np.arange(n_ids)):  # ids to columns, in place
            indices = np.frombuffer(indices, dtype=np.int32)
            for lo in range(0, indices.shape[0], _CHUNK):
                indices[lo:lo + _CHUNK] = columns[indices[lo:lo + _CHUNK]]
        if by_value is not None:  # columns in sorted runs: the sorted values are enough
            self._string_columns, self._number_columns = by_value
            self._string_ids = self._number_ids = self._columns = None
        else:
            self._string_ids, self._number_ids = string_ids, number_ids
            self._columns = columns
            self._string_columns = self._number_columns = None
        del string_ids, number_ids
        self._feature_names = self._hashes = None
        self.n_features_out_ = n_columns
        return self._packed(indices, indptr, values, lengths, n_columns < n_ids)

    def transform(self, X):
        """Return the sequences' rows in one matrix; unknown features are ignored.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts (a sequence may be empty).

        Returns
        -------
        Xt : :class:`~sklstruct.utils.PackedSequences`
            One CSR matrix of shape (n_tokens, n_features) and the sequences' lengths; it
            reads as a list of one matrix of shape (n_tokens_i, n_features) per sequence.
        """
        check_is_fitted(self)
        if self._string_columns is not None:
            if getattr(self, "_hashes", None) is None:
                self._hashes = _hash_tables(self._string_columns)
            indices, indptr, values, lengths = _encode_known(
                X, self._string_columns, self._number_columns, self._hashes)
            return self._packed(indices, indptr, values, lengths, False)
        indices, indptr, values, lengths, _ = _encode_tokens(
            X, self._string_ids, self._number_ids, fitting=False)
        indices = np.frombuffer(indices, dtype=np.int32)
        if indices.size:
            indices = self._columns[indices]
        return self._packed(indices, indptr, values, lengths,
                            self.n_features_out_ < self._columns.shape[0])

    def _packed(self, indices, indptr, values, lengths, shared_columns):
        """The CSR matrix of the encoded tokens' columns (rows sorted; entries of one
        column summed with ``shared_columns``)."""
        indices = np.frombuffer(indices, dtype=np.int32) if len(indices) else \
            np.zeros(0, dtype=np.int32)
        index_dtype = np.int32 if indices.shape[0] < np.iinfo(np.int32).max else np.int64
        indptr = np.frombuffer(indptr, dtype=np.int64).astype(index_dtype)
        data = np.ones(indices.shape[0], dtype=self.dtype) if values is None else \
            np.frombuffer(values, dtype=np.float64).astype(self.dtype)
        matrix = sp.csr_matrix((data, indices, indptr),
                               shape=(indptr.shape[0] - 1, self.n_features_out_))
        matrix.sort_indices()
        if shared_columns:
            matrix.sum_duplicates()
        return PackedSequences(matrix, np.frombuffer(lengths, dtype=np.int64))

    @property
    def feature_names_(self):
        """Feature name of each column, a list (formed at the first read)."""
        check_is_fitted(self)
        if self._feature_names is not None:
            return self._feature_names
        names = [None] * self.n_features_out_
        if self._string_columns is not None:
            for key, (base, known) in self._string_columns.items():
                prefix = f"{key}{self.separator}"
                names[base:base + len(known)] = [prefix + value for value in known]
            for key, column in self._number_columns.items():
                names[column] = key
        else:
            by_id = _feature_names(self._string_ids, self._number_ids,
                                   self._columns.shape[0], self.separator)
            for name, column in zip(by_id, self._columns.tolist()):
                names[column] = name  # (ids of one column have the same name)
        self._feature_names = names
        return names

    @property
    def vocabulary_(self):
        """Mapping from feature name to column index, a dict."""
        return {name: column for column, name in enumerate(self.feature_names_)}

    @property
    def dict_vectorizer_(self):
        """A fitted :class:`~sklearn.feature_extraction.DictVectorizer` with this
        vocabulary (for code written against it)."""
        vectorizer = DictVectorizer(dtype=self.dtype, separator=self.separator, sparse=True,
                                    sort=self.sort)
        vectorizer.feature_names_ = list(self.feature_names_)
        vectorizer.vocabulary_ = self.vocabulary_
        return vectorizer

    def get_feature_names_out(self, input_features=None):
        """Get the output feature names.

        Parameters
        ----------
        input_features : None
            Ignored.

        Returns
        -------
        feature_names_out : ndarray of str objects
            Feature name of each column.
        """
        check_is_fitted(self)
        return np.asarray([name if isinstance(name, str) else str(name)
                           for name in self.feature_names_], dtype=object)

    def __getstate__(self):
        # the hash tables hold this process's string hashes: another process makes its own;
        # the feature names, once read, are a cache formed again from the columns (they made
        # a pickle 4.7 times larger on 2,000 CoNLL-2000 sentences)
        state = dict(super().__getstate__())
        state.pop("_hashes", None)
        if "_feature_names" in state:
            state["_feature_names"] = None
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.dict = True
        tags.input_tags.two_d_array = False
        return tags


# ids mapped to columns per chunk of this many entries
_CHUNK = 2**20
# features of the dicts looked up in a fitted vocabulary at a time (transform)
_LOOKUP_BLOCK = 2**16


def _check_sequences(X):
    if not isinstance(X, (list, tuple)):
        raise TypeError("X must be a list of sequences, each a list of dicts (one per "
                        f"token); got {type(X).__name__}.")
    if len(X) == 0:
        raise ValueError("X must contain at least one sequence.")


def _check_sequence(i, sequence, fitting):
    if not isinstance(sequence, (list, tuple)):
        raise TypeError(f"X[{i}] must be a list of dicts (one per token); got "
                        f"{type(sequence).__name__}.")
    if fitting and not sequence:
        raise ValueError(f"X[{i}] is an empty sequence; sequences need a token to be "
                         "fitted on (transform accepts them).")


def _check_token(token):
    if not isinstance(token, Mapping):
        hint = " (a token as a list of feature names, as crfsuite also takes: give " \
            "{name: 1.0 for name in token})" if isinstance(token, (list, tuple)) else ""
        raise TypeError(f"Every token must be a dict of features; got "
                        f"{type(token).__name__}{hint}.")


def _check_finite(value, key, i, t):
    if not math.isfinite(value):
        raise ValueError(f"Feature {key!r} of token {t} of sequence {i} is {value}; feature "
                         "values must be finite.")


def _non_string_value(key, value, i, t):
    """A feature value other than a string: ``(True, float)`` for a number or a boolean,
    ``(False, strings)`` for an iterable of strings (each a one-hot feature); an error
    for ``None`` and other values."""
    if isinstance(value, (numbers.Number, np.number, np.bool_)):
        return True, float(value)  # (checked finite once known: transform ignores others)
    if value is None:
        raise ValueError(
            f"Feature {key!r} of token {t} of sequence {i} is None; leave the feature out of "
            "the token's dict (absent) or give it a string, number or boolean value.")
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"Feature {key!r} has a bytes value; decode it to a str (a string "
                        "value is one-hot encoded).")
    if isinstance(value, Mapping):
        raise TypeError(f"Feature {key!r} has a dict value; flatten it into features of "
                        f"their own (e.g. '{key}:name' keys, as crfsuite names a nested "
                        "dict's features).")
    if isinstance(value, Iterable):
        items = list(value)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"Feature {key!r} holds an iterable with a value of type "
                                f"{type(item).__name__}; only strings can be one-hot "
                                "encoded.")
        return False, items
    raise TypeError(f"Feature {key!r} has a value of type {type(value).__name__}; give a "
                    "string, a number, a boolean or an iterable of strings.")


def _encode_tokens(X, string_ids, number_ids, fitting):
    """One pass over sequences of token dicts: the feature ids of every token in CSR form.

    A string value ``v`` of key ``k`` (or each string of an iterable value) is the id
    ``string_ids[k][v]``, a number or boolean the id ``number_ids[k]`` with the value; with
    ``fitting`` unseen features get new ids (in the order they come), else they are left
    out. No name is formed per token and nothing else is kept per feature: the ids
    (int32), the row pointers (int64), the values (float64) only once a value other than 1
    is met (``None`` while all are 1), and the lengths. Sequences must not be empty with
    ``fitting``.

    Returns
    -------
    indices, indptr, values, lengths : array.array
    n_ids : int
    """
    _check_sequences(X)
    indices, indptr, lengths = array("i"), array("q", [0]), array("q")
    values = None
    n_ids = sum(map(len, string_ids.values())) + len(number_ids)
    for i, sequence in enumerate(X):
        _check_sequence(i, sequence, fitting)
        lengths.append(len(sequence))
        for t, token in enumerate(sequence):
            _check_token(token)
            for key, value in token.items():
                if isinstance(value, str):
                    table = string_ids.get(key)
                    if table is None:
                        if not fitting:
                            continue
                        table = string_ids[key] = {}
                    index = table.get(value)
                    if index is None:
                        if not fitting:
                            continue
                        index = table[value] = n_ids
                        n_ids += 1
                    indices.append(index)
                    if values is not None:
                        values.append(1.0)
                    continue
                is_number, value = _non_string_value(key, value, i, t)
                if is_number:
                    index = number_ids.get(key)
                    if index is None:
                        if not fitting:
                            continue
                        index = number_ids[key] = n_ids
                        n_ids += 1
                    _check_finite(value, key, i, t)
                    if value == 0.0:  # (a column of its own, but no stored zero)
                        continue
                    if values is None and value != 1.0:
                        values = array("d", [1.0]) * len(indices)
                    indices.append(index)
                    if values is not None:
                        values.append(value)
                    continue
                table = string_ids.get(key)
                if table is None and fitting and value:
                    table = string_ids[key] = {}
                for item in value:
                    index = None if table is None else table.get(item)
                    if index is None:
                        if not fitting:
                            continue
                        index = table[item] = n_ids
                        n_ids += 1
                    indices.append(index)
                    if values is not None:
                        values.append(1.0)
            indptr.append(len(indices))
    if len(indices) >= np.iinfo(np.int32).max:
        raise ValueError("more than 2**31 - 1 stored features: vectorise the data in parts.")
    return indices, indptr, values, lengths, n_ids


def _hash_tables(string_columns):
    """Per key of a vocabulary by sorted values: the sorted ``hash`` of its values (int64)
    and their positions in the sorted values. Python salts the hashes of strings per
    process, so the tables are made in the process that uses them."""
    tables = {}
    for key, (_, known) in string_columns.items():
        hashes = np.fromiter(map(hash, known), dtype=np.int64, count=len(known))
        order = np.argsort(hashes, kind="stable")
        tables[key] = (hashes[order], order.astype(np.int32))
    return tables


def _encode_known(X, string_columns, number_columns, hash_tables):
    """:func:`_encode_tokens` against a fitted vocabulary kept as sorted values: the column
    of string value ``v`` of key ``k`` is ``base + position of v`` in ``string_columns[k] =
    (base, sorted values)``; a number's is ``number_columns[k]``.

    The dicts are read a block of sequences at a time (about ``_LOOKUP_BLOCK`` features), each
    string feature recorded as its key, ``hash(v)`` and ``v``; then, a key at a time, the
    hashes are looked up in the key's sorted hashes (``hash_tables``, :func:`_hash_tables`)
    and every match is confirmed by comparing the values (so that a hash shared by another
    string cannot give a wrong column); unknown features are left out.

    Returns
    -------
    indices, indptr, values, lengths : array.array
    """
    _check_sequences(X)
    slot_of = {key: k for k, key in enumerate(string_columns)}
    keys = list(string_columns)
    out = {"indices": array("i"), "indptr": array("q", [0]), "values": None}
    lengths = array("q")
    # the block's features: key slot (-1: a number, its column in codes), the value's hash
    # or the column, the value, and the feature's value once one is not 1; row pointers
    slots, codes, strings, values, indptr = array("i"), array("q"), [], None, array("q", [0])
    for i, sequence in enumerate(X):
        _check_sequence(i, sequence, False)
        lengths.append(len(sequence))
        for t, token in enumerate(sequence):
            _check_token(token)
            for key, value in token.items():
                if isinstance(value, str):
                    slot = slot_of.get(key)
                    if slot is not None:
                        slots.append(slot)
                        codes.append(hash(value))
                        strings.append(value)
                        if values is not None:
                            values.append(1.0)
                    continue
                is_number, value = _non_string_value(key, value, i, t)
                if is_number:
                    column = number_columns.get(key)
                    if column is None:
                        continue
                    _check_finite(value, key, i, t)
                    if value == 0.0:  # (no stored zero)
                        continue
                    if values is None and value != 1.0:
                        values = array("d", [1.0]) * len(slots)
                    slots.append(-1)
                    codes.append(column)
                    strings.append(None)
                    if values is not None:
                        values.append(value)
                    continue
                slot = slot_of.get(key)
                if slot is None:
                    continue
                for item in value:
                    slots.append(slot)
                    codes.append(hash(item))
                    strings.append(item)
                    if values is not None:
                        values.append(1.0)
            indptr.append(len(slots))
        if len(slots) >= _LOOKUP_BLOCK:
            _look_up(out, slots, codes, strings, values, indptr, keys, string_columns,
                     hash_tables)
            slots, codes, strings, values = array("i"), array("q"), [], None
            indptr = array("q", [0])
    _look_up(out, slots, codes, strings, values, indptr, keys, string_columns, hash_tables)
    return out["indices"], out["indptr"], out["values"], lengths


def _look_up(out, slots, codes, strings, values, indptr, keys, string_columns,
             hash_tables):
    """The columns of a block of recorded features (:func:`_encode_known`), appended to
    ``out``'s indices, row pointers and values."""
    n = len(slots)
    slots = np.frombuffer(slots, dtype=np.int32) if n else np.zeros(0, dtype=np.int32)
    codes = np.frombuffer(codes, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    columns = np.where(slots < 0, codes, -1)
    order = np.argsort(slots, kind="stable")
    bounds = np.searchsorted(slots[order], np.arange(len(keys) + 1))
    for slot, key in enumerate(keys):
        at = order[bounds[slot]:bounds[slot + 1]]
        if not at.size:
            continue
        hashes, positions = hash_tables[key]
        base, known = string_columns[key]
        found = positions[np.minimum(np.searchsorted(hashes, codes[at]),
                                     hashes.shape[0] - 1)]
        # a candidate is the value itself only when the strings are equal
        match = np.fromiter(map(operator.eq, map(known.__getitem__, found.tolist()),
                                map(strings.__getitem__, at.tolist())),
                            dtype=bool, count=at.shape[0])
        columns[at[match]] = base + found[match]
    kept = columns >= 0
    # the kept features before every row's first: the rows' pointers without the others
    before = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=before[1:])
    start = len(out["indices"])
    out["indptr"].extend((start + before[np.frombuffer(indptr, dtype=np.int64)[1:]]).tolist())
    if values is not None and out["values"] is None:
        out["values"] = array("d", [1.0]) * start
    out["indices"].frombytes(columns[kept].astype(np.int32).tobytes())
    if out["values"] is not None:
        out["values"].frombytes((np.ones(int(kept.sum())) if values is None else
                                 np.frombuffer(values, dtype=np.float64)[kept]).tobytes())


def _columns_of_ids(string_ids, number_ids, n_ids, separator, sort):
    """The column of every feature id (ids of the same name share one), the number of
    columns, and the vocabulary by value or ``None``: columns in the order of the sorted
    feature names with ``sort``, else in the order the names first came (the ids' order).

    The names are not formed when the groups' strings (``key + separator`` of a string
    feature, the key of a number) are strings of which none begins another: every name then
    differs from the others and compares with them as its group's string does, so the
    names sort by group and, within a group, by value. With ``sort`` the columns of a key's
    string values are then a run in the order of the values, and the vocabulary by value
    is ``({key: (first column, sorted values)}, {number key: column})``.
    """
    groups = sorted([(f"{key}{separator}", key, True) for key in string_ids]
                    + [(key, key, False) for key in number_ids
                       if isinstance(key, str)], key=lambda group: group[0])
    prefix_free = len(groups) == len(string_ids) + len(number_ids) and not any(
        later[0].startswith(group[0]) for group, later in zip(groups, groups[1:]))
    if prefix_free and not sort:
        return np.arange(n_ids, dtype=np.int32), n_ids, None
    if prefix_free:
        columns, column = np.empty(n_ids, dtype=np.int32), 0
        string_columns, number_columns = {}, {}
        for _, key, is_string in groups:
            if is_string:
                table = string_ids[key]
                known = sorted(table)
                ids = np.fromiter(map(table.__getitem__, known), dtype=np.int64,
                                  count=len(known))
                columns[ids] = np.arange(column, column + ids.shape[0])
                string_columns[key] = (column, known)
                column += ids.shape[0]
            else:
                columns[number_ids[key]] = column
                number_columns[key] = column
                column += 1
        return columns, n_ids, (string_columns, number_columns)
    names = _feature_names(string_ids, number_ids, n_ids, separator)
    order = sorted(range(n_ids), key=names.__getitem__) if sort else range(n_ids)
    columns, column_of_name = np.empty(n_ids, dtype=np.int32), {}
    for i in order:
        columns[i] = column_of_name.setdefault(names[i], len(column_of_name))
    return columns, len(column_of_name), None


def _feature_names(string_ids, number_ids, n_ids, separator):
    """The feature name of every id: ``f"{key}{separator}{value}"`` for string values (as
    :class:`~sklearn.feature_extraction.DictVectorizer` forms them), the key for numbers."""
    names = [None] * n_ids
    for key, table in string_ids.items():
        prefix = f"{key}{separator}"
        for value, index in table.items():
            names[index] = prefix + value
    for key, index in number_ids.items():
        names[index] = key
    return names


def window_features(words, pos=None, *, window=2):
    """Chunking features of one sentence, one dict per token.

    The features of token ``i`` (with ``w`` its word and ``p`` its POS tag):

    - ``"bias"``: 1.0;
    - ``"word.lower"``: ``w.lower()``;
    - ``"word[-2:]"``, ``"word[-3:]"``: the last 2 and 3 characters of ``w``;
    - ``"word.istitle"``, ``"word.isupper"``, ``"word.isdigit"``: True when
      ``w`` is title case, upper case or all digits (left out when false);
    - ``"pos"``, ``"pos[:2]"``: ``p`` and its first two characters;
    - for each offset ``k`` in ``-window, ..., -1, 1, ..., window`` whose
      neighbour ``i + k`` is inside the sentence: ``"{k:+d}:word.lower"``
      (e.g. ``"-1:word.lower"``) and ``"{k:+d}:pos"``, the neighbour's
      lower-cased word and POS tag;
    - ``"pos[-1]|pos[0]"`` and ``"pos[0]|pos[+1]"``: POS bigrams with the
      previous and next token, when those exist;
    - ``"BOS"``: True on the first token, ``"EOS"``: True on the last one.

    All POS features are left out when ``pos`` is None. The dicts are meant
    for :class:`SequenceVectorizer`.

    Parameters
    ----------
    words : sequence of str
        Tokens of the sentence.
    pos : sequence of str, default=None
        Part-of-speech tag of each token.
    window : int, default=2
        Number of neighbours on each side whose word and POS are used.

    Returns
    -------
    features : list of dict
        One feature dict per token.

    Examples
    --------
    >>> from sklstruct.preprocessing import window_features
    >>> feats = window_features(["He", "runs"], ["PRP", "VBZ"], window=1)
    >>> feats[1]["-1:word.lower"], feats[1]["pos[-1]|pos[0]"], feats[1]["EOS"]
    ('he', 'PRP|VBZ', True)
    """
    if isinstance(words, str) or not hasattr(words, "__len__"):
        raise TypeError("words must be a sequence of str (one per token).")
    words = list(words)
    if not all(isinstance(word, str) for word in words):
        raise TypeError("words must be a sequence of str (one per token).")
    if pos is not None:
        if isinstance(pos, str) or not hasattr(pos, "__len__"):
            raise TypeError("pos must be None or a sequence of str (one per token).")
        pos = list(pos)
        if not all(isinstance(tag, str) for tag in pos):
            raise TypeError("pos must be None or a sequence of str (one per token).")
        if len(pos) != len(words):
            raise ValueError(
                f"words and pos must have the same length; got {len(words)} "
                f"and {len(pos)}."
            )
    if not isinstance(window, numbers.Integral) or isinstance(window, bool):
        raise TypeError(f"window must be a non-negative int; got {window!r}.")
    if window < 0:
        raise ValueError(f"window must be a non-negative int; got {window}.")

    n_tokens = len(words)
    lower = [word.lower() for word in words]
    offsets = [k for k in range(-window, window + 1) if k != 0]
    features = []
    for i, word in enumerate(words):
        feats = {
            "bias": 1.0,
            "word.lower": lower[i],
            "word[-2:]": word[-2:],
            "word[-3:]": word[-3:],
        }
        if word.istitle():
            feats["word.istitle"] = True
        if word.isupper():
            feats["word.isupper"] = True
        if word.isdigit():
            feats["word.isdigit"] = True
        if pos is not None:
            feats["pos"] = pos[i]
            feats["pos[:2]"] = pos[i][:2]
        for k in offsets:
            j = i + k
            if 0 <= j < n_tokens:
                feats[f"{k:+d}:word.lower"] = lower[j]
                if pos is not None:
                    feats[f"{k:+d}:pos"] = pos[j]
        if pos is not None:
            if i > 0:
                feats["pos[-1]|pos[0]"] = f"{pos[i - 1]}|{pos[i]}"
            if i + 1 < n_tokens:
                feats["pos[0]|pos[+1]"] = f"{pos[i]}|{pos[i + 1]}"
        if i == 0:
            feats["BOS"] = True
        if i == n_tokens - 1:
            feats["EOS"] = True
        features.append(feats)
    return features


class HashingSequenceVectorizer(TransformerMixin, BaseEstimator,
                                auto_wrap_output_keys=None):
    """Turn sequences of per-token feature dicts into sparse matrices by feature hashing.

    The stateless counterpart of :class:`SequenceVectorizer`: the same input (a list of
    sequences, each a list of per-token dicts) and the same reading of the values (a string
    value ``v`` of feature ``k`` is the binary feature ``"k=v"`` with ``separator`` between
    them, an iterable of strings one such feature per string, a number is kept as the value
    of feature ``k``, a boolean becomes 1 or 0), but the column of a feature is its hash
    (:class:`~sklearn.feature_extraction.FeatureHasher`) instead of its place in a learned
    vocabulary. Nothing is learned, so parts of a data set vectorise independently, on
    different machines, into the same columns: the input of
    :meth:`sklstruct.distributed.ShardedSequences.from_bag`. Different features can share a
    column (with ``alternate_sign``, of opposite signs, so that they cancel on average).

    Parameters
    ----------
    n_features : int, default=2**20
        Number of columns.
    alternate_sign : bool, default=True
        Give every feature a sign from its hash, so that the inner products of colliding
        features are unbiased.
    dtype : dtype, default=np.float64
        Type of the feature values.
    separator : str, default="="
        Separator between feature name and string value.

    See Also
    --------
    SequenceVectorizer : The same with a vocabulary learned by ``fit``.

    Examples
    --------
    >>> from sklstruct.preprocessing import HashingSequenceVectorizer
    >>> X = [[{"word": "the"}, {"word": "cat"}], [{"word": "sat", "len": 3}]]
    >>> Xt = HashingSequenceVectorizer(n_features=2**10).transform(X)
    >>> [m.shape for m in Xt], [m.nnz for m in Xt]
    ([(2, 1024), (1, 1024)], [2, 2])
    """

    def __init__(self, *, n_features=2**20, alternate_sign=True, dtype=np.float64,
                 separator="="):
        self.n_features = n_features
        self.alternate_sign = alternate_sign
        self.dtype = dtype
        self.separator = separator

    def _pairs(self, token):
        separator = self.separator
        for name, value in token.items():
            if isinstance(value, str):
                yield f"{name}{separator}{value}", 1
            elif isinstance(value, (numbers.Number, np.number, np.bool_)):
                if not math.isfinite(value):
                    raise ValueError(f"Feature {name!r} is {value}; feature values must be "
                                     "finite.")
                if value != 0:  # (no stored zero, as SequenceVectorizer)
                    yield name, value
            elif isinstance(value, (bytes, bytearray, Mapping)):
                raise TypeError(f"Feature {name!r} has a {type(value).__name__} value; give "
                                "a string (decode bytes; flatten a dict into features of "
                                "their own).")
            elif hasattr(value, "__iter__"):
                for item in value:
                    if not isinstance(item, str):
                        raise TypeError(f"Feature {name!r} holds an iterable with a value of "
                                        f"type {type(item).__name__}; only strings can be "
                                        "one-hot encoded.")
                    yield f"{name}{separator}{item}", 1
            else:
                raise TypeError(f"Feature {name!r} has a value of type "
                                f"{type(value).__name__}; give a string, a number, a boolean "
                                "or an iterable of strings.")

    def fit(self, X=None, y=None):
        """Do nothing: the vectorizer is stateless.

        Parameters
        ----------
        X : list of list of dict, default=None
            Ignored.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The vectorizer.
        """
        return self

    def transform(self, X):
        """Return one sparse matrix per sequence.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.

        Returns
        -------
        Xt : list of scipy.sparse CSR matrices
            One matrix of shape (n_tokens_i, n_features) per sequence.
        """
        tokens, lengths = _flatten_sequences(X, allow_empty=True)
        hasher = FeatureHasher(n_features=self.n_features, input_type="pair",
                               dtype=self.dtype, alternate_sign=self.alternate_sign)
        if not tokens:  # (only empty sequences)
            return _split_rows(sp.csr_matrix((0, self.n_features), dtype=self.dtype), lengths)
        return _split_rows(hasher.transform(self._pairs(token) for token in tokens), lengths)

    def fit_transform(self, X, y=None):
        """Return one sparse matrix per sequence (``fit`` does nothing).

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.
        y : None
            Ignored.

        Returns
        -------
        Xt : list of scipy.sparse CSR matrices
            One matrix of shape (n_tokens_i, n_features) per sequence.
        """
        return self.transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.dict = True
        tags.input_tags.two_d_array = False
        tags.requires_fit = False
        return tags
