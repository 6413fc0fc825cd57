"""Compiled CKY inference for weighted context-free grammars over binary trees.

This module holds the grammar description, Viterbi CKY, the k best trees and the check and
score of given trees; the inside-outside kernels (log-partition, span-label marginals,
expected rule counts) are in :mod:`sklstruct._inference._cky_inside`. Both share the
:c:type:`Grammar`, the span layout and the small inline helpers of ``_cky.pxd``.

**Trees.** A sentence of ``n >= 1`` words has the spans ``[i, j)``, ``0 <= i < j <= n``. A
tree is a full binary bracketing of the sentence whose every node (span) carries one label
``a`` in ``0..K-1``. A label stands for a collapsed unary chain: it has a top symbol
``top[a]`` and a bottom symbol ``bottom[a]`` (symbols ``0..G-1``). Words (length-1 spans)
carry lexical labels only, longer spans phrasal labels only, and the top symbol of the root
span's label must be allowed as a root. A node labelled ``a`` over children labelled ``b, c``
uses the binary rule ``(bottom[a], top[b], top[c])``, which must be one of the grammar's rules.
The score of a tree is the sum over its nodes of ``span_scores[span, label]`` plus the sum over
its internal nodes of ``theta[rule]``.

**Span layout.** The span scores of a sentence are a C-ordered (n (n + 1) / 2, K) matrix whose
rows are the spans by length, then by start: ``[i, j)`` is row
``(j - i - 1) (2 n - (j - i) + 2) / 2 + i`` (``_span_at``), so the words come first (row ``i``
is word ``i``) and the root span ``[0, n)`` is the last row. A tree is written as one label per
span, -1 for the spans that are not nodes of the tree. A -inf span score forbids that label on
that span.

**Grammar description.** ``_grammar_from_arrays`` reads one int32 and one float64 array
(built by :mod:`sklstruct._inference.cfg`) into a :c:type:`Grammar` of pointers. The rules are
used in *sorted position* order: by left child symbol, then by rule index (the caller's
order); ``rule_index`` maps a position back to the caller's rule.

**Viterbi CKY.** Two charts per span: the best score of a subtree whose root label has top
symbol ``X`` (``top_best``) and the best score of a subtree below the collapsed chain of
bottom symbol ``P``, i.e. over the binary rules of ``P`` (``bottom_best``):

    bottom_best[ij, P] = max_{k, r = (P, L, R)} theta[r] + top_best[ik, L] + top_best[kj, R]
    top_best[ij, X] = max_{allowed a, top[a] = X} s[ij, a] + bottom_best[ij, bottom[a]]

(``s[ii+1, a]`` alone on words), O(n^3 |R| + n^2 K) per sentence. Ties are broken towards the
first maximiser in this order: at the root the smallest label; for a label choice the smallest
label; for a rule choice the smallest split point, then the smallest left child symbol, then the
smallest rule index. The returned tree is therefore, among the best trees, the one whose
preorder serialisation (per node: its label, then for an internal node its split point, left
child symbol and rule index; then its left subtree, then its right subtree) is
lexicographically smallest. Sums are taken in the order written above.

**k best.** The CKY hypergraph has a node per (span, top symbol) (a choice of label), a node
per (span, bottom symbol) (a choice of split point and rule) and a root node; every tree is
exactly one derivation of the root. The lists of the best derivations of every node are built
lazily (Huang and Chiang, 2005, "Better k-best parsing", algorithm 3): the Viterbi chart gives
the first entry of every list; a node's list grows only when a parent needs its next entry;
a node's heap starts with the best derivation of each of its ``k`` best hyperedges and, after
a derivation ``(e, j1, j2)`` is taken, receives ``(e, j1, j2 + 1)`` and, when ``j2 == 0``,
``(e, j1 + 1, 0)`` (every derivation has one predecessor, so none is pushed twice). Heap ties
go to the smallest (label or split point, sorted rule position, j1, j2), so the first tree is
the Viterbi tree; the ranking of trees of equal score is deterministic but not further
specified. The k best scores are exact for the scores as the recursion sums them.

**No tree.** A sentence without a tree of finite score decodes to score -inf and all labels
-1 and has no k-best tree (count 0).

Every batched function takes the concatenated span scores of the sentences and their lengths,
writes into preallocated outputs and runs without the GIL, checking for Ctrl-C between
sentences. The inputs are validated by the wrappers of :mod:`sklstruct._inference.cfg`.
"""
from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc

from sklstruct._inference._workspace cimport _resize
from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t

# Errors of _span_tree_check
cdef enum:
    TREE_OK = 0
    TREE_LABEL_RANGE = 1
    TREE_WORD_MISSING = 2
    TREE_WORD_NOT_LEXICAL = 3
    TREE_ROOT_MISSING = 4
    TREE_ROOT_SYMBOL = 5
    TREE_SPAN_NOT_PHRASAL = 6
    TREE_NO_SPLIT = 7
    TREE_RULE_ABSENT = 8
    TREE_EXTRA_SPAN = 9


