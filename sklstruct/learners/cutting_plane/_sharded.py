"""The cutting-plane learner's sharded data and separation oracle (see
:mod:`sklstruct.distributed`, its public face, for the algorithm and the guarantees).

Each shard's data live in a dask actor (:class:`_Shard`) on the worker that holds them;
:class:`ShardOracle` runs the 1-slack separation oracle as a map-reduce over them, with the
interface of the local oracle, so that :func:`~._one_slack.solve_one_slack` runs unchanged.
"""

import numbers

import numpy as np
import scipy.sparse as sp

from ..._input import check_sequence_weights
from ...structures._base import checked_token_loss, hinge_terms, structured_hinge
from ...utils._growable import GrowableArray
from ...utils._sequences import (
    SequenceBatch,
    check_label_kinds,
    check_lengths,
    check_token_matrix,
    comparable_labels,
    flatten_labels,
    label_kinds,
    offsets_from_lengths,
    stack_sequences,
)
from ._label_cache import LabelCache
from ._one_slack import DENSE_BYTES_PER_CONSTRAINT, Cut, constraint_direction

__all__ = ["ShardLostError", "ShardOracle", "ShardedSequences"]


class ShardLostError(RuntimeError):
    """A shard of a :class:`ShardedSequences` was lost with its worker."""


def _client(client):
    from dask.distributed import default_client

    return default_client() if client is None else client


# ---------------------------------------------------------------------------------- shards
class _ShardData:
    """One shard's validated training data: CSR tokens, raw labels, offsets, weights."""

    def __init__(self, X, y, lengths=None, sample_weight=None):
        if _is_empty(X, lengths):  # e.g. a partition that a filter emptied: dropped
            self.X, self.y, self.offsets = None, None, np.zeros(1, dtype=np.int64)
            self.sample_weight = np.zeros(0)
            return
        if isinstance(X, (list, tuple)):
            if lengths is not None:
                raise ValueError("lengths= is only used with a flat X, not a list of sequences.")
            X, lengths = stack_sequences(X)
            y = flatten_labels(y, lengths)
        elif lengths is None:
            raise ValueError("A flat shard X needs lengths=.")
        X = check_token_matrix(X)
        self.X = X if sp.issparse(X) else sp.csr_matrix(X)
        self.y = np.asarray(y) if isinstance(y, np.ndarray) else np.asarray(y, dtype=object)
        check_label_kinds(label_kinds(self.y))
        if self.y.dtype == object and self.y.size:
            self.y = np.asarray(self.y.tolist())
        lengths = check_lengths(lengths, self.X.shape[0])
        if self.y.shape != (self.X.shape[0],):
            raise ValueError(f"A shard has {self.X.shape[0]} tokens but {self.y.shape[0]} labels.")
        self.offsets = offsets_from_lengths(lengths)
        # the shards' total weight is checked by the fit, over all shards
        self.sample_weight = check_sequence_weights(sample_weight, lengths.shape[0],
                                                     allow_all_zero=True)

    @property
    def n_sequences(self):
        return self.offsets.shape[0] - 1

    @property
    def nbytes(self):
        if self.X is None:
            return 0
        X = self.X
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + self.y.nbytes + \
            self.offsets.nbytes + self.sample_weight.nbytes


def _is_empty(X, lengths):
    """Whether shard data hold no sequence (an empty list, or no rows and no lengths)."""
    if isinstance(X, (list, tuple)):
        return len(X) == 0
    return getattr(X, "shape", (None,))[0] == 0 and (lengths is None or len(lengths) == 0)


def _n_sequences(data):
    """Sequences of a shard's data (run on its worker)."""
    return data.n_sequences


def _load(part):
    """A shard from what a part evaluates to: ``(X, y)``, ``(X, y, lengths)`` or
    ``(X, y, lengths, sample_weight)``."""
    if isinstance(part, _ShardData):
        return part
    return _ShardData(*part)


