"""Dual variables kept as per-example sufficient statistics (DESIGN section 4).

For example ``i`` the dual distribution over labelings is represented by its node marginals
(rows of ``node_marg``), its expected pairwise statistics ``pair_marg[i]`` and its expected loss;
``w = C sum_i (Psi(x_i, y_i) - E_i[Psi])`` is kept explicitly, with ``W^T`` and the pairwise
weights as views that compiled per-example passes update in place.
"""

import numpy as np
import scipy.sparse as sp


class FactoredDualState:
    """Marginal statistics, weights and the CSR token rows a compiled pass needs."""

    def __init__(self, structure, batch, Y, C, node_marg, pair_marg):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, float(C)
        X = batch.X if sp.issparse(batch.X) else sp.csr_matrix(batch.X)
        self.indptr = X.indptr.astype(np.int64)
        self.indices = X.indices.astype(np.int32)
        self.data = np.ascontiguousarray(X.data, dtype=np.float64)
        S = structure.n_states_
        self.node_loss = np.repeat(structure.loss_weights_[Y][:, None], S, axis=1)
        self.node_loss[np.arange(Y.shape[0]), Y] = 0.0
        self.node_marg = np.ascontiguousarray(node_marg, dtype=np.float64)
        self.pair_marg = np.ascontiguousarray(pair_marg, dtype=np.float64)
        self.expected_loss = np.bincount(batch.sequence_index,
                                         weights=(self.node_loss * self.node_marg).sum(axis=1),
                                         minlength=batch.n_sequences)
        self.joint_feature = structure.joint_feature(batch, Y)
        self.w = np.zeros(structure.size_joint_feature_)
        self.WT, self.theta = structure.split_weights(self.w)
        self.scratch = np.zeros((structure.n_features_, S))
        self.marker = np.zeros(structure.n_features_, dtype=np.int8)
        self.order = np.arange(batch.n_sequences, dtype=np.int64)
        self.certificate()

    def certificate(self):
        """Recompute ``w`` exactly from the marginals; return ``(w, dual)``."""
        expected = self.structure.expected_joint_feature(self.batch, self.node_marg,
                                                         self.pair_marg)
        self.w[:] = self.C * (self.joint_feature - expected)
        dual = self.C * float(self.expected_loss.sum()) - 0.5 * float(self.w @ self.w)
        return self.w.copy(), dual
