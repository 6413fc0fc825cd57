"""Compiled inside-outside for weighted context-free grammars over binary trees.

The trees, the span layout and the grammar description are those of
:mod:`sklstruct._inference._cky` (documented at its top), whose ``_cky.pxd`` provides the
:c:type:`Grammar`, ``_grammar_from_arrays`` and the inline span and batch helpers; this module
holds the log-partition and the span-label marginals and expected rule counts.

**Inside-outside.** The recursions of Viterbi CKY in the log semiring give the log-partition
``log Z = log sum_trees exp(score)``, and the outside recursion gives the span-label marginals
``P(tree has node span with label a)`` and the expected number of uses of each rule (summed
over its anchors ``(i, k, j)``) under ``p(tree) = exp(score - log Z)`` (Baker 1979; Lari and
Young 1990). The inner sums run on rescaled exponentials: per span, the inside values of its
top symbols are stored as ``exp(inside - max)``, rules as ``exp(theta - max theta of their
parent)``, and the outside values of a parent span as ``exp(outside + max theta - max)``; a
rescaled sum below ``_TINY`` is recomputed by an exact two-pass log-sum-exp over its terms, so
every log value is exact to a few ulps whatever the range of the scores, and the marginals are
computed from log values. An anchor's rule probabilities are rescaled sums times
``exp(x)`` where ``x`` is the log of their scale; when ``x > _COUNT_SCALE_LIMIT`` they are
computed term by term from log values instead (the rescaled products could have lost their
precision to underflow).

**No tree.** A sentence without a tree of finite score has log Z = -inf and zero marginals
and rule counts.

Every batched function takes the concatenated span scores of the sentences and their lengths,
writes into preallocated outputs and runs without the GIL, checking for Ctrl-C between
sentences. The inputs are validated by the wrappers of :mod:`sklstruct._inference.cfg`.
"""
from libc.math cimport INFINITY, exp, log
from libc.stdlib cimport free, malloc

from sklstruct._inference._cky cimport (_SIGNAL_WORK, _allowed, _grammar_from_arrays,
                                        _longest, _rule_work, _span_at)
from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t

# A rescaled sum of non-negative terms below this value is recomputed by an exact log-sum-exp:
# terms lost to underflow are each below 1e-307, far below the rounding of a larger sum.
cdef double _TINY = 1e-280
# The rescaled rule probabilities of an anchor are used when their scale factor is at most
# e^30 (1e13): a product that underflowed (below 1e-307) then errs by less than 1e-294.
cdef double _COUNT_SCALE_LIMIT = 30.0


# ----------------------------------------------------------------------------- inside-outside

cdef inline void _group_logsumexp(const double* values, const int32_t* group, intp_t n_values,
                                  intp_t n_groups, double* out, double* sums) noexcept nogil:
    """``out[x] = log sum_{a: group[a] = x} exp(values[a])`` (two passes, exact)."""
    cdef intp_t a, x
    for x in range(n_groups):
        out[x] = -INFINITY
        sums[x] = 0.0
    for a in range(n_values):
        if values[a] > out[group[a]]:
            out[group[a]] = values[a]
    for a in range(n_values):
        if values[a] != -INFINITY:
            sums[group[a]] += exp(values[a] - out[group[a]])
    for x in range(n_groups):
        if out[x] != -INFINITY:
            out[x] += log(sums[x])


cdef inline double _rescale(const double* values, intp_t size, double* scaled) noexcept nogil:
    """``scaled = exp(values - max)``; returns the max (-inf, with zeros, when all are)."""
    cdef intp_t x
    cdef double peak = -INFINITY
    for x in range(size):
        if values[x] > peak:
            peak = values[x]
    for x in range(size):
        scaled[x] = 0.0 if peak == -INFINITY else exp(values[x] - peak)
    return peak


