"""Compiled oracles of the pairwise graph structures, per example and over a batch.

A batch holds one graph per example: its nodes are the example's token rows (``offsets``),
its edges ``edges[edge_offsets[i]:edge_offsets[i + 1]]`` (local node indices, as in
:mod:`sklstruct._inference._graph`), and every edge ``e`` has sparse features, entries
``feature_offsets[e]:feature_offsets[e + 1]`` of ``(feature_index, feature_value)``. The
pairwise parameters ``theta`` hold one block of ``n_pair`` values per edge feature; the
score of states ``(a, b)`` at the ends of edge ``e`` is

    pairwise[e, a, b] = sum_k f_ek theta[k * n_pair + pair_index[a * S + b]],

so ``pair_index`` ties parameters together (``a * S + b`` for directed edges, the unordered
pair for symmetric ones). The pairwise statistics of a labelling are the matching sums of
``f_ek`` (:meth:`GraphKernels.pairwise_entries`).

Each example has an inference method (``methods[i]``):

- 0, a forest: exact max-product and sum-product (:func:`~sklstruct._inference._graph`
  ``forest_max_product``, ``forest_sum_product``);
- 1, exact enumeration of the ``n_states ** n_nodes`` labellings in reflected Gray-code order
  (each labelling differs from the previous one in one node, so a step costs that node's
  degree): :func:`enumerate_max` and :func:`enumerate_marginals`;
- 2, a graph with cycles: a minimum cut when the labels are binary and every edge is
  submodular at the given potentials (exact), else TRW-S with its upper bound;
- 3, TRW-S (Kolmogorov 2006), with its upper bound, on any graph with a cycle.

Methods 2 and 3 give no marginals (the kernels' ``has_marginals`` is then false).
"""

import numpy as np

from libc.math cimport INFINITY, NAN, exp, log
from libc.stdlib cimport free, malloc

from sklstruct._inference._graph cimport (adjacency, forest_int_work, forest_map_work,
                                          forest_marginals_work, forest_max_product,
                                          forest_sum_product, graph_score, submodular_cut,
                                          submodular_int_work, submodular_work, trws_int_work,
                                          trws_map, trws_work)
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._inference._workspace cimport _larger
from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int64_t, intp_t

# labellings visited between two exact recomputations of the running score
cdef intp_t _RESYNC = 4096
# nodes + edges processed between two checks for Ctrl-C in the batched entry points
cdef intp_t _SIGNAL_CHECK_WORK = 1 << 20

# a submodularity margin below zero by no more than this fraction of the magnitudes counts
# as rounding (as sklstruct._inference.graph.submodular_map)
cdef double _SUBMODULAR_RTOL = 1e-12


cdef inline intp_t _gray_step(intp_t n_nodes, intp_t n_states, intp_t* digit,
                              intp_t* direction) noexcept nogil:
    """Move to the next labelling of the reflected mixed-radix Gray code (Knuth, TAOCP
    7.2.1.1): the first node that can move one state in its direction does; the nodes
    before it reverse their direction. Returns that node, or -1 after the last labelling."""
    cdef intp_t j, nxt
    for j in range(n_nodes):
        nxt = digit[j] + direction[j]
        if 0 <= nxt < n_states:
            digit[j] = nxt
            return j
        direction[j] = -direction[j]
    return -1


cdef inline double _change(const double* unary, intp_t n_states, const int64_t* edges,
                           const double* pairwise, const intp_t* start, const intp_t* adj,
                           const intp_t* digit, intp_t j, intp_t old) noexcept nogil:
    """Score change when node ``j`` moved from state ``old`` to ``digit[j]``."""
    cdef intp_t S = n_states, k, e, other, new = digit[j]
    cdef double delta = unary[j * S + new] - unary[j * S + old]
    cdef const double* P
    for k in range(start[j], start[j + 1]):
        e = adj[k]
        P = pairwise + e * S * S
        if edges[2 * e] == j:
            other = digit[edges[2 * e + 1]]
            delta += P[new * S + other] - P[old * S + other]
        else:
            other = digit[edges[2 * e]]
            delta += P[other * S + new] - P[other * S + old]
    return delta


