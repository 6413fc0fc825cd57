"""Compiled inference for pairwise Markov networks given per example as a graph.

One graph has ``n_nodes >= 1`` nodes with ``n_states`` states each, node scores ``unary``
(n_nodes, n_states), edges ``edges`` (n_edges, 2) between distinct nodes and edge scores
``pairwise`` (n_edges, n_states, n_states), all row-major; the score of a labelling ``y`` is

    score(y) = sum_t unary[t, y_t] + sum_e pairwise[e, y_{edges[e, 0]}, y_{edges[e, 1]}].

The per-graph routines (exported through ``_graph.pxd``) are:

- :func:`forest_max_product` and :func:`forest_sum_product`: exact MAP labelling, and node and
  edge marginals with the log-partition ``log sum_y exp(score(y))``, on a forest (an acyclic
  graph, possibly disconnected, edges in any direction and order), by the two-pass schedule
  of belief propagation (Pearl 1988; Koller and Friedman 2009, section 10.2) over a BFS order
  from the lowest-indexed node of each tree. Sum-product runs in the log domain (log-sum-exp
  with the largest term factored out), so any finite scores give finite results.
- :func:`forest_cycle_edge`: whether a graph is a forest (union-find).
- :func:`trws_map`: on graphs with cycles, sequential tree-reweighted message passing, TRW-S
  (Kolmogorov 2006, "Convergent tree-reweighted message passing for energy minimization",
  IEEE TPAMI 28(10)), which returns a labelling and a certified upper bound on the maximum
  score; on a forest it runs the exact max-product, and the bound equals the score.
- :func:`submodular_cut`: exact MAP labelling of binary graphs with submodular edges
  (``pairwise[e, 0, 0] + pairwise[e, 1, 1] >= pairwise[e, 0, 1] + pairwise[e, 1, 0]``) by a
  minimum s-t cut (Kolmogorov and Zabih 2004, "What energy functions can be minimized via
  graph cuts?", IEEE TPAMI 26(2), section 4), and :func:`grid3d_cut`, the same on 3-D
  6-connected grids with Potts-like disagreement costs, built without an edge list.
  The maximum flow is Boykov and Kolmogorov's augmenting-path algorithm with reused search
  trees (2004, "An experimental comparison of min-cut/max-flow algorithms for energy
  minimization in vision", IEEE TPAMI 26(9), section 3).

The batched entry points at the end process every graph of a batch without the GIL: node
rows ``node_offsets[i]:node_offsets[i + 1]`` and edge rows ``edge_offsets[i]:edge_offsets[i + 1]``
belong to graph ``i``, whose edges hold node indices local to it. Inputs are validated by
:mod:`sklstruct._inference.graph`.
"""
from libc.math cimport INFINITY, exp, fabs, log
from libc.stdlib cimport free, malloc

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int64_t, intp_t

# nodes + edges (times iterations) processed between two checks for Ctrl-C
cdef intp_t _SIGNAL_CHECK_WORK = 1 << 22


cdef inline intp_t _other(const int64_t* edges, intp_t e, intp_t node) noexcept nogil:
    """The endpoint of edge ``e`` that is not ``node``."""
    return <intp_t> (edges[2 * e + 1] if edges[2 * e] == node else edges[2 * e])


cdef inline intp_t _argmax(const double* x, intp_t n) noexcept nogil:
    """Index of the largest of ``x[0:n]``; ties go to the lowest index."""
    cdef intp_t k, best = 0
    for k in range(1, n):
        if x[k] > x[best]:
            best = k
    return best


cdef inline double _log_sum_exp(const double* x, intp_t n) noexcept nogil:
    """``log sum_k exp(x[k])`` with the largest term factored out."""
    cdef intp_t k
    cdef double peak = x[0], total = 0.0
    for k in range(1, n):
        if x[k] > peak:
            peak = x[k]
    for k in range(n):
        total += exp(x[k] - peak)
    return peak + log(total)


cdef inline double _log_sum_exp_plus(const double* x, const double* y, intp_t stride,
                                     intp_t n) noexcept nogil:
    """``log sum_k exp(x[k] + y[k * stride])`` with the largest term factored out."""
    cdef intp_t k
    cdef double peak = x[0] + y[0], total = 0.0
    for k in range(1, n):
        if x[k] + y[k * stride] > peak:
            peak = x[k] + y[k * stride]
    for k in range(n):
        total += exp(x[k] + y[k * stride] - peak)
    return peak + log(total)


cdef inline void _edge_strides(const int64_t* edges, intp_t e, intp_t node, intp_t n_states,
                               intp_t* node_stride, intp_t* other_stride) noexcept nogil:
    """Strides of ``pairwise[e]`` along the state of ``node`` and of the other endpoint."""
    if edges[2 * e] == node:
        node_stride[0] = n_states
        other_stride[0] = 1
    else:
        node_stride[0] = 1
        other_stride[0] = n_states


cdef double graph_score(const double* unary, intp_t n_nodes, intp_t n_states,
                        const int64_t* edges, intp_t n_edges, const double* pairwise,
                        const int64_t* labels) noexcept nogil:
    """Score of the labelling ``labels`` (node terms, then edge terms, in index order)."""
    cdef intp_t t, e
    cdef double score = 0.0
    for t in range(n_nodes):
        score += unary[t * n_states + labels[t]]
    for e in range(n_edges):
        score += pairwise[(e * n_states + labels[edges[2 * e]]) * n_states
                          + labels[edges[2 * e + 1]]]
    return score


cdef inline intp_t _find(intp_t* parent, intp_t node) noexcept nogil:
    """Root of ``node``'s set, halving the path on the way."""
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


cdef intp_t forest_cycle_edge(intp_t n_nodes, const int64_t* edges, intp_t n_edges,
                              intp_t* int_work) noexcept nogil:
    """-1 if the graph is a forest, else the first edge that closes a cycle.

    Union-find with union by rank and path halving over the edges in index order; a
    self-loop or a repeated pair of nodes counts as a cycle. ``int_work`` holds
    ``cycle_int_work(n_nodes)`` integers.
    """
    cdef intp_t* parent = int_work
    cdef intp_t* rank = int_work + n_nodes
    cdef intp_t t, e, a, b
    for t in range(n_nodes):
        parent[t] = t
        rank[t] = 0
    for e in range(n_edges):
        a = _find(parent, <intp_t> edges[2 * e])
        b = _find(parent, <intp_t> edges[2 * e + 1])
        if a == b:
            return e
        if rank[a] < rank[b]:
            parent[a] = b
        elif rank[a] > rank[b]:
            parent[b] = a
        else:
            parent[b] = a
            rank[a] += 1
    return -1