cdef double _inside_exact(intp_t n, intp_t i, intp_t j, intp_t parent, const Grammar* g,
                          const double* inside) noexcept nogil:
    """Exact log inside value of (span [i, j), bottom symbol ``parent``)."""
    cdef intp_t G = g.n_symbols, k, a, q
    cdef const double* left
    cdef const double* right
    cdef double value, peak = -INFINITY, total = 0.0
    cdef intp_t lo = g.parent_start[parent], hi = g.parent_start[parent + 1]
    if lo == hi:
        return -INFINITY
    for k in range(i + 1, j):
        left = inside + _span_at(n, i, k) * G
        right = inside + _span_at(n, k, j) * G
        for a in range(lo, hi):
            q = g.by_parent[a]
            value = g.rule_score[q] + left[g.rule_left[q]] + right[g.rule_right[q]]
            if value > peak:
                peak = value
    if peak == -INFINITY:
        return peak
    for k in range(i + 1, j):
        left = inside + _span_at(n, i, k) * G
        right = inside + _span_at(n, k, j) * G
        for a in range(lo, hi):
            q = g.by_parent[a]
            value = g.rule_score[q] + left[g.rule_left[q]] + right[g.rule_right[q]]
            if value != -INFINITY:
                total += exp(value - peak)
    return peak + log(total)


cdef double _inside_pass(const double* span_scores, intp_t n, const Grammar* g,
                         double* work) noexcept nogil:
    """Inside recursion of one sentence; returns log Z.

    ``work``: log inside of the (span, top symbol) nodes, their rescaled values, log inside
    of the (span, bottom symbol) nodes (n_spans x G each), the per-span maxima (n_spans), then
    2 G + K doubles of scratch.
    """
    cdef intp_t G = g.n_symbols, K = g.n_labels, S = _n_spans(n)
    cdef intp_t length, i, j, k, s, x, a, q, q_end, left, right
    cdef double* top_in = work
    cdef double* top_scaled = work + S * G
    cdef double* bottom_in = work + 2 * S * G
    cdef double* top_max = work + 3 * S * G
    cdef double* acc = top_max + S
    cdef double* sums = acc + G
    cdef double* values = sums + G
    cdef const double* row
    cdef const double* left_scaled
    cdef const double* right_scaled
    cdef double* below
    cdef double peak, weight, factor, total
    for i in range(n):
        row = span_scores + i * K
        for a in range(K):
            values[a] = row[a] if g.lexical[a] else -INFINITY
        _group_logsumexp(values, g.top, K, G, top_in + i * G, sums)
        top_max[i] = _rescale(top_in + i * G, G, top_scaled + i * G)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            s = _span_at(n, i, j)
            below = bottom_in + s * G
            peak = -INFINITY
            for k in range(i + 1, j):
                left = _span_at(n, i, k)
                right = _span_at(n, k, j)
                if (top_max[left] != -INFINITY and top_max[right] != -INFINITY
                        and top_max[left] + top_max[right] > peak):
                    peak = top_max[left] + top_max[right]
            for x in range(G):
                acc[x] = 0.0
            if peak != -INFINITY:
                for k in range(i + 1, j):
                    left = _span_at(n, i, k)
                    right = _span_at(n, k, j)
                    if top_max[left] == -INFINITY or top_max[right] == -INFINITY:
                        continue
                    weight = exp(top_max[left] + top_max[right] - peak)
                    left_scaled = top_scaled + left * G
                    right_scaled = top_scaled + right * G
                    for x in range(G):
                        factor = weight * left_scaled[x]
                        if factor == 0.0:
                            continue
                        q_end = g.left_start[x + 1]
                        for q in range(g.left_start[x], q_end):
                            acc[g.rule_parent[q]] += (factor * g.rule_weight[q]
                                                      * right_scaled[g.rule_right[q]])
            for x in range(G):
                if acc[x] >= _TINY:
                    below[x] = peak + g.parent_peak[x] + log(acc[x])
                else:
                    below[x] = _inside_exact(n, i, j, x, g, top_in)
            row = span_scores + s * K
            for a in range(K):
                values[a] = row[a] + below[g.bottom[a]] if g.phrasal[a] else -INFINITY
            _group_logsumexp(values, g.top, K, G, top_in + s * G, sums)
            top_max[s] = _rescale(top_in + s * G, G, top_scaled + s * G)
    # the root: its allowed labels whose top symbol may be a root
    row = span_scores + (S - 1) * K
    below = bottom_in + (S - 1) * G
    peak = -INFINITY
    for a in range(K):
        values[a] = -INFINITY
        if _allowed(g, n)[a] and g.root[g.top[a]]:
            values[a] = row[a] if n == 1 else row[a] + below[g.bottom[a]]
            if values[a] > peak:
                peak = values[a]
    if peak == -INFINITY:
        return peak
    total = 0.0
    for a in range(K):
        if values[a] != -INFINITY:
            total += exp(values[a] - peak)
    return peak + log(total)