def _vectorise(records, vectorizer):
    """A shard from a bag partition of ``(token_dicts, labels)`` records."""
    records = list(records)
    if not records:
        return _ShardData([], [])
    return _ShardData(vectorizer.transform([tokens for tokens, _ in records]),
                      [np.asarray(labels) for _, labels in records])


def _nbytes(value):
    """Bytes of the arrays in a call's arguments or answer."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 8 if isinstance(value, numbers.Number) else 0


class _Shard:
    """The dask actor that holds one shard on its worker and answers the oracle calls.

    It keeps the shard's data, its encoded labels, its per-token losses, its label cache and
    the potentials of the last weights it was sent, and counts what its calls carried.
    """

    def __init__(self, data):
        self.data = data
        self.calls = 0
        self.bytes_in = 0
        self.bytes_out = 0

    def _count(self, arguments, answer):
        self.calls += 1
        self.bytes_in += _nbytes(arguments)
        self.bytes_out += _nbytes(answer)
        return answer

    def summary(self):
        """``(n_features, labels, counts, total weight)`` of the shard."""
        labels, counts = np.unique(self.data.y, return_counts=True)
        return self.data.X.shape[1], labels, counts, float(self.data.sample_weight.sum())

    def stats(self):
        """Calls answered, bytes of their arguments and answers, and the shard's bytes."""
        return dict(calls=self.calls, bytes_in=self.bytes_in, bytes_out=self.bytes_out,
                    shard_bytes=self.data.nbytes, n_tokens=int(self.data.offsets[-1]),
                    n_sequences=int(self.data.offsets.shape[0] - 1))

    def prepare(self, structure, classes, rescale, cache_size, n_jobs):
        """Bind the shard to a fit; return ``(n_sequences, loss_bound)``. The sequences of
        weight 0 take no part in it, as in a local fit (their labels still count in
        :meth:`summary`, as a local fit's structure set-up reads them)."""
        data = self.data
        self.structure, self.rescale, self.n_jobs = structure, rescale, n_jobs
        self.batch = SequenceBatch(data.X, data.offsets)
        index = np.searchsorted(*comparable_labels(classes, data.y))
        self.Y = np.clip(index, 0, classes.shape[0] - 1).astype(np.intp)
        kept = np.flatnonzero(data.sample_weight > 0)
        self.weights = data.sample_weight[kept]
        if kept.shape[0] < self.batch.n_sequences:
            self.batch, tokens = self.batch.select(kept)
            self.Y = self.Y[tokens]
        self.token_loss = checked_token_loss(structure, self.Y) \
            if structure.loss_decomposes else None
        self.cache = LabelCache(self.batch.n_tokens, self.batch.n_sequences, cache_size)
        self.dense = 8 * structure.size_joint_feature_ <= DENSE_BYTES_PER_CONSTRAINT
        self.potentials = None
        bound = float(self.weights @ structure.max_loss(self.batch, self.Y))
        return self._count((classes,), (self.batch.n_sequences, bound))

    def _answer(self, Ybar, losses, scores):
        """``(hinge, offset, direction)`` of the shard's constraint of labelling ``Ybar``."""
        structure, batch, Y = self.structure, self.batch, self.Y
        unary, pairwise = self.potentials
        weights = self.weights
        hinge = hinge_terms(losses, structure.score(batch, unary, pairwise, Y) - scores,
                            self.rescale)
        scale = weights * (1.0 if self.rescale == "margin" else losses)
        g, _, _, _ = constraint_direction(structure, batch, Y, Ybar, scale)
        if not self.dense:
            nonzero = np.flatnonzero(g)
            g = (nonzero, g[nonzero])
        return float(weights @ hinge), float(weights @ losses), g

    def cached(self, w):
        """The weighted hinge sum of the most violating cached labellings at ``w`` (kept for
        :meth:`take_cached`)."""
        self.potentials = self.structure.potentials(self.batch, w)
        self.candidate = self.cache.most_violating(
            self.structure, self.batch, self.Y, *self.potentials, self.rescale)
        Ybar, losses, scores = self.candidate
        unary, pairwise = self.potentials
        hinge = hinge_terms(losses, self.structure.score(self.batch, unary, pairwise, self.Y)
                            - scores, self.rescale)
        return self._count((w,), float(self.weights @ hinge))

    def take_cached(self):
        """The constraint of the cached labellings of the last :meth:`cached` call."""
        return self._count((), self._answer(*self.candidate))

    def oracle(self, w=None):
        """The constraint of loss-augmented decoding at ``w`` (``None``: the weights of the
        last call), which also enters the label cache."""
        if w is not None:
            self.potentials = self.structure.potentials(self.batch, w)
        Ybar, losses, scores = self.structure.loss_augmented_decode(
            self.batch, *self.potentials, self.Y, rescale=self.rescale, n_jobs=self.n_jobs,
            token_loss=self.token_loss)
        self.cache.insert(Ybar, losses)
        return self._count((w,), self._answer(Ybar, losses, scores))

    def hinge(self, w):
        """The weighted sum of the shard's exact hinge terms at ``w``."""
        hinge, _, _ = structured_hinge(self.structure, self.batch, self.Y,
                                       *self.structure.potentials(self.batch, w), self.rescale,
                                       self.n_jobs, self.token_loss)
        return self._count((w,), float(self.weights @ hinge))