cdef void adjacency(intp_t n_nodes, const int64_t* edges, intp_t n_edges, intp_t* start,
                    intp_t* adj, intp_t* fill) noexcept nogil:
    """Incident edges of every node, ``adj[start[t]:start[t + 1]]``, in edge order."""
    cdef intp_t t, e, u, v
    for t in range(n_nodes + 1):
        start[t] = 0
    for e in range(n_edges):
        start[edges[2 * e] + 1] += 1
        start[edges[2 * e + 1] + 1] += 1
    for t in range(n_nodes):
        start[t + 1] += start[t]
        fill[t] = start[t]
    for e in range(n_edges):
        u = edges[2 * e]
        v = edges[2 * e + 1]
        adj[fill[u]] = e
        fill[u] += 1
        adj[fill[v]] = e
        fill[v] += 1


cdef void _forest_schedule(intp_t n_nodes, const int64_t* edges, intp_t n_edges,
                           intp_t* int_work) noexcept nogil:
    """BFS order of every tree from its lowest-indexed node, and each node's parent edge.

    Writes ``order`` (n_nodes) and ``parent_edge`` (n_nodes, -1 for a root) at their places
    in ``int_work`` (see :func:`forest_max_product`). On a graph with cycles the schedule
    covers a spanning forest and the other edges are ignored.
    """
    cdef intp_t* start = int_work
    cdef intp_t* adj = start + n_nodes + 1
    cdef intp_t* order = adj + 2 * n_edges
    cdef intp_t* parent_edge = order + n_nodes
    cdef intp_t t, k, done, i, e, v, w, root
    adjacency(n_nodes, edges, n_edges, start, adj, parent_edge + n_nodes)
    for t in range(n_nodes):
        parent_edge[t] = -2  # not reached yet
    k = 0
    for root in range(n_nodes):
        if parent_edge[root] != -2:
            continue
        parent_edge[root] = -1
        order[k] = root
        done = k
        k += 1
        while done < k:
            v = order[done]
            done += 1
            for i in range(start[v], start[v + 1]):
                e = adj[i]
                w = _other(edges, e, v)
                if parent_edge[w] == -2:
                    parent_edge[w] = e
                    order[k] = w
                    k += 1


cdef double forest_max_product(const double* unary, intp_t n_nodes, intp_t n_states,
                               const int64_t* edges, intp_t n_edges, const double* pairwise,
                               int64_t* labels, intp_t* int_work, double* work) noexcept nogil:
    """Exact MAP labelling of a forest into ``labels``; returns its score.

    Max-product from the leaves to the roots (reverse BFS order), then the labels from the
    roots down; a tie goes to the lower state, given the labels already chosen nearer the
    root. ``int_work`` holds ``forest_int_work(n_nodes, n_edges)`` integers, ``work``
    ``forest_map_work(n_nodes, n_states)`` doubles. The graph must be a forest.
    """
    cdef intp_t S = n_states
    cdef intp_t* order = int_work + n_nodes + 1 + 2 * n_edges
    cdef intp_t* parent_edge = order + n_nodes
    cdef double* belief = work  # node score plus the messages of its children
    cdef intp_t k, v, p, e, a, c, node_stride, parent_stride
    cdef double best, candidate
    cdef const double* P
    _forest_schedule(n_nodes, edges, n_edges, int_work)
    for k in range(n_nodes * S):
        belief[k] = unary[k]
    for k in range(n_nodes - 1, -1, -1):
        v = order[k]
        e = parent_edge[v]
        if e < 0:
            continue
        p = _other(edges, e, v)
        P = pairwise + e * S * S
        _edge_strides(edges, e, p, S, &parent_stride, &node_stride)
        for a in range(S):
            best = belief[v * S] + P[a * parent_stride]
            for c in range(1, S):
                candidate = belief[v * S + c] + P[a * parent_stride + c * node_stride]
                if candidate > best:
                    best = candidate
            belief[p * S + a] += best
    for k in range(n_nodes):
        v = order[k]
        e = parent_edge[v]
        if e < 0:
            labels[v] = _argmax(belief + v * S, S)
            continue
        p = _other(edges, e, v)
        P = pairwise + e * S * S + labels[p] * (S if edges[2 * e] == p else 1)
        node_stride = 1 if edges[2 * e] == p else S
        best = belief[v * S] + P[0]
        labels[v] = 0
        for c in range(1, S):
            candidate = belief[v * S + c] + P[c * node_stride]
            if candidate > best:
                best = candidate
                labels[v] = c
    return graph_score(unary, n_nodes, S, edges, n_edges, pairwise, labels)