# ----------------------------------------------------------------------------- grammar, spans

cdef void _grammar_from_arrays(Grammar* grammar, const int32_t* ints, const double* floats,
                               intp_t n_labels, intp_t n_symbols,
                               intp_t n_rules) noexcept nogil:
    """Point ``grammar`` into the arrays built by ``cfg.Grammar`` (layout below).

    ``ints``: top, bottom, lexical, phrasal (K each), root (G), left_start (G + 1),
    rule_left, rule_right, rule_parent, rule_index (R each), parent_start (G + 1),
    by_parent (R), right_start (G + 1), by_right (R). ``floats``: rule_score, rule_weight
    (R each), parent_peak (G). The arrays must outlive the grammar.
    """
    cdef const int32_t* p = ints
    grammar.n_labels = n_labels
    grammar.n_symbols = n_symbols
    grammar.n_rules = n_rules
    grammar.top = p
    p += n_labels
    grammar.bottom = p
    p += n_labels
    grammar.lexical = p
    p += n_labels
    grammar.phrasal = p
    p += n_labels
    grammar.root = p
    p += n_symbols
    grammar.left_start = p
    p += n_symbols + 1
    grammar.rule_left = p
    p += n_rules
    grammar.rule_right = p
    p += n_rules
    grammar.rule_parent = p
    p += n_rules
    grammar.rule_index = p
    p += n_rules
    grammar.parent_start = p
    p += n_symbols + 1
    grammar.by_parent = p
    p += n_rules
    grammar.right_start = p
    p += n_symbols + 1
    grammar.by_right = p
    grammar.rule_score = floats
    grammar.rule_weight = floats + n_rules
    grammar.parent_peak = floats + 2 * n_rules


cdef inline void _span_of(intp_t n, intp_t span, intp_t* start, intp_t* end) noexcept nogil:
    """The span [start, end) at index ``span`` (inverse of ``_span_at``), in O(n)."""
    cdef intp_t length = 1, base = 0
    while span >= base + n - length + 1:
        base += n - length + 1
        length += 1
    start[0] = span - base
    end[0] = span - base + length


# ----------------------------------------------------------------------------- Viterbi

cdef inline void _best_labels(const double* row, const Grammar* g, const int32_t* allowed,
                              const double* below, double* best) noexcept nogil:
    """``best[X]``: the best ``row[a] (+ below[bottom[a]])`` over allowed labels of top X."""
    cdef intp_t a, x
    cdef double value
    for x in range(g.n_symbols):
        best[x] = -INFINITY
    for a in range(g.n_labels):
        if not allowed[a]:
            continue
        if below == NULL:
            value = row[a]
        else:
            value = row[a] + below[g.bottom[a]]
        x = g.top[a]
        if value > best[x]:
            best[x] = value


cdef void _viterbi_chart(const double* span_scores, intp_t n, const Grammar* g,
                         double* chart) noexcept nogil:
    """Fill the Viterbi chart of a sentence: top_best (n_spans x G), then bottom_best
    (n_spans x G). The maximisers are not stored: ``_label_choice`` and ``_rule_choice``
    find them for the nodes of the returned trees (a branch-free max runs 1.5 to 1.8 times
    faster than a max that records its arguments, 30 symbols and 500 rules)."""
    cdef intp_t G = g.n_symbols, K = g.n_labels, S = _n_spans(n)
    cdef intp_t length, i, j, k, s, x, q, q_end, parent
    cdef double* top_best = chart
    cdef double* bottom_best = chart + S * G
    cdef double* best
    cdef const double* left
    cdef const double* right
    cdef double value, left_value
    for i in range(n):
        _best_labels(span_scores + i * K, g, g.lexical, NULL, top_best + i * G)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            s = _span_at(n, i, j)
            best = bottom_best + s * G
            for x in range(G):
                best[x] = -INFINITY
            for k in range(i + 1, j):
                left = top_best + _span_at(n, i, k) * G
                right = top_best + _span_at(n, k, j) * G
                for x in range(G):
                    left_value = left[x]
                    if left_value == -INFINITY:
                        continue
                    q_end = g.left_start[x + 1]
                    for q in range(g.left_start[x], q_end):
                        value = g.rule_score[q] + left_value + right[g.rule_right[q]]
                        parent = g.rule_parent[q]
                        # an unconditional store: compiled to a branch-free max
                        best[parent] = value if value > best[parent] else best[parent]
            _best_labels(span_scores + s * K, g, g.phrasal, best, top_best + s * G)


