"""Compiled k-best Viterbi and forward log-partition over batches of first-order linear chains.

The batch layout is that of :mod:`sklstruct._inference._chain`: stacked per-token state scores
``unary`` (n_tokens, n_states) and ``offsets``; sequence ``i`` covers tokens
``offsets[i]:offsets[i + 1]``. The score of a labelling is
``sum_t unary[t, y_t] + sum_t transition[y_t, y_{t+1}] + start[y_0] + end[y_last]``.

**Order of the labellings.** Labellings are ranked by decreasing score; labellings of equal
score are ranked by their labels read from the last token back to the first, smaller first
(``y_last``, then ``y_{last-1}``, ...). This is the tie rule of the Viterbi decoder of
:mod:`sklstruct._inference._chain` (lower state index first at every back-pointer), so the
best labelling here is the Viterbi labelling.

**k-best recursion.** Every node (token ``t``, state ``b``) has a list of the best prefixes
ending in ``b`` at ``t``, in the order above, each entry with a back-pointer
``(state, rank)`` into a list of token ``t - 1``; a final node holds the complete
labellings (with the end scores). The list of a node is the merge of its predecessors' lists
shifted by ``transition[a, b]`` (each stays sorted): a heap over the predecessors holds the
next candidate of each, and of two candidates of equal score the one with the lower
predecessor state comes first, which is the order above restricted to prefixes; the result
is therefore exact, ties included.

The lists are built lazily (Huang and Chiang, 2005, "Better k-best parsing", algorithm 3): a
Viterbi pass gives the first entry of every list, and a list grows only when a successor
needs its next entry, so that the ``k`` best labellings of a sequence of length ``n`` cost
one Viterbi pass plus ``O(k n log n_states)`` heap steps and ``O(n_states)`` per list that
grows at all.

Every function writes into preallocated outputs and runs without the GIL. The inputs are
validated by the wrappers of :mod:`sklstruct._inference.chain`.
"""
from libc.math cimport exp, log
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from sklstruct._inference._chain cimport (_max_length, _transition_tables, _viterbi_decode,
                                          _viterbi_tables)
from sklstruct._inference._workspace cimport _resize
from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport float64_t, int32_t, int64_t, intp_t

# token x state x state (x k) steps of the batch loops between two checks for a pending
# signal (Ctrl-C): a few milliseconds
cdef intp_t _SIGNAL_CHECK_WORK = 1 << 24
# A rescaled sum of exponentials below this value is recomputed by an exact log-sum-exp.
cdef double _TINY = 1e-280
# In an exact log-sum-exp, terms this many nats below the largest are skipped (e^-40 = 4e-18).
cdef double _NEGLIGIBLE = -40.0


cdef struct Candidate:
    double value    # the predecessor's entry plus the transition (or end) score
    int32_t state   # the predecessor state
    int32_t rank    # the rank of the entry in the predecessor's list


cdef struct Entry:
    double value
    int32_t back    # predecessor state * k + rank of its entry


cdef inline bint _before(const Candidate* x, const Candidate* y) noexcept nogil:
    """Whether candidate ``x`` ranks before ``y`` (their states differ)."""
    return x.value > y.value or (x.value == y.value and x.state < y.state)


cdef inline bint _above(const Candidate* x, const Candidate* y, bint worst_first) noexcept nogil:
    """Heap order: ``x`` before ``y``, or after it in a heap whose root is the worst."""
    if worst_first:
        return _before(y, x)
    return _before(x, y)


cdef inline void _sift_down(Candidate* heap, intp_t size, intp_t position,
                            bint worst_first) noexcept nogil:
    cdef Candidate item = heap[position]
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


cdef inline void _sift_up(Candidate* heap, intp_t position) noexcept nogil:
    cdef Candidate item = heap[position]
    cdef intp_t parent
    while position > 0:
        parent = (position - 1) // 2
        if not _before(&item, &heap[parent]):
            break
        heap[position] = heap[parent]
        position = parent
    heap[position] = item


