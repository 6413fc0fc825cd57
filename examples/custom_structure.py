"""
Writing a structure
===================

A structure owns the joint feature map, the loss and the inference oracles; the learners only
call its documented interface (see ``doc/writing_a_structure.rst``). This example writes two:

* ``SecondOrderChain``, from scratch: token labels scored by per-state weights, transitions
  between neighbours **and** between tokens two apart (``y_t, y_{t+2}``). Inference runs the
  library's first-order chain kernels on pair states ``(y_{t-1}, y_t)``;
* ``ConfusionCostChain``: a :class:`~sklstruct.ChainStructure` whose loss charges a cost per
  (true, predicted) label pair; it keeps the chain's compiled kernels, so the compiled
  per-example passes train it too.

Both are trained by every learner whose oracles they provide, and each fit is checked against
the exact optimum of the shared objective, found by enumerating every labelling of a tiny
problem.
"""

import itertools
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, StructSVMCuttingPlane)
from sklstruct._inference.chain import forward_backward, viterbi
from sklstruct.structures import BaseStructure
from sklstruct.structures._base import check_rescale

# a finite score low enough that a configuration with it never wins and has probability 0
IMPOSSIBLE = -1e30


class SecondOrderChain(BaseStructure):
    """``w . Psi(x, y) = sum_t W[y_t] . x_t + sum_t A[y_t, y_{t+1}] + sum_t B[y_t, y_{t+2}]``.

    The pairwise block of the weights is ``[A.ravel(), B.ravel()]`` (``2 S^2`` values). The
    loss is the (class-weighted) Hamming loss of the base class.
    """

    @property
    def n_pairwise_(self):
        return 2 * self.n_states_ ** 2

    # ---- joint features -------------------------------------------------------------------
    def _pairs(self, batch, Y, gap):
        """Sequence index and labels of every pair of tokens ``gap`` apart in a sequence."""
        t = np.arange(batch.n_tokens - gap)
        same = batch.sequence_index[t] == batch.sequence_index[t + gap]
        t = t[same]
        return batch.sequence_index[t], Y[t], Y[t + gap]

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        S = self.n_states_
        blocks = []
        for gap in (1, 2):
            seq, a, b = self._pairs(batch, Y, gap)
            if per_sequence:
                counts = np.zeros((batch.n_sequences, S * S))
                np.add.at(counts, (seq, a * S + b), 1.0)
            else:
                counts = np.bincount(a * S + b, minlength=S * S,
                                     weights=None if weights is None else weights[seq])
            blocks.append(np.asarray(counts, dtype=np.float64))
        return np.concatenate(blocks, axis=-1)

    def pairwise_count_blocks(self, batch):
        S = self.n_states_
        return [(0, S * S, np.maximum(batch.lengths - 1.0, 0.0)),
                (S * S, 2 * S * S, np.maximum(batch.lengths - 2.0, 0.0))]

    # ---- the pair-state chain ---------------------------------------------------------------
    def _pair_chain(self, batch, unary, pairwise):
        """Potentials over pair states ``q = (a, b)``, ``a`` the previous label or ``S`` (no
        previous token), ``b`` the current one: ``(S + 1) S`` states."""
        S = self.n_states_
        A, B = pairwise[:S * S].reshape(S, S), pairwise[S * S:].reshape(S, S)
        prev, cur = np.divmod(np.arange((S + 1) * S), S)
        first = np.zeros(batch.n_tokens, dtype=bool)
        first[batch.offsets[:-1]] = True
        pair_unary = unary[:, cur].copy()
        pair_unary[np.ix_(first, prev < S)] = IMPOSSIBLE   # a first token has no previous
        pair_unary[np.ix_(~first, prev == S)] = IMPOSSIBLE  # the others have one
        # (a, b) -> (b', c): possible when b' = b, scored A[b, c] (+ B[a, c] when a is real)
        transition = np.full(((S + 1) * S, (S + 1) * S), IMPOSSIBLE)
        for q1, q2 in itertools.product(range((S + 1) * S), repeat=2):
            if prev[q2] == cur[q1] and prev[q2] < S:
                transition[q1, q2] = A[cur[q1], cur[q2]] + (B[prev[q1], cur[q2]]
                                                            if prev[q1] < S else 0.0)
        return pair_unary, transition, cur

    def decode(self, batch, unary, pairwise, n_jobs=None):
        pair_unary, transition, cur = self._pair_chain(batch, unary, pairwise)
        labels, _ = viterbi(pair_unary, batch.offsets, transition, n_jobs=n_jobs)
        return cur[labels]

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        if rescale != "margin":
            raise ValueError("SecondOrderChain supports margin rescaling only.")
        token_loss = self.token_loss(Y) if token_loss is None else token_loss
        labels = self.decode(batch, unary + token_loss, pairwise, n_jobs=n_jobs)
        losses = self.loss(batch, Y, labels)
        return labels, losses, self.score(batch, unary, pairwise, labels)

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        S = self.n_states_
        pair_unary, transition, cur = self._pair_chain(batch, unary, pairwise)
        pair_node, pair_edges, log_z = forward_backward(pair_unary, batch.offsets, transition,
                                                        n_jobs=n_jobs)
        node = np.zeros((batch.n_tokens, S))
        np.add.at(node.T, cur, pair_node.T)
        # E[A counts] from the pair-state edges; E[B counts] from edges whose source is real
        prev = np.arange((S + 1) * S) // S
        expected = np.zeros((batch.n_sequences, 2 * S * S))
        for q1, q2 in itertools.product(range((S + 1) * S), repeat=2):
            if prev[q2] == cur[q1] and prev[q2] < S:
                expected[:, cur[q1] * S + cur[q2]] += pair_edges[:, q1, q2]
                if prev[q1] < S:
                    expected[:, S * S + prev[q1] * S + cur[q2]] += pair_edges[:, q1, q2]
        return node, expected, log_z


