"""The per-example cache of recent most-violating labellings (Joachims et al. 2009, section 4)."""

import numpy as np


class LabelCache:
    """The ``size`` most recent loss-augmented labellings of every example.

    Every oracle call labels the whole batch, so one ring buffer of whole-batch labellings holds,
    for each example, its ``size`` most recent labellings.
    """

    def __init__(self, n_tokens, n_sequences, size):
        self.labels = np.empty((size, n_tokens), dtype=np.intp)
        self.losses = np.empty((size, n_sequences))
        self.filled = 0
        self._next = 0

    def insert(self, Ybar, losses):
        """Keep a labelling of every example and its per-example losses."""
        if self.labels.shape[0] == 0:
            return
        self.labels[self._next] = Ybar
        self.losses[self._next] = losses
        self._next = (self._next + 1) % self.labels.shape[0]
        self.filled = min(self.filled + 1, self.labels.shape[0])

    def most_violating(self, structure, batch, Y, unary, pairwise, rescale):
        """Per example, the cached labelling (or ``y`` itself) with the largest hinge term.

        Returns ``(labels, losses, scores)`` like ``loss_augmented_decode``.
        """
        true_scores = structure.score(batch, unary, pairwise, Y)
        best_value = np.zeros(batch.n_sequences)
        best_slot = np.full(batch.n_sequences, -1)
        best_loss = np.zeros(batch.n_sequences)
        best_score = true_scores.copy()
        for slot in range(self.filled):
            candidate, losses = self.labels[slot], self.losses[slot]
            scores = structure.score(batch, unary, pairwise, candidate)
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
