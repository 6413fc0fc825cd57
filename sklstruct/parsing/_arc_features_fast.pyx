"""Compiled arc-feature extraction of :class:`sklstruct.parsing.ArcFeatures`.

The tokens of a batch of sentences are given as arrays of 64-bit value codes, each sentence
preceded by its root (global index ``starts[i]``): ``word``, ``tag``, the tags of the previous
and the following token, ``extra`` (one column per extra key) and ``tag_index``, the rank of
each token's tag among the distinct tags (``tag_codes``). A feature is a 64-bit hash of its
template number and values (:func:`_mix`, the multiply-xorshift step of the Python side).
"""

import numpy as np

from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memset

from sklstruct._signals cimport check_signals_every
from sklstruct._typedefs cimport int32_t, int64_t, intp_t, uint64_t

cdef enum:
    # distance bins of |h - m|: 1, 2, 3, 4, 5, 6-10, 11 and more
    N_BINS = 7
cdef uint64_t MULTIPLIER = 0x9E3779B97F4A7C15ULL
# arcs between two checks for a pending signal (Ctrl-C): a few milliseconds of extraction
cdef intp_t ARCS_PER_SIGNAL_CHECK = 1 << 16


cdef inline uint64_t _mix(uint64_t key, uint64_t value) noexcept nogil:
    key = (key ^ value) * MULTIPLIER
    return key ^ (key >> 29)


cdef inline uint64_t _distance_bin(intp_t distance) noexcept nogil:
    if distance <= 5:
        return distance - 1
    return 5 if distance <= 10 else 6


cdef struct Tokens:
    const uint64_t* word
    const uint64_t* tag
    const uint64_t* previous
    const uint64_t* following
    const uint64_t* extra
    intp_t n_extra
    const int32_t* tag_index
    const uint64_t* tag_codes
    intp_t n_tags


cdef inline intp_t _emit(uint64_t key, uint64_t joined, uint64_t* out) noexcept nogil:
    out[0] = key
    out[1] = _mix(key, joined)
    return 2


cdef intp_t n_fixed_keys(intp_t n_extra) noexcept nogil:
    """Keys of the fixed templates of one arc."""
    return 2 * (17 + 5 * n_extra)


cdef intp_t arc_keys(Tokens* tok, intp_t h, intp_t m, const int32_t* counts_low,
                     const int32_t* counts_high, uint64_t* out) noexcept nogil:
    """The feature hashes of the arc between global tokens ``h`` (head) and ``m``; returns
    their number. ``counts_low``/``counts_high`` are the per-tag counts of the tokens before
    ``min(h, m) + 1`` and ``max(h, m)`` (their difference: the tags strictly between)."""
    cdef intp_t k = 0, e, t, template = 1
    cdef uint64_t hw = tok.word[h], ht = tok.tag[h], mw = tok.word[m], mt = tok.tag[m]
    cdef uint64_t hp = tok.previous[h], hf = tok.following[h]
    cdef uint64_t mp = tok.previous[m], mf = tok.following[m]
    cdef uint64_t he, me, key
    cdef intp_t distance = h - m if h > m else m - h
    cdef uint64_t joined = <uint64_t> ((1 if h > m else 0) * N_BINS + _distance_bin(distance) + 1)
    # head and modifier alone
    k += _emit(_mix(_mix(1, hw), ht), joined, out + k)
    k += _emit(_mix(2, hw), joined, out + k)
    k += _emit(_mix(3, ht), joined, out + k)
    k += _emit(_mix(_mix(4, mw), mt), joined, out + k)
    k += _emit(_mix(5, mw), joined, out + k)
    k += _emit(_mix(6, mt), joined, out + k)
    # pairs
    k += _emit(_mix(_mix(_mix(_mix(7, hw), ht), mw), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(8, ht), mw), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(9, hw), mw), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(10, hw), ht), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(11, hw), ht), mw), joined, out + k)
    k += _emit(_mix(_mix(12, hw), mw), joined, out + k)
    k += _emit(_mix(_mix(13, ht), mt), joined, out + k)
    # surrounding tags
    k += _emit(_mix(_mix(_mix(_mix(14, ht), hf), mp), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(_mix(15, hp), ht), mp), mt), joined, out + k)
    k += _emit(_mix(_mix(_mix(_mix(16, ht), hf), mt), mf), joined, out + k)
    k += _emit(_mix(_mix(_mix(_mix(17, hp), ht), mt), mf), joined, out + k)
    template = 18
    for e in range(tok.n_extra):
        he = tok.extra[h * tok.n_extra + e]
        me = tok.extra[m * tok.n_extra + e]
        k += _emit(_mix(template, he), joined, out + k)
        k += _emit(_mix(template + 1, me), joined, out + k)
        k += _emit(_mix(_mix(template + 2, he), me), joined, out + k)
        k += _emit(_mix(_mix(template + 3, he), mt), joined, out + k)
        k += _emit(_mix(_mix(template + 4, ht), me), joined, out + k)
        template += 5
    # the distinct tags strictly between head and modifier
    for t in range(tok.n_tags):
        if counts_high[t] > counts_low[t]:
            key = _mix(_mix(_mix(<uint64_t> template, ht), tok.tag_codes[t]), mt)
            k += _emit(key, joined, out + k)
    return k


