"""Exact MAP labelling of binary 4-connected grids by minimum cut (Greig et al., 1989).

For every image (a segment of rows of ``unary``, stored row by row) the labelling

    argmax_y  sum_t unary[t, y_t] - sum_{t ~ u} cost(t, u) [y_t != y_u],   cost >= 0

is a minimum s-t cut (``widths[i]`` pixels per row of image ``i``): pixel ``t`` gets an arc from the source of capacity
``unary[t, 1] - unary[t, 0]`` when that is positive (paid when ``y_t = 0``) and an arc to the sink
of capacity ``unary[t, 0] - unary[t, 1]`` otherwise (paid when ``y_t = 1``); neighbours share one
pair of arcs of capacity ``cost(t, u)`` in both directions. The maximum flow is found by Dinic's
algorithm (blocking flows on BFS level graphs, iterative depth-first search with current-arc
pointers); pixels still reachable from the source in the residual graph take label 1.

The caller validates the arrays (``sklstruct._inference.grid``); costs must be non-negative.
:func:`grid_image_cut` (one image) is shared with the per-example kernels through
``_mincut.pxd``.
"""

from libc.stdlib cimport free, malloc

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int64_t, intp_t

# pixels cut between two checks for a pending signal (Ctrl-C)
cdef intp_t _PIXELS_PER_SIGNAL_CHECK = 1 << 16


cdef inline void _add_pair(intp_t a, intp_t b, double cap_ab, double cap_ba, intp_t* n_arcs,
                           intp_t* head, intp_t* nxt, intp_t* to, double* cap) noexcept nogil:
    """Arc ``a -> b`` and its reverse ``b -> a`` (arc indices ``e`` and ``e ^ 1``)."""
    cdef intp_t e = n_arcs[0]
    to[e] = b
    cap[e] = cap_ab
    nxt[e] = head[a]
    head[a] = e
    to[e + 1] = a
    cap[e + 1] = cap_ba
    nxt[e + 1] = head[b]
    head[b] = e + 1
    n_arcs[0] = e + 2


cdef bint _levels(intp_t n_nodes, intp_t source, intp_t sink, double eps, const intp_t* head,
                  const intp_t* nxt, const intp_t* to, const double* cap, intp_t* level,
                  intp_t* queue) noexcept nogil:
    """BFS levels from the source in the residual graph; whether the sink is reachable."""
    cdef intp_t k, u, e, qhead = 0, qtail = 0
    for k in range(n_nodes):
        level[k] = -1
    level[source] = 0
    queue[qtail] = source
    qtail += 1
    while qhead < qtail:
        u = queue[qhead]
        qhead += 1
        e = head[u]
        while e != -1:
            if cap[e] > eps and level[to[e]] < 0:
                level[to[e]] = level[u] + 1
                queue[qtail] = to[e]
                qtail += 1
            e = nxt[e]
    return level[sink] >= 0


cdef void _blocking_flow(intp_t source, intp_t sink, double eps, const intp_t* head,
                         const intp_t* nxt, const intp_t* to, double* cap, intp_t* level,
                         intp_t* current, intp_t* path) noexcept nogil:
    """Augment along shortest paths of the level graph until none is left."""
    cdef intp_t u = source, top = 0, e, k
    cdef double flow
    while True:
        if u == sink:
            flow = cap[path[0]]
            for k in range(1, top):
                if cap[path[k]] < flow:
                    flow = cap[path[k]]
            for k in range(top):
                cap[path[k]] -= flow
                cap[path[k] ^ 1] += flow
            # restart from the tail of the first saturated arc
            for k in range(top):
                if cap[path[k]] <= eps:
                    top = k
                    break
            u = source if top == 0 else to[path[top - 1]]
            continue
        e = current[u]
        while e != -1 and not (cap[e] > eps and level[to[e]] == level[u] + 1):
            e = nxt[e]
        current[u] = e
        if e != -1:
            path[top] = e
            top += 1
            u = to[e]
        else:  # dead end: leave the level graph and retreat
            level[u] = -1
            if u == source:
                return
            top -= 1
            u = to[path[top] ^ 1]
            current[u] = nxt[current[u]]


