"""Prediction: labels, scores, marginals, the k best labellings, confidences and accuracy.

:class:`PredictionMixin` holds every method a fitted estimator predicts with. Each reads one
fit (:meth:`~sklstruct.base.BaseStructuredClassifier._fitted_view`), validates the input
through :class:`~sklstruct._input.InputMixin` and asks the fitted structure for its oracles;
outputs follow the input's form.
"""

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import column_or_1d

from ._inference import chain as chain_kernels
from ._inference._validation import check_k
from ._input import check_indicator_matrix, check_token_weights
from .structures._base import BaseStructure, check_potential_range
from .utils._sequences import flatten_labels, image_rows, volume_rows
from .utils._warnings import warn_user


def _fitted_structure_has(method, why):
    """An ``available_if`` check: True unless the estimator is fitted with a structure that
    does not give ``method`` (leaves :class:`BaseStructure`'s), so that ``hasattr`` tells
    meta-estimators the truth; the ``AttributeError`` then gives the structure and ``why``."""
    def check(estimator):
        structure = estimator.__dict__.get("structure_")
        if structure is not None and \
                getattr(type(structure), method) is getattr(BaseStructure, method):
            raise AttributeError(f"{type(structure).__name__} {why}")
        return True
    return check


# the grids give no marginals (their exact marginals are intractable)
_has_marginal_oracle = _fitted_structure_has(
    "marginals", "has no marginal oracle, so the model has no probabilities; "
    "decision_function gives its per-node scores.")
# k-best decoding and sequence confidences run on a chain form (chains, multiclass)
_has_chain_form = _fitted_structure_has(
    "as_chain", "is not a chain: k-best decoding and sequence confidences are for chain and "
    "multiclass models.")


