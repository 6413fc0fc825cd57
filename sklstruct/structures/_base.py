"""The oracle interface every structure provides (see the page "Writing a structure").

A structure owns the joint feature map ``Psi``, the loss ``Delta`` and the inference oracles;
it knows nothing about optimisation. Learners and their compiled passes reach the data only
through this interface.

**Weight layout.** Every structure splits its weights into a unary block and a pairwise block::

    w = [ W^T.ravel()  (n_features x n_states, feature-major: the weights of feature j for all
                        states are contiguous),
          theta        (n_pairwise parameters: transitions, start/end biases, edge weights...) ]

and ``Psi(x, y) = [ X^T onehot(y), pairwise_statistics(y) ]``. The unary part of any (expected)
joint feature is therefore one matrix product ``X^T M`` with ``M`` a token x state matrix
(one-hot labels or marginals), which lets the learners keep sufficient statistics instead of
parameter-sized vectors; the feature-major layout makes ``X W^T`` a product with a contiguous
(n_features, n_states) block and lets compiled code update the weights of a token's features
in place. A structure describes only its pairwise block: its size ``n_pairwise_``, the
statistics of a labelling, and the oracles on potentials.

**Potentials.** Oracles take potentials, not weight vectors: ``unary`` (n_tokens, n_states)
token x state scores (``X W^T`` for a linear model, or anything else: a kernel expansion,
exponentiated-gradient potentials, smoothed scores) and ``pairwise`` (n_pairwise,), the
parameters the pairwise statistics are scored with. :meth:`BaseStructure.potentials` gives both
for a weight vector.

**Loss.** The loss decomposes over tokens: ``Delta(y, ybar) = sum_t L[t, ybar_t]`` with the
per-token loss matrix ``L = token_loss(Y)`` (the weighted Hamming loss by default). A
structure whose loss does not decompose (``loss_decomposes`` False) gives ``loss`` and
``max_loss`` itself and trains only with the learners that read the losses of the most
violating labellings off ``loss_augmented_decode`` (the cutting-plane learners).
"""

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils.extmath import safe_sparse_dot

from .._inference._validation import MAX_SCORE
from ._loss import hamming_token_loss