cdef double _digits_score(const double* unary, intp_t n_nodes, intp_t S, const int64_t* edges,
                          intp_t n_edges, const double* pairwise,
                          const intp_t* digit) noexcept nogil:
    cdef intp_t t, e
    cdef double score = 0.0
    for t in range(n_nodes):
        score += unary[t * S + digit[t]]
    for e in range(n_edges):
        score += pairwise[(e * S + digit[edges[2 * e]]) * S + digit[edges[2 * e + 1]]]
    return score


cdef void _enumeration_start(intp_t n_nodes, const int64_t* edges, intp_t n_edges,
                             intp_t* int_work) noexcept nogil:
    """Adjacency, all-zero labelling and upward directions in ``int_work``."""
    cdef intp_t* start = int_work
    cdef intp_t* adj = start + n_nodes + 1
    cdef intp_t* digit = adj + 2 * n_edges
    cdef intp_t* direction = digit + n_nodes
    cdef intp_t t
    adjacency(n_nodes, edges, n_edges, start, adj, direction)
    for t in range(n_nodes):
        digit[t] = 0
        direction[t] = 1


cdef double enumerate_max(const double* unary, intp_t n_nodes, intp_t n_states,
                          const int64_t* edges, intp_t n_edges, const double* pairwise,
                          int64_t* labels, intp_t* int_work) noexcept nogil:
    """Exact MAP labelling of any small graph by enumeration; returns its score.

    Visits all ``n_states ** n_nodes`` labellings in reflected Gray-code order, updating the
    score by the change at the one node that moves (its degree in operations), recomputed
    exactly every 4096 labellings. The first labelling of strictly greater running score
    wins (ties to the earliest in that order, up to rounding of the running score); the
    returned score is recomputed exactly. ``int_work`` holds ``enumerate_int_work(n_nodes,
    n_edges)`` integers.
    """
    cdef intp_t S = n_states
    cdef intp_t* start = int_work
    cdef intp_t* adj = start + n_nodes + 1
    cdef intp_t* digit = adj + 2 * n_edges
    cdef intp_t* direction = digit + n_nodes
    cdef intp_t t, j, steps = 0
    cdef double score, best
    _enumeration_start(n_nodes, edges, n_edges, int_work)
    score = _digits_score(unary, n_nodes, S, edges, n_edges, pairwise, digit)
    best = score
    for t in range(n_nodes):
        labels[t] = 0
    while True:
        j = _gray_step(n_nodes, S, digit, direction)
        if j < 0:
            break
        steps += 1
        if steps % _RESYNC == 0:
            score = _digits_score(unary, n_nodes, S, edges, n_edges, pairwise, digit)
        else:
            score += _change(unary, S, edges, pairwise, start, adj, digit, j,
                             digit[j] - direction[j])
        if score > best:
            best = score
            for t in range(n_nodes):
                labels[t] = digit[t]
    return graph_score(unary, n_nodes, S, edges, n_edges, pairwise, labels)