class PredictionMixin:
    """The prediction methods of the estimators."""

    def _potentials(self, batch):
        """``(unary, pairwise)`` potentials of the fitted model on ``batch``."""
        return self.structure_.potentials(batch, self.w_)

    def _decode(self, batch):
        """The model's labels of ``batch``: the structure decodes from the weights (a chain
        a chunk of sequences per thread)."""
        return self.structure_.decode_weights(batch, self.w_, n_jobs=self.n_jobs)

    def _predict_encoded(self, X, lengths, sequence_ids=None):
        batch, form = self._prediction_batch(X, lengths, sequence_ids)
        return batch, self._decode(batch), form

    def _prediction_batch(self, X, lengths, sequence_ids):
        batch, _, form = self._validate_input(X, None, lengths, reset=False, allow_empty=True,
                                              sequence_ids=sequence_ids)
        return batch, form

    def predict(self, X, lengths=None, sequence_ids=None):
        """Predicted labels, in the form of ``X``.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, plain samples (multiclass),
            a list of images (n_rows, n_cols, n_features) or a list of volumes (n_slices,
            n_rows, n_cols, n_features). A sequence may be empty (0 rows, or a length of
            0): its output is empty (the same holds for :meth:`decision_function` and
            :meth:`predict_marginals`); an image or a volume may not.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        y : list of ndarray, or ndarray of shape (n_tokens,)
            Labels in the form of ``X`` (a list of label arrays, a flat array, a list of 2-D
            masks for images or of 3-D masks for volumes; for multi-label input an
            indicator matrix, sparse when ``fit`` had a sparse ``y``).
        """
        model = self._fitted_view()
        batch, Y, form = model._predict_encoded(X, lengths, sequence_ids)
        labels = model._format_output(model._state_labels()[Y], batch, form)
        if form == "multilabel" and model.__dict__.get("_sparse_indicator_", False):
            return sp.csr_matrix(labels)  # (the form of a sparse y in fit)
        return labels

    def decision_function(self, X, lengths=None, sequence_ids=None):
        """Per-token class scores (the unary part of the model's score, ``X W^T``).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        scores : list of ndarray of shape (n_tokens, n_classes), or ndarray
            For the multiclass form, shape (n_samples, n_classes) (for two classes, the score
            difference of class 1 over class 0, shape (n_samples,), as ``LinearSVC``); for
            sequences, in the form of ``X``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        scores, _ = model._potentials(batch)
        if form == "multiclass" and scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        if form == "multilabel":  # per label, the score of 1 over 0
            return (scores[:, 1] - scores[:, 0]).reshape(batch.n_sequences, -1)
        return model._format_output(scores, batch, form)

    @available_if(_has_marginal_oracle)
    def predict_marginals(self, X, lengths=None, sequence_ids=None):
        """Per-token class probabilities under ``p(y|x) ∝ exp(w . Psi(x, y))``.

        Computed by forward-backward on the model's scores (softmax for multiclass).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        marginals : list of ndarray of shape (n_tokens, n_classes), or ndarray
            In the form of ``X``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        return model._format_output(model._marginals(batch, 1.0), batch, form)

    def _marginals(self, batch, temperature, potentials=None):
        """Node marginals of ``batch`` under the model's scores divided by ``temperature``."""
        if batch.n_tokens == 0:  # only empty sequences
            return np.zeros((0, self._state_labels().shape[0]))
        unary, pairwise = self._potentials(batch) if potentials is None else potentials
        check_potential_range(batch, unary, pairwise)
        if temperature != 1.0:
            unary, pairwise = unary / temperature, pairwise / temperature
            try:
                check_potential_range(batch, unary, pairwise)
            except ValueError as error:
                raise ValueError(f"The model's scores on X divided by temperature_="
                                 f"{temperature:.3g} overflow double precision; a larger "
                                 "temperature_ (or scaled features) keeps them finite.") \
                    from error
        return self.structure_.node_marginals(batch, unary, pairwise, n_jobs=self.n_jobs)

    @available_if(_has_marginal_oracle)
    def predict_proba(self, X, lengths=None, sequence_ids=None):
        """Per-token class probabilities: the marginals at the calibrated temperature.

        ``p_T(y|x) ∝ exp(w . Psi(x, y) / T)`` with ``T = temperature_`` (1 after ``fit``; set it
        on held-out data with :meth:`calibrate_temperature`, since max-margin scores are not
        log-probabilities). The argmax of a token's probabilities is its most probable label,
        which may differ from the jointly decoded :meth:`predict` for sequences.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        proba : list of ndarray of shape (n_tokens, n_classes), or ndarray
            In the form of ``X``; columns follow ``classes_``.
        """
        model = self._fitted_view()
        batch, form = model._prediction_batch(X, lengths, sequence_ids)
        return model._format_output(model._marginals(batch, model.temperature_), batch, form)

    @available_if(_has_chain_form)
    def predict_topk(self, X, k=5, lengths=None, sequence_ids=None):
        """The ``k`` highest-scoring labellings of each sequence, with their scores.

        Exact k-best Viterbi in compiled code (Huang and Chiang 2005, algorithm 3) for chain
        models; the ``k`` best classes of each sample for the multiclass form. Labellings of
        equal score are ranked as :meth:`predict` breaks ties, so the first labelling is always
        the one :meth:`predict` returns.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass);
            a sequence may be empty.
        k : int, default=5
            Labellings per sequence; a sequence of length ``L`` gets
            ``min(k, n_classes ** L)``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        labels : list of ndarray of shape (k_i, length_i), or ndarray of shape (n_samples, k_c)
            Per sequence, row ``j`` is the labelling of rank ``j`` (an empty sequence has one,
            empty, labelling); for plain samples, the ``k_c = min(k, n_classes)`` best classes
            of each, best first.
        scores : list of ndarray of shape (k_i,), or ndarray of shape (n_samples, k_c)
            The model score ``w . Psi(x, y)`` of each labelling, non-increasing.
        """
        k = check_k(k)
        model = self._fitted_view()
        batch, form, unary, transition, start, end = model._chain_potentials(
            X, model._lengths_of(X, lengths, sequence_ids))
        classes = model.classes_
        longest = int(batch.lengths.max()) if batch.n_sequences else 0
        width = _n_labellings(unary.shape[1], longest, k)
        labels, scores, counts = chain_kernels.topk_viterbi(
            unary, batch.offsets, transition, start, end, k=width, n_jobs=model.n_jobs)
        if form == "multiclass":
            return classes[labels], scores
        # row j holds labelling j of every sequence; sequence i is a block of columns
        named = classes[np.maximum(np.ascontiguousarray(labels.T), 0)]
        offsets, counts = batch.offsets.tolist(), counts.tolist()
        label_list, score_list = [], []
        i = 0
        for length in np.diff(_output_offsets(batch)).tolist():
            if length == 0:
                label_list.append(np.empty((1, 0), dtype=classes.dtype))
                score_list.append(np.zeros(1))
                continue
            label_list.append(named[:counts[i], offsets[i]:offsets[i + 1]])
            score_list.append(scores[i, :counts[i]])
            i += 1
        return label_list, score_list

    @available_if(_has_chain_form)
    def sequence_confidence(self, X, lengths=None, sequence_ids=None):
        """Probability of each predicted labelling under the model's Gibbs distribution.

        ``exp(w . Psi(x, y_hat) / T - log Z_T(x))`` with ``y_hat`` the labelling
        :meth:`predict` returns, ``T = temperature_`` (see :meth:`calibrate_temperature`) and
        ``Z_T(x)`` the sum over all labellings (forward recursion): the distribution whose
        marginals :meth:`predict_proba` gives. Max-margin weights are not fitted to calibrate
        it (and one temperature fitted on token marginals need not calibrate whole
        sequences): it is a score for ranking or thresholding predictions, not the
        probability that they are right.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict_topk`.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        confidence : ndarray of shape (n_sequences,) or (n_samples,)
            In ``[0, 1]``; 1 for an empty sequence.
        """
        model = self._fitted_view()
        batch, form, unary, transition, start, end = model._chain_potentials(
            X, model._lengths_of(X, lengths, sequence_ids))
        temperature = model.temperature_
        if temperature != 1.0:  # the distribution predict_proba's marginals come from
            unary, transition = unary / temperature, transition / temperature
            start = None if start is None else start / temperature
            end = None if end is None else end / temperature
        output_lengths = np.diff(_output_offsets(batch))
        confidence = np.ones(output_lengths.shape[0])
        if batch.n_sequences:
            _, best = chain_kernels.viterbi(unary, batch.offsets, transition, start, end,
                                            n_jobs=model.n_jobs)
            log_z = chain_kernels.log_partition(unary, batch.offsets, transition, start, end,
                                                n_jobs=model.n_jobs)
            confidence[output_lengths > 0] = np.exp(np.minimum(best - log_z, 0.0))
        return confidence

    def _chain_potentials(self, X, lengths):
        """Validated input and the model's potentials on it in chain form (the structure's
        ``as_chain``): ``(batch, form, unary, transition, start, end)``."""
        batch, form = self._prediction_batch(X, lengths, None)
        if form in ("images", "volumes"):
            raise ValueError(
                "top-k decoding and sequence confidence take sequences (a list of token "
                f"matrices, or a flat matrix with lengths=), not {form}.")
        unary, pairwise = self._potentials(batch)
        transition, start, end = self.structure_.as_chain(batch, pairwise)
        return batch, form, unary, transition, start, end

    @available_if(_has_marginal_oracle)
    def calibrate_temperature(self, X, y, lengths=None, sequence_ids=None):
        """Set ``temperature_`` to minimise the per-token log loss of :meth:`predict_proba`
        on held-out data (temperature scaling; predictions do not change).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Held-out input, in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            Its true labels; every label must have been seen in fit.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers instead of ``lengths``.

        Returns
        -------
        self : object
            The estimator, with ``temperature_`` set.
        """
        model = self._fitted_view()
        if y is None:
            raise ValueError("calibrate_temperature requires y, the true labels of X.")
        batch, y_flat, _ = model._validate_input(X, y, lengths, reset=False, allow_empty=True,
                                                 sequence_ids=sequence_ids)
        Y = model._encode_known(np.asarray(y_flat))
        if Y.shape[0] == 0:
            raise ValueError("calibrate_temperature needs at least one labelled token; X "
                             "holds empty sequences only.")
        potentials = model._potentials(batch)
        rows = np.arange(Y.shape[0])

        def log_loss(log_temperature):
            node = model._marginals(batch, float(np.exp(log_temperature)), potentials)
            return -float(np.mean(np.log(np.maximum(node[rows, Y], 1e-300))))

        best = minimize_scalar(log_loss, bounds=(np.log(1e-4), np.log(1e4)), method="bounded",
                               options={"xatol": 1e-4})
        model.temperature_ = float(np.exp(best.x))
        return self

    def score(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """Token accuracy (plain accuracy for the multiclass form, subset accuracy for
        multi-label input as scikit-learn's classifiers score it).

        Labels in ``y`` that were never seen in training count as errors; for the multiclass
        form of ``structure="auto"`` a ``UserWarning`` then says how to get stratified folds
        (an integer ``cv`` gives this estimator plain folds: see the class docstring).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels, in the form of ``X``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_tokens,) or (n_sequences,), default=None
            Per-token weights of the accuracy, or per-sequence weights (as ``fit`` takes
            them) given to every token of their sequence; per sample for the multiclass
            and multi-label forms. When there are as many sequences as tokens (empty
            sequences beside longer ones), the weights are read per sequence.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        score : float
        """
        model = self._fitted_view()
        batch, Y, form = model._predict_encoded(X, lengths, sequence_ids)
        if form == "multilabel":  # scikit-learn's multi-label score: subset accuracy
            y_true = check_indicator_matrix(y, batch.n_sequences, batch.lengths[0])
            exact = np.all(Y.reshape(y_true.shape) == y_true, axis=1).astype(np.float64)
            if sample_weight is None:
                return float(exact.mean())
            return float(np.average(exact, weights=check_token_weights(
                sample_weight, np.ones(exact.shape[0], dtype=np.intp))))
        if form == "images":
            y_flat = flatten_labels(image_rows(X, y)[2], batch.lengths)
        elif form == "volumes":
            y_flat = flatten_labels(volume_rows(X, y)[2], batch.lengths)
        elif form in ("list", "graphs"):
            y_flat = flatten_labels(y, np.diff(_output_offsets(batch)))
        else:
            y_flat = column_or_1d(y)
            if y_flat.shape[0] != batch.n_tokens:
                raise ValueError(f"y has {y_flat.shape[0]} labels for {batch.n_tokens} tokens.")
        model._check_label_kinds_match(y_flat)
        if form == "multiclass" and model.structure == "auto":
            _warn_unseen_classes(y_flat, model.classes_)
        correct = (model.classes_[Y] == y_flat).astype(np.float64)
        if sample_weight is not None:
            return float(np.average(correct, weights=check_token_weights(
                sample_weight, np.diff(_output_offsets(batch)))))
        return float(correct.mean())


def _output_offsets(batch):
    """Offsets of every input sequence, the empty ones included."""
    return batch.offsets if batch.output_offsets is None else batch.output_offsets


def _n_labellings(n_states, length, k):
    """``min(k, n_states ** length)`` without forming large powers."""
    if n_states == 1:
        return 1
    count = 1
    for _ in range(length):
        if count >= k:
            break
        count *= n_states
    return min(count, k)


def _warn_unseen_classes(y, classes):
    """Warn when multiclass labels hold classes the model never saw: the sign of unstratified
    folds of class-sorted data, which an integer ``cv`` gives ``structure="auto"``."""
    try:
        unseen = np.setdiff1d(np.unique(y), classes).tolist()
    except TypeError:  # labels of mixed types: the accuracy alone tells
        return
    if unseen:
        warn_user(
            f"y holds {len(unseen)} class(es) not seen in fit (e.g. {unseen[0]!r}), scored as "
            "errors. An integer cv gives structure='auto' plain, unstratified folds (sequence "
            "labels cannot be stratified), so data sorted by class leaves classes out of the "
            "training folds: pass structure=MultiClass() or cv=StratifiedKFold(...).",
            UserWarning)
