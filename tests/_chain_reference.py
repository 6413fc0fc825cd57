"""NumPy references for the chain inference kernels (tests and benchmarks).

Three kinds of references live here:

* exhaustive enumeration of all ``n_states ** length`` labelings of one sequence, the ground
  truth for tests on tiny chains;
* :func:`sequence_scores`, the scores of given labelings of a whole batch;
* dynamic programmes vectorised across the sequences of a batch, which visit all sequences
  in lock-step by position. Sequences are sorted by decreasing length, so the sequences still
  running at position ``t`` form a prefix of the sorted batch and shorter sequences simply
  drop out (implicit padding). They are also the NumPy baseline of
  ``benchmarks/bench_oracles.py``, which imports this module by path.

The potentials follow :mod:`sklstruct._inference.chain`: stacked ``unary`` scores, ``offsets``,
``transition[a, b]`` for state ``a`` followed by ``b``, and ``start``/``end`` vectors.
"""

import itertools

import numpy as np
from scipy.special import logsumexp

from sklstruct._inference.chain import _check_chain, _check_labels, _per_sequence_sum


def all_labelings(length, n_states):
    """Every labeling of a sequence, in lexicographic order.

    Parameters
    ----------
    length : int
        Number of tokens.
    n_states : int
        Number of states.

    Returns
    -------
    labelings : ndarray of int64, shape (n_states ** length, length)
    """
    return np.array(
        list(itertools.product(range(n_states), repeat=length)), dtype=np.int64
    ).reshape(-1, length)


def labeling_scores(unary, transition, start, end, labelings):
    """Scores of labelings of one sequence.

    Parameters
    ----------
    unary : ndarray of shape (length, n_states)
        Token scores of the sequence.
    transition : ndarray of shape (n_states, n_states)
        Transition scores.
    start, end : ndarray of shape (n_states,)
        First- and last-state scores.
    labelings : ndarray of int of shape (n_labelings, length)
        Labelings to score.

    Returns
    -------
    scores : ndarray of shape (n_labelings,)
    """
    labelings = np.asarray(labelings)
    positions = np.arange(labelings.shape[1])
    scores = unary[positions, labelings].sum(axis=1)
    scores += transition[labelings[:, :-1], labelings[:, 1:]].sum(axis=1)
    return scores + start[labelings[:, 0]] + end[labelings[:, -1]]


def hamming_losses(y, labelings, loss_weights):
    """Weighted Hamming losses ``sum_t loss_weights[y_t] * [ybar_t != y_t]`` of labelings.

    Parameters
    ----------
    y : ndarray of int of shape (length,)
        True labels.
    labelings : ndarray of int of shape (n_labelings, length)
        Candidate labelings.
    loss_weights : ndarray of shape (n_states,)
        Cost of mislabeling a token, indexed by its true state.

    Returns
    -------
    losses : ndarray of shape (n_labelings,)
    """
    return ((labelings != y) * loss_weights[y]).sum(axis=1)


def loss_augmented_objective(scores, losses, score_y, rescale):
    """Value maximised by loss-augmented decoding for given scores and losses.

    Parameters
    ----------
    scores, losses : ndarray
        ``score(ybar)`` and ``Delta(y, ybar)`` of candidate labelings.
    score_y : float
        Score of the true labeling.
    rescale : {"margin", "slack"}
        ``losses + scores`` or ``losses * (1 + scores - score_y)``.

    Returns
    -------
    objective : ndarray
    """
    if rescale == "margin":
        return losses + scores
    return losses * (1.0 + scores - score_y)


def brute_force_viterbi(unary, transition, start, end):
    """Best labeling of one sequence and its score, by enumeration.

    Returns
    -------
    labels : ndarray of int64, shape (length,)
        The lexicographically first maximiser.
    score : float
    """
    labelings = all_labelings(unary.shape[0], unary.shape[1])
    scores = labeling_scores(unary, transition, start, end, labelings)
    best = int(np.argmax(scores))
    return labelings[best], float(scores[best])


def brute_force_loss_augmented(unary, transition, start, end, y, loss_weights, rescale):
    """Maximum of the loss-augmented objective over all labelings of one sequence.

    Returns
    -------
    value : float
        ``max_ybar Delta(y, ybar) + score(ybar)`` (margin) or
        ``max_ybar Delta(y, ybar) * (1 + score(ybar) - score(y))`` (slack).
    """
    labelings = all_labelings(unary.shape[0], unary.shape[1])
    scores = labeling_scores(unary, transition, start, end, labelings)
    losses = hamming_losses(y, labelings, loss_weights)
    score_y = labeling_scores(unary, transition, start, end, y[None, :])[0]
    return float(loss_augmented_objective(scores, losses, score_y, rescale).max())


def brute_force_marginals(unary, transition, start, end):
    """Node marginals, summed edge marginals and log-partition of one sequence, by enumeration.

    Returns
    -------
    node_marginals : ndarray of shape (length, n_states)
    edge_marginal_sum : ndarray of shape (n_states, n_states)
    log_partition : float
    """
    length, n_states = unary.shape
    labelings = all_labelings(length, n_states)
    scores = labeling_scores(unary, transition, start, end, labelings)
    log_partition = logsumexp(scores)
    probabilities = np.exp(scores - log_partition)
    node = np.zeros((length, n_states))
    edge = np.zeros((n_states, n_states))
    for t in range(length):
        np.add.at(node[t], labelings[:, t], probabilities)
    for t in range(length - 1):
        np.add.at(edge, (labelings[:, t], labelings[:, t + 1]), probabilities)
    return node, edge, float(log_partition)


