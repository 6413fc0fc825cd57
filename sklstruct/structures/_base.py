"""The oracle interface every structure provides (DESIGN section 2).

A structure owns the joint feature map, the loss and the inference oracles; it knows nothing
about optimisation. All structures here share one layout of the joint feature vector::

    w = [ W^T.ravel()  (n_features x n_states, feature-major: the weights of feature j for all
                        states are contiguous),
          theta        (n_pairwise parameters: transitions, start/end biases, ...) ]

so that ``Psi(x, y) = [ X^T onehot(y), pairwise_statistics(y) ]``. The unary part of any
(expected) joint feature is therefore one matrix product ``X^T M`` with ``M`` a token x state
matrix (one-hot labels or marginals), which is what lets the learners keep sufficient statistics
instead of parameter-sized vectors. The feature-major layout makes ``X W^T`` a product with a
contiguous (n_features, n_states) block and lets compiled code update the weights of a token's
features in place.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.extmath import safe_sparse_dot


class BaseStructure(BaseEstimator):
    """Base class of structures: configuration in ``__init__``, dimensions bound by ``bind``."""

    def bind(self, n_features, n_states, classes=None, y=None):
        """Return a copy of this structure bound to the data dimensions.

        Parameters
        ----------
        n_features : int
        n_states : int
        classes : ndarray of shape (n_states,), default=None
            The label values (used to resolve a ``class_weight`` dict).
        y : ndarray of shape (n_tokens,), default=None
            Encoded training labels (used by ``class_weight="balanced"``).
        """
        bound = self.__class__(**self.get_params(deep=False))
        bound.n_features_ = int(n_features)
        bound.n_states_ = int(n_states)
        bound.loss_weights_ = _resolve_class_weight(
            getattr(self, "class_weight", None), n_states, classes, y
        )
        return bound

    # ----------------------------------------------------------------- parameter layout
    @property
    def n_pairwise_(self):
        return 0

    @property
    def size_joint_feature_(self):
        return self.n_states_ * self.n_features_ + self.n_pairwise_

    def split_weights(self, w):
        """Views ``(W^T, theta)`` of a flat weight vector: unary (d, S) and pairwise parts."""
        n_unary = self.n_states_ * self.n_features_
        return w[:n_unary].reshape(self.n_features_, self.n_states_), w[n_unary:]

    # ----------------------------------------------------------------- features
    def unary_potentials(self, batch, w):
        """Token x state scores ``X W^T``, shape (n_tokens, n_states)."""
        WT, _ = self.split_weights(w)
        return np.ascontiguousarray(safe_sparse_dot(batch.X, WT, dense_output=True))

    def unary_features(self, batch, token_state_weights):
        """``X^T M`` of shape (n_features, n_states) for a token x state matrix ``M``.

        With one-hot labels this is the unary part of the summed joint feature (in the layout
        of the weight vector), with marginals it is its expectation.
        """
        M = token_state_weights
        if sp.issparse(M):
            M = M.toarray()
        return np.ascontiguousarray(safe_sparse_dot(batch.X.T, M, dense_output=True))

    def onehot(self, labels):
        """Dense one-hot token x state matrix of ``labels``."""
        M = np.zeros((labels.shape[0], self.n_states_))
        M[np.arange(labels.shape[0]), labels] = 1.0
        return M

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        """Pairwise part of ``sum_i weights_i Psi(x_i, y_i)``, shape (n_pairwise,).

        With ``per_sequence=True``: the part of every ``Psi(x_i, y_i)``, shape
        (n_sequences, n_pairwise).
        """
        return np.zeros((batch.n_sequences, 0)) if per_sequence else np.zeros(0)

    def pairwise_scores(self, batch, Y, theta):
        """Per-sequence pairwise part of the score ``theta . Psi(x_i, y_i)``."""
        return np.zeros(batch.n_sequences)

    def joint_feature(self, batch, Y):
        """Summed joint feature ``sum_i Psi(x_i, y_i)`` over the batch, shape (size,)."""
        unary = self.unary_features(batch, self.onehot(Y))
        return np.concatenate([unary.ravel(), self.pairwise_statistics(batch, Y)])

    def expected_joint_feature(self, batch, node_marginals, pairwise_marginals):
        """Summed expected joint feature from node and per-sequence pairwise marginals."""
        unary = self.unary_features(batch, node_marginals)
        return np.concatenate([unary.ravel(), np.asarray(pairwise_marginals).sum(axis=0)])

    # ----------------------------------------------------------------- loss
    def loss(self, batch, Y_true, Y_pred):
        """Per-sequence weighted Hamming loss ``sum_t c[y_t] [y_t != ybar_t]``."""
        mismatch = (Y_true != Y_pred) * self.loss_weights_[Y_true]
        return np.add.reduceat(mismatch, batch.offsets[:-1]) if mismatch.size else \
            np.zeros(batch.n_sequences)

    def score_labels(self, batch, w, Y, unary=None):
        """Per-sequence model score ``w . Psi(x_i, y_i)``."""
        if unary is None:
            unary = self.unary_potentials(batch, w)
        token = unary[np.arange(Y.shape[0]), Y]
        _, theta = self.split_weights(w)
        return np.add.reduceat(token, batch.offsets[:-1]) + self.pairwise_scores(batch, Y, theta)


def _resolve_class_weight(class_weight, n_states, classes, y):
    """Per-state loss weights from a ``class_weight`` specification."""
    if class_weight is None:
        return np.ones(n_states)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(
                f"class_weight must be None, 'balanced', a dict or an array; got {class_weight!r}."
            )
        if y is None:
            return np.ones(n_states)
        counts = np.bincount(y, minlength=n_states).astype(np.float64)
        weights = np.ones(n_states)
        seen = counts > 0
        weights[seen] = counts.sum() / (seen.sum() * counts[seen])
        return weights
    if isinstance(class_weight, dict):
        weights = np.ones(n_states)
        if classes is None:
            raise ValueError("A class_weight dict needs the class labels.")
        index = {c: i for i, c in enumerate(classes)}
        for label, value in class_weight.items():
            if label not in index:
                raise ValueError(f"class_weight has label {label!r}, which is not in the data.")
            weights[index[label]] = value
    else:
        weights = np.asarray(class_weight, dtype=np.float64)
        if weights.shape != (n_states,):
            raise ValueError(
                f"class_weight array must have one weight per class ({n_states}), "
                f"got shape {weights.shape}."
            )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("class_weight values must be finite and non-negative.")
    return weights.astype(np.float64)


def check_rescale(rescale):
    if rescale not in ("margin", "slack"):
        raise ValueError(f"rescale must be 'margin' or 'slack', got {rescale!r}.")
