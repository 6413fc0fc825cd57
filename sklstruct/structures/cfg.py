"""Constituency trees of a weighted context-free grammar over span rows."""

import numbers

import numpy as np

from .._inference import cfg as cky
from .._inference._cfg_kernels import CFGKernels, tree_rules
from ._base import check_rescale
from ._parts import PartsStructure


class ConstituencyTree(PartsStructure):
    """Binary constituency trees of a grammar, one row per span of the sentence.

    A sentence of ``n`` words is an example of ``n (n + 1) / 2`` rows, its spans ``[i, j)``
    by length, then by start (the words first, the whole sentence last:
    :func:`sklstruct._inference.cfg.span_index`). The rows of ``X`` are the spans' features
    (the words' features on the length-1 spans, boundary words and tags of the longer spans:
    :class:`sklstruct.parsing.SpanFeatures`). State 0 of a row is "not a node of the tree";
    state ``a + 1`` is "a node labelled ``a``", a label of the
    :class:`~sklstruct.structures.Grammar` (a collapsed unary chain such as ``S+VP``,
    with a top and a bottom symbol). The score of a tree ``y`` is::

        w . Psi(x, y) = sum_rows W[y_row] . x_row + sum_rules theta[r] count_r(y)

    the unary block scores the labelled spans (lexical labels from the words' features,
    phrasal labels and the root from span features) and the pairwise block ``theta`` holds one
    weight per binary rule ``(bottom[parent], top[left], top[right])`` of the grammar, whose
    statistics are the rule counts of the tree: the joint feature ``Psi_CFG`` of Joachims,
    Finley and Yu (2009, section 5), with span features as in Taskar et al. (2004,
    "Max-margin parsing"). A row in state 0 contributes ``W[0] . x_row``, so the score differs
    from the sum of the labelled spans' ``(W[a + 1] - W[0]) . x_row`` and the rules' weights
    by a constant of the sentence.

    Losses (``loss_type``):

    - ``"brackets"``: false-positive plus false-negative labelled brackets, decomposed over
      the spans: a span whose true state is ``g`` and predicted state ``p`` costs
      ``sum_b |M[g, b] - M[p, b]|``, where row ``a + 1`` of ``M`` counts the brackets of each
      kind that label ``a`` stands for (``label_brackets``; row 0, "no node", is zero).
      With the evalb counts (the treebank labels of a collapsed chain, no bracket for
      intermediate nodes of a binarisation or for part-of-speech tags) the loss is the
      number of brackets in the predicted or the true tree but not in both, whose
      complement labelled-bracket F1 measures.
      Margin rescaling only: loss-augmented decoding is CKY on loss-shifted span scores.
    - ``"zero_one"``: ``Delta(y, ybar) = [y != ybar]``, the loss of the paper's experiment
      (which scales it by 100: ``loss_scale=100``). It does not decompose over rows: the
      most violating tree is the best tree other than the true one, found by 2-best CKY
      (:func:`sklstruct._inference.cfg.cky_best_other`), for margin and slack rescaling;
      only learners that take the losses from the oracle train with it
      (:class:`~sklstruct.StructSVMCuttingPlane`).

    Oracles run compiled over whole batches: decoding is Viterbi CKY, loss-augmented
    decoding CKY on ``unary + token_loss`` or 2-best CKY, marginals inside-outside (the
    marginal of state 0 of a span is the probability that it is not a node), each in
    O(n^3 n_rules + n^2 n_labels) per sentence; the learners' compiled passes run the same
    per sentence (:class:`~sklstruct._inference._cfg_kernels.CFGKernels`). A sentence
    without a tree of the grammar decodes to all-zero labels (no node at all).

    Parameters
    ----------
    grammar : Grammar
        The grammar (:class:`~sklstruct.structures.Grammar`); the data must have
        ``grammar.n_labels + 1`` states.
    label_brackets : array-like of shape (n_labels, n_kinds), default=None
        Non-negative counts of the brackets of each kind that every label stands for, the
        ``M`` of the bracket loss. None: every phrasal label is one bracket of its own kind
        and a label allowed on words only is none.
    loss_type : {"brackets", "zero_one"}, default="brackets"
    loss_scale : float, default=1.0
        Positive factor of the loss.

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

    def __init__(self, grammar=None, *, label_brackets=None, loss_type="brackets",
                 loss_scale=1.0):
        self.grammar = grammar
        self.label_brackets = label_brackets
        self.loss_type = loss_type
        self.loss_scale = loss_scale

    def bind(self, n_features, n_states, classes=None, y=None):
        if not isinstance(self.grammar, cky.Grammar):
            raise TypeError(f"ConstituencyTree needs a Grammar, got "
                            f"{type(self.grammar).__name__}.")
        K = self.grammar.n_labels
        if n_states != K + 1:
            raise ValueError(
                f"ConstituencyTree over a grammar of {K} labels needs {K + 1} states (0: no "
                f"node, a + 1: label a); the data has {n_states}. Every label and state 0 "
                "must occur in the training rows (a sentence of three words or more has "
                "spans off its tree).")
        if self.loss_type not in ("brackets", "zero_one"):
            raise ValueError(f"loss_type must be 'brackets' or 'zero_one', got "
                             f"{self.loss_type!r}.")
        scale = self.loss_scale
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) \
                or not np.isfinite(scale) or scale <= 0:
            raise ValueError(f"loss_scale must be a positive finite number, got {scale!r}.")
        counts = self._bracket_counts()
        bound = super().bind(n_features, n_states, classes, y)
        states = np.vstack([np.zeros((1, counts.shape[1])), counts])
        bound.state_loss_ = float(scale) * np.abs(
            states[:, None, :] - states[None, :, :]).sum(axis=2)
        return bound

    def _bracket_counts(self):
        grammar = self.grammar
        if self.label_brackets is None:
            counts = np.zeros((grammar.n_labels, grammar.n_labels))
            counts[np.diag_indices(grammar.n_labels)] = grammar.phrasal
            return counts
        counts = np.asarray(self.label_brackets)
        if counts.dtype.kind not in "biuf":
            raise TypeError(f"label_brackets must hold numbers, got dtype {counts.dtype}.")
        if counts.ndim != 2 or counts.shape[0] != grammar.n_labels:
            raise ValueError(f"label_brackets must have shape ({grammar.n_labels}, n_kinds), "
                             f"one row per label, got {counts.shape}.")
        counts = counts.astype(np.float64)
        if not np.isfinite(counts).all() or np.any(counts < 0):
            raise ValueError("label_brackets must be finite and non-negative.")
        return counts

    @property
    def n_pairwise_(self):
        """One weight per rule of the grammar."""
        return self.grammar.n_rules

    @property
    def loss_decomposes(self):
        """The bracket loss decomposes over span rows, the 0/1 loss does not."""
        return self.loss_type == "brackets"

    # ----------------------------------------------------------------- layout
    _rows_text = ("words", "n (n + 1) / 2", "span")

    @staticmethod
    def rows_of(n_words):
        """Span rows of sentences of ``n_words`` words, ``n (n + 1) / 2``.

        Parameters
        ----------
        n_words : ndarray of int64

        Returns
        -------
        n_rows : ndarray of int64
        """
        n_words = np.asarray(n_words, dtype=np.int64)
        return n_words * (n_words + 1) // 2

    # ----------------------------------------------------------------- statistics
    def _node_rules(self, batch, Y):
        """Sentence and rule index of every internal node of the trees ``Y``.

        A labelling that is not a tree of the grammar raises ``ValueError``
        (:func:`sklstruct._inference.cfg.check_span_tree` names the sentence, the span and
        the reason)."""
        n_words = self._layout(batch)[0]
        Y = np.ascontiguousarray(self.check_labels(batch, Y), dtype=np.int64)
        rules = np.empty(int(np.sum(n_words - 1)), dtype=np.int64)
        bad = tree_rules(Y, n_words, self.grammar, rules)
        if bad >= 0:
            rows = slice(batch.offsets[bad], batch.offsets[bad + 1])
            try:
                cky.check_span_tree(Y[rows] - 1, n_words[bad:bad + 1], self.grammar)
            except ValueError as error:
                raise ValueError(str(error).replace("sentence 0", f"sentence {bad}")) \
                    from None
            raise ValueError(f"the states of sentence {bad} are not a tree of the grammar.")
        return np.repeat(np.arange(batch.n_sequences), n_words - 1), rules

    def pairwise_statistics(self, batch, Y, weights=None, per_sequence=False):
        R = self.grammar.n_rules
        sentence, rules = self._node_rules(batch, Y)
        if per_sequence:
            return np.bincount(sentence * R + rules, minlength=batch.n_sequences * R) \
                .reshape(batch.n_sequences, R).astype(np.float64)
        return np.bincount(rules, weights=None if weights is None else weights[sentence],
                           minlength=R).astype(np.float64)

    def pairwise_scores(self, batch, Y, pairwise):
        sentence, rules = self._node_rules(batch, Y)
        return np.bincount(sentence, weights=np.asarray(pairwise)[rules],
                           minlength=batch.n_sequences).astype(np.float64)

    def pairwise_count_blocks(self, batch):
        """The rule counts of a tree sum to its ``n - 1`` internal nodes.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        blocks : list of (int, int, ndarray of shape (n_sentences,))
        """
        n_words = self._layout(batch)[0]
        return [(0, self.grammar.n_rules, n_words - 1.0)]

    # ----------------------------------------------------------------- loss
    def token_loss(self, Y):
        """Per-span losses of the bracket loss: ``L[row, p] = state_loss_[Y[row], p]``.

        Parameters
        ----------
        Y : ndarray of int of shape (n_rows,)
            True span states.

        Returns
        -------
        token_loss : ndarray of shape (n_rows, n_states)
        """
        if not self.loss_decomposes:
            raise ValueError("the 0/1 loss of ConstituencyTree(loss_type='zero_one') does not "
                             "decompose over span rows.")
        return self.state_loss_[np.asarray(Y)]

    def loss(self, batch, Y_true, Y_pred):
        if self.loss_decomposes:
            return super().loss(batch, Y_true, Y_pred)
        Y_true = self.check_labels(batch, Y_true)
        Y_pred = self.check_labels(batch, Y_pred)
        differ = np.bincount(batch.sequence_index, weights=Y_true != Y_pred,
                             minlength=batch.n_sequences)
        return float(self.loss_scale) * (differ > 0)

    def max_loss(self, batch, Y):
        """The largest loss of every sentence's trees.

        Bracket loss: the loss of the loss-augmented tree at zero scores (exact); 0/1 loss:
        ``loss_scale``.

        Parameters
        ----------
        batch : SequenceBatch
        Y : ndarray of int of shape (n_rows,)
            True span states.

        Returns
        -------
        max_loss : ndarray of shape (n_sentences,)
        """
        if not self.loss_decomposes:
            return np.full(batch.n_sequences, float(self.loss_scale))
        zeros = np.zeros((batch.n_tokens, self.n_states_))
        return self.loss_augmented_decode(batch, zeros, np.zeros(self.n_pairwise_), Y)[1]

    # ----------------------------------------------------------------- oracles
    @staticmethod
    def _span_scores(unary):
        """Label scores relative to state 0, ``unary[:, 1:] - unary[:, :1]``."""
        unary = np.asarray(unary, dtype=np.float64)
        return unary[:, 1:] - unary[:, :1]

    def decode(self, batch, unary, pairwise, n_jobs=None):
        if batch.n_sequences == 0:
            return np.zeros(0, dtype=np.int64)
        n_words = self._layout(batch)[0]
        labels, _ = cky.cky_decode(self._span_scores(unary), n_words, self.grammar, pairwise,
                                   n_jobs=n_jobs)
        return labels + 1

    def loss_augmented_decode(self, batch, unary, pairwise, Y, rescale="margin", n_jobs=None,
                              token_loss=None):
        check_rescale(rescale)
        if not self.loss_decomposes:
            return self._best_other(batch, unary, pairwise, Y, rescale, n_jobs)
        return self._shifted_loss_augmented_decode(batch, unary, pairwise, Y, rescale, n_jobs,
                                                   token_loss)

    def _best_other(self, batch, unary, pairwise, Y, rescale, n_jobs):
        """Most violating trees of the 0/1 loss: the best tree other than the true one
        (2-best CKY) when it violates the margin, else the true tree (loss 0)."""
        n_words = self._layout(batch)[0]
        Y = np.asarray(self.check_labels(batch, Y), dtype=np.int64)
        other, other_cky = cky.cky_best_other(self._span_scores(unary), n_words, self.grammar,
                                              Y - 1, pairwise, n_jobs=n_jobs)
        other = other + 1
        exists = np.isfinite(other_cky)
        true_scores = self.score(batch, unary, pairwise, Y)
        rows = exists[batch.sequence_index]
        candidate = np.where(rows, other, Y)
        other_scores = self.score(batch, unary, pairwise, candidate)
        scale = float(self.loss_scale)
        margin = other_scores - true_scores
        violated = exists & ((scale + margin > 0) if rescale == "margin" else (1.0 + margin > 0))
        labels = np.where(violated[batch.sequence_index], other, Y)
        return labels, np.where(violated, scale, 0.0), np.where(violated, other_scores,
                                                                true_scores)

    def marginals(self, batch, unary, pairwise, n_jobs=None):
        if batch.n_sequences == 0:
            return np.zeros_like(unary), np.zeros((0, self.n_pairwise_)), np.zeros(0)
        n_words = self._layout(batch)[0]
        unary = np.asarray(unary, dtype=np.float64)
        marg, counts, log_z = cky.inside_outside(self._span_scores(unary), n_words,
                                                 self.grammar, pairwise, n_jobs=n_jobs)
        node = np.empty_like(unary)
        node[:, 1:] = marg
        node[:, 0] = np.maximum(1.0 - marg.sum(axis=1), 0.0)
        return node, counts, log_z + batch.sum_per_sequence(unary[:, 0])

    def example_kernels(self, batch):
        n_words = self._layout(batch)[0]
        return CFGKernels(batch.offsets, n_words, self.grammar)