cdef double enumerate_marginals(const double* unary, intp_t n_nodes, intp_t n_states,
                                const int64_t* edges, intp_t n_edges, const double* pairwise,
                                double* node_marginals, double* edge_marginals,
                                intp_t* int_work) noexcept nogil:
    """Node and edge marginals of any small graph by enumeration; returns the log-partition.

    Two passes over the labellings in Gray-code order: the first finds the largest score
    ``m``, the second sums ``exp(score - m) <= 1`` into the marginals (every term is at most
    one and the largest is one, so nothing overflows and the sum is at least one); the
    log-partition is ``m + log(sum)``. ``edge_marginals[e, a, b]`` is ``p(y_{edges[e, 0]} =
    a, y_{edges[e, 1]} = b)``. ``int_work`` holds ``enumerate_int_work(n_nodes, n_edges)``
    integers.
    """
    cdef intp_t S = n_states
    cdef intp_t* start = int_work
    cdef intp_t* adj = start + n_nodes + 1
    cdef intp_t* digit = adj + 2 * n_edges
    cdef intp_t* direction = digit + n_nodes
    cdef intp_t t, e, j, steps, sweep
    cdef double score, peak = -INFINITY, p, total = 0.0
    for sweep in range(2):
        _enumeration_start(n_nodes, edges, n_edges, int_work)
        score = _digits_score(unary, n_nodes, S, edges, n_edges, pairwise, digit)
        steps = 0
        while True:
            if sweep == 0:
                if score > peak:
                    peak = score
            else:
                p = exp(score - peak)
                total += p
                for t in range(n_nodes):
                    node_marginals[t * S + digit[t]] += p
                for e in range(n_edges):
                    edge_marginals[(e * S + digit[edges[2 * e]]) * S
                                   + digit[edges[2 * e + 1]]] += p
            j = _gray_step(n_nodes, S, digit, direction)
            if j < 0:
                break
            steps += 1
            if steps % _RESYNC == 0:
                score = _digits_score(unary, n_nodes, S, edges, n_edges, pairwise, digit)
            else:
                score += _change(unary, S, edges, pairwise, start, adj, digit, j,
                                 digit[j] - direction[j])
        if sweep == 0:
            for t in range(n_nodes * S):
                node_marginals[t] = 0.0
            for e in range(n_edges * S * S):
                edge_marginals[e] = 0.0
    for t in range(n_nodes * S):
        node_marginals[t] /= total
    for e in range(n_edges * S * S):
        edge_marginals[e] /= total
    return peak + log(total)


cdef bint _submodular(const double* pairwise, intp_t n_edges) noexcept nogil:
    """Whether every binary edge has ``P00 + P11 >= P01 + P10`` (up to rounding)."""
    cdef intp_t e
    cdef const double* P
    for e in range(n_edges):
        P = pairwise + 4 * e
        if P[0] + P[3] - P[1] - P[2] < -_SUBMODULAR_RTOL * (
                abs(P[0]) + abs(P[1]) + abs(P[2]) + abs(P[3])):
            return False
    return True