class ConfusionCostChain(ChainStructure):
    """A first-order chain whose loss is ``Delta(y, ybar) = sum_t cost[y_t, ybar_t]``."""

    def __init__(self, *, start_end=True, cost=None):
        super().__init__(start_end=start_end)
        self.cost = cost

    def token_loss(self, Y):
        return np.asarray(self.cost, dtype=np.float64)[Y]


# ---- the exact optimum of a tiny problem, by enumeration ----------------------------------
def exact_objective(model, X, y):
    """``min_w 1/2 ||w||^2 + C sum_i max_ybar [Delta + w.Psi(ybar) - w.Psi(y_i)]`` (SLSQP over
    every labelling of every sequence)."""
    structure, C = model.structure_, model.C
    batch, y_flat, _ = model._validate_input(X, y, reset=False)
    Y = model._encode_known(np.asarray(y_flat))
    rows, offsets, owner = [], [], []
    for i in range(batch.n_sequences):
        sub, tokens = batch.select([i])
        psi_true = structure.joint_feature(sub, Y[tokens])
        for ybar in itertools.product(range(structure.n_states_), repeat=sub.n_tokens):
            ybar = np.array(ybar)
            rows.append(psi_true - structure.joint_feature(sub, ybar))
            offsets.append(structure.loss(sub, Y[tokens], ybar)[0])
            owner.append(i)
    G, c, owner = np.array(rows), np.array(offsets), np.array(owner)
    size, n = G.shape[1], batch.n_sequences
    constraint = np.hstack([G, np.eye(n)[owner]])  # G w + xi_i >= c
    result = minimize(lambda z: 0.5 * z[:size] @ z[:size] + C * z[size:].sum(),
                      np.zeros(size + n), jac=lambda z: np.r_[z[:size], C * np.ones(n)],
                      constraints=[{"type": "ineq", "fun": lambda z: constraint @ z - c,
                                    "jac": lambda z: constraint}],
                      bounds=[(None, None)] * size + [(0, None)] * n, method="SLSQP",
                      options={"ftol": 1e-14, "maxiter": 1000})
    return result.fun


def tiny_problem(seed=0, n_sequences=6, n_states=2, n_features=3, max_length=4):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=1.5, size=(n_states, n_features))
    X, y = [], []
    for _ in range(n_sequences):
        labels = rng.integers(n_states, size=rng.integers(1, max_length + 1))
        X.append(means[labels] + rng.normal(size=(len(labels), n_features)))
        y.append(labels)
    return X, y


LEARNERS = {
    "StructSVMCuttingPlane 1-slack": lambda s: StructSVMCuttingPlane(s, C=1.0, tol=1e-7),
    "StructSVMCuttingPlane n-slack": lambda s: StructSVMCuttingPlane(s, C=1.0, tol=1e-7,
                                                                     variant="n-slack"),
    "M3NExpGrad": lambda s: M3NExpGrad(s, C=1.0, tol=1e-6, max_iter=20000, random_state=0),
    "M3NExcessiveGap": lambda s: M3NExcessiveGap(s, C=1.0, tol=1e-6, max_iter=20000),
    "M3NSimplicialDecomposition": lambda s: M3NSimplicialDecomposition(
        s, C=1.0, tol=1e-7, max_iter=5000, random_state=0),
}


def main():
    X, y = tiny_problem()
    structures = {"SecondOrderChain": SecondOrderChain(),
                  "ConfusionCostChain": ConfusionCostChain(cost=[[0.0, 1.0], [3.0, 0.0]])}
    print(f"{'structure':<20}{'learner':<32}{'objective':>12}{'exact':>12}{'gap':>10}")
    for structure_name, structure in structures.items():
        for learner_name, make in LEARNERS.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = make(structure).fit(X, y)
            exact = exact_objective(model, X, y)
            print(f"{structure_name:<20}{learner_name:<32}{model.objective(X, y):>12.6f}"
                  f"{exact:>12.6f}{model.history_['gap'][-1]:>10.1e}")
        l1 = L1M3N(structure, C=1.0, solver="cutting_plane").fit(X, y)
        print(f"{structure_name:<20}{'L1M3N (l1 objective)':<32}{l1.objective(X, y):>12.6f}"
              f"{'':>12}{l1.history_['gap'][-1]:>10.1e}")
    model = StructSVMCuttingPlane(SecondOrderChain(), C=1.0).fit(X, y)
    print("\nSecondOrderChain predictions:", [p.tolist() for p in model.predict(X[:3])])


if __name__ == "__main__":
    main()