cdef void _tag_counts(Tokens* tok, intp_t start, intp_t n, int32_t* counts) noexcept nogil:
    """``counts[p * n_tags + t]``: tokens of tag ``t`` among positions ``0..p-1`` of the
    sentence (root at position 0), for ``p`` in ``0..n+1``."""
    cdef intp_t p, t, T = tok.n_tags
    memset(counts, 0, T * sizeof(int32_t))
    for p in range(1, n + 2):
        for t in range(T):
            counts[p * T + t] = counts[(p - 1) * T + t]
        counts[p * T + tok.tag_index[start + p - 1]] += 1


cdef inline uint64_t _slot(uint64_t key, uint64_t mask) noexcept nogil:
    return (key ^ (key >> 32)) & mask


cdef class _Table:
    """Open-addressing hash table from a feature hash to its column (linear probing)."""
    cdef uint64_t* keys
    cdef int32_t* values
    cdef uint64_t mask

    def __cinit__(self, const uint64_t[::1] vocabulary):
        cdef intp_t size = 16, i, j
        while size < 2 * vocabulary.shape[0]:
            size *= 2
        self.mask = size - 1
        self.keys = <uint64_t*> malloc(size * sizeof(uint64_t))
        self.values = <int32_t*> malloc(size * sizeof(int32_t))
        if self.keys == NULL or self.values == NULL:
            raise MemoryError("could not allocate the feature table")
        for i in range(size):
            self.values[i] = -1
        for j in range(vocabulary.shape[0]):
            i = _slot(vocabulary[j], self.mask)
            while self.values[i] >= 0:
                i = (i + 1) & self.mask
            self.keys[i] = vocabulary[j]
            self.values[i] = j

    def __dealloc__(self):
        free(self.keys)
        free(self.values)

    cdef inline int32_t find(self, uint64_t key) noexcept nogil:
        cdef uint64_t i = _slot(key, self.mask)
        while self.values[i] >= 0:
            if self.keys[i] == key:
                return self.values[i]
            i = (i + 1) & self.mask
        return -1


cdef Tokens _tokens(tuple arrays):
    """Pointers into ``arrays = (word, tag, previous, following, extra, tag_index,
    tag_codes)``, which the caller keeps alive."""
    word, tag, previous, following, extra, tag_index, tag_codes = arrays
    cdef const uint64_t[::1] w = word
    cdef const uint64_t[::1] t = tag
    cdef const uint64_t[::1] p = previous
    cdef const uint64_t[::1] f = following
    cdef const uint64_t[:, ::1] e = extra
    cdef const int32_t[::1] ti = tag_index
    cdef const uint64_t[::1] tc = tag_codes
    cdef Tokens tok
    tok.word = &w[0]
    tok.tag = &t[0]
    tok.previous = &p[0]
    tok.following = &f[0]
    tok.n_extra = e.shape[1]
    tok.extra = &e[0, 0] if e.shape[1] else NULL
    tok.tag_index = &ti[0]
    tok.tag_codes = &tc[0]
    tok.n_tags = tc.shape[0]
    return tok


def selected_arc_keys(tokens, const int64_t[::1] heads, const int64_t[::1] modifiers,
                      const int64_t[::1] starts, const int64_t[::1] sentence_of):
    """The feature hashes of the given arcs (global token indices ``heads[k] ->
    modifiers[k]`` of sentence ``sentence_of[k]``), concatenated."""
    cdef Tokens tok = _tokens(tokens)
    cdef intp_t n_arcs = heads.shape[0], k, total = 0, s, low, high, T = tok.n_tags
    cdef intp_t per_arc = n_fixed_keys(tok.n_extra) + 2 * T
    keys = np.empty(n_arcs * per_arc, dtype=np.uint64)
    cdef uint64_t[::1] out = keys
    cdef int32_t* low_counts = <int32_t*> malloc((2 * T + 1) * sizeof(int32_t))
    cdef int32_t* high_counts = low_counts + T
    cdef intp_t t, p, since_check = 0
    if low_counts == NULL:
        raise MemoryError("could not allocate the tag counts")
    try:
        with nogil:
            for k in range(n_arcs):
                s = starts[sentence_of[k]]
                low = heads[k] if heads[k] < modifiers[k] else modifiers[k]
                high = heads[k] + modifiers[k] - low
                memset(low_counts, 0, 2 * T * sizeof(int32_t))
                for p in range(low + 1, high):
                    high_counts[tok.tag_index[p]] += 1
                total += arc_keys(&tok, heads[k], modifiers[k], low_counts, high_counts,
                                  &out[total])
                check_signals_every(&since_check, 1, ARCS_PER_SIGNAL_CHECK)
    finally:
        free(low_counts)
    return keys[:total]


