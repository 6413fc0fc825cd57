"""Validated entry points to the CKY kernels for weighted context-free grammars.

**Trees.** A sentence of ``n >= 1`` words has the spans ``[i, j)``, ``0 <= i < j <= n``. A
tree is a full binary bracketing of the sentence whose every node (span) carries one label
``a`` in ``0..n_labels-1``. A label stands for a collapsed unary chain (such as ``S+VP``): it
has a top symbol ``grammar.top[a]`` and a bottom symbol ``grammar.bottom[a]``. Words carry
lexical labels only, longer spans phrasal labels only, and the root span's label must have a
top symbol allowed as a root. A node labelled ``a`` whose children are labelled ``b`` and
``c`` uses the binary rule ``(bottom[a], top[b], top[c])``, which must be a rule of the
grammar. The score of a tree is

    sum_{nodes} span_scores[span, label] + sum_{internal nodes} rule_scores[rule]

**Batches.** The span scores of a sentence are a (n (n + 1) / 2, n_labels) matrix whose rows
are the spans by length, then by start (:func:`span_index`, :func:`span_position`): the words
first, the root span ``[0, n)`` last. A batch stacks these matrices in sentence order
(``span_offsets(lengths)`` gives each sentence's rows). A tree is given or returned as one
label per span row, -1 for the spans that are not nodes of the tree. A span score of -inf
forbids that label on that span; NaN and +inf are refused.

**No tree.** A sentence may have no tree of finite score (for instance when no rule can
build its root). It then decodes to score -inf with all labels -1, has no k-best tree, and has
log Z = -inf with zero marginals and rule counts.

These functions check their inputs, allocate the outputs and run the compiled dynamic
programmes of :mod:`sklstruct._inference._cky` (Viterbi, k best, given trees) and
:mod:`sklstruct._inference._cky_inside` (inside-outside), optionally on several threads.
"""

import numbers

import numpy as np

from . import _cky, _cky_inside
from ._validation import check_k, check_sentence_lengths, map_sentence_chunks

__all__ = [
    "Grammar",
    "check_span_tree",
    "cky_best_other",
    "cky_decode",
    "cky_kbest",
    "inside_outside",
    "log_partition",
    "span_index",
    "span_offsets",
    "span_position",
    "tree_score",
]

_INT32_MAX = 2**31 - 1


# ----------------------------------------------------------------------------- spans

