"""Multiclass classification as a structure (Crammer-Singer joint feature map)."""

import numpy as np
from scipy.special import logsumexp, softmax

from .._inference._kernels import ChainKernels
from ._base import BaseStructure, check_rescale
from ._moments import uniform_covariance_operator


class MultiClass(BaseStructure):
    """Multiclass structure: one label per sample, ``Psi(x, y) = e_y (x) x``.

    With this structure the shared objective is the Crammer-Singer multiclass SVM without
    intercept (append a constant feature for a regularised bias). Binary problems are the
    two-class case. Every "sequence" must be a single sample; there is no pairwise part.
    Decoding is the argmax of the class scores, loss-augmented decoding that of the
    loss-augmented scores, marginals are the softmax; the compiled per-example passes see it
    as a chain of one token without pairwise parts.

    Parameters
    ----------
    class_weight : dict, 'balanced', array-like or None, default=None
        Loss weights per class: misclassifying a sample of class ``c`` costs
        ``class_weight[c]`` in the loss ``Delta`` (not a re-weighting of samples). A dict's
        labels that the training data lack are ignored if it weighs every label the data
        have, else a ``ValueError``, as in scikit-learn.

    Attributes
    ----------
    n_features_ : int
        The number of token features, set by :meth:`bind` (a fit binds a copy of the
        structure to its data: the estimator's ``structure_``).
    n_states_ : int
        The number of states (classes), set by :meth:`bind`.
    loss_weights_ : ndarray of shape (n_states_,)
        The per-state weights of the Hamming loss (from ``class_weight``; ones without),
        set by :meth:`bind`.
    """

    one_token_per_example = True

    def __init__(self, *, class_weight=None):
        self.class_weight = class_weight

    def _check_single(self, batch):
        if batch.n_tokens != batch.n_sequences:
            raise ValueError(
                "MultiClass needs exactly one sample per sequence; use ChainStructure for "
                "sequences."
            )

    def decode(self, batch, unary, pairwise, n_jobs=None):
        self._check_single(batch)
        return np.argmax(unary, axis=1)

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        self._check_single(batch)
        Y = self.check_labels(batch, Y)
        rows = np.arange(Y.shape[0])
        cost = self.token_loss(Y) if token_loss is None else token_loss
        if rescale == "margin":
            value = unary + cost
        else:
            value = cost * (1.0 + unary - unary[rows, Y][:, None])
            value[rows, Y] = 0.0
        labels = np.argmax(value, axis=1)
        if rescale == "slack":
            labels = np.where(value[rows, labels] > 0, labels, Y)
        return labels, cost[rows, labels], unary[rows, labels]

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        self._check_single(batch)
        return softmax(unary, axis=1), np.zeros((batch.n_sequences, 0)), logsumexp(unary, axis=1)

    def as_chain(self, batch, pairwise):
        self._check_single(batch)
        return np.zeros((self.n_states_, self.n_states_)), None, None

    def example_kernels(self, batch):
        self._check_single(batch)
        return ChainKernels(batch.offsets, self.n_states_, False, False)

    def uniform_covariance_operator(self, batch, weights):
        """``v -> sum_i weights_i Cov_i(Psi) v`` under uniform labels.

        Parameters
        ----------
        batch : SequenceBatch
        weights : ndarray of shape (n_sequences,)

        Returns
        -------
        operator : scipy.sparse.linalg.LinearOperator
        """
        return uniform_covariance_operator(self, batch, weights, False, False)