class ShardedSequences:
    """Training sequences split into shards that live on the workers of a dask cluster.

    Make one with :meth:`scatter` (data in this process), :meth:`from_delayed` (each shard
    loaded or generated on a worker) or :meth:`from_bag` (token-dict sequences vectorised
    on the workers), then pass it as ``X`` to :meth:`StructSVMCuttingPlane.fit
    <sklstruct.StructSVMCuttingPlane.fit>` (with no ``y``: the labels are in the shards).
    Every fit on it reuses the shards where they are; only the weights and one direction per
    shard travel per iteration. See the module docstring for the algorithm and the guarantees.

    Parameters
    ----------
    client : dask.distributed.Client
        The client whose cluster holds the shards.
    sources : list of dask.distributed.Future
        One future per shard, holding the shard's validated data.
    scattered : bool, default=False
        Whether the shards were scattered from this process (then :meth:`restore` needs
        the data again) rather than computed on the cluster.

    Attributes
    ----------
    n_shards : int
        Number of shards.
    workers : list of str
        The address of the worker that holds each shard.

    Examples
    --------
    >>> from dask.distributed import Client, LocalCluster  # doctest: +SKIP
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.distributed import ShardedSequences
    >>> client = Client(LocalCluster(n_workers=2, processes=True))  # doctest: +SKIP
    >>> shards = ShardedSequences.scatter(X, y, client=client)  # doctest: +SKIP
    >>> model = StructSVMCuttingPlane(variant="1-slack").fit(shards)  # doctest: +SKIP
    """

    def __init__(self, client, sources, scattered=False):
        from dask.distributed import wait

        self.client = client
        self.scattered = scattered
        sources = list(sources)
        wait(sources)
        _raise_failed(sources)
        sizes = client.gather(client.map(_n_sequences, sources, pure=False))
        self._sources = [source for source, size in zip(sources, sizes) if size > 0]
        if not self._sources:
            raise ValueError(f"None of the {len(sources)} shards holds a sequence.")
        self._actors = [None] * len(self._sources)
        self.workers = [None] * len(self._sources)
        self._start_actors(range(len(self._sources)))

    @property
    def n_shards(self):
        return len(self._sources)

    def _start_actors(self, shards):
        client = self.client
        who_has = client.who_has([self._sources[k] for k in shards])
        futures = {}
        for k in shards:
            self.workers[k] = sorted(who_has[self._sources[k].key])[0]
            futures[k] = client.submit(_Shard, self._sources[k], actor=True, pure=False,
                                       workers=[self.workers[k]], allow_other_workers=False)
        for k, future in futures.items():
            self._actors[k] = future.result()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def scatter(cls, X, y, lengths=None, sample_weight=None, *, n_shards=None, client=None):
        """Split training data held here into shards and send each to a worker once.

        The sequences keep their order: shard ``k`` holds a run of consecutive sequences, the
        shards have about equal numbers of tokens and go to the workers in turn.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form) or flat tokens with ``lengths``.
        y : list of array-like, or array-like of shape (n_tokens,)
            Labels in the form of ``X``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_sequences,), default=None
            Per-sequence weights.
        n_shards : int, default=None
            Number of shards (default: one per worker).
        client : dask.distributed.Client, default=None
            Default: the current default client.

        Returns
        -------
        shards : ShardedSequences
        """
        client = _client(client)
        data = _ShardData(X, y, lengths, sample_weight)
        workers = sorted(client.scheduler_info()["workers"])
        n_shards = len(workers) if n_shards is None else int(n_shards)
        pieces = _split(data, n_shards)
        sources = [client.scatter(piece, workers=[workers[k % len(workers)]], hash=False)
                   for k, piece in enumerate(pieces)]
        return cls(client, sources, scattered=True)

    @classmethod
    def from_delayed(cls, parts, *, client=None):
        """Shards computed on the workers, one per part (nothing passes through here).

        Parameters
        ----------
        parts : list of dask.delayed.Delayed or dask.distributed.Future
            Each evaluates to ``(X, y)`` (lists of per-sequence matrices and label arrays),
            ``(X, y, lengths)`` (flat) or ``(X, y, lengths, sample_weight)``: for example a
            function that reads a file or generates data, wrapped in ``dask.delayed``.
        client : dask.distributed.Client, default=None
            Default: the current default client.

        Returns
        -------
        shards : ShardedSequences
        """
        import dask

        client = _client(client)
        loaded = [dask.delayed(_load)(part) for part in parts]
        return cls(client, client.compute(loaded))

    @classmethod
    def from_bag(cls, bag, vectorizer, *, client=None):
        """Shards from a ``dask.bag`` of ``(token_dicts, labels)`` records, one per partition.

        Each partition is vectorised on a worker by ``vectorizer.transform``; a stateless
        vectorizer such as :class:`~sklstruct.preprocessing.HashingSequenceVectorizer` gives
        every partition the same columns without a pass over all the data.

        Parameters
        ----------
        bag : dask.bag.Bag
            Records ``(token_dicts, labels)``: a list of per-token feature dicts and the list
            of their labels.
        vectorizer : transformer
            Turns a list of token-dict sequences into a list of sparse matrices.
        client : dask.distributed.Client, default=None
            Default: the current default client.

        Returns
        -------
        shards : ShardedSequences
        """
        import dask

        client = _client(client)
        parts = [dask.delayed(_vectorise)(part, vectorizer) for part in bag.to_delayed()]
        return cls(client, client.compute(parts))

    # ------------------------------------------------------------------ state
    def summaries(self):
        """What each shard holds, for the set-up of a fit.

        Returns
        -------
        summaries : list of tuple
            Per shard, ``(n_features, labels, counts, total_weight)``: the columns of its
            token matrix, its distinct token labels (ndarray) and their counts (ndarray),
            and the sum of its sequences' weights (float).
        """
        return self._call("summary")

    def stats(self):
        """What each shard's actor has answered so far.

        Returns
        -------
        stats : list of dict
            Per shard: ``calls``, ``bytes_in`` and ``bytes_out`` (bytes of the arrays in the
            calls' arguments and answers), ``shard_bytes`` (the shard's data), ``n_tokens``,
            ``n_sequences``.
        """
        return self._call("stats")

    def restore(self, X=None, y=None, lengths=None, sample_weight=None):
        """Rebuild the shards whose worker was lost.

        Shards made by :meth:`from_delayed` or :meth:`from_bag` are recomputed by dask; shards
        made by :meth:`scatter` are scattered again from the same data, which must then be
        given (the arguments of :meth:`scatter`).

        Parameters
        ----------
        X, y, lengths, sample_weight : default=None
            The data given to :meth:`scatter`, for scattered shards.

        Returns
        -------
        restored : list of int
            The shards rebuilt.
        """
        alive = set(self.client.scheduler_info()["workers"])
        lost = [k for k, worker in enumerate(self.workers) if worker not in alive]
        if not lost:
            return []
        if self.scattered:
            if X is None:
                raise ValueError("These shards were scattered: give restore() the data "
                                 "given to scatter() to send the lost shards again.")
            workers = sorted(alive)
            pieces = _split(_ShardData(X, y, lengths, sample_weight), self.n_shards)
            for i, k in enumerate(lost):
                self._sources[k] = self.client.scatter(
                    pieces[k], workers=[workers[i % len(workers)]], hash=False)
        else:
            from dask.distributed import wait

            wait([self._sources[k] for k in lost])
        self._start_actors(lost)
        return lost

    # ------------------------------------------------------------------ calls
    def _call(self, method, *args):
        """Call ``method`` on every shard's actor at once; the answers in shard order.

        A shard whose worker is gone raises :class:`ShardLostError`, whether dask reports it
        when the call is made (the actor of a worker lost before) or when it is answered;
        a closed client a ``RuntimeError`` that says so."""
        if self.client.status in ("closing", "closed"):
            raise RuntimeError(f"The dask client of these {self.n_shards} shards is closed; "
                               "their data went with it: make the shards again with an open "
                               "client.")
        pending, answers = [], []
        for k, actor in enumerate(self._actors):
            try:  # (dask refuses at once a call to the actor of a worker lost before)
                pending.append(getattr(actor, method)(*args))
            except RuntimeError as exc:
                self._raise_if_lost(k, exc)
                raise
        for k, future in enumerate(pending):
            try:
                answers.append(future.result())
            except (OSError, RuntimeError) as exc:
                self._raise_if_lost(k, exc)
                raise
        return answers

    def _raise_if_lost(self, k, exc):
        """:class:`ShardLostError` for shard ``k`` when ``exc`` came from losing its worker
        (an ``OSError`` of the connection, or its worker no longer in the cluster)."""
        if isinstance(exc, OSError) or \
                self.workers[k] not in self.client.scheduler_info()["workers"]:
            raise ShardLostError(
                f"Shard {k} of {self.n_shards} was lost with its worker "
                f"{self.workers[k]}; the fit stopped (the estimator is unchanged). "
                "Call ShardedSequences.restore() to rebuild the lost shards, then fit "
                "again.") from exc