cdef double forest_sum_product(const double* unary, intp_t n_nodes, intp_t n_states,
                               const int64_t* edges, intp_t n_edges, const double* pairwise,
                               double* node_marginals, double* edge_marginals,
                               intp_t* int_work, double* work) noexcept nogil:
    """Node and edge marginals of a forest; returns the log-partition.

    Log-domain sum-product: messages from the leaves to the roots, then from the roots
    down. Each node's and edge's log-beliefs are normalised by their own log-sum-exp, so
    the marginals sum to one to rounding whatever the scale of the scores (any finite
    scores are safe; probabilities below about 1e-308 come out as 0). ``edge_marginals[e,
    a, b]`` is ``p(y_{edges[e, 0]} = a, y_{edges[e, 1]} = b)``. ``int_work`` holds
    ``forest_int_work(n_nodes, n_edges)`` integers, ``work`` ``forest_marginals_work(n_nodes,
    n_states)`` doubles. The graph must be a forest.
    """
    cdef intp_t S = n_states
    cdef intp_t* order = int_work + n_nodes + 1 + 2 * n_edges
    cdef intp_t* parent_edge = order + n_nodes
    cdef double* belief = work  # node score plus the messages of its children
    cdef double* upward = belief + n_nodes * S  # message of a node to its parent
    cdef double* full = upward + n_nodes * S  # node score plus all its messages
    cdef double* cavity = full + n_nodes * S  # parent's full belief without the child's message
    cdef double* out
    cdef intp_t k, v, p, e, a, c, node_stride, parent_stride
    cdef double log_z = 0.0, local
    cdef const double* P
    _forest_schedule(n_nodes, edges, n_edges, int_work)
    for k in range(n_nodes * S):
        belief[k] = unary[k]
    for k in range(n_nodes - 1, -1, -1):
        v = order[k]
        e = parent_edge[v]
        if e < 0:
            continue
        p = _other(edges, e, v)
        P = pairwise + e * S * S
        _edge_strides(edges, e, p, S, &parent_stride, &node_stride)
        for a in range(S):
            upward[v * S + a] = _log_sum_exp_plus(belief + v * S, P + a * parent_stride,
                                                  node_stride, S)
            belief[p * S + a] += upward[v * S + a]
    for k in range(n_nodes):
        v = order[k]
        e = parent_edge[v]
        if e < 0:
            for c in range(S):
                full[v * S + c] = belief[v * S + c]
            log_z += _log_sum_exp(belief + v * S, S)
            continue
        p = _other(edges, e, v)
        P = pairwise + e * S * S
        _edge_strides(edges, e, p, S, &parent_stride, &node_stride)
        for a in range(S):
            cavity[a] = full[p * S + a] - upward[v * S + a]
        for c in range(S):
            full[v * S + c] = belief[v * S + c] + _log_sum_exp_plus(
                cavity, P + c * node_stride, parent_stride, S)
        out = edge_marginals + e * S * S
        for a in range(S):
            for c in range(S):
                out[a * parent_stride + c * node_stride] = (
                    cavity[a] + P[a * parent_stride + c * node_stride] + belief[v * S + c])
        local = _log_sum_exp(out, S * S)
        for a in range(S * S):
            out[a] = exp(out[a] - local)
    for v in range(n_nodes):
        local = _log_sum_exp(full + v * S, S)
        for c in range(S):
            node_marginals[v * S + c] = exp(full[v * S + c] - local)
    return log_z


cdef double _trws_pass(bint forward, const double* unary, intp_t n_nodes, intp_t S,
                       const int64_t* edges, const double* pairwise, const intp_t* start,
                       const intp_t* adj, double* messages, double* theta, double* raw,
                       double* decision, int64_t* labels) noexcept nogil:
    """One pass of TRW-S over the nodes in index order (``forward``) or in reverse.

    At node ``s`` the reparametrised node score ``theta`` is ``unary[s]`` plus the messages
    of all neighbours; the messages to the neighbours ``t`` ahead in the pass become

        M_{s->t}(x_t) = max_{x_s} [gamma_s theta(x_s) - M_{t->s}(x_s) + pairwise_st(x_s, x_t)]

    minus their maximum ``delta_st``, with ``gamma_s = 1 / n_s``, ``n_s = max(#neighbours
    ahead, #neighbours behind, 1)`` (Kolmogorov 2006, Fig. 3, with the monotonic chains of
    section 4.2: every edge in one chain of weight 1, node ``s`` shared by ``n_s`` chains).
    After the pass every chain's maximum is the sum of its ``delta`` plus its share
    ``theta_end / n_end`` at its last node, so the returned

        sum_st delta_st + sum_s (n_s - #ahead(s)) / n_s max theta_s

    is the sum of the chains' maxima: an upper bound on the maximum score (the TRW bound of
    the current reparametrisation). The labels are chosen along the way (section 5.1): ``x_s``
    maximises ``unary[s]`` plus the edge scores to the neighbours behind (already labelled
    in this pass) plus the messages of the neighbours ahead; ties go to the lower state.

    ``messages[(2 e + 1) * S:]`` is the message into the lower-indexed endpoint of edge
    ``e``, ``messages[2 e * S:]`` the one into the higher.
    """
    cdef intp_t k, i, s, t, e, xs, xt, n_ahead, n_behind, n_shared, s_stride, t_stride
    cdef double gamma, best, candidate, delta, bound = 0.0
    cdef double* into_s
    cdef double* into_t
    cdef const double* P
    for k in range(n_nodes):
        s = k if forward else n_nodes - 1 - k
        n_ahead = 0
        n_behind = 0
        for xs in range(S):
            theta[xs] = unary[s * S + xs]
            decision[xs] = theta[xs]
        for i in range(start[s], start[s + 1]):
            e = adj[i]
            t = _other(edges, e, s)
            into_s = messages + (2 * e + (1 if s < t else 0)) * S
            for xs in range(S):
                theta[xs] += into_s[xs]
            if (t > s) == forward:
                n_ahead += 1
                for xs in range(S):
                    decision[xs] += into_s[xs]
            else:
                n_behind += 1
                _edge_strides(edges, e, s, S, &s_stride, &t_stride)
                P = pairwise + e * S * S + labels[t] * t_stride
                for xs in range(S):
                    decision[xs] += P[xs * s_stride]
        labels[s] = _argmax(decision, S)
        n_shared = n_ahead if n_ahead > n_behind else n_behind
        if n_shared < 1:
            n_shared = 1
        gamma = 1.0 / n_shared
        for i in range(start[s], start[s + 1]):
            e = adj[i]
            t = _other(edges, e, s)
            if (t > s) != forward:
                continue
            into_s = messages + (2 * e + (1 if s < t else 0)) * S
            into_t = messages + (2 * e + (1 if t < s else 0)) * S
            _edge_strides(edges, e, s, S, &s_stride, &t_stride)
            P = pairwise + e * S * S
            for xt in range(S):
                best = -INFINITY
                for xs in range(S):
                    candidate = (gamma * theta[xs] - into_s[xs]
                                 + P[xs * s_stride + xt * t_stride])
                    if candidate > best:
                        best = candidate
                raw[xt] = best
            delta = raw[_argmax(raw, S)]
            for xt in range(S):
                into_t[xt] = raw[xt] - delta
            bound += delta
        if n_shared > n_ahead:
            bound += (n_shared - n_ahead) * gamma * theta[_argmax(theta, S)]
    return bound


