"""First-order arc-factored dependency trees over candidate-arc rows."""

import numpy as np
from scipy.special import logsumexp, softmax

from .._inference._dependency_kernels import DependencyKernels, arc_rows
from .._inference.dependency import check_heads, decode_trees, tree_marginals
from ..utils._warnings import warn_user
from ._parts import PartsStructure


class DependencyTree(PartsStructure):
    """Dependency trees with first-order (arc-factored) scores, one row per candidate arc.

    A sentence of ``n`` tokens is an example of ``n * n`` rows, its candidate arcs
    ``h -> m`` (modifier ``m`` in ``1..n``, head ``h`` in ``0..n`` with 0 the root, ``h != m``),
    modifier by modifier: row ``(m - 1) * n + (h if h < m else h - 1)``
    (:meth:`arc_index`). The rows of ``X`` are the arcs' features (head and modifier words,
    their tags, direction, distance: :class:`sklstruct.parsing.ArcFeatures`), so the unary
    block of the weights scores arcs. State 0 of a row is "not an arc of the tree"; states
    ``1 .. n_states - 1`` are "an arc of the tree", with one state (unlabelled parsing) or one
    per relation (the joint labelled model). The score of a tree ``y`` is that of every
    structure, ``w . Psi(x, y) = sum_rows W[y_row] . x_row``, and differs from the sum of its
    arcs' scores ``(W[y_row] - W[0]) . x_row`` by a constant of the sentence, so the model is
    McDonald, Crammer and Pereira's (2005) first-order model with arc weights
    ``W[s] - W[0]``.

    Loss: the number of tokens whose head (or, labelled, whose head or relation) is wrong,
    ``Delta(y, ybar) = sum_m [head or relation of m differs]``, which is the row-decomposed
    :meth:`token_loss`: 1/2 for a gold arc left out and 1/2 for a wrong arc put in (a wrong
    head costs both halves), 1 for a gold arc given another relation.

    Oracles: decoding and loss-augmented decoding (margin rescaling) by Eisner's algorithm
    (projective trees, O(n^3)) or the Chu-Liu-Edmonds algorithm (all trees, O(n^2)), on the
    arc scores ``max_{s >= 1} u[row, s] - u[row, 0]``; marginals by inside-outside over
    Eisner's chart or the matrix-tree theorem, on ``logsumexp_{s >= 1} u[row, s] - u[row, 0]``
    (see :mod:`sklstruct._inference.dependency`). All run compiled over whole batches, and
    per sentence in the learners' compiled passes
    (:class:`~sklstruct._inference._dependency_kernels.DependencyKernels`). There is no
    pairwise block. Slack rescaling is refused (its loss-augmented problem does not
    decompose over arcs).

    Parameters
    ----------
    projective : bool, default=True
        Predict projective trees (Eisner) or any tree (Chu-Liu-Edmonds).
    single_root : bool, default=False
        Attach exactly one token to the root.

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
    """

    def __init__(self, *, projective=True, single_root=False):
        self.projective = projective
        self.single_root = single_root

    def bind(self, n_features, n_states, classes=None, y=None):
        for name in ("projective", "single_root"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if n_states < 2:
            raise ValueError(
                "DependencyTree needs rows of two kinds, arcs and non-arcs (states 0 and 1 "
                f"or more); the data has {n_states} state(s): are all sentences one token "
                "long?"
            )
        return super().bind(n_features, n_states, classes, y)

    # ----------------------------------------------------------------- layout
    _rows_text = ("tokens", "n * n", "candidate-arc")

    @staticmethod
    def rows_of(n_words):
        """Candidate-arc rows of sentences of ``n_words`` tokens, ``n * n``.

        Parameters
        ----------
        n_words : ndarray of int64

        Returns
        -------
        n_rows : ndarray of int64
        """
        n_words = np.asarray(n_words, dtype=np.int64)
        return n_words * n_words

    def _chart_layout(self, n_tokens):
        """The chart position of every row (:func:`arc_rows`)."""
        return arc_rows(n_tokens)

    @staticmethod
    def arc_index(n_tokens, heads):
        """Rows of the arcs ``heads[m - 1] -> m`` of every sentence, in token order.

        Parameters
        ----------
        n_tokens : ndarray of int of shape (n_sentences,)
        heads : ndarray of int of shape (sum(n_tokens),)
            The heads of every sentence, concatenated (0 is the root).

        Returns
        -------
        rows : ndarray of int64 of shape (sum(n_tokens),)
            Indices into the batch's ``sum(n_tokens ** 2)`` rows.
        """
        n_tokens = np.asarray(n_tokens, dtype=np.int64)
        heads = np.asarray(heads, dtype=np.int64)
        sentence_rows = np.concatenate(([0], np.cumsum(n_tokens ** 2)[:-1]))
        token_starts = np.concatenate(([0], np.cumsum(n_tokens)[:-1]))
        sentence = np.repeat(np.arange(n_tokens.shape[0]), n_tokens)
        m = np.arange(heads.shape[0]) - token_starts[sentence] + 1
        n = n_tokens[sentence]
        return sentence_rows[sentence] + (m - 1) * n + heads - (heads > m)

    def labels_from_heads(self, n_tokens, heads, states=None):
        """Row labels of trees: state 0 everywhere but on the trees' arcs.

        Parameters
        ----------
        n_tokens : ndarray of int of shape (n_sentences,)
        heads : ndarray of int of shape (sum(n_tokens),)
        states : ndarray of int of shape (sum(n_tokens),), default=None
            The state (>= 1) of every arc; 1 by default.

        Returns
        -------
        labels : ndarray of int64 of shape (sum(n_tokens ** 2),)
        """
        labels = np.zeros(int(np.sum(np.asarray(n_tokens) ** 2)), dtype=np.int64)
        labels[self.arc_index(n_tokens, heads)] = 1 if states is None else states
        return labels

    @staticmethod
    def heads_from_labels(n_tokens, labels):
        """Heads and arc states of the trees that row labels encode.

        Parameters
        ----------
        n_tokens : ndarray of int of shape (n_sentences,)
        labels : ndarray of int of shape (sum(n_tokens ** 2),)
            A tree's labels per sentence (one row in a state >= 1 per modifier).

        Returns
        -------
        heads : ndarray of int64 of shape (sum(n_tokens),)
        states : ndarray of int64 of shape (sum(n_tokens),)
        """
        n_tokens = np.asarray(n_tokens, dtype=np.int64)
        labels = np.asarray(labels)
        offsets = np.concatenate(([0], np.cumsum(n_tokens ** 2)))
        if labels.shape != (offsets[-1],):
            raise ValueError(f"labels must have sum(n_tokens ** 2) = {offsets[-1]} entries, "
                             f"got {labels.shape}.")
        arcs = np.flatnonzero(labels)
        sentence = np.searchsorted(offsets, arcs, side="right") - 1
        local = arcs - offsets[sentence]
        n = n_tokens[sentence]
        m = local // n + 1
        modifiers = np.zeros(n_tokens.sum(), dtype=np.int64)
        token_starts = np.concatenate(([0], np.cumsum(n_tokens)[:-1]))
        np.add.at(modifiers, token_starts[sentence] + m - 1, 1)
        if np.any(modifiers != 1):
            t = int(np.flatnonzero(modifiers != 1)[0])
            i = int(np.searchsorted(token_starts, t, side="right") - 1)
            raise ValueError(f"the labels of sentence {i} give token {t - token_starts[i] + 1} "
                             f"{modifiers[t]} heads; a tree has one head per token.")
        h = local % n
        h = h + (h >= m)
        # rows are modifier-major, so the arcs come sentence by sentence in token order
        return h.astype(np.int64), labels[arcs].astype(np.int64)

    # ----------------------------------------------------------------- loss
    def token_loss(self, Y):
        """Row losses whose sum is the number of wrongly attached (or labelled) tokens.

        ``L[row, s]`` is 1/2 for ``s >= 1`` on a non-arc row (a wrong arc put in), 1/2 for
        ``s = 0`` on a gold-arc row (a gold arc left out), 1 for another relation on a
        gold-arc row, and 0 for the true state.

        Parameters
        ----------
        Y : ndarray of int of shape (n_rows,)
            True row labels.

        Returns
        -------
        token_loss : ndarray of shape (n_rows, n_states)
        """
        S = self.n_states_
        gold = np.asarray(Y) > 0
        loss = np.where(gold[:, None], 1.0, 0.5) * np.ones((1, S))
        loss[gold, 0] = 0.5
        loss[np.arange(loss.shape[0]), Y] = 0.0
        return loss

    # ----------------------------------------------------------------- oracles
    def _charts(self, batch, arc_scores):
        """The concatenated ``(n + 1) x (n + 1)`` score charts of per-row arc scores."""
        n_tokens, chart_index = self._layout(batch)
        charts = np.zeros(int(np.sum((n_tokens + 1) ** 2)))
        charts[chart_index] = arc_scores
        return charts, n_tokens, chart_index

    def _best_trees(self, batch, unary, n_jobs):
        """Row labels of the best tree of every sentence under ``unary`` row scores."""
        if batch.n_sequences == 0:
            return np.zeros(0, dtype=np.int64)
        best_state = np.argmax(unary[:, 1:], axis=1) + 1
        rows = np.arange(unary.shape[0])
        charts, n_tokens, _ = self._charts(batch, unary[rows, best_state] - unary[:, 0])
        heads, _ = decode_trees(charts, n_tokens, self.projective, self.single_root,
                                n_jobs=n_jobs)
        labels = np.zeros(unary.shape[0], dtype=np.int64)
        arcs = self.arc_index(n_tokens, heads)
        labels[arcs] = best_state[arcs]
        return labels

    def decode(self, batch, unary, pairwise, n_jobs=None):
        return self._best_trees(batch, unary, n_jobs)

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        labels, losses, scores = self._shifted_loss_augmented_decode(
            batch, unary, pairwise, Y, rescale, n_jobs, token_loss)
        if self.projective and batch.n_sequences:
            # a non-projective true tree is no output of the decoder: where it beats every
            # projective tree (loss 0 against loss + score), it is the most violating output,
            # the hinge's zero term
            Y = self.check_labels(batch, Y)
            truth = self.score(batch, unary, pairwise, Y)
            better = np.flatnonzero(truth > losses + scores)
            if better.shape[0]:
                rows = np.repeat(np.arange(batch.n_sequences), batch.lengths)
                taken = np.isin(rows, better)
                labels = np.where(taken, Y, labels)
                losses, scores = losses.copy(), scores.copy()
                losses[better], scores[better] = 0.0, truth[better]
        return labels, losses, scores

    def check_learnable_by_marginals(self, batch, Y, weights=None):
        """Warn of training trees that the marginals of projective trees cannot represent.

        A learner on marginals (``M3NExpGrad``, ``M3NExcessiveGap``) keeps its dual as a
        distribution over the structure's outputs; with ``projective=True`` a
        non-projective training tree is none of them. The hinge's zero term, the true tree,
        is then out of the dual's reach: the fit may stop short of the optimum, with a gap
        that says so (the certificate stays valid).

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_rows,)
        weights : ndarray of shape (n_sequences,), default=None
            The fit's sample weights: the trees of weight 0 are not trained on, and not
            checked.
        """
        if not self.projective or batch.n_sequences == 0:
            return
        n_tokens, _ = self._layout(batch)
        heads, _ = self.heads_from_labels(n_tokens, self.check_labels(batch, Y))
        if weights is not None:  # (a flat tree, every token on the root, is projective)
            heads[np.repeat(np.asarray(weights) == 0, n_tokens)] = 0
        try:
            check_heads(heads, n_tokens, projective=True)
        except ValueError as error:
            warn_user(
                f"Training {str(error)[0].lower()}{str(error)[1:]} With projective=True the "
                "marginals of projective trees cannot represent a non-projective training "
                "tree: the fit may stop short of the optimum, with a duality gap that says "
                "so. Use projective=False, or a learner on the max-oracle "
                "(M3NSimplicialDecomposition, StructSVMCuttingPlane), whose hinge takes the "
                "true tree where it beats every projective one.", UserWarning)

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        if batch.n_sequences == 0:
            return np.zeros_like(unary), np.zeros((0, 0)), np.zeros(0)
        arc_pot = logsumexp(unary[:, 1:], axis=1)
        charts, n_tokens, chart_index = self._charts(batch, arc_pot - unary[:, 0])
        arc_marg, log_z = tree_marginals(charts, n_tokens, self.projective, self.single_root,
                                         n_jobs=n_jobs)
        p = arc_marg[chart_index]
        node = np.empty_like(unary)
        node[:, 0] = 1.0 - p
        node[:, 1:] = p[:, None] * softmax(unary[:, 1:], axis=1)
        return node, np.zeros((batch.n_sequences, 0)), \
            log_z + batch.sum_per_sequence(unary[:, 0])

    def example_kernels(self, batch):
        n_tokens, _ = self._layout(batch)
        return DependencyKernels(batch.offsets, n_tokens, self.n_states_, bool(self.projective),
                                 bool(self.single_root))
