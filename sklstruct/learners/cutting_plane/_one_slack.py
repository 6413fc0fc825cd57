"""The 1-slack cutting-plane algorithm (Joachims, Finley and Yu 2009, Algorithms 3 and 4).

Constraints are stored as labelings, not as parameter-sized vectors, and every product with
the token matrix beyond the separation oracle's reads only the tokens where a stored
constraint's labelling differs from the truth (few, once the model is good).

A constraint direction ``g = sum_i s_i (Psi(x_i, y_i) - Psi(x_i, ybar_i))`` is kept through the
tokens where ``ybar`` differs from ``y`` (their index, the wrong label and the per-token scale
``s_i``) plus its small pairwise part. All constraints share flat, growable arrays, so the inner
products of a new direction with every stored one are one unary-score computation, a gather and
a ``bincount``, and ``w = sum_k alpha_k g_k`` is one product ``M^T X`` with a dense token x state
matrix ``M``. A working set of hundreds of constraints over millions of parameters stays cheap.

When the parameter vector is small (``size * 8 bytes`` at most ``DENSE_BYTES_PER_CONSTRAINT``),
the directions are kept as dense rows instead, and Gram rows and combinations become plain
matrix-vector products.
"""

import numpy as np

from ...structures._base import checked_token_loss, hinge_terms, structured_hinge
from ...utils._growable import GrowableArray
from ...utils._sequences import SequenceBatch
from ..._solvers.qp import solve_capped_simplex_qp
from ._label_cache import LabelCache
from ._one_slack_fast import constraint_dots, scatter_constraints

DENSE_BYTES_PER_CONSTRAINT = 2**19


class WorkingSet:
    """A set of cutting-plane constraints ``w . g_k >= c_k - xi`` with their Gram matrix.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of shape (n_tokens,)
        Encoded true labels.
    """

    def __init__(self, structure, batch, Y):
        self.structure = structure
        self.batch = batch
        self.Y = Y
        self.gram = np.zeros((0, 0))
        self._entry_cache = None
        self._offsets = GrowableArray()
        self._pairwise = GrowableArray((structure.n_pairwise_,))
        size = structure.size_joint_feature_
        self.dense = 8 * size <= DENSE_BYTES_PER_CONSTRAINT
        if self.dense:
            self._directions = GrowableArray((size,))
        else:
            # flat indices t * n_states + state of the true and the wrong state of each entry
            self._true_index = GrowableArray(dtype=np.int64)
            self._wrong_index = GrowableArray(dtype=np.int64)
            self._scale = GrowableArray()
            self._owner = GrowableArray(dtype=np.int64)

    def __len__(self):
        return self._offsets.data.shape[0]

    @property
    def offsets(self):
        """The constraint offsets ``c_k``."""
        return self._offsets.data

    def _entry_rows(self):
        """The tokens the stored entries touch (None: more than half of all, then read them
        all) and the entries' flat indices into their (n_rows, n_states) block."""
        if self._entry_cache is None:
            S, n_tokens = self.structure.n_states_, self.batch.n_tokens
            entry_tokens = self._true_index.data // S
            touched = np.zeros(n_tokens, dtype=bool)
            touched[entry_tokens] = True
            if 2 * np.count_nonzero(touched) > n_tokens:
                self._entry_cache = None, self._true_index.data, self._wrong_index.data
                return self._entry_cache
            tokens = np.flatnonzero(touched)
            position = (np.cumsum(touched) - 1)[entry_tokens] * S
            self._entry_cache = (tokens, position + self._true_index.data % S,
                                 position + self._wrong_index.data % S)
        return self._entry_cache

    def add(self, Ybar, sequence_scale, offset):
        """Add ``g = sum_i s_i (Psi(y_i) - Psi(ybar_i))`` with offset ``c``.

        The Gram matrix grows by one row and column. Only the tokens where ``Ybar`` differs
        from ``y`` (and, for the inner products, those of the stored constraints) are read.
        """
        structure, Y = self.structure, self.Y
        n_states = structure.n_states_
        self._entry_cache = None
        g, tokens, scale, pairwise = constraint_direction(structure, self.batch, Y, Ybar,
                                                          sequence_scale)
        k = len(self)
        row = np.empty(k + 1)
        if self.dense:
            row[:k] = self._directions.data @ g
            self._directions.extend(g[None, :])
        else:
            if k:
                entry_tokens, true_index, wrong_index = self._entry_rows()
                rows = _token_rows(self.batch, entry_tokens)
                unary = structure.unary_potentials(rows, g).ravel()
                row[:k] = self._pairwise.data @ pairwise
                constraint_dots(unary, true_index, wrong_index, self._scale.data,
                                self._owner.data, row)
            self._entry_cache = None
            self._true_index.extend(tokens * n_states + Y[tokens])
            self._wrong_index.extend(tokens * n_states + Ybar[tokens])
            self._scale.extend(scale)
            self._owner.extend(np.full(tokens.shape[0], k, dtype=np.int64))
        row[k] = g @ g
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :] = row
        gram[:, k] = row
        self.gram = gram
        self._pairwise.extend(pairwise[None, :])
        self._offsets.extend(np.array([float(offset)]))

    def remove(self, keep):
        """Keep only the constraints whose mask entry is true (Gram rows/columns dropped)."""
        keep = np.asarray(keep, dtype=bool)
        self._entry_cache = None
        if not self.dense:
            on_tokens = keep[self._owner.data]
            new_index = np.cumsum(keep) - 1
            owner = new_index[self._owner.data[on_tokens]]
            for array in (self._true_index, self._wrong_index, self._scale):
                array.select(on_tokens)
            self._owner.select(on_tokens)
            self._owner.data[:] = owner
        else:
            self._directions.select(keep)
        self._pairwise.select(keep)
        self._offsets.select(keep)
        self.gram = self.gram[np.ix_(keep, keep)]

    def combine(self, alpha):
        """``w = sum_k alpha_k g_k`` as a flat weight vector."""
        if self.dense:
            return alpha @ self._directions.data
        entry_tokens, true_index, wrong_index = self._entry_rows()
        n_rows = self.batch.n_tokens if entry_tokens is None else entry_tokens.shape[0]
        M = np.zeros(n_rows * self.structure.n_states_)
        scatter_constraints(M, true_index, wrong_index, self._scale.data, self._owner.data,
                            np.ascontiguousarray(alpha, dtype=np.float64))
        return _direction(self.structure, self.batch, entry_tokens, M.reshape(n_rows, -1),
                          alpha @ self._pairwise.data)