cdef double trws_map(const double* unary, intp_t n_nodes, intp_t n_states,
                     const int64_t* edges, intp_t n_edges, const double* pairwise,
                     intp_t max_iter, double tol, int64_t* labels, double* upper_bound,
                     intp_t* n_iter, intp_t* int_work, double* work) noexcept nogil:
    """Approximate MAP labelling with a certificate; returns the labelling's score.

    On a forest (:func:`forest_cycle_edge`) the exact :func:`forest_max_product` runs and
    ``upper_bound`` is the score itself (``n_iter`` 0). Otherwise TRW-S iterations (a pass
    in node order, then one in reverse, :func:`_trws_pass`) run until ``max_iter`` of them
    are done, or the gap ``bound - score`` falls to ``tol * max(|score|, |bound|)``, or an
    iteration lowers the bound by no more than that. ``labels`` receives the best labelling
    decoded on the way (the first found in case of a tie) and ``upper_bound`` the lowest
    bound seen, both satisfying

        score(labels) <= max_y score(y) <= upper_bound,

    so ``upper_bound - score`` certifies how far from optimal the labelling can be. The
    bound is the sum of the maxima of the monotonic chains the reparametrised scores are
    split into (the TRW dual bound); it never rises from one pass to the next, and its
    infimum over reparametrisations is the linear-programming relaxation over the local
    polytope, which TRW-S approaches but may stop above (weak tree agreement, section 3).
    A bound below the score by rounding is raised to the score.
    ``int_work`` holds ``trws_int_work(n_nodes, n_edges)`` integers and ``work``
    ``trws_work(n_nodes, n_edges, n_states)`` doubles; ``max_iter >= 1``.
    """
    cdef intp_t S = n_states
    cdef intp_t* start = int_work
    cdef intp_t* adj = start + n_nodes + 1
    cdef intp_t* best_labels = adj + 2 * n_edges
    cdef double* messages = work
    cdef double* theta = messages + 2 * n_edges * S
    cdef double* raw = theta + S
    cdef double* decision = raw + S
    cdef intp_t k, t, iteration, direction
    cdef double score, pass_bound, scale
    cdef double best_score = -INFINITY, bound = INFINITY, previous = INFINITY
    if forest_cycle_edge(n_nodes, edges, n_edges, int_work) < 0:
        score = forest_max_product(unary, n_nodes, S, edges, n_edges, pairwise, labels,
                                   int_work, work)
        upper_bound[0] = score
        n_iter[0] = 0
        return score
    adjacency(n_nodes, edges, n_edges, start, adj, best_labels)
    for k in range(2 * n_edges * S):
        messages[k] = 0.0
    n_iter[0] = 0
    for iteration in range(max_iter):
        for direction in range(2):
            pass_bound = _trws_pass(direction == 0, unary, n_nodes, S, edges, pairwise, start,
                                    adj, messages, theta, raw, decision, labels)
            if pass_bound < bound:
                bound = pass_bound
            score = graph_score(unary, n_nodes, S, edges, n_edges, pairwise, labels)
            if score > best_score:
                best_score = score
                for t in range(n_nodes):
                    best_labels[t] = labels[t]
        n_iter[0] = iteration + 1
        scale = fabs(best_score) if fabs(best_score) > fabs(bound) else fabs(bound)
        if bound - best_score <= tol * scale or previous - bound <= tol * scale:
            break
        previous = bound
    for t in range(n_nodes):
        labels[t] = best_labels[t]
    upper_bound[0] = bound if bound > best_score else best_score
    return best_score


# ---------------------------------------------------------------------------------------
# Maximum flow (Boykov and Kolmogorov 2004) on a graph stored as arcs grouped by tail node:
# the arcs leaving node i are first[i]:first[i + 1], arc a goes to head[a], its reverse is
# sister[a], r_cap[a] is its residual capacity. tr_cap[i] > 0 is the residual capacity of the
# arc source -> i, tr_cap[i] < 0 minus that of i -> sink.

cdef intp_t _FREE = -1  # parent of a node in no search tree
cdef intp_t _TERMINAL = -2  # parent of a node attached to its tree's terminal
cdef intp_t _ORPHAN = -3  # parent of a node whose path to its terminal is broken
cdef intp_t _FAR = 1 << 60  # distance "no path to the terminal"


cdef struct _Flow:
    intp_t n_nodes
    intp_t* first
    intp_t* head
    intp_t* sister
    intp_t* parent  # arc to the parent in the search tree, or _FREE, _TERMINAL, _ORPHAN
    intp_t* next  # active list: next node, the node itself at the end, -1 when not listed
    intp_t* stamp  # time at which dist was last known to be the distance to the terminal
    intp_t* dist
    intp_t* is_sink
    intp_t* orphans  # orphans made by the last augmentation (a stack)
    intp_t* fifo  # orphans made while adopting (a ring buffer)
    double* r_cap
    double* tr_cap
    intp_t n_orphans
    intp_t fifo_head
    intp_t fifo_size
    intp_t first_active
    intp_t last_active
    intp_t first_new
    intp_t last_new
    intp_t time


cdef void _flow_layout(_Flow* g, intp_t n_nodes, intp_t n_arcs, intp_t* int_work,
                       double* work) noexcept nogil:
    """Point the arrays of ``g`` into the workspace (``flow_int_work`` and ``flow_work``)."""
    g.n_nodes = n_nodes
    g.first = int_work
    g.head = g.first + n_nodes + 1
    g.sister = g.head + n_arcs
    g.parent = g.sister + n_arcs
    g.next = g.parent + n_nodes
    g.stamp = g.next + n_nodes
    g.dist = g.stamp + n_nodes
    g.is_sink = g.dist + n_nodes
    g.orphans = g.is_sink + n_nodes
    g.fifo = g.orphans + n_nodes
    g.tr_cap = work
    g.r_cap = work + n_nodes


cdef inline void _set_active(_Flow* g, intp_t i) noexcept nogil:
    """Append ``i`` to the list of nodes to grow from, unless it is listed already."""
    if g.next[i] < 0:
        if g.last_new >= 0:
            g.next[g.last_new] = i
        else:
            g.first_new = i
        g.last_new = i
        g.next[i] = i


cdef inline intp_t _next_active(_Flow* g) noexcept nogil:
    """The next listed node that is still in a tree, or -1 when there is none."""
    cdef intp_t i
    while True:
        i = g.first_active
        if i < 0:
            i = g.first_new
            g.first_active = i
            g.last_active = g.last_new
            g.first_new = -1
            g.last_new = -1
            if i < 0:
                return -1
        if g.next[i] == i:
            g.first_active = -1
            g.last_active = -1
        else:
            g.first_active = g.next[i]
        g.next[i] = -1
        if g.parent[i] != _FREE:
            return i


