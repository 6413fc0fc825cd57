"""The n-slack cutting-plane algorithm (seed 002, Algorithms 1 and 2) with batched QP updates.

Each example keeps its own working set of constraints. Examples are visited in batches: the
separation oracle runs over the whole batch in compiled code, every example whose most
violated constraint exceeds its current slack by more than ``tol`` gets that constraint, and the
QP is then re-optimised on the batch's blocks (section 4, "batch updates"). After every pass all
blocks are swept until the QP is solved to the required precision, the exact primal objective
is computed with one more oracle pass, and the duality gap is recorded.
"""

import numpy as np
import scipy.sparse as sp

from ..utils._sequences import SequenceBatch, token_rows
from ._block_qp import margins, sweep
from ._working_set import _GrowableArray


class NSlackConstraints:
    """Per-example constraints ``w . g_k >= c_k - xi_i`` stored as labelings (see _block_qp)."""

    def __init__(self, n_pairwise):
        self.entry_ptr = _GrowableArray(dtype=np.int64)
        self.entry_ptr.extend(np.zeros(1, dtype=np.int64))
        self.tokens = _GrowableArray(dtype=np.int64)
        self.true_state = _GrowableArray(dtype=np.int32)
        self.wrong_state = _GrowableArray(dtype=np.int32)
        self.scale = _GrowableArray()
        self.pairwise = _GrowableArray((n_pairwise,))
        self.offsets = _GrowableArray()
        self.alpha = _GrowableArray()
        self.owner = _GrowableArray(dtype=np.int64)
        self.last_active = _GrowableArray(dtype=np.int64)

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
        self.pairwise.extend(pairwise)
        self.offsets.extend(offsets)
        self.alpha.extend(np.zeros(len(sequences)))
        self.owner.extend(np.asarray(sequences, dtype=np.int64))
        self.last_active.extend(np.full(len(sequences), stamp, dtype=np.int64))

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
        for array in (self.pairwise, self.offsets, self.alpha, self.owner, self.last_active):
            array.select(keep)
        self.entry_ptr.assign(np.concatenate([[0], np.cumsum(lengths[keep])]))

    def blocks(self, n_blocks):
        """``(block_ptr, members)``: the constraints of every example."""
        owner = self.owner.data
        members = np.argsort(owner, kind="stable").astype(np.int64)
        block_ptr = np.zeros(n_blocks + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=n_blocks), out=block_ptr[1:])
        return block_ptr, members


class NSlackSolver:
    """State and steps of the n-slack algorithm for one fit."""

    def __init__(self, structure, batch, Y, C, rescale, tol, n_jobs):
        self.structure, self.batch, self.Y = structure, batch, Y
        self.rescale, self.tol, self.n_jobs = rescale, tol, n_jobs
        X = batch.X if sp.issparse(batch.X) else sp.csr_matrix(batch.X)
        self.indptr = X.indptr.astype(np.int64)
        self.indices = X.indices.astype(np.int32)
        self.data = np.ascontiguousarray(X.data, dtype=np.float64)
        n_states, n_features = structure.n_states_, structure.n_features_
        # the flat weights; WT and theta are views of it that the compiled sweeps update
        self.w = np.zeros(structure.size_joint_feature_)
        self.WT, self.theta = structure.split_weights(self.w)
        self.scratch = np.zeros(n_features * n_states)
        self.bound = np.broadcast_to(np.asarray(C, dtype=np.float64), (batch.n_sequences,)).copy()
        self.constraints = NSlackConstraints(structure.n_pairwise_)

    def _arrays(self):
        c = self.constraints
        return (self.indptr, self.indices, self.data, self.WT, self.theta, c.entry_ptr.data,
                c.tokens.data, c.true_state.data, c.wrong_state.data, c.scale.data,
                c.pairwise.data)

    def slacks(self, sequences):
        """Current slack ``max(0, max_k c_k - w . g_k)`` of each example in ``sequences``."""
        c = self.constraints
        slack = np.zeros(self.batch.n_sequences)
        which = np.flatnonzero(np.isin(c.owner.data, sequences)).astype(np.int64)
        if which.size:
            out = np.empty(which.shape[0])
            margins(*self._arrays(), which, out)
            np.maximum.at(slack, c.owner.data[which], c.offsets.data[which] - out)
        return slack[sequences]

    def _sub_batch(self, sequences):
        """The sub-batch of ``sequences`` and its token rows (a view for a contiguous range)."""
        batch = self.batch
        first, last = int(sequences[0]), int(sequences[-1])
        if sequences.shape[0] == last - first + 1 and np.all(np.diff(sequences) == 1):
            lo, hi = int(batch.offsets[first]), int(batch.offsets[last + 1])
            if lo == 0 and hi == batch.n_tokens:
                return batch, np.arange(hi)
            sub = SequenceBatch(batch.X[lo:hi], batch.offsets[first: last + 2] - lo)
            return sub, np.arange(lo, hi)
        return batch.take(sequences), token_rows(batch.offsets, sequences)

    def separate(self, sequences):
        """Oracle over ``sequences``; returns their hinge terms and the labelings' data."""
        structure, Y = self.structure, self.Y
        sub, rows = self._sub_batch(np.asarray(sequences))
        Ysub = Y[rows]
        unary = np.ascontiguousarray(sub.X @ self.WT)
        w = self.w
        Ybar, losses, scores = structure.loss_augmented_decode(
            sub, w, Ysub, rescale=self.rescale, n_jobs=self.n_jobs, unary=unary
        )
        margin = structure.score_labels(sub, w, Ysub, unary=unary) - scores
        if self.rescale == "margin":
            hinge = np.maximum(losses - margin, 0.0)
        else:
            hinge = np.maximum(losses * (1.0 - margin), 0.0)
        return sub, rows, Ysub, Ybar, losses, hinge

    def add_violated(self, sequences, stamp):
        """Add the most violated constraint of every example violated beyond ``tol``."""
        sub, rows, Ysub, Ybar, losses, hinge = self.separate(sequences)
        violated = hinge > self.slacks(sequences) + self.tol
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
            violation = sweep(*self._arrays(), c.offsets.data, c.alpha.data, block_ptr,
                              members, self.bound, order, self.scratch, float(tol), 100)
            if violation <= tol:
                break
        return violation

    def dual(self):
        c = self.constraints
        norm2 = float(np.sum(self.WT * self.WT) + self.theta @ self.theta)
        return float(c.alpha.data @ c.offsets.data) - 0.5 * norm2, norm2
