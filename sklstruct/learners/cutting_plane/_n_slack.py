"""The n-slack cutting-plane algorithm (Joachims, Finley and Yu 2009, Algorithms 1 and 2)
with batched QP updates.

Each example keeps its own working set of constraints. Examples are visited in batches: the
separation oracle runs over the whole batch in compiled code, every example whose most
violated constraint exceeds its current slack by more than ``epsilon`` gets that constraint, and the
QP is then re-optimised on the batch's blocks (section 4, "batch updates"). After every pass all
blocks are swept until the QP is solved to the required precision, the exact primal objective
is computed with one more oracle pass, and the duality gap is recorded.
"""

import numpy as np
from sklearn.utils import check_random_state

from ..._inference._validation import split_into_chunks
from ...structures._base import checked_token_loss, hinge_terms
from ...utils._growable import GrowableArray
from ._n_slack_fast import BlockGramCache, margins, sweep

# the certificate's oracle runs over chunks of about this many tokens: their scores stay in
# cache and its arrays small (one call over CoNLL-2000's 211,727 tokens took 2.3 times as
# long as calls over chunks of 100 to 500 sentences)
CERTIFICATE_CHUNK_TOKENS = 16384


class NSlackConstraints:
    """Per-example constraints ``w . g_k >= c_k - xi_i`` stored as labelings (see _block_qp).

    The unary part of ``g_k`` is kept as its wrong tokens (token, true state, wrong state,
    scale), the pairwise part as its nonzero entries (``pair_ptr``, ``pair_index``,
    ``pair_value``, ascending indices): a labeling changes few transitions. Each constraint
    gets a serial number, growing with the order of addition, by which the sweeps' Gram cache
    recognises the constraints it has seen.
    """

    def __init__(self):
        self.entry_ptr = GrowableArray(dtype=np.int64)
        self.entry_ptr.extend(np.zeros(1, dtype=np.int64))
        self.tokens = GrowableArray(dtype=np.int64)
        self.true_state = GrowableArray(dtype=np.int32)
        self.wrong_state = GrowableArray(dtype=np.int32)
        self.scale = GrowableArray()
        self.pair_ptr = GrowableArray(dtype=np.int64)
        self.pair_ptr.extend(np.zeros(1, dtype=np.int64))
        self.pair_index = GrowableArray(dtype=np.int64)
        self.pair_value = GrowableArray()
        self.offsets = GrowableArray()
        self.alpha = GrowableArray()
        self.owner = GrowableArray(dtype=np.int64)
        self.last_active = GrowableArray(dtype=np.int64)
        self.serial = GrowableArray(dtype=np.int64)
        self.n_added = 0
        self._blocks = None  # (block_ptr, members) while up to date

    def __len__(self):
        return self.offsets.data.shape[0]

    def add(self, sequences, tokens, token_owner, true_state, wrong_state, token_scale,
            pairwise, offsets, stamp):
        """Append one constraint per entry of ``sequences`` (entries sorted by owner)."""
        counts = np.bincount(np.searchsorted(sequences, token_owner), minlength=len(sequences))
        start = self.entry_ptr.data[-1]
        self.entry_ptr.extend(start + np.cumsum(counts))
        self.tokens.extend(tokens)
        self.true_state.extend(true_state.astype(np.int32))
        self.wrong_state.extend(wrong_state.astype(np.int32))
        self.scale.extend(token_scale)
        rows, columns = np.nonzero(pairwise)
        self.pair_ptr.extend(self.pair_ptr.data[-1] + np.cumsum(
            np.bincount(rows, minlength=len(sequences))))
        self.pair_index.extend(columns.astype(np.int64))
        self.pair_value.extend(pairwise[rows, columns])
        self.offsets.extend(offsets)
        self.alpha.extend(np.zeros(len(sequences)))
        self.owner.extend(np.asarray(sequences, dtype=np.int64))
        self.last_active.extend(np.full(len(sequences), stamp, dtype=np.int64))
        self.serial.extend(np.arange(self.n_added, self.n_added + len(sequences)))
        self.n_added += len(sequences)
        if self._blocks is not None:
            # the new constraints have the largest indices: each goes last in its block
            block_ptr, members = self._blocks
            owners = np.asarray(sequences, dtype=np.int64)
            new = np.arange(len(self) - len(sequences), len(self), dtype=np.int64)
            members = np.insert(members, block_ptr[owners + 1], new)
            block_ptr = block_ptr.copy()
            block_ptr[1:] += np.cumsum(np.bincount(owners, minlength=block_ptr.shape[0] - 1))
            self._blocks = block_ptr, members

    def remove_inactive(self, stamp, window):
        """Drop constraints whose dual variable stayed zero since ``stamp - window``.

        Their dual variables are zero, so the weights do not change.
        """
        self.last_active.data[self.alpha.data > 0] = stamp
        keep = stamp - self.last_active.data < window
        if keep.all():
            return
        lengths = np.diff(self.entry_ptr.data)
        on_entries = np.repeat(keep, lengths)
        for array in (self.tokens, self.true_state, self.wrong_state, self.scale):
            array.select(on_entries)
        pair_lengths = np.diff(self.pair_ptr.data)
        on_pairs = np.repeat(keep, pair_lengths)
        for array in (self.pair_index, self.pair_value):
            array.select(on_pairs)
        self.pair_ptr.assign(np.concatenate([[0], np.cumsum(pair_lengths[keep])]))
        for array in (self.offsets, self.alpha, self.owner, self.last_active,
                      self.serial):
            array.select(keep)
        self.entry_ptr.assign(np.concatenate([[0], np.cumsum(lengths[keep])]))
        self._blocks = None

    def blocks(self, n_blocks):
        """``(block_ptr, members)``: the constraints of every example (in the order of their
        indices), kept up to date as constraints are added."""
        if self._blocks is None or self._blocks[0].shape[0] != n_blocks + 1:
            owner = self.owner.data
            members = np.argsort(owner, kind="stable").astype(np.int64)
            block_ptr = np.zeros(n_blocks + 1, dtype=np.int64)
            np.cumsum(np.bincount(owner, minlength=n_blocks), out=block_ptr[1:])
            self._blocks = block_ptr, members
        return self._blocks