cdef inline intp_t _label_choice(const double* span_scores, intp_t n, const Grammar* g,
                                 const double* chart, intp_t s, intp_t length,
                                 intp_t x) noexcept nogil:
    """The smallest allowed label of top symbol ``x`` reaching ``top_best[s, x]``."""
    cdef intp_t a, G = g.n_symbols, K = g.n_labels
    cdef const int32_t* allowed = _allowed(g, length)
    cdef const double* row = span_scores + s * K
    cdef const double* below = chart + (_n_spans(n) + s) * G
    cdef double target = chart[s * G + x], value
    for a in range(K):
        if not allowed[a] or g.top[a] != x:
            continue
        value = row[a] if length == 1 else row[a] + below[g.bottom[a]]
        if value == target:
            return a
    return -1


cdef inline void _rule_choice(intp_t n, const Grammar* g, const double* chart, intp_t i,
                              intp_t j, intp_t parent, intp_t* split,
                              intp_t* rule) noexcept nogil:
    """The smallest split point, then sorted rule position, reaching
    ``bottom_best[[i, j), parent]`` (the first maximiser of ``_viterbi_chart``)."""
    cdef intp_t G = g.n_symbols, k, a, q
    cdef const double* left
    cdef const double* right
    cdef double target = chart[(_n_spans(n) + _span_at(n, i, j)) * G + parent]
    split[0] = -1
    rule[0] = -1
    for k in range(i + 1, j):
        left = chart + _span_at(n, i, k) * G
        right = chart + _span_at(n, k, j) * G
        for a in range(g.parent_start[parent], g.parent_start[parent + 1]):
            q = g.by_parent[a]
            if (g.rule_score[q] + left[g.rule_left[q]] + right[g.rule_right[q]] == target
                    and (rule[0] < 0 or q < rule[0])):
                rule[0] = q
        if rule[0] >= 0:
            split[0] = k
            return


cdef inline double _root_choice(const double* span_scores, intp_t n, const Grammar* g,
                                const double* chart, intp_t* label) noexcept nogil:
    """Best score over the root's allowed labels and its smallest maximising label (-1)."""
    cdef intp_t a, G = g.n_symbols, K = g.n_labels, S = _n_spans(n)
    cdef const int32_t* allowed = _allowed(g, n)
    cdef const double* row = span_scores + (S - 1) * K
    cdef const double* below = chart + S * G + (S - 1) * G
    cdef double value, best = -INFINITY
    label[0] = -1
    for a in range(K):
        if not allowed[a] or not g.root[g.top[a]]:
            continue
        if n == 1:
            value = row[a]
        else:
            value = row[a] + below[g.bottom[a]]
        if value > best:
            best = value
            label[0] = a
    return best


cdef double _cky_viterbi(const double* span_scores, intp_t n, const Grammar* g,
                         double* chart, int64_t* span_labels) noexcept nogil:
    """Best tree of one sentence (CKY); returns its score.

    ``span_scores`` is the sentence's (n_spans, K) block, ``chart`` holds
    ``_viterbi_chart_size(n, G)`` doubles. ``span_labels`` (n_spans,) receives the tree (-1
    off the tree); without a tree of finite score it is all -1 and -inf is returned. Ties as
    in the module docstring.
    """
    cdef intp_t S = _n_spans(n)
    cdef intp_t length, i, j, k, s, a, q, child, root_label
    cdef double best
    _viterbi_chart(span_scores, n, g, chart)
    best = _root_choice(span_scores, n, g, chart, &root_label)
    for s in range(S):
        span_labels[s] = -1
    if root_label < 0:
        return -INFINITY
    span_labels[S - 1] = root_label
    # parents come after their children in the layout: walk it backwards
    for length in range(n, 1, -1):
        for i in range(n - length + 1):
            j = i + length
            s = _span_at(n, i, j)
            a = span_labels[s]
            if a < 0:
                continue
            _rule_choice(n, g, chart, i, j, g.bottom[a], &k, &q)
            child = _span_at(n, i, k)
            span_labels[child] = _label_choice(span_scores, n, g, chart, child, k - i,
                                               g.rule_left[q])
            child = _span_at(n, k, j)
            span_labels[child] = _label_choice(span_scores, n, g, chart, child, j - k,
                                               g.rule_right[q])
    return best


# ----------------------------------------------------------------------------- k best

cdef inline bint _before(const Derivation* x, const Derivation* y) noexcept nogil:
    """Whether ``x`` ranks before ``y``: higher value, then smaller (edge, rule, first,
    second)."""
    if x.value != y.value:
        return x.value > y.value
    if x.edge != y.edge:
        return x.edge < y.edge
    if x.rule != y.rule:
        return x.rule < y.rule
    if x.first != y.first:
        return x.first < y.first
    return x.second < y.second


cdef inline bint _above(const Derivation* x, const Derivation* y, bint worst_first) noexcept nogil:
    """Heap order: ``x`` before ``y``, or after it in a heap whose root is the worst."""
    if worst_first:
        return _before(y, x)
    return _before(x, y)