cdef inline void _orphan_rear(_Flow* g, intp_t i) noexcept nogil:
    g.parent[i] = _ORPHAN
    g.fifo[(g.fifo_head + g.fifo_size) % g.n_nodes] = i
    g.fifo_size += 1


cdef inline void _orphan_front(_Flow* g, intp_t i) noexcept nogil:
    g.parent[i] = _ORPHAN
    g.orphans[g.n_orphans] = i
    g.n_orphans += 1


cdef void _augment(_Flow* g, intp_t middle) noexcept nogil:
    """Push the bottleneck flow along source -> tail(middle) -> head(middle) -> sink.

    Nodes whose arc to their parent (or terminal) saturates become orphans.
    """
    cdef intp_t i, a
    cdef double bottleneck = g.r_cap[middle]
    i = g.head[g.sister[middle]]
    while True:
        a = g.parent[i]
        if a == _TERMINAL:
            break
        if g.r_cap[g.sister[a]] < bottleneck:
            bottleneck = g.r_cap[g.sister[a]]
        i = g.head[a]
    if g.tr_cap[i] < bottleneck:
        bottleneck = g.tr_cap[i]
    i = g.head[middle]
    while True:
        a = g.parent[i]
        if a == _TERMINAL:
            break
        if g.r_cap[a] < bottleneck:
            bottleneck = g.r_cap[a]
        i = g.head[a]
    if -g.tr_cap[i] < bottleneck:
        bottleneck = -g.tr_cap[i]
    g.r_cap[g.sister[middle]] += bottleneck
    g.r_cap[middle] -= bottleneck
    i = g.head[g.sister[middle]]
    while True:
        a = g.parent[i]
        if a == _TERMINAL:
            break
        g.r_cap[a] += bottleneck
        g.r_cap[g.sister[a]] -= bottleneck
        if g.r_cap[g.sister[a]] <= 0.0:
            _orphan_front(g, i)
        i = g.head[a]
    g.tr_cap[i] -= bottleneck
    if g.tr_cap[i] <= 0.0:
        _orphan_front(g, i)
    i = g.head[middle]
    while True:
        a = g.parent[i]
        if a == _TERMINAL:
            break
        g.r_cap[g.sister[a]] += bottleneck
        g.r_cap[a] -= bottleneck
        if g.r_cap[a] <= 0.0:
            _orphan_front(g, i)
        i = g.head[a]
    g.tr_cap[i] += bottleneck
    if g.tr_cap[i] >= 0.0:
        _orphan_front(g, i)


cdef void _adopt_orphan(_Flow* g, intp_t i) noexcept nogil:
    """Give orphan ``i`` a new parent in its tree, or free it and orphan its children.

    The new parent is the neighbour with a residual arc in the tree's direction whose path
    to the terminal is intact and shortest; paths checked are stamped with the current time
    (Boykov and Kolmogorov 2004, section 3.2.3).
    """
    cdef bint sink = g.is_sink[i]
    cdef intp_t a0, a, j, d, best_arc = _FREE, best_dist = _FAR
    cdef double cap
    for a0 in range(g.first[i], g.first[i + 1]):
        cap = g.r_cap[a0] if sink else g.r_cap[g.sister[a0]]
        if cap <= 0.0:
            continue
        j = g.head[a0]
        if g.parent[j] == _FREE or g.is_sink[j] != sink:
            continue
        d = 0
        while True:
            if g.stamp[j] == g.time:
                d += g.dist[j]
                break
            a = g.parent[j]
            d += 1
            if a == _TERMINAL:
                g.stamp[j] = g.time
                g.dist[j] = 1
                break
            if a == _ORPHAN:
                d = _FAR
                break
            j = g.head[a]
        if d < _FAR:
            if d < best_dist:
                best_arc = a0
                best_dist = d
            j = g.head[a0]
            while g.stamp[j] != g.time:
                g.stamp[j] = g.time
                g.dist[j] = d
                d -= 1
                j = g.head[g.parent[j]]
    g.parent[i] = best_arc
    if best_arc != _FREE:
        g.stamp[i] = g.time
        g.dist[i] = best_dist + 1
        return
    for a0 in range(g.first[i], g.first[i + 1]):
        j = g.head[a0]
        a = g.parent[j]
        if a == _FREE or g.is_sink[j] != sink:
            continue
        cap = g.r_cap[a0] if sink else g.r_cap[g.sister[a0]]
        if cap > 0.0:
            _set_active(g, j)
        if a != _TERMINAL and a != _ORPHAN and g.head[a] == i:
            _orphan_rear(g, j)


cdef void _adopt(_Flow* g) noexcept nogil:
    """Process the orphans of the last augmentation, the last made first, each with the
    orphans its freeing makes."""
    cdef intp_t i
    while g.n_orphans > 0:
        g.n_orphans -= 1
        g.fifo_head = 0
        g.fifo_size = 0
        _adopt_orphan(g, g.orphans[g.n_orphans])
        while g.fifo_size > 0:
            i = g.fifo[g.fifo_head]
            g.fifo_head = (g.fifo_head + 1) % g.n_nodes
            g.fifo_size -= 1
            _adopt_orphan(g, i)