cdef class GraphKernels(ExampleKernels):
    """Per-example oracles of a batch of graphs (see the module doc).

    Parameters
    ----------
    offsets : ndarray of int64 of shape (n_examples + 1,)
        Node rows of every example.
    n_states : int
    edges : ndarray of int64 of shape (n_edges, 2)
        Stacked edges, node indices local to their example.
    edge_offsets : ndarray of int64 of shape (n_examples + 1,)
    feature_offsets : ndarray of int64 of shape (n_edges + 1,)
    feature_index : ndarray of int64 of shape (n_entries,)
        Edge feature of every entry, in ``[0, n_edge_features)``.
    feature_value : ndarray of float64 of shape (n_entries,)
    n_edge_features : int
    pair_index : ndarray of int64 of shape (n_states * n_states,)
        Parameter of every pair of states within a feature's block, in ``[0, n_pair)``.
    n_pair : int
    methods : ndarray of int64 of shape (n_examples,)
        Inference method of every example (0 to 3, see the module doc).
    max_iter : int
        TRW-S iterations.
    tol : float
        TRW-S tolerance.
    """

    def __cinit__(self, *args, **kwargs):
        self._work = NULL
        self._int_work = NULL

    def __init__(self, offsets, intp_t n_states, edges, edge_offsets, feature_offsets,
                 feature_index, feature_value, intp_t n_edge_features, pair_index,
                 intp_t n_pair, methods, intp_t max_iter=100, double tol=1e-6):
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.edges = np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2)
        self.edge_offsets = np.ascontiguousarray(edge_offsets, dtype=np.int64)
        self.feature_offsets = np.ascontiguousarray(feature_offsets, dtype=np.int64)
        self.feature_index = np.ascontiguousarray(feature_index, dtype=np.int64)
        self.feature_value = np.ascontiguousarray(feature_value, dtype=np.float64)
        self.pair_index = np.ascontiguousarray(pair_index, dtype=np.int64)
        self.methods = np.ascontiguousarray(methods, dtype=np.int64)
        n_examples = offsets.shape[0] - 1
        n_edges = self.edges.shape[0]
        if self.edge_offsets.shape != offsets.shape or self.edge_offsets[0] != 0 \
                or self.edge_offsets[n_examples] != n_edges or np.any(np.diff(self.edge_offsets) < 0):
            raise ValueError("edge_offsets must run from 0 to the number of edges, one entry "
                             "per example plus one.")
        if self.feature_offsets.shape != (n_edges + 1,) or self.feature_offsets[0] != 0 \
                or self.feature_offsets[n_edges] != self.feature_index.shape[0] \
                or np.any(np.diff(self.feature_offsets) < 0) \
                or self.feature_value.shape != self.feature_index.shape:
            raise ValueError("edge features must be given per edge (feature_offsets).")
        if self.feature_index.size and (self.feature_index.min() < 0
                                        or self.feature_index.max() >= n_edge_features):
            raise ValueError("feature_index out of range.")
        if self.pair_index.shape != (n_states * n_states,) or self.pair_index.min() < 0 \
                or self.pair_index.max() >= n_pair:
            raise ValueError("pair_index must map every pair of states into [0, n_pair).")
        if self.methods.shape != (n_examples,) or np.any(self.methods < 0) \
                or np.any(self.methods > 3):
            raise ValueError("methods must hold one method (0 to 3) per example.")
        sizes = np.diff(offsets)
        counts = np.diff(self.edge_offsets)
        if n_edges and (np.any(self.edges < 0) or np.any(
                self.edges >= np.repeat(sizes, counts)[:, None])):
            raise ValueError("edges must hold node indices local to their example.")
        entries = np.diff(self.feature_offsets[self.edge_offsets])
        super().__init__(offsets, n_states, n_edge_features * n_pair,
                         int(entries.max()) if entries.size else 0,
                         bool(np.all(self.methods <= 1)))
        self.n_edge_features = n_edge_features
        self.n_pair = n_pair
        self.max_iter = max_iter
        self.tol = tol
        cdef const int64_t[:, ::1] edge_view = self.edges
        cdef const int64_t[::1] edge_offset_view = self.edge_offsets
        cdef const int64_t[::1] feature_offset_view = self.feature_offsets
        cdef const int64_t[::1] feature_index_view = self.feature_index
        cdef const float64_t[::1] feature_value_view = self.feature_value
        cdef const int64_t[::1] pair_view = self.pair_index
        cdef const int64_t[::1] method_view = self.methods
        self._edges = &edge_view[0, 0] if n_edges else NULL
        self._edge_offsets = &edge_offset_view[0]
        self._feature_offsets = &feature_offset_view[0]
        self._feature_index = &feature_index_view[0] if self.feature_index.size else NULL
        self._feature_value = &feature_value_view[0] if self.feature_index.size else NULL
        self._pair_index = &pair_view[0]
        self._methods = &method_view[0]
        cdef intp_t n = int(sizes.max()), m = int(counts.max()), S = n_states
        self._max_nodes = n
        self._max_edges = m
        cdef intp_t n_ints = _larger(_larger(forest_int_work(n, m), trws_int_work(n, m)),
                                     _larger(submodular_int_work(n, m),
                                             enumerate_int_work(n, m)))
        cdef intp_t n_doubles = _larger(_larger(forest_marginals_work(n, S),
                                                forest_map_work(n, S)),
                                        _larger(trws_work(n, m, S), submodular_work(n, m)))
        # node buffer, edge potentials and edge marginals, then the routines' workspace
        n_doubles += n * S + 2 * m * S * S
        self._work = <double*> malloc(n_doubles * sizeof(double))
        self._int_work = <intp_t*> malloc(n_ints * sizeof(intp_t))
        if self._work == NULL or self._int_work == NULL:
            raise MemoryError("could not allocate the graph kernels' workspace")

    def __dealloc__(self):
        free(self._work)
        free(self._int_work)

    cdef double* _node_buffer(self) noexcept nogil:
        return self._work

    cdef double* _potential_buffer(self) noexcept nogil:
        return self._work + self._max_nodes * self.n_states

    cdef double* _edge_marginal_buffer(self) noexcept nogil:
        return self._potential_buffer() + self._max_edges * self.n_states * self.n_states

    cdef double* _routine_work(self) noexcept nogil:
        return self._edge_marginal_buffer() + self._max_edges * self.n_states * self.n_states

    cdef void edge_potentials(self, intp_t i, const double* theta, double* out) noexcept nogil:
        """``pairwise[e, a, b]`` of example ``i``'s edges at the parameters ``theta``."""
        cdef intp_t S = self.n_states, SS = S * S, e, ab, j, lo = self._edge_offsets[i]
        cdef intp_t m = self._edge_offsets[i + 1] - lo
        cdef double value
        cdef const double* block
        for e in range(m * SS):
            out[e] = 0.0
        for e in range(m):
            for j in range(self._feature_offsets[lo + e], self._feature_offsets[lo + e + 1]):
                value = self._feature_value[j]
                block = theta + self._feature_index[j] * self.n_pair
                for ab in range(SS):
                    out[e * SS + ab] += value * block[self._pair_index[ab]]

    cdef double map_example(self, intp_t i, const double* unary, const double* potentials,
                            int64_t* labels, double* upper_bound) noexcept nogil:
        """MAP labelling of example ``i`` at node scores ``unary`` and edge scores
        ``potentials`` by its method; returns its score and puts an upper bound on the
        maximum score into ``upper_bound`` (the score itself where the method is exact)."""
        cdef intp_t n = self._offsets[i + 1] - self._offsets[i], S = self.n_states
        cdef intp_t m = self._edge_offsets[i + 1] - self._edge_offsets[i], n_iter
        cdef const int64_t* edges = self._edges + 2 * self._edge_offsets[i] \
            if self._edges != NULL else NULL
        cdef intp_t method = self._methods[i]
        cdef double score
        if method == 0:
            score = forest_max_product(unary, n, S, edges, m, potentials, labels,
                                       self._int_work, self._routine_work())
        elif method == 1:
            score = enumerate_max(unary, n, S, edges, m, potentials, labels, self._int_work)
        elif method == 2 and S == 2 and _submodular(potentials, m):
            score = submodular_cut(unary, n, edges, m, potentials, labels, self._int_work,
                                   self._routine_work())
        else:
            score = trws_map(unary, n, S, edges, m, potentials, self.max_iter, self.tol,
                             labels, upper_bound, &n_iter, self._int_work,
                             self._routine_work())
            return score
        upper_bound[0] = score
        return score

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t n = self._offsets[i + 1] - self._offsets[i], t
        cdef double* unary = self._node_buffer()
        cdef double bound
        for t in range(n * self.n_states):
            unary[t] = scores[t] + token_loss[t]
        self.edge_potentials(i, theta, self._potential_buffer())
        self.map_example(i, unary, self._potential_buffer(), labels, &bound)

    cdef intp_t pairwise_entries(self, intp_t i, const int64_t* labels, intp_t* index,
                                 double* value) noexcept nogil:
        cdef intp_t S = self.n_states, lo = self._edge_offsets[i], e, j, pair, count = 0
        for e in range(lo, self._edge_offsets[i + 1]):
            pair = self._pair_index[labels[self._edges[2 * e]] * S
                                    + labels[self._edges[2 * e + 1]]]
            for j in range(self._feature_offsets[e], self._feature_offsets[e + 1]):
                index[count] = self._feature_index[j] * self.n_pair + pair
                value[count] = self._feature_value[j]
                count += 1
        return count

    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil:
        cdef intp_t n = self._offsets[i + 1] - self._offsets[i], S = self.n_states, SS = S * S
        cdef intp_t lo = self._edge_offsets[i], m = self._edge_offsets[i + 1] - lo
        cdef intp_t e, ab, j, r
        cdef const int64_t* edges = self._edges + 2 * lo if self._edges != NULL else NULL
        cdef double* potentials = self._potential_buffer()
        cdef double* edge_marg = self._edge_marginal_buffer()
        cdef double log_z, mass
        cdef const double* block
        self.edge_potentials(i, pair_pot, potentials)
        if self._methods[i] == 0:
            log_z = forest_sum_product(node_pot, n, S, edges, m, potentials, node_marg,
                                       edge_marg, self._int_work, self._routine_work())
        elif self._methods[i] == 1:
            for r in range(n * S):
                node_marg[r] = 0.0
            log_z = enumerate_marginals(node_pot, n, S, edges, m, potentials, node_marg,
                                        edge_marg, self._int_work)
        else:
            return NAN
        for r in range(self.n_pairwise):
            pair_marg[r] = 0.0
        for e in range(m):
            for ab in range(SS):
                mass = edge_marg[e * SS + ab]
                if mass == 0.0:
                    continue
                for j in range(self._feature_offsets[lo + e], self._feature_offsets[lo + e + 1]):
                    pair_marg[self._feature_index[j] * self.n_pair + self._pair_index[ab]] += \
                        self._feature_value[j] * mass
        return log_z

    # ------------------------------------------------------------------ batched entry points
    def map_batch(self, unary, theta):
        """MAP labellings of every example at token scores ``unary`` (n_tokens, n_states)
        and pairwise parameters ``theta``: ``(labels, scores, upper_bounds)``."""
        cdef const float64_t[:, ::1] u = np.ascontiguousarray(unary, dtype=np.float64)
        cdef const float64_t[::1] th = np.ascontiguousarray(theta, dtype=np.float64)
        cdef intp_t n_examples = self.offsets.shape[0] - 1, i, lo, since_check = 0
        if u.shape[0] != self.offsets[n_examples] or u.shape[1] != self.n_states \
                or th.shape[0] != self.n_pairwise:
            raise ValueError("unary or theta do not match the kernels.")
        labels = np.zeros(u.shape[0], dtype=np.int64)
        scores = np.zeros(n_examples)
        bounds = np.zeros(n_examples)
        cdef int64_t[::1] lab = labels
        cdef float64_t[::1] sc = scores
        cdef float64_t[::1] ub = bounds
        cdef const double* theta_ptr = &th[0] if th.shape[0] else NULL
        with nogil:
            for i in range(n_examples):
                lo = self._offsets[i]
                self.edge_potentials(i, theta_ptr, self._potential_buffer())
                sc[i] = self.map_example(i, &u[lo, 0], self._potential_buffer(), &lab[lo],
                                         &ub[i])
                check_signals_every(&since_check, self._offsets[i + 1] - lo
                                    + self._edge_offsets[i + 1] - self._edge_offsets[i],
                                    _SIGNAL_CHECK_WORK)
        return labels, scores, bounds

    def marginals_batch(self, unary, theta, bint summed=False):
        """Node marginals (n_tokens, n_states), expected pairwise statistics (per example,
        or summed over the batch with ``summed``) and log-partitions of every example."""
        if not self.has_marginals:
            raise ValueError("exact marginals need every graph to be a forest or small "
                             "enough to enumerate.")
        cdef const float64_t[:, ::1] u = np.ascontiguousarray(unary, dtype=np.float64)
        cdef const float64_t[::1] th = np.ascontiguousarray(theta, dtype=np.float64)
        cdef intp_t n_examples = self.offsets.shape[0] - 1, i, r, lo, P = self.n_pairwise
        cdef intp_t since_check = 0
        if u.shape[0] != self.offsets[n_examples] or u.shape[1] != self.n_states \
                or th.shape[0] != P:
            raise ValueError("unary or theta do not match the kernels.")
        node = np.zeros((u.shape[0], self.n_states))
        pair = np.zeros((1 if summed else n_examples, max(P, 1)))
        scratch = np.zeros(max(P, 1))
        log_z = np.zeros(n_examples)
        cdef float64_t[:, ::1] node_view = node
        cdef float64_t[:, ::1] pair_view = pair
        cdef float64_t[::1] scratch_view = scratch
        cdef float64_t[::1] log_z_view = log_z
        cdef const double* theta_ptr = &th[0] if P else NULL
        with nogil:
            for i in range(n_examples):
                lo = self._offsets[i]
                if summed:
                    log_z_view[i] = self.marginals(i, &u[lo, 0], theta_ptr, &node_view[lo, 0],
                                                   &scratch_view[0])
                    for r in range(P):
                        pair_view[0, r] += scratch_view[r]
                else:
                    log_z_view[i] = self.marginals(i, &u[lo, 0], theta_ptr, &node_view[lo, 0],
                                                   &pair_view[i, 0])
                check_signals_every(&since_check, self._offsets[i + 1] - lo
                                    + self._edge_offsets[i + 1] - self._edge_offsets[i],
                                    _SIGNAL_CHECK_WORK)
        pair = pair[:, :P]
        return node, (pair[0] if summed else pair), log_z