def _token_rows(batch, tokens):
    """The token rows ``tokens`` as a batch (only the unary products use it); all of them
    when ``tokens`` is None."""
    if tokens is None:
        return batch
    return SequenceBatch._of_checked(batch.X[tokens],
                                     np.array([0, tokens.shape[0]], dtype=np.int64))


def _direction(structure, batch, tokens, M, pairwise):
    """Flat direction ``[X_tokens^T M, pairwise]`` for a (len(tokens), n_states) ``M``."""
    unary = structure.unary_features(_token_rows(batch, tokens), M)
    return np.concatenate([unary.ravel(), pairwise])


def constraint_direction(structure, batch, Y, Ybar, sequence_scale):
    """The 1-slack direction ``g = sum_i s_i (Psi(x_i, y_i) - Psi(x_i, ybar_i))`` as a flat
    vector, read from the tokens where ``Ybar`` differs from ``Y``.

    Returns ``(g, tokens, token_scale, pairwise)``: the direction, the differing tokens, their
    scale ``s_i`` and the pairwise part of ``g``.
    """
    tokens = np.flatnonzero(Y != Ybar)
    scale = sequence_scale[batch.sequence_index[tokens]]
    pairwise = structure.pairwise_statistics(batch, Y, sequence_scale) - \
        structure.pairwise_statistics(batch, Ybar, sequence_scale)
    M = np.zeros((tokens.shape[0], structure.n_states_))
    rows = np.arange(tokens.shape[0])
    M[rows, Y[tokens]] = scale
    M[rows, Ybar[tokens]] = -scale
    few = 2 * tokens.shape[0] <= batch.n_tokens
    g = _direction(structure, batch, tokens if few else None,
                   M if few else _spread(M, tokens, batch), pairwise)
    return g, tokens, scale, pairwise


def _spread(M, tokens, batch):
    """The (n_tokens, n_states) matrix that is ``M`` on ``tokens`` and zero elsewhere."""
    full = np.zeros((batch.n_tokens, M.shape[1]))
    full[tokens] = M
    return full


class Cut:
    """A candidate 1-slack constraint from a separation oracle.

    ``hinge`` is the weighted sum of its hinge terms at the current weights, ``offset`` its
    ``c = sum_i s_i Delta(y_i, ybar_i)``, ``from_oracle`` whether loss-augmented decoding
    made it (else the label cache did) and ``direction`` the arguments that the oracle's
    working set's ``add`` takes before the offset.
    """

    __slots__ = ("hinge", "offset", "from_oracle", "direction")

    def __init__(self, hinge, offset, from_oracle, direction):
        self.hinge, self.offset = hinge, offset
        self.from_oracle, self.direction = from_oracle, direction


