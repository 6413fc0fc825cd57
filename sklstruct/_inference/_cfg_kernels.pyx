"""Per-example kernels of constituency trees whose rows are the spans of a sentence.

A sentence of ``n`` words is an example of ``n (n + 1) / 2`` rows, its spans in the layout of
:mod:`sklstruct._inference._cky` (by length, then start: the words first, the root span
last). State 0 of a row means "not a node of the tree", state ``a + 1`` "a node labelled
``a``" (a label of the :class:`~sklstruct._inference.cfg.Grammar`). The pairwise block holds
one weight per rule of the grammar; the pairwise statistics of a tree are its rule counts.

The score of a tree is ``sum_rows scores[row, y_row] + theta . rule_counts``: every row
contributes, the spans off the tree in state 0. Relative to the all-absent labelling, a node
labelled ``a`` on span ``s`` adds ``scores[s, a + 1] - scores[s, 0]``, so the oracles are
those of :mod:`sklstruct._inference._cky` (Viterbi CKY) and
:mod:`sklstruct._inference._cky_inside` (inside-outside) on these differences, with the
rule scores ``theta``. Every method computes the grammar's rule weights from the ``theta``
it is given (O(n_rules)), and the charts, sized for the longest sentence, are reused from
call to call. :func:`tree_rules` lists the rules of given trees (the rule counts of the
structure's pairwise statistics).
"""

import numpy as np

from libc.math cimport INFINITY, exp
from libc.stdlib cimport free, malloc

from sklstruct._inference._cky cimport (Grammar, _cky_viterbi, _find_rule,
                                        _grammar_floats_size, _grammar_from_arrays,
                                        _n_spans, _span_at, _span_tree_check,
                                        _viterbi_chart_size)
from sklstruct._inference._cky_inside cimport _cky_inside_outside, _inside_outside_size
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._typedefs cimport int32_t, int64_t, intp_t


cdef void _set_rule_scores(Grammar* g, const double* theta, double* floats) noexcept nogil:
    """Write the float64 grammar description of ``theta`` (rule scores in the caller's rule
    order; NULL means zeros) into ``floats``, which ``g`` points into: the scores in sorted
    positions, their weights ``exp(score - peak)`` and the largest score ``peak`` of each
    parent symbol (0 for a parent without rules), as ``cfg.Grammar._compiled_floats``."""
    cdef intp_t R = g.n_rules, G = g.n_symbols, q, x
    cdef double* score = floats
    cdef double* weight = floats + R
    cdef double* peak = floats + 2 * R
    cdef double value
    for x in range(G):
        peak[x] = -INFINITY
    for q in range(R):
        value = theta[g.rule_index[q]] if theta != NULL else 0.0
        score[q] = value
        if value > peak[g.rule_parent[q]]:
            peak[g.rule_parent[q]] = value
    for x in range(G):
        if peak[x] == -INFINITY:
            peak[x] = 0.0
    for q in range(R):
        weight[q] = exp(score[q] - peak[g.rule_parent[q]])


