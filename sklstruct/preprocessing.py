"""Feature extraction for sequences of tokens.

:class:`SequenceVectorizer` turns sequences of per-token feature dicts into
one sparse matrix per sequence (:class:`HashingSequenceVectorizer` does it
without a vocabulary, by feature hashing), and :func:`window_features` builds the usual
chunking feature dicts of a sentence.
"""

import itertools
import numbers
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction import DictVectorizer, FeatureHasher
from sklearn.utils.validation import check_is_fitted

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


class SequenceVectorizer(TransformerMixin, BaseEstimator):
    """Turn sequences of per-token feature dicts into sparse matrices.

    Each sequence is a list of dicts, one per token, mapping feature names
    to values, as :class:`~sklearn.feature_extraction.DictVectorizer`
    expects: a string value ``v`` of feature ``k`` becomes the binary feature
    ``"k=v"``, a number is kept as the value of feature ``k`` and a boolean
    becomes 1 or 0; a value of ``None`` is an error (leave the feature out
    instead). A single ``DictVectorizer`` is fitted on all tokens, and
    its output is split into one CSR matrix per sequence, so every matrix has
    the same columns.

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
    vocabulary_ : dict
        Mapping from feature name to column index.
    feature_names_ : list of str
        Feature name of each column.
    dict_vectorizer_ : :class:`~sklearn.feature_extraction.DictVectorizer`
        The fitted vectorizer applied to the tokens.

    See Also
    --------
    window_features : Chunking features of a sentence, one dict per token.

    Examples
    --------
    >>> from sklstruct.preprocessing import SequenceVectorizer
    >>> X = [[{"word": "the"}, {"word": "cat"}], [{"word": "sat", "len": 3}]]
    >>> vec = SequenceVectorizer()
    >>> Xt = vec.fit_transform(X)
    >>> [m.shape for m in Xt]
    [(2, 4), (1, 4)]
    >>> vec.get_feature_names_out().tolist()
    ['len', 'word=cat', 'word=sat', 'word=the']
    """

    def __init__(self, *, dtype=np.float64, separator="=", sort=True):
        self.dtype = dtype
        self.separator = separator
        self.sort = sort

    def _new_dict_vectorizer(self):
        return DictVectorizer(
            dtype=self.dtype, separator=self.separator, sparse=True, sort=self.sort
        )

    def _store(self, dict_vectorizer):
        self.dict_vectorizer_ = dict_vectorizer
        self.vocabulary_ = dict_vectorizer.vocabulary_
        self.feature_names_ = dict_vectorizer.feature_names_

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
        tokens, _ = _flatten_sequences(X)
        self._store(self._new_dict_vectorizer().fit(tokens))
        return self

    def fit_transform(self, X, y=None):
        """Learn the feature names and return one matrix per sequence.

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
        tokens, lengths = _flatten_sequences(X)
        dict_vectorizer = self._new_dict_vectorizer()
        matrix = dict_vectorizer.fit_transform(tokens)
        self._store(dict_vectorizer)
        return _split_rows(matrix, lengths)

    def transform(self, X):
        """Return one sparse matrix per sequence; unknown features are ignored.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.

        Returns
        -------
        Xt : list of scipy.sparse CSR matrices
            One matrix of shape (n_tokens_i, n_features) per sequence.
        """
        check_is_fitted(self)
        tokens, lengths = _flatten_sequences(X, allow_empty=True)
        if not tokens:  # (only empty sequences)
            empty = sp.csr_matrix((0, len(self.feature_names_)), dtype=self.dtype)
            return _split_rows(empty, lengths)
        return _split_rows(self.dict_vectorizer_.transform(tokens), lengths)

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
        return self.dict_vectorizer_.get_feature_names_out(input_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.dict = True
        tags.input_tags.two_d_array = False
        return tags


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


class HashingSequenceVectorizer(TransformerMixin, BaseEstimator):
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
            elif isinstance(value, (numbers.Number, np.number)):
                yield name, value
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
