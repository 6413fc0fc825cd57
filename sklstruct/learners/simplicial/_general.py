"""Restricted simplicial decomposition on the reduced dual, by working sets (Yu and Rousu 2007).

This is the solver for any structure (it calls only the structure's batched oracles), for
slack rescaling and for one simplex over many examples. The dual variables of example ``i`` are
represented, as in the paper's section 3.1, only through
``b_i = -beta_i`` (a vector in weight space) and ``gamma_i``; ``w = sum_i b_i`` (projected onto
the non-negativity constraints of the structure, section 4.1). A *block* is a set of examples
whose points share one simplex: one example (``blocks="per_example"``, a product of simplexes)
or a chunk of ``working_set_size`` examples (``blocks="single"``: one simplex in
``z = (sum b_i, sum gamma_i)``). Every block keeps

- an *anchor* (the paper's footnote 1 set ``S^x``: the origin at first, later a past iterate);
- at most ``max_points`` extreme points (``S^s``): the labellings returned by loss-augmented
  decoding, with their losses and pairwise statistics;
- the convex weights of its extreme points (the anchor takes the rest).

The points are stored as dense vectors ``b`` in weight space when all blocks' points fit in
``DENSE_POINTS_MB``; otherwise per token (the anchor as the token x state matrix ``A_i`` with
``b = C s_i [X_i^T A_i, a_i]``, ``s_i`` the example's sample weight; extreme points as
labellings) and rebuilt into sparse rows for each working set.

An iteration takes a working set of blocks: one batched loss-augmented decoding at the current
``w`` gives every block a new extreme point (eq. (9), or eq. (21) for slack rescaling); a
full block first drops its lowest-weight point and makes the current iterate its anchor; then
the master problem over the product of the blocks' simplexes, a QP in the extreme-point weights
(the anchor weight is the unused capacity), is solved by the SMO core of
:mod:`sklstruct._solvers`. Its Gram matrix
and linear term come from one matrix whose rows are the anchors and extreme points of the
working set, so an iteration runs in vectorised numpy/scipy without a loop over examples.

Non-negative weights (``structure.nonnegative_``): the dual (15) has ``-1/2 ||[v_C]_+||^2`` for
the constrained coordinates ``C`` of ``v = sum_i b_i``, and ``w = v + nu`` with
``nu = [-v_C]_+``; the master is solved by active-set rounds on the sign pattern of ``v_C``
(see :meth:`SimplicialDecompositionState._constrained_master`).
"""

import numpy as np
import scipy.sparse as sp

from ..._solvers.qp import solve_capped_simplex_qp
from ...utils._sequences import ragged_arange

_MAX_NU_ROUNDS = 100
DENSE_POINTS_MB = 256


