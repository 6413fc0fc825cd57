# Per-sentence routines of _cky.pyx (weighted context-free grammars over binary trees), shared
# with other compiled modules, and the grammar, span and batch helpers that _cky.pyx and the
# inside-outside module _cky_inside.pyx both use (inline, so they cost no call). The span
# layout, the grammar description and the tie rules are documented at the top of _cky.pyx.
from sklstruct._typedefs cimport int32_t, int64_t, intp_t


cdef struct Grammar:
    intp_t n_labels         # K
    intp_t n_symbols        # G
    intp_t n_rules          # R
    const int32_t* top      # (K,) top symbol of each label
    const int32_t* bottom   # (K,) bottom symbol of each label
    const int32_t* lexical  # (K,) 1 for labels allowed on words (length-1 spans)
    const int32_t* phrasal  # (K,) 1 for labels allowed on longer spans
    const int32_t* root     # (G,) 1 for symbols allowed as the root's top symbol
    # Rules in "sorted position" order: by left child symbol, then by rule index.
    const int32_t* left_start    # (G + 1,) rules with left child L: left_start[L]:left_start[L+1]
    const int32_t* rule_left     # (R,) left child symbol of each sorted position
    const int32_t* rule_right    # (R,) right child symbol
    const int32_t* rule_parent   # (R,) parent symbol
    const int32_t* rule_index    # (R,) index of the rule in the caller's rule list
    const int32_t* parent_start  # (G + 1,) ranges of by_parent per parent symbol
    const int32_t* by_parent     # (R,) sorted positions grouped by parent, then (left, right)
    const int32_t* right_start   # (G + 1,) ranges of by_right per right child symbol
    const int32_t* by_right      # (R,) sorted positions grouped by right child
    const double* rule_score     # (R,) theta of each sorted position
    const double* rule_weight    # (R,) exp(theta - parent_peak[parent])
    const double* parent_peak    # (G,) largest theta of the rules of a parent (0 if none)


cdef struct Derivation:
    # An entry of a k-best list, or a candidate of its heap.
    double value
    int32_t edge     # the label (label-choice nodes) or the split point (rule nodes)
    int32_t rule     # the sorted rule position (rule nodes), 0 otherwise
    int32_t first    # rank in the list of the first (or only) tail node
    int32_t second   # rank in the list of the second tail node (rule nodes), 0 otherwise


cdef struct KBestLists:
    # Lazy k-best lists of the CKY hypergraph (Huang and Chiang 2005, algorithm 3). Record
    # pools grow with realloc and are kept from sentence to sentence; release with
    # _kbest_free. Set up with _kbest_init.
    intp_t k
    intp_t width                 # heap capacity of a record, 2 k + 2
    # the sentence (set by _cky_kbest and _cky_best_other)
    const double* span_scores
    const Grammar* grammar
    intp_t n
    intp_t n_spans
    const double* chart          # the Viterbi chart of _cky_viterbi
    int32_t* record_of           # (_kbest_nodes(n, G),) record of each node, -1 for none
    # record pools: ``capacity`` allocated, ``used`` by the current sentence
    intp_t capacity
    intp_t used
    int32_t* node
    int32_t* count
    int32_t* heap_size
    int32_t* pending
    Derivation* lists            # capacity * k
    Derivation* heaps            # capacity * width


cdef void _grammar_from_arrays(Grammar* grammar, const int32_t* ints, const double* floats,
                               intp_t n_labels, intp_t n_symbols,
                               intp_t n_rules) noexcept nogil

cdef double _cky_viterbi(const double* span_scores, intp_t n, const Grammar* grammar,
                         double* chart, int64_t* span_labels) noexcept nogil

cdef void _kbest_init(KBestLists* lists, intp_t k) noexcept nogil

cdef void _kbest_free(KBestLists* lists) noexcept nogil