cdef void _max_flow(_Flow* g) noexcept nogil:
    """Saturate every source-to-sink path (Boykov and Kolmogorov 2004, section 3).

    Two search trees grow from the terminals through non-saturated arcs (growth); where
    they meet the path is augmented (augmentation) and the trees are repaired
    (adoption). At the end the source tree is the set of nodes reachable from the source
    in the residual graph: the source side of the minimum cut with the fewest nodes.
    """
    cdef intp_t i, j, a, middle, current = -1
    g.first_active = -1
    g.last_active = -1
    g.first_new = -1
    g.last_new = -1
    g.n_orphans = 0
    g.time = 0
    for i in range(g.n_nodes):
        g.next[i] = -1
        g.stamp[i] = 0
        g.is_sink[i] = g.tr_cap[i] < 0.0
        if g.tr_cap[i] != 0.0:
            g.parent[i] = _TERMINAL
            g.dist[i] = 1
            _set_active(g, i)
        else:
            g.parent[i] = _FREE
    while True:
        i = current
        if i >= 0:
            g.next[i] = -1
            if g.parent[i] == _FREE:
                i = -1
        if i < 0:
            i = _next_active(g)
            if i < 0:
                break
        middle = -1
        if not g.is_sink[i]:
            for a in range(g.first[i], g.first[i + 1]):
                if g.r_cap[a] <= 0.0:
                    continue
                j = g.head[a]
                if g.parent[j] == _FREE:
                    g.is_sink[j] = 0
                    g.parent[j] = g.sister[a]
                    g.stamp[j] = g.stamp[i]
                    g.dist[j] = g.dist[i] + 1
                    _set_active(g, j)
                elif g.is_sink[j]:
                    middle = a
                    break
                elif g.stamp[j] <= g.stamp[i] and g.dist[j] > g.dist[i]:
                    g.parent[j] = g.sister[a]
                    g.stamp[j] = g.stamp[i]
                    g.dist[j] = g.dist[i] + 1
        else:
            for a in range(g.first[i], g.first[i + 1]):
                if g.r_cap[g.sister[a]] <= 0.0:
                    continue
                j = g.head[a]
                if g.parent[j] == _FREE:
                    g.is_sink[j] = 1
                    g.parent[j] = g.sister[a]
                    g.stamp[j] = g.stamp[i]
                    g.dist[j] = g.dist[i] + 1
                    _set_active(g, j)
                elif not g.is_sink[j]:
                    middle = g.sister[a]
                    break
                elif g.stamp[j] <= g.stamp[i] and g.dist[j] > g.dist[i]:
                    g.parent[j] = g.sister[a]
                    g.stamp[j] = g.stamp[i]
                    g.dist[j] = g.dist[i] + 1
        g.time += 1
        if middle >= 0:
            g.next[i] = i  # listed as "current": _set_active leaves it alone
            current = i
            _augment(g, middle)
            _adopt(g)
        else:
            current = -1


cdef inline void _source_side_labels(_Flow* g, int64_t* labels) noexcept nogil:
    """Label 1 for the source side of the minimum cut, 0 for the rest."""
    cdef intp_t t
    for t in range(g.n_nodes):
        labels[t] = 1 if g.parent[t] != _FREE and not g.is_sink[t] else 0


cdef double submodular_cut(const double* unary, intp_t n_nodes, const int64_t* edges,
                           intp_t n_edges, const double* pairwise, int64_t* labels,
                           intp_t* int_work, double* work) noexcept nogil:
    """Exact MAP labelling of a binary graph with submodular edges; returns its score.

    The energy ``-score`` is written as a constant, linear terms and one term
    ``K_e [y_u = 0, y_v = 1]`` per edge ``e = (u, v)`` with ``K_e = pairwise[e, 0, 0] +
    pairwise[e, 1, 1] - pairwise[e, 0, 1] - pairwise[e, 1, 0] >= 0`` (Kolmogorov and Zabih
    2004, section 4.1): an arc ``v -> u`` of capacity ``K_e``, and a terminal arc per node for
    its linear term; nodes on the source side take label 1. ``K_e`` below zero by rounding
    counts as zero. Among several maximising labellings the one returned has the fewest
    ones: every node labelled 1 is labelled 1 by all of them. ``int_work`` holds
    ``submodular_int_work(n_nodes, n_edges)`` integers and ``work``
    ``submodular_work(n_nodes, n_edges)`` doubles.
    """
    cdef _Flow g
    cdef intp_t t, e, u, v, a_uv, a_vu
    cdef intp_t* fill
    cdef double pair
    cdef const double* P
    _flow_layout(&g, n_nodes, 2 * n_edges, int_work, work)
    fill = g.next
    for t in range(n_nodes + 1):
        g.first[t] = 0
    for e in range(n_edges):
        g.first[edges[2 * e] + 1] += 1
        g.first[edges[2 * e + 1] + 1] += 1
    for t in range(n_nodes):
        g.first[t + 1] += g.first[t]
        fill[t] = g.first[t]
        # linear energy coefficient of y_t (energy = -score), turned into tr_cap below
        g.tr_cap[t] = unary[2 * t] - unary[2 * t + 1]
    for e in range(n_edges):
        u = edges[2 * e]
        v = edges[2 * e + 1]
        P = pairwise + 4 * e
        g.tr_cap[u] += P[0] - P[2]
        g.tr_cap[v] += P[2] - P[3]
        pair = P[0] + P[3] - P[1] - P[2]
        a_uv = fill[u]
        fill[u] += 1
        a_vu = fill[v]
        fill[v] += 1
        g.head[a_uv] = v
        g.head[a_vu] = u
        g.sister[a_uv] = a_vu
        g.sister[a_vu] = a_uv
        g.r_cap[a_uv] = 0.0
        g.r_cap[a_vu] = pair if pair > 0.0 else 0.0
    for t in range(n_nodes):
        # a positive coefficient is paid with label 1 (arc to the sink), a negative one
        # with label 0 (arc from the source)
        g.tr_cap[t] = -g.tr_cap[t]
    _max_flow(&g)
    _source_side_labels(&g, labels)
    return graph_score(unary, n_nodes, 2, edges, n_edges, pairwise, labels)


cdef double _grid3d_score(const double* unary, intp_t n_slices, intp_t n_rows, intp_t n_cols,
                         const double* costs, const int64_t* labels) noexcept nogil:
    """``sum_t unary[t, y_t] - sum_t sum_d costs[t, d] [y_t != y_{t + stride_d}]``."""
    cdef intp_t t, z, y, x, plane = n_rows * n_cols
    cdef double score = 0.0
    t = 0
    for z in range(n_slices):
        for y in range(n_rows):
            for x in range(n_cols):
                score += unary[2 * t + labels[t]]
                if z + 1 < n_slices and labels[t] != labels[t + plane]:
                    score -= costs[3 * t]
                if y + 1 < n_rows and labels[t] != labels[t + n_cols]:
                    score -= costs[3 * t + 1]
                if x + 1 < n_cols and labels[t] != labels[t + 1]:
                    score -= costs[3 * t + 2]
                t += 1
    return score