def _raise_failed(sources):
    """Raise the error of the first shard whose data could not be made on its worker."""
    for k, source in enumerate(sources):
        if source.status == "error":
            error = source.exception()
            raise ValueError(f"Shard {k} of {len(sources)} failed on its worker: "
                             f"{type(error).__name__}: {error}") from error
        if source.status == "cancelled":
            raise ValueError(f"Shard {k} of {len(sources)} was cancelled before it was made.")


def _split(data, n_shards):
    """Runs of consecutive sequences with about equal numbers of tokens."""
    offsets = data.offsets
    n_sequences = offsets.shape[0] - 1
    if not 1 <= n_shards <= n_sequences:
        raise ValueError(f"n_shards must be between 1 and the number of sequences "
                         f"({n_sequences}); got {n_shards}.")
    targets = offsets[-1] * np.arange(1, n_shards) / n_shards
    cuts = np.searchsorted(offsets[1:-1], targets) + 1
    cuts = np.maximum(cuts, np.arange(1, n_shards))
    cuts = np.minimum(cuts, n_sequences - np.arange(n_shards - 1, 0, -1))
    bounds = np.concatenate([[0], np.maximum.accumulate(cuts), [n_sequences]])
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = slice(offsets[lo], offsets[hi])
        pieces.append(_ShardData(data.X[rows], data.y[rows], np.diff(offsets[lo:hi + 1]),
                                 data.sample_weight[lo:hi]))
    return pieces