cdef double _cky_inside(const double* span_scores, intp_t n, const Grammar* grammar,
                        double* work) noexcept nogil:
    """log Z of one sentence (-inf without a tree of finite score); ``work`` holds
    ``_inside_size(n, K, G)`` doubles."""
    return _inside_pass(span_scores, n, grammar, work)


cdef double _outside_exact(intp_t n, intp_t i, intp_t j, intp_t x, const Grammar* g,
                           const double* inside, const double* bottom_out) noexcept nogil:
    """Exact log outside value of (span [i, j), top symbol ``x``) from its parents."""
    cdef intp_t G = g.n_symbols, e, h, a, q, parent, sibling, sweep
    cdef double value, peak = -INFINITY, total = 0.0
    for sweep in range(2):
        # as a left child: parents [i, e), siblings [j, e); rules whose left child is x
        for e in range(j + 1, n + 1):
            parent = _span_at(n, i, e) * G
            sibling = _span_at(n, j, e) * G
            for q in range(g.left_start[x], g.left_start[x + 1]):
                value = (bottom_out[parent + g.rule_parent[q]] + g.rule_score[q]
                         + inside[sibling + g.rule_right[q]])
                if sweep == 0:
                    if value > peak:
                        peak = value
                elif value != -INFINITY:
                    total += exp(value - peak)
        # as a right child: parents [h, j), siblings [h, i); rules whose right child is x
        for h in range(i):
            parent = _span_at(n, h, j) * G
            sibling = _span_at(n, h, i) * G
            for a in range(g.right_start[x], g.right_start[x + 1]):
                q = g.by_right[a]
                value = (bottom_out[parent + g.rule_parent[q]] + g.rule_score[q]
                         + inside[sibling + g.rule_left[q]])
                if sweep == 0:
                    if value > peak:
                        peak = value
                elif value != -INFINITY:
                    total += exp(value - peak)
        if peak == -INFINITY:
            return peak
    return peak + log(total)


