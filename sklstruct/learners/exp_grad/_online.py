"""State of online exponentiated gradient (Bartlett et al. 2004, section 5) for one fit.

The dual variables of example ``i`` are a Gibbs distribution whose potentials are kept per part:
rows of ``node_pot`` for its tokens and its own pairwise table ``pair_pot[i]`` (in the online
algorithm the pairwise potentials of different examples are updated at different weights, so
they are not shared). Their marginals, the expected losses and the weights are kept consistent
by the compiled pass (:func:`._online_fast.online_eg_pass`), which calls the structure's
compiled marginal oracle; :meth:`OnlineEGState.certificate` recomputes the weights exactly from
the marginals before the dual and primal are evaluated.
"""

import numpy as np

from .._factored_dual import FactoredDualState
from ._online_fast import online_eg_pass

# adaptive online steps never move a potential by more than this many nats in one visit (a
# smaller cap slows the start, a larger one lets steps overshoot; the user guide's "Choosing
# an estimator" page gives the sweep of the cap)
ONLINE_MAX_CHANGE = 3.0


class OnlineEGState(FactoredDualState):
    """Potentials, marginals and weights of online EG.

    Parameters
    ----------
    structure : bound structure whose compiled kernels have marginals
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
    sample_weight : ndarray of shape (n_sequences,), default=None
        Positive weights of the examples (example ``i``'s dual variables sum to ``C s_i``).
    """

    def __init__(self, structure, batch, Y, C, node_pot, node_marg, pair_pot, pair_marg, eta,
                 probing=None, sample_weight=None):
        self.node_pot, self.pair_pot, self.eta = (
            np.ascontiguousarray(a, dtype=np.float64) for a in (node_pot, pair_pot, eta))
        self.probing = np.ones(batch.n_sequences, dtype=np.int8) if probing is None \
            else np.ascontiguousarray(probing, dtype=np.int8)
        super().__init__(structure, batch, Y, C, node_marg, pair_marg,
                         sample_weight=sample_weight)
        if not self.kernels.has_marginals:
            raise ValueError(f"{type(structure).__name__}'s compiled kernels have no "
                             "marginals.")

    @classmethod
    def from_shared_potentials(cls, structure, batch, Y, C, node_pot, pair_table, eta,
                               n_jobs=None, sample_weight=None):
        """Start from node potentials and one pairwise table shared by all examples."""
        node_marg, pair_marg, _ = structure.marginals(batch, node_pot, pair_table,
                                                      n_jobs=n_jobs)
        pair_pot = np.tile(pair_table, (batch.n_sequences, 1))
        return cls(structure, batch, Y, C, node_pot, node_marg, pair_pot,
                   np.asarray(pair_marg).reshape(batch.n_sequences, -1), eta,
                   sample_weight=sample_weight)

    def run_pass(self, adaptive, order=None, growth=1.05, max_halvings=40,
                 max_change=ONLINE_MAX_CHANGE):
        """One pass over the examples (in ``order``, by default their own); returns the number
        of marginal-oracle calls."""
        order = self.order if order is None else np.ascontiguousarray(order, dtype=np.int64)
        calls, _ = online_eg_pass(self, order, adaptive, growth, max_halvings, max_change)
        return calls