def _check_length(n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an integer, got {n!r}.")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    return int(n)


def span_index(n):
    """The spans of a sentence of ``n`` words, in the row order of its span scores.

    Rows are the spans by length, then by start: row ``(l - 1) (2 n - l + 2) / 2 + i`` is
    ``[i, i + l)``. Words come first (row ``i`` is ``[i, i + 1)``) and the root span
    ``[0, n)`` is the last row.

    Parameters
    ----------
    n : int
        Number of words, at least 1.

    Returns
    -------
    start, end : ndarray of int64, shape (n (n + 1) / 2,)
        Row ``s`` is the span ``[start[s], end[s])``.
    """
    n = _check_length(n)
    lengths = np.repeat(np.arange(1, n + 1), np.arange(n, 0, -1))
    first = np.concatenate(([0], np.cumsum(np.arange(n, 0, -1))[:-1]))
    start = np.arange(lengths.shape[0]) - np.repeat(first, np.arange(n, 0, -1))
    return start.astype(np.int64), (start + lengths).astype(np.int64)


def span_position(start, end, n):
    """Row of the span ``[start, end)`` in the span scores of a sentence of ``n`` words
    (the inverse of :func:`span_index`); works elementwise on arrays.

    Parameters
    ----------
    start, end : int or array-like of int
        Span bounds, ``0 <= start < end <= n``.
    n : int
        Number of words, at least 1.

    Returns
    -------
    position : int64 or ndarray of int64
    """
    n = _check_length(n)
    start_array = np.asarray(start)
    end_array = np.asarray(end)
    for name, array in (("start", start_array), ("end", end_array)):
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got dtype {array.dtype}.")
    start_array, end_array = np.broadcast_arrays(start_array.astype(np.int64),
                                                 end_array.astype(np.int64))
    if np.any(start_array < 0) or np.any(end_array > n) or np.any(start_array >= end_array):
        raise ValueError(f"spans must satisfy 0 <= start < end <= n = {n}.")
    length = end_array - start_array
    position = (length - 1) * (2 * n - length + 2) // 2 + start_array
    return position if position.ndim else np.int64(position)


def span_offsets(lengths):
    """First span row of every sentence of a batch, and the total: ``(n_sentences + 1,)``.

    Parameters
    ----------
    lengths : array-like of int of shape (n_sentences,)
        Number of words of each sentence, at least 1.

    Returns
    -------
    offsets : ndarray of int64, shape (n_sentences + 1,)
        Sentence ``i`` has the span rows ``offsets[i]:offsets[i + 1]``.
    """
    lengths = check_sentence_lengths(lengths, "word")
    spans = lengths * (lengths + 1) // 2
    if spans.astype(np.float64).sum() > 2.0 ** 62:  # (a total that int64 would wrap)
        raise ValueError("the sentences have more than 2**62 spans in all.")
    return np.concatenate(([0], np.cumsum(spans))).astype(np.int64)


# ----------------------------------------------------------------------------- grammar

def _mask(value, name, size):
    """A boolean mask of ``size`` entries (booleans, or integers 0 and 1)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biu":
        raise TypeError(f"{name} must be a boolean mask, got dtype {array.dtype}.")
    if array.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {array.shape}.")
    if array.dtype.kind != "b" and np.any((array != 0) & (array != 1)):
        raise ValueError(f"{name} must hold booleans (or 0 and 1).")
    return array.astype(bool)


def _symbols(value, name, n_symbols, shape):
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {array.dtype}.")
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}.")
    if array.size and (array.min() < 0 or array.max() >= n_symbols):
        raise ValueError(
            f"{name} must hold symbols in [0, {n_symbols}), the range of the root mask.")
    return array.astype(np.int64)


def _readonly(array):
    array.setflags(write=False)
    return array


class Grammar:
    """A binary grammar over labels that stand for collapsed unary chains.

    The symbols are ``0..n_symbols-1`` and the labels ``0..n_labels-1``; label ``a`` has the
    top symbol ``top[a]`` and the bottom symbol ``bottom[a]`` (``top[a] == bottom[a]`` for a
    plain label). The grammar is immutable; its arrays are read-only.

    Parameters
    ----------
    top, bottom : array-like of int of shape (n_labels,)
        Top and bottom symbol of each label, in ``[0, n_symbols)``.
    lexical, phrasal : array-like of bool of shape (n_labels,)
        Labels allowed on words (length-1 spans) and on longer spans. A label may be both.
    root : array-like of bool of shape (n_symbols,)
        Symbols allowed as the top symbol of the root span's label; its length gives
        ``n_symbols``.
    rules : array-like of int of shape (n_rules, 3)
        The binary rules ``(parent, left child, right child)`` over symbols, each at most
        once. Rule ``r`` is scored by ``rule_scores[r]`` in the inference functions.

    Attributes
    ----------
    n_labels, n_symbols, n_rules : int
    """

    __slots__ = ("_top", "_bottom", "_lexical", "_phrasal", "_root", "_rules", "_order",
                 "_ints")

    def __init__(self, top, bottom, lexical, phrasal, root, rules):
        root_array = np.asarray(root)
        if root_array.ndim != 1 or root_array.shape[0] < 1:
            raise ValueError(
                f"root must be a non-empty 1-D mask over symbols, got shape "
                f"{root_array.shape}.")
        n_symbols = root_array.shape[0]
        top_array = np.asarray(top)
        if top_array.ndim != 1 or top_array.shape[0] < 1:
            raise ValueError(
                f"top must be a non-empty 1-D array over labels, got shape {top_array.shape}.")
        n_labels = top_array.shape[0]
        top = _symbols(top, "top", n_symbols, (n_labels,))
        bottom = _symbols(bottom, "bottom", n_symbols, (n_labels,))
        lexical = _mask(lexical, "lexical", n_labels)
        phrasal = _mask(phrasal, "phrasal", n_labels)
        root = _mask(root, "root", n_symbols)
        rules = np.asarray(rules)
        if rules.size == 0 and rules.ndim == 1:
            rules = rules.reshape(0, 3)    # an empty list: no rules
        if rules.size == 0 and rules.dtype.kind == "f":
            rules = rules.astype(np.int64)
        if rules.ndim != 2 or rules.shape[1] != 3:
            raise ValueError(
                f"rules must have shape (n_rules, 3), rows (parent, left, right), got "
                f"{rules.shape}.")
        rules = _symbols(rules, "rules", n_symbols, rules.shape)
        keys = (rules[:, 0] * n_symbols + rules[:, 1]) * n_symbols + rules[:, 2]
        unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
        if np.any(counts > 1):
            key = unique[np.flatnonzero(counts > 1)[0]]
            twice = np.flatnonzero(keys == key)
            raise ValueError(
                f"rules {int(twice[0])} and {int(twice[1])} are the same rule "
                f"{tuple(int(v) for v in rules[twice[0]])}; each rule may appear once.")
        n_rules = rules.shape[0]
        if 6 * n_rules + 4 * (n_labels + n_symbols) + 3 > _INT32_MAX:
            raise ValueError("the grammar is too large for 32-bit indices.")
        self._top = _readonly(top)
        self._bottom = _readonly(bottom)
        self._lexical = _readonly(lexical)
        self._phrasal = _readonly(phrasal)
        self._root = _readonly(root)
        self._rules = _readonly(rules)
        # sorted positions of the compiled kernels: by left child symbol, then rule index
        self._order = _readonly(np.argsort(rules[:, 1], kind="stable"))
        self._ints = _readonly(self._compiled_ints())

    def __setattr__(self, name, value):
        if hasattr(self, "_ints"):
            raise AttributeError("a Grammar is immutable.")
        object.__setattr__(self, name, value)

    def __getstate__(self):
        return (self._top, self._bottom, self._lexical, self._phrasal, self._root,
                self._rules)

    def __setstate__(self, state):
        self.__init__(*state)

    def __repr__(self):
        return (f"Grammar(n_labels={self.n_labels}, n_symbols={self.n_symbols}, "
                f"n_rules={self.n_rules})")

    top = property(lambda self: self._top, doc="Top symbol of each label.")
    bottom = property(lambda self: self._bottom, doc="Bottom symbol of each label.")
    lexical = property(lambda self: self._lexical, doc="Labels allowed on words.")
    phrasal = property(lambda self: self._phrasal, doc="Labels allowed on longer spans.")
    root = property(lambda self: self._root, doc="Symbols allowed at the root.")
    rules = property(lambda self: self._rules, doc="Rules (parent, left, right).")
    n_labels = property(lambda self: self._top.shape[0], doc="Number of labels.")
    n_symbols = property(lambda self: self._root.shape[0], doc="Number of symbols.")
    n_rules = property(lambda self: self._rules.shape[0], doc="Number of rules.")

    def _compiled_ints(self):
        """The int32 description read by ``_cky._grammar_from_arrays`` (layout there)."""
        G = self.n_symbols
        order = self._order
        parent, left, right = (column[order] for column in self._rules.T)

        def starts(symbols):
            return np.concatenate(([0], np.cumsum(np.bincount(symbols, minlength=G))))

        by_parent = np.lexsort((right, left, parent))
        by_right = np.argsort(right, kind="stable")
        parts = [self._top, self._bottom, self._lexical, self._phrasal, self._root,
                 starts(left), left, right, parent, order, starts(parent), by_parent,
                 starts(right), by_right]
        return np.ascontiguousarray(np.concatenate(parts).astype(np.int32))

    def _compiled_floats(self, rule_scores):
        """The float64 description: rule scores and their weights ``exp(score - peak)`` in
        sorted positions, then the largest rule score ``peak`` of each parent symbol (0 for
        a parent without rules)."""
        parent = self._rules[self._order, 0]
        scores = rule_scores[self._order]
        peak = np.full(self.n_symbols, -np.inf)
        np.maximum.at(peak, parent, scores)
        peak[np.isneginf(peak)] = 0.0
        weights = np.exp(scores - peak[parent])
        return np.ascontiguousarray(np.concatenate((scores, weights, peak)))


def _check_grammar(grammar):
    if not isinstance(grammar, Grammar):
        raise TypeError(f"grammar must be a Grammar, got {type(grammar).__name__}.")
    return grammar


def _check_rule_scores(rule_scores, grammar):
    if rule_scores is None:
        return np.zeros(grammar.n_rules, dtype=np.float64)
    array = np.asarray(rule_scores)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"rule_scores must hold real numbers, got dtype {array.dtype}.")
    if array.shape != (grammar.n_rules,):
        raise ValueError(
            f"rule_scores must have shape ({grammar.n_rules},), one per rule, got "
            f"{array.shape}.")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError("rule_scores contains NaN or infinite values; leave a rule out "
                         "of the grammar to forbid it.")
    return array


def _check_span_scores(span_scores, lengths, grammar):
    """Validate a batch; return (span_scores, lengths, span offsets)."""
    grammar = _check_grammar(grammar)
    lengths = check_sentence_lengths(lengths, "word")
    if span_scores is None:
        raise TypeError("span_scores must be an array of numbers, got None.")
    array = np.asarray(span_scores)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"span_scores must hold real numbers, got dtype {array.dtype}.")
    if array.ndim != 2:
        raise ValueError(f"span_scores must be 2-D, got an array of shape {array.shape}.")
    offsets = span_offsets(lengths)
    if array.shape != (offsets[-1], grammar.n_labels):
        raise ValueError(
            f"span_scores must have shape ({offsets[-1]}, {grammar.n_labels}): one row per "
            f"span of the sentences (n (n + 1) / 2 for n words) and one column per label, "
            f"got {array.shape}.")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if np.isnan(array).any() or np.isposinf(array).any():
        raise ValueError("span_scores contains NaN or +inf values (-inf forbids a label).")
    return array, lengths, offsets.astype(np.int64)


def _check_labels(span_labels, offsets, name):
    labels = np.asarray(span_labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {labels.dtype}.")
    if labels.shape != (offsets[-1],):
        raise ValueError(
            f"{name} must have shape ({offsets[-1]},), one label per span row, got "
            f"{labels.shape}.")
    return np.ascontiguousarray(labels, dtype=np.int64)


def _check_nodes(lengths, grammar):
    """Refuse sentences whose k-best hypergraph could not be indexed by 32-bit integers."""
    if not lengths.shape[0]:
        return
    longest = int(lengths.max())
    if longest * (longest + 1) * grammar.n_symbols + 1 > _INT32_MAX:
        raise ValueError(
            f"a sentence of {longest} words is too long for k-best lists over a grammar of "
            f"{grammar.n_symbols} symbols (hypergraph nodes are indexed by 32-bit integers).")


# ----------------------------------------------------------------------------- inference

def cky_decode(span_scores, lengths, grammar, rule_scores=None, n_jobs=None):
    """Highest-scoring tree of every sentence of a batch (Viterbi CKY).

    The CKY recursion (Younger 1967; Kasami 1965) over two charts per span, the best
    subtree per top symbol and per bottom symbol (binary rules), in
    O(n^3 n_rules + n^2 n_labels) per sentence of ``n`` words. Ties go, at the root and at
    every label choice, to the smallest label; at every rule choice, to the smallest split
    point, then the smallest left child symbol, then the smallest rule index: among the best
    trees, the one whose preorder serialisation (per node its label, then for an internal
    node its split point, left child symbol and rule index) is lexicographically smallest.

    Parameters
    ----------
    span_scores : array-like of shape (n_span_rows, n_labels)
        Stacked span scores of the sentences (rows by :func:`span_index`); -inf forbids a
        label on a span.
    lengths : array-like of int of shape (n_sentences,)
        Number of words of each sentence, at least 1.
    grammar : Grammar
    rule_scores : array-like of shape (n_rules,), default=None
        Finite score of each rule; None means zeros.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.

    Returns
    -------
    span_labels : ndarray of int64, shape (n_span_rows,)
        Label of every span of the best tree, -1 for spans off the tree (all -1 for a
        sentence without a tree of finite score).
    scores : ndarray of float64, shape (n_sentences,)
        Score of the best tree, -inf for a sentence without one.
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    ints, floats = grammar._ints, grammar._compiled_floats(
        _check_rule_scores(rule_scores, grammar))

    def solve(scores_part, lengths_part, unused):
        labels = np.empty(scores_part.shape[0], dtype=np.int64)
        best = np.empty(lengths_part.shape[0], dtype=np.float64)
        if lengths_part.shape[0]:
            _cky.viterbi_batch(scores_part, lengths_part, ints, floats, grammar.n_symbols,
                               grammar.n_rules, labels, best)
        return labels, best

    return map_sentence_chunks(solve, span_scores, lengths, offsets, n_jobs, (None,))


def cky_kbest(span_scores, lengths, grammar, rule_scores=None, k=5, n_jobs=None):
    """The ``k`` highest-scoring trees of every sentence of a batch (k-best CKY).

    Lazy k-best derivations on the CKY hypergraph (Huang and Chiang 2005, "Better k-best
    parsing", algorithm 3): one Viterbi pass, then the lists of the best sub-derivations grow
    only where a better tree needs them. The trees are distinct, ranked by decreasing score;
    the first is the tree of :func:`cky_decode`; trees of equal score come in a deterministic
    order. The scores are exact for the sums as the recursion forms them.

    Parameters
    ----------
    span_scores, lengths, grammar, rule_scores, n_jobs
        As for :func:`cky_decode`.
    k : int, default=5
        Number of trees per sentence, at least 1.

    Returns
    -------
    span_labels : ndarray of int64, shape (n_span_rows, k)
        Column ``j`` holds tree ``j`` of each sentence (-1 for spans off the tree, and in
        the columns past the number of trees).
    scores : ndarray of float64, shape (n_sentences, k)
        Scores of the trees, non-increasing along a row, -inf past the number of trees.
    counts : ndarray of int64, shape (n_sentences,)
        Number of trees returned: ``k``, or the number of trees of finite score if smaller.
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    k = check_k(k)
    if 2 * k + 2 > _INT32_MAX:
        raise ValueError(f"k must be below 2**30, got {k}.")
    _check_nodes(lengths, grammar)
    ints, floats = grammar._ints, grammar._compiled_floats(
        _check_rule_scores(rule_scores, grammar))

    def solve(scores_part, lengths_part, unused):
        labels = np.empty((scores_part.shape[0], k), dtype=np.int64)
        best = np.empty((lengths_part.shape[0], k), dtype=np.float64)
        counts = np.zeros(lengths_part.shape[0], dtype=np.int64)
        if lengths_part.shape[0]:
            _cky.kbest_batch(scores_part, lengths_part, ints, floats, grammar.n_symbols,
                             grammar.n_rules, k, labels, best, counts)
        return labels, best, counts

    return map_sentence_chunks(solve, span_scores, lengths, offsets, n_jobs, (None,))


def cky_best_other(span_scores, lengths, grammar, exclude, rule_scores=None, n_jobs=None):
    """The highest-scoring tree of every sentence that differs from a given tree.

    The oracle of the 0/1 loss: the Viterbi tree when it differs from ``exclude``, else the
    second tree of the 2-best lists of :func:`cky_kbest` (same ties).

    Parameters
    ----------
    span_scores, lengths, grammar, rule_scores, n_jobs
        As for :func:`cky_decode`.
    exclude : array-like of int of shape (n_span_rows,)
        The tree to avoid, one label per span row (-1 off the tree); a labelling that is
        not a tree of the grammar excludes nothing.

    Returns
    -------
    span_labels : ndarray of int64, shape (n_span_rows,)
        The best tree other than ``exclude`` (all -1 for a sentence without one).
    scores : ndarray of float64, shape (n_sentences,)
        Its score, -inf for a sentence without one.
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    exclude = _check_labels(exclude, offsets, "exclude")
    _check_nodes(lengths, grammar)
    ints, floats = grammar._ints, grammar._compiled_floats(
        _check_rule_scores(rule_scores, grammar))

    def solve(scores_part, lengths_part, exclude_part):
        labels = np.empty(scores_part.shape[0], dtype=np.int64)
        best = np.empty(lengths_part.shape[0], dtype=np.float64)
        if lengths_part.shape[0]:
            _cky.best_other_batch(scores_part, lengths_part, ints, floats, grammar.n_symbols,
                                  grammar.n_rules, exclude_part, labels, best)
        return labels, best

    return map_sentence_chunks(solve, span_scores, lengths, offsets, n_jobs, (exclude,))


def inside_outside(span_scores, lengths, grammar, rule_scores=None, n_jobs=None):
    """Log-partition, span-label marginals and expected rule counts of every sentence.

    The inside-outside algorithm (Baker 1979; Lari and Young 1990) for
    ``p(tree) = exp(score(tree) - log Z)`` over the trees of the grammar. The inner sums run
    on exponentials rescaled per span and per parent symbol, and any rescaled sum that
    underflows is recomputed by an exact log-sum-exp, so for any finite or -inf scores,
    whatever their range, log Z is exact to a few ulps and the marginals and counts have
    relative errors of about 1e-16 times the magnitude of the tree scores (1e-12 for scores
    near 1e4). ``marginals`` is the gradient of ``log_partition``
    with respect to ``span_scores`` and ``rule_counts`` its gradient with respect to
    ``rule_scores``.

    Parameters
    ----------
    span_scores, lengths, grammar, rule_scores, n_jobs
        As for :func:`cky_decode`.

    Returns
    -------
    marginals : ndarray of float64, shape (n_span_rows, n_labels)
        Probability that the tree has a node on the span carrying the label.
    rule_counts : ndarray of float64, shape (n_sentences, n_rules)
        Expected number of internal nodes using each rule, summed over split points.
    log_partition : ndarray of float64, shape (n_sentences,)
        ``log sum_trees exp(score)``; -inf for a sentence without a tree of finite score
        (its marginals and counts are then zero).
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    ints, floats = grammar._ints, grammar._compiled_floats(
        _check_rule_scores(rule_scores, grammar))

    def solve(scores_part, lengths_part, unused):
        marginals = np.empty(scores_part.shape, dtype=np.float64)
        counts = np.empty((lengths_part.shape[0], grammar.n_rules), dtype=np.float64)
        log_z = np.empty(lengths_part.shape[0], dtype=np.float64)
        if lengths_part.shape[0]:
            _cky_inside.inside_outside_batch(scores_part, lengths_part, ints, floats,
                                             grammar.n_symbols, grammar.n_rules, marginals,
                                             counts, log_z)
        return marginals, counts, log_z

    return map_sentence_chunks(solve, span_scores, lengths, offsets, n_jobs, (None,))


def log_partition(span_scores, lengths, grammar, rule_scores=None, n_jobs=None):
    """Log-partition ``log sum_trees exp(score)`` of every sentence (inside pass alone).

    The inside recursion of :func:`inside_outside` (same rescaling and exact fallbacks), at
    a fraction of its cost when the marginals are not needed.

    Parameters
    ----------
    span_scores, lengths, grammar, rule_scores, n_jobs
        As for :func:`cky_decode`.

    Returns
    -------
    log_partition : ndarray of float64, shape (n_sentences,)
        -inf for a sentence without a tree of finite score.
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    ints, floats = grammar._ints, grammar._compiled_floats(
        _check_rule_scores(rule_scores, grammar))

    def solve(scores_part, lengths_part, unused):
        log_z = np.empty(lengths_part.shape[0], dtype=np.float64)
        if lengths_part.shape[0]:
            _cky_inside.inside_batch(scores_part, lengths_part, ints, floats,
                                     grammar.n_symbols, grammar.n_rules, log_z)
        return (log_z,)

    return map_sentence_chunks(solve, span_scores, lengths, offsets, n_jobs, (None,))[0]


# ----------------------------------------------------------------------------- given trees

_TREE_ERRORS = {
    1: "a label out of [-1, n_labels)",
    2: "an unlabelled word (every word is a node of the tree)",
    3: "a word whose label is not lexical",
    4: "an unlabelled root span [0, n)",
    5: "a root label whose top symbol is not allowed as a root",
    6: "a span of two or more words whose label is not phrasal",
    7: "a labelled span without two labelled children [i, k) and [k, j) (spans not nested)",
    8: "a node whose rule (bottom[parent], top[left], top[right]) is not in the grammar",
    9: "a labelled span that is not a node of the tree (crossing or extra brackets)",
}


def check_span_tree(span_labels, lengths, grammar):
    """Raise ValueError unless every sentence's labelling is a tree of the grammar.

    A tree labels ``2 n - 1`` spans: every word with a lexical label, the root span
    ``[0, n)`` with a label whose top symbol is allowed as a root, the other spans with
    phrasal labels, so that the labelled spans form a full binary bracketing whose every
    internal node uses a rule of the grammar. The labels of the other spans are -1.

    Parameters
    ----------
    span_labels : array-like of int of shape (n_span_rows,)
        One label per span row (rows by :func:`span_index`, sentences stacked).
    lengths : array-like of int of shape (n_sentences,)
        Number of words of each sentence, at least 1.
    grammar : Grammar

    Raises
    ------
    ValueError
        Naming the first sentence whose labelling is not a tree, the span and the reason.
    """
    grammar = _check_grammar(grammar)
    offsets = span_offsets(lengths)
    lengths = check_sentence_lengths(lengths, "word")
    labels = _check_labels(span_labels, offsets, "span_labels")
    errors = np.zeros(lengths.shape[0], dtype=np.int64)
    bad_spans = np.zeros(lengths.shape[0], dtype=np.int64)
    if lengths.shape[0]:
        floats = grammar._compiled_floats(np.zeros(grammar.n_rules))
        _cky.tree_check_batch(labels, lengths, grammar._ints, floats, grammar.n_labels,
                              grammar.n_symbols, grammar.n_rules, errors, bad_spans)
    if np.any(errors):
        i = int(np.flatnonzero(errors)[0])
        n = int(lengths[i])
        where = ""
        if bad_spans[i] >= 0:
            start, end = span_index(n)
            s = int(bad_spans[i])
            where = (f" at span [{int(start[s])}, {int(end[s])}) (label "
                     f"{int(labels[offsets[i] + s])})")
        raise ValueError(
            f"span_labels of sentence {i} (n = {n}) is not a tree of the grammar: "
            f"{_TREE_ERRORS[int(errors[i])]}{where}.")


def tree_score(span_labels, span_scores, lengths, grammar, rule_scores=None):
    """Score of a given tree of every sentence.

    The sum of ``span_scores[span, label]`` over the tree's nodes and of ``rule_scores`` over
    the rules of its internal nodes (-inf when a node's label is forbidden). The trees are
    checked first (:func:`check_span_tree`).

    Parameters
    ----------
    span_labels : array-like of int of shape (n_span_rows,)
        The trees, one label per span row, -1 off the tree.
    span_scores, lengths, grammar, rule_scores
        As for :func:`cky_decode`.

    Returns
    -------
    scores : ndarray of float64, shape (n_sentences,)
    """
    span_scores, lengths, offsets = _check_span_scores(span_scores, lengths, grammar)
    rule_scores = _check_rule_scores(rule_scores, grammar)
    check_span_tree(span_labels, lengths, grammar)
    labels = _check_labels(span_labels, offsets, "span_labels")
    scores = np.zeros(lengths.shape[0], dtype=np.float64)
    if lengths.shape[0]:
        _cky.tree_score_batch(labels, span_scores, lengths, grammar._ints,
                              grammar._compiled_floats(rule_scores), grammar.n_symbols,
                              grammar.n_rules, scores)
    return scores