cdef double _cky_inside_outside(const double* span_scores, intp_t n, const Grammar* g,
                                double* work, double* marginals,
                                double* rule_counts) noexcept nogil:
    """log Z, span-label marginals and expected rule counts of one sentence.

    ``work`` holds ``_inside_outside_size(n, K, G, R)`` doubles; ``marginals`` (n_spans, K)
    receives ``P(span carries label a)`` and ``rule_counts`` (R,) the expected number of uses
    of each rule (in the caller's rule order). Returns log Z; without a tree of finite score
    log Z = -inf and both outputs are zero.
    """
    cdef intp_t G = g.n_symbols, K = g.n_labels, R = g.n_rules, S = _n_spans(n)
    cdef intp_t length, i, j, e, h, s, x, a, q, q_end, parent, sibling, p_row, s_row
    cdef double* top_in = work
    cdef double* top_scaled = work + S * G
    cdef double* bottom_in = work + 2 * S * G
    cdef double* top_max = work + 3 * S * G
    cdef double* acc = top_max + S
    cdef double* sums = acc + G
    cdef double* values = sums + G
    cdef double* bottom_out = work + _inside_size(n, K, G)
    cdef double* out_scaled = bottom_out + S * G
    cdef double* out_max = out_scaled + S * G
    cdef double* top_out = out_max + S
    cdef double* label_out = top_out + G
    cdef double* counts = label_out + K
    cdef const double* row
    cdef const double* up
    cdef const double* side
    cdef const double* child_scaled
    cdef const int32_t* allowed
    cdef double log_z, peak, weight, scale, factor, total, value
    log_z = _inside_pass(span_scores, n, g, work)
    for s in range(S * K):
        marginals[s] = 0.0
    for q in range(R):
        rule_counts[q] = 0.0
        counts[q] = 0.0
    if log_z == -INFINITY:
        return log_z
    for length in range(n, 0, -1):
        allowed = _allowed(g, length)
        for i in range(n - length + 1):
            j = i + length
            s = _span_at(n, i, j)
            row = span_scores + s * K
            if length == n:
                for a in range(K):
                    label_out[a] = 0.0 if allowed[a] and g.root[g.top[a]] else -INFINITY
            elif top_max[s] == -INFINITY:
                # in no tree: no marginals, no outside flowing to its children
                for x in range(G):
                    bottom_out[s * G + x] = -INFINITY
                    out_scaled[s * G + x] = 0.0
                out_max[s] = -INFINITY
                continue
            else:
                # outside of the top symbols: pulled from the parents (rescaled, exact
                # fallback), adding the rule counts of the anchors where s is the left child
                child_scaled = top_scaled + s * G
                peak = -INFINITY
                for e in range(j + 1, n + 1):
                    parent = _span_at(n, i, e)
                    sibling = _span_at(n, j, e)
                    if out_max[parent] != -INFINITY and top_max[sibling] != -INFINITY:
                        if out_max[parent] + top_max[sibling] > peak:
                            peak = out_max[parent] + top_max[sibling]
                for h in range(i):
                    parent = _span_at(n, h, j)
                    sibling = _span_at(n, h, i)
                    if out_max[parent] != -INFINITY and top_max[sibling] != -INFINITY:
                        if out_max[parent] + top_max[sibling] > peak:
                            peak = out_max[parent] + top_max[sibling]
                for x in range(G):
                    acc[x] = 0.0
                if peak != -INFINITY:
                    for e in range(j + 1, n + 1):
                        parent = _span_at(n, i, e)
                        sibling = _span_at(n, j, e)
                        if out_max[parent] == -INFINITY or top_max[sibling] == -INFINITY:
                            continue
                        weight = exp(out_max[parent] + top_max[sibling] - peak)
                        value = out_max[parent] + top_max[sibling] + top_max[s] - log_z
                        scale = exp(value) if value <= _COUNT_SCALE_LIMIT else 0.0
                        up = out_scaled + parent * G
                        side = top_scaled + sibling * G
                        for x in range(G):
                            factor = scale * child_scaled[x]
                            total = 0.0
                            q_end = g.left_start[x + 1]
                            if factor != 0.0:
                                for q in range(g.left_start[x], q_end):
                                    value = (up[g.rule_parent[q]] * g.rule_weight[q]
                                             * side[g.rule_right[q]])
                                    total += value
                                    counts[q] += factor * value
                            else:
                                for q in range(g.left_start[x], q_end):
                                    total += (up[g.rule_parent[q]] * g.rule_weight[q]
                                              * side[g.rule_right[q]])
                            acc[x] += weight * total
                        if (out_max[parent] + top_max[sibling] + top_max[s] - log_z
                                > _COUNT_SCALE_LIMIT):
                            p_row = parent * G
                            s_row = sibling * G
                            for q in range(R):
                                value = (bottom_out[p_row + g.rule_parent[q]] + g.rule_score[q]
                                         + top_in[s * G + g.rule_left[q]]
                                         + top_in[s_row + g.rule_right[q]] - log_z)
                                if value != -INFINITY:
                                    counts[q] += exp(value)
                    for h in range(i):
                        parent = _span_at(n, h, j)
                        sibling = _span_at(n, h, i)
                        if out_max[parent] == -INFINITY or top_max[sibling] == -INFINITY:
                            continue
                        weight = exp(out_max[parent] + top_max[sibling] - peak)
                        up = out_scaled + parent * G
                        side = top_scaled + sibling * G
                        for x in range(G):
                            factor = weight * side[x]
                            if factor == 0.0:
                                continue
                            q_end = g.left_start[x + 1]
                            for q in range(g.left_start[x], q_end):
                                acc[g.rule_right[q]] += (factor * up[g.rule_parent[q]]
                                                         * g.rule_weight[q])
                for x in range(G):
                    if acc[x] >= _TINY:
                        top_out[x] = peak + log(acc[x])
                    elif peak == -INFINITY:
                        top_out[x] = -INFINITY
                    else:
                        top_out[x] = _outside_exact(n, i, j, x, g, top_in, bottom_out)
                for a in range(K):
                    label_out[a] = top_out[g.top[a]] if allowed[a] else -INFINITY
            # marginals of the span's labels
            for a in range(K):
                if label_out[a] == -INFINITY:
                    continue
                value = label_out[a] + row[a]
                if length > 1:
                    value = value + bottom_in[s * G + g.bottom[a]]
                marginals[s * K + a] = exp(value - log_z)
            if length == 1:
                continue
            # outside of the bottom symbols, rescaled with the rules' parent maxima
            for a in range(K):
                values[a] = label_out[a] + row[a]
            _group_logsumexp(values, g.bottom, K, G, bottom_out + s * G, sums)
            peak = -INFINITY
            for x in range(G):
                if (g.parent_start[x] < g.parent_start[x + 1]
                        and bottom_out[s * G + x] + g.parent_peak[x] > peak):
                    peak = bottom_out[s * G + x] + g.parent_peak[x]
            out_max[s] = peak
            for x in range(G):
                if peak == -INFINITY or g.parent_start[x] == g.parent_start[x + 1]:
                    out_scaled[s * G + x] = 0.0
                else:
                    out_scaled[s * G + x] = exp(bottom_out[s * G + x] + g.parent_peak[x]
                                                - peak)
    for q in range(R):
        rule_counts[g.rule_index[q]] = counts[q]
    return log_z


