"""Per-example kernels of dependency trees whose rows are the candidate arcs.

A sentence of ``n`` tokens is an example of ``n * n`` rows, its candidate arcs ``h -> m``
(``m`` in ``1..n``, ``h`` in ``0..n``, ``h != m``) in modifier-major order: row
``(m - 1) * n + (h if h < m else h - 1)`` (:func:`arc_row`). State 0 of a row means "not an
arc of the tree", states ``1..S-1`` "an arc of the tree" (with relation ``s``, the joint
labelled model). A labelling of the rows is a tree when the rows in states ``>= 1`` are the
``n`` arcs of a dependency tree.

The score of a tree is ``sum_rows scores[row, y_row]``: every row contributes, the non-arcs in
state 0. Relative to the all-absent labelling, arc ``h -> m`` adds
``max_{s >= 1} scores[r, s] - scores[r, 0]`` (decoding) or
``logsumexp_{s >= 1} scores[r, s] - scores[r, 0]`` (marginals), which turns both oracles into
the first-order arc-factored ones of :mod:`sklstruct._inference._dependency`: Eisner's
algorithm and inside-outside for projective trees, Chu-Liu-Edmonds and the matrix-tree
theorem for all trees.
"""

import numpy as np

from libc.math cimport exp, log
from libc.stdlib cimport free, malloc

from sklstruct._inference._dependency cimport (eisner_decode, eisner_int_work, eisner_marginals,
                                               eisner_work, inside_outside_work,
                                               matrix_tree_int_work, matrix_tree_marginals,
                                               matrix_tree_work, spanning_tree_decode,
                                               spanning_tree_int_work, spanning_tree_work)
from sklstruct._inference._kernels cimport ExampleKernels
from sklstruct._inference._workspace cimport _larger
from sklstruct._typedefs cimport float64_t, int64_t, intp_t


cdef inline intp_t arc_row(intp_t n, intp_t h, intp_t m) noexcept nogil:
    """Row of the candidate arc ``h -> m`` of a sentence of ``n`` tokens."""
    return (m - 1) * n + (h if h < m else h - 1)


