"""Algorithm 2 of Zhang, Saha and Vishwanathan (excessive gap reduction with Bregman
projections) on the marginals of a structure: :class:`ExcessiveGapRun` takes the bound
structure, the data, ``C``, the geometry of the weights (explicit, or through a token kernel
matrix) and the fit's :class:`~sklstruct._progress.Certificate`, whose ``tol``, ``max_iter``
and ``max_time`` stop it.
"""

import numpy as np
from threadpoolctl import threadpool_limits

from ...structures._base import checked_token_loss, structured_hinge
from ._geometry import LinearGeometry


def worst_case_mu(structure, batch, token_norms, C, weights=None):
    """The worst-case curvature ``L / sigma = max_i ||psi_i||^2 / lambda`` of the dual (eq.
    (32)), in the units of the objective ``1/2 ||w||^2 + C sum_i s_i H_i(w)``: the
    ``mu_1`` of the paper's schedule and the largest curvature estimate of the adaptive one.

    ``||psi_i||^2`` is bounded for weights tied across positions by
    ``2 (sum_t ||x_t||)^2 + 2 sum_b T_b^2`` over the structure's pairwise count blocks of
    totals ``T_b``. With sample weights the bound is ``(sum_i s_i) C max_i ||psi_i||^2``: the
    prox function ``C sum_i s_i KL_i`` is 1-strongly convex in the norm
    ``sqrt(C sum_i s_i ||h_i||_1^2)``, in which (Cauchy-Schwarz) the dual's curvature is at
    most ``C sum_i s_i ||psi_i||^2``.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    token_norms : ndarray of shape (n_tokens,)
        ``||x_t||`` in the feature space of the model (the kernel's for a kernel).
    C : float
    weights : ndarray of shape (n_sequences,), default=None

    Returns
    -------
    mu : float
    """
    pairwise_bound = structure.max_pairwise_norm_sq(batch)
    if pairwise_bound is None:
        raise ValueError(f"M3NExcessiveGap needs pairwise_count_blocks covering the "
                         f"pairwise statistics of {type(structure).__name__}.")
    feature_sum = np.bincount(batch.sequence_index, weights=token_norms,
                              minlength=batch.n_sequences)
    # ||Psi(y) - Psi(y')||^2 <= 2 (sum_t ||x_t||)^2 + 2 sum_b T_b^2 (counts are >= 0)
    bound = 2.0 * feature_sum ** 2 + 2.0 * pairwise_bound
    n_examples = batch.n_sequences if weights is None else float(weights.sum())
    worst = n_examples * C * float(bound.max())
    if not np.isfinite(worst):
        raise ValueError("M3NExcessiveGap: the smoothing bound max ||psi||^2 overflows "
                         "for features of this magnitude; rescale X (for example with "
                         "sklearn.preprocessing.MaxAbsScaler) and C with it.")
    return worst