# ---------------------------------------------------------------------------------- the fit
class _Directions:
    """The working set of a sharded fit: constraint directions kept as vectors.

    Dense rows (the same arithmetic as the single-machine working set's dense mode) when the
    parameter vector is at most ``DENSE_BYTES_PER_CONSTRAINT`` bytes, else sparse rows.
    """

    def __init__(self, size, dense):
        self.size, self.dense = size, dense
        self.gram = np.zeros((0, 0))
        self._offsets = GrowableArray()
        if dense:
            self._rows = GrowableArray((size,))
        else:
            self._row_nnz = GrowableArray(dtype=np.int64)
            self._indices = GrowableArray(dtype=np.int64)
            self._values = GrowableArray()

    def __len__(self):
        return self._offsets.data.shape[0]

    @property
    def offsets(self):
        return self._offsets.data

    def _matrix(self):
        indptr = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(self._row_nnz.data, out=indptr[1:])
        return sp.csr_matrix((self._values.data, self._indices.data, indptr),
                             shape=(len(self), self.size))

    def add(self, g, offset):
        k = len(self)
        row = np.empty(k + 1)
        if self.dense:
            row[:k] = self._rows.data @ g
            self._rows.extend(g[None, :])
            row[k] = g @ g
        else:
            indices, values = g
            dense = np.zeros(self.size)
            dense[indices] = values
            row[:k] = self._matrix() @ dense
            self._row_nnz.extend(np.array([indices.shape[0]]))
            self._indices.extend(indices)
            self._values.extend(values)
            row[k] = values @ values
        gram = np.empty((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :] = row
        gram[:, k] = row
        self.gram = gram
        self._offsets.extend(np.array([float(offset)]))

    def remove(self, keep):
        keep = np.asarray(keep, dtype=bool)
        if self.dense:
            self._rows.select(keep)
        else:
            on_entries = np.repeat(keep, self._row_nnz.data)
            self._indices.select(on_entries)
            self._values.select(on_entries)
            self._row_nnz.select(keep)
        self._offsets.select(keep)
        self.gram = self.gram[np.ix_(keep, keep)]

    def combine(self, alpha):
        if self.dense:
            return alpha @ self._rows.data
        return np.asarray(self._matrix().T @ alpha).ravel()


class ShardOracle:
    """The 1-slack separation oracle over the shards of a :class:`ShardedSequences`
    (the interface of :class:`~._one_slack.LocalOracle`).

    Parameters
    ----------
    shards : ShardedSequences
    structure : bound structure
    classes : ndarray of shape (n_classes,)
        The labels, in the order of the structure's states.
    rescale : {"margin", "slack"}
    cache_size : int
    n_jobs : int or None
        Threads of each shard's separation oracle.
    """

    def __init__(self, shards, structure, classes, *, rescale, cache_size, n_jobs):
        self.shards, self.cache_size = shards, cache_size
        answers = shards._call("prepare", structure, classes, rescale, cache_size, n_jobs)
        self.n_sequences = sum(n for n, _ in answers)
        self.loss_bound = sum(bound for _, bound in answers)
        self.size = structure.size_joint_feature_
        self.dense = 8 * self.size <= DENSE_BYTES_PER_CONSTRAINT
        self.cache_filled = False

    def working_set(self):
        return _Directions(self.size, self.dense)

    def _cut(self, answers, from_oracle):
        hinge = sum(answer[0] for answer in answers)
        offset = sum(answer[1] for answer in answers)
        if self.dense:
            g = answers[0][2].copy()
            for answer in answers[1:]:
                g += answer[2]
        else:
            indices = np.concatenate([answer[2][0] for answer in answers])
            values = np.concatenate([answer[2][1] for answer in answers])
            vector = sp.csr_matrix((values, indices, [0, indices.shape[0]]),
                                   shape=(1, self.size))
            vector.sum_duplicates()
            g = (vector.indices.astype(np.int64), vector.data)
        return Cut(hinge, offset, from_oracle, (g,))

    def separate(self, w, slack, bar):
        if self.cache_filled:
            if sum(self.shards._call("cached", w)) - slack > bar:
                return self._cut(self.shards._call("take_cached"), False)
            answers = self.shards._call("oracle", None)
        else:
            answers = self.shards._call("oracle", w)
        self.cache_filled = self.cache_size > 0
        return self._cut(answers, True)

    def hinge(self, w):
        return sum(self.shards._call("hinge", w))
