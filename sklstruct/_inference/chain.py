"""Validated entry points to the batched linear-chain inference kernels.

A batch of sequences is given as stacked per-token state scores ``unary`` of shape
(n_tokens, n_states) and ``offsets`` of shape (n_sequences + 1,): sequence ``i`` covers tokens
``offsets[i]:offsets[i + 1]``. The score of a labeling ``ybar`` of one sequence is

    sum_t unary[t, ybar_t] + sum_t transition[ybar_t, ybar_{t+1}] + start[ybar_0] + end[ybar_last]

and its loss is decomposable over tokens, ``Delta(y, ybar) = sum_t token_loss[t, ybar_t]``:
for the weighted Hamming loss against true labels ``y``,
``token_loss[t, s] = loss_weights[y_t] * [s != y_t]``
(:func:`sklstruct.structures._loss.hamming_token_loss`).

These functions check their inputs, allocate the outputs and run the compiled dynamic
programmes of :mod:`sklstruct._inference._chain`, optionally on several threads.
"""

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..structures._loss import hamming_token_loss
from . import _chain, _topk
from ._validation import (MAX_SCORE, as_float_array, as_int_array, check_k, check_n_jobs,
                          run_chunks, split_into_chunks, thread_chunks)

__all__ = [
    "forward_backward",
    "log_partition",
    "loss_augmented_viterbi",
    "loss_augmented_viterbi_sparse",
    "topk_viterbi",
    "viterbi",
    "viterbi_sparse",
]

MAX_LOSS_UNITS = 10_000
_MAX_DENOMINATOR = 1000


def _check_state_vector(value, name, n_states, default):
    """Validate an optional per-state vector such as ``start``, ``end`` or ``loss_weights``."""
    if value is None:
        return np.full(n_states, default, dtype=np.float64)
    array = as_float_array(value, name, 1)
    if array.shape[0] != n_states:
        raise ValueError(
            f"{name} must have one entry per state ({n_states}), got {array.shape[0]}."
        )
    return array


def _check_chain(unary, offsets, transition, start, end):
    """Validate a batch of chain potentials and return them as contiguous arrays."""
    unary = as_float_array(unary, "unary", 2)
    n_tokens, n_states = unary.shape
    if n_states < 1:
        raise ValueError("unary must have at least one state (column).")
    offsets, transition, start, end = _check_chain_layout(offsets, n_tokens, n_states,
                                                          transition, start, end)
    check_score_range(unary, offsets, transition, start, end)
    return unary, offsets, transition, start, end


def _check_chain_layout(offsets, n_tokens, n_states, transition, start, end):
    """Validate the sequence offsets of ``n_tokens`` tokens and the pairwise potentials of
    ``n_states`` states; return them as contiguous arrays."""
    offsets = as_int_array(offsets, "offsets")
    if offsets.shape[0] < 1:
        raise ValueError("offsets must contain at least one entry (offsets[0] == 0).")
    if offsets[0] != 0:
        raise ValueError(f"offsets must start at 0, got {offsets[0]}.")
    if np.any(offsets[1:] < offsets[:-1]):
        raise ValueError("offsets must be non-decreasing.")
    if offsets[-1] != n_tokens:
        raise ValueError(
            f"offsets must end at the number of tokens ({n_tokens}), got {offsets[-1]}."
        )
    if np.any(offsets[1:] == offsets[:-1]):
        empty = int(np.flatnonzero(offsets[1:] == offsets[:-1])[0])
        raise ValueError(f"sequence {empty} is empty; every sequence needs one token.")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    transition = as_float_array(transition, "transition", 2)
    if transition.shape != (n_states, n_states):
        raise ValueError(
            f"transition must have shape ({n_states}, {n_states}) to match unary, "
            f"got {transition.shape}."
        )
    start = _check_state_vector(start, "start", n_states, 0.0)
    end = _check_state_vector(end, "end", n_states, 0.0)
    return offsets, transition, start, end




def check_score_range(unary, offsets, transition, start, end, extra=0.0):
    """Raise a ``ValueError`` when a labelling's score could overflow a double.

    The bound is ``sum_t max |unary[t]| + (length - 1) max |transition| + max |start| +
    max |end|`` of the longest-scoring sequence (plus ``extra``, e.g. the largest loss);
    potentials that large come from weights or features of absurd scale, and their sums would
    turn into ``inf`` and the decoders' comparisons into arbitrary choices.
    """
    if unary.size == 0:
        return
    pair = float(np.abs(transition).max(initial=0.0))
    ends = float(np.abs(start).max(initial=0.0)) + float(np.abs(end).max(initial=0.0))
    lengths = np.diff(offsets)
    peak = max(float(unary.max()), -float(unary.min()))
    with np.errstate(over="ignore"):
        if peak * lengths.max() + pair * lengths.max() + ends + extra < MAX_SCORE:
            return  # the common case, from the largest entries alone
        per_sequence = np.add.reduceat(np.abs(unary).max(axis=1), offsets[:-1]) \
            + pair * (lengths - 1) + ends + extra
    if not np.all(per_sequence < MAX_SCORE):
        worst = int(np.argmax(per_sequence))
        raise ValueError(
            f"The potentials are too large to be summed in double precision: a labelling of "
            f"sequence {worst} can score more than {MAX_SCORE:.0e}. The model's weights or "
            "the features are of absurd scale; scale the features (e.g. StandardScaler) or "
            "refit.")