cdef intp_t _cky_kbest(const double* span_scores, intp_t n, const Grammar* grammar,
                       double* chart, int32_t* record_of, KBestLists* lists, double* scores,
                       int64_t* span_labels) noexcept nogil

cdef int _cky_best_other(const double* span_scores, intp_t n, const Grammar* grammar,
                         const int64_t* given, double* chart, int32_t* record_of,
                         KBestLists* lists, double* score, int64_t* span_labels) noexcept nogil

cdef int _span_tree_check(const int64_t* span_labels, intp_t n, const Grammar* grammar,
                          intp_t* bad_span) noexcept nogil

cdef double _span_tree_score(const int64_t* span_labels, intp_t n, const Grammar* grammar,
                             const double* span_scores) noexcept nogil


cdef inline intp_t _n_spans(intp_t n) noexcept nogil:
    """Number of spans of a sentence of ``n`` words, n (n + 1) / 2."""
    return n * (n + 1) // 2


cdef inline intp_t _span_at(intp_t n, intp_t i, intp_t j) noexcept nogil:
    """Index of the span [i, j) of a sentence of ``n`` words: spans by length, then start."""
    cdef intp_t length = j - i
    return (length - 1) * (2 * n - length + 2) // 2 + i


cdef inline intp_t _find_rule(const Grammar* g, intp_t parent, intp_t left,
                              intp_t right) noexcept nogil:
    """Sorted position of the rule (parent, left, right), or -1 (binary search)."""
    cdef intp_t lo = g.parent_start[parent], hi = g.parent_start[parent + 1], mid, q
    cdef int64_t key = <int64_t> left * g.n_symbols + right, here
    while lo < hi:
        mid = (lo + hi) // 2
        q = g.by_parent[mid]
        here = <int64_t> g.rule_left[q] * g.n_symbols + g.rule_right[q]
        if here == key:
            return q
        if here < key:
            lo = mid + 1
        else:
            hi = mid
    return -1


cdef inline const int32_t* _allowed(const Grammar* g, intp_t length) noexcept nogil:
    """The label mask of spans of this length: lexical for words, phrasal otherwise."""
    if length == 1:
        return g.lexical
    return g.phrasal


cdef inline intp_t _grammar_floats_size(intp_t n_symbols, intp_t n_rules) noexcept nogil:
    """Length of the float64 array read by :func:`_grammar_from_arrays`."""
    return 2 * n_rules + n_symbols


cdef inline intp_t _viterbi_chart_size(intp_t n, intp_t n_symbols) noexcept nogil:
    """Doubles of the ``chart`` of :func:`_cky_viterbi` (and of the k-best routines)."""
    return 2 * _n_spans(n) * n_symbols


cdef inline intp_t _kbest_nodes(intp_t n, intp_t n_symbols) noexcept nogil:
    """Int32 entries of the ``record_of`` of the k-best routines (the hypergraph's nodes)."""
    return 2 * _n_spans(n) * n_symbols + 1


# Work (rule applications) between two checks for Ctrl-C in the batched functions.
cdef enum:
    _SIGNAL_WORK = 50000000


cdef inline intp_t _longest(const int64_t* lengths, intp_t n_sentences) noexcept nogil:
    """The length of the longest sentence of a batch (at least 1)."""
    cdef intp_t i, longest = 1
    for i in range(n_sentences):
        if lengths[i] > longest:
            longest = lengths[i]
    return longest


cdef inline intp_t _rule_work(intp_t n, intp_t n_rules) noexcept nogil:
    """The rule applications of a sentence of ``n`` words, about n^3 (n_rules + 1) / 6
    (counted in doubles, and at most ``_SIGNAL_WORK``: a work beyond it calls for a check
    all the same, and the count fits a 32-bit ``intp_t``)."""
    cdef double work = (<double> n) * n * n * (n_rules + 1) / 6.0
    return <intp_t> (work if work < _SIGNAL_WORK else _SIGNAL_WORK)
