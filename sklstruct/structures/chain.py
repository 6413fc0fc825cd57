"""First-order linear-chain structure."""

import numpy as np
import scipy.sparse as sp

from .._inference import chain as chain_kernels
from .._inference._validation import MAX_SCORE
from .._inference._kernels import ChainKernels
from ._base import BaseStructure, check_rescale
from ._moments import uniform_covariance_operator


class ChainStructure(BaseStructure):
    """First-order linear chain over token sequences.

    ``w . Psi(x, y) = sum_t W[y_t] . x_t + sum_t T[y_t, y_{t+1}] + b[y_0] + e[y_last]``:
    per-state weights ``W`` on token features, a state x state transition matrix ``T`` and,
    with ``start_end=True``, start and end biases ``b`` and ``e``. The loss is the Hamming loss
    with per-class weights, ``Delta(y, ybar) = sum_t c[y_t] [ybar_t != y_t]``.

    The pairwise block of the weights holds the transition matrix (``S * S``, row-major
    ``a * S + b``), then, with ``start_end``, the start and end biases (``S`` each); the
    pairwise statistics of a labelling are the matching transition counts and start/end
    indicators, count blocks that sum to ``length - 1``, 1 and 1.

    Decoding is Viterbi, loss-augmented decoding is Viterbi on loss-shifted scores (margin
    rescaling) or a Viterbi over (state, loss value) pairs (slack rescaling, Tsochantaridis et
    al. 2005, eq. (2)), and marginals come from log-domain forward-backward; all run over whole
    batches in compiled code, and per sequence in the learners' compiled passes
    (:class:`~sklstruct._inference._kernels.ChainKernels`).

    Parameters
    ----------
    start_end : bool, default=True
        Whether to learn start and end biases per state.
    class_weight : dict, 'balanced', array-like or None, default=None
        Per-class weights of the Hamming loss. A dict's labels that the training data lack
        are ignored if it weighs every label the data have, else a ``ValueError`` (as in
        scikit-learn); labels it leaves out weigh one. Slack rescaling needs weights that
        are integer multiples of a common unit (e.g. 0.5, 1, 2).

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

    def __init__(self, *, start_end=True, class_weight=None):
        self.start_end = start_end
        self.class_weight = class_weight

    @property
    def n_pairwise_(self):
        """``S * S`` transitions, plus ``2 S`` start and end biases with ``start_end``."""
        S = self.n_states_
        return S * S + (2 * S if self.start_end else 0)

    def pairwise_parameters(self, pairwise):
        """Views of the transition matrix and the start and end biases.

        Parameters
        ----------
        pairwise : ndarray of shape (n_pairwise,)
            The pairwise block of the weights.

        Returns
        -------
        transition : ndarray of shape (n_states, n_states)
        start, end : ndarray of shape (n_states,) or None
            ``None`` without ``start_end``.
        """
        S = self.n_states_
        transition = pairwise[: S * S].reshape(S, S)
        if self.start_end:
            return transition, pairwise[S * S: S * S + S], pairwise[S * S + S:]
        return transition, None, None

    def named_parameters(self, pairwise):
        transition, start, end = self.pairwise_parameters(pairwise)
        named = {"transition_": transition}
        if self.start_end:
            named.update(start_=start, end_=end)
        return named

    def as_chain(self, batch, pairwise):
        return self.pairwise_parameters(pairwise)

    def _inner_pairs(self, batch, Y):
        """Sequence index, left and right label of every within-sequence token pair."""
        inner = np.ones(max(Y.shape[0] - 1, 0), dtype=bool)
        inner[batch.offsets[1:-1] - 1] = False
        return batch.sequence_index[:-1][inner], Y[:-1][inner], Y[1:][inner]

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        S, P = self.n_states_, self.n_pairwise_
        Y = self.check_labels(batch, Y)
        seq, left, right = self._inner_pairs(batch, Y)
        first, last = Y[batch.offsets[:-1]], Y[batch.offsets[1:] - 1]
        if per_sequence:
            n = batch.n_sequences
            index = [seq * P + left * S + right]
            if self.start_end:
                rows = np.arange(n) * P
                index += [rows + S * S + first, rows + S * S + S + last]
            counts = np.bincount(np.concatenate(index), minlength=n * P)
            return counts.reshape(n, P).astype(np.float64)
        pair_weights = None if weights is None else weights[seq]
        stats = [np.bincount(left * S + right, weights=pair_weights, minlength=S * S)]
        if self.start_end:
            stats.append(np.bincount(first, weights=weights, minlength=S))
            stats.append(np.bincount(last, weights=weights, minlength=S))
        return np.concatenate(stats).astype(np.float64)

    def pairwise_scores(self, batch, Y, pairwise):
        S = self.n_states_
        seq, left, right = self._inner_pairs(batch, Y)
        # (bincount of an empty selection, e.g. all sequences of length 1, is integer-typed)
        scores = np.bincount(seq, weights=pairwise[left * S + right],
                             minlength=batch.n_sequences).astype(np.float64)
        if self.start_end:
            scores += pairwise[S * S + Y[batch.offsets[:-1]]]
            scores += pairwise[S * S + S + Y[batch.offsets[1:] - 1]]
        return scores

    def pairwise_count_blocks(self, batch):
        S = self.n_states_
        blocks = [(0, S * S, batch.lengths - 1.0)]
        if self.start_end:
            ones = np.ones(batch.n_sequences)
            blocks += [(S * S, S * S + S, ones), (S * S + S, S * S + 2 * S, ones)]
        return blocks

    def decode(self, batch, unary, pairwise, n_jobs=None):
        transition, start, end = self.pairwise_parameters(pairwise)
        labels, _ = chain_kernels.viterbi(unary, batch.offsets, transition, start, end,
                                          n_jobs=n_jobs)
        return labels

    def decode_weights(self, batch, w, n_jobs=None):
        """Viterbi from the weights: for sparse token features, the unary product and the
        decoding per chunk of sequences, the chunks on ``n_jobs`` threads
        (:func:`~sklstruct._inference.chain.viterbi_sparse`: the labels of :meth:`decode`
        on :meth:`potentials`, to the last bit); otherwise :meth:`decode`.

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)
        n_jobs : int, default=None
            Threads for the compiled decoder.

        Returns
        -------
        labels : ndarray of int of shape (n_tokens,)
        """
        if not sp.issparse(batch.X):  # (the chain decoders check the scores' range)
            return self.decode(batch, *self.potentials(batch, w), n_jobs=n_jobs)
        weights, pairwise = self.split_weights(w)
        transition, start, end = self.pairwise_parameters(np.ascontiguousarray(pairwise))
        # (the batch's features were checked finite; fitted weights are)
        labels, scores = chain_kernels.viterbi_sparse(batch.X, weights, batch.offsets,
                                                      transition, start, end, n_jobs=n_jobs,
                                                      check_finite=False)
        if not np.all(np.abs(scores) < MAX_SCORE):
            # (the unary scores are formed inside the decoder: their overflow shows in the
            # best scores, as inf or NaN, without a pass over the features or weights)
            raise ValueError(
                "The model's scores on X are not finite: the features times the weights "
                "overflow double precision. The features (or the weights) are of absurd "
                "scale; scale the features (e.g. StandardScaler or MaxAbsScaler) or refit.")
        return labels

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        Y = self.check_labels(batch, Y)
        transition, start, end = self.pairwise_parameters(pairwise)
        return chain_kernels.loss_augmented_viterbi(
            unary, batch.offsets, transition, start, end, Y, rescale=rescale, n_jobs=n_jobs,
            token_loss=self.token_loss(Y) if token_loss is None else token_loss,
        )

    def loss_augmented_margins(self, batch, w, Y, rescale="margin", n_jobs=None,
                               token_loss=None):
        """Margin rescaling on sparse token features: each sequence's unary scores formed,
        decoded and scored at ``Y`` while in cache, the chunks on ``n_jobs`` threads
        (:func:`~sklstruct._inference.chain.loss_augmented_margins_sparse`: the labels and
        losses of :meth:`loss_augmented_decode` on :meth:`potentials`, to the last bit, and
        the margins up to the rounding of the sums' order); otherwise as the base class does.

        Parameters
        ----------
        batch : SequenceBatch
        w : ndarray of shape (size_joint_feature_,)
        Y : ndarray of int of shape (n_tokens,)
            True labels.
        rescale : {"margin", "slack"}, default="margin"
        n_jobs : int, default=None
            Threads for the compiled decoder.
        token_loss : ndarray of shape (n_tokens, n_states), default=None
            ``token_loss(Y)``, when the caller has it already.

        Returns
        -------
        labels : ndarray of int of shape (n_tokens,)
        losses : ndarray of shape (n_sequences,)
            ``Delta(y_i, ybar_i)``.
        margins : ndarray of shape (n_sequences,)
            ``score(y_i) - score(ybar_i)`` under ``w``.
        """
        check_rescale(rescale)
        if rescale != "margin" or not sp.issparse(batch.X):
            return super().loss_augmented_margins(batch, w, Y, rescale=rescale, n_jobs=n_jobs,
                                                  token_loss=token_loss)
        weights, pairwise = self.split_weights(w)
        transition, start, end = self.pairwise_parameters(np.ascontiguousarray(pairwise))
        # (the batch's features were checked finite; the learners' weights are)
        labels, losses, scores, true_scores = chain_kernels.loss_augmented_margins_sparse(
            batch.X, weights, batch.offsets, transition, start, end, Y, n_jobs=n_jobs,
            token_loss=self.token_loss(Y) if token_loss is None else token_loss,
            check_finite=False)
        return labels, losses, true_scores - scores

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        transition, start, end = self.pairwise_parameters(pairwise)
        node, edge, log_z = chain_kernels.forward_backward(
            unary, batch.offsets, transition, start, end, n_jobs=n_jobs
        )
        expected = edge.reshape(batch.n_sequences, -1)
        if self.start_end:
            expected = np.hstack([expected, node[batch.offsets[:-1]],
                                  node[batch.offsets[1:] - 1]])
        return node, expected, log_z

    def node_marginals(self, batch, unary, pairwise, n_jobs=None):
        transition, start, end = self.pairwise_parameters(pairwise)
        return chain_kernels.forward_backward(unary, batch.offsets, transition, start, end,
                                              n_jobs=n_jobs, edges="none")[0]

    def summed_marginals(self, batch, unary, pairwise, n_jobs=None):
        transition, start, end = self.pairwise_parameters(pairwise)
        node, edge, log_z = chain_kernels.forward_backward(
            unary, batch.offsets, transition, start, end, n_jobs=n_jobs, edges="sum")
        expected = [edge.ravel()]
        if self.start_end:
            expected += [node[batch.offsets[:-1]].sum(axis=0),
                         node[batch.offsets[1:] - 1].sum(axis=0)]
        return node, np.concatenate(expected), log_z

    def example_kernels(self, batch):
        return ChainKernels(batch.offsets, self.n_states_, True, bool(self.start_end))

    def uniform_covariance_operator(self, batch, weights):
        """``v -> sum_i weights_i Cov_i(Psi) v`` under independent, uniform labels.

        The curvature of exponentiated gradient's dual (its safe step size) is the largest
        eigenvalue of this operator.

        Parameters
        ----------
        batch : SequenceBatch
        weights : ndarray of shape (n_sequences,)

        Returns
        -------
        operator : scipy.sparse.linalg.LinearOperator
        """
        return uniform_covariance_operator(self, batch, weights, True, bool(self.start_end))
