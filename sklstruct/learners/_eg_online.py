"""State of online exponentiated gradient (seed 001, section 5) for one fit.

The dual variables of example ``i`` are a Gibbs distribution whose potentials are kept per part:
rows of ``node_pot`` for its tokens and its own pairwise table ``pair_pot[i]`` (in the online
algorithm the pairwise potentials of different examples are updated at different weights, so they
are not shared). Their marginals, the expected losses and the weights are kept consistent by the
compiled pass (:func:`_online_eg.online_eg_pass`); :meth:`OnlineEGState.certificate` recomputes
the weights exactly from the marginals before the dual and primal are evaluated.
"""

import numpy as np
import scipy.sparse as sp

from ._online_eg import online_eg_pass


class OnlineEGState:
    """Potentials, marginals and weights of online EG.

    Parameters
    ----------
    structure : bound ChainStructure or MultiClass
    batch : SequenceBatch
    Y : ndarray of shape (n_tokens,)
    C : float
    node_pot, node_marg : ndarray of shape (n_tokens, n_states)
    pair_pot, pair_marg : ndarray of shape (n_sequences, n_pairwise)
        Per-example pairwise potentials and the expected pairwise statistics they induce.
    eta : ndarray of shape (n_sequences,)
        Per-example step sizes (updated in place by adaptive passes).
    probing : ndarray of shape (n_sequences,), default=None
        1 for examples whose step has not been rejected yet (their step doubles after each
        accepted try); all ones by default.
    """

    def __init__(self, structure, batch, Y, C, node_pot, node_marg, pair_pot, pair_marg, eta,
                 probing=None):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, float(C)
        X = batch.X if sp.issparse(batch.X) else sp.csr_matrix(batch.X)
        self.indptr = X.indptr.astype(np.int64)
        self.indices = X.indices.astype(np.int32)
        self.data = np.ascontiguousarray(X.data, dtype=np.float64)
        S = structure.n_states_
        self.node_loss = np.repeat(structure.loss_weights_[Y][:, None], S, axis=1)
        self.node_loss[np.arange(Y.shape[0]), Y] = 0.0
        self.node_pot, self.node_marg, self.pair_pot, self.pair_marg, self.eta = (
            np.ascontiguousarray(a, dtype=np.float64)
            for a in (node_pot, node_marg, pair_pot, pair_marg, eta))
        self.expected_loss = np.bincount(batch.sequence_index,
                                         weights=(self.node_loss * self.node_marg).sum(axis=1),
                                         minlength=batch.n_sequences)
        self.joint_feature = structure.joint_feature(batch, Y)
        self.w = np.zeros(structure.size_joint_feature_)
        self.WT, self.theta = structure.split_weights(self.w)
        self.scratch = np.zeros((structure.n_features_, S))
        self.marker = np.zeros(structure.n_features_, dtype=np.int8)
        self.order = np.arange(batch.n_sequences, dtype=np.int64)
        self.probing = np.ones(batch.n_sequences, dtype=np.int8) if probing is None \
            else np.ascontiguousarray(probing, dtype=np.int8)
        self.certificate()

    @classmethod
    def from_shared_potentials(cls, structure, batch, Y, C, node_pot, pair_table, eta,
                               n_jobs=None):
        """Start from node potentials and one pairwise table shared by all examples."""
        theta = np.zeros(structure.size_joint_feature_)
        theta[structure.n_states_ * structure.n_features_:] = pair_table
        node_marg, pair_marg, _ = structure.marginals(batch, theta, n_jobs=n_jobs,
                                                      unary=node_pot)
        pair_pot = np.tile(pair_table, (batch.n_sequences, 1))
        return cls(structure, batch, Y, C, node_pot, node_marg, pair_pot,
                   np.asarray(pair_marg).reshape(batch.n_sequences, -1), eta)

    def arrays(self):
        """The state a warm start needs (copies)."""
        return {name: getattr(self, name).copy()
                for name in ("node_pot", "node_marg", "pair_pot", "pair_marg", "eta",
                             "probing")}

    def run_pass(self, adaptive, growth=1.05, max_halvings=40, max_change=1.0):
        """One pass over the examples; returns the number of forward-backward calls."""
        calls, _ = online_eg_pass(
            self.indptr, self.indices, self.data, self.batch.offsets, self.order,
            self.node_loss, self.node_pot, self.node_marg, self.pair_pot, self.pair_marg,
            self.expected_loss, self.WT, self.theta, self.eta, self.probing, self.C, adaptive,
            growth, max_halvings, max_change, self.scratch, self.marker)
        return calls

    def certificate(self):
        """Recompute ``w`` exactly from the marginals; return ``(w, dual)``."""
        expected = self.structure.expected_joint_feature(self.batch, self.node_marg,
                                                         self.pair_marg)
        self.w[:] = self.C * (self.joint_feature - expected)
        dual = self.C * float(self.expected_loss.sum()) - 0.5 * float(self.w @ self.w)
        return self.w.copy(), dual