cdef class CFGKernels(ExampleKernels):
    """Constituency trees over span rows (see the module doc).

    Parameters
    ----------
    offsets : ndarray of int64 of shape (n_sentences + 1,)
        Row offsets of the sentences: sentence ``i`` of ``n_i`` words has
        ``n_i (n_i + 1) / 2`` rows.
    n_words : ndarray of int64 of shape (n_sentences,)
        The sentence lengths ``n_i >= 1``.
    grammar : sklstruct._inference.cfg.Grammar
        The grammar; the kernels have ``grammar.n_labels + 1`` states and
        ``grammar.n_rules`` pairwise parameters.
    """

    cdef readonly object n_words, grammar
    cdef object _ints
    cdef const int64_t* _n_words
    cdef Grammar _g
    cdef intp_t _longest
    cdef double* _floats
    cdef double* _spans
    cdef double* _chart
    cdef double* _marginals
    cdef int64_t* _labels

    def __cinit__(self, *args, **kwargs):
        self._floats = NULL
        self._spans = NULL
        self._chart = NULL
        self._marginals = NULL
        self._labels = NULL

    def __init__(self, offsets, n_words, grammar):
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.n_words = np.ascontiguousarray(n_words, dtype=np.int64)
        if self.n_words.ndim != 1 or offsets.shape != (self.n_words.shape[0] + 1,) \
                or np.any(self.n_words < 1) \
                or np.any(np.diff(offsets) != self.n_words * (self.n_words + 1) // 2):
            raise ValueError("every sentence of n >= 1 words needs n (n + 1) / 2 span rows.")
        cdef intp_t K = grammar.n_labels, G = grammar.n_symbols, R = grammar.n_rules
        cdef intp_t longest = int(self.n_words.max()) if self.n_words.shape[0] else 1
        super().__init__(offsets, K + 1, R, max(longest - 1, 0), True)
        self.grammar = grammar
        self._ints = grammar._ints
        cdef const int32_t[::1] ints = self._ints
        cdef const int64_t[::1] words = self.n_words
        self._n_words = &words[0] if words.shape[0] else NULL
        self._longest = longest
        cdef intp_t spans = _n_spans(longest)
        self._floats = <double*> malloc(_grammar_floats_size(G, R) * sizeof(double))
        self._spans = <double*> malloc(spans * K * sizeof(double))
        self._chart = <double*> malloc(max(_viterbi_chart_size(longest, G),
                                           _inside_outside_size(longest, K, G, R))
                                       * sizeof(double))
        self._marginals = <double*> malloc(spans * K * sizeof(double))
        self._labels = <int64_t*> malloc(spans * sizeof(int64_t))
        if (self._floats == NULL or self._spans == NULL or self._chart == NULL
                or self._marginals == NULL or self._labels == NULL):
            raise MemoryError("could not allocate the CKY kernels' charts")
        _grammar_from_arrays(&self._g, &ints[0], self._floats, K, G, R)
        _set_rule_scores(&self._g, NULL, self._floats)

    def __dealloc__(self):
        free(self._floats)
        free(self._spans)
        free(self._chart)
        free(self._marginals)
        free(self._labels)

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t n = self._n_words[i], S = _n_spans(n), K = self._g.n_labels, s, a
        cdef double base
        _set_rule_scores(&self._g, theta, self._floats)
        for s in range(S):
            base = scores[s * (K + 1)] + token_loss[s * (K + 1)]
            for a in range(K):
                self._spans[s * K + a] = (scores[s * (K + 1) + a + 1]
                                          + token_loss[s * (K + 1) + a + 1] - base)
        _cky_viterbi(self._spans, n, &self._g, self._chart, self._labels)
        for s in range(S):
            labels[s] = self._labels[s] + 1

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        """The rules of the tree's internal nodes; a node without two labelled children
        or whose rule is not in the grammar (a labelling that is not a tree) adds none."""
        cdef intp_t n = self._n_words[i], length, start, end, k, a, q, count = 0
        cdef const Grammar* g = &self._g
        for length in range(2, n + 1):
            for start in range(n - length + 1):
                end = start + length
                a = labels[_span_at(n, start, end)] - 1
                if a < 0:
                    continue
                k = end - 1
                while k > start and labels[_span_at(n, start, k)] < 1:
                    k -= 1
                if k == start or labels[_span_at(n, k, end)] < 1:
                    continue
                q = _find_rule(g, g.bottom[a], g.top[labels[_span_at(n, start, k)] - 1],
                               g.top[labels[_span_at(n, k, end)] - 1])
                if q < 0:
                    continue
                if count == self.max_pairwise_entries:
                    return count  # (a labelling that is not a tree; the buffers end here)
                index[count] = g.rule_index[q]
                value[count] = 1.0
                count += 1
        return count

    def pairwise_statistics_example(self, intp_t i, labels):
        """Dense pairwise statistics (rule counts) of a labelling of example ``i``, which
        must be a tree of the grammar (``ValueError`` otherwise)."""
        from sklstruct._inference.cfg import check_span_tree

        lo, length = self._example(i)
        lab = np.asarray(labels)
        if lab.shape != (length,) or lab.dtype.kind not in "iu":
            raise ValueError("labels do not match the example.")
        check_span_tree(lab.astype(np.int64) - 1, self.n_words[i:i + 1], self.grammar)
        return ExampleKernels.pairwise_statistics_example(self, i, lab)

    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil:
        cdef intp_t n = self._n_words[i], S = _n_spans(n), K = self._g.n_labels, s, a
        cdef double base, offset = 0.0, log_z, total
        _set_rule_scores(&self._g, pair_pot, self._floats)
        for s in range(S):
            base = node_pot[s * (K + 1)]
            offset += base
            for a in range(K):
                self._spans[s * K + a] = node_pot[s * (K + 1) + a + 1] - base
        log_z = _cky_inside_outside(self._spans, n, &self._g, self._chart, self._marginals,
                                    pair_marg)
        for s in range(S):
            total = 0.0
            for a in range(K):
                node_marg[s * (K + 1) + a + 1] = self._marginals[s * K + a]
                total += self._marginals[s * K + a]
            node_marg[s * (K + 1)] = 1.0 - total if total < 1.0 else 0.0
        return log_z + offset


def tree_rules(const int64_t[::1] states, const int64_t[::1] n_words, grammar,
               int64_t[::1] rules):
    """The rule of every internal node of every sentence's tree, sentence by sentence.

    ``states`` are span states (0 off the tree, ``a + 1`` for label ``a``), sentences
    stacked; ``rules`` (sum of ``n - 1``) receives the rule indices of each sentence's
    internal nodes (by span length, then start). Returns the index of the first sentence
    whose states are not a tree of the grammar (-1 when all are).
    """
    cdef Grammar g
    cdef const int32_t[::1] ints = grammar._ints
    cdef intp_t K = grammar.n_labels, G = grammar.n_symbols, R = grammar.n_rules
    cdef intp_t i, n, s, S, row = 0, out = 0, longest, length, start, end, k, a, bad = -1
    cdef intp_t bad_span
    cdef double* floats = <double*> malloc((2 * R + G + 1) * sizeof(double))
    cdef int64_t* labels = NULL
    cdef const Grammar* gp = &g
    if floats == NULL:
        raise MemoryError("could not allocate the grammar's scores")
    try:
        lengths = np.asarray(n_words)
        longest = int(lengths.max()) if lengths.shape[0] else 1
        if lengths.shape[0] and int(lengths.min()) < 1:
            raise ValueError("every sentence needs at least one word")
        if states.shape[0] != int(np.sum(lengths * (lengths + 1) // 2)) \
                or rules.shape[0] != int(np.sum(lengths - 1)):
            raise ValueError("states must hold n (n + 1) / 2 spans and rules n - 1 nodes per "
                             "sentence of n words")
        labels = <int64_t*> malloc(_n_spans(longest) * sizeof(int64_t))
        if labels == NULL:
            raise MemoryError("could not allocate the labels of a sentence")
        _grammar_from_arrays(&g, &ints[0], floats, K, G, R)
        with nogil:
            for i in range(n_words.shape[0]):
                n = n_words[i]
                S = _n_spans(n)
                for s in range(S):
                    labels[s] = states[row + s] - 1
                if _span_tree_check(labels, n, gp, &bad_span) != 0:
                    bad = i
                    break
                for length in range(2, n + 1):
                    for start in range(n - length + 1):
                        end = start + length
                        a = labels[_span_at(n, start, end)]
                        if a < 0:
                            continue
                        k = end - 1
                        while labels[_span_at(n, start, k)] < 0:
                            k -= 1
                        rules[out] = g.rule_index[_find_rule(
                            gp, g.bottom[a], g.top[labels[_span_at(n, start, k)]],
                            g.top[labels[_span_at(n, k, end)]])]
                        out += 1
                row += S
    finally:
        free(floats)
        free(labels)
    return bad