def _check_labels(labels, name, n_tokens, n_states):
    """Validate per-token labels and return them as a contiguous int64 array."""
    labels = as_int_array(labels, name)
    if labels.shape[0] != n_tokens:
        raise ValueError(
            f"{name} must have one entry per token ({n_tokens}), got {labels.shape[0]}."
        )
    if labels.shape[0] and (labels.min() < 0 or labels.max() >= n_states):
        raise ValueError(f"{name} must lie in [0, {n_states}), the range of states.")
    return np.ascontiguousarray(labels, dtype=np.int64)


def _check_token_loss(token_loss, n_tokens, n_states):
    token_loss = as_float_array(token_loss, "token_loss", 2)
    if token_loss.shape != (n_tokens, n_states):
        raise ValueError(f"token_loss must have shape ({n_tokens}, {n_states}), got "
                         f"{token_loss.shape}.")
    if np.any(token_loss < 0):
        raise ValueError("token_loss must be non-negative.")
    return token_loss


def _check_loss_weights(loss_weights, n_states):
    weights = _check_state_vector(loss_weights, "loss_weights", n_states, 1.0)
    if np.any(weights < 0):
        raise ValueError("loss_weights must be non-negative.")
    return weights


def _loss_units(values):
    """Express non-negative loss values as integer multiples of one positive unit.

    Returns
    -------
    units : ndarray of int64, shape of ``values``
        ``values / unit``, capped at ``MAX_LOSS_UNITS + 1``.
    unit : float
        The unit; 1.0 when every value is zero.
    """
    values = np.asarray(values, dtype=np.float64)
    distinct, inverse = np.unique(values, return_inverse=True)
    fractions = []
    for value in distinct:
        fraction = Fraction(float(value)).limit_denominator(_MAX_DENOMINATOR)
        if abs(value - float(fraction)) > 1e-12 * max(1.0, abs(value)):
            raise ValueError(
                f"slack rescaling needs losses that are multiples of a common unit "
                f"(rationals with denominators up to {_MAX_DENOMINATOR}); "
                f"{value!r} is not."
            )
        fractions.append(fraction)
    numerator = math.gcd(*(f.numerator for f in fractions))
    if numerator == 0:
        return np.zeros(values.shape, dtype=np.int64), 1.0
    unit = Fraction(numerator, math.lcm(*(f.denominator for f in fractions)))
    units = np.array([min(int(f / unit), MAX_LOSS_UNITS + 1) for f in fractions],
                     dtype=np.int64)
    return units[inverse].reshape(values.shape), float(unit)


def _slice_tokens(per_token, lo, hi):
    """Rows ``lo:hi`` of a per-token array (or of each array of a tuple; None stays None)."""
    if per_token is None:
        return None
    if isinstance(per_token, tuple):
        return tuple(array[lo:hi] for array in per_token)
    return per_token[lo:hi]


# tokens per chunk of a batch whose outputs are summed over its sequences (see _map_chunks)
REDUCTION_CHUNK_TOKENS = 2**15


