"""First-order linear-chain structure."""

import numpy as np

from .._inference import chain as chain_kernels
from ._base import BaseStructure, check_rescale


class ChainStructure(BaseStructure):
    """First-order linear chain over token sequences.

    ``w . Psi(x, y) = sum_t W[y_t] . x_t + sum_t T[y_t, y_{t+1}] + b[y_0] + e[y_last]``:
    per-state weights ``W`` on token features, a state x state transition matrix ``T`` and,
    with ``start_end=True``, start and end biases ``b`` and ``e``. The loss is the Hamming loss
    with per-class weights, ``Delta(y, ybar) = sum_t c[y_t] [ybar_t != y_t]``.

    Decoding is Viterbi, loss-augmented decoding is Viterbi on loss-shifted scores (margin
    rescaling) or a Viterbi over (state, loss value) pairs (slack rescaling, seed 002 eq. (2)),
    and marginals come from log-domain forward-backward; all run over whole batches in
    compiled code.

    Parameters
    ----------
    start_end : bool, default=True
        Whether to learn start and end biases per state.
    class_weight : dict, 'balanced', array-like or None, default=None
        Per-class weights of the Hamming loss. Slack rescaling needs weights that are integer
        multiples of a common unit (e.g. 0.5, 1, 2).
    """

    def __init__(self, *, start_end=True, class_weight=None):
        self.start_end = start_end
        self.class_weight = class_weight

    @property
    def n_pairwise_(self):
        S = self.n_states_
        return S * S + (2 * S if self.start_end else 0)

    def pairwise_parameters(self, w):
        """``(transition, start, end)`` views of a weight vector (``None`` when absent)."""
        _, theta = self.split_weights(w)
        S = self.n_states_
        transition = theta[: S * S].reshape(S, S)
        if self.start_end:
            return transition, theta[S * S: S * S + S], theta[S * S + S:]
        return transition, None, None

    def _inner_pairs(self, batch, Y):
        """Sequence index, left and right label of every within-sequence token pair."""
        inner = np.ones(max(Y.shape[0] - 1, 0), dtype=bool)
        inner[batch.offsets[1:-1] - 1] = False
        return batch.sequence_index[:-1][inner], Y[:-1][inner], Y[1:][inner]

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        """Pairwise part of ``sum_i weights_i Psi(x_i, y_i)`` (or of each ``Psi(x_i, y_i)``).

        Transition counts (S*S, row-major ``a * S + b``), then start and end indicator counts
        (S each) when ``start_end`` is set. With ``per_sequence=True`` the result has shape
        (n_sequences, n_pairwise) and ``weights`` is ignored.
        """
        S, P = self.n_states_, self.n_pairwise_
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

    def pairwise_scores(self, batch, Y, theta):
        """Per-sequence transition (and start/end) part of the score."""
        S = self.n_states_
        seq, left, right = self._inner_pairs(batch, Y)
        # (bincount of an empty selection, e.g. all sequences of length 1, is integer-typed)
        scores = np.bincount(seq, weights=theta[left * S + right],
                             minlength=batch.n_sequences).astype(np.float64)
        if self.start_end:
            scores += theta[S * S + Y[batch.offsets[:-1]]]
            scores += theta[S * S + S + Y[batch.offsets[1:] - 1]]
        return scores

    def decode(self, batch, w, n_jobs=None, unary=None):
        """Viterbi labels of every token, shape (n_tokens,)."""
        if unary is None:
            unary = self.unary_potentials(batch, w)
        transition, start, end = self.pairwise_parameters(w)
        labels, _ = chain_kernels.viterbi(unary, batch.offsets, transition, start, end,
                                          n_jobs=n_jobs)
        return labels

    def loss_augmented_decode(self, batch, w, Y, rescale="margin", n_jobs=None, unary=None):
        """Most violating labelings (seed 002 separation oracle).

        Returns
        -------
        labels : ndarray of shape (n_tokens,)
        losses : ndarray of shape (n_sequences,)
            ``Delta(y_i, ybar_i)``.
        scores : ndarray of shape (n_sequences,)
            ``w . Psi(x_i, ybar_i)`` without the loss.
        """
        check_rescale(rescale)
        if unary is None:
            unary = self.unary_potentials(batch, w)
        transition, start, end = self.pairwise_parameters(w)
        return chain_kernels.loss_augmented_viterbi(
            unary, batch.offsets, transition, start, end, Y,
            loss_weights=self.loss_weights_, rescale=rescale, n_jobs=n_jobs,
        )

    def marginals(self, batch, w, n_jobs=None, unary=None):
        """Node marginals, per-sequence pairwise marginals and log-partition.

        Returns
        -------
        node_marginals : ndarray of shape (n_tokens, n_states)
        pairwise_marginals : ndarray of shape (n_sequences, n_pairwise)
            Expected :meth:`pairwise_statistics` under the model's distribution.
        log_partition : ndarray of shape (n_sequences,)
        """
        if unary is None:
            unary = self.unary_potentials(batch, w)
        transition, start, end = self.pairwise_parameters(w)
        node, edge, log_z = chain_kernels.forward_backward(
            unary, batch.offsets, transition, start, end, n_jobs=n_jobs
        )
        pairwise = edge.reshape(batch.n_sequences, -1)
        if self.start_end:
            pairwise = np.hstack([pairwise, node[batch.offsets[:-1]], node[batch.offsets[1:] - 1]])
        return node, pairwise, log_z
