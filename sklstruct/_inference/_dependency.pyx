"""Compiled inference for first-order (arc-factored) dependency trees.

A sentence of ``n`` tokens ``1..n`` has the artificial root ``0`` and a dense C-ordered
``(n + 1) x (n + 1)`` score matrix, ``scores[h, m]`` scoring head ``h`` for modifier ``m``;
column 0 and the diagonal are ignored and ``-inf`` forbids an arc. A parse gives every token
one head, ``heads[m - 1]``, such that every token reaches the root; its score is the sum of its
arc scores. It is projective when no two arcs cross with the root placed left of the first
token, and single-rooted when exactly one token has head 0.

Per-sentence routines (exported through ``_dependency.pxd``):

- :func:`eisner_decode`, the best projective tree in O(n^3) (Eisner 1996, with the chart of
  McDonald, Crammer and Pereira 2005);
- :func:`spanning_tree_decode`, the best tree in O(n^2) (Chu-Liu-Edmonds in the form of
  Tarjan 1977 with the correction of Camerini, Fratta and Maffioli 1979, for dense graphs; the
  single-root constraint by the edge swaps of Gabow and Tarjan 1984 as in Zmigrod, Vieira and
  Cotterell 2020);
- :func:`eisner_marginals`, the arc marginals and log-partition of projective trees by
  inside-outside over Eisner's chart (the inside pass in the log domain, the outside pass as
  its reverse-mode derivative), O(n^3);
- :func:`matrix_tree_marginals`, the same over all trees by the matrix-tree theorem (Koo,
  Globerson, Carreras and Collins 2007; Smith and Smith 2007), the determinant by the
  subtraction-free elimination of Grassmann, Taksar and Heyman (1985) and the marginals as
  its reverse-mode derivative, O(n^3).

The batched entry points below run them over the concatenated flattened score matrices of a
batch without the GIL. Their inputs are validated by :mod:`sklstruct._inference.dependency`:
every sentence has at least one token, the sizes agree and no score is NaN or ``+inf``.
"""
from libc.math cimport INFINITY, exp, frexp, ldexp, log, log1p
from libc.stdlib cimport free, malloc

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int64_t, intp_t

# Terms this many nats below the largest one are left out of a sum of exponentials: e^-40 is
# 4e-18, so leaving out n of them changes the sum by less than n * 4e-18 relative.
cdef double _NEGLIGIBLE = -40.0
# The batched loops check for Ctrl-C whenever about this many chart cells were processed.
cdef intp_t _WORK_PER_SIGNAL_CHECK = 20000000


cdef inline intp_t _chart_work(intp_t n, bint cubic) noexcept nogil:
    """The chart cells of a sentence of ``n`` words, n^3 (``cubic``) or n^2, counted in
    doubles and at most ``_WORK_PER_SIGNAL_CHECK`` (the count fits a 32-bit ``intp_t``)."""
    cdef double work = (<double> n) * n * (n if cubic else 1)
    return <intp_t> (work if work < _WORK_PER_SIGNAL_CHECK else _WORK_PER_SIGNAL_CHECK)

# Chart item kinds of Eisner's back-tracking stack.
cdef enum:
    _RIGHT_COMPLETE = 0
    _LEFT_COMPLETE = 1
    _RIGHT_INCOMPLETE = 2
    _LEFT_INCOMPLETE = 3


cdef inline double _tree_score(const double* scores, intp_t n,
                               const int64_t* heads) noexcept nogil:
    """Score of a parse, summed over the modifiers in increasing order."""
    cdef intp_t m
    cdef double total = 0.0
    for m in range(1, n + 1):
        total += scores[heads[m - 1] * (n + 1) + m]
    return total


# ---------------------------------------------------------------------------------------------
# Eisner's algorithm

cdef inline double _best_split(const double* left, const double* right, intp_t count,
                               intp_t* argbest) noexcept nogil:
    """``max_i left[i] + right[i]`` over ``i < count`` (``count >= 1``); first maximiser."""
    cdef intp_t i, best_i = 0
    cdef double best = left[0] + right[0], candidate
    for i in range(1, count):
        candidate = left[i] + right[i]
        if candidate > best:
            best = candidate
            best_i = i
    argbest[0] = best_i
    return best