cdef struct Lists:
    # The sequence being decoded.
    const double* unary
    const double* transition_t
    const double* end
    intp_t n_states
    intp_t k
    intp_t width        # heap capacity of a record, min(k, n_states)
    intp_t length
    # Viterbi values per (token, state) and their predecessors: entry 0 of every list.
    double* delta
    int32_t* pointer
    # Record of every node (token * n_states + state; length * n_states is the final node),
    # -1 for a node whose list holds only its Viterbi entry.
    int32_t* record_of
    # Records: ``capacity`` allocated, ``used`` by the current sequence. Per record: its
    # node, its list (``count`` entries in a block of ``room``, kept from sequence to
    # sequence), its heap of candidates (``heap_size`` of ``width``), the candidate whose
    # successor is to be pushed before the next pop (``pending`` state, -1 for none, and
    # ``pending_rank``) and whether the list holds all the node's prefixes (``done``).
    intp_t capacity
    intp_t used
    int32_t* node
    int32_t* count
    int32_t* room
    int32_t* heap_size
    int32_t* pending
    int32_t* pending_rank
    int32_t* done
    Entry** entries
    Candidate* heap


cdef bint _grow(Lists* lists) noexcept nogil:
    """Double the record capacity; False when memory runs out."""
    cdef size_t i, capacity = 2 * lists.capacity if lists.capacity else 64
    if not (_resize(<void**> &lists.node, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.count, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.room, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.heap_size, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.pending, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.pending_rank, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.done, capacity * sizeof(int32_t))
            and _resize(<void**> &lists.heap, capacity * lists.width * sizeof(Candidate))
            and _resize(<void**> &lists.entries, capacity * sizeof(Entry*))):
        return False
    for i in range(lists.capacity, capacity):
        lists.entries[i] = NULL
        lists.room[i] = 0
    lists.capacity = capacity
    return True


cdef void _release(Lists* lists) noexcept nogil:
    """Free every block of the lists."""
    cdef intp_t i
    if lists.entries != NULL:
        for i in range(lists.capacity):
            free(lists.entries[i])
    free(lists.entries)
    free(lists.node)
    free(lists.count)
    free(lists.room)
    free(lists.heap_size)
    free(lists.pending)
    free(lists.pending_rank)
    free(lists.done)
    free(lists.heap)
    free(lists.delta)
    free(lists.pointer)
    free(lists.record_of)


cdef inline intp_t _length_of(const Lists* lists, intp_t node) noexcept nogil:
    """How many entries of the node's list are known."""
    if lists.record_of[node] < 0:
        return 1
    return lists.count[lists.record_of[node]]


cdef inline bint _complete(const Lists* lists, intp_t node) noexcept nogil:
    """Whether the node's list is known to hold all its prefixes."""
    if node < lists.n_states:
        return True
    if lists.record_of[node] < 0:
        return False
    return lists.done[lists.record_of[node]]


cdef inline double _value(const Lists* lists, intp_t node, intp_t r) noexcept nogil:
    if r == 0:
        return lists.delta[node]
    return lists.entries[lists.record_of[node]][r].value


cdef inline intp_t _back(const Lists* lists, intp_t node, intp_t r) noexcept nogil:
    if r == 0:
        return lists.pointer[node] * lists.k
    return lists.entries[lists.record_of[node]][r].back


cdef inline const double* _shift(const Lists* lists, intp_t node) noexcept nogil:
    """Scores added to the predecessors' values: a transition column, or the end scores."""
    if node == lists.length * lists.n_states:
        return lists.end
    return lists.transition_t + (node % lists.n_states) * lists.n_states


cdef bint _pop(Lists* lists, intp_t record, intp_t node) noexcept nogil:
    """Move the first candidate of the record's heap to the end of its list (or mark the
    list complete when the heap is empty). False when memory runs out."""
    cdef Candidate* heap = lists.heap + record * lists.width
    cdef intp_t size = lists.heap_size[record]
    cdef intp_t count = lists.count[record]
    cdef intp_t room = lists.room[record]
    cdef Entry* entry
    if size == 0:
        lists.done[record] = True
        return True
    if count == room:
        room = 2 * room if room else 4
        if room > lists.k:
            room = lists.k
        if not _resize(<void**> &lists.entries[record], room * sizeof(Entry)):
            return False
        lists.room[record] = <int32_t> room
    entry = lists.entries[record] + count
    entry.value = heap[0].value
    if node < lists.length * lists.n_states:
        entry.value += lists.unary[node]
    entry.back = <int32_t> (heap[0].state * lists.k + heap[0].rank)
    lists.count[record] = <int32_t> (count + 1)
    lists.pending[record] = heap[0].state
    lists.pending_rank[record] = heap[0].rank + 1
    size -= 1
    heap[0] = heap[size]
    lists.heap_size[record] = <int32_t> size
    _sift_down(heap, size, 0, False)
    return True