def sequence_scores(unary, offsets, transition, start, end, labels):
    """Score of given labelings of every sequence in a batch.

    Validates its inputs like the compiled kernels' wrappers, then computes
    ``sum_t unary[t, y_t] + sum_t transition[y_t, y_{t+1}] + start[y_0] + end[y_last]`` per
    sequence with numpy.
    """
    unary, offsets, transition, start, end = _check_chain(
        unary, offsets, transition, start, end
    )
    n_tokens, n_states = unary.shape
    labels = _check_labels(labels, "labels", n_tokens, n_states)
    per_token = unary[np.arange(n_tokens), labels]
    # the transition into token t + 1, unless t + 1 starts a new sequence
    into_next = np.zeros(n_tokens, dtype=np.float64)
    into_next[:-1] = transition[labels[:-1], labels[1:]]
    into_next[offsets[1:] - 1] = 0.0
    scores = _per_sequence_sum(per_token + into_next, offsets)
    scores += start[labels[offsets[:-1]]] + end[labels[offsets[1:] - 1]]
    return scores


def _lockstep_layout(offsets):
    """Sort sequences by decreasing length and list the running ones at each position."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")
    starts = offsets[:-1][order]
    sorted_lengths = lengths[order]
    max_length = int(sorted_lengths[0]) if lengths.shape[0] else 0
    # n_active[t]: number of sequences with more than t tokens
    n_active = np.searchsorted(-sorted_lengths, -np.arange(max_length), side="left")
    return order, starts, sorted_lengths, n_active


def viterbi_lockstep(unary, offsets, transition, start, end):
    """Viterbi decoding of a batch, vectorised across sequences.

    Parameters
    ----------
    unary : ndarray of shape (n_tokens, n_states)
    offsets : ndarray of int of shape (n_sequences + 1,)
    transition : ndarray of shape (n_states, n_states)
    start, end : ndarray of shape (n_states,)

    Returns
    -------
    labels : ndarray of int64, shape (n_tokens,)
    scores : ndarray of shape (n_sequences,)
    """
    order, starts, lengths, n_active = _lockstep_layout(offsets)
    n_sequences = order.shape[0]
    delta = unary[starts] + start
    backpointers = [None]
    for t in range(1, n_active.shape[0]):
        n = n_active[t]
        candidates = delta[:n, :, None] + transition
        backpointers.append(np.argmax(candidates, axis=1))
        delta[:n] = np.max(candidates, axis=1) + unary[starts[:n] + t]
    final = delta + end
    state = np.argmax(final, axis=1)
    sorted_scores = final[np.arange(n_sequences), state]
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    for t in range(n_active.shape[0] - 1, -1, -1):
        n = n_active[t]
        if t + 1 < n_active.shape[0]:
            n_next = n_active[t + 1]
            state[:n_next] = backpointers[t + 1][np.arange(n_next), state[:n_next]]
        labels[starts[:n] + t] = state[:n]
    scores = np.empty(n_sequences)
    scores[order] = sorted_scores
    return labels, scores


def forward_backward_lockstep(unary, offsets, transition, start, end):
    """Log-domain forward-backward on a batch, vectorised across sequences.

    Parameters
    ----------
    unary : ndarray of shape (n_tokens, n_states)
    offsets : ndarray of int of shape (n_sequences + 1,)
    transition : ndarray of shape (n_states, n_states)
    start, end : ndarray of shape (n_states,)

    Returns
    -------
    node_marginals : ndarray of shape (n_tokens, n_states)
    edge_marginal_sums : ndarray of shape (n_sequences, n_states, n_states)
    log_partition : ndarray of shape (n_sequences,)
    """
    order, starts, lengths, n_active = _lockstep_layout(offsets)
    n_sequences, n_states = order.shape[0], unary.shape[1]
    max_length = n_active.shape[0]
    alpha = np.empty_like(unary)
    alpha[starts] = unary[starts] + start
    for t in range(1, max_length):
        n = n_active[t]
        previous = alpha[starts[:n] + t - 1]
        alpha[starts[:n] + t] = unary[starts[:n] + t] + logsumexp(
            previous[:, :, None] + transition, axis=1
        )
    last = starts + lengths - 1
    sorted_log_partition = logsumexp(alpha[last] + end, axis=1)
    beta = np.empty_like(unary)
    beta[last] = end
    for t in range(max_length - 2, -1, -1):
        n = n_active[t + 1]
        following = unary[starts[:n] + t + 1] + beta[starts[:n] + t + 1]
        beta[starts[:n] + t] = logsumexp(transition + following[:, None, :], axis=2)
    sequence_of_token = np.repeat(np.arange(n_sequences), np.diff(offsets))
    rank = np.empty(n_sequences, dtype=np.intp)
    rank[order] = np.arange(n_sequences)
    node = np.exp(alpha + beta - sorted_log_partition[rank[sequence_of_token]][:, None])
    sorted_edges = np.zeros((n_sequences, n_states, n_states))
    for t in range(max_length - 1):
        n = n_active[t + 1]
        following = unary[starts[:n] + t + 1] + beta[starts[:n] + t + 1]
        sorted_edges[:n] += np.exp(
            alpha[starts[:n] + t][:, :, None]
            + transition
            + following[:, None, :]
            - sorted_log_partition[:n, None, None]
        )
    edges = np.empty_like(sorted_edges)
    edges[order] = sorted_edges
    log_partition = np.empty(n_sequences)
    log_partition[order] = sorted_log_partition
    return node, edges, log_partition