cdef double grid3d_cut(const double* unary, intp_t n_slices, intp_t n_rows, intp_t n_cols,
                       const double* costs, int64_t* labels, intp_t* int_work,
                       double* work) noexcept nogil:
    """Exact MAP labelling of a binary 3-D 6-connected grid; returns its score.

    The voxels are stored slice by slice, row by row: voxel ``t = (z * n_rows + y) * n_cols
    + x``. The labelling maximises

        sum_t unary[t, y_t] - sum_t sum_d costs[t, d] [y_t != y_{t + stride_d}]

    with ``stride = (n_rows * n_cols, n_cols, 1)`` for ``d = 0, 1, 2`` (slices, rows,
    columns; no term past the last voxel along an axis) and ``costs >= 0`` (n_voxels, 3). The
    flow graph is built directly from the grid (each pair of neighbours is one pair of
    arcs of capacity ``costs[t, d]``, each node's arcs sorted by neighbour index), without an
    edge list. Ties as in :func:`submodular_cut`. ``int_work`` holds
    ``grid3d_int_work(n_slices, n_rows, n_cols)`` integers and ``work``
    ``grid3d_work(n_slices, n_rows, n_cols)`` doubles.
    """
    cdef _Flow g
    cdef intp_t n = n_slices * n_rows * n_cols, plane = n_rows * n_cols
    cdef intp_t t, z, y, x, q, a, partner, arcs = 0
    _flow_layout(&g, n, grid3d_arcs(n_slices, n_rows, n_cols), int_work, work)
    t = 0
    for z in range(n_slices):
        for y in range(n_rows):
            for x in range(n_cols):
                g.first[t] = arcs
                g.tr_cap[t] = unary[2 * t + 1] - unary[2 * t]
                # arcs to the neighbours before t; their reverse arcs are placed already, at
                # the rank of their direction among the neighbour's arcs
                if z > 0:
                    q = t - plane
                    partner = (g.first[q] + (z > 1) + (y > 0) + (x > 0) + (x + 1 < n_cols)
                               + (y + 1 < n_rows))
                    a = arcs
                    arcs += 1
                    g.head[a] = q
                    g.r_cap[a] = costs[3 * q]
                    g.sister[a] = partner
                    g.sister[partner] = a
                if y > 0:
                    q = t - n_cols
                    partner = (g.first[q] + (z > 0) + (y > 1) + (x > 0) + (x + 1 < n_cols))
                    a = arcs
                    arcs += 1
                    g.head[a] = q
                    g.r_cap[a] = costs[3 * q + 1]
                    g.sister[a] = partner
                    g.sister[partner] = a
                if x > 0:
                    q = t - 1
                    partner = g.first[q] + (z > 0) + (y > 0) + (x > 1)
                    a = arcs
                    arcs += 1
                    g.head[a] = q
                    g.r_cap[a] = costs[3 * q + 2]
                    g.sister[a] = partner
                    g.sister[partner] = a
                if x + 1 < n_cols:
                    g.head[arcs] = t + 1
                    g.r_cap[arcs] = costs[3 * t + 2]
                    arcs += 1
                if y + 1 < n_rows:
                    g.head[arcs] = t + n_cols
                    g.r_cap[arcs] = costs[3 * t + 1]
                    arcs += 1
                if z + 1 < n_slices:
                    g.head[arcs] = t + plane
                    g.r_cap[arcs] = costs[3 * t]
                    arcs += 1
                t += 1
    g.first[n] = arcs
    _max_flow(&g)
    _source_side_labels(&g, labels)
    return _grid3d_score(unary, n_slices, n_rows, n_cols, costs, labels)


# ---------------------------------------------------------------------------------------
# Batched entry points


cdef inline intp_t _max_size(const int64_t[::1] offsets) noexcept nogil:
    cdef intp_t i, largest = 0
    for i in range(offsets.shape[0] - 1):
        if offsets[i + 1] - offsets[i] > largest:
            largest = offsets[i + 1] - offsets[i]
    return largest


cdef inline const double* _rows2(const float64_t[:, ::1] array) noexcept nogil:
    return &array[0, 0] if array.shape[0] > 0 else NULL


cdef inline const int64_t* _edge_rows(const int64_t[:, ::1] array) noexcept nogil:
    return &array[0, 0] if array.shape[0] > 0 else NULL


cdef inline const double* _rows3(const float64_t[:, :, ::1] array) noexcept nogil:
    return &array[0, 0, 0] if array.shape[0] > 0 else NULL


cdef class _Workspace:
    """Integer and double buffers, freed when the object goes."""
    cdef intp_t* ints
    cdef double* doubles

    def __cinit__(self, intp_t n_ints, intp_t n_doubles):
        self.ints = <intp_t*> malloc((n_ints if n_ints > 0 else 1) * sizeof(intp_t))
        self.doubles = <double*> malloc((n_doubles if n_doubles > 0 else 1) * sizeof(double))
        if self.ints == NULL or self.doubles == NULL:
            raise MemoryError(f"could not allocate a workspace of {n_ints} integers and "
                              f"{n_doubles} doubles")

    def __dealloc__(self):
        free(self.ints)
        free(self.doubles)


def forest_cycle_batch(const int64_t[::1] node_offsets, const int64_t[:, ::1] edges,
                       const int64_t[::1] edge_offsets, int64_t[::1] cycle_edges):
    """Per graph, -1 if it is a forest, else the local index of the first edge closing a
    cycle (:func:`forest_cycle_edge`)."""
    cdef intp_t n_graphs = node_offsets.shape[0] - 1
    cdef intp_t i, n, m
    cdef const int64_t* edge_ptr = _edge_rows(edges)
    cdef _Workspace ws = _Workspace(cycle_int_work(_max_size(node_offsets)), 0)
    with nogil:
        for i in range(n_graphs):
            n = node_offsets[i + 1] - node_offsets[i]
            m = edge_offsets[i + 1] - edge_offsets[i]
            cycle_edges[i] = forest_cycle_edge(n, edge_ptr + 2 * edge_offsets[i], m, ws.ints)


def forest_map_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                     const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                     const float64_t[:, :, ::1] pairwise, int64_t[::1] labels,
                     float64_t[::1] scores):
    """Exact MAP labelling and its score for every graph (each a forest)."""
    cdef intp_t S = unary.shape[1], n_graphs = node_offsets.shape[0] - 1
    cdef intp_t i, lo, n, m, since_check = 0
    cdef intp_t max_n = _max_size(node_offsets), max_m = _max_size(edge_offsets)
    cdef const double* unary_ptr = _rows2(unary)
    cdef const int64_t* edge_ptr = _edge_rows(edges)
    cdef const double* pair_ptr = _rows3(pairwise)
    cdef _Workspace ws = _Workspace(forest_int_work(max_n, max_m), forest_map_work(max_n, S))
    with nogil:
        for i in range(n_graphs):
            lo = node_offsets[i]
            n = node_offsets[i + 1] - lo
            m = edge_offsets[i + 1] - edge_offsets[i]
            scores[i] = forest_max_product(
                unary_ptr + lo * S, n, S, edge_ptr + 2 * edge_offsets[i], m,
                pair_ptr + edge_offsets[i] * S * S, &labels[lo], ws.ints, ws.doubles)
            check_signals_every(&since_check, n + m, _SIGNAL_CHECK_WORK)


