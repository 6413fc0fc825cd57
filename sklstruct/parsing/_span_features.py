"""Span features of sentences: one feature row per span, for constituency parsing."""

import copy
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._inference.cfg import span_index
from ..structures.cfg import ConstituencyTree
from ._grammar import sentence_tokens
from ._parts import PartRowsTransformerMixin, check_sentences

__all__ = ["SpanFeatures"]

_BOUNDARY = "<s>"
_LENGTH_BUCKETS = np.array([2, 3, 4, 5, 6, 11, 21])  # 2, 3, 4, 5, 6-10, 11-20, 21+


def _shape(word):
    """A coarse word shape: capitalised, all capitals, digits, punctuation, hyphen."""
    if any(c.isdigit() for c in word):
        return "digit"
    if not any(c.isalnum() for c in word):
        return "punct"
    if word.isupper():
        return "upper"
    if word[0].isupper():
        return "title"
    if "-" in word:
        return "hyphen"
    return "lower"


class SpanFeatures(PartRowsTransformerMixin, TransformerMixin, BaseEstimator,
                   auto_wrap_output_keys=None):
    """Binary features of every span of every sentence, in the rows of a constituency model.

    A sentence of ``n`` words becomes ``n (n + 1) / 2`` rows, its spans ``[i, j)`` by length,
    then by start (the words first, the whole sentence last), stacked sentence after
    sentence: the rows of :class:`~sklstruct.structures.ConstituencyTree`.

    - A word's row (the lexical labels' features): a bias, the lower-cased word, its
      suffixes of 1 to ``suffix_length`` characters, its shape, and, for tagged input, its
      tag and the tags of its neighbours.
    - A longer span's row (the phrasal labels' features): a bias, and an indicator of the
      whole sentence (the root's label). With ``span_features=True`` also, as in Taskar et
      al. (2004, "Max-margin parsing", section 5): its length (2, 3, 4, 5, 6-10, 11-20,
      21+), its first and last words and those just outside it (lower-cased), and for tagged
      input their tags, the pair (first tag, last tag) and the pair (tag before, tag after).
    - The whole sentence's row also has the root indicator when the sentence is one word.

    Features are kept when they occur in the rows of the sentences given to ``fit``; others
    are ignored at ``transform``.

    Parameters
    ----------
    span_features : bool, default=True
        Boundary features of the spans of two or more words (else a bias and the root
        indicator only: with no other features, the model is the grammar's, rules and
        labels).
    suffix_length : int, default=3
        Longest suffix of the words' features (0: none).

    Attributes
    ----------
    vocabulary_ : dict of dict
        Per kind of token value (``"word"`` lowercased, ``"shape"``, ``"suffix"``,
        ``"tag"``), the values seen at fit and their codes (from 1).
    columns_ : ndarray of int64
        The features seen on the training spans, whose columns the span rows have (sorted
        feature codes).
    tagged_ : bool
        Whether the sentences given to ``fit`` carry part-of-speech tags (then those given
        to ``transform`` must too).
    n_features_out_ : int
        Number of feature columns.

    Examples
    --------
    >>> from sklstruct.parsing import SpanFeatures
    >>> sentences = [[("Dogs", "NNS"), ("bark", "VBP")], [("Cats", "NNS")]]
    >>> [rows.shape[0] for rows in SpanFeatures().fit_transform(sentences)]  # 3 spans, 1
    [3, 1]
    """

    def __init__(self, *, span_features=True, suffix_length=3):
        self.span_features = span_features
        self.suffix_length = suffix_length

    def _check_params(self):
        if not isinstance(self.span_features, (bool, np.bool_)):
            raise TypeError(f"span_features must be True or False, got "
                            f"{self.span_features!r}.")
        if isinstance(self.suffix_length, bool) or not isinstance(
                self.suffix_length, numbers.Integral) or self.suffix_length < 0:
            raise ValueError(f"suffix_length must be a non-negative int, got "
                             f"{self.suffix_length!r}.")

    def _token_strings(self, sentences, name):
        """Per sentence, ``(words, tags)`` checked, with the data set's tagging."""
        tokens = []
        tagged = None
        for i, sentence in enumerate(sentences):
            words, tags = sentence_tokens(sentence, f"{name}[{i}]")
            if words:
                if tagged is None:
                    tagged = tags is not None
                elif tagged != (tags is not None):
                    raise ValueError(f"{name}: some sentences have tags and others not.")
            tokens.append((words, tags))
        return tokens, bool(tagged)

    def fit(self, X, y=None):
        """Learn the vocabularies and the feature columns of the sentences ``X``.

        Parameters
        ----------
        X : list of list of tokens
            Sentences: tokens are words (str), ``(word, tag)`` pairs or token dicts.
        y : ignored

        Returns
        -------
        self : SpanFeatures
        """
        self._check_params()
        tokens, tagged = self._token_strings(check_sentences(X), "X")
        vocabulary = {}
        for words, tags in tokens:
            for key, value in self._token_values(words, tags):
                vocabulary.setdefault(key, {}).setdefault(value, None)
        # (on a copy, whose fitted attributes replace ours at the end: a failed or
        # interrupted fit leaves the last fit's)
        staged = copy.copy(self)
        staged.vocabulary_ = {key: {v: i + 1 for i, v in enumerate(sorted(values))}
                              for key, values in vocabulary.items()}
        staged.tagged_ = tagged
        raw = staged._raw_rows(tokens)[1]
        staged.columns_ = np.unique(raw[raw >= 0])
        staged.n_features_out_ = int(staged.columns_.shape[0])
        self.__dict__.update(staged.__dict__)
        return self

    def transform_flat(self, X):
        """Feature rows of every span of every sentence, stacked.

        Parameters
        ----------
        X : list of list of tokens
            Sentences (an empty sentence has no row).

        Returns
        -------
        rows : scipy.sparse.csr_matrix of shape (sum n (n + 1) / 2, n_features_out_)
            The rows of sentence ``i`` follow those of the sentences before it.
        n_rows : ndarray of int64 of shape (n_sentences,)
            ``n_i (n_i + 1) / 2``, the rows of each sentence.
        """
        check_is_fitted(self, "columns_")
        tokens, tagged = self._token_strings(check_sentences(X), "X")
        if self.tagged_ and not tagged and any(words for words, _ in tokens):
            raise ValueError("SpanFeatures was fitted on tagged sentences; give (word, tag) "
                             "pairs (or token dicts with a tag).")
        if not self.tagged_:
            tokens = [(words, None) for words, _ in tokens]
        n_rows, raw = self._raw_rows(tokens)
        row = np.repeat(np.arange(n_rows), raw.shape[1])
        raw = raw.ravel()
        at = np.searchsorted(self.columns_, raw)
        at = np.minimum(at, max(self.n_features_out_ - 1, 0))
        known = (raw >= 0) & (self.columns_[at] == raw) if self.n_features_out_ else \
            np.zeros(raw.shape[0], dtype=bool)
        n_words = np.array([len(words) for words, _ in tokens], dtype=np.int64)
        features = sp.csr_matrix((np.ones(int(known.sum())), (row[known], at[known])),
                                 shape=(n_rows, self.n_features_out_))
        return features, ConstituencyTree.rows_of(n_words)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False  # (sentences of words or (word, tag) pairs)
        tags.input_tags.string = True
        return tags

    def get_feature_names_out(self, input_features=None):
        """Names of the feature columns, such as ``"word=dogs"`` or ``"span.first.tag=DT"``.

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        names : ndarray of str
        """
        check_is_fitted(self, "columns_")
        names = {}
        for key, offset, size in self._layout():
            values = {i: v for v, i in self.vocabulary_.get(key[1], {}).items()}
            for i in range(size):
                names[offset + i] = _name(key, i, values, self.vocabulary_)
        return np.array([names[c] for c in self.columns_], dtype=object)

    # ------------------------------------------------------------------ internals
    def _token_values(self, words, tags):
        """``(vocabulary, value)`` of the token strings of a sentence."""
        for word in words:
            lower = word.lower()
            yield "word", lower
            yield "shape", _shape(word)
            for k in range(1, min(self.suffix_length, len(lower)) + 1):
                yield "suffix", lower[-k:]
        if tags is not None:
            for tag in tags:
                yield "tag", tag

    def _layout(self):
        """``((template, vocabulary), offset, size)`` of every template's raw columns."""
        sizes = {key: len(values) + 1 for key, values in self.vocabulary_.items()}
        word, tag = sizes.get("word", 1) + 1, sizes.get("tag", 1) + 1   # (+1: boundary)
        templates = [(("bias.word", None), 1), (("bias.span", None), 1), (("root", None), 1),
                     (("word", "word"), word), (("shape", "shape"), sizes.get("shape", 1)),
                     (("suffix", "suffix"), sizes.get("suffix", 1))]
        if self.tagged_:
            templates += [(("tag", "tag"), tag), (("tag-1", "tag"), tag),
                          (("tag+1", "tag"), tag)]
        if self.span_features:
            templates += [(("span.length", None), len(_LENGTH_BUCKETS))]
            templates += [((f"span.{where}.word", "word"), word)
                          for where in ("first", "last", "before", "after")]
            if self.tagged_:
                templates += [((f"span.{where}.tag", "tag"), tag)
                              for where in ("first", "last", "before", "after")]
                templates += [(("span.first_last.tag", "tag"), tag * tag),
                              (("span.before_after.tag", "tag"), tag * tag)]
        layout, offset = [], 0
        for key, size in templates:
            layout.append((key, offset, size))
            offset += size
        return layout

    def _raw_rows(self, tokens):
        """``(n_rows, raw)``: the raw column of every template on every row (-1: none)."""
        layout = {key[0]: (offset, size) for key, offset, size in self._layout()}
        vocabulary = self.vocabulary_
        blocks = []
        for words, tags in tokens:
            n = len(words)
            if n == 0:
                continue
            lower = [word.lower() for word in words]
            word_id = np.array([vocabulary["word"].get(w, 0) for w in lower], dtype=np.int64)
            start, end = span_index(n)
            columns = {}
            is_word = end - start == 1
            columns["bias.word"] = np.where(is_word, 0, -1)
            columns["bias.span"] = np.where(is_word, -1, 0)
            columns["root"] = np.where((start == 0) & (end == n), 0, -1)
            on_words = np.full(start.shape[0], -1, dtype=np.int64)
            on_words[:n] = word_id
            columns["word"] = on_words
            shape = on_words.copy()
            shape[:n] = [vocabulary["shape"].get(_shape(w), 0) for w in words]
            columns["shape"] = shape
            for k in range(1, self.suffix_length + 1):
                suffix = on_words.copy()
                suffix[:n] = [vocabulary["suffix"].get(w[-k:], 0) if len(w) >= k else -1
                              for w in lower]
                columns[f"suffix{k}"] = suffix
            boundary_word = len(vocabulary.get("word", {})) + 1
            padded_words = np.concatenate(([boundary_word], word_id, [boundary_word]))
            if self.tagged_:
                tag_id = np.array([vocabulary["tag"].get(t, 0) for t in tags], dtype=np.int64)
                boundary_tag = len(vocabulary.get("tag", {})) + 1
                padded_tags = np.concatenate(([boundary_tag], tag_id, [boundary_tag]))
                for name, shift in (("tag", 1), ("tag-1", 0), ("tag+1", 2)):
                    column = on_words.copy()
                    column[:n] = padded_tags[np.arange(n) + shift]
                    columns[name] = column
            if self.span_features:
                spans = ~is_word
                length = np.searchsorted(_LENGTH_BUCKETS, end - start, side="right") - 1
                columns["span.length"] = np.where(spans, length, -1)
                # positions in the padded arrays: first = start + 1, last = end,
                # before = start, after = end + 1
                where = {"first": start + 1, "last": end, "before": start, "after": end + 1}
                for name, position in where.items():
                    columns[f"span.{name}.word"] = np.where(spans, padded_words[position], -1)
                if self.tagged_:
                    tag_size = boundary_tag + 1
                    for name, position in where.items():
                        columns[f"span.{name}.tag"] = np.where(spans, padded_tags[position],
                                                               -1)
                    columns["span.first_last.tag"] = np.where(
                        spans, padded_tags[start + 1] * tag_size + padded_tags[end], -1)
                    columns["span.before_after.tag"] = np.where(
                        spans, padded_tags[start] * tag_size + padded_tags[end + 1], -1)
            block = []
            for name, values in columns.items():
                offset, _ = layout["suffix" if name.startswith("suffix") else name]
                block.append(np.where(values >= 0, values + offset, -1))
            # (every sentence has the same templates, so the blocks stack)
            blocks.append(np.column_stack(block))
        if not blocks:
            return 0, np.zeros((0, 1), dtype=np.int64)
        raw = np.vstack(blocks)
        return raw.shape[0], raw


def _name(key, i, values, vocabulary):
    """The readable name of raw column ``i`` of a template."""
    template, source = key
    if source is None:
        if template == "span.length":
            low = _LENGTH_BUCKETS[i]
            high = _LENGTH_BUCKETS[i + 1] - 1 if i + 1 < len(_LENGTH_BUCKETS) else None
            return f"{template}={low}" + ("" if high in (None, low) else f"-{high}")
        return template
    size = len(vocabulary.get(source, {})) + 2
    if template.endswith(("_last.tag", "_after.tag")):
        return f"{template}={_value(i // size, values)}|{_value(i % size, values)}"
    return f"{template}={_value(i, values)}"


def _value(i, values):
    return values.get(i, _BOUNDARY if i else "<unknown>")