def enumerate_map_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                        const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                        const float64_t[:, :, ::1] pairwise, int64_t[::1] labels,
                        float64_t[::1] scores):
    """Exact MAP labelling and score of every graph by enumeration (:func:`enumerate_max`)."""
    cdef intp_t S = unary.shape[1], n_graphs = node_offsets.shape[0] - 1, i, lo, n, m
    cdef intp_t max_n = 1, max_m = 0
    for i in range(n_graphs):
        max_n = _larger(max_n, node_offsets[i + 1] - node_offsets[i])
        max_m = _larger(max_m, edge_offsets[i + 1] - edge_offsets[i])
    cdef intp_t* work = <intp_t*> malloc(enumerate_int_work(max_n, max_m) * sizeof(intp_t))
    if work == NULL:
        raise MemoryError("could not allocate the enumeration workspace")
    try:
        with nogil:
            for i in range(n_graphs):
                lo = node_offsets[i]
                n = node_offsets[i + 1] - lo
                m = edge_offsets[i + 1] - edge_offsets[i]
                scores[i] = enumerate_max(
                    &unary[lo, 0], n, S,
                    &edges[edge_offsets[i], 0] if m else NULL, m,
                    &pairwise[edge_offsets[i], 0, 0] if m else NULL, &labels[lo], work)
    finally:
        free(work)