cdef double grid_image_cut(const double* unary, intp_t n, intp_t width,
                           const double* right_cost, const double* down_cost, int64_t* labels,
                           intp_t* int_work, double* cap) noexcept nogil:
    """Maximising labelling of one image of ``n`` pixels into ``labels``; returns the cut.

    ``unary`` is (n, 2) row-major; ``int_work`` holds ``mincut_int_work(n)`` integers and
    ``cap`` ``mincut_arcs(n)`` doubles.
    """
    cdef intp_t source = n, sink = n + 1, n_nodes = n + 2, n_arcs = 0, t, e, col
    cdef intp_t* head = int_work
    cdef intp_t* level = head + n_nodes
    cdef intp_t* queue = level + n_nodes
    cdef intp_t* current = queue + n_nodes
    cdef intp_t* path = current + n_nodes
    cdef intp_t* nxt = path + n_nodes
    cdef intp_t* to = nxt + mincut_arcs(n)
    cdef double d, total = 0.0
    # (each augmentation empties its bottleneck arc exactly: no tolerance needed)
    cdef double eps = 0.0
    if n == 0:
        return 0.0
    for t in range(n_nodes):
        head[t] = -1
    for t in range(n):
        d = unary[2 * t + 1] - unary[2 * t]
        if d > 0:
            _add_pair(source, t, d, 0.0, &n_arcs, head, nxt, to, cap)
        elif d < 0:
            _add_pair(t, sink, -d, 0.0, &n_arcs, head, nxt, to, cap)
        col = t % width
        if col + 1 < width and t + 1 < n and right_cost[t] > 0:
            _add_pair(t, t + 1, right_cost[t], right_cost[t], &n_arcs, head, nxt, to, cap)
        if t + width < n and down_cost[t] > 0:
            _add_pair(t, t + width, down_cost[t], down_cost[t], &n_arcs, head, nxt, to, cap)
    while _levels(n_nodes, source, sink, eps, head, nxt, to, cap, level, queue):
        for t in range(n_nodes):
            current[t] = head[t]
        _blocking_flow(source, sink, eps, head, nxt, to, cap, level, current, path)
    # the source side of the minimum cut takes label 1
    _levels(n_nodes, source, sink, eps, head, nxt, to, cap, level, queue)
    for t in range(n):
        labels[t] = 1 if level[t] >= 0 else 0
    e = head[source]
    while e != -1:  # flow that left the source = this image's cut value
        total += cap[e ^ 1]
        e = nxt[e]
    return total


def grid_mincut(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                const int64_t[::1] widths, const float64_t[::1] right_cost,
                const float64_t[::1] down_cost, int64_t[::1] labels):
    """Write the maximising labelling of every image into ``labels``.

    Image ``i`` has ``widths[i]`` pixels per row.

    ``right_cost[t]`` is the cost of pixel ``t`` disagreeing with its right neighbour (ignored
    in the last column), ``down_cost[t]`` with the pixel below (ignored in the last row).
    Returns the total flow (the sum of the images' minimum cut values).
    """
    cdef intp_t n_images = offsets.shape[0] - 1
    cdef intp_t i, lo, n, max_n = 0
    cdef double total = 0.0
    cdef intp_t* int_work = NULL
    cdef double* cap = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    for i in range(n_images):
        if offsets[i + 1] - offsets[i] > max_n:
            max_n = offsets[i + 1] - offsets[i]
    try:
        with nogil:
            int_work = <intp_t*> malloc(mincut_int_work(max_n) * sizeof(intp_t))
            cap = <double*> malloc(mincut_arcs(max_n) * sizeof(double))
            if int_work == NULL or cap == NULL:
                failed = True
            else:
                for i in range(n_images):
                    lo = offsets[i]
                    n = offsets[i + 1] - lo
                    total += grid_image_cut(&unary[lo, 0] if n > 0 else NULL, n, widths[i],
                                            &right_cost[lo] if n > 0 else NULL,
                                            &down_cost[lo] if n > 0 else NULL,
                                            &labels[lo] if n > 0 else NULL, int_work, cap)
                    check_signals_every(&since_check, n, _PIXELS_PER_SIGNAL_CHECK)
    finally:
        free(int_work)
        free(cap)
    if failed:
        raise MemoryError("could not allocate the min-cut workspace")
    return total
