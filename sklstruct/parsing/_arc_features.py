"""First-order arc features of dependency parsers (McDonald, Crammer and Pereira 2005)."""

import hashlib
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._inference.dependency import check_heads
from ..structures.dependency import DependencyTree
from . import _arc_features_fast as _fast
from ._dependency_targets import split_trees
from ._parts import PartRowsTransformerMixin

_ROOT, _BEFORE, _AFTER = "<root>", "<s>", "</s>"
# the keys of a token's tag that tag="auto" tries, in this order
TAG_KEYS = ("postag", "xpos", "upos", "cpostag", "tag", "pos")


class ArcFeatures(PartRowsTransformerMixin, TransformerMixin, BaseEstimator,
                  auto_wrap_output_keys=None):
    """Binary features of every candidate arc of dependency-parsed sentences.

    For a sentence of ``n`` tokens the output has ``n * n`` rows, one per candidate arc
    ``h -> m`` (head ``h`` in ``0..n`` with 0 the root, modifier ``m`` in ``1..n``,
    ``h != m``) in the order of :class:`~sklstruct.structures.DependencyTree`: modifier by
    modifier, heads in increasing order. The features are the first-order templates of
    McDonald, Crammer and Pereira (2005), Table 1(a)-(c), with ``w`` a word, ``t`` a tag:

    - head and modifier alone: ``(hw, ht), (hw), (ht), (mw, mt), (mw), (mt)``;
    - their pairs: ``(hw, ht, mw, mt), (ht, mw, mt), (hw, mw, mt), (hw, ht, mt),
      (hw, ht, mw), (hw, mw), (ht, mt)``;
    - the tags between them, ``(ht, bt, mt)`` for every distinct tag ``bt`` strictly between
      ``h`` and ``m``;
    - the surrounding tags, ``(ht, ht+1, mt-1, mt), (ht-1, ht, mt-1, mt),
      (ht, ht+1, mt, mt+1), (ht-1, ht, mt, mt+1)``;
    - for every key of ``extra`` (e.g. a lemma, a coarse tag, morphological features)
      ``(he), (me), (he, me), (he, mt), (ht, me)``;

    each once alone and once joined with the arc's direction and binned distance (1, 2, 3,
    4, 5, 6-10, more), as in MSTParser. The root is a token of its own word and tag
    ``"<root>"`` at position 0; the tags beyond the ends of a sentence are ``"<s>"`` and
    ``"</s>"``.

    A feature is a 64-bit hash of its template and values; :meth:`fit` keeps those that
    occur on the arcs of the training trees (``features_from="gold"``, the feature set of
    MSTParser) or on any candidate arc (``"all"``), numbered in the order of their hashes
    (so that the columns do not depend on the order of the sentences); other features are
    dropped at transform time. The vocabulary stores one 64-bit hash per kept feature.

    Memory: every candidate arc is a row, so a sentence of ``n`` tokens takes ``n * n``
    rows, ``n`` per token. A row holds about ``2 (17 + 5 len(extra) + b)`` non-zeros
    (``b`` distinct tags between head and modifier), fewer with ``features_from="gold"``,
    each stored as a float64 value and an int32 index (12 bytes): with two ``extra`` keys
    about 700 bytes per candidate arc, so ``700 n`` bytes per token (11 kB per token at the
    mean length of 15 of the CoNLL-2007 Basque treebank). The arcs' features are not
    factored into per-token parts because most templates are conjunctions of head and
    modifier values; the learners then work on one sparse matrix, as for sequences.

    Parameters
    ----------
    word : str, default="form"
        Key of the token dicts that holds the word.
    tag : str, default="auto"
        Key that holds the part-of-speech tag. ``"auto"``: the first of ``"postag"``,
        ``"xpos"``, ``"upos"``, ``"cpostag"``, ``"tag"`` and ``"pos"`` that the first token
        at fit has with a value other than ``"_"`` (CoNLL-X files give ``postag``, CoNLL-U
        files ``xpos``, or ``upos`` when their ``xpos`` column is empty); ``tag_`` names it.
    extra : tuple of str, default=()
        Further keys of the token dicts used by the ``extra`` templates.
    lowercase : bool, default=True
        Lowercase the words.
    features_from : {"gold", "all"}, default="gold"
        Keep the features of the training trees' arcs (needs ``y`` at fit) or of every
        candidate arc.

    Attributes
    ----------
    vocabulary_ : ndarray of uint64 of shape (n_features,)
        The sorted hashes of the kept features; column ``j`` is ``vocabulary_[j]``.
    n_features_out_ : int
        Number of kept features.
    tag_ : str
        The key the tags were read from.

    Examples
    --------
    >>> from sklstruct.parsing import ArcFeatures
    >>> sentence = [{"form": "Dogs", "postag": "NNS"}, {"form": "bark", "postag": "VBP"}]
    >>> features = ArcFeatures(features_from="all").fit([sentence])
    >>> [x.shape[0] for x in features.transform([sentence])]
    [4]
    """

    def __init__(self, *, word="form", tag="auto", extra=(), lowercase=True,
                 features_from="gold"):
        self.word = word
        self.tag = tag
        self.extra = extra
        self.lowercase = lowercase
        self.features_from = features_from

    # ------------------------------------------------------------------ input
    def _check_params(self):
        for name in ("word", "tag"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str key of the token dicts, got "
                                f"{getattr(self, name)!r}.")
        if isinstance(self.extra, str) or not all(isinstance(k, str) for k in self.extra):
            raise TypeError(f"extra must be a tuple of str keys, got {self.extra!r}.")
        if self.features_from not in ("gold", "all"):
            raise ValueError(f"features_from must be 'gold' or 'all', got "
                             f"{self.features_from!r}.")
        if not isinstance(self.lowercase, (bool, np.bool_)):
            raise TypeError(f"lowercase must be True or False, got {self.lowercase!r}.")

    def _resolve_tag(self, X):
        """The key of the tags: ``tag``, or for ``"auto"`` the first of ``TAG_KEYS`` that the
        first token of ``X`` has with a value other than ``"_"``."""
        if self.tag != "auto":
            return self.tag
        first = None
        if not isinstance(X, (str, Mapping)) and hasattr(X, "__len__"):
            first = next((sentence[0] for sentence in X
                          if not isinstance(sentence, (str, Mapping))
                          and hasattr(sentence, "__len__") and len(sentence)
                          and isinstance(sentence[0], Mapping)), None)
        if first is None:
            return TAG_KEYS[0]  # (no token: the checks of _columns say what is wrong)
        for key in TAG_KEYS:
            if key in first and first[key] != "_":
                return key
        raise ValueError(f"the first token has no part-of-speech tag among {TAG_KEYS} (it "
                         f"has {sorted(first)}); name the key with ArcFeatures(tag=...), "
                         "e.g. DependencyParser(features=ArcFeatures(tag=...)).")

    def _columns(self, X, tag):
        """Per key (the word, ``tag`` and the extra columns), the values of every token of
        ``X`` with each sentence's root first; and the sentence lengths."""
        if isinstance(X, (str, Mapping)) or not hasattr(X, "__len__"):
            raise TypeError("X must be a list of sentences, each a list of token dicts.")
        keys = [self.word, tag, *self.extra]
        columns = {key: [] for key in keys}
        lengths = np.zeros(len(X), dtype=np.int64)
        for i, sentence in enumerate(X):
            if isinstance(sentence, (str, Mapping)) or not hasattr(sentence, "__len__"):
                raise TypeError(f"sentence {i} must be a list of token dicts, got "
                                f"{type(sentence).__name__}.")
            lengths[i] = len(sentence)
            for key in keys:
                columns[key].append(_ROOT)
            for j, token in enumerate(sentence):
                if not isinstance(token, Mapping):
                    raise TypeError(f"X[{i}][{j}] (token {j + 1} of sentence {i}) must be a "
                                    f"dict of its columns, got {type(token).__name__}.")
                for key in keys:
                    if key not in token:
                        raise ValueError(
                            f"token {j + 1} of sentence {i} has no {key!r}; it has "
                            f"{sorted(token)} (ArcFeatures' word, tag and extra name the "
                            "keys it reads).")
                    value = token[key]
                    if not isinstance(value, str):
                        raise TypeError(f"token {j + 1} of sentence {i}: {key!r} must be a "
                                        f"str, got {type(value).__name__} {value!r}.")
                    columns[key].append(value)
        if self.lowercase:
            columns[self.word] = [w if w == _ROOT else w.lower() for w in columns[self.word]]
        return columns, lengths

    # ------------------------------------------------------------------ features
    def _tokens(self, X, tag_key):
        """The token arrays of the compiled extraction (tags from the column ``tag_key``),
        and the sentence lengths and starts (global index of each sentence's root)."""
        columns, lengths = self._columns(X, tag_key)
        codes = {key: _codes(values) for key, values in columns.items()}
        starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
        tag = codes[tag_key]
        before, after = _codes([_BEFORE, _AFTER])
        previous = np.concatenate(([before], tag[:-1]))
        previous[starts] = before
        following = np.concatenate((tag[1:], [after]))
        following[starts + lengths] = after
        extra = np.ascontiguousarray(
            np.column_stack([codes[key] for key in self.extra]) if self.extra
            else np.zeros((tag.shape[0], 0), dtype=np.uint64), dtype=np.uint64)
        tag_codes, tag_index = np.unique(tag, return_inverse=True)
        tokens = (codes[self.word], tag, previous, following, extra,
                  tag_index.astype(np.int32), tag_codes)
        return tokens, lengths, starts

    def fit(self, X, y=None):
        """Learn the vocabulary of features.

        Parameters
        ----------
        X : list of list of dict
            Sentences, one dict of columns per token (as :func:`read_conll` gives).
        y : list of array-like of int or of (heads, relations) pairs, default=None
            The training trees, whose arcs give the features when
            ``features_from="gold"``.

        Returns
        -------
        self : ArcFeatures
        """
        self._check_params()
        # (the fitted attributes are set at the end: a failed fit leaves the last fit's)
        tag = self._resolve_tag(X)
        tokens, lengths, starts = self._tokens(X, tag)
        if self.features_from == "gold":
            if y is None:
                raise ValueError("ArcFeatures(features_from='gold') needs the training trees "
                                 "y at fit; use features_from='all' without them.")
            heads = _gold_heads(y, lengths)
            sentence = np.repeat(np.arange(lengths.shape[0]), lengths)
            modifiers = np.arange(heads.shape[0]) - np.repeat(
                np.cumsum(lengths) - lengths, lengths) + 1
            keys = _fast.selected_arc_keys(tokens, starts[sentence] + heads,
                                           starts[sentence] + modifiers, starts, sentence)
        else:
            keys = _fast.candidate_arc_keys(tokens, lengths, starts)
        self.tag_ = tag
        self.vocabulary_ = np.unique(keys)
        self.n_features_out_ = int(self.vocabulary_.shape[0])
        return self

    def transform_flat(self, X):
        """Features of every candidate arc of every sentence, stacked.

        Parameters
        ----------
        X : list of list of dict

        Returns
        -------
        features : scipy.sparse.csr_matrix of shape (sum(n_i ** 2), n_features_out_)
            The rows of sentence ``i`` follow those of the sentences before it.
        n_rows : ndarray of int64 of shape (n_sentences,)
            ``n_i ** 2``, the rows of each sentence.
        """
        check_is_fitted(self, "vocabulary_")
        self._check_params()
        tokens, lengths, starts = self._tokens(X, self.tag_)
        indptr, indices = _fast.candidate_arc_rows(tokens, lengths, starts, self.vocabulary_)
        features = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr),
                                 shape=(indptr.shape[0] - 1, self.n_features_out_))
        features.has_sorted_indices = True
        return features, DependencyTree.rows_of(lengths)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # (sentences of token dicts)
        tags.input_tags.dict = True
        tags.target_tags.required = self.features_from == "gold"
        return tags

    def get_feature_names_out(self, input_features=None):
        """Names ``arc<hash>`` of the kept features (their hashes in hexadecimal).

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        names : ndarray of str
        """
        check_is_fitted(self, "vocabulary_")
        return np.array([f"arc{int(v):016x}" for v in self.vocabulary_], dtype=object)


def _codes(values):
    """A 64-bit code of every string, stable across runs and processes (BLAKE2b)."""
    unique, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True)
    codes = np.array([int.from_bytes(hashlib.blake2b(str(u).encode("utf-8"), digest_size=8)
                                     .digest(), "little") for u in unique], dtype=np.uint64)
    return codes[inverse.ravel()]


def _gold_heads(y, lengths):
    """The heads of the trees ``y``, concatenated, checked to form a tree of every sentence
    (a token headed by itself or a cycle would give arcs of no tree)."""
    heads, _ = split_trees(y, lengths=lengths)
    heads = np.concatenate(heads).astype(np.int64) if heads else np.zeros(0, dtype=np.int64)
    words = np.flatnonzero(lengths > 0)  # (an empty sentence has no heads)
    check_heads(heads, lengths[words], names=words)
    return heads
