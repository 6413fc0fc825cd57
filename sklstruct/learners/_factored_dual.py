"""Dual variables kept as per-example sufficient statistics.

For example ``i`` the dual distribution over labellings is represented by statistics of it;
:class:`DualWeights` is what every such representation shares: the expected loss per example
and ``v = C sum_i s_i (Psi(x_i, y_i) - E_i[Psi])``, kept explicitly as ``W^T`` (the unary
block) and ``pair_v`` (the pairwise block), arrays that compiled per-example passes update in
place; ``s_i`` are the examples' sample weights (1 unless given), so that example ``i``'s
dual variables sum to ``C s_i``. The model's weights ``w`` equal ``v`` except on the pairwise
weights the structure constrains to be non-negative (``nonnegative_``), where
``w = [v]_+``; the dual is ``C sum_i s_i E_i[Delta] - 1/2 ||w||^2``.

:class:`FactoredDualState` keeps node marginals (rows of ``node_marg``) and expected pairwise
statistics ``pair_marg[i]``. Memory: O(n_tokens * n_states + n_sequences * n_pairwise) plus
the weights, never a table per labelling or per position pair."""

import numpy as np

from ..structures._base import checked_token_loss


# per-example pairwise tables are avoided when they would take more than this many bytes and
# more than four times the per-token arrays (n_tokens x n_states doubles)
PER_EXAMPLE_TABLES_MB = 256


def per_example_tables_too_large(structure, batch, n_tables):
    """Whether ``n_tables`` dense pairwise tables per example (``n_sequences x n_pairwise``
    doubles each) would exceed both ``PER_EXAMPLE_TABLES_MB`` and four times the per-token
    arrays: the dual states then use a representation within O(n_tokens * n_states)."""
    table_bytes = 8.0 * n_tables * batch.n_sequences * structure.n_pairwise_
    return table_bytes > max(PER_EXAMPLE_TABLES_MB * 2.0**20,
                             4 * 8.0 * batch.n_tokens * structure.n_states_)


def take_truth(kernels, Y):
    """Give the kernels the true labels when their max-oracle may miss them (the decoder's
    outputs need not contain a training labelling: projective trees)."""
    if hasattr(kernels, "set_truth"):
        kernels.set_truth(Y)