class ExcessiveGapRun:
    """One run of Algorithm 2 from ``mu_1``; keeps ``w_k`` and the marginals of ``alpha_k``.

    The structure gives the marginals (its exp-oracle on potentials), the loss-augmented
    decoding for the primal, and the count blocks for renormalising the marginals; the
    geometry keeps the unary part of the weights (explicit, or through a kernel matrix).
    ``alpha_k`` is kept as node marginals per token and its expected pairwise statistics
    summed over the examples: ``w(alpha)`` and ``D(alpha)`` are linear in those sums, and the
    convex combinations of the algorithm carry over to them.

    With sample weights ``s_i`` example ``i``'s dual variables sum to ``C s_i``: they are
    ``C s_i`` times a distribution over its labellings, and the prox function is
    ``C sum_i s_i KL(alpha_i / (C s_i) || centre_i)``. Each example's smoothed best response
    and Bregman projection are then those of the unweighted run (its ``C s_i`` cancels in
    them); the weights enter only the sums over the examples (``w(alpha)``, ``D(alpha)``,
    the smoothed and the exact primal).
    """

    def __init__(self, structure, batch, Y, C, geometry, certificate, n_jobs, init_bias=0.0,
                 weights=None):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, C
        self.geometry, self.certificate, self.n_jobs = geometry, certificate, n_jobs
        self.weights = weights
        self.token_loss = checked_token_loss(structure, Y)
        # C per token: C, or the column C s_i of every token of example i
        self.token_C = C if weights is None else \
            (C * weights)[batch.sequence_index][:, np.newaxis]
        self.true_unary = np.multiply(structure.onehot(Y), self.token_C)
        self.true_pairwise = C * structure.pairwise_statistics(batch, Y, weights=weights)
        self.calls = 0
        # the prox centre alpha_0, whose node potentials are init_bias on the true states
        # (0: uniform), and log Z_0 = max_alpha KL(alpha || alpha_0) per example (the
        # log-number of labellings log |Y_i| for the uniform centre); the centre's potentials
        # enter every smoothed best response and Bregman projection
        self.centre = init_bias * structure.onehot(Y) if init_bias else 0.0
        self.prox_node, self.prox_pair, self.log_sizes = self._marginals(
            np.zeros((batch.n_tokens, structure.n_states_)) + self.centre,
            np.zeros(structure.n_pairwise_))
        self.count_blocks = [(start, stop, self._example_sum(np.asarray(totals, np.float64)))
                             for start, stop, totals in structure.pairwise_count_blocks(batch)]
        self.n_increases = 0
        # token x state work arrays, and two sets of the arrays of an iterate (w's unary
        # part, its scores, node marginals: the state's and a candidate's, since a rejected
        # step leaves the state as it was): the steps allocate no array of that size beyond
        # the products' and the marginals' results
        self._potentials = np.empty((batch.n_tokens, structure.n_states_))
        self._scratch = np.empty((batch.n_tokens, structure.n_states_))
        # (the compiled sparse products write into arrays they are given)
        self._compiled = getattr(geometry, "csr", None) is not None
        self._hat_scores = np.empty((batch.n_tokens, structure.n_states_)) \
            if self._compiled else None
        self._iterate_arrays = []
        self._rep_work = self._w = None

    # --------------------------------------------------------------- building blocks
    def _example_sum(self, values):
        """``sum_i s_i values_i`` over the examples (``sum_i values_i`` without weights)."""
        return float(np.sum(values)) if self.weights is None else float(self.weights @ values)

    def _marginals(self, unary, pairwise):
        """Node marginals, expected pairwise statistics summed over the batch (weighted by
        ``s_i``), log Z."""
        self.calls += self.batch.n_sequences
        if self.weights is None:
            node, pair, log_z = self.structure.summed_marginals(self.batch, unary, pairwise,
                                                                n_jobs=self.n_jobs)
            return node, np.asarray(pair, dtype=np.float64).ravel(), log_z
        node, pair, log_z = self.structure.marginals(self.batch, unary, pairwise,
                                                     n_jobs=self.n_jobs)
        pair = np.asarray(pair, dtype=np.float64).reshape(self.batch.n_sequences, -1)
        return node, self.weights @ pair, log_z

    def _weights_of(self, node, pair, out=None):
        """``w(alpha)``: representation of its unary part (into ``out``'s arrays when the
        geometry takes them) and its pairwise part."""
        # A = C onehot(Y) - C node (C s_i on example i's tokens), in the work array (as
        # true_unary - C * node)
        A = np.multiply(node, self.token_C, out=self._scratch)
        np.subtract(self.true_unary, A, out=A)
        return self.geometry.represent(A, out=out), self.true_pairwise - self.C * pair

    def _work_rep(self, rep):
        """An array for a representation beside the iterates' (compiled products only)."""
        if self._rep_work is None and self._compiled:
            self._rep_work = np.empty_like(rep)
        return self._rep_work

    def _spare_iterate(self, state):
        """The set of iterate arrays ``(rep, scores, node)`` that ``state`` does not use."""
        for arrays in self._iterate_arrays:
            if arrays[2] is not state[3]:
                return arrays
        rep, scores, node = state[0], state[2], state[3]
        arrays = (self.geometry.empty_like(rep), np.empty_like(scores), np.empty_like(node))
        self._iterate_arrays.append(arrays)
        return arrays

    def _add_centre(self, potentials):
        if isinstance(self.centre, np.ndarray) or self.centre != 0.0:
            potentials += self.centre
        return potentials

    def _flat_weights(self, rep, theta):
        """The weights as one vector, in an array that every iteration reuses (the
        certificate copies what it keeps; the last iterate's is the fit's)."""
        if self._w is None:
            self._w = np.zeros(self.structure.size_joint_feature_)
        w = self._w
        n_unary = w.shape[0] - theta.shape[0]
        if isinstance(self.geometry, LinearGeometry):
            w[:n_unary] = rep.ravel()
        w[n_unary:] = theta
        return w

    def _dual(self, node, pair):
        rep, theta = self._weights_of(node, pair, out=self._rep_work)
        token_losses = np.multiply(self.token_loss, node, out=self._scratch)
        if self.weights is None:
            expected_loss = self.C * float(token_losses.sum())
        else:  # (C s_i on example i's tokens)
            token_losses *= self.token_C
            expected_loss = float(token_losses.sum())
        return expected_loss - 0.5 * (self.geometry.norm_sq(rep) + float(theta @ theta))

    def _renormalise(self, node, pair):
        """Remove the rounding drift of the convex combinations; return the drift.

        Every token's marginals sum to one; every count block of the summed pairwise
        statistics to its total over the examples. The drift is the largest deviation of a
        token's sum from one and of a block's sum relative to its total.
        """
        sums = node.sum(axis=1)
        drift = float(np.max(np.abs(sums - 1.0)))
        np.maximum(node, 0.0, out=node)
        node /= node.sum(axis=1, keepdims=True)
        for start, stop, total in self.count_blocks:
            part = pair[start:stop]
            if total > 0:
                drift = max(drift, abs(float(part.sum()) - total) / total)
            np.maximum(part, 0.0, out=part)
            summed = float(part.sum())
            part *= total / summed if summed > 0 else 0.0
        return drift

    # --------------------------------------------------------------- the algorithm
    def _smoothed_primal(self, norm_sq, scores, theta, mu):
        """``n C J_mu(w)`` and the marginals of ``alpha_mu(w)`` (eq. (38))."""
        potentials = np.add(self.token_loss, scores, out=self._potentials)
        potentials /= mu
        node, pair, log_z = self._marginals(self._add_centre(potentials), theta / mu)
        true_scores = self.structure.score(self.batch, scores, theta, self.Y)
        smoothed = 0.5 * norm_sq + self.C * self._example_sum(mu * log_z - true_scores) \
            - self.C * mu * self._example_sum(self.log_sizes)
        return smoothed, node, pair

    def _condition_holds(self, smoothed, dual):
        """The excessive gap condition (11), ``J_mu(w) <= D(alpha)``, up to rounding relative
        to the two values (an absolute allowance would accept steps that break it by far
        when the objective is small: a tiny ``C`` or tiny sample weights)."""
        return smoothed <= dual + 1e-9 * max(abs(dual), abs(smoothed))

    def _step(self, tau, state):
        """Steps 3-7 of Algorithm 1 from ``state`` with ``tau``; returns the next state and the
        smoothed primal of its weights (whose marginals are the next step's ``alpha_mu``)."""
        rep, theta, scores, node, pair, mu, smooth_node, smooth_pair = state
        geometry, token_loss, scratch = self.geometry, self.token_loss, self._scratch
        # (in place, each array as the expression in its comment evaluates it; the state's
        # arrays are only read)
        new_rep, new_scores, new_node = self._spare_iterate(state)
        # hat_node = (1 - tau) node + tau smooth_node, in new_node until the new node
        hat_node = np.multiply(node, 1.0 - tau, out=new_node)
        hat_node += np.multiply(smooth_node, tau, out=scratch)
        hat_pair = (1.0 - tau) * pair + tau * smooth_pair
        hat_rep, hat_theta = self._weights_of(hat_node, hat_pair, out=self._work_rep(rep))
        hat_scores = geometry.scores(hat_rep, out=self._hat_scores)
        # alpha~ = V(alpha_mu(w_k), -tau/((1-tau) mu) grad D(alpha^)), eq. (40): potentials
        # (token_loss + scores) / mu + centre + c (token_loss + hat_scores)
        c = tau / ((1.0 - tau) * mu)
        potentials = np.add(token_loss, scores, out=self._potentials)
        potentials /= mu
        self._add_centre(potentials)
        np.add(token_loss, hat_scores, out=scratch)
        scratch *= c
        potentials += scratch
        tilde_node, tilde_pair, _ = self._marginals(potentials, theta / mu + c * hat_theta)
        # scores = (1 - tau) scores + tau hat_scores (before hat_rep, which may hold
        # hat_scores, is overwritten)
        np.multiply(scores, 1.0 - tau, out=new_scores)
        new_scores += np.multiply(hat_scores, tau, out=scratch)
        geometry.combine_into(new_rep, 1.0 - tau, rep, tau, hat_rep)
        theta = (1.0 - tau) * theta + tau * hat_theta
        # node = (1 - tau) node + tau tilde_node
        np.multiply(node, 1.0 - tau, out=new_node)
        tilde_node *= tau
        new_node += tilde_node
        pair = (1.0 - tau) * pair + tau * tilde_pair
        drift = self._renormalise(new_node, pair)
        mu = (1.0 - tau) * mu
        norm_sq = geometry.norm_sq(new_rep) + float(theta @ theta)
        smoothed, smooth_node, smooth_pair = self._smoothed_primal(norm_sq, new_scores, theta,
                                                                   mu)
        return ((new_rep, theta, new_scores, new_node, pair, mu, smooth_node, smooth_pair),
                smoothed, drift)

    def run(self, worst, adaptive):
        """:meth:`_run`; with the compiled sparse products (``geometry.csr``), BLAS on one
        thread meanwhile: it then computes only the norms, whose sums are so the same bits
        whatever BLAS's threads, and its threads would spin beside the products' and the
        marginals' after each (dense features keep BLAS's threads for their products)."""
        if not self._compiled:
            return self._run(worst, adaptive)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._run(worst, adaptive)

    def _run(self, worst, adaptive):
        """Iterate until the gap certificate (or the callback, or ``max_time``) stops the fit,
        or the certificate's ``max_iter``.

        ``adaptive=False``: the paper's schedule, ``mu_1 = worst`` (``L / sigma``) and
        ``tau_k = 2 / (k + 3)``. ``adaptive=True``: ``tau_k`` solves
        ``tau^2 / (1 - tau) = mu_k / L_k`` for an estimate ``L_k`` of the curvature ``L``; the
        excessive gap condition (11) is checked at the new iterate (with the marginals the next
        step needs anyway) and a step that breaks it is redone with ``L_k`` twice as large
        (never beyond the worst case, where the paper's proof guarantees it); an accepted step
        lowers ``L_k`` by a tenth. The initial ``mu_1 = L_1`` is found the same way (from
        ``4^-8`` times the worst case, four times larger after each failure). So (11), and with it
        eq. (12) (``gap_k <= mu_k D`` in the paper's scale, ``(sum_i s_i) C mu_k D`` in
        ours), holds at every iterate.
        """
        C, geometry, token_loss = self.C, self.geometry, self.token_loss
        curvature = worst * 4.0 ** -8 if adaptive else worst
        # initialisation: alpha_0 the prox centre, w_1 = w(alpha_0), alpha_1 = V(alpha_0, ...)
        rep, theta = self._weights_of(self.prox_node, self.prox_pair)
        scores = geometry.scores(rep)
        norm_sq = geometry.norm_sq(rep) + float(theta @ theta)
        while True:
            mu = curvature
            # alpha_1 = V(alpha_0, -grad D(alpha_0) / mu_1) is alpha_mu1(w_1)
            smoothed, node, pair = self._smoothed_primal(norm_sq, scores, theta, mu)
            dual = self._dual(node, pair) if adaptive else None
            if not adaptive or curvature >= worst or self._condition_holds(smoothed, dual):
                break
            curvature = min(4.0 * curvature, worst)
            self.n_increases += 1
        state = (rep, theta, scores, node, pair, mu, node, pair)
        drift = 0.0
        for k in range(1, self.certificate.max_iter + 1):
            rep, theta, scores, node, pair, mu, _, _ = state
            w = self._flat_weights(rep, theta)
            norm_sq = geometry.norm_sq(rep) + float(theta @ theta)
            hinge, _, _ = structured_hinge(self.structure, self.batch, self.Y, scores, theta,
                                           n_jobs=self.n_jobs, token_loss=token_loss)
            self.calls += self.batch.n_sequences
            primal = 0.5 * norm_sq + C * self._example_sum(hinge)
            if dual is None:  # (else D(alpha_k) from the check of the excessive gap condition)
                dual = self._dual(node, pair)
            self.w, self.rep, self.norm_sq, self.n_iter, self.mu = w, rep, norm_sq, k, mu
            if self.certificate.check(k, primal, dual, self.calls, w=w, mu=mu,
                                      smoothed_primal=smoothed, drift=drift):
                break
            if not adaptive:
                dual = None
                state, smoothed, drift = self._step(2.0 / (k + 3.0), state)
                continue
            while True:
                ratio = mu / curvature
                tau = 0.5 * (np.sqrt(ratio * ratio + 4.0 * ratio) - ratio)
                new_state, new_smoothed, new_drift = self._step(tau, state)
                dual = None
                if curvature >= worst:
                    break
                dual = self._dual(new_state[3], new_state[4])
                if self._condition_holds(new_smoothed, dual):
                    break
                curvature = min(2.0 * curvature, worst)
                self.n_increases += 1
            state, smoothed, drift = new_state, new_smoothed, new_drift
            curvature *= 0.9
        self.certificate.finish(self.n_iter)