def _map_chunks(solve, unary, offsets, y, shared, n_jobs, reduction=False):
    """Apply ``solve(unary, offsets, y, *shared)`` to the batch, in chunks if asked.

    ``y`` is a per-token array, a tuple of them, or None.

    With several jobs, the sequences are split into contiguous chunks of similar token
    counts that are solved by ``n_jobs`` threads of this process (by joblib's workers when
    the active joblib backend is one the user chose that is not thread-based, see
    :func:`~._validation.run_chunks`); per-token and per-sequence outputs are then
    concatenated in order, so the result does not depend on ``n_jobs``. A ``reduction`` (an
    output summed over the batch, one block per chunk, which the caller adds in order) is
    computed in chunks of about ``REDUCTION_CHUNK_TOKENS`` tokens whatever ``n_jobs`` is, so
    that its sums do not depend on it either.
    """
    n_threads = check_n_jobs(n_jobs)
    if reduction:
        chunks = split_into_chunks(offsets, -(-int(offsets[-1]) // REDUCTION_CHUNK_TOKENS))
    else:
        chunks = thread_chunks(offsets, n_threads, unary.shape[1])
    if len(chunks) <= 1:
        return solve(unary, offsets, y, *shared)
    pieces = run_chunks(solve, [
        (unary[offsets[lo] : offsets[hi]], offsets[lo : hi + 1] - offsets[lo],
         _slice_tokens(y, offsets[lo], offsets[hi]), *shared)
        for lo, hi in chunks], n_threads)
    return tuple(np.concatenate(outputs) for outputs in zip(*pieces))


def _solve_viterbi(unary, offsets, y, transition, start, end):
    n_sequences = offsets.shape[0] - 1
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(n_sequences, dtype=np.float64)
    if n_sequences:
        _chain.viterbi_batch(
            unary, offsets, transition, start, end, labels, scores
        )
    return labels, scores


def _solve_margin(unary, offsets, token_loss, transition, start, end):
    n_sequences = offsets.shape[0] - 1
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(n_sequences, dtype=np.float64)
    if n_sequences:
        _chain.margin_viterbi_batch(
            unary, offsets, transition, start, end, token_loss, labels, scores
        )
    return labels, scores


def _solve_slack(unary, offsets, y_and_units, transition, start, end, unit):
    n_sequences = offsets.shape[0] - 1
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    scores = np.zeros(n_sequences, dtype=np.float64)
    if n_sequences:
        y, units = y_and_units
        _chain.slack_viterbi_batch(
            unary, offsets, transition, start, end, y, units, unit, labels, scores
        )
    return labels, scores


def _solve_forward_backward(unary, offsets, y, transition, start, end, edges="per_sequence"):
    n_sequences = offsets.shape[0] - 1
    n_states = unary.shape[1]
    marginals = np.zeros(unary.shape, dtype=np.float64)
    blocks = {"per_sequence": n_sequences, "sum": 1, "none": 0}[edges]
    edge_sums = np.zeros((blocks, n_states, n_states), dtype=np.float64)
    log_partition = np.zeros(n_sequences, dtype=np.float64)
    if n_sequences:
        _chain.forward_backward_batch(
            unary, offsets, transition, start, end, marginals, edge_sums, log_partition,
            edges == "per_sequence"
        )
    return marginals, edge_sums, log_partition


def _per_sequence_sum(values, offsets):
    """Sum per-token ``values`` over each sequence."""
    lengths = np.diff(offsets)
    sequence_ids = np.repeat(np.arange(lengths.shape[0]), lengths)
    return np.bincount(sequence_ids, weights=values, minlength=lengths.shape[0])


def viterbi(unary, offsets, transition, start=None, end=None, n_jobs=None):
    """Highest-scoring labeling of every sequence in a batch (Viterbi algorithm).

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Score of each state at each token.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries: ``offsets[0] == 0``, ``offsets[-1] == n_tokens`` and every
        sequence has at least one token.
    transition : array-like of shape (n_states, n_states)
        ``transition[a, b]`` scores state ``a`` followed by state ``b``.
    start, end : array-like of shape (n_states,), default=None
        Scores added for the state of the first and of the last token; None means zeros.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
        The argmax labeling; ties go to the lower state index.
    scores : ndarray of float64, shape (n_sequences,)
        Score of the returned labeling of each sequence.
    """
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    return _map_chunks(
        _solve_viterbi, unary, offsets, None, (transition, start, end), n_jobs
    )


def _solve_viterbi_csr(csr, weights, offsets, transition, start, end, first, last, out):
    """Decode sequences ``first..last - 1`` into their places of ``out`` (shared by threads;
    a worker process gets a copy); return their labels and scores."""
    labels, scores = out
    _chain.viterbi_csr_batch(*csr, weights, offsets, transition, start, end, first, last,
                             labels, scores)
    return labels[offsets[first]:offsets[last]], scores[first:last]


# the compiled CSR decoders give each thread at least this many tokens: fewer decode faster
# than a thread starts and joins (CoNLL-2000, 22 states: 100 sentences, 2,400 tokens, took
# 1.3x longer on two threads than on one; 500 sentences 0.86x)
THREAD_MIN_TOKENS = 4096


def _csr_chunks(offsets, n_threads, n_states):
    """The chunks of sequences of the CSR decoders (:func:`~._validation.thread_chunks`),
    each of at least ``THREAD_MIN_TOKENS`` tokens (or one chunk)."""
    if offsets.shape[0] <= 1:
        return []
    return thread_chunks(offsets, n_threads, n_states, THREAD_MIN_TOKENS)


def _check_csr_product(X, weights, check_finite):
    """Validate sparse token features ``X`` and ``weights`` (n_features, n_states) for the
    compiled product ``X @ weights``; return ``(indptr, indices, data, weights)`` as
    contiguous int64, int32 and float64 arrays."""
    if not sp.issparse(X):
        raise TypeError(f"X must be a scipy.sparse matrix, got {type(X).__name__}.")
    X = X if X.format == "csr" else sp.csr_matrix(X)
    n_tokens, n_features = X.shape
    weights = np.asarray(weights)
    if weights.dtype.kind not in "biuf":
        raise TypeError(f"weights must hold real numbers, got dtype {weights.dtype}.")
    if weights.ndim != 2 or weights.shape[0] != n_features or weights.shape[1] < 1:
        raise ValueError(f"weights must have shape ({n_features}, n_states) to match X, got "
                         f"{weights.shape}.")
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X must hold real numbers, got dtype {X.dtype}.")
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    if n_features > np.iinfo(np.int32).max:
        raise ValueError("X has more than 2**31 - 1 columns.")
    raw_indices = np.asarray(X.indices)
    if indptr.shape[0] != n_tokens + 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) \
            or indptr[-1] > min(raw_indices.shape[0], np.shape(X.data)[0]):
        raise ValueError("X is not a valid CSR matrix (its row pointers).")
    stored = int(indptr[-1])
    # (checked before the indices are narrowed to int32, which would wrap -2**32 + 5 to 5)
    if stored and (raw_indices[:stored].min() < 0 or raw_indices[:stored].max() >= n_features):
        raise ValueError("X is not a valid CSR matrix (a column index out of range).")
    indices = np.ascontiguousarray(raw_indices, dtype=np.int32)
    data = np.ascontiguousarray(X.data, dtype=np.float64)
    if check_finite and not (np.isfinite(weights).all() and np.isfinite(data).all()):
        raise ValueError("X and weights must not contain NaN or infinite values.")
    return indptr, indices, data, weights


def _product_rows(csr, dense, first, last, out):
    _chain.csr_product_rows(*csr, dense, first, last, out)
    return out[first:last]


def csr_product(csr, dense, out, n_jobs=None):
    """``out[:] = X @ dense`` for the CSR matrix ``csr = (indptr, indices, data)`` (int64,
    int32 and float64 arrays whose column indices the caller has checked against
    ``dense.shape[0]``), each row's stored entries summed in order as scipy's CSR product
    sums them (the same doubles), the rows split into ``n_jobs`` chunks of similar numbers
    of entries on threads (:func:`~._validation.run_chunks`); the result does not depend on
    ``n_jobs``. Returns ``out``."""
    n_threads = check_n_jobs(n_jobs)
    # (the rows as sequences of their entries)
    chunks = split_into_chunks(csr[0], n_threads)
    pieces = run_chunks(_product_rows, [(csr, dense, lo, hi, out) for lo, hi in chunks],
                        n_threads)
    for (lo, hi), piece in zip(chunks, pieces):
        if not np.shares_memory(piece, out):  # (a worker process's copy)
            out[lo:hi] = piece
    return out


def viterbi_sparse(X, weights, offsets, transition, start=None, end=None, n_jobs=None,
                   check_finite=True):
    """Highest-scoring labeling of every sequence from its token features (Viterbi).

    The same as ``viterbi(X @ weights, offsets, transition, start, end)``, to the last bit,
    in one compiled loop without the GIL that forms the unary scores of a block of
    sequences (each token's stored entries summed in order, as scipy's CSR product sums
    them, with the weight rows of the entries ahead prefetched: the product waits on
    memory) and decodes them, in a workspace of a few thousand tokens' scores. With several
    jobs the sequences are split into contiguous chunks of similar token counts, one per
    thread, each of at least ``THREAD_MIN_TOKENS`` tokens (see
    :func:`~._validation.run_chunks`); the result does not depend on ``n_jobs``. Exact while
    a labelling's score stays below ``1e307`` in magnitude.

    Parameters
    ----------
    X : scipy.sparse matrix of shape (n_tokens, n_features)
        Token features (read in CSR form).
    weights : array-like of shape (n_features, n_states)
        Per-state weights of every feature: the unary score of state ``s`` at token ``t``
        is ``X[t] @ weights[:, s]``.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries, as for :func:`viterbi`.
    transition : array-like of shape (n_states, n_states)
    start, end : array-like of shape (n_states,), default=None
        None means zeros.
    n_jobs : int, default=None
        Number of threads (None and 1: the calling thread; -1: all processors); a joblib
        backend other than threads set by the user (``parallel_config``) runs the chunks.
    check_finite : bool, default=True
        Whether to refuse NaN or infinite features and weights (a scan of both; callers
        whose inputs are known to be finite skip it).

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
        The argmax labeling; ties go to the lower state index.
    scores : ndarray of float64, shape (n_sequences,)
        Score of the returned labeling of each sequence.
    """
    indptr, indices, data, weights = _check_csr_product(X, weights, check_finite)
    n_tokens = indptr.shape[0] - 1
    offsets, transition, start, end = _check_chain_layout(
        offsets, n_tokens, weights.shape[1], transition, start, end)
    n_sequences = offsets.shape[0] - 1
    out = (np.zeros(n_tokens, dtype=np.int64), np.zeros(n_sequences, dtype=np.float64))
    chunks = _csr_chunks(offsets, check_n_jobs(n_jobs), weights.shape[1])
    pieces = run_chunks(
        _solve_viterbi_csr,
        [((indptr, indices, data), weights, offsets, transition, start, end, lo, hi, out)
         for lo, hi in chunks], check_n_jobs(n_jobs))
    if len(pieces) <= 1:  # (decoded into out in this process)
        return out
    return tuple(np.concatenate(outputs) for outputs in zip(*pieces))


def _token_loss_of(y, loss_weights, token_loss, n_states):
    """The validated ``(token_loss, loss_weights)`` of the loss-augmented decoders: the
    weighted Hamming loss of ``loss_weights`` (None: ones) against ``y``, or the given
    ``token_loss`` (``loss_weights`` then None)."""
    if token_loss is None:
        weights = _check_loss_weights(loss_weights, n_states)
        return hamming_token_loss(y, weights, n_states), weights
    if loss_weights is not None:
        raise ValueError("give loss_weights or token_loss, not both.")
    return _check_token_loss(token_loss, y.shape[0], n_states), None


def _solve_margin_csr(csr, weights, offsets, transition, start, end, token_loss, first,
                      last, out):
    """Margin-rescaled decoding of sequences ``first..last - 1`` into their places of
    ``out`` (shared by threads; a worker process gets a copy); return their labels, scores
    and unary scores."""
    labels, scores, unary = out
    _chain.margin_viterbi_csr_batch(*csr, weights, offsets, transition, start, end,
                                    token_loss, first, last, labels, scores, unary)
    lo, hi = offsets[first], offsets[last]
    return labels[lo:hi], scores[first:last], unary[lo:hi]


def loss_augmented_viterbi_sparse(X, weights, offsets, transition, start=None, end=None,
                                  y=None, loss_weights=None, n_jobs=None, *, token_loss=None,
                                  check_finite=True):
    """Margin-rescaled most violating labeling of every sequence from its token features.

    The same as ``loss_augmented_viterbi(X @ weights, offsets, transition, start, end, y,
    loss_weights, token_loss=token_loss)``, to the last bit, and the unary scores ``X @
    weights`` (the doubles of scipy's product), in one compiled loop without the GIL that
    forms each sequence's unary scores and decodes them while they are in cache (see
    :func:`viterbi_sparse`); the chunks of sequences (at least ``THREAD_MIN_TOKENS`` tokens
    each) run on ``n_jobs`` threads and the result does not depend on ``n_jobs``. The oracle
    of the n-slack cutting planes.

    Parameters
    ----------
    X : scipy.sparse matrix of shape (n_tokens, n_features)
        Token features (read in CSR form).
    weights : array-like of shape (n_features, n_states)
    offsets : array-like of int of shape (n_sequences + 1,)
    transition : array-like of shape (n_states, n_states)
    start, end : array-like of shape (n_states,), default=None
        None means zeros.
    y : array-like of int of shape (n_tokens,)
        True states, in ``[0, n_states)``.
    loss_weights : array-like of shape (n_states,), default=None
        The weighted Hamming loss, as for :func:`loss_augmented_viterbi`; None means ones.
    n_jobs : int, default=None
        Number of threads (None and 1: the calling thread; -1: all processors).
    token_loss : array-like of shape (n_tokens, n_states), default=None
        Any non-negative decomposable loss; not together with ``loss_weights``.
    check_finite : bool, default=True
        Whether to refuse NaN or infinite features and weights.

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
        The maximising labeling.
    losses : ndarray of float64, shape (n_sequences,)
        ``Delta(y, labels)`` per sequence.
    scores : ndarray of float64, shape (n_sequences,)
        ``score(labels)`` per sequence, without the loss term.
    unary : ndarray of float64, shape (n_tokens, n_states)
        ``X @ weights``.
    """
    csr, weights, offsets, transition, start, end, y, token_loss = _margin_csr_inputs(
        X, weights, offsets, transition, start, end, y, loss_weights, token_loss,
        check_finite)
    n_tokens, n_states = y.shape[0], weights.shape[1]
    out = (np.zeros(n_tokens, dtype=np.int64), np.zeros(offsets.shape[0] - 1),
           np.empty((n_tokens, n_states), dtype=np.float64))
    labels, scores, unary = _run_csr_ranges(
        _solve_margin_csr, (csr, weights, offsets, transition, start, end, token_loss),
        out, offsets, n_jobs)
    losses = _per_sequence_sum(token_loss[np.arange(n_tokens), labels], offsets)
    return labels, losses, scores, unary


def _margin_csr_inputs(X, weights, offsets, transition, start, end, y, loss_weights,
                       token_loss, check_finite):
    """The validated inputs of the margin-rescaled decoders from token features."""
    indptr, indices, data, weights = _check_csr_product(X, weights, check_finite)
    n_tokens, n_states = indptr.shape[0] - 1, weights.shape[1]
    offsets, transition, start, end = _check_chain_layout(
        offsets, n_tokens, n_states, transition, start, end)
    if y is None:
        raise ValueError("y (the true states) is required.")
    y = _check_labels(y, "y", n_tokens, n_states)
    token_loss, _ = _token_loss_of(y, loss_weights, token_loss, n_states)
    return (indptr, indices, data), weights, offsets, transition, start, end, y, token_loss


def _run_csr_ranges(solve, inputs, out, offsets, n_jobs):
    """``solve(*inputs, first, last, out)`` over the chunks of sequences on ``n_jobs``
    threads (each writes its range of the shared ``out``; a worker process returns its
    pieces, concatenated here in order); returns the filled outputs."""
    chunks = _csr_chunks(offsets, check_n_jobs(n_jobs), inputs[1].shape[1])
    pieces = run_chunks(solve, [(*inputs, lo, hi, out) for lo, hi in chunks],
                        check_n_jobs(n_jobs))
    return out if len(pieces) <= 1 else tuple(
        np.concatenate(outputs) for outputs in zip(*pieces))


def _solve_margin_hinge_csr(csr, weights, offsets, transition, start, end, token_loss, y,
                            first, last, out):
    """:func:`_solve_margin_csr` scoring the true labelling instead of keeping the unary
    scores; returns the range's labels, scores and true scores."""
    labels, scores, true_scores = out
    _chain.margin_hinge_csr_batch(*csr, weights, offsets, transition, start, end, token_loss,
                                  y, first, last, labels, scores, true_scores)
    lo, hi = offsets[first], offsets[last]
    return labels[lo:hi], scores[first:last], true_scores[first:last]


def loss_augmented_margins_sparse(X, weights, offsets, transition, start=None, end=None,
                                  y=None, loss_weights=None, n_jobs=None, *, token_loss=None,
                                  check_finite=True):
    """Margin-rescaled most violating labeling of every sequence from its token features,
    with its loss and margin: the hinge terms' ingredients, without the unary scores.

    The labels, losses and ``score(labels)`` of :func:`loss_augmented_viterbi_sparse` (the
    same bits), and ``score(y)`` summed in the same order; each sequence's unary scores are
    formed in a workspace and dropped after its decoding, so no token x state array is
    allocated or written. The oracle of the n-slack cutting planes and of their gap
    certificate. Parameters as for :func:`loss_augmented_viterbi_sparse`.

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
        The maximising labeling.
    losses : ndarray of float64, shape (n_sequences,)
        ``Delta(y, labels)`` per sequence.
    scores : ndarray of float64, shape (n_sequences,)
        ``score(labels)`` per sequence, without the loss term.
    true_scores : ndarray of float64, shape (n_sequences,)
        ``score(y)`` per sequence.
    """
    csr, weights, offsets, transition, start, end, y, token_loss = _margin_csr_inputs(
        X, weights, offsets, transition, start, end, y, loss_weights, token_loss,
        check_finite)
    n_sequences = offsets.shape[0] - 1
    out = (np.zeros(y.shape[0], dtype=np.int64), np.zeros(n_sequences),
           np.zeros(n_sequences))
    labels, scores, true_scores = _run_csr_ranges(
        _solve_margin_hinge_csr, (csr, weights, offsets, transition, start, end, token_loss,
                                  y), out, offsets, n_jobs)
    losses = _per_sequence_sum(token_loss[np.arange(y.shape[0]), labels], offsets)
    return labels, losses, scores, true_scores


def loss_augmented_viterbi(
    unary,
    offsets,
    transition,
    start,
    end,
    y,
    loss_weights=None,
    rescale="margin",
    n_jobs=None,
    *,
    token_loss=None,
):
    """Most violating labeling of every sequence under a token-decomposable loss.

    With ``rescale="margin"`` the labeling maximises ``Delta(y, ybar) + score(ybar)``; with
    ``rescale="slack"`` it maximises ``Delta(y, ybar) * (1 + score(ybar) - score(y))``
    (slack rescaling, Tsochantaridis et al. 2005, eq. (2)). That maximum is at least 0, the
    value of ``ybar = y``, which is returned whenever no labeling does better.

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Score of each state at each token.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries; every sequence has at least one token.
    transition : array-like of shape (n_states, n_states)
        ``transition[a, b]`` scores state ``a`` followed by state ``b``.
    start, end : array-like of shape (n_states,) or None
        Scores of the first and last token's state; None means zeros.
    y : array-like of int of shape (n_tokens,)
        True states, in ``[0, n_states)``.
    loss_weights : array-like of shape (n_states,), default=None
        The weighted Hamming loss ``Delta(y, ybar) = sum_t loss_weights[y_t] [ybar_t != y_t]``:
        non-negative cost of mislabeling a token, indexed by its true state; None means ones.
        Not allowed together with ``token_loss``.
    rescale : {"margin", "slack"}, default="margin"
        How the loss enters the objective.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.
    token_loss : array-like of shape (n_tokens, n_states), default=None
        Any non-negative decomposable loss, ``Delta(y, ybar) = sum_t token_loss[t, ybar_t]``.
        For slack rescaling the losses must be integer multiples of a common unit
        (rationals with denominators up to 1000) and no sequence may reach more than
        10,000 units of loss, since the loss is an extra dimension of the dynamic programme.

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
        The maximising labeling.
    losses : ndarray of float64, shape (n_sequences,)
        ``Delta(y, labels)`` per sequence.
    scores : ndarray of float64, shape (n_sequences,)
        ``score(labels)`` per sequence, without the loss term.
    """
    if not isinstance(rescale, str) or rescale not in ("margin", "slack"):
        raise ValueError(f"rescale must be 'margin' or 'slack', got {rescale!r}.")
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    n_tokens, n_states = unary.shape
    y = _check_labels(y, "y", n_tokens, n_states)
    token_loss, weights = _token_loss_of(y, loss_weights, token_loss, n_states)
    if rescale == "margin":
        labels, scores = _map_chunks(_solve_margin, unary, offsets, token_loss,
                                     (transition, start, end), n_jobs)
    else:
        if weights is None:
            units, unit = _loss_units(token_loss)
        else:  # the unit of the Hamming weights (all of them, used or not)
            weight_units, unit = _loss_units(weights)
            units = hamming_token_loss(y, weight_units, n_states).astype(np.int64)
        total_units = _per_sequence_sum(units.max(axis=1).astype(np.float64), offsets)
        if total_units.shape[0] and total_units.max() > MAX_LOSS_UNITS:
            worst = int(np.argmax(total_units))
            raise ValueError(
                f"slack rescaling: sequence {worst} can accumulate "
                f"{int(total_units[worst])} loss units of {unit:g}, more than "
                f"{MAX_LOSS_UNITS}; use shorter sequences or coarser loss weights."
            )
        labels, scores = _map_chunks(_solve_slack, unary, offsets, (y, units),
                                     (transition, start, end, unit), n_jobs)
    losses = _per_sequence_sum(token_loss[np.arange(n_tokens), labels], offsets)
    return labels, losses, scores


def forward_backward(unary, offsets, transition, start=None, end=None, n_jobs=None,
                     edges="per_sequence"):
    """Marginals and log-partition of the chain distribution ``p(ybar) ∝ exp(score(ybar))``.

    The recursions run in the log domain with rescaled sums of exponentials, so long
    sequences and large potentials neither overflow nor underflow.

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Score of each state at each token.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries; every sequence has at least one token.
    transition : array-like of shape (n_states, n_states)
        ``transition[a, b]`` scores state ``a`` followed by state ``b``.
    start, end : array-like of shape (n_states,), default=None
        Scores of the first and last token's state; None means zeros.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.
    edges : {"per_sequence", "sum", "none"}, default="per_sequence"
        The sums of pairwise marginals to return: one (n_states, n_states) block per
        sequence, one block summed over the batch, or none (node marginals need no
        ``n_sequences x n_states^2`` memory).

    Returns
    -------
    node_marginals : ndarray of float64, shape (n_tokens, n_states)
        ``p(ybar_t = s)``.
    edge_marginal_sums : ndarray of float64, shape (n_blocks, n_states, n_states)
        ``sum_t p(ybar_t = a, ybar_{t+1} = b)`` over the consecutive pairs of each sequence
        (zeros for a sequence of one token), or over the batch (one block), or no block.
    log_partition : ndarray of float64, shape (n_sequences,)
        ``log sum_ybar exp(score(ybar))``.
    """
    if edges not in ("per_sequence", "sum", "none"):
        raise ValueError(f"edges must be 'per_sequence', 'sum' or 'none', got {edges!r}.")
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    node, edge_sums, log_z = _map_chunks(
        _solve_forward_backward, unary, offsets, None, (transition, start, end, edges), n_jobs,
        reduction=edges == "sum")
    if edges == "sum" and edge_sums.shape[0] > 1:  # one block per chunk of sequences
        edge_sums = edge_sums.sum(axis=0, keepdims=True)
    return node, edge_sums, log_z


_INT32_MAX = 2**31 - 1


def _solve_topk(unary, offsets, y, transition, start, end, k):
    n_sequences = offsets.shape[0] - 1
    labels = np.full((unary.shape[0], k), -1, dtype=np.int64)
    scores = np.full((n_sequences, k), -np.inf, dtype=np.float64)
    counts = np.zeros(n_sequences, dtype=np.int64)
    if n_sequences:
        _topk.topk_viterbi_batch(
            unary, offsets, transition, start, end, k, labels, scores, counts
        )
    return labels, scores, counts


def _solve_log_partition(unary, offsets, y, transition, start, end):
    log_z = np.zeros(offsets.shape[0] - 1, dtype=np.float64)
    if log_z.shape[0]:
        _topk.log_partition_batch(unary, offsets, transition, start, end, log_z)
    return (log_z,)


def topk_viterbi(unary, offsets, transition, start=None, end=None, k=5, n_jobs=None):
    """The ``k`` highest-scoring labelings of every sequence in a batch (k-best Viterbi).

    Labelings are ranked by decreasing score; labelings of equal score are ranked by their
    labels read from the last token back to the first, smaller first. This is the tie rule of
    :func:`viterbi`, whose labeling is therefore always the first one. The ranking is exact,
    ties included, for the scores as the recursion computes them (sums in token order).

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Score of each state at each token.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries: ``offsets[0] == 0``, ``offsets[-1] == n_tokens`` and every
        sequence has at least one token.
    transition : array-like of shape (n_states, n_states)
        ``transition[a, b]`` scores state ``a`` followed by state ``b``.
    start, end : array-like of shape (n_states,), default=None
        Scores added for the state of the first and of the last token; None means zeros.
    k : int, default=5
        Number of labelings per sequence, at least 1; ``k * n_states`` must be below 2**31
        (as must the longest sequence's length times ``n_states``).
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens, k)
        Column ``j`` holds the labeling of rank ``j`` of every sequence (rows
        ``offsets[i]:offsets[i + 1]`` for sequence ``i``). A sequence of length ``L`` has
        ``n_states ** L`` labelings: the columns past that number hold -1.
    scores : ndarray of float64, shape (n_sequences, k)
        Score of each returned labeling, non-increasing along a row; -inf past the number of
        labelings.
    counts : ndarray of int64, shape (n_sequences,)
        Number of labelings returned per sequence, ``min(k, n_states ** length)``.
    """
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    k = check_k(k)
    n_states = unary.shape[1]
    if k * n_states > _INT32_MAX:
        raise ValueError(
            f"k * n_states must be below 2**31 (back-pointers are 32-bit), got "
            f"{k} * {n_states}."
        )
    longest = int(np.diff(offsets).max()) if offsets.shape[0] > 1 else 0
    if (longest + 1) * n_states > _INT32_MAX:
        raise ValueError(
            f"the longest sequence times n_states must be below 2**31 (nodes are indexed "
            f"by 32-bit integers), got {longest} * {n_states}."
        )
    return _map_chunks(
        _solve_topk, unary, offsets, None, (transition, start, end, k), n_jobs
    )


def log_partition(unary, offsets, transition, start=None, end=None, n_jobs=None):
    """Log-partition ``log sum_ybar exp(score(ybar))`` of every sequence in a batch.

    The forward recursion of :func:`forward_backward` alone (same log-domain rescaling), at
    a fraction of its cost when the marginals are not needed.

    Parameters
    ----------
    unary : array-like of shape (n_tokens, n_states)
        Score of each state at each token.
    offsets : array-like of int of shape (n_sequences + 1,)
        Sequence boundaries; every sequence has at least one token.
    transition : array-like of shape (n_states, n_states)
        ``transition[a, b]`` scores state ``a`` followed by state ``b``.
    start, end : array-like of shape (n_states,), default=None
        Scores of the first and last token's state; None means zeros.
    n_jobs : int, default=None
        Number of joblib workers, threads unless a joblib backend is configured; None and 1
        run in the calling thread, -1 uses all processors. The result does not depend on it.

    Returns
    -------
    log_partition : ndarray of float64, shape (n_sequences,)
    """
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    return _map_chunks(
        _solve_log_partition, unary, offsets, None, (transition, start, end), n_jobs
    )[0]