cdef class DependencyKernels(ExampleKernels):
    """Dependency trees over candidate-arc rows (see the module doc); no pairwise block.

    Parameters
    ----------
    offsets : ndarray of int64 of shape (n_sentences + 1,)
        Row offsets of the sentences: sentence ``i`` of ``n_i`` tokens has ``n_i ** 2`` rows.
    n_tokens : ndarray of int64 of shape (n_sentences,)
        The sentence lengths ``n_i >= 1``.
    n_states : int
        ``2`` (unlabelled) or ``1 + n_relations`` (joint labelled), at least 2.
    projective : bool
        Projective trees (Eisner, inside-outside) or all trees (Chu-Liu-Edmonds,
        matrix-tree theorem).
    single_root : bool
        Exactly one token attached to the root.
    """

    cdef readonly object n_tokens, truth
    cdef readonly bint projective, single_root
    cdef const int64_t* _n_tokens
    cdef const int64_t* _truth
    cdef double* _work
    cdef intp_t* _int_work
    cdef intp_t _longest

    def __cinit__(self, *args, **kwargs):
        self._work = NULL
        self._int_work = NULL
        self._truth = NULL

    def __init__(self, offsets, n_tokens, intp_t n_states, bint projective, bint single_root):
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.n_tokens = np.ascontiguousarray(n_tokens, dtype=np.int64)
        if n_states < 2:
            raise ValueError(f"dependency kernels need at least 2 states, got {n_states}.")
        if self.n_tokens.ndim != 1 or offsets.shape != (self.n_tokens.shape[0] + 1,) \
                or np.any(self.n_tokens < 1) \
                or np.any(np.diff(offsets) != self.n_tokens ** 2):
            raise ValueError("every sentence of n >= 1 tokens needs n * n candidate-arc rows.")
        super().__init__(offsets, n_states, 0, 0, True)
        self.projective = projective
        self.single_root = single_root
        cdef const int64_t[::1] view = self.n_tokens
        self._n_tokens = &view[0]
        cdef intp_t n = int(self.n_tokens.max())
        cdef intp_t N = n + 1
        self._longest = n
        # arc scores, per-row best state or marginals, then the decoder's or marginals' work
        cdef intp_t work = _larger(_larger(eisner_work(n), spanning_tree_work(n)),
                                   _larger(inside_outside_work(n), matrix_tree_work(n)))
        cdef intp_t int_work = _larger(_larger(eisner_int_work(n), spanning_tree_int_work(n)),
                                       matrix_tree_int_work(n))
        self._work = <double*> malloc((2 * N * N + work) * sizeof(double))
        self._int_work = <intp_t*> malloc((int_work + n * n + n) * sizeof(intp_t))
        if self._work == NULL or self._int_work == NULL:
            raise MemoryError("could not allocate the dependency kernels' workspace")

    def __dealloc__(self):
        free(self._work)
        free(self._int_work)

    def set_truth(self, Y):
        """The true row labels of the batch (a learner's training trees).

        With projective trees a training tree may be non-projective, outside the decoder's
        trees: the max-oracle then returns the true tree where its loss-augmented score
        beats every projective tree's (the zero term of the structured hinge
        ``max(0, max_ybar ...)``), so that the learners' hinge and Frank-Wolfe directions
        cover it.

        Parameters
        ----------
        Y : ndarray of int of shape (n_rows,)
        """
        Y = np.ascontiguousarray(Y, dtype=np.int64)
        if Y.shape != (self.offsets[-1],) or (Y.shape[0] and (
                Y.min() < 0 or Y.max() >= self.n_states)):
            raise ValueError(f"Y must hold one state in [0, {self.n_states}) per row "
                             f"({self.offsets[-1]} rows).")
        self.truth = Y
        cdef const int64_t[::1] view = self.truth
        self._truth = &view[0] if Y.shape[0] else NULL

    cdef void max_oracle(self, intp_t i, const double* scores, const double* token_loss,
                         const double* theta, int64_t* labels) noexcept nogil:
        cdef intp_t n = self._n_tokens[i], N = n + 1, S = self.n_states
        cdef intp_t h, m, r, s, best_state
        cdef double* arc = self._work
        cdef double* work = arc + 2 * N * N
        cdef intp_t* heads_work = self._int_work
        cdef intp_t* best_of_row = heads_work + _larger(
            _larger(eisner_int_work(self._longest), spanning_tree_int_work(self._longest)),
            matrix_tree_int_work(self._longest))
        cdef int64_t* heads = <int64_t*> (best_of_row + n * n)
        cdef double base, best, value
        for m in range(1, n + 1):
            arc[m] = 0.0
            for h in range(n + 1):
                if h == m:
                    arc[h * N + m] = 0.0
                    continue
                r = arc_row(n, h, m)
                base = scores[r * S] + token_loss[r * S]
                best_state = 1
                best = scores[r * S + 1] + token_loss[r * S + 1]
                for s in range(2, S):
                    value = scores[r * S + s] + token_loss[r * S + s]
                    if value > best:
                        best = value
                        best_state = s
                arc[h * N + m] = best - base
                best_of_row[r] = best_state
        for h in range(N):
            arc[h * N] = 0.0
        if self.projective:
            eisner_decode(arc, n, self.single_root, heads, work, heads_work)
        else:
            spanning_tree_decode(arc, n, self.single_root, heads, work, heads_work)
        for r in range(n * n):
            labels[r] = 0
        for m in range(1, n + 1):
            r = arc_row(n, heads[m - 1], m)
            labels[r] = best_of_row[r]
        if self.projective and self._truth != NULL:
            self._prefer_truth(self._truth + self._offsets[i], n * n, scores, token_loss,
                               labels)

    cdef void _prefer_truth(self, const int64_t* truth, intp_t n_rows, const double* scores,
                            const double* token_loss, int64_t* labels) noexcept nogil:
        """``labels`` := ``truth`` when its loss-augmented score is the higher (a training
        tree no projective tree reaches)."""
        cdef intp_t r, S = self.n_states
        cdef double decoded = 0.0, gold = 0.0
        for r in range(n_rows):
            decoded += scores[r * S + labels[r]] + token_loss[r * S + labels[r]]
            gold += scores[r * S + truth[r]] + token_loss[r * S + truth[r]]
        if gold > decoded:
            for r in range(n_rows):
                labels[r] = truth[r]

    cdef double marginals(self, intp_t i, const double* node_pot, const double* pair_pot,
                          double* node_marg, double* pair_marg) noexcept nogil:
        cdef intp_t n = self._n_tokens[i], N = n + 1, S = self.n_states
        cdef intp_t h, m, r, s
        cdef double* arc = self._work
        cdef double* arc_marg = arc + N * N
        cdef double* work = arc + 2 * N * N
        cdef double base = 0.0, peak, total, log_z, p
        for h in range(N):
            arc[h * N] = 0.0
        for m in range(1, n + 1):
            arc[m * N + m] = 0.0
            for h in range(n + 1):
                if h == m:
                    continue
                r = arc_row(n, h, m)
                base += node_pot[r * S]
                peak = node_pot[r * S + 1]
                for s in range(2, S):
                    if node_pot[r * S + s] > peak:
                        peak = node_pot[r * S + s]
                total = 0.0
                for s in range(1, S):
                    total += exp(node_pot[r * S + s] - peak)
                # the arc's log-weight; node_marg temporarily holds the relation shares
                arc[h * N + m] = peak + log(total) - node_pot[r * S]
                for s in range(1, S):
                    node_marg[r * S + s] = exp(node_pot[r * S + s] - peak) / total
        if self.projective:
            log_z = eisner_marginals(arc, n, self.single_root, arc_marg, work)
        else:
            log_z = matrix_tree_marginals(arc, n, self.single_root, arc_marg, work,
                                          self._int_work)
        for m in range(1, n + 1):
            for h in range(n + 1):
                if h == m:
                    continue
                r = arc_row(n, h, m)
                p = arc_marg[h * N + m]
                node_marg[r * S] = 1.0 - p
                for s in range(1, S):
                    node_marg[r * S + s] *= p
        return base + log_z


def arc_rows(n_tokens):
    """Row of every candidate arc of every sentence, as the (n + 1) x (n + 1) chart sees it.

    Parameters
    ----------
    n_tokens : ndarray of int64 of shape (n_sentences,)

    Returns
    -------
    chart_index : ndarray of int64 of shape (sum(n_tokens ** 2),)
        For every row, its place ``h * (n + 1) + m`` in the concatenated flattened charts of
        the sentences (``sum((n_tokens + 1) ** 2)`` entries).
    """
    cdef const int64_t[::1] lengths = np.ascontiguousarray(n_tokens, dtype=np.int64)
    cdef intp_t n_rows = 0, i, n, h, m, row_offset = 0, chart_offset = 0
    for i in range(lengths.shape[0]):
        n_rows += lengths[i] * lengths[i]
    index = np.empty(n_rows, dtype=np.int64)
    cdef int64_t[::1] out = index
    with nogil:
        for i in range(lengths.shape[0]):
            n = lengths[i]
            for m in range(1, n + 1):
                for h in range(n + 1):
                    if h != m:
                        out[row_offset + arc_row(n, h, m)] = chart_offset + h * (n + 1) + m
            row_offset += n * n
            chart_offset += (n + 1) * (n + 1)
    return index
