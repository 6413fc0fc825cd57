"""Scores of given labellings of a batch of chains (a reference for the kernel tests)."""

import numpy as np

from sklstruct._inference.chain import _check_chain, _check_labels, _per_sequence_sum


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