def enumerate_marginals_batch(const float64_t[:, ::1] unary, const int64_t[::1] node_offsets,
                              const int64_t[:, ::1] edges, const int64_t[::1] edge_offsets,
                              const float64_t[:, :, ::1] pairwise,
                              float64_t[:, ::1] node_marginals,
                              float64_t[:, :, ::1] edge_marginals,
                              float64_t[::1] log_partition):
    """Marginals and log-partition of every graph by enumeration
    (:func:`enumerate_marginals`)."""
    cdef intp_t S = unary.shape[1], n_graphs = node_offsets.shape[0] - 1, i, lo, n, m
    cdef intp_t max_n = 1, max_m = 0
    for i in range(n_graphs):
        max_n = _larger(max_n, node_offsets[i + 1] - node_offsets[i])
        max_m = _larger(max_m, edge_offsets[i + 1] - edge_offsets[i])
    cdef intp_t* work = <intp_t*> malloc(enumerate_int_work(max_n, max_m) * sizeof(intp_t))
    if work == NULL:
        raise MemoryError("could not allocate the enumeration workspace")
    try:
        with nogil:
            for i in range(n_graphs):
                lo = node_offsets[i]
                n = node_offsets[i + 1] - lo
                m = edge_offsets[i + 1] - edge_offsets[i]
                log_partition[i] = enumerate_marginals(
                    &unary[lo, 0], n, S,
                    &edges[edge_offsets[i], 0] if m else NULL, m,
                    &pairwise[edge_offsets[i], 0, 0] if m else NULL,
                    &node_marginals[lo, 0],
                    &edge_marginals[edge_offsets[i], 0, 0] if m else NULL, work)
    finally:
        free(work)