cdef inline void _sift_down(Derivation* heap, intp_t size, intp_t position,
                            bint worst_first) noexcept nogil:
    cdef Derivation item = heap[position]
    cdef intp_t child
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and _above(&heap[child + 1], &heap[child], worst_first):
            child += 1
        if not _above(&heap[child], &item, worst_first):
            break
        heap[position] = heap[child]
        position = child
    heap[position] = item


cdef inline void _sift_up(Derivation* heap, intp_t position, bint worst_first) noexcept nogil:
    cdef Derivation item = heap[position]
    cdef intp_t parent
    while position > 0:
        parent = (position - 1) // 2
        if not _above(&item, &heap[parent], worst_first):
            break
        heap[position] = heap[parent]
        position = parent
    heap[position] = item


cdef inline void _offer(Derivation* heap, intp_t* size, intp_t capacity, double value,
                        intp_t edge, intp_t rule) noexcept nogil:
    """Keep the ``capacity`` best hyperedges seen (``heap`` ordered worst first)."""
    cdef Derivation candidate
    candidate.value = value
    candidate.edge = <int32_t> edge
    candidate.rule = <int32_t> rule
    candidate.first = 0
    candidate.second = 0
    if size[0] < capacity:
        heap[size[0]] = candidate
        _sift_up(heap, size[0], True)
        size[0] += 1
    elif _before(&candidate, &heap[0]):
        heap[0] = candidate
        _sift_down(heap, size[0], 0, True)


cdef void _kbest_init(KBestLists* lists, intp_t k) noexcept nogil:
    """Empty lists for at most ``k`` derivations per node (``k >= 1``; ``k >= 2`` for
    ``_cky_best_other``)."""
    lists.k = k
    lists.width = 2 * k + 2
    lists.span_scores = NULL
    lists.grammar = NULL
    lists.n = 0
    lists.n_spans = 0
    lists.chart = NULL
    lists.record_of = NULL
    lists.capacity = 0
    lists.used = 0
    lists.node = NULL
    lists.count = NULL
    lists.heap_size = NULL
    lists.pending = NULL
    lists.lists = NULL
    lists.heaps = NULL


cdef void _kbest_free(KBestLists* lists) noexcept nogil:
    """Free the record pools (``record_of`` belongs to the caller)."""
    free(lists.node)
    free(lists.count)
    free(lists.heap_size)
    free(lists.pending)
    free(lists.lists)
    free(lists.heaps)
    _kbest_init(lists, lists.k)


cdef bint _grow(KBestLists* lists) noexcept nogil:
    """Double the record capacity; False when memory runs out."""
    cdef size_t capacity = 2 * lists.capacity if lists.capacity else 64
    if not (_resize(<void**> &lists.node, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.count, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.heap_size, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.pending, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.lists, capacity * lists.k * sizeof(Derivation))
            and _resize(<void**> &lists.heaps,
                        capacity * lists.width * sizeof(Derivation))):
        return False
    lists.capacity = capacity
    return True


cdef void _kbest_begin(KBestLists* lists, const double* span_scores, intp_t n,
                       const Grammar* g, double* chart, int32_t* record_of) noexcept nogil:
    """Viterbi chart of the sentence and empty lists for its nodes."""
    cdef intp_t node
    _viterbi_chart(span_scores, n, g, chart)
    lists.span_scores = span_scores
    lists.grammar = g
    lists.n = n
    lists.n_spans = _n_spans(n)
    lists.chart = chart
    lists.record_of = record_of
    lists.used = 0
    for node in range(_kbest_nodes(n, g.n_symbols)):
        record_of[node] = -1


cdef inline intp_t _root_node(const KBestLists* lists) noexcept nogil:
    return 2 * lists.n_spans * lists.grammar.n_symbols


cdef inline double _value(const KBestLists* lists, intp_t node, intp_t rank) noexcept nogil:
    """Value of entry ``rank`` of a node's list (entry 0 of a label or rule node from the
    Viterbi chart, which holds the same value)."""
    if rank == 0 and node < _root_node(lists):
        return lists.chart[node]
    return lists.lists[lists.record_of[node] * lists.k + rank].value


cdef inline intp_t _known(const KBestLists* lists, intp_t node) noexcept nogil:
    """Number of entries of a node's list known so far."""
    if lists.record_of[node] < 0:
        return 1
    return lists.count[lists.record_of[node]]