class BaseStructure(BaseEstimator):
    """Base class of structures: configuration in ``__init__``, dimensions bound by ``bind``.

    A structure implements :meth:`pairwise_statistics` (when ``n_pairwise_ > 0``) and the
    oracles its learners need: :meth:`decode` and :meth:`loss_augmented_decode` (the
    max-oracle: cutting planes, simplicial decomposition, l1 learners) and/or
    :meth:`marginals` (the exp-oracle: exponentiated gradient, excessive gap). Optionally it
    gives compiled per-example kernels (:meth:`example_kernels`) for the learners' compiled
    passes, and :meth:`pairwise_count_blocks` for the exp-oracle learners' bounds.

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

    # whether every example is a single token (the multiclass form: an intercept feature,
    # LinearSVC's coef_ and intercept_, stratified folds)
    one_token_per_example = False

    # the input form the structure reads (sklstruct._input): None for token sequences (and
    # images or plain samples), "graphs" for (node_features, edges[, edge_features]) tuples,
    # "multilabel" for a 2-D X with an indicator matrix y
    input_form = None

    def bind(self, n_features, n_states, classes=None, y=None):
        """Return a copy of this structure bound to the data dimensions.

        Parameters
        ----------
        n_features : int
            Number of token features.
        n_states : int
            Number of states (classes).
        classes : ndarray of shape (n_states,), default=None
            The label values (used to resolve a ``class_weight`` dict).
        y : ndarray of shape (n_tokens,), default=None
            Encoded training labels (used by ``class_weight="balanced"``).

        Returns
        -------
        structure : BaseStructure
            A new instance with ``n_features_``, ``n_states_`` and ``loss_weights_`` set.
        """
        params = self.get_params(deep=False)
        shadowed = sorted(name for name in params
                          if callable(getattr(BaseStructure, name, None)))
        if shadowed:
            raise TypeError(f"{type(self).__name__}'s parameter(s) {shadowed} have the names "
                            "of structure methods, which the stored values would replace; "
                            "rename them.")
        bound = self.__class__(**params)
        bound.n_features_ = int(n_features)
        bound.n_states_ = int(n_states)
        bound.loss_weights_ = _resolve_class_weight(
            getattr(self, "class_weight", None), n_states, classes, y
        )
        return bound

    def bind_batch(self, batch, Y):
        """Complete the binding from the training examples; returns the structure.

        Called on the bound copy with the training batch (its per-example ``extras``
        included) and encoded labels, before any oracle. Structures whose layout depends on
        the training data (the number of edge features of the graphs, a label tree learned
        from label co-occurrences) set it here; the default does nothing.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)

        Returns
        -------
        structure : BaseStructure
        """
        return self

    def inexact_examples(self, batch):
        """Indices of the examples of ``batch`` whose max-oracle may be inexact (none by
        default).

        A learner fitted with such an oracle warns that its reported duality gap is no
        certificate (an under-generating oracle: Finley and Joachims 2008) and records the
        count in ``n_inexact_examples_``.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        indices : ndarray of int
        """
        return np.zeros(0, dtype=np.intp)

    # ----------------------------------------------------------------- parameter layout
    @property
    def n_pairwise_(self):
        """Size of the pairwise block of the weights."""
        return 0

    @property
    def size_joint_feature_(self):
        """Size of the weight vector: ``n_states_ * n_features_ + n_pairwise_``."""
        return self.n_states_ * self.n_features_ + self.n_pairwise_

    @property
    def nonnegative_(self):
        """Indices of weights constrained to be non-negative (none by default)."""
        return np.zeros(0, dtype=np.intp)

    def split_weights(self, w):
        """Views of the unary and pairwise blocks of a flat weight vector.

        Parameters
        ----------
        w : ndarray of shape (size_joint_feature_,)

        Returns
        -------
        WT : ndarray of shape (n_features, n_states)
            The unary block, feature-major (a view of ``w``).
        pairwise : ndarray of shape (n_pairwise,)
            The pairwise block (a view of ``w``).
        """
        n_unary = self.n_states_ * self.n_features_
        return w[:n_unary].reshape(self.n_features_, self.n_states_), w[n_unary:]

    def named_parameters(self, pairwise):
        """Named views of the pairwise block, the estimators' fitted attributes of that name
        (a chain's ``transition_``, ``start_`` and ``end_``); none by default.

        Parameters
        ----------
        pairwise : ndarray of shape (n_pairwise,)

        Returns
        -------
        parameters : dict of str to ndarray
        """
        return {}

    # ----------------------------------------------------------------- features
    def unary_potentials(self, batch, w):
        """Token x state scores ``X W^T``.

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)

        Returns
        -------
        unary : ndarray of shape (n_tokens, n_states)
        """
        WT, _ = self.split_weights(w)
        return np.ascontiguousarray(safe_sparse_dot(batch.X, WT, dense_output=True))

    def potentials(self, batch, w):
        """The potentials of the weights ``w`` on ``batch``.

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)

        Returns
        -------
        unary : ndarray of shape (n_tokens, n_states)
            ``X W^T``.
        pairwise : ndarray of shape (n_pairwise,)
            The pairwise block of ``w``.
        """
        return self.unary_potentials(batch, w), np.ascontiguousarray(self.split_weights(w)[1])

    def unary_features(self, batch, token_state_weights):
        """``X^T M`` for a token x state matrix ``M``.

        With one-hot labels this is the unary part of the summed joint feature (in the layout
        of the weight vector), with marginals it is its expectation.

        Parameters
        ----------
        batch : SequenceBatch
        token_state_weights : ndarray or sparse matrix of shape (n_tokens, n_states)

        Returns
        -------
        statistics : ndarray of shape (n_features, n_states)
        """
        M = token_state_weights
        if sp.issparse(M):
            M = M.toarray()
        return np.ascontiguousarray(safe_sparse_dot(batch.X.T, M, dense_output=True))

    def onehot(self, labels):
        """Dense one-hot token x state matrix of ``labels``.

        Parameters
        ----------
        labels : ndarray of int of shape (n_tokens,)

        Returns
        -------
        onehot : ndarray of shape (n_tokens, n_states)
        """
        M = np.zeros((labels.shape[0], self.n_states_))
        M[np.arange(labels.shape[0]), labels] = 1.0
        return M

    def check_labels(self, batch, Y):
        """``Y`` as an integer array of one state in ``[0, n_states_)`` per token of
        ``batch``: what the oracles index with (a negative state would silently stand for
        the last ones).

        Parameters
        ----------
        batch : SequenceBatch
        Y : array-like of int of shape (n_tokens,)

        Returns
        -------
        Y : ndarray of int of shape (n_tokens,)

        Raises
        ------
        ValueError
            When ``Y`` has another shape, is not of integers, or holds a state outside
            ``[0, n_states_)``.
        """
        Y = np.asarray(Y)
        if Y.shape != (batch.n_tokens,):
            raise ValueError(f"Y must hold one state per token ({batch.n_tokens}); got shape "
                             f"{Y.shape}.")
        if Y.dtype.kind not in "iu":
            raise ValueError(f"Y must hold integer states; got dtype {Y.dtype}.")
        if Y.shape[0] and (Y.min() < 0 or Y.max() >= self.n_states_):
            raise ValueError(f"Y must lie in [0, {self.n_states_}), the range of states; got "
                             f"[{int(Y.min())}, {int(Y.max())}].")
        return Y

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        """Pairwise part of ``sum_i weights_i Psi(x_i, y_i)``, shape (n_pairwise,).

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)
            A labelling of every token.
        weights : ndarray of shape (n_sequences,), default=None
            Per-sequence weights (ones by default).
        per_sequence : bool, default=False
            Return the pairwise part of every ``Psi(x_i, y_i)``, shape
            (n_sequences, n_pairwise), ignoring ``weights``.

        Returns
        -------
        statistics : ndarray
        """
        return np.zeros((batch.n_sequences, 0)) if per_sequence else np.zeros(0)

    def pairwise_scores(self, batch, Y, pairwise):
        """Per-sequence pairwise part of the score, ``pairwise . pairwise_statistics_i(Y)``.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)
        pairwise : ndarray of shape (n_pairwise,)

        Returns
        -------
        scores : ndarray of shape (n_sequences,)
        """
        if self.n_pairwise_ == 0:
            return np.zeros(batch.n_sequences)
        return self.pairwise_statistics(batch, Y, per_sequence=True) @ pairwise

    def joint_feature(self, batch, Y):
        """Summed joint feature ``sum_i Psi(x_i, y_i)`` over the batch.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)

        Returns
        -------
        psi : ndarray of shape (size_joint_feature_,)
        """
        unary = self.unary_features(batch, self.onehot(Y))
        return np.concatenate([unary.ravel(), self.pairwise_statistics(batch, Y)])

    def expected_joint_feature(self, batch, node_marginals, pairwise_marginals):
        """Summed expected joint feature from node and per-sequence pairwise marginals.

        Parameters
        ----------
        batch : SequenceBatch
        node_marginals : ndarray of shape (n_tokens, n_states)
        pairwise_marginals : ndarray of shape (n_sequences, n_pairwise)

        Returns
        -------
        expected_psi : ndarray of shape (size_joint_feature_,)
        """
        unary = self.unary_features(batch, node_marginals)
        return np.concatenate([unary.ravel(), np.asarray(pairwise_marginals).sum(axis=0)])

    def pairwise_count_blocks(self, batch):
        """Blocks of the pairwise statistics that count parts of a labelling.

        Returns a list of ``(start, stop, totals)``: for every labelling of sequence ``i`` the
        statistics ``start:stop`` are non-negative and sum to ``totals[i]`` (for a chain: the
        transition counts sum to ``length - 1``). Exp-oracle learners use them to bound
        ``||pairwise_statistics||`` and to renormalise marginals; none by default.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        blocks : list of (int, int, ndarray of shape (n_sequences,))
        """
        return []

    def max_pairwise_norm_sq(self, batch):
        """Per-sequence bound on ``max_y ||pairwise_statistics_i(y)||^2``.

        From :meth:`pairwise_count_blocks` (a count block with total ``T`` has squared norm at
        most ``T^2``).

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        bound : ndarray of shape (n_sequences,) or None
            ``None`` when the blocks do not cover the pairwise statistics.
        """
        blocks = self.pairwise_count_blocks(batch)
        covered = np.zeros(self.n_pairwise_, dtype=bool)
        bound = np.zeros(batch.n_sequences)
        for start, stop, totals in blocks:
            covered[start:stop] = True
            bound += np.asarray(totals, dtype=np.float64) ** 2
        return bound if covered.all() else None

    # ----------------------------------------------------------------- loss
    def token_loss(self, Y):
        """Per-token loss matrix ``L[t, s]``: the loss of state ``s`` at token ``t``.

        The default is the weighted Hamming loss ``loss_weights_[Y[t]] [s != Y[t]]``.
        Override it (non-negative, zero on the true state) for another decomposable loss.

        Parameters
        ----------
        Y : ndarray of int of shape (n_tokens,)
            True labels.

        Returns
        -------
        token_loss : ndarray of shape (n_tokens, n_states)
        """
        return hamming_token_loss(Y, self.loss_weights_, self.n_states_)

    @property
    def loss_decomposes(self):
        """Whether ``Delta(y, ybar) = sum_t token_loss(y)[t, ybar_t]`` (True by default).

        A structure whose loss does not decompose over tokens (a 0/1 loss over whole
        outputs) returns False, overrides :meth:`loss` and :meth:`max_loss`, and computes the
        losses of its most violating labellings in :meth:`loss_augmented_decode`; only
        learners that take the losses from that oracle train it (the others refuse it).
        """
        return True

    def max_loss(self, batch, Y):
        """An upper bound on ``max_ybar Delta(y_i, ybar)`` for every sequence ``i``.

        By default the sum over tokens of the largest entry of each row of
        :meth:`token_loss`. Learners use it as the scale of the objective at ``w = 0``.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)
            True labels.

        Returns
        -------
        max_loss : ndarray of shape (n_sequences,)
        """
        Y = self.check_labels(batch, Y)
        return batch.sum_per_sequence(self.token_loss(Y).max(axis=1))

    def loss(self, batch, Y_true, Y_pred):
        """Per-sequence loss ``Delta(y_i, ybar_i) = sum_t L[t, ybar_t]``.

        Parameters
        ----------
        batch : SequenceBatch
        Y_true, Y_pred : ndarray of int of shape (n_tokens,)

        Returns
        -------
        losses : ndarray of shape (n_sequences,)
        """
        Y_true = self.check_labels(batch, Y_true)
        Y_pred = self.check_labels(batch, Y_pred)
        return batch.sum_per_sequence(self.token_loss(Y_true)[np.arange(Y_true.shape[0]), Y_pred])

    # ----------------------------------------------------------------- oracles
    def score(self, batch, unary, pairwise, Y):
        """Per-sequence score of the labelling ``Y`` under the potentials.

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        Y : ndarray of int of shape (n_tokens,)

        Returns
        -------
        scores : ndarray of shape (n_sequences,)
        """
        Y = self.check_labels(batch, Y)
        return batch.sum_per_sequence(unary[np.arange(Y.shape[0]), Y]) \
            + self.pairwise_scores(batch, Y, pairwise)

    def decode(self, batch, unary, pairwise, n_jobs=None):
        """Highest-scoring labelling of every sequence (the MAP oracle).

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        n_jobs : int, default=None
            Threads (joblib workers) for the compiled decoders.

        Returns
        -------
        labels : ndarray of int of shape (n_tokens,)
        """
        raise NotImplementedError(f"{type(self).__name__} has no decoding oracle.")

    def decode_weights(self, batch, w, n_jobs=None):
        """Highest-scoring labelling of every sequence under the weights ``w``.

        ``decode(batch, *potentials(batch, w))``; a structure may do it otherwise (a chain
        forms the unary scores and decodes them a chunk of sequences at a time, the chunks
        on threads).

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)
        n_jobs : int, default=None
            Threads for the compiled decoders.

        Returns
        -------
        labels : ndarray of int of shape (n_tokens,)
        """
        unary, pairwise = self.potentials(batch, w)
        check_potential_range(batch, unary, pairwise)
        return self.decode(batch, unary, pairwise, n_jobs=n_jobs)

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        """Most violating labellings (the max-oracle of the cutting-plane methods).

        With ``rescale="margin"`` the labelling maximises ``Delta(y_i, ybar) + score(ybar)``,
        with ``"slack"`` ``Delta(y_i, ybar) (1 + score(ybar) - score(y_i))`` (``y_i`` itself
        when nothing beats 0).

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        Y : ndarray of int of shape (n_tokens,)
            True labels.
        rescale : {"margin", "slack"}, default="margin"
        n_jobs : int, default=None
        token_loss : ndarray of shape (n_tokens, n_states), default=None
            ``token_loss(Y)``, when the caller has it already.

        Returns
        -------
        labels : ndarray of shape (n_tokens,)
        losses : ndarray of shape (n_sequences,)
            ``Delta(y_i, ybar_i)``.
        scores : ndarray of shape (n_sequences,)
            ``score(ybar_i)`` without the loss.
        """
        raise NotImplementedError(f"{type(self).__name__} has no loss-augmented decoding "
                                  "oracle.")

    def loss_augmented_margins(self, batch, w, Y, rescale="margin", n_jobs=None,
                               token_loss=None):
        """:meth:`loss_augmented_decode` under the weights ``w``, with each labelling's margin.

        ``loss_augmented_decode(batch, *potentials(batch, w), Y, ...)`` and the margins
        ``score(y_i) - score(ybar_i)``: what the hinge terms need (:func:`hinge_terms`). A
        structure may do it otherwise (a chain on sparse features forms the unary scores of
        each sequence, decodes and scores them while in cache, without a token x state array,
        the chunks of sequences on threads).

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)
        Y : ndarray of int of shape (n_tokens,)
            True labels.
        rescale : {"margin", "slack"}, default="margin"
        n_jobs : int, default=None
        token_loss : ndarray of shape (n_tokens, n_states), default=None
            ``token_loss(Y)``, when the caller has it already.

        Returns
        -------
        labels : ndarray of shape (n_tokens,)
        losses : ndarray of shape (n_sequences,)
            ``Delta(y_i, ybar_i)``.
        margins : ndarray of shape (n_sequences,)
            ``score(y_i) - score(ybar_i)`` under ``w``.
        """
        unary, pairwise = self.potentials(batch, w)
        labels, losses, scores = self.loss_augmented_decode(
            batch, unary, pairwise, Y, rescale=rescale, n_jobs=n_jobs, token_loss=token_loss)
        return labels, losses, self.score(batch, unary, pairwise, Y) - scores

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        """The exp-oracle: marginals of ``p(y) ∝ exp(score(y))``.

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        n_jobs : int, default=None
            Threads (joblib workers) for the compiled kernels.

        Returns
        -------
        node_marginals : ndarray of shape (n_tokens, n_states)
        pairwise_marginals : ndarray of shape (n_sequences, n_pairwise)
            Expected :meth:`pairwise_statistics` of every sequence.
        log_partition : ndarray of shape (n_sequences,)
        """
        raise NotImplementedError(f"{type(self).__name__} has no marginal oracle.")

    def as_chain(self, batch, pairwise):
        """The pairwise potentials as those of a first-order chain over every example's
        tokens, ``(transition, start, end)`` (``start``/``end`` may be None): what k-best
        decoding and sequence confidences run on. Structures that are not chains raise
        ``ValueError``.

        Parameters
        ----------
        batch : SequenceBatch
        pairwise : ndarray of shape (n_pairwise,)

        Returns
        -------
        transition : ndarray of shape (n_states, n_states)
        start, end : ndarray of shape (n_states,) or None
        """
        raise ValueError(f"top-k decoding and sequence confidence need a chain or multiclass "
                         f"model; this model's structure is {type(self).__name__}.")

    def node_marginals(self, batch, unary, pairwise, n_jobs=None):
        """Node marginals only (prediction's probabilities): by default those of
        :meth:`marginals`; a structure whose expected pairwise statistics are large (a chain
        of many labels: ``n_sequences x n_states^2``) computes them without those.

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        n_jobs : int, default=None

        Returns
        -------
        node_marginals : ndarray of shape (n_tokens, n_states)
        """
        return self.marginals(batch, unary, pairwise, n_jobs=n_jobs)[0]

    def summed_marginals(self, batch, unary, pairwise, n_jobs=None):
        """The marginals with the expected pairwise statistics summed over the batch (what
        the batch learners need): by default from :meth:`marginals`.

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        n_jobs : int, default=None

        Returns
        -------
        node_marginals : ndarray of shape (n_tokens, n_states)
        pairwise_marginals : ndarray of shape (n_pairwise,)
            ``sum_i E_i[pairwise_statistics_i]``.
        log_partition : ndarray of shape (n_sequences,)
        """
        node, pair, log_z = self.marginals(batch, unary, pairwise, n_jobs=n_jobs)
        return node, np.asarray(pair).reshape(batch.n_sequences, -1).sum(axis=0), log_z

    def example_kernels(self, batch):
        """Compiled per-example kernels over ``batch`` for the learners' compiled passes.

        Returns an instance of :class:`sklstruct._inference._kernels.ExampleKernels` (a Cython
        class) or ``None`` (the default): learners then use their batched solvers, which call
        the oracles above.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        kernels : ExampleKernels or None
        """
        return None


def checked_token_loss(structure, Y):
    """``structure.token_loss(Y)`` as float64, checked: the learners and their compiled
    oracles take it as given, so a loss with the wrong shape, a NaN or infinite entry, a
    negative one or one that is not zero at the true state (``Delta(y, y) = 0``) is refused
    here with a ``ValueError`` naming the structure.

    Parameters
    ----------
    structure : bound structure
    Y : ndarray of int of shape (n_tokens,)
        True labels.

    Returns
    -------
    token_loss : ndarray of shape (n_tokens, n_states)
    """
    name = f"{type(structure).__name__}.token_loss"
    token_loss = np.asarray(structure.token_loss(Y), dtype=np.float64)
    expected = (Y.shape[0], structure.n_states_)
    if token_loss.shape != expected:
        raise ValueError(f"{name} must return an array of shape {expected} (tokens x "
                         f"states), got {token_loss.shape}.")
    if not np.isfinite(token_loss).all():
        raise ValueError(f"{name} returned NaN or infinite losses.")
    if (token_loss < 0).any():
        raise ValueError(f"{name} returned negative losses; losses must be non-negative.")
    if token_loss.shape[0] and token_loss[np.arange(Y.shape[0]), Y].any():
        raise ValueError(f"{name} must be zero at each token's true state (the loss of the "
                         "true labelling is 0).")
    return token_loss


def check_potential_range(batch, unary, pairwise):
    """Raise a ``ValueError`` when the model's potentials on ``batch`` are not finite, or a
    labelling's score could overflow a double: ``max |unary| L + max |pairwise| L^2`` for
    the longest example (``L`` rows; an example's pairwise terms are at most one per pair
    of its rows). Such potentials come from weights or features of absurd scale, and the
    decoders' and marginals' sums would turn into ``inf`` or NaN and their comparisons into
    arbitrary choices."""
    # (the extremes, read without temporary arrays: a NaN or an infinity shows in them)
    extremes = np.array([(float(array.max()), -float(array.min())) if array.size else (0, 0)
                         for array in (np.asarray(unary), np.asarray(pairwise))])
    if not np.isfinite(extremes).all():
        raise ValueError(
            "The model's scores on X are not finite: the features times the weights "
            "overflow double precision. The features (or the weights) are of absurd scale; "
            "scale the features (e.g. StandardScaler or MaxAbsScaler) or refit.")
    if batch.n_sequences == 0:
        return
    rows = float(np.max(batch.lengths))
    unary_peak, pair_peak = extremes.max(axis=1)
    peak = unary_peak * rows + pair_peak * rows * rows
    if not peak < MAX_SCORE:
        raise ValueError(
            f"The model's potentials on X are too large to be summed in double precision: a "
            f"labelling can score more than {MAX_SCORE:.0e}. The features (or the weights) "
            "are of absurd scale; scale the features (e.g. StandardScaler or MaxAbsScaler) or "
            "refit.")


def structured_hinge(structure, batch, Y, unary, pairwise, rescale="margin", n_jobs=None,
                     token_loss=None):
    """Per-sequence structured hinge losses ``H_i`` at the potentials.

    Returns
    -------
    hinge : ndarray of shape (n_sequences,)
    labels : ndarray of shape (n_tokens,)
        The most violating labellings.
    losses : ndarray of shape (n_sequences,)
        Their losses.
    """
    labels, losses, scores = structure.loss_augmented_decode(
        batch, unary, pairwise, Y, rescale=rescale, n_jobs=n_jobs, token_loss=token_loss)
    margins = structure.score(batch, unary, pairwise, Y) - scores
    return hinge_terms(losses, margins, rescale), labels, losses


def primal_objective(structure, batch, Y, w, C, rescale="margin", n_jobs=None, weights=None,
                     token_loss=None):
    """``1/2 ||w||^2 + C sum_i s_i H_i(w)`` and the hinge terms ``H_i``.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    w : ndarray of shape (size_joint_feature_,)
    C : float
    rescale : {"margin", "slack"}, default="margin"
    n_jobs : int, default=None
    weights : ndarray of shape (n_sequences,), default=None
        The sequences' weights ``s_i`` (ones by default).
    token_loss : ndarray of shape (n_tokens, n_states), default=None

    Returns
    -------
    primal : float
    hinge : ndarray of shape (n_sequences,)
    """
    _, losses, margins = structure.loss_augmented_margins(
        batch, w, Y, rescale=rescale, n_jobs=n_jobs, token_loss=token_loss)
    hinge = hinge_terms(losses, margins, rescale)
    total = hinge.sum() if weights is None else weights @ hinge
    return 0.5 * float(w @ w) + float(C) * float(total), hinge


def hinge_terms(losses, margins, rescale):
    """Structured hinge terms from losses and margins ``w.Psi(y_i) - w.Psi(ybar_i)``.

    ``max(0, Delta - margin)`` (margin rescaling) or ``max(0, Delta (1 - margin))`` (slack).
    """
    if rescale == "margin":
        return np.maximum(losses - margins, 0.0)
    return np.maximum(losses * (1.0 - margins), 0.0)


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
        # scikit-learn's rule (compute_class_weight): keys that are not classes of the
        # training data (a rare class left out of a cross-validation fold) are ignored when
        # the dict weighs every class there is; otherwise they are an error, such as an int
        # key for str labels, which would silently leave the weights at one
        unweighted = []
        for i, label in enumerate(classes.tolist()):
            if label in class_weight:
                weights[i] = class_weight[label]
            else:
                unweighted.append(label)
        if unweighted and len(classes) - len(unweighted) != len(class_weight):
            raise ValueError(f"The classes, {unweighted}, are not in class_weight "
                             f"(its keys: {list(class_weight)}).")
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
    """Raise a ``ValueError`` unless ``rescale`` is "margin" or "slack"."""
    if rescale not in ("margin", "slack"):
        raise ValueError(f"rescale must be 'margin' or 'slack', got {rescale!r}.")