class SimplicialDecompositionState:
    """Blocks, points and weights of restricted simplicial decomposition; see the module doc."""

    def __init__(self, structure, batch, Y, C, *, rescale, max_points, blocks,
                 working_set_size, random_state, sample_weight=None):
        self.structure, self.batch, self.Y, self.C = structure, batch, Y, float(C)
        # example i's dual variables sum to C s_i (s_i its sample weight, 1 unless given)
        self.example_weight = np.ones(batch.n_sequences) if sample_weight is None else \
            np.asarray(sample_weight, dtype=np.float64)
        self.example_C = self.C * self.example_weight
        self.rescale, self.r, self.blocks = rescale, int(max_points), blocks
        self.rng = random_state
        n, S = batch.n_sequences, structure.n_states_
        indptr, indices, data = batch.csr_arrays
        self.X = sp.csr_matrix((data, indices, indptr), shape=batch.X.shape)
        self.n_unary = structure.n_features_ * S
        self.size = structure.size_joint_feature_
        self.constrained = np.asarray(getattr(structure, "nonnegative_", np.zeros(0, int)),
                                      dtype=np.intp)
        self.true_pair = structure.pairwise_statistics(batch, Y, per_sequence=True)
        self.working_set_size = int(min(working_set_size, n))
        if blocks == "per_example":
            block_of = np.arange(n)
        else:
            block_of = np.empty(n, dtype=np.intp)
            block_of[self.rng.permutation(n)] = np.arange(n) // self.working_set_size
        self.n_blocks = int(block_of.max()) + 1
        self.block_of = block_of
        order = np.argsort(block_of, kind="stable")
        self.block_ptr = np.zeros(self.n_blocks + 1, dtype=np.intp)
        np.cumsum(np.bincount(block_of, minlength=self.n_blocks), out=self.block_ptr[1:])
        self.block_members = order
        # anchors (the origin at first) and extreme points: as dense vectors b per block when
        # they fit in DENSE_POINTS_MB, else per token (rebuilt for each working set)
        self.dense = self.n_blocks * (self.r + 1) * self.size * 8 <= DENSE_POINTS_MB * 2**20
        if self.dense:
            self.anchor_vec = np.zeros((self.n_blocks, self.size))
            self.anchor_gam = np.zeros(self.n_blocks)
            self.vertex_vec = np.zeros((self.n_blocks, self.r, self.size))
            self.vertex_gam = np.zeros((self.n_blocks, self.r))
        else:
            self.anchor_node = np.zeros((batch.n_tokens, S))
            self.anchor_pair = np.zeros((n, structure.n_pairwise_))
            self.anchor_gamma = np.zeros(n)
            self.vertex_pair = np.zeros((self.r, n, structure.n_pairwise_))
        self.vertex_labels = np.repeat(Y[None, :].astype(np.int32), self.r, axis=0)
        self.vertex_loss = np.zeros((self.r, n))
        self.n_vertices = np.zeros(self.n_blocks, dtype=np.intp)
        self.weights = np.zeros((self.n_blocks, self.r))
        # the current point: v = sum_i b_i, nu, w = v + nu, sum_i gamma_i
        self.v = np.zeros(self.size)
        self.nu = np.zeros(self.constrained.shape[0])
        self.w = np.zeros(self.size)
        self.gamma_total = 0.0

    # ------------------------------------------------------------------ passes
    def run_pass(self, n_jobs=None):
        """Visit every block once (random order); return (oracle calls, summed FW gaps)."""
        order = self.rng.permutation(self.n_blocks)
        per_set = self.working_set_size if self.blocks == "per_example" else 1
        calls, fw_gap = 0, 0.0
        for start in range(0, self.n_blocks, per_set):
            n_calls, gap = self.iterate(order[start:start + per_set], n_jobs)
            calls += n_calls
            fw_gap += gap
        return calls, fw_gap

    def dual(self):
        return self.gamma_total - 0.5 * float(self.w @ self.w)

    def iterate(self, blocks, n_jobs=None):
        """One RSD iteration on a working set of blocks; returns (oracle calls, FW gap)."""
        blocks = np.asarray(blocks, dtype=np.intp)
        examples, block_local = self._examples(blocks)
        sub, tokens = self.batch.select(examples)
        lengths = sub.lengths
        Y_sub = self.Y[tokens]
        labels, losses, _ = self.structure.loss_augmented_decode(
            sub, *self.structure.potentials(sub, self.w), Y_sub, rescale=self.rescale,
            n_jobs=n_jobs)
        labels = labels.astype(np.int32)
        pair = self.structure.pairwise_statistics(sub, labels, per_sequence=True)
        token_block = np.repeat(block_local, lengths)
        # a point the block already has is not added again
        n_vertices = self.n_vertices[blocks]
        slot = np.full(blocks.shape[0], -1, dtype=np.intp)
        for p in range(self.r):
            mismatches = np.bincount(token_block, weights=self.vertex_labels[p, tokens] != labels,
                                     minlength=blocks.shape[0])
            slot[(slot < 0) & (p < n_vertices) & (mismatches == 0)] = p
        fresh = slot < 0
        # footnote 1: a full block drops its lowest-weight point; the iterate becomes its anchor
        full = fresh & (n_vertices == self.r)
        slot[fresh] = np.where(full, np.argmin(self.weights[blocks], axis=1),
                               n_vertices)[fresh]
        if np.any(full):
            self._replace_anchors(blocks, examples, block_local, tokens, token_block, full)
        if self.dense and np.any(fresh):
            vec, gam = self._vertex_vectors(examples, block_local, tokens, token_block,
                                            labels, losses, pair, blocks.shape[0])
            self.vertex_vec[blocks[fresh], slot[fresh]] = vec[fresh]
            self.vertex_gam[blocks[fresh], slot[fresh]] = gam[fresh]
        fresh_tok, fresh_ex = fresh[token_block], fresh[block_local]
        self.vertex_labels[slot[token_block[fresh_tok]], tokens[fresh_tok]] = labels[fresh_tok]
        self.vertex_loss[slot[block_local[fresh_ex]], examples[fresh_ex]] = losses[fresh_ex]
        if not self.dense:
            self.vertex_pair[slot[block_local[fresh_ex]], examples[fresh_ex]] = pair[fresh_ex]
        self.weights[blocks[fresh], slot[fresh]] = 0.0
        self.n_vertices[blocks[fresh]] = np.minimum(n_vertices[fresh] + 1, self.r)
        fw_gap = self._master(blocks, examples, block_local, tokens, token_block, slot)
        return examples.shape[0], fw_gap

    # ------------------------------------------------------------------ pieces
    def _examples(self, blocks):
        """Examples of the blocks (block by block) and their block's position in ``blocks``."""
        starts, stops = self.block_ptr[blocks], self.block_ptr[blocks + 1]
        counts = stops - starts
        position = np.repeat(np.arange(blocks.shape[0]), counts)
        return self.block_members[ragged_arange(starts, counts)], position

    def _scale(self, loss):
        """Weight of an extreme point's ``Psi`` difference: 1 (margin) or its loss (slack)."""
        return np.ones_like(loss) if self.rescale == "margin" else loss

    def _rows(self, blocks, examples, block_local, tokens, token_block):
        """Sparse rows ``b`` of the working set's anchors and extreme points, and their gammas.

        Row ``q`` of the anchors is block ``q``'s anchor; row ``n_blocks + k`` is its extreme
        point ``k`` for ``(block, slot)`` pairs listed in ``points``.
        """
        if self.dense:
            counts = self.n_vertices[blocks]
            point_block = np.repeat(np.arange(blocks.shape[0]), counts)
            point_slot = ragged_arange(np.zeros_like(counts), counts)
            R = np.vstack([self.anchor_vec[blocks],
                           self.vertex_vec[blocks[point_block], point_slot]])
            return (R, self.anchor_gam[blocks], self.vertex_gam[blocks[point_block], point_slot],
                    point_block, point_slot)
        S, C, n_blocks = self.structure.n_states_, self.C, blocks.shape[0]
        rows, states, coefs, toks = [], [], [], []
        pair_rows, pair_vals = [], []
        # anchors: every non-zero entry of A on the working set's tokens
        A = self.anchor_node[tokens]
        t_idx, s_idx = np.nonzero(A)
        rows.append(token_block[t_idx])
        toks.append(tokens[t_idx])
        states.append(s_idx)
        example_C = self.example_C[examples]
        example_of_token = np.repeat(np.arange(examples.shape[0]), self.batch.lengths[examples])
        coefs.append(example_C[example_of_token[t_idx]] * A[t_idx, s_idx])
        pair_rows.append(block_local)
        pair_vals.append(example_C[:, None] * self.anchor_pair[examples])
        gamma_anchor = np.bincount(block_local, weights=self.anchor_gamma[examples],
                                   minlength=n_blocks)
        # extreme points: +C s on the true state and -C s on the point's state, where they differ
        counts = self.n_vertices[blocks]
        point_block = np.repeat(np.arange(n_blocks), counts)
        point_slot = ragged_arange(np.zeros_like(counts), counts)
        point_row = n_blocks + np.arange(point_block.shape[0])
        row_of = np.full((n_blocks, self.r), -1, dtype=np.intp)
        row_of[point_block, point_slot] = point_row
        Y_tok = self.Y[tokens]
        scale_ex = example_C * self._scale(self.vertex_loss[:, examples])  # (r, n_examples)
        for p in range(self.r):
            has = row_of[token_block, p] >= 0
            V = self.vertex_labels[p, tokens]
            diff = has & (V != Y_tok)
            t_idx = np.flatnonzero(diff)
            row = row_of[token_block[t_idx], p]
            coef = scale_ex[p, example_of_token[t_idx]]
            rows += [row, row]
            toks += [tokens[t_idx], tokens[t_idx]]
            states += [Y_tok[t_idx], V[t_idx]]
            coefs += [coef, -coef]
            has_ex = row_of[block_local, p] >= 0
            pair_rows.append(row_of[block_local[has_ex], p])
            pair_vals.append(scale_ex[p, has_ex][:, None]
                             * (self.true_pair[examples[has_ex]]
                                - self.vertex_pair[p, examples[has_ex]]))
        gamma_point = C * np.bincount(
            np.concatenate([row_of[block_local, p][row_of[block_local, p] >= 0]
                            for p in range(self.r)]) - n_blocks,
            weights=np.concatenate([(self.example_weight[examples] * self.vertex_loss[
                p, examples])[row_of[block_local, p] >= 0] for p in range(self.r)]),
            minlength=point_block.shape[0])
        n_rows = n_blocks + point_block.shape[0]
        R = _feature_rows(self.X, np.concatenate(toks), np.concatenate(states),
                          np.concatenate(coefs), np.concatenate(rows), n_rows, S, self.size)
        P = self.anchor_pair.shape[1]
        if P:
            pr = np.concatenate(pair_rows)
            pv = np.vstack(pair_vals)
            R = R + sp.csr_matrix((pv.ravel(), (np.repeat(pr, P),
                                                np.tile(self.n_unary + np.arange(P),
                                                        pr.shape[0]))), shape=(n_rows, self.size))
        return R.tocsr(), gamma_anchor, gamma_point, point_block, point_slot

    def _master(self, blocks, examples, block_local, tokens, token_block, new_slot):
        """Solve the master problem of the working set; move ``v``, ``nu``, ``w``, gammas.

        Returns the summed Frank-Wolfe gaps of the blocks' new points at the current iterate,
        ``sum_b grad . (z_new - z_b)`` with ``grad = (-w, 1)`` (the anchor swap of a full block
        does not move its iterate).
        """
        n_blocks = blocks.shape[0]
        R, gamma_anchor, gamma_point, point_block, point_slot = self._rows(
            blocks, examples, block_local, tokens, token_block)
        point_row = n_blocks + np.arange(point_block.shape[0])
        H = R @ R.T
        H = H.toarray() if sp.issparse(H) else H
        G = (H[np.ix_(point_row, point_row)] - H[np.ix_(point_row, point_block)]
             - H[np.ix_(point_block, point_row)] + H[np.ix_(point_block, point_block)])
        G = 0.5 * (G + G.T)
        Rw = R @ self.w
        d_w = Rw[point_row] - Rw[point_block]
        gain = gamma_point - gamma_anchor[point_block]
        mu_old = self.weights[blocks[point_block], point_slot]
        value = gamma_point - Rw[point_row]  # gamma - w . b of every point
        anchor_value = gamma_anchor - Rw[:n_blocks]
        anchor_weight = 1.0 - np.bincount(point_block, weights=mu_old, minlength=n_blocks)
        is_new = point_slot == new_slot[point_block]
        fw_gap = float(value[is_new].sum() - anchor_weight @ anchor_value - mu_old @ value)
        if self.constrained.size:
            mu = self._constrained_master(R, G, gain, mu_old, point_row, point_block)
        else:
            mu, _, _ = solve_capped_simplex_qp(G, gain - d_w + G @ mu_old, 1.0,
                                               groups=point_block, alpha0=mu_old)
        delta = mu - mu_old
        coef = np.zeros(R.shape[0])
        coef[point_row] = delta
        np.subtract.at(coef, point_block, delta)
        self.v += R.T @ coef
        self.gamma_total += float(delta @ gain)
        self.weights[blocks[point_block], point_slot] = mu
        self._set_weights()
        return fw_gap

    def _constrained_master(self, R, G, gain, mu_old, point_row, point_block):
        """Master problem with ``-1/2 ||[v_C]_+||^2`` on the constrained coordinates.

        Active-set rounds: with ``A`` the coordinates where ``v_C < 0``, the objective is the
        QP without the ``A`` coordinates, exact (value and gradient) wherever the signs of
        ``v_C`` stay those of ``A``; a QP solution whose signs reproduce ``A`` is optimal. If
        the signs do not settle, exact alternation between the QP in the weights and
        ``nu = [-v_C]_+`` (the dual of ``w_C >= 0``) finishes the job.
        """
        R_c = R[:, self.constrained]
        R_c = R_c.toarray() if sp.issparse(R_c) else np.asarray(R_c)
        D_c = R_c[point_row] - R_c[point_block]
        Rv = R @ self.v
        d_v = Rv[point_row] - Rv[point_block]
        v_c = self.v[self.constrained]
        active = v_c < 0
        mu = mu_old
        for _ in range(_MAX_NU_ROUNDS):
            G_kept = G - D_c[:, active] @ D_c[:, active].T
            c = gain - d_v + D_c[:, active] @ v_c[active] + G_kept @ mu_old
            mu, _, _ = solve_capped_simplex_qp(G_kept, c, 1.0, groups=point_block, alpha0=mu)
            new_active = v_c + D_c.T @ (mu - mu_old) < 0
            if np.array_equal(new_active, active):
                return mu
            active = new_active
        nu = np.maximum(-(v_c + D_c.T @ (mu - mu_old)), 0.0)
        for _ in range(_MAX_NU_ROUNDS):
            c = gain - d_v - D_c @ nu + G @ mu_old
            mu, _, _ = solve_capped_simplex_qp(G, c, 1.0, groups=point_block, alpha0=mu)
            moved = v_c + D_c.T @ (mu - mu_old)
            new_nu = np.maximum(-moved, 0.0)
            if np.abs(new_nu - nu).max() <= 1e-12 * max(1.0, float(np.abs(moved).max())):
                break
            nu = new_nu
        return mu

    def _set_weights(self):
        self.w[:] = self.v
        if self.constrained.size:
            self.nu = np.maximum(-self.v[self.constrained], 0.0)
            self.w[self.constrained] = self.v[self.constrained] + self.nu

    def _replace_anchors(self, blocks, examples, block_local, tokens, token_block, full):
        """Make the current iterate the anchor of the full blocks (footnote 1)."""
        mu = self.weights[blocks]  # (n_blocks, r)
        anchor_weight = 1.0 - mu.sum(axis=1)
        if self.dense:
            b = blocks[full]
            self.anchor_vec[b] = (anchor_weight[full, None] * self.anchor_vec[b]
                                  + np.einsum("kp,kpj->kj", mu[full], self.vertex_vec[b]))
            self.anchor_gam[b] = (anchor_weight[full] * self.anchor_gam[b]
                                  + (mu[full] * self.vertex_gam[b]).sum(axis=1))
            self.weights[b] = 0.0
            return
        full_ex = full[block_local]
        full_tok = full[token_block]
        tok = tokens[full_tok]
        ex = examples[full_ex]
        tb, eb = token_block[full_tok], block_local[full_ex]
        Y_tok = self.Y[tok]
        node = anchor_weight[tb][:, None] * self.anchor_node[tok]
        pair = anchor_weight[eb][:, None] * self.anchor_pair[ex]
        gamma = anchor_weight[eb] * self.anchor_gamma[ex]
        example_of_token = np.repeat(np.arange(ex.shape[0]), self.batch.lengths[ex])
        rows = np.arange(tok.shape[0])
        for p in range(self.r):
            loss = self.vertex_loss[p, ex]
            s = self._scale(loss) * mu[eb, p]
            st = s[example_of_token]
            node[rows, Y_tok] += st
            node[rows, self.vertex_labels[p, tok]] -= st
            pair += s[:, None] * (self.true_pair[ex] - self.vertex_pair[p, ex])
            gamma += self.example_C[ex] * mu[eb, p] * loss
        self.anchor_node[tok] = node
        self.anchor_pair[ex] = pair
        self.anchor_gamma[ex] = gamma
        self.weights[blocks[full]] = 0.0

    def _vertex_vectors(self, examples, block_local, tokens, token_block, labels, losses, pair,
                        n_blocks):
        """Dense ``b`` and ``gamma`` of the working set's new extreme points, per block."""
        S, C = self.structure.n_states_, self.C
        example_C = self.example_C[examples]
        scale = self._scale(losses)
        example_of_token = np.repeat(np.arange(examples.shape[0]),
                                     self.batch.lengths[examples])
        Y_tok = self.Y[tokens]
        t_idx = np.flatnonzero(labels != Y_tok)
        coef = (example_C * scale)[example_of_token[t_idx]]
        vec = _feature_rows(self.X, np.concatenate([tokens[t_idx], tokens[t_idx]]),
                            np.concatenate([Y_tok[t_idx], labels[t_idx]]),
                            np.concatenate([coef, -coef]),
                            np.concatenate([token_block[t_idx], token_block[t_idx]]),
                            n_blocks, S, self.size).toarray()
        np.add.at(vec[:, self.n_unary:], block_local,
                  (example_C * scale)[:, None] * (self.true_pair[examples] - pair))
        return vec, C * np.bincount(block_local, weights=self.example_weight[examples] * losses,
                                    minlength=n_blocks)


def _feature_rows(X, tokens, states, coefs, rows, n_rows, n_states, size):
    """CSR matrix with row ``rows[k]`` += ``coefs[k] * x_{tokens[k]}`` on state ``states[k]``.

    Columns follow the weight layout (feature-major, ``j * n_states + s``); duplicates add up.
    """
    starts = X.indptr[tokens]
    counts = X.indptr[tokens + 1] - starts
    position = ragged_arange(starts, counts)
    columns = X.indices[position].astype(np.int64) * n_states + np.repeat(states, counts)
    data = X.data[position] * np.repeat(coefs, counts)
    return sp.csr_matrix((data, (np.repeat(rows, counts), columns)), shape=(n_rows, size))