class DualWeights:
    """Weights, loss and scratch arrays of a dual kept as per-example statistics.

    Subclasses bind them with :meth:`_bind`, keep ``expected_loss`` (per example) and
    implement :meth:`_statistics_weights` (``W^T`` and ``pair_v`` from their statistics) and
    :meth:`max_loss`.
    """

    def _bind(self, structure, batch, Y, C, scale2, sample_weight=None):
        """The structure's kernels, the loss, the sample weights, the weights and the passes'
        scratch arrays."""
        self.structure, self.batch, self.C = structure, batch, float(C)
        self.Y = np.ascontiguousarray(Y, dtype=np.int64)
        self.weighted = sample_weight is not None
        self.example_weight = np.ones(batch.n_sequences) if sample_weight is None else \
            np.ascontiguousarray(sample_weight, dtype=np.float64)
        if self.example_weight.shape != (batch.n_sequences,) or \
                not np.all(self.example_weight > 0) or \
                not np.all(np.isfinite(self.example_weight)):
            raise ValueError("the dual states take one positive, finite weight per example.")
        self.kernels = structure.example_kernels(batch)
        if self.kernels is None:
            raise ValueError(f"{type(structure).__name__} has no compiled per-example "
                             "kernels.")
        take_truth(self.kernels, self.Y)
        S, d = structure.n_states_, structure.n_features_
        # the weighted Hamming loss is computed by the passes from Y and these weights
        self.loss_weights = np.ascontiguousarray(structure.loss_weights_, dtype=np.float64)
        self.true_pairwise = self._weighted_sum(
            structure.pairwise_statistics(batch, self.Y, per_sequence=True)) \
            if self.weighted else structure.pairwise_statistics(batch, self.Y)
        self.w = np.zeros(structure.size_joint_feature_)
        self.WT, self.theta = structure.split_weights(self.w)
        self.constrained = np.asarray(structure.nonnegative_, dtype=np.intp) - S * d
        if np.any(self.constrained < 0):
            raise ValueError("the compiled passes keep only pairwise weights non-negative.")
        # the unclipped pairwise weights (the same array when nothing is constrained)
        self.pair_v = np.zeros_like(self.theta) if self.constrained.size else self.theta
        # per example: a slot for each of its distinct features, and a row of scratch per slot
        indptr = batch.csr_arrays[0]
        nnz = indptr[batch.offsets[1:]] - indptr[batch.offsets[:-1]]
        self.slot = np.full(d, -1, dtype=np.int32)
        self.scratch = np.zeros((max(1, min(d, int(nnz.max(initial=1)))), S))
        self.block_gap = np.zeros(batch.n_sequences)
        # squared scales of the joint features (the l1 learner's M-steps), or none
        self.scale2 = np.zeros(0) if scale2 is None else np.ascontiguousarray(scale2, float)
        self.order = np.arange(batch.n_sequences, dtype=np.int64)

    def _weighted_sum(self, per_example, chunk=4096):
        """``sum_i s_i a_i`` of per-example rows ``a_i`` (the sample weights ``s_i``), added
        example after example as the compiled passes add their statistics (so that the
        sums of the true labellings' statistics, on both sides of ``v``, cancel exactly: the
        dual starts at ``w = 0``), in chunks of ``chunk`` rows."""
        rows = np.asarray(per_example, dtype=np.float64).reshape(self.batch.n_sequences, -1)
        total = np.zeros(rows.shape[1])
        for start in range(0, rows.shape[0], chunk):
            terms = self.example_weight[start:start + chunk, None] * rows[start:start + chunk]
            # (a running sum from the total so far: the order of one addition per example)
            total = np.cumsum(np.vstack([total[None, :], terms]), axis=0)[-1]
        return total

    def weighted_total(self, per_example):
        """``sum_i s_i a_i`` of per-example values (the plain sum without weights)."""
        return float((self.example_weight * per_example).sum()) if self.weighted else \
            float(per_example.sum())

    def weighted_per_token_total(self, per_token):
        """``sum_i s_i sum_{t in i} a_t`` of per-token values (the plain sum without
        weights)."""
        if not self.weighted:
            return float(per_token.sum())
        return float(self.example_weight @ np.bincount(
            self.batch.sequence_index, weights=per_token, minlength=self.batch.n_sequences))

    def detach_weights(self):
        """Give the state weight arrays of its own (the same values), so that its passes
        leave unchanged the array a previous solve returned as the model's weights."""
        shared = self.pair_v is self.theta
        self.w = self.w.copy()
        self.WT, self.theta = self.structure.split_weights(self.w)
        if shared:
            self.pair_v = self.theta

    def certificate(self, exact=True):
        """Return ``(w, dual)``.

        With ``exact`` the weights are first recomputed from the statistics (one product with
        the token matrix), which removes the rounding the passes' incremental updates
        accumulate; without it the dual uses the incrementally kept weights, which differ from
        the statistics' weights by rounding only.
        """
        if exact:
            self._statistics_weights()
            if self.scale2.size:  # the statistics' weights v; the effective weights s^2 v
                self._v = self.w.copy()
                self.w *= self.scale2
            if self.constrained.size:
                self.theta[:] = self.pair_v
                self.theta[self.constrained] = np.maximum(self.theta[self.constrained], 0.0)
        if self.scale2.size:  # ||s v||^2 = v . w
            if not exact:
                raise ValueError("scaled certificates are exact.")
            return self.w, self.C * self.weighted_total(self.expected_loss) \
                - 0.5 * float(self._v @ self.w)
        dual = self.C * self.weighted_total(self.expected_loss) - 0.5 * float(self.w @ self.w)
        return self.w, dual

    def primal(self):
        """``1/2 ||w||^2 + C sum_i s_i H_i(w)`` at the state's weights (margin rescaling), the
        hinge terms computed example by example in compiled code. With scaled features the
        regulariser is ``1/2 ||s v||^2 = 1/2 v . w`` at the last certificate's weights."""
        from ._factored_dual_fast import structured_hinge_pass

        hinge = structured_hinge_pass(self, np.ascontiguousarray(self.Y, dtype=np.int64))
        return 0.5 * float(self.statistic_weights @ self.w) \
            + self.C * self.weighted_total(hinge)

    def rescale(self, scale2):
        """Change the squared scales of the joint features; the dual point stays (so the next
        passes are warm-started); returns ``(w, dual)`` at the new scales."""
        self.scale2 = np.ascontiguousarray(scale2, dtype=np.float64)
        return self.certificate()

    @property
    def statistic_weights(self):
        """``v = C sum_i s_i (Psi(x_i, y_i) - E_i[Psi])`` at the last (exact) certificate."""
        return self._v if self.scale2.size else self.w


class FactoredDualState(DualWeights):
    """Marginal statistics, weights and the arrays the compiled passes read.

    Parameters
    ----------
    structure : bound structure with compiled kernels (``structure.example_kernels``)
    batch : SequenceBatch
    Y : ndarray of shape (n_tokens,)
        Encoded true labels.
    C : float
    node_marg : ndarray of shape (n_tokens, n_states)
    pair_marg : ndarray of shape (n_sequences, n_pairwise)
    scale2 : ndarray of shape (n_weights,), default=None
        Squared scales of the joint features (the l1 learner's M-steps).
    sample_weight : ndarray of shape (n_sequences,), default=None
        Positive weights of the examples (example ``i``'s dual variables sum to ``C s_i``).
    """

    def __init__(self, structure, batch, Y, C, node_marg, pair_marg, scale2=None,
                 sample_weight=None):
        self._bind(structure, batch, Y, C, scale2, sample_weight)
        self.token_loss = np.ascontiguousarray(checked_token_loss(structure, self.Y))
        self.node_marg = np.ascontiguousarray(node_marg, dtype=np.float64)
        self.pair_marg = np.ascontiguousarray(pair_marg, dtype=np.float64)
        self.expected_loss = np.bincount(
            batch.sequence_index, weights=(self.token_loss * self.node_marg).sum(axis=1),
            minlength=batch.n_sequences)
        self.certificate()

    def _statistics_weights(self):
        """``W^T`` and ``pair_v`` from the statistics: ``v = C sum_i s_i (Psi(x_i, y_i) -
        E_i[Psi])``, the unary part ``C sum_i s_i X_i^T (onehot(y_i) - marginals_i)``
        (compiled, in place)."""
        from ._factored_dual_fast import marginal_weights

        marginal_weights(self)
        expected = self._weighted_sum(self.pair_marg) if self.weighted else \
            self.pair_marg.sum(axis=0)
        self.pair_v[:] = self.C * (self.true_pairwise - expected)

    def max_loss(self):
        """``sum_i s_i sum_{t in i} max_s L[t, s]``: the (weighted) summed hinge at
        ``w = 0``."""
        return self.weighted_per_token_total(self.token_loss.max(axis=1))