class LocalOracle:
    """The 1-slack separation oracle over a batch held in this process.

    The interface :func:`solve_one_slack` reads the training data through: ``n_sequences``,
    ``loss_bound`` (``sum_i s_i max_y Delta(y_i, y)``), :meth:`working_set`, :meth:`separate`
    and :meth:`hinge`. :class:`~._sharded.ShardOracle` implements it over data shards on a
    dask cluster.

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    sample_weight : ndarray of shape (n_sequences,)
    rescale : {"margin", "slack"}
    cache_size : int
        Recent most-violating labellings kept per example.
    n_jobs : int or None
        Threads of the separation oracle.
    """

    def __init__(self, structure, batch, Y, sample_weight, *, rescale, cache_size, n_jobs):
        self.structure, self.batch, self.Y, self.sample_weight = structure, batch, Y, \
            sample_weight
        self.rescale, self.n_jobs = rescale, n_jobs
        # (None for a loss that does not decompose: the oracle computes its losses)
        self.token_loss = checked_token_loss(structure, Y) if structure.loss_decomposes else None
        self.cache = LabelCache(batch.n_tokens, batch.n_sequences, cache_size)
        self.n_sequences = batch.n_sequences
        self.loss_bound = float(sample_weight @ structure.max_loss(batch, Y))

    def working_set(self):
        """An empty working set whose constraints are stored as labellings of the batch."""
        return WorkingSet(self.structure, self.batch, self.Y)

    def separate(self, w, slack, bar):
        """The next 1-slack constraint at ``w`` as a :class:`Cut`.

        The cached labellings are tried first; their constraint is used when its violation
        (weighted hinge sum minus ``slack``) exceeds ``bar``. Otherwise the oracle is called
        (and refreshes the cache).
        """
        structure, batch, Y, weights = self.structure, self.batch, self.Y, self.sample_weight
        unary, pairwise = structure.potentials(batch, w)
        Ybar, losses, scores, from_oracle = self._separate(unary, pairwise, slack, bar)
        hinge = hinge_terms(losses, structure.score(batch, unary, pairwise, Y) - scores,
                            self.rescale)
        scale = weights * (1.0 if self.rescale == "margin" else losses)
        return Cut(float(weights @ hinge), float(weights @ losses), from_oracle, (Ybar, scale))

    def _separate(self, unary, pairwise, slack, bar):
        """The next 1-slack constraint, and whether the separation oracle produced it.

        The cached labelings are tried first; their constraint is used when it is violated
        by more than ``bar`` (see :func:`solve_one_slack`). Otherwise the oracle is called
        (and refreshes the cache).

        Returns ``(labels, losses, scores, from_oracle)``.
        """
        structure, batch, Y, cache = self.structure, self.batch, self.Y, self.cache
        if cache.filled:
            Ybar, losses, scores = cache.most_violating(structure, batch, Y, unary, pairwise,
                                                        self.rescale)
            margins = structure.score(batch, unary, pairwise, Y) - scores
            hinge = hinge_terms(losses, margins, self.rescale)
            if self.sample_weight @ hinge - slack > bar:
                return Ybar, losses, scores, False
        Ybar, losses, scores = structure.loss_augmented_decode(
            batch, unary, pairwise, Y, rescale=self.rescale, n_jobs=self.n_jobs,
            token_loss=self.token_loss)
        cache.insert(Ybar, losses)
        return Ybar, losses, scores, True

    def hinge(self, w):
        """The weighted sum of the exact hinge terms at ``w`` (one oracle call)."""
        hinge, _, _ = structured_hinge(self.structure, self.batch, self.Y,
                                       *self.structure.potentials(self.batch, w),
                                       self.rescale, self.n_jobs, self.token_loss)
        return float(self.sample_weight @ hinge)


