"""The per-example cache of recent most-violating labelings (seed 002, section 4)."""

import numpy as np


class LabelCache:
    """The ``size`` most recent loss-augmented labelings of every example.

    Every oracle call labels the whole batch, so one ring buffer of whole-batch labelings holds,
    for each example, its ``size`` most recent labelings.
    """

    def __init__(self, n_tokens, size):
        self.labels = np.empty((size, n_tokens), dtype=np.intp)
        self.filled = 0
        self._next = 0

    def insert(self, Ybar):
        if self.labels.shape[0] == 0:
            return
        self.labels[self._next] = Ybar
        self._next = (self._next + 1) % self.labels.shape[0]
        self.filled = min(self.filled + 1, self.labels.shape[0])

    def most_violating(self, structure, batch, Y, w, unary, rescale):
        """Per example, the cached labeling (or ``y`` itself) with the largest hinge term.

        Returns ``(labels, losses, scores)`` like ``loss_augmented_decode``.
        """
        true_scores = structure.score_labels(batch, w, Y, unary=unary)
        best_value = np.zeros(batch.n_sequences)
        best_slot = np.full(batch.n_sequences, -1)
        best_loss = np.zeros(batch.n_sequences)
        best_score = true_scores.copy()
        for slot in range(self.filled):
            candidate = self.labels[slot]
            losses = structure.loss(batch, Y, candidate)
            scores = structure.score_labels(batch, w, candidate, unary=unary)
            if rescale == "margin":
                value = losses + scores - true_scores
            else:
                value = losses * (1.0 + scores - true_scores)
            better = value > best_value
            best_value[better] = value[better]
            best_slot[better] = slot
            best_loss[better] = losses[better]
            best_score[better] = scores[better]
        token_slot = best_slot[batch.sequence_index]
        labels = Y.copy()
        cached = token_slot >= 0
        labels[cached] = self.labels[token_slot[cached], np.flatnonzero(cached)]
        return labels, best_loss, best_score
