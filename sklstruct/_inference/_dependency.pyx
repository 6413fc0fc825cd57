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
  Globerson, Carreras and Collins 2007; Smith and Smith 2007), O(n^3).

The batched entry points below run them over the concatenated flattened score matrices of a
batch without the GIL. Their inputs are validated by :mod:`sklstruct._inference.dependency`:
every sentence has at least one token, the sizes agree and no score is NaN or ``+inf``.
"""
from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport INFINITY, exp, fabs, log
from libc.stdlib cimport free, malloc

from sklstruct._typedefs cimport float64_t, int64_t, intp_t

# Terms this many nats below the largest one are left out of a sum of exponentials: e^-40 is
# 4e-18, so leaving out n of them changes the sum by less than n * 4e-18 relative.
cdef double _NEGLIGIBLE = -40.0
# The batched loops check for Ctrl-C whenever about this many chart cells were processed.
cdef double _WORK_PER_SIGNAL_CHECK = 2.0e7

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

cdef double matrix_tree_marginals(const double* scores, intp_t n, bint single_root,
                                  double* marginals, double* work,
                                  intp_t* int_work) noexcept nogil:
    """Arc marginals and log-partition over all trees of one sentence, O(n^3).

    Matrix-tree theorem for directed graphs (Koo, Globerson, Carreras and Collins 2007,
    sec. 3; Smith and Smith 2007): with arc weights ``A[h, m] = exp(scores[h, m])``, ``Z`` is
    the determinant of the Laplacian restricted to the tokens, ``L[m, m] = sum_h A[h, m]``
    (root included) and ``L[h, m] = -A[h, m]``; for single-root trees, of Koo et al.'s matrix
    whose diagonal leaves the root out and whose first row holds the root weights
    ``A[0, m]``. The marginals are ``A[h, m] dlog Z / dA[h, m]``, read from ``L^{-1}``.

    Column m of either matrix holds only arcs into token m, and every tree has exactly one
    of them, so each column is computed with the scores shifted by their maximum ``c_m`` and
    ``log Z = log det + sum_m c_m``. The LU factorisation uses partial pivoting.

    Accuracy: the weights lie in ``[0, 1]`` whatever the scale of the scores, and the result
    is as accurate as the factorisation of the shifted matrix, whose condition grows like
    ``exp(d)`` when some set of tokens is entered from outside only by arcs ``d`` nats below
    the best arcs into its members (a cycle of best arcs that the trees must break). Normal
    scores of standard deviation up to about 5 give marginals and ``log Z`` to 1e-10
    (absolute, and relative for ``log Z``), measured against exhaustive enumeration for
    n <= 6 and against 80-digit arithmetic for n = 10 to 40; beyond that the error grows as
    ``1e-16 exp(d)`` and is unbounded for scores of scale 100 when the best arcs form a
    cycle. The projective routine :func:`eisner_marginals` has no such limit.

    A sentence without any tree of finite score (found by :func:`_max_arborescence`) gets
    ``log Z = -inf`` and zero marginals, as does a matrix found singular (a zero pivot or a
    non-positive determinant, which only rounding can produce for a sentence that has trees).
    Marginals are clipped to ``[0, 1]``; -inf arcs get exactly 0.
    """
    cdef intp_t N = n + 1
    cdef intp_t NN = N * N
    cdef double* lap = work
    cdef double* inverse = work + n * n
    cdef double* shift = work + 2 * n * n
    cdef double* column = shift + n
    cdef intp_t* pivot = int_work
    cdef intp_t i, j, k, h, m, p
    cdef double total, weight, peak, value, log_det = 0.0, sign = 1.0, diff
    cdef double best_tree = 0.0
    for i in range(NN):
        marginals[i] = 0.0
    _max_arborescence(scores, n, single_root, work, int_work)
    for m in range(1, N):
        best_tree += scores[int_work[m - 1] * N + m]
    if best_tree == -INFINITY:
        return -INFINITY
    # shifted weights: the Laplacian, column by column
    for m in range(1, N):
        peak = -INFINITY
        for h in range(N):
            if h != m and scores[h * N + m] > peak:
                peak = scores[h * N + m]
        shift[m - 1] = peak
        total = 0.0
        for h in range(1, N):
            if h == m:
                continue
            weight = exp(scores[h * N + m] - peak)
            if not single_root or h > 1:
                lap[(h - 1) * n + m - 1] = -weight
            total += weight
        weight = exp(scores[m] - peak)
        if single_root:
            if m > 1:
                lap[(m - 1) * n + m - 1] = total
            lap[m - 1] = weight
        else:
            lap[(m - 1) * n + m - 1] = total + weight
    # LU factorisation with partial pivoting, in place
    for k in range(n):
        p = k
        peak = fabs(lap[k * n + k])
        for i in range(k + 1, n):
            if fabs(lap[i * n + k]) > peak:
                peak = fabs(lap[i * n + k])
                p = i
        pivot[k] = p
        if peak == 0.0:
            return -INFINITY
        if p != k:
            sign = -sign
            for j in range(n):
                lap[k * n + j], lap[p * n + j] = lap[p * n + j], lap[k * n + j]
        value = lap[k * n + k]
        if value < 0.0:
            sign = -sign
        log_det += log(fabs(value))
        for i in range(k + 1, n):
            weight = lap[i * n + k] / value
            lap[i * n + k] = weight
            if weight != 0.0:
                for j in range(k + 1, n):
                    lap[i * n + j] -= weight * lap[k * n + j]
    if sign < 0.0:
        return -INFINITY
    # L^{-1}, one column at a time: P A = L U
    for j in range(n):
        for i in range(n):
            column[i] = 1.0 if i == j else 0.0
        for k in range(n):
            p = pivot[k]
            if p != k:
                column[k], column[p] = column[p], column[k]
        for i in range(n):
            total = column[i]
            for k in range(i):
                total -= lap[i * n + k] * column[k]
            column[i] = total
        for i in range(n - 1, -1, -1):
            total = column[i]
            for k in range(i + 1, n):
                total -= lap[i * n + k] * column[k]
            column[i] = total / lap[i * n + i]
        for i in range(n):
            inverse[i * n + j] = column[i]
    # marginals: A[h, m] (L^{-1}[m, m] - L^{-1}[m, h]) with Koo et al.'s variants
    for m in range(1, N):
        peak = shift[m - 1]
        for h in range(N):
            if h == m:
                continue
            weight = exp(scores[h * N + m] - peak)
            if weight == 0.0:
                continue
            if h == 0:
                diff = inverse[(m - 1) * n + (0 if single_root else m - 1)]
            elif single_root:
                diff = ((inverse[(m - 1) * n + m - 1] if m > 1 else 0.0)
                        - (inverse[(m - 1) * n + h - 1] if h > 1 else 0.0))
            else:
                diff = inverse[(m - 1) * n + m - 1] - inverse[(m - 1) * n + h - 1]
            value = weight * diff
            marginals[h * N + m] = 0.0 if value < 0.0 else (1.0 if value > 1.0 else value)
    for m in range(n):
        log_det += shift[m]
    return log_det


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
    cdef double work_done = 0.0
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
                    work_done += <double> n * n * n
                else:
                    best[i] = spanning_tree_decode(&scores[score_offset], n, single_root,
                                                   &heads[token_offset], work, int_work)
                    work_done += <double> n * n
                score_offset += (n + 1) * (n + 1)
                token_offset += n
                if work_done > _WORK_PER_SIGNAL_CHECK:
                    work_done = 0.0
                    with gil:
                        PyErr_CheckSignals()
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
    cdef double work_done = 0.0
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
                work_done += <double> n * n * n
                score_offset += (n + 1) * (n + 1)
                if work_done > _WORK_PER_SIGNAL_CHECK:
                    work_done = 0.0
                    with gil:
                        PyErr_CheckSignals()
    finally:
        free(work)
        free(int_work)