cdef intp_t _open(KBestLists* lists, intp_t node) noexcept nogil:
    """Give a node its record, its heap holding the best derivation of each of its ``k``
    best hyperedges. Returns the record, -1 when memory runs out."""
    cdef const Grammar* g = lists.grammar
    cdef intp_t G = g.n_symbols, K = g.n_labels, S = lists.n_spans, n = lists.n
    cdef intp_t record, s, x, a, i, j, k, q, size = 0, length, root = _root_node(lists)
    cdef const int32_t* allowed
    cdef const double* row
    cdef const double* below
    cdef const double* left
    cdef const double* right
    cdef Derivation* heap
    cdef double value
    if lists.used == lists.capacity and not _grow(lists):
        return -1
    record = lists.used
    lists.used += 1
    lists.record_of[node] = <int32_t> record
    lists.node[record] = <int32_t> node
    lists.count[record] = 0
    lists.pending[record] = 0
    heap = lists.heaps + record * lists.width
    if node == root or node < S * G:
        # a choice of label: at the root among the root labels, else among those of top x
        if node == root:
            s = S - 1
            x = -1
        else:
            s = node // G
            x = node - s * G
        _span_of(n, s, &i, &j)
        length = j - i
        allowed = _allowed(g, length)
        row = lists.span_scores + s * K
        below = lists.chart + S * G + s * G
        for a in range(K):
            if not allowed[a]:
                continue
            if x < 0:
                if not g.root[g.top[a]]:
                    continue
            elif g.top[a] != x:
                continue
            if length == 1:
                value = row[a]
            else:
                value = row[a] + below[g.bottom[a]]
            if value != -INFINITY:
                _offer(heap, &size, lists.k, value, a, 0)
    else:
        # a choice of split point and rule below bottom symbol x
        s = node // G - S
        x = node - (S + s) * G
        _span_of(n, s, &i, &j)
        for k in range(i + 1, j):
            left = lists.chart + _span_at(n, i, k) * G
            right = lists.chart + _span_at(n, k, j) * G
            for a in range(g.parent_start[x], g.parent_start[x + 1]):
                q = g.by_parent[a]
                value = g.rule_score[q] + left[g.rule_left[q]] + right[g.rule_right[q]]
                if value != -INFINITY:
                    _offer(heap, &size, lists.k, value, k, q)
    for a in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, a, False)
    lists.heap_size[record] = <int32_t> size
    return record


cdef inline void _push(KBestLists* lists, intp_t record, double value, intp_t edge,
                       intp_t rule, intp_t first, intp_t second) noexcept nogil:
    cdef Derivation* heap = lists.heaps + record * lists.width
    cdef intp_t size = lists.heap_size[record]
    heap[size].value = value
    heap[size].edge = <int32_t> edge
    heap[size].rule = <int32_t> rule
    heap[size].first = <int32_t> first
    heap[size].second = <int32_t> second
    _sift_up(heap, size, False)
    lists.heap_size[record] = <int32_t> (size + 1)


cdef int _successors(KBestLists* lists, intp_t node, intp_t record,
                     Derivation last) noexcept nogil:
    """Push the successors of the node's last taken derivation ``last``, extending the tail
    lists they need. 0, or -1 when memory runs out."""
    cdef const Grammar* g = lists.grammar
    cdef intp_t G = g.n_symbols, K = g.n_labels, S = lists.n_spans, n = lists.n, k = lists.k
    cdef intp_t s, i, j, tail, left, right, following, q, split
    if node == _root_node(lists) or node < S * G:
        s = S - 1 if node == _root_node(lists) else node // G
        if s < n:
            return 0   # a word: its derivations have no tail
        tail = (S + s) * G + g.bottom[last.edge]
        following = last.first + 1
        if following < k:
            if _lazy(lists, tail, following + 1) < 0:
                return -1
            if _known(lists, tail) > following:
                _push(lists, record,
                      lists.span_scores[s * K + last.edge] + _value(lists, tail, following),
                      last.edge, 0, following, 0)
        return 0
    s = node // G - S
    _span_of(n, s, &i, &j)
    split = last.edge
    q = last.rule
    left = _span_at(n, i, split) * G + g.rule_left[q]
    right = _span_at(n, split, j) * G + g.rule_right[q]
    following = last.second + 1
    if following < k:
        if _lazy(lists, right, following + 1) < 0:
            return -1
        if _known(lists, right) > following:
            _push(lists, record, g.rule_score[q] + _value(lists, left, last.first)
                  + _value(lists, right, following), split, q, last.first, following)
    following = last.first + 1
    if last.second == 0 and following < k:
        if _lazy(lists, left, following + 1) < 0:
            return -1
        if _known(lists, left) > following:
            _push(lists, record, g.rule_score[q] + _value(lists, left, following)
                  + _value(lists, right, 0), split, q, following, 0)
    return 0


cdef int _lazy(KBestLists* lists, intp_t node, intp_t want) noexcept nogil:
    """Extend the node's list to ``want <= k`` entries, or to all its derivations.
    0, or -1 when memory runs out."""
    cdef intp_t record = lists.record_of[node], size
    cdef Derivation* heap
    cdef Derivation last
    if record < 0:
        record = _open(lists, node)
        if record < 0:
            return -1
    while lists.count[record] < want:
        if lists.pending[record]:
            lists.pending[record] = 0
            last = lists.lists[record * lists.k + lists.count[record] - 1]
            if _successors(lists, node, record, last) < 0:
                return -1
        size = lists.heap_size[record]
        if size == 0:
            break
        # the pools may have moved during the recursion: take the pointers afresh
        heap = lists.heaps + record * lists.width
        lists.lists[record * lists.k + lists.count[record]] = heap[0]
        lists.count[record] += 1
        lists.pending[record] = 1
        size -= 1
        heap[0] = heap[size]
        lists.heap_size[record] = <int32_t> size
        _sift_down(heap, size, 0, False)
    return 0