def forest_marginals_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                           const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                           const float64_t[:, :, ::1] pairwise, float64_t[:, ::1] node_marginals,
                           float64_t[:, :, ::1] edge_marginals, float64_t[::1] log_partition):
    """Node and edge marginals and the log-partition of every graph (each a forest)."""
    cdef intp_t S = unary.shape[1], n_graphs = node_offsets.shape[0] - 1
    cdef intp_t i, lo, n, m, since_check = 0
    cdef intp_t max_n = _max_size(node_offsets), max_m = _max_size(edge_offsets)
    cdef const double* unary_ptr = _rows2(unary)
    cdef const int64_t* edge_ptr = _edge_rows(edges)
    cdef const double* pair_ptr = _rows3(pairwise)
    cdef double* node_ptr = &node_marginals[0, 0] if node_marginals.shape[0] > 0 else NULL
    cdef double* edge_out = &edge_marginals[0, 0, 0] if edge_marginals.shape[0] > 0 else NULL
    cdef _Workspace ws = _Workspace(forest_int_work(max_n, max_m),
                                    forest_marginals_work(max_n, S))
    with nogil:
        for i in range(n_graphs):
            lo = node_offsets[i]
            n = node_offsets[i + 1] - lo
            m = edge_offsets[i + 1] - edge_offsets[i]
            log_partition[i] = forest_sum_product(
                unary_ptr + lo * S, n, S, edge_ptr + 2 * edge_offsets[i], m,
                pair_ptr + edge_offsets[i] * S * S, node_ptr + lo * S,
                edge_out + edge_offsets[i] * S * S, ws.ints, ws.doubles)
            check_signals_every(&since_check, n + m, _SIGNAL_CHECK_WORK)


def trws_map_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                   const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                   const float64_t[:, :, ::1] pairwise, intp_t max_iter, double tol,
                   int64_t[::1] labels, float64_t[::1] scores, float64_t[::1] upper_bounds,
                   int64_t[::1] n_iter):
    """TRW-S labelling, its score, the upper bound and the iterations of every graph."""
    cdef intp_t S = unary.shape[1], n_graphs = node_offsets.shape[0] - 1
    cdef intp_t i, lo, n, m, iterations, since_check = 0
    cdef intp_t max_n = _max_size(node_offsets), max_m = _max_size(edge_offsets)
    cdef const double* unary_ptr = _rows2(unary)
    cdef const int64_t* edge_ptr = _edge_rows(edges)
    cdef const double* pair_ptr = _rows3(pairwise)
    cdef _Workspace ws = _Workspace(trws_int_work(max_n, max_m), trws_work(max_n, max_m, S))
    with nogil:
        for i in range(n_graphs):
            lo = node_offsets[i]
            n = node_offsets[i + 1] - lo
            m = edge_offsets[i + 1] - edge_offsets[i]
            scores[i] = trws_map(
                unary_ptr + lo * S, n, S, edge_ptr + 2 * edge_offsets[i], m,
                pair_ptr + edge_offsets[i] * S * S, max_iter, tol, &labels[lo],
                &upper_bounds[i], &iterations, ws.ints, ws.doubles)
            n_iter[i] = iterations
            check_signals_every(&since_check, (n + m) * (iterations + 1), _SIGNAL_CHECK_WORK)


def submodular_cut_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                         const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                         const float64_t[:, :, ::1] pairwise, int64_t[::1] labels,
                         float64_t[::1] scores):
    """Exact MAP labelling and its score for every binary submodular graph."""
    cdef intp_t n_graphs = node_offsets.shape[0] - 1
    cdef intp_t i, lo, n, m, since_check = 0
    cdef intp_t max_n = _max_size(node_offsets), max_m = _max_size(edge_offsets)
    cdef const double* unary_ptr = _rows2(unary)
    cdef const int64_t* edge_ptr = _edge_rows(edges)
    cdef const double* pair_ptr = _rows3(pairwise)
    cdef _Workspace ws = _Workspace(submodular_int_work(max_n, max_m),
                                    submodular_work(max_n, max_m))
    with nogil:
        for i in range(n_graphs):
            lo = node_offsets[i]
            n = node_offsets[i + 1] - lo
            m = edge_offsets[i + 1] - edge_offsets[i]
            scores[i] = submodular_cut(
                unary_ptr + 2 * lo, n, edge_ptr + 2 * edge_offsets[i], m,
                pair_ptr + 4 * edge_offsets[i], &labels[lo], ws.ints, ws.doubles)
            check_signals_every(&since_check, n + m, _SIGNAL_CHECK_WORK)


def grid3d_cut_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                     const int64_t[:, ::1] shapes, const float64_t[:, ::1] costs,
                     int64_t[::1] labels, float64_t[::1] scores):
    """Exact MAP labelling and its score for every 3-D grid (``shapes[i]`` is
    (n_slices, n_rows, n_cols) of volume ``i``, its voxels ``offsets[i]:offsets[i + 1]``)."""
    cdef intp_t n_volumes = offsets.shape[0] - 1
    cdef intp_t i, lo, max_ints = 0, max_doubles = 0, since_check = 0
    cdef const double* unary_ptr = _rows2(unary)
    cdef const double* cost_ptr = _rows2(costs)
    cdef _Workspace ws
    for i in range(n_volumes):
        max_ints = max(max_ints, grid3d_int_work(shapes[i, 0], shapes[i, 1], shapes[i, 2]))
        max_doubles = max(max_doubles, grid3d_work(shapes[i, 0], shapes[i, 1], shapes[i, 2]))
    ws = _Workspace(max_ints, max_doubles)
    with nogil:
        for i in range(n_volumes):
            lo = offsets[i]
            scores[i] = grid3d_cut(unary_ptr + 2 * lo, shapes[i, 0], shapes[i, 1],
                                   shapes[i, 2], cost_ptr + 3 * lo, &labels[lo], ws.ints,
                                   ws.doubles)
            check_signals_every(&since_check, offsets[i + 1] - lo, _SIGNAL_CHECK_WORK)