# ----------------------------------------------------------------------------- batches

def inside_batch(const float64_t[:, ::1] span_scores, const int64_t[::1] lengths,
                 const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                 intp_t n_symbols, intp_t n_rules, float64_t[::1] log_z):
    """log Z of every sentence."""
    cdef Grammar g
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, longest
    cdef intp_t K = span_scores.shape[1]
    cdef double* work = NULL
    cdef intp_t since_check = 0
    cdef bint failed = False
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], K, n_symbols, n_rules)
    try:
        with nogil:
            longest = _longest(&lengths[0], n_sentences)
            work = <double*> malloc(_inside_size(longest, K, n_symbols) * sizeof(double))
            if work == NULL:
                failed = True
            else:
                for i in range(n_sentences):
                    n = lengths[i]
                    log_z[i] = _cky_inside(&span_scores[row, 0], n, &g, work)
                    row += _n_spans(n)
                    check_signals_every(&since_check, _rule_work(n, n_rules), _SIGNAL_WORK)
    finally:
        free(work)
    if failed:
        raise MemoryError("could not allocate the inside chart")


def inside_outside_batch(const float64_t[:, ::1] span_scores, const int64_t[::1] lengths,
                         const int32_t[::1] grammar_ints, const float64_t[::1] grammar_floats,
                         intp_t n_symbols, intp_t n_rules, float64_t[:, ::1] marginals,
                         float64_t[:, ::1] rule_counts, float64_t[::1] log_z):
    """log Z, span-label marginals (per span row) and rule counts (per sentence) of every
    sentence."""
    cdef Grammar g
    cdef intp_t n_sentences = lengths.shape[0], i, n, row = 0, longest, row_rule
    cdef intp_t K = span_scores.shape[1]
    cdef double* work = NULL
    cdef double* counts = NULL
    cdef intp_t since_check = 0
    cdef bint failed = False
    _grammar_from_arrays(&g, &grammar_ints[0], &grammar_floats[0], K, n_symbols, n_rules)
    try:
        with nogil:
            longest = _longest(&lengths[0], n_sentences)
            work = <double*> malloc(
                _inside_outside_size(longest, K, n_symbols, n_rules) * sizeof(double))
            counts = <double*> malloc((n_rules + 1) * sizeof(double))
            if work == NULL or counts == NULL:
                failed = True
            else:
                for i in range(n_sentences):
                    n = lengths[i]
                    log_z[i] = _cky_inside_outside(&span_scores[row, 0], n, &g, work,
                                                   &marginals[row, 0], counts)
                    for row_rule in range(n_rules):
                        rule_counts[i, row_rule] = counts[row_rule]
                    row += _n_spans(n)
                    check_signals_every(&since_check, _rule_work(n, 3 * n_rules), _SIGNAL_WORK)
    finally:
        free(work)
        free(counts)
    if failed:
        raise MemoryError("could not allocate the inside-outside chart")