cdef bint _open(Lists* lists, intp_t node) noexcept nogil:
    """Give a node past the first token its record and pop its first entry.

    The heap starts with the first candidates of the ``width`` best predecessor lists (a
    list whose first candidate ranks after ``k`` others cannot reach the first ``k``).
    False when memory runs out.
    """
    cdef intp_t a, j, n = lists.n_states, width = lists.width
    cdef intp_t record = lists.used
    cdef const double* previous = lists.delta + (node // n - 1) * n
    cdef const double* shift = _shift(lists, node)
    cdef Candidate candidate
    cdef Candidate* heap
    if record == lists.capacity and not _grow(lists):
        return False
    lists.used += 1
    lists.record_of[node] = <int32_t> record
    lists.node[record] = <int32_t> node
    lists.count[record] = 0
    lists.pending[record] = -1
    lists.done[record] = False
    heap = lists.heap + record * width
    candidate.rank = 0
    for a in range(n):
        candidate.value = previous[a] + shift[a]
        candidate.state = <int32_t> a
        if a < width:
            heap[a] = candidate
            if a == width - 1 and width < n:
                for j in range(width // 2 - 1, -1, -1):
                    _sift_down(heap, width, j, True)
        elif _before(&candidate, &heap[0]):
            heap[0] = candidate
            _sift_down(heap, width, 0, True)
    for j in range(width // 2 - 1, -1, -1):
        _sift_down(heap, width, j, False)
    lists.heap_size[record] = <int32_t> width
    return _pop(lists, record, node)


cdef inline intp_t _needed(const Lists* lists, intp_t node) noexcept nogil:
    """The predecessor whose list must grow before the node's next entry, or -1."""
    cdef intp_t record = lists.record_of[node]
    cdef intp_t a = lists.pending[record]
    cdef intp_t previous
    if a < 0 or lists.done[record]:
        return -1
    previous = node - node % lists.n_states - lists.n_states + a
    if _length_of(lists, previous) > lists.pending_rank[record]:
        return -1
    if _complete(lists, previous):
        return -1
    return previous


cdef bint _step(Lists* lists, intp_t node) noexcept nogil:
    """Push the successor of the node's last popped candidate when it exists, then pop.
    False when memory runs out."""
    cdef intp_t n = lists.n_states
    cdef intp_t record = lists.record_of[node]
    cdef intp_t a = lists.pending[record]
    cdef intp_t previous, r, size
    cdef Candidate* heap
    if lists.done[record]:
        return True
    if a >= 0:
        lists.pending[record] = -1
        previous = node - node % n - n + a
        r = lists.pending_rank[record]
        if _length_of(lists, previous) > r:
            heap = lists.heap + record * lists.width
            size = lists.heap_size[record]
            heap[size].value = _value(lists, previous, r) + _shift(lists, node)[a]
            heap[size].state = <int32_t> a
            heap[size].rank = <int32_t> r
            lists.heap_size[record] = <int32_t> (size + 1)
            _sift_up(heap, size)
    return _pop(lists, record, node)


cdef bint _extend(Lists* lists, intp_t node, intp_t* stack) noexcept nogil:
    """Append the next entry to the node's list (or mark it complete).

    The predecessor lists it needs are extended first, walking back token by token with an
    explicit stack. False when memory runs out.
    """
    cdef intp_t depth = 0
    cdef intp_t previous
    while True:
        if lists.record_of[node] < 0 and not _open(lists, node):
            return False
        previous = _needed(lists, node)
        if previous < 0:
            break
        stack[depth] = node
        depth += 1
        node = previous
    if not _step(lists, node):
        return False
    while depth > 0:
        depth -= 1
        if not _step(lists, stack[depth]):
            return False
    return True


cdef intp_t _topk_sequence(Lists* lists, const double* start, int64_t* labels,
                           double* scores, intp_t* stack, bint* failed) noexcept nogil:
    """The k best labellings of one sequence (``k >= 2``); returns how many there are.

    A Viterbi pass gives the first entry of every list; the final node's list is then
    extended up to k - 1 times, each extension growing only the lists it needs. ``labels``
    is the sequence's block of the (n_tokens, k) output, labelling ``j`` in column ``j``;
    entries past the number of labellings are left untouched. Sets ``failed`` when memory
    runs out.
    """
    cdef intp_t n = lists.n_states, k = lists.k, length = lists.length
    cdef intp_t t, a, b, j, r, code, best_state, final = length * n, record, count = 0
    cdef double best, candidate
    cdef const double* column
    cdef const double* unary = lists.unary
    cdef double* delta = lists.delta
    cdef Entry* entries
    for b in range(n):
        delta[b] = start[b] + unary[b]
    for t in range(1, length):
        for b in range(n):
            column = lists.transition_t + b * n
            best = delta[(t - 1) * n] + column[0]
            best_state = 0
            for a in range(1, n):
                candidate = delta[(t - 1) * n + a] + column[a]
                if candidate > best:
                    best = candidate
                    best_state = a
            delta[t * n + b] = best + unary[t * n + b]
            lists.pointer[t * n + b] = <int32_t> best_state
    if not _open(lists, final):
        failed[0] = True
    else:
        record = lists.record_of[final]
        while lists.count[record] < k and not lists.done[record]:
            if not _extend(lists, final, stack):
                failed[0] = True
                break
        count = lists.count[record]
        entries = lists.entries[record]
        for j in range(count):
            scores[j] = entries[j].value
            code = entries[j].back
            for t in range(length - 1, -1, -1):
                b = code // k
                r = code - b * k
                labels[t * k + j] = b
                if t > 0:
                    code = _back(lists, t * n + b, r)
    for j in range(lists.used):
        lists.record_of[lists.node[j]] = -1
    lists.used = 0
    return count


def topk_viterbi_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                       const float64_t[:, ::1] transition, const float64_t[::1] start,
                       const float64_t[::1] end, intp_t k, int64_t[:, ::1] labels,
                       float64_t[:, ::1] scores, int64_t[::1] counts):
    """The ``k`` best labellings of every sequence, in the order of the module.

    ``labels`` (n_tokens, k) receives labelling ``j`` of a sequence in column ``j`` and
    ``scores`` (n_sequences, k) its score; ``counts`` receives the number of labellings
    written per sequence, ``min(k, n_states ** length)``. The other entries are left as they
    are (the caller fills them with padding). ``n_states * k`` and the longest sequence's
    ``(length + 1) * n_states`` must fit in an int32.
    """
    cdef intp_t n_states = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo, max_len
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* transition_t = NULL
    cdef intp_t* stack = NULL
    cdef Lists lists
    cdef bint failed = False
    cdef intp_t since_check = 0
    memset(&lists, 0, sizeof(Lists))
    try:
        with nogil:
            max_len = _max_length(offsets_ptr, n_sequences)
            # transposed transitions (S S) and, for k == 1, their column maxima (S + 1)
            transition_t = <double*> malloc((n_states * n_states + n_states + 1)
                                            * sizeof(double))
            # Viterbi values per token (two rows at least: the workspace of k == 1)
            lists.delta = <double*> malloc((max_len + 1) * n_states * sizeof(double))
            # back-pointers per token (and a row of candidates for k == 1)
            lists.pointer = <int32_t*> malloc((max_len + 1) * n_states * sizeof(int32_t))
            lists.record_of = <int32_t*> malloc((max_len * n_states + 1) * sizeof(int32_t))
            stack = <intp_t*> malloc((max_len + 1) * sizeof(intp_t))
            if (transition_t == NULL or lists.delta == NULL or lists.pointer == NULL
                    or lists.record_of == NULL or stack == NULL):
                failed = True
            else:
                _viterbi_tables(&transition[0, 0], n_states, transition_t,
                                transition_t + n_states * n_states)
                for i in range(max_len * n_states + 1):
                    lists.record_of[i] = -1
                lists.transition_t = transition_t
                lists.end = &end[0]
                lists.n_states = n_states
                lists.k = k
                lists.width = k if k < n_states else n_states
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    lists.unary = unary_ptr + lo * n_states
                    lists.length = offsets_ptr[i + 1] - lo
                    if k == 1:
                        scores[i, 0] = _viterbi_decode(
                            lists.unary, lists.length, n_states, &transition[0, 0],
                            transition_t, transition_t + n_states * n_states, &start[0],
                            &end[0], lists.delta, lists.delta + n_states,
                            lists.pointer + max_len * n_states, lists.pointer,
                            &labels[lo, 0])
                        counts[i] = 1
                    else:
                        counts[i] = _topk_sequence(&lists, &start[0], &labels[lo, 0],
                                                   &scores[i, 0], stack, &failed)
                        if failed:
                            break
                    check_signals_every(&since_check,
                                        lists.length * n_states * n_states * lists.width,
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(transition_t)
        free(stack)
        _release(&lists)
    if failed:
        raise MemoryError("could not allocate the k-best Viterbi workspace")


cdef double _log_partition_sequence(
        const double* unary, intp_t length, intp_t n, const double* transition,
        const double* start, const double* end, const double* column_max,
        const double* column_exp, double* alpha, double* alpha_next,
        double* work) noexcept nogil:
    """Forward recursion of one sequence in the log domain; returns its log-partition.

    A message is a sum of exponentials rescaled by the largest previous forward value and
    multiplied by the column-rescaled exponentiated transitions; a message whose rescaled sum
    falls below ``_TINY`` is recomputed by an exact log-sum-exp.
    """
    cdef intp_t t, a, b
    cdef double peak, total, value, lse, weight
    cdef double* swap
    for b in range(n):
        alpha[b] = start[b] + unary[b]
    for t in range(1, length):
        peak = alpha[0]
        for a in range(1, n):
            if alpha[a] > peak:
                peak = alpha[a]
        for b in range(n):
            work[b] = 0.0
        for a in range(n):
            weight = exp(alpha[a] - peak)
            for b in range(n):
                work[b] += weight * column_exp[a * n + b]
        for b in range(n):
            if work[b] >= _TINY:
                alpha_next[b] = unary[t * n + b] + peak + column_max[b] + log(work[b])
            else:
                lse = alpha[0] + transition[b]
                for a in range(1, n):
                    value = alpha[a] + transition[a * n + b]
                    if value > lse:
                        lse = value
                total = 0.0
                for a in range(n):
                    value = alpha[a] + transition[a * n + b] - lse
                    if value > _NEGLIGIBLE:
                        total += exp(value)
                alpha_next[b] = unary[t * n + b] + lse + log(total)
        swap = alpha
        alpha = alpha_next
        alpha_next = swap
    peak = alpha[0] + end[0]
    for b in range(1, n):
        if alpha[b] + end[b] > peak:
            peak = alpha[b] + end[b]
    total = 0.0
    for b in range(n):
        total += exp(alpha[b] + end[b] - peak)
    return peak + log(total)


def log_partition_batch(const float64_t[:, ::1] unary, const int64_t[::1] offsets,
                        const float64_t[:, ::1] transition, const float64_t[::1] start,
                        const float64_t[::1] end, float64_t[::1] log_partition):
    """``log sum_y exp(score(y))`` of every sequence, by the forward recursion alone."""
    cdef intp_t n = unary.shape[1]
    cdef intp_t n_sequences = offsets.shape[0] - 1
    cdef intp_t i, lo
    cdef const double* unary_ptr = &unary[0, 0]
    cdef const double* transition_ptr = &transition[0, 0]
    cdef const int64_t* offsets_ptr = &offsets[0]
    cdef double* tables = NULL
    cdef double* buffers = NULL
    cdef bint failed = False
    cdef intp_t since_check = 0
    try:
        with nogil:
            # column_max, row_max, work (n each), column_exp and transposed row_exp (n * n)
            tables = <double*> malloc((3 * n + 2 * n * n) * sizeof(double))
            # two forward vectors and the message sums
            buffers = <double*> malloc(3 * n * sizeof(double))
            if tables == NULL or buffers == NULL:
                failed = True
            else:
                _transition_tables(transition_ptr, n, tables)
                for i in range(n_sequences):
                    lo = offsets_ptr[i]
                    log_partition[i] = _log_partition_sequence(
                        unary_ptr + lo * n, offsets_ptr[i + 1] - lo, n, transition_ptr,
                        &start[0], &end[0], tables, tables + 3 * n, buffers, buffers + n,
                        buffers + 2 * n)
                    check_signals_every(&since_check, (offsets_ptr[i + 1] - lo) * n * n,
                                        _SIGNAL_CHECK_WORK)
    finally:
        free(tables)
        free(buffers)
    if failed:
        raise MemoryError("could not allocate the forward workspace")
