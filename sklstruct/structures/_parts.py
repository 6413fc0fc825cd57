"""Structures whose rows are the parts of an output: what dependency and constituency trees
share (see "Rows that are parts" on the page "Writing a structure").

An example of such a structure is a sentence of ``n`` words laid out as ``rows_of(n)`` rows,
one per candidate part (an arc ``h -> m``, a span ``[i, j)``), in an order the structure
documents. State 0 of a row is "not part of the output"; states ``>= 1`` are "part of it",
with a label when there are several. The learners see rows and states only; the structure's
oracles gather the per-row scores into the charts of its compiled algorithms and scatter the
best (or most violating) output back into row states, so that a labelling that is not an
output never comes out of them.
"""

import weakref

import numpy as np

from ._base import BaseStructure, check_rescale


class PartsStructure(BaseStructure):
    """Base of the structures over part rows (:class:`DependencyTree`,
    :class:`ConstituencyTree`).

    A subclass gives :meth:`rows_of`, the rows of a sentence of ``n`` words (an increasing
    function of ``n``), and the words ``_rows_text`` names in messages; it may give a
    per-batch chart layout (:meth:`_chart_layout`), which :meth:`_layout` keeps for the last
    batch. It gets :meth:`sentence_lengths` and, for a loss that decomposes over the rows,
    the margin-rescaled max-oracle as decoding on loss-shifted scores
    (:meth:`_shifted_loss_augmented_decode`).

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

    # "a sentence of n <unit> has <formula> <part> rows", in messages
    _rows_text = ("words", "n", "part")

    @staticmethod
    def rows_of(n_words):
        """Part rows of sentences of ``n_words`` words.

        Parameters
        ----------
        n_words : ndarray of int64

        Returns
        -------
        n_rows : ndarray of int64
        """
        raise NotImplementedError

    @classmethod
    def sentence_lengths(cls, batch):
        """Words per sentence, from the rows of each example (:meth:`rows_of` inverted).

        An example whose number of rows is no ``rows_of(n)`` raises ``ValueError``.

        Parameters
        ----------
        batch : SequenceBatch

        Returns
        -------
        n_words : ndarray of int64 of shape (n_sentences,)
        """
        rows = np.asarray(batch.lengths, dtype=np.int64)
        most = int(rows.max()) if rows.shape[0] else 0
        size = 2
        while cls.rows_of(np.array([size - 1], dtype=np.int64))[0] < most:
            size *= 2
        table = cls.rows_of(np.arange(size, dtype=np.int64))
        n_words = np.searchsorted(table, rows).astype(np.int64)
        bad = np.flatnonzero(table[np.minimum(n_words, size - 1)] != rows)
        if bad.shape[0]:
            i = int(bad[0])
            unit, formula, part = cls._rows_text
            raise ValueError(f"example {i} has {rows[i]} rows; a sentence of n {unit} has "
                             f"{formula} {part} rows.")
        return n_words

    def _chart_layout(self, n_words):
        """What the oracles of a batch of sentences of ``n_words`` words need beside the
        lengths (the chart position of every row); None by default."""
        return

    def _layout(self, batch):
        """``(n_words, _chart_layout(n_words))`` of a batch, kept for the last batch, since
        an oracle call and the statistics of its answer ask for the same one (with weak
        references to its arrays: a fitted model keeps no rows of its last prediction)."""
        cached = getattr(self, "_layout_cache", None)
        if cached is not None and cached[0]() is batch.X and cached[1]() is batch.offsets:
            return cached[2]
        n_words = self.sentence_lengths(batch)
        layout = (n_words, self._chart_layout(n_words))
        self._layout_cache = (weakref.ref(batch.X), weakref.ref(batch.offsets), layout)
        return layout

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_layout_cache", None)
        return state

    def _shifted_loss_augmented_decode(self, batch, unary, pairwise, Y, rescale, n_jobs,
                                       token_loss):
        """The margin-rescaled most violating outputs of a loss that decomposes over the
        rows: the best outputs under ``unary + token_loss`` (:meth:`decode`), their losses
        and their scores without the loss. Slack rescaling is refused: its most violating
        output does not decompose over the parts."""
        check_rescale(rescale)
        if rescale != "margin":
            raise ValueError(f"{type(self).__name__} supports margin rescaling only with a "
                             "loss over its rows (the slack-rescaled most violating output "
                             "does not decompose over the parts).")
        if token_loss is None:
            token_loss = self.token_loss(self.check_labels(batch, Y))
        labels = self.decode(batch, unary + token_loss, pairwise, n_jobs=n_jobs)
        losses = batch.sum_per_sequence(token_loss[np.arange(labels.shape[0]), labels])
        return labels, losses, self.score(batch, unary, pairwise, labels)