cdef void _write_tree(const KBestLists* lists, intp_t node, intp_t rank, int64_t* labels,
                      intp_t stride) noexcept nogil:
    """Write the labels of derivation ``rank`` of a node at ``labels[span * stride]``."""
    cdef const Grammar* g = lists.grammar
    cdef intp_t G = g.n_symbols, S = lists.n_spans, n = lists.n
    cdef intp_t record = lists.record_of[node], s, i, j, a, split, q, first, second
    cdef const Derivation* entry
    if node == _root_node(lists) or node < S * G:
        s = S - 1 if node == _root_node(lists) else node // G
        if record >= 0:
            entry = lists.lists + record * lists.k + rank
            a = entry.edge
            first = entry.first
        else:
            _span_of(n, s, &i, &j)
            a = _label_choice(lists.span_scores, n, g, lists.chart, s, j - i, node - s * G)
            first = 0
        labels[s * stride] = a
        if s >= n:
            _write_tree(lists, (S + s) * G + g.bottom[a], first, labels, stride)
        return
    s = node // G - S
    _span_of(n, s, &i, &j)
    if record >= 0:
        entry = lists.lists + record * lists.k + rank
        split = entry.edge
        q = entry.rule
        first = entry.first
        second = entry.second
    else:
        _rule_choice(n, g, lists.chart, i, j, node - (S + s) * G, &split, &q)
        first = 0
        second = 0
    _write_tree(lists, _span_at(n, i, split) * G + g.rule_left[q], first, labels, stride)
    _write_tree(lists, _span_at(n, split, j) * G + g.rule_right[q], second, labels, stride)


cdef intp_t _cky_kbest(const double* span_scores, intp_t n, const Grammar* grammar,
                       double* chart, int32_t* record_of, KBestLists* lists, double* scores,
                       int64_t* span_labels) noexcept nogil:
    """The ``lists.k`` best trees of one sentence; returns how many there are (-1 when
    memory runs out).

    ``chart`` as for ``_cky_viterbi``, ``record_of`` holds
    ``_kbest_nodes(n, G)`` int32. ``scores`` (k,) receives the scores (non-increasing, -inf
    past the number of trees of finite score) and ``span_labels`` (n_spans, k) tree ``j`` in
    column ``j`` (-1 off the tree and past the number of trees).
    """
    cdef intp_t k = lists.k, S = _n_spans(n), s, j, count, root, record
    _kbest_begin(lists, span_scores, n, grammar, chart, record_of)
    for s in range(S * k):
        span_labels[s] = -1
    for j in range(k):
        scores[j] = -INFINITY
    root = _root_node(lists)
    if _lazy(lists, root, k) < 0:
        return -1
    record = record_of[root]
    count = lists.count[record]
    for j in range(count):
        scores[j] = lists.lists[record * k + j].value
        _write_tree(lists, root, j, span_labels + j, k)
    return count


cdef int _cky_best_other(const double* span_scores, intp_t n, const Grammar* grammar,
                         const int64_t* given, double* chart, int32_t* record_of,
                         KBestLists* lists, double* score, int64_t* span_labels) noexcept nogil:
    """The best tree of one sentence that differs from ``given`` (n_spans labels, any
    values); 0, or -1 when memory runs out.

    The Viterbi tree when it differs from ``given``, else the second best tree (2-best);
    ``lists.k`` must be at least 2. ``span_labels`` and ``score`` as for ``_cky_viterbi``
    (all -1 and -inf when no other tree has a finite score).
    """
    cdef intp_t S = _n_spans(n), s, record, root
    cdef bint same = True
    _kbest_begin(lists, span_scores, n, grammar, chart, record_of)
    for s in range(S):
        span_labels[s] = -1
    score[0] = -INFINITY
    root = _root_node(lists)
    if _lazy(lists, root, 1) < 0:
        return -1
    record = record_of[root]
    if lists.count[record] == 0:
        return 0
    _write_tree(lists, root, 0, span_labels, 1)
    for s in range(S):
        if span_labels[s] != given[s]:
            same = False
            break
    if not same:
        score[0] = lists.lists[record * lists.k].value
        return 0
    for s in range(S):
        span_labels[s] = -1
    if _lazy(lists, root, 2) < 0:
        return -1
    if lists.count[record] >= 2:
        score[0] = lists.lists[record * lists.k + 1].value
        _write_tree(lists, root, 1, span_labels, 1)
    return 0