class NSlackSolver:
    """State and steps of the n-slack algorithm for one fit."""

    def __init__(self, structure, batch, Y, C, rescale, epsilon, n_jobs):
        self.structure, self.batch, self.Y = structure, batch, Y
        self.rescale, self.epsilon, self.n_jobs = rescale, epsilon, n_jobs
        self.indptr, self.indices, self.data = batch.csr_arrays
        self.token_loss = checked_token_loss(structure, Y) if structure.loss_decomposes else None
        n_features = structure.n_features_
        # the flat weights; WT and theta are views of it that the compiled sweeps update
        self.w = np.zeros(structure.size_joint_feature_)
        self.WT, self.theta = structure.split_weights(self.w)
        # (the sweeps' slots of an example's features, -1 between uses)
        self.slot = np.full(n_features, -1, dtype=np.int32)
        self.bound = np.broadcast_to(np.asarray(C, dtype=np.float64), (batch.n_sequences,)).copy()
        self.constraints = NSlackConstraints()
        self.gram_cache = BlockGramCache(batch.n_sequences)

    def slacks(self, sequences):
        """Current slack ``max(0, max_k c_k - w . g_k)`` of each example in ``sequences``."""
        c = self.constraints
        slack = np.zeros(self.batch.n_sequences)
        # their constraints, through the blocks (kept as constraints are added)
        block_ptr, members = c.blocks(self.batch.n_sequences)
        sequences = np.asarray(sequences, dtype=np.int64)
        first, counts = block_ptr[sequences], np.diff(block_ptr)[sequences]
        ends = np.cumsum(counts)
        which = members[np.repeat(first - (ends - counts), counts)
                        + np.arange(ends[-1] if ends.size else 0)]
        if which.size:
            out = np.empty(which.shape[0])
            margins(self, which, out)
            np.maximum.at(slack, c.owner.data[which], c.offsets.data[which] - out)
        return slack[sequences]

    def separate(self, sequences):
        """Oracle over ``sequences``; returns their hinge terms and the labelings' data."""
        sequences = np.asarray(sequences)
        sub, rows = self.batch.select(sequences)
        # (a run of consecutive sequences, as the passes and the certificate take them: its
        # labels and token losses are views)
        tokens = slice(rows[0], rows[-1] + 1) if rows.size and np.all(
            np.diff(sequences) == 1) else rows
        Ysub = self.Y[tokens]
        Ybar, losses, margins = self.structure.loss_augmented_margins(
            sub, self.w, Ysub, rescale=self.rescale, n_jobs=self.n_jobs,
            token_loss=None if self.token_loss is None else self.token_loss[tokens])
        return sub, rows, Ysub, Ybar, losses, hinge_terms(losses, margins, self.rescale)

    def hinge(self):
        """Every example's hinge term at the current weights (the oracle over chunks of
        about ``CERTIFICATE_CHUNK_TOKENS`` tokens, in order)."""
        offsets = self.batch.offsets
        chunks = split_into_chunks(offsets, max(1, int(offsets[-1]) //
                                                CERTIFICATE_CHUNK_TOKENS))
        return np.concatenate([self.separate(np.arange(first, stop))[-1]
                               for first, stop in chunks])

    def add_violated(self, sequences, stamp):
        """Add the most violated constraint of every example violated beyond ``epsilon``."""
        sub, rows, Ysub, Ybar, losses, hinge = self.separate(sequences)
        violated = hinge > self.slacks(sequences) + self.epsilon
        if not violated.any():
            return 0
        structure = self.structure
        scale = np.ones(len(sequences)) if self.rescale == "margin" else losses
        local_tokens = np.flatnonzero((Ysub != Ybar) & violated[sub.sequence_index])
        local_owner = sub.sequence_index[local_tokens]
        pairwise = scale[:, None] * (
            structure.pairwise_statistics(sub, Ysub, per_sequence=True)
            - structure.pairwise_statistics(sub, Ybar, per_sequence=True)
        )
        picked = np.flatnonzero(violated)
        self.constraints.add(
            np.asarray(sequences)[picked], rows[local_tokens],
            np.asarray(sequences)[local_owner], Ysub[local_tokens], Ybar[local_tokens],
            scale[local_owner], pairwise[picked], losses[picked], stamp,
        )
        return int(violated.sum())

    def optimise(self, sequences, tol, max_sweeps):
        """Block coordinate ascent sweeps over ``sequences`` until the KKT violation <= tol."""
        c = self.constraints
        block_ptr, members = c.blocks(self.batch.n_sequences)
        order = np.asarray(sequences, dtype=np.int64)
        violation = np.inf
        for _ in range(max_sweeps):
            violation = sweep(self, block_ptr, members, order, float(tol), 100)
            if violation <= tol:
                break
        return violation

    def dual(self):
        c = self.constraints
        # (einsum: no temporary the size of the weights, and no BLAS, whose threads could
        # split the sums)
        norm2 = float(np.einsum("i,i->", self.w, self.w))
        return float(np.einsum("i,i->", c.alpha.data, c.offsets.data)) - 0.5 * norm2, norm2


