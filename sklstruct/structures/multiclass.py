"""Multiclass classification as a structure (Crammer-Singer joint feature map)."""

import numpy as np
from scipy.special import logsumexp, softmax

from ._base import BaseStructure, check_rescale


class MultiClass(BaseStructure):
    """Multiclass structure: one label per sample, ``Psi(x, y) = e_y (x) x``.

    With this structure the objective of DESIGN section 1 is the Crammer-Singer multiclass SVM
    without intercept (append a constant feature for a regularised bias). Binary problems are
    the two-class case. Every "sequence" must be a single sample.

    Parameters
    ----------
    class_weight : dict, 'balanced', array-like or None, default=None
        Loss weights per class: misclassifying a sample of class ``c`` costs
        ``class_weight[c]`` in the loss ``Delta`` (not a re-weighting of samples).
    """

    def __init__(self, *, class_weight=None):
        self.class_weight = class_weight

    def _check_single(self, batch):
        if batch.n_tokens != batch.n_sequences:
            raise ValueError(
                "MultiClass needs exactly one sample per sequence; use ChainStructure for "
                "sequences."
            )

    def decode(self, batch, w, n_jobs=None, unary=None):
        """Highest-scoring class of every sample."""
        self._check_single(batch)
        if unary is None:
            unary = self.unary_potentials(batch, w)
        return np.argmax(unary, axis=1)

    def loss_augmented_decode(self, batch, w, Y, rescale="margin", n_jobs=None, unary=None):
        """Most violating label under margin or slack rescaling.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        losses : ndarray of shape (n_samples,)
            ``Delta(y_i, ybar_i)``.
        scores : ndarray of shape (n_samples,)
            ``w . Psi(x_i, ybar_i)`` (without the loss).
        """
        check_rescale(rescale)
        self._check_single(batch)
        if unary is None:
            unary = self.unary_potentials(batch, w)
        rows = np.arange(Y.shape[0])
        cost = np.repeat(self.loss_weights_[Y][:, None], self.n_states_, axis=1)
        cost[rows, Y] = 0.0
        if rescale == "margin":
            value = unary + cost
        else:
            value = cost * (1.0 + unary - unary[rows, Y][:, None])
            value[rows, Y] = 0.0
        labels = np.argmax(value, axis=1)
        if rescale == "slack":
            labels = np.where(value[rows, labels] > 0, labels, Y)
        return labels, cost[rows, labels], unary[rows, labels]

    def marginals(self, batch, w, n_jobs=None, unary=None):
        """Class probabilities ``softmax(X W^T)`` and log-partition per sample."""
        self._check_single(batch)
        if unary is None:
            unary = self.unary_potentials(batch, w)
        return softmax(unary, axis=1), np.zeros((batch.n_sequences, 0)), logsumexp(unary, axis=1)