# ----------------------------------------------------------------------------- given trees

cdef int _span_tree_check(const int64_t* span_labels, intp_t n, const Grammar* g,
                          intp_t* bad_span) noexcept nogil:
    """Whether a labelling is a tree of the grammar: 0 (``TREE_OK``) or an error code.

    ``bad_span`` receives the index of the offending span (-1 for none). Codes: a label out
    of [-1, K) (1), a word unlabelled (2) or with a non-lexical label (3), the root span
    unlabelled (4) or with a label whose top symbol is not a root (5), a longer span with a
    non-phrasal label (6), a labelled span without two labelled children (7: no labelled
    span [i, k) whose complement [k, j) is labelled, for the largest labelled [i, k)), a rule
    absent from the grammar (8), a labelled span off the tree (9: brackets crossing or in
    excess).
    """
    cdef intp_t S = _n_spans(n), K = g.n_labels, length, i, j, k, s, a, labelled = 0
    cdef intp_t lo, hi
    bad_span[0] = -1
    for s in range(S):
        if span_labels[s] < -1 or span_labels[s] >= K:
            bad_span[0] = s
            return TREE_LABEL_RANGE
        if span_labels[s] >= 0:
            labelled += 1
    for i in range(n):
        bad_span[0] = i
        if span_labels[i] < 0:
            return TREE_WORD_MISSING
        if not g.lexical[span_labels[i]]:
            return TREE_WORD_NOT_LEXICAL
    bad_span[0] = S - 1
    a = span_labels[S - 1]
    if a < 0:
        return TREE_ROOT_MISSING
    if not g.root[g.top[a]]:
        return TREE_ROOT_SYMBOL
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            s = _span_at(n, i, j)
            a = span_labels[s]
            if a < 0:
                continue
            bad_span[0] = s
            if not g.phrasal[a]:
                return TREE_SPAN_NOT_PHRASAL
            k = j - 1
            while k > i and span_labels[_span_at(n, i, k)] < 0:
                k -= 1
            if k == i or span_labels[_span_at(n, k, j)] < 0:
                return TREE_NO_SPLIT
            if _find_rule(g, g.bottom[a], g.top[span_labels[_span_at(n, i, k)]],
                          g.top[span_labels[_span_at(n, k, j)]]) < 0:
                return TREE_RULE_ABSENT
    bad_span[0] = -1
    if labelled == 2 * n - 1:
        return TREE_OK
    # the walk from the root through the splits is a tree of 2 n - 1 spans: name a span off it
    for s in range(S):
        if span_labels[s] < 0:
            continue
        _span_of(n, s, &i, &j)
        lo = 0
        hi = n
        while lo != i or hi != j:
            k = hi - 1
            while span_labels[_span_at(n, lo, k)] < 0:
                k -= 1
            if j <= k:
                hi = k
            elif i >= k:
                lo = k
            else:
                break
        if lo != i or hi != j:
            bad_span[0] = s
            return TREE_EXTRA_SPAN
    return TREE_EXTRA_SPAN


cdef double _span_tree_score(const int64_t* span_labels, intp_t n, const Grammar* g,
                             const double* span_scores) noexcept nogil:
    """Score of a tree of the grammar (checked by ``_span_tree_check``): its span scores,
    then its rule scores, each summed in span order."""
    cdef intp_t S = _n_spans(n), K = g.n_labels, length, i, j, k, s, a
    cdef double total = 0.0
    for s in range(S):
        if span_labels[s] >= 0:
            total += span_scores[s * K + span_labels[s]]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            a = span_labels[_span_at(n, i, j)]
            if a < 0:
                continue
            k = j - 1
            while span_labels[_span_at(n, i, k)] < 0:
                k -= 1
            total += g.rule_score[_find_rule(g, g.bottom[a],
                                             g.top[span_labels[_span_at(n, i, k)]],
                                             g.top[span_labels[_span_at(n, k, j)]])]
    return total


# ----------------------------------------------------------------------------- batches

def viterbi_batch(const float64_t[:, ::1] span_scores, const int64_t[::1] lengths,
                  const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                  intp_t n_symbols, intp_t n_rules, int64_t[::1] span_labels,
                  float64_t[::1] scores):
    """Best tree of every sentence (``span_labels`` per span row, ``scores`` per sentence)."""
    cdef Grammar g
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, longest
    cdef double* chart = NULL
    cdef intp_t since_check = 0
    cdef bint failed = False
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], span_scores.shape[1],
                         n_symbols, n_rules)
    try:
        with nogil:
            longest = _longest(&lengths[0], n_sentences)
            chart = <double*> malloc(_viterbi_chart_size(longest, n_symbols) * sizeof(double))
            if chart == NULL:
                failed = True
            else:
                for i in range(n_sentences):
                    n = lengths[i]
                    scores[i] = _cky_viterbi(&span_scores[row, 0], n, &g, chart,
                                             &span_labels[row])
                    row += _n_spans(n)
                    check_signals_every(&since_check, _rule_work(n, n_rules), _SIGNAL_WORK)
    finally:
        free(chart)
    if failed:
        raise MemoryError("could not allocate the CKY chart")