def candidate_arc_keys(tokens, const int64_t[::1] lengths, const int64_t[::1] starts):
    """The feature hashes of every candidate arc of every sentence, concatenated."""
    cdef Tokens tok = _tokens(tokens)
    cdef intp_t i, n, h, m, low, high, T = tok.n_tags, total = 0, longest = 0, n_rows = 0
    cdef intp_t per_arc = n_fixed_keys(tok.n_extra) + 2 * T, since_check = 0
    for i in range(lengths.shape[0]):
        n_rows += lengths[i] * lengths[i]
        longest = lengths[i] if lengths[i] > longest else longest
    keys = np.empty(max(n_rows * per_arc, 1), dtype=np.uint64)
    cdef uint64_t[::1] out = keys
    cdef int32_t* counts = <int32_t*> malloc((longest + 2) * T * sizeof(int32_t))
    if counts == NULL:
        raise MemoryError("could not allocate the tag counts")
    try:
        with nogil:
            for i in range(lengths.shape[0]):
                n = lengths[i]
                check_signals_every(&since_check, n * n, ARCS_PER_SIGNAL_CHECK)
                _tag_counts(&tok, starts[i], n, counts)
                for m in range(1, n + 1):
                    for h in range(n + 1):
                        if h == m:
                            continue
                        low = h if h < m else m
                        high = h + m - low
                        total += arc_keys(&tok, starts[i] + h, starts[i] + m,
                                          counts + (low + 1) * T, counts + high * T,
                                          &out[total])
    finally:
        free(counts)
    return keys[:total]


cdef void _sort_unique(int32_t* values, intp_t* count) noexcept nogil:
    """Sort ``values[:count]`` (insertion sort: rows are short) and drop repeats."""
    cdef intp_t i, j, kept
    cdef int32_t v
    for i in range(1, count[0]):
        v = values[i]
        j = i - 1
        while j >= 0 and values[j] > v:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = v
    kept = 1 if count[0] else 0
    for i in range(1, count[0]):
        if values[i] != values[kept - 1]:
            values[kept] = values[i]
            kept += 1
    count[0] = kept


def candidate_arc_rows(tokens, const int64_t[::1] lengths, const int64_t[::1] starts,
                       const uint64_t[::1] vocabulary):
    """CSR structure (``indptr``, ``indices``) of the candidate arcs' features, each row's
    kept features (those in ``vocabulary``, as columns) sorted, rows in the order of
    :class:`~sklstruct.structures.DependencyTree`."""
    cdef Tokens tok = _tokens(tokens)
    cdef _Table table = _Table(vocabulary)
    cdef intp_t i, n, h, m, low, high, T = tok.n_tags, longest = 0, n_rows = 0
    cdef intp_t per_arc = n_fixed_keys(tok.n_extra) + 2 * T, row = 0, count, k, nnz = 0
    cdef intp_t capacity, j, since_check = 0
    cdef int32_t column
    for i in range(lengths.shape[0]):
        n_rows += lengths[i] * lengths[i]
        longest = lengths[i] if lengths[i] > longest else longest
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    cdef int64_t[::1] pointers = indptr
    capacity = n_rows * (per_arc // 2) + per_arc
    cdef int32_t* indices = <int32_t*> malloc(capacity * sizeof(int32_t))
    cdef int32_t* grown
    cdef int32_t* counts = <int32_t*> malloc((longest + 2) * T * sizeof(int32_t))
    cdef uint64_t* keys = <uint64_t*> malloc(per_arc * sizeof(uint64_t))
    cdef bint failed = False
    try:
        if indices == NULL or counts == NULL or keys == NULL:
            raise MemoryError("could not allocate the arc features")
        with nogil:
            for i in range(lengths.shape[0]):
                n = lengths[i]
                check_signals_every(&since_check, n * n, ARCS_PER_SIGNAL_CHECK)
                _tag_counts(&tok, starts[i], n, counts)
                for m in range(1, n + 1):
                    for h in range(n + 1):
                        if h == m:
                            continue
                        low = h if h < m else m
                        high = h + m - low
                        count = arc_keys(&tok, starts[i] + h, starts[i] + m,
                                         counts + (low + 1) * T, counts + high * T, keys)
                        if nnz + count > capacity:
                            capacity = 2 * capacity + count
                            grown = <int32_t*> realloc(indices, capacity * sizeof(int32_t))
                            if grown == NULL:
                                failed = True
                                break
                            indices = grown
                        k = 0
                        for j in range(count):
                            column = table.find(keys[j])
                            if column >= 0:
                                indices[nnz + k] = column
                                k += 1
                        _sort_unique(indices + nnz, &k)
                        nnz += k
                        row += 1
                        pointers[row] = nnz
                    if failed:
                        break
                if failed:
                    break
        if failed:
            raise MemoryError("could not grow the arc features")
        result = np.empty(nnz, dtype=np.int32)
        if nnz:
            result[:] = <int32_t[:nnz]> indices
        return indptr, result
    finally:
        free(indices)
        free(counts)
        free(keys)