cdef double eisner_decode(const double* scores, intp_t n, bint single_root, int64_t* heads,
                          double* work, intp_t* int_work) noexcept nogil:
    """Highest-scoring projective tree of one sentence by Eisner's algorithm, O(n^3).

    The first-order chart of McDonald, Crammer and Pereira (2005, fig. 2) over the positions
    ``0..n``: complete spans ``C[s][t]`` (headed at one end, finished on the other side) and
    incomplete spans ``I[s][t]`` (an arc between the two ends), each facing right (head ``s``)
    or left (head ``t``); the root 0 never faces left. With ``single_root`` the root's right
    incomplete spans may not contain an earlier root child (``C[0][r]`` is used for ``r = 0``
    only), so the root attaches exactly one span.

    Every chart table is an ``(n + 1) x (n + 1)`` array holding span ``(s, t)`` at
    ``[s, t]`` and again at ``[t, s]``, so that the split loops read both of their operands
    contiguously. Among equal scores a split takes the smallest split point, so the returned
    tree is deterministic. The heads are recovered from the stored split points with an
    explicit stack.

    Returns the score of the written tree (the sum of its arc scores in modifier order), -inf
    when no projective tree avoids the -inf arcs; a tree is written in every case.
    """
    cdef intp_t N = n + 1
    cdef intp_t NN = N * N
    cdef double* right_complete = work
    cdef double* left_complete = work + NN
    cdef double* right_incomplete = work + 2 * NN
    cdef double* left_incomplete = work + 3 * NN
    cdef intp_t* split_incomplete = int_work
    cdef intp_t* split_left = int_work + NN
    cdef intp_t* split_right = int_work + 2 * NN
    cdef intp_t* stack = int_work + 3 * NN
    cdef intp_t k, s, t, r, count, kind, item, top
    cdef double best, value
    for s in range(N):
        right_complete[s * N + s] = 0.0
        left_complete[s * N + s] = 0.0
    for k in range(1, N):
        for s in range(N - k):
            t = s + k
            # incomplete spans: C[s][r] (right) + C[r + 1][t] (left), s <= r < t
            count = 1 if (single_root and s == 0) else t - s
            best = _best_split(right_complete + s * N + s, left_complete + t * N + s + 1,
                               count, &r)
            split_incomplete[s * N + t] = s + r
            value = best + scores[s * N + t]
            right_incomplete[s * N + t] = value
            right_incomplete[t * N + s] = value
            value = -INFINITY if s == 0 else best + scores[t * N + s]
            left_incomplete[s * N + t] = value
            left_incomplete[t * N + s] = value
            # left complete: C[s][r] (left) + I[r][t] (left), s <= r < t
            best = _best_split(left_complete + s * N + s, left_incomplete + t * N + s,
                               t - s, &r)
            split_left[s * N + t] = s + r
            left_complete[s * N + t] = best
            left_complete[t * N + s] = best
            # right complete: I[s][r] (right) + C[r][t] (right), s < r <= t
            best = _best_split(right_incomplete + s * N + s + 1,
                               right_complete + t * N + s + 1, t - s, &r)
            split_right[s * N + t] = s + 1 + r
            right_complete[s * N + t] = best
            right_complete[t * N + s] = best
    # back-tracking; an item is (kind * N + s) * N + t, at most 2 n + 4 of them are pending
    top = 0
    stack[0] = (_RIGHT_COMPLETE * N + 0) * N + n
    while top >= 0:
        item = stack[top]
        top -= 1
        t = item % N
        s = (item // N) % N
        kind = item // NN
        if s == t:
            continue
        if kind == _RIGHT_COMPLETE:
            r = split_right[s * N + t]
            stack[top + 1] = (_RIGHT_INCOMPLETE * N + s) * N + r
            stack[top + 2] = (_RIGHT_COMPLETE * N + r) * N + t
            top += 2
        elif kind == _LEFT_COMPLETE:
            r = split_left[s * N + t]
            stack[top + 1] = (_LEFT_COMPLETE * N + s) * N + r
            stack[top + 2] = (_LEFT_INCOMPLETE * N + r) * N + t
            top += 2
        else:
            if kind == _RIGHT_INCOMPLETE:
                heads[t - 1] = s
            else:
                heads[s - 1] = t
            r = split_incomplete[s * N + t]
            stack[top + 1] = (_RIGHT_COMPLETE * N + s) * N + r
            stack[top + 2] = (_LEFT_COMPLETE * N + r + 1) * N + t
            top += 2
    return _tree_score(scores, n, heads)


# ---------------------------------------------------------------------------------------------
# Chu-Liu-Edmonds (Tarjan 1977; Camerini, Fratta and Maffioli 1979) for dense graphs
#
# Nodes 0..n are the positions (0 the root), nodes n + 1, n + 2, ... the contracted cycles.
# Every node v that is not the root owns one row of ``weight`` (the row ``slot[v]``), indexed
# by the original source position u: the reduced weight of the best arc from u into v, whose
# original target position is in the same row of ``target``. ``top[u]`` is the outermost
# node containing position u; arcs from sources inside v itself are skipped when scanning
# v's row. ``arc_src/arc_tgt/arc_weight[v]`` is the arc chosen for v (original positions,
# reduced weight).

cdef struct _Arborescence:
    intp_t N
    intp_t n_nodes
    double* weight
    double* arc_weight
    double* alt_weight
    intp_t* target
    intp_t* slot
    intp_t* top
    intp_t* parent
    intp_t* arc_src
    intp_t* arc_tgt
    intp_t* queue
    intp_t* next_position
    intp_t* first
    intp_t* last
    intp_t* members
    intp_t* roots
    intp_t* alt_src
    intp_t* alt_tgt


cdef inline double _reduction(double chosen) noexcept nogil:
    """What a cycle member's arc weight subtracts from the arcs entering it (0 for -inf)."""
    return chosen if chosen > -INFINITY else 0.0


cdef intp_t _best_arc_into(_Arborescence* g, intp_t v, bint skip_root,
                           double* best_weight) noexcept nogil:
    """Best arc into ``v`` from outside it (from a non-root source if ``skip_root``).

    Returns the source position, the first one among equal weights, or -1 if there is none.
    """
    cdef intp_t u, best_u = -1
    cdef intp_t N = g.N
    cdef const double* row = g.weight + g.slot[v] * N
    cdef double best = -INFINITY
    for u in range(1 if skip_root else 0, N):
        if g.top[u] == v:
            continue
        if best_u < 0 or row[u] > best:
            best = row[u]
            best_u = u
    best_weight[0] = best
    return best_u


cdef intp_t _contract(_Arborescence* g, intp_t n_members) noexcept nogil:
    """Contract the cycle ``g.members[:n_members]`` into a new node and return it.

    The arcs entering the cycle are reweighted by Tarjan's rule: an arc into member x loses
    the weight of x's chosen arc; of the arcs from one source the best one is kept (the first
    member among ties). The new node reuses the first member's row.
    """
    cdef intp_t N = g.N
    cdef intp_t c = g.n_nodes
    cdef intp_t i, u, x, p, best_x
    cdef double best, candidate
    g.n_nodes += 1
    x = g.members[0]
    g.slot[c] = g.slot[x]
    g.parent[c] = -1
    g.arc_src[c] = -1
    g.first[c] = g.first[x]
    g.last[c] = g.last[x]
    for i in range(n_members):
        x = g.members[i]
        g.parent[x] = c
        if i > 0:
            g.next_position[g.last[c]] = g.first[x]
            g.last[c] = g.last[x]
    p = g.first[c]
    while p >= 0:
        g.top[p] = c
        p = g.next_position[p]
    for u in range(N):
        if g.top[u] == c:
            continue
        x = g.members[0]
        best = g.weight[g.slot[x] * N + u] - _reduction(g.arc_weight[x])
        best_x = x
        for i in range(1, n_members):
            x = g.members[i]
            candidate = g.weight[g.slot[x] * N + u] - _reduction(g.arc_weight[x])
            if candidate > best:
                best = candidate
                best_x = x
        g.weight[g.slot[c] * N + u] = best
        g.target[g.slot[c] * N + u] = g.target[g.slot[best_x] * N + u]
    return c


cdef intp_t _collect_cycle(_Arborescence* g, intp_t v) noexcept nogil:
    """Members of the cycle closed by ``v``'s new arc: ``v`` and the nodes above it."""
    cdef intp_t count = 1, x = g.top[g.arc_src[v]]
    g.members[0] = v
    while x != v:
        g.members[count] = x
        count += 1
        x = g.top[g.arc_src[x]]
    return count


cdef bint _closes_cycle(_Arborescence* g, intp_t v) noexcept nogil:
    """Whether following the chosen arcs up from ``v``'s new arc comes back to ``v``."""
    cdef intp_t x = g.top[g.arc_src[v]]
    while x != 0 and x != v and g.arc_src[x] >= 0:
        x = g.top[g.arc_src[x]]
    return x == v


cdef inline double _swap_gain(_Arborescence* g, intp_t v) noexcept nogil:
    """Change of the tree weight when root child ``v`` takes its best non-root arc."""
    if g.alt_weight[v] == -INFINITY:
        return -INFINITY
    if g.arc_weight[v] == -INFINITY:
        return INFINITY
    return g.alt_weight[v] - g.arc_weight[v]


cdef void _set_alternative(_Arborescence* g, intp_t v) noexcept nogil:
    cdef double weight
    g.alt_src[v] = _best_arc_into(g, v, True, &weight)
    g.alt_weight[v] = weight
    g.alt_tgt[v] = g.target[g.slot[v] * g.N + g.alt_src[v]]


cdef void _max_arborescence(const double* scores, intp_t n, bint single_root, double* work,
                            intp_t* int_work) noexcept nogil:
    """Maximum spanning arborescence rooted at 0; position m's head is left in ``int_work``.

    Contraction phase (Tarjan 1977): every node in a FIFO queue takes its best entering arc
    from outside itself; when that arc closes a cycle of chosen arcs, the cycle is contracted
    into a new node (:func:`_contract`) that joins the queue. Every node is scanned once in
    O(n) and every contraction costs O(n) per member, so the phase is O(n^2).

    Root constraint (Gabow and Tarjan 1984; Zmigrod, Vieira and Cotterell 2020, sec. 4): while
    the root has several children in the contracted graph, the root child whose best non-root
    entering arc loses the least weight takes that arc; if the arc closes a cycle, the cycle is
    contracted and enters from the root again. Each swap removes a root child or a node, so
    there are fewer than 2n swaps of O(n) each.

    Expansion (Camerini et al. 1979): the contracted nodes are opened in reverse order of
    creation; the arc entering a node replaces the cycle arc of the member containing its
    target position.
    """
    cdef _Arborescence g
    cdef intp_t N = n + 1
    cdef intp_t V = 2 * N
    cdef intp_t NN = N * N
    cdef intp_t u, v, m, head, tail, c, i, best_i, n_roots, n_members
    cdef double weight, best_gain, gain
    g.N = N
    g.n_nodes = N
    g.weight = work
    g.arc_weight = work + NN
    g.alt_weight = work + NN + V
    g.target = int_work
    g.slot = int_work + NN
    g.top = g.slot + V
    g.parent = g.top + N
    g.arc_src = g.parent + V
    g.arc_tgt = g.arc_src + V
    g.queue = g.arc_tgt + V
    g.next_position = g.queue + V
    g.first = g.next_position + N
    g.last = g.first + V
    g.members = g.last + V
    g.roots = g.members + V
    g.alt_src = g.roots + V
    g.alt_tgt = g.alt_src + V
    for u in range(N):
        g.top[u] = u
        g.slot[u] = u
        g.parent[u] = -1
        g.arc_src[u] = -1
        g.first[u] = u
        g.last[u] = u
        g.next_position[u] = -1
    for m in range(1, N):
        for u in range(N):
            g.weight[m * N + u] = scores[u * N + m]
            g.target[m * N + u] = m
        g.queue[m - 1] = m
    head = 0
    tail = n
    while head < tail:
        v = g.queue[head]
        head += 1
        u = _best_arc_into(&g, v, False, &weight)
        g.arc_src[v] = u
        g.arc_tgt[v] = g.target[g.slot[v] * N + u]
        g.arc_weight[v] = weight
        if _closes_cycle(&g, v):
            n_members = _collect_cycle(&g, v)
            g.queue[tail] = _contract(&g, n_members)
            tail += 1
    if single_root:
        n_roots = 0
        for v in range(1, g.n_nodes):
            if g.parent[v] < 0 and g.arc_src[v] == 0:
                g.roots[n_roots] = v
                n_roots += 1
        if n_roots > 1:
            for i in range(n_roots):
                _set_alternative(&g, g.roots[i])
        while n_roots > 1:
            best_i = 0
            best_gain = _swap_gain(&g, g.roots[0])
            for i in range(1, n_roots):
                gain = _swap_gain(&g, g.roots[i])
                if gain > best_gain:
                    best_gain = gain
                    best_i = i
            v = g.roots[best_i]
            for i in range(best_i, n_roots - 1):
                g.roots[i] = g.roots[i + 1]
            n_roots -= 1
            g.arc_src[v] = g.alt_src[v]
            g.arc_tgt[v] = g.alt_tgt[v]
            g.arc_weight[v] = g.alt_weight[v]
            if _closes_cycle(&g, v):
                n_members = _collect_cycle(&g, v)
                c = _contract(&g, n_members)
                g.arc_src[c] = 0
                g.arc_tgt[c] = g.target[g.slot[c] * N]
                g.arc_weight[c] = g.weight[g.slot[c] * N]
                _set_alternative(&g, c)
                g.roots[n_roots] = c
                n_roots += 1
    for c in range(g.n_nodes - 1, N - 1, -1):
        v = g.arc_tgt[c]
        while g.parent[v] != c:
            v = g.parent[v]
        g.arc_src[v] = g.arc_src[c]
        g.arc_tgt[v] = g.arc_tgt[c]
    # the heads, by position, at the start of int_work
    for m in range(1, N):
        int_work[m - 1] = g.arc_src[m]


cdef double spanning_tree_decode(const double* scores, intp_t n, bint single_root,
                                 int64_t* heads, double* work,
                                 intp_t* int_work) noexcept nogil:
    """Highest-scoring (non-projective) tree of one sentence by Chu-Liu-Edmonds, O(n^2).

    See :func:`_max_arborescence`. Ties are broken deterministically (the smallest source
    position when a node picks its best entering arc, the first root child in order of
    creation when a swap is chosen), not by a global order of the trees.

    Returns the score of the written tree (the sum of its arc scores in modifier order), -inf
    when no tree avoids the -inf arcs; a tree is written in every case.
    """
    cdef intp_t m
    _max_arborescence(scores, n, single_root, work, int_work)
    for m in range(n):
        heads[m] = int_work[m]
    return _tree_score(scores, n, heads)


# ---------------------------------------------------------------------------------------------
# Inside-outside over Eisner's chart

cdef inline double _log_sum_products(const double* left, const double* right,
                                     intp_t count) noexcept nogil:
    """``log sum_i exp(left[i] + right[i])`` over ``i < count``, -inf for no finite term.

    Shifted by the largest term; terms more than 40 nats below it are left out.
    """
    cdef intp_t i
    cdef double peak = -INFINITY, total = 0.0, term
    for i in range(count):
        term = left[i] + right[i]
        if term > peak:
            peak = term
    if peak == -INFINITY:
        return -INFINITY
    for i in range(count):
        term = left[i] + right[i] - peak
        if term > _NEGLIGIBLE:
            total += exp(term)
    return peak + log(total)


cdef inline void _store(double* table, intp_t N, intp_t s, intp_t t, double value) noexcept nogil:
    table[s * N + t] = value
    table[t * N + s] = value


cdef inline void _push_back(double weight, double value, const double* left, const double* right,
                            intp_t count, double* left_weight,
                            double* right_weight) noexcept nogil:
    """Back-propagate the marginal ``weight`` of ``value = log sum_i exp(left[i] + right[i])``.

    Term i was used with probability ``exp(left[i] + right[i] - value)`` given the item; both
    of its operands receive ``weight`` times that probability (none below e^-40).
    """
    cdef intp_t i
    cdef double share
    if weight == 0.0 or value == -INFINITY:
        return
    for i in range(count):
        share = left[i] + right[i] - value
        if share > _NEGLIGIBLE:
            share = weight * exp(share)
            left_weight[i] += share
            right_weight[i] += share


cdef double eisner_marginals(const double* scores, intp_t n, bint single_root,
                             double* marginals, double* work) noexcept nogil:
    """Arc marginals and log-partition over the projective trees of one sentence, O(n^3).

    The inside pass is Eisner's chart (:func:`eisner_decode`) with log-sum-exp in place of
    max, each log-sum-exp shifted by its largest term. The outside pass is its reverse-mode
    derivative: the adjoint of a chart item is the probability that a random tree's
    derivation uses it (every projective tree has exactly one derivation in this chart), and
    an item passes it on to the two operands of each of its terms in proportion to the
    term's share ``exp(term - item)``. Items are visited by decreasing span, complete before
    incomplete, so each adjoint is final when it is passed on. The adjoint of an incomplete
    span is the marginal of its arc. Adjoints are probabilities, so the outside pass works in
    linear scale without overflow; in the log domain only the inside pass, which keeps full
    relative precision for any finite scores. One exponential per chart term and pass.

    With ``single_root`` the root's complete spans ``C[0][t]``, ``t < n``, are removed from
    the chart so that the root attaches exactly one span. -inf arcs get marginal 0.

    Every table is ``(n + 1) x (n + 1)``. The inside tables hold span ``(s, t)`` at
    ``[s, t]`` and ``[t, s]``; an adjoint table collects the shares passed along a row at
    ``[s, t]`` and those passed along a column at ``[t, s]``, the adjoint being their sum.
    The adjoints of the incomplete spans are collected directly in ``marginals``.

    ``marginals`` receives ``p(h -> m)`` at ``[h, m]`` and zeros elsewhere. Returns
    ``log Z``; a sentence without a projective tree of finite score gets -inf and zero
    marginals.
    """
    cdef intp_t N = n + 1
    cdef intp_t NN = N * N
    cdef double* right_complete = work
    cdef double* left_complete = work + NN
    cdef double* right_incomplete = work + 2 * NN
    cdef double* left_incomplete = work + 3 * NN
    cdef double* split = work + 4 * NN
    cdef double* right_adjoint = work + 5 * NN
    cdef double* left_adjoint = work + 6 * NN
    cdef intp_t k, s, t
    cdef double value, log_z, weight
    for s in range(NN):
        marginals[s] = 0.0
        right_adjoint[s] = 0.0
        left_adjoint[s] = 0.0
    for s in range(N):
        right_complete[s * N + s] = 0.0
        left_complete[s * N + s] = 0.0
    for k in range(1, N):
        for s in range(N - k):
            t = s + k
            # S[s][t] = log sum_r exp(C[s][r] (right) + C[r + 1][t] (left)), s <= r < t
            value = _log_sum_products(right_complete + s * N + s,
                                      left_complete + t * N + s + 1, t - s)
            split[s * N + t] = value
            _store(right_incomplete, N, s, t, value + scores[s * N + t])
            _store(left_incomplete, N, s, t,
                   -INFINITY if s == 0 else value + scores[t * N + s])
            # C[s][t] (left) from C[s][r] (left) + I[r][t] (left), s <= r < t
            value = -INFINITY if s == 0 else _log_sum_products(
                left_complete + s * N + s, left_incomplete + t * N + s, t - s)
            _store(left_complete, N, s, t, value)
            # C[s][t] (right) from I[s][r] (right) + C[r][t] (right), s < r <= t
            value = _log_sum_products(right_incomplete + s * N + s + 1,
                                      right_complete + t * N + s + 1, t - s)
            if single_root and s == 0 and t < n:
                value = -INFINITY
            _store(right_complete, N, s, t, value)
    log_z = right_complete[n]
    if log_z == -INFINITY:
        return log_z
    right_adjoint[n] = 1.0
    for k in range(n, 0, -1):
        for s in range(N - k):
            t = s + k
            weight = right_adjoint[s * N + t] + right_adjoint[t * N + s]
            _push_back(weight, right_complete[s * N + t], right_incomplete + s * N + s + 1,
                       right_complete + t * N + s + 1, t - s, marginals + s * N + s + 1,
                       right_adjoint + t * N + s + 1)
            weight = left_adjoint[s * N + t] + left_adjoint[t * N + s]
            _push_back(weight, left_complete[s * N + t], left_complete + s * N + s,
                       left_incomplete + t * N + s, t - s, left_adjoint + s * N + s,
                       marginals + t * N + s)
            weight = marginals[s * N + t] + (marginals[t * N + s] if s > 0 else 0.0)
            _push_back(weight, split[s * N + t], right_complete + s * N + s,
                       left_complete + t * N + s + 1, t - s, right_adjoint + s * N + s,
                       left_adjoint + t * N + s + 1)
    return log_z


# ---------------------------------------------------------------------------------------------
# Matrix-tree theorem

# Status of an elimination.
cdef enum:
    _MTT_DONE = 0  # log Z found
    _MTT_EMPTY = 1  # no tree of finite score
    _MTT_RANGE = 2  # an entry left the range of the double-precision elimination

# The double-precision elimination keeps every nonzero entry at least _LOWEST in the unit of
# its column, a normal number: then no rounding error is larger than relative, and the
# reverse pass, whose sums reach n^2 / entry, cannot overflow for n < 2^31.
cdef double _LOWEST = 2.0 ** -960
cdef double _LOG_LOWEST = -960.0 * log(2.0)
# The root row of single-root trees, which the pivots leave out, is scaled down by a power of
# two when it exceeds _HIGHEST: then p_root = a[root, k] / d_k < 2^992 and no sum overflows.
cdef double _HIGHEST = 2.0 ** 32
cdef double _LN2 = log(2.0)


cdef inline double _log_add(double x, double y) noexcept nogil:
    """``log(exp(x) + exp(y))``; the smaller term is left out when negligible."""
    if x < y:
        x, y = y, x
    if not y - x >= _NEGLIGIBLE:  # also when both are -inf
        return x
    return x + log1p(exp(y - x))


cdef inline void _log_accumulate(double* peak, double* total, double term) noexcept nogil:
    """Add ``exp(term)`` to the sum ``total * exp(peak)`` (start from -inf and 0), leaving
    out a term negligible against the largest so far."""
    if not term - peak[0] >= _NEGLIGIBLE:  # also when both are -inf
        return
    if term > peak[0]:
        total[0] = total[0] * exp(peak[0] - term) + 1.0
        peak[0] = term
    else:
        total[0] += exp(term - peak[0])


cdef inline double _log_excess(double log_x, double t) noexcept nogil:
    """``log(1 - t + exp(log_x))``, -inf where that is not positive."""
    cdef double value
    if log_x >= 0.0:
        value = (1.0 - t) * exp(-log_x)
        return log_x + log1p(value) if value > -1.0 else -INFINITY
    value = 1.0 - t + exp(log_x)
    return log(value) if value > 0.0 else -INFINITY


cdef bint _mtt_shifts(const double* scores, intp_t n, double* shift,
                      intp_t* order) noexcept nogil:
    """Column units ``c_m``, the best scores entering the tokens, and the identity order;
    False when a token cannot be entered."""
    cdef intp_t N = n + 1
    cdef intp_t h, m
    cdef double peak
    for m in range(1, N):
        peak = -INFINITY
        for h in range(N):
            if h != m and scores[h * N + m] > peak:
                peak = scores[h * N + m]
        if peak == -INFINITY:
            return False
        shift[m - 1] = peak
        order[m - 1] = m
    return True


cdef void _mtt_swap(double* a, intp_t n, intp_t k, intp_t q, double* shift,
                    intp_t* order) noexcept nogil:
    """Exchange the positions ``k`` and ``q`` (columns and rows) of the elimination."""
    cdef intp_t N = n + 1
    cdef intp_t r, j
    for r in range(N):
        a[k * N + r], a[q * N + r] = a[q * N + r], a[k * N + r]
    for j in range(n):
        a[j * N + k], a[j * N + q] = a[j * N + q], a[j * N + k]
    shift[k], shift[q] = shift[q], shift[k]
    order[k], order[q] = order[q], order[k]


cdef intp_t _entered_position(const double* a, intp_t n, intp_t k, double zero) noexcept nogil:
    """First position ``q >= k`` with an entry above ``zero`` from a token row ``>= k``
    other than its own, or -1 (single-root pivot choice)."""
    cdef intp_t N = n + 1
    cdef intp_t q, r
    for q in range(k, n):
        for r in range(k, n):
            if r != q and a[q * N + r] > zero:
                return q
    return -1


cdef int _mtt_forward(const double* scores, intp_t n, bint single_root, double* a,
                      double* shift, double* pivots, double* root_scale, double* p,
                      intp_t* order, double* log_z) noexcept nogil:
    """Elimination in double precision (see :func:`matrix_tree_marginals`).

    ``a`` holds position ``j``'s column at ``a[j * (n + 1) :]``: the token rows ``0..n-1``
    (row ``j``, the diagonal, is unused and holds 1, which the range check passes over) and
    the root row ``n``. For single-root trees the root row, which the pivots leave out, is
    kept below ``_HIGHEST`` by a power of two, ``root_scale[k]``, after step ``k``. Returns
    a status; on ``_MTT_RANGE`` the log-domain elimination must be used instead.
    """
    cdef intp_t N = n + 1
    cdef intp_t j, k, q, r, top
    cdef int exponent
    cdef double value, total, b, peak
    cdef double* column
    cdef double* target
    cdef bint sparse = False
    cdef int small = 0
    for j in range(n):
        column = a + j * N
        for r in range(N):
            value = scores[(0 if r == n else order[r]) * N + order[j]] - shift[j]
            if r == j:
                column[r] = 1.0
            elif value == -INFINITY:
                column[r] = 0.0
                sparse = True
            elif value < _LOG_LOWEST:
                return _MTT_RANGE
            else:
                column[r] = exp(value)
    log_z[0] = 0.0
    for k in range(n):
        column = a + k * N
        # the rows of the pivot: the tokens left, and the root unless it is left out
        top = n - 1 if single_root and k < n - 1 else n
        total = 0.0
        for r in range(k + 1, top + 1):
            total += column[r]
        if total == 0.0:
            q = _entered_position(a, n, k, 0.0) if top < n else -1
            if q < 0:
                return _MTT_EMPTY
            _mtt_swap(a, n, k, q, shift, order)
            for r in range(k + 1, top + 1):
                total += column[r]
        pivots[k] = total
        log_z[0] += log(total) + shift[k]
        for r in range(k + 1, N):
            p[r] = column[r] / total
        for j in range(k + 1, n):
            target = a + j * N
            b = target[k]
            if b == 0.0:
                continue
            if sparse:
                for r in range(k + 1, N):
                    value = target[r] + p[r] * b
                    target[r] = value
                    small |= (p[r] > 0.0) & (value < _LOWEST)  # a small fill-in
            else:
                for r in range(k + 1, N):
                    target[r] += p[r] * b
        if small:
            return _MTT_RANGE
        root_scale[k] = 0.0
        if top < n:
            peak = 0.0
            for j in range(k + 1, n):
                if a[j * N + n] > peak:
                    peak = a[j * N + n]
            if peak > _HIGHEST:
                frexp(peak, &exponent)
                root_scale[k] = exponent
                log_z[0] += exponent * _LN2
                for j in range(k + 1, n):
                    value = ldexp(a[j * N + n], -exponent)
                    a[j * N + n] = value
                    if 0.0 < value < _LOWEST:
                        return _MTT_RANGE
    return _MTT_DONE


cdef void _mtt_backward(intp_t n, bint single_root, const double* a, const double* pivots,
                        const double* root_scale, double* grad, double* p,
                        double* x) noexcept nogil:
    """Reverse pass of :func:`_mtt_forward`: ``grad`` (laid out as ``a``) receives
    ``d log Z / d a`` at each entry as it was when its row or column was eliminated (the
    root row in the scale of the first step)."""
    cdef intp_t N = n + 1
    cdef intp_t j, k, r
    cdef double d, b, g, dependents, value, excess
    cdef const double* column
    cdef double* gradient
    cdef double* target
    for j in range(n):
        grad[j * N + j] = 0.0
    for k in range(n - 1, -1, -1):
        column = a + k * N
        gradient = grad + k * N
        if root_scale[k] != 0.0 and k < n - 1:
            for j in range(k + 1, n):
                grad[j * N + n] = ldexp(grad[j * N + n], -<int> root_scale[k])
        d = pivots[k]
        for r in range(k + 1, N):
            p[r] = column[r] / d
            x[r] = 0.0
        dependents = 0.0
        for j in range(k + 1, n):
            b = a[j * N + k]
            if b == 0.0:
                grad[j * N + k] = 0.0
                continue
            target = grad + j * N
            g = 0.0
            for r in range(k + 1, N):
                g += p[r] * target[r]
            grad[j * N + k] = g
            dependents += b * g
            for r in range(k + 1, N):
                x[r] += b * target[r]
        # the pivot's rows get 1 - T + x_r (T the expected number of dependents of k)
        excess = 1.0 - dependents
        for r in range(k + 1, N):
            value = ((excess if r < n or not single_root or k == n - 1 else 0.0) + x[r]) / d
            gradient[r] = value if column[r] > 0.0 and value > 0.0 else 0.0


cdef int _mtt_log_forward(const double* scores, intp_t n, bint single_root, double* a,
                          double* shift, double* pivots, double* p, intp_t* order,
                          double* log_z) noexcept nogil:
    """:func:`_mtt_forward` with every entry (and pivot) held as its logarithm."""
    cdef intp_t N = n + 1
    cdef intp_t j, k, q, r
    cdef double b, log_d, peak, total
    cdef bint with_root
    cdef double* column
    cdef double* target
    for j in range(n):
        column = a + j * N
        for r in range(N):
            column[r] = scores[(0 if r == n else order[r]) * N + order[j]] - shift[j]
        column[j] = 0.0
    log_z[0] = 0.0
    for k in range(n):
        column = a + k * N
        with_root = not single_root or k == n - 1
        peak = -INFINITY
        total = 0.0
        for r in range(k + 1, n):
            _log_accumulate(&peak, &total, column[r])
        if with_root:
            _log_accumulate(&peak, &total, column[n])
        if total == 0.0:
            q = -1 if with_root else _entered_position(a, n, k, -INFINITY)
            if q < 0:
                return _MTT_EMPTY
            _mtt_swap(a, n, k, q, shift, order)
            for r in range(k + 1, n):
                _log_accumulate(&peak, &total, column[r])
        log_d = peak + log(total)
        pivots[k] = log_d
        log_z[0] += log_d + shift[k]
        for r in range(k + 1, N):
            p[r] = column[r] - log_d
        for j in range(k + 1, n):
            target = a + j * N
            b = target[k]
            if b == -INFINITY:
                continue
            for r in range(k + 1, N):
                target[r] = _log_add(target[r], p[r] + b)
    return _MTT_DONE


cdef void _mtt_log_backward(intp_t n, bint single_root, const double* a,
                            const double* pivots, double* grad, double* p, double* x_peak,
                            double* x_total) noexcept nogil:
    """:func:`_mtt_backward` for :func:`_mtt_log_forward`, every gradient as a logarithm."""
    cdef intp_t N = n + 1
    cdef intp_t j, k, r
    cdef double d, b, g_peak, g_total, g, t_peak, t_total, dependents
    cdef const double* column
    cdef double* gradient
    cdef double* target
    for j in range(n):
        grad[j * N + j] = -INFINITY
    for k in range(n - 1, -1, -1):
        column = a + k * N
        gradient = grad + k * N
        d = pivots[k]
        for r in range(k + 1, N):
            p[r] = column[r] - d
            x_peak[r] = -INFINITY
            x_total[r] = 0.0
        t_peak = -INFINITY
        t_total = 0.0
        for j in range(k + 1, n):
            b = a[j * N + k]
            if b == -INFINITY:
                grad[j * N + k] = -INFINITY
                continue
            target = grad + j * N
            g_peak = -INFINITY
            g_total = 0.0
            for r in range(k + 1, N):
                _log_accumulate(&g_peak, &g_total, p[r] + target[r])
            g = g_peak + log(g_total)
            grad[j * N + k] = g
            _log_accumulate(&t_peak, &t_total, b + g)
            for r in range(k + 1, N):
                _log_accumulate(&x_peak[r], &x_total[r], b + target[r])
        dependents = t_total * exp(t_peak)
        for r in range(k + 1, N):
            if column[r] == -INFINITY:
                gradient[r] = -INFINITY
            elif r == n and single_root and k < n - 1:
                gradient[r] = x_peak[r] + log(x_total[r]) - d
            else:
                gradient[r] = _log_excess(x_peak[r] + log(x_total[r]), dependents) - d


cdef double matrix_tree_marginals(const double* scores, intp_t n, bint single_root,
                                  double* marginals, double* work,
                                  intp_t* int_work) noexcept nogil:
    """Arc marginals and log-partition over all trees of one sentence, O(n^3).

    Matrix-tree theorem (Tutte 1948; Koo, Globerson, Carreras and Collins 2007, sec. 3;
    Smith and Smith 2007): with arc weights ``w(h, m) = exp(scores[h, m])``, ``Z = det L``
    for the token Laplacian ``L[m, m] = sum_h w(h, m)`` (root included) and
    ``L[h, m] = -w(h, m)``. ``L`` is a column diagonally dominant M-matrix whose column
    excess (column sum) is the root weight ``w(0, m)``.

    Elimination. ``det L`` is computed by Gaussian elimination in the form of Grassmann,
    Taksar and Heyman (1985): the matrix is held as its off-diagonal weights and its
    excesses (a root row, never eliminated), and eliminating token ``k`` leaves those of the
    Schur complement, the same kind of graph over the other tokens:
    ``a[r, j] += a[r, k] a[k, j] / d_k`` for every row ``r``, root included, with the pivot
    ``d_k = sum_r a[r, k]`` summed over the rows left, never obtained as a difference.
    ``Z`` is the product of the pivots. Only sums, products and quotients of non-negative
    numbers occur, so every entry and pivot is found to a relative error of O(n u) (u the
    unit roundoff) however ill-conditioned ``L`` is (O'Cinneide 1993; Alfa, Xue and Ye 2002,
    for the LDU factors of diagonally dominant M-matrices): ``log Z`` to an absolute error
    O(n^2 u), for any finite scores.

    Single root. ``Z_1 = sum_m w(0, m) A(m)``, ``A(m)`` the weight of the arborescences of
    the tokens rooted at ``m``, is the coefficient of ``t`` in ``det L`` when the root
    weights are multiplied by ``t`` (the sum Koo et al. obtain from their modified matrix,
    sec. 3.3). To first order in ``t`` the same elimination applies with the root row left
    out of the pivots but updated alongside, the last pivot being the root entry of the last
    token (the root row is then GTH's forward computation of the stationary distribution of
    the tokens' chain, weighted by the root arcs). A token left with no entering
    token arc must be the root's only child: the first later token that has one is
    eliminated before it (none: ``Z_1 = 0``).

    Marginals. ``mu(h, m) = w(h, m) dlog Z / dw(h, m)`` by the reverse-mode derivative of
    the elimination, O(n^3) in time and O(n^2) in memory (it needs only the pivot rows and
    columns, which the elimination leaves in place). Multiplied by the entries, the
    gradients at every step are the arc marginals of the graph left, in ``[0, 1]``; the one
    difference, ``1 - T + x_r`` with ``T <= n`` the expected number of dependents of the
    token eliminated, cancels at most O(n), so the marginals have absolute errors of a small
    multiple of ``n^2 u``.

    Range. Column ``m`` is held in the unit ``exp(c_m)``, ``c_m`` the best score entering
    it, so that its weights lie in ``[0, 1]``; a Schur complement keeps the column units,
    and ``log Z = sum_k (log d_k + c_k)``. Entries only grow (the sums of the columns do
    not), except the root row of single-root trees, which the pivots leave out: it is
    scaled down by a power of two whenever it exceeds ``2^32``. The elimination runs in
    double precision while every nonzero entry stays at least ``2^-960`` in its unit (every
    finite score within 665 nats of the best one entering its token, and no smaller fill-in
    of a -inf arc), so that nothing underflows; otherwise it is redone with every entry
    held as its logarithm (log-add updates, 3 to 10 times slower). There an entry's
    relative error is ``u`` times its logarithm, so the errors are ``u`` times the spread of
    the scores, the rounding of the scores themselves, as in the log-domain
    :func:`eisner_marginals`.

    Measured against exhaustive enumeration (n <= 6; normal and tied scores of scale 1 to
    1000, -inf arcs, cycles of best arcs entered up to 1e4 nats below) and against 40-digit
    decimal elimination (n = 30 and 60, scales 50 and 500): ``log Z`` to a relative 3e-14
    and the marginals to an absolute 5e-14 up to scale 100, 2e-13 and 5e-13 at scale 1000.
    A sentence without any tree of finite score (a zero pivot, exact here since no entry
    underflows) gets ``log Z = -inf`` and zero marginals. Marginals are clipped to
    ``[0, 1]``; -inf arcs get exactly 0.
    """
    cdef intp_t N = n + 1
    cdef double* a = work
    cdef double* grad = work + n * N
    cdef double* shift = grad + n * N
    cdef double* pivots = shift + n
    cdef double* root_scale = pivots + n
    cdef double* p = root_scale + n
    cdef double* x = p + N
    cdef double* x_total = x + N
    cdef intp_t* order = int_work
    cdef intp_t i, j, r, h, m
    cdef int status
    cdef bint log_domain = False
    cdef double log_z = -INFINITY, value, g
    for i in range(N * N):
        marginals[i] = 0.0
    if not _mtt_shifts(scores, n, shift, order):
        return -INFINITY
    status = _mtt_forward(scores, n, single_root, a, shift, pivots, root_scale, p, order,
                          &log_z)
    if status == _MTT_RANGE:
        log_domain = True
        _mtt_shifts(scores, n, shift, order)
        status = _mtt_log_forward(scores, n, single_root, a, shift, pivots, p, order, &log_z)
    if status == _MTT_EMPTY:
        return -INFINITY
    if log_domain:
        _mtt_log_backward(n, single_root, a, pivots, grad, p, x, x_total)
    else:
        _mtt_backward(n, single_root, a, pivots, root_scale, grad, p, x)
    for j in range(n):
        m = order[j]
        for r in range(N):
            if r == j:
                continue
            h = 0 if r == n else order[r]
            value = scores[h * N + m] - shift[j]
            if value == -INFINITY:
                continue
            g = grad[j * N + r]
            if log_domain:
                value = exp(value + g)
            else:
                value = exp(value) * g
            marginals[h * N + m] = 1.0 if value > 1.0 else value
    return log_z


# ---------------------------------------------------------------------------------------------
# Batched entry points

cdef intp_t _longest(const int64_t* lengths, intp_t n_sentences) noexcept nogil:
    cdef intp_t i, longest = 0
    for i in range(n_sentences):
        if lengths[i] > longest:
            longest = lengths[i]
    return longest


def decode_batch(const float64_t[::1] scores, const int64_t[::1] lengths, bint projective,
                 bint single_root, int64_t[::1] heads, float64_t[::1] best):
    """Best tree of every sentence of a batch.

    ``scores`` concatenates the flattened ``(n_i + 1) x (n_i + 1)`` score matrices of the
    sentences of ``lengths`` (every ``n_i >= 1``); ``heads`` (``sum n_i``) receives their
    heads and ``best`` their scores. Projective trees by :func:`eisner_decode`, the others
    by :func:`spanning_tree_decode`.
    """
    cdef intp_t n_sentences = lengths.shape[0]
    cdef intp_t i, n, longest, score_offset = 0, token_offset = 0
    cdef intp_t work_done = 0
    cdef double* work = NULL
    cdef intp_t* int_work = NULL
    if n_sentences == 0:
        return
    longest = _longest(&lengths[0], n_sentences)
    if projective:
        work = <double*> malloc(eisner_work(longest) * sizeof(double))
        int_work = <intp_t*> malloc(eisner_int_work(longest) * sizeof(intp_t))
    else:
        work = <double*> malloc(spanning_tree_work(longest) * sizeof(double))
        int_work = <intp_t*> malloc(spanning_tree_int_work(longest) * sizeof(intp_t))
    try:
        if work == NULL or int_work == NULL:
            raise MemoryError("could not allocate the dependency decoding workspace")
        with nogil:
            for i in range(n_sentences):
                n = lengths[i]
                if projective:
                    best[i] = eisner_decode(&scores[score_offset], n, single_root,
                                            &heads[token_offset], work, int_work)
                else:
                    best[i] = spanning_tree_decode(&scores[score_offset], n, single_root,
                                                   &heads[token_offset], work, int_work)
                score_offset += (n + 1) * (n + 1)
                token_offset += n
                check_signals_every(&work_done, _chart_work(n, projective),
                                    _WORK_PER_SIGNAL_CHECK)
    finally:
        free(work)
        free(int_work)


def marginals_batch(const float64_t[::1] scores, const int64_t[::1] lengths, bint projective,
                    bint single_root, float64_t[::1] marginals, float64_t[::1] log_partition):
    """Arc marginals and log-partition of every sentence of a batch.

    Same layout as :func:`decode_batch`; ``marginals`` has the layout of ``scores``.
    Projective trees by :func:`eisner_marginals`, the others by
    :func:`matrix_tree_marginals`.
    """
    cdef intp_t n_sentences = lengths.shape[0]
    cdef intp_t i, n, longest, score_offset = 0
    cdef intp_t work_done = 0
    cdef double* work = NULL
    cdef intp_t* int_work = NULL
    if n_sentences == 0:
        return
    longest = _longest(&lengths[0], n_sentences)
    if projective:
        work = <double*> malloc(inside_outside_work(longest) * sizeof(double))
        int_work = <intp_t*> malloc(sizeof(intp_t))
    else:
        work = <double*> malloc(matrix_tree_work(longest) * sizeof(double))
        int_work = <intp_t*> malloc(matrix_tree_int_work(longest) * sizeof(intp_t))
    try:
        if work == NULL or int_work == NULL:
            raise MemoryError("could not allocate the dependency marginals workspace")
        with nogil:
            for i in range(n_sentences):
                n = lengths[i]
                if projective:
                    log_partition[i] = eisner_marginals(
                        &scores[score_offset], n, single_root, &marginals[score_offset], work)
                else:
                    log_partition[i] = matrix_tree_marginals(
                        &scores[score_offset], n, single_root, &marginals[score_offset], work,
                        int_work)
                score_offset += (n + 1) * (n + 1)
                check_signals_every(&work_done, _chart_work(n, True), _WORK_PER_SIGNAL_CHECK)
    finally:
        free(work)
        free(int_work)