def kbest_batch(const float64_t[:, ::1] span_scores, const int64_t[::1] lengths,
                const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                intp_t n_symbols, intp_t n_rules, intp_t k, int64_t[:, ::1] span_labels,
                float64_t[:, ::1] scores, int64_t[::1] counts):
    """The ``k`` best trees of every sentence: ``span_labels`` (n_span_rows, k), ``scores``
    (n_sentences, k) and ``counts`` (n_sentences,)."""
    cdef Grammar g
    cdef KBestLists lists
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, longest, count
    cdef double* chart = NULL
    cdef int32_t* record_of = NULL
    cdef intp_t since_check = 0
    cdef bint failed = False
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], span_scores.shape[1],
                         n_symbols, n_rules)
    _kbest_init(&lists, k)
    try:
        with nogil:
            longest = _longest(&lengths[0], n_sentences)
            chart = <double*> malloc(_viterbi_chart_size(longest, n_symbols) * sizeof(double))
            record_of = <int32_t*> malloc(_kbest_nodes(longest, n_symbols) * sizeof(int32_t))
            if chart == NULL or record_of == NULL:
                failed = True
            else:
                for i in range(n_sentences):
                    n = lengths[i]
                    count = _cky_kbest(&span_scores[row, 0], n, &g, chart, record_of, &lists,
                                       &scores[i, 0], &span_labels[row, 0])
                    if count < 0:
                        failed = True
                        break
                    counts[i] = count
                    row += _n_spans(n)
                    check_signals_every(&since_check, _rule_work(n, n_rules), _SIGNAL_WORK)
    finally:
        free(chart)
        free(record_of)
        _kbest_free(&lists)
    if failed:
        raise MemoryError("could not allocate the k-best CKY lists")


def best_other_batch(const float64_t[:, ::1] span_scores, const int64_t[::1] lengths,
                     const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                     intp_t n_symbols, intp_t n_rules, const int64_t[::1] given,
                     int64_t[::1] span_labels, float64_t[::1] scores):
    """Best tree of every sentence that differs from the sentence's ``given`` labelling."""
    cdef Grammar g
    cdef KBestLists lists
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, longest
    cdef double* chart = NULL
    cdef int32_t* record_of = NULL
    cdef intp_t since_check = 0
    cdef bint failed = False
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], span_scores.shape[1],
                         n_symbols, n_rules)
    _kbest_init(&lists, 2)
    try:
        with nogil:
            longest = _longest(&lengths[0], n_sentences)
            chart = <double*> malloc(_viterbi_chart_size(longest, n_symbols) * sizeof(double))
            record_of = <int32_t*> malloc(_kbest_nodes(longest, n_symbols) * sizeof(int32_t))
            if chart == NULL or record_of == NULL:
                failed = True
            else:
                for i in range(n_sentences):
                    n = lengths[i]
                    if _cky_best_other(&span_scores[row, 0], n, &g, &given[row], chart,
                                       record_of, &lists, &scores[i], &span_labels[row]) < 0:
                        failed = True
                        break
                    row += _n_spans(n)
                    check_signals_every(&since_check, _rule_work(n, n_rules), _SIGNAL_WORK)
    finally:
        free(chart)
        free(record_of)
        _kbest_free(&lists)
    if failed:
        raise MemoryError("could not allocate the 2-best CKY lists")


def tree_check_batch(const int64_t[::1] span_labels, const int64_t[::1] lengths,
                     const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                     intp_t n_labels, intp_t n_symbols, intp_t n_rules, int64_t[::1] errors,
                     int64_t[::1] bad_spans):
    """Error code and offending span (per sentence) of ``_span_tree_check``."""
    cdef Grammar g
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, bad
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], n_labels, n_symbols,
                         n_rules)
    with nogil:
        for i in range(n_sentences):
            n = lengths[i]
            errors[i] = _span_tree_check(&span_labels[row], n, &g, &bad)
            bad_spans[i] = bad
            row += _n_spans(n)


def tree_score_batch(const int64_t[::1] span_labels, const float64_t[:, ::1] span_scores,
                     const int64_t[::1] lengths, const int32_t[::1] grammar_ints,
                     const float64_t[::1] grammar_floats, intp_t n_symbols, intp_t n_rules,
                     float64_t[::1] scores):
    """Score of every sentence's tree (trees checked by ``tree_check_batch``)."""
    cdef Grammar g
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], span_scores.shape[1],
                         n_symbols, n_rules)
    with nogil:
        for i in range(n_sentences):
            n = lengths[i]
            scores[i] = _span_tree_score(&span_labels[row], n, &g, &span_scores[row, 0])
            row += _n_spans(n)