def fit_n_slack(structure, batch, Y, sample_weight, *, C, rescale, batch_size,
                inactive_window, random_state, n_jobs, certificate):
    """Algorithms 1 (margin) and 2 (slack rescaling) with batched QP re-optimisation on
    ``structure``; returns ``(w, dual_coef)`` and records the fit's progress on
    ``certificate`` (whose ``tol`` and ``max_iter`` stop it).

    Every pass ends with the exact primal, dual and gap; the fit stops when the gap is at most
    ``tol`` times the primal. Constraints violated by more than
    ``epsilon = tol * primal / (2 C sum_i s_i)`` beyond their example's slack are added (then
    the examples' violations add up to at most half the target gap), and the block QPs are
    solved to the same ``epsilon``.
    """
    n = batch.n_sequences
    C, tol = float(C), certificate.tol
    # the primal at w = 0 (at most)
    primal_scale = C * float(sample_weight @ structure.max_loss(batch, Y))
    total_weight = float(sample_weight.sum())
    solver = NSlackSolver(structure, batch, Y, C * sample_weight, rescale,
                          0.5 * tol * primal_scale / (C * total_weight), n_jobs)
    everything = np.arange(n)
    rng = check_random_state(random_state)
    oracle_calls = 0
    precise = False
    subproblems = 0
    for iteration in range(1, certificate.max_iter + 1):
        epsilon = solver.epsilon
        added = 0
        for start in range(0, n, batch_size):
            chunk = everything[start: start + batch_size]
            new = solver.add_violated(chunk, subproblems)
            oracle_calls += chunk.shape[0]
            if new:
                added += new
                solver.optimise(chunk, epsilon, max_sweeps=2)
                subproblems += 1
        solver.constraints.remove_inactive(subproblems, inactive_window)
        with_constraints = rng.permutation(np.unique(solver.constraints.owner.data))
        if added == 0 and not precise:
            # no example is violated: certify by solving the QP precisely, then re-check
            violation = solver.optimise(with_constraints, epsilon, max_sweeps=1000)
        else:
            violation = solver.optimise(with_constraints, epsilon, max_sweeps=3)
        hinge = solver.hinge()
        oracle_calls += n
        dual, norm2 = solver.dual()
        primal = 0.5 * norm2 + C * float(sample_weight @ hinge)
        if certificate.check(iteration, primal, dual, oracle_calls, w=solver.w,
                             converged=primal - dual <= tol * primal,
                             n_constraints=len(solver.constraints)):
            break
        precise = violation <= epsilon
        solver.epsilon = 0.5 * tol * primal / (C * total_weight)
    certificate.finish(iteration)
    return solver.w, solver.constraints.alpha.data.copy()