def fit_one_slack(structure, batch, Y, sample_weight, *, C, rescale, cache_size,
                  inactive_window, n_jobs, certificate):
    """Algorithms 3 and 4 on a batch held in this process (see :func:`solve_one_slack`).

    Parameters
    ----------
    structure : bound structure
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    sample_weight : ndarray of shape (n_sequences,)
    C : float
    rescale : {"margin", "slack"}
    cache_size : int
    inactive_window : int
    n_jobs : int or None
    certificate : Certificate
        The fit's record; its ``tol`` and ``max_iter`` stop the fit.

    Returns
    -------
    w : ndarray of shape (size_joint_feature_,)
    dual_coef : ndarray of shape (n_constraints,)
    """
    oracle = LocalOracle(structure, batch, Y, sample_weight, rescale=rescale,
                         cache_size=cache_size, n_jobs=n_jobs)
    return solve_one_slack(structure, oracle, C=C, inactive_window=inactive_window,
                           certificate=certificate)


def solve_one_slack(structure, oracle, *, C, inactive_window, certificate):
    """Algorithms 3 (margin) and 4 (slack rescaling) on ``structure`` with the data behind
    ``oracle`` (a :class:`LocalOracle` or a sharded one); returns ``(w, dual_coef)`` and
    records the fit's progress on ``certificate``.

    Every oracle iteration certifies ``w = w(alpha)`` by the exact gap between the primal and
    the working-set dual; the fit stops when it is at most ``tol`` times the primal. A new
    constraint violated by at most ``epsilon = tol * primal / (2 C)`` cannot lower the gap much
    more than the working-set QP's own error, so the QP is then re-solved precisely instead
    (its error is kept below a tenth of the target). A cached constraint is used when it is
    violated by more than ``epsilon`` and by at least half the violation of the last oracle
    constraint, so that the cache saves oracle calls without trading them for many small
    steps.
    """
    n = oracle.n_sequences
    C, tol = float(C), certificate.tol
    working_set = oracle.working_set()
    w = np.zeros(structure.size_joint_feature_)
    alpha = np.zeros(0)
    last_active = np.zeros(0, dtype=np.int64)
    oracle_calls = 0
    oracle_violation = np.inf
    # the primal at w = 0 bounds the objective: the first target violation
    primal_scale = C * oracle.loss_bound
    for iteration in range(1, certificate.max_iter + 1):
        epsilon = 0.5 * tol * primal_scale / C
        norm2 = float(alpha @ working_set.gram @ alpha)
        dual = float(alpha @ working_set.offsets) - 0.5 * norm2
        slack = max(0.0, float(np.max(working_set.offsets - working_set.gram @ alpha))) \
            if alpha.size else 0.0
        cut = oracle.separate(w, slack, max(epsilon, 0.5 * oracle_violation))
        from_oracle = cut.from_oracle
        oracle_calls += n * from_oracle
        # with the oracle, the hinge terms are exact and give the primal objective
        primal = 0.5 * norm2 + C * cut.hinge if from_oracle else np.nan
        violation = cut.hinge - slack
        if from_oracle:
            oracle_violation = violation
            primal_scale = primal
        if certificate.check(iteration, primal, dual, oracle_calls, w=w,
                             converged=bool(from_oracle and primal - dual <= tol * primal),
                             n_constraints=len(working_set)):
            certified = from_oracle
            break
        final_qp_tol = 0.2 * epsilon
        if from_oracle and violation <= epsilon:
            qp_tol = final_qp_tol  # the QP's error dominates: re-solve it precisely
        else:
            working_set.add(*cut.direction, offset=cut.offset)
            alpha = np.append(alpha, 0.0)
            last_active = np.append(last_active, iteration)
            # the QP is solved more precisely as the outer loop converges (section 4)
            qp_tol = max(final_qp_tol, 0.01 * violation)
        alpha, _, _ = solve_capped_simplex_qp(
            working_set.gram, working_set.offsets, C, alpha0=alpha, tol=qp_tol
        )
        last_active[alpha > 0] = iteration
        stale = iteration - last_active >= inactive_window
        if stale.any():
            working_set.remove(~stale)
            alpha, last_active = alpha[~stale], last_active[~stale]
        w = working_set.combine(alpha)
    else:  # max_iter: the weights moved after the last check
        certified = False
    if not certified:  # certify the weights returned
        norm2 = float(alpha @ working_set.gram @ alpha)
        primal = 0.5 * norm2 + C * oracle.hinge(w)
        dual = float(alpha @ working_set.offsets) - 0.5 * norm2
        reason = certificate.stop_reason
        certificate.check(iteration, primal, dual, oracle_calls + n, w=w,
                          n_constraints=len(working_set),
                          note="(the weights returned, after this iteration's QP)")
        certificate.stop_reason = certificate.stop_reason or reason
    certificate.finish(iteration)
    return w, alpha
