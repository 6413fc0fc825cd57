"""Top-k decoding and sequence confidence of fitted chain and multiclass models.

A fitted model scores a labelling ``y`` of a sequence ``x`` by ``w . Psi(x, y)``; for a chain
(:class:`~sklstruct.ChainStructure`)

    sum_t W[y_t] . x_t + sum_t T[y_t, y_{t+1}] + b[y_0] + e[y_last]

and for :class:`~sklstruct.MultiClass` the class score ``W[y] . x`` (a chain of one token
without pairwise part). :func:`predict_topk` lists the ``k`` best labellings by k-best Viterbi;
:func:`sequence_confidence` gives the probability of the predicted labelling under the Gibbs
distribution ``p(y | x) ∝ exp(w . Psi(x, y))`` of the model's scores.

Both take a fitted estimator of sklstruct and the inputs of its ``predict``; grid (image)
models are not supported.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._inference import chain as chain_kernels
from .structures import ChainStructure, MultiClass

__all__ = ["predict_topk", "sequence_confidence"]


def _chain_potentials(estimator, X, lengths):
    """Validated input and the model's chain potentials on it.

    Returns ``(batch, form, unary, transition, start, end)``: a multiclass model gives a zero
    transition matrix and no start or end scores over sequences of one token.
    """
    check_is_fitted(estimator)
    structure = estimator.structure_
    if not isinstance(structure, (ChainStructure, MultiClass)):
        raise ValueError(
            f"top-k decoding and sequence confidence need a chain or multiclass model; this "
            f"model's structure is {type(structure).__name__}."
        )
    batch, _, form = estimator._validate_input(X, None, lengths, reset=False,
                                               allow_empty=True)
    if form == "images":
        raise ValueError(
            "top-k decoding and sequence confidence take sequences (a list of token matrices, "
            "or a flat matrix with lengths=), not images."
        )
    unary, pairwise = estimator._potentials(batch)
    if isinstance(structure, ChainStructure):
        transition, start, end = structure.pairwise_parameters(pairwise)
    else:
        if batch.n_tokens != batch.n_sequences:
            raise ValueError(
                "MultiClass needs exactly one sample per sequence; use ChainStructure for "
                "sequences."
            )
        n_states = unary.shape[1]
        transition, start, end = np.zeros((n_states, n_states)), None, None
    return batch, form, unary, transition, start, end


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


def predict_topk(estimator, X, k=5, lengths=None):
    """The ``k`` highest-scoring labellings of every sequence, with their scores.

    Labellings are ranked by decreasing model score ``w . Psi(x, y)``; labellings of equal
    score are ranked by their labels read from the last token back to the first, lower class
    index first. This is the tie rule of ``predict``, whose labelling is always the first.
    The ranking comes from a k-best Viterbi recursion in compiled code (exact, ties
    included); a multiclass model ranks the classes of each sample.

    Parameters
    ----------
    estimator : BaseStructuredClassifier
        A fitted sklstruct estimator with a chain (:class:`~sklstruct.ChainStructure`) or
        multiclass (:class:`~sklstruct.MultiClass`) structure.
    X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
        Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass).
        A sequence may be empty.
    k : int, default=5
        Number of labellings per sequence, at least 1. A sequence of length ``L`` has
        ``n_classes ** L`` labellings and gets ``k_i = min(k, n_classes ** L)`` of them.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths when ``X`` is flat.

    Returns
    -------
    labels : list of ndarray of shape (k_i, length_i), or ndarray of shape (n_samples, k_c)
        For sequences (list form, or flat with ``lengths``), one array per sequence whose row
        ``j`` is the labelling of rank ``j``, in the estimator's classes; an empty sequence
        has one labelling, the empty one (shape (1, 0)). For plain samples (multiclass form),
        the ``k_c = min(k, n_classes)`` best classes of each sample, best first.
    scores : list of ndarray of shape (k_i,), or ndarray of shape (n_samples, k_c)
        The model score of each labelling (0 for the empty labelling), non-increasing, in the
        layout of ``labels``.
    """
    k = chain_kernels._check_k(k)
    batch, form, unary, transition, start, end = _chain_potentials(estimator, X, lengths)
    classes = estimator.classes_
    n_states = unary.shape[1]
    longest = int(batch.lengths.max()) if batch.n_sequences else 0
    width = _n_labellings(n_states, longest, k)
    labels, scores, counts = chain_kernels.topk_viterbi(
        unary, batch.offsets, transition, start, end, k=width, n_jobs=estimator.n_jobs
    )
    if form == "multiclass":
        return classes[labels], scores
    # row j holds labelling j of every sequence; sequence i is a block of columns
    named = classes[np.maximum(np.ascontiguousarray(labels.T), 0)]
    offsets = batch.offsets.tolist()
    counts = counts.tolist()
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


def sequence_confidence(estimator, X, lengths=None):
    """Probability of the predicted labelling of every sequence under the model.

    ``exp(w . Psi(x, y_hat) / T - log Z_T(x))``, where ``y_hat`` is the labelling
    ``predict`` returns, ``T`` the estimator's ``temperature_`` (1 unless set by
    ``calibrate_temperature``) and ``Z_T(x) = sum_y exp(w . Psi(x, y) / T)`` (forward
    recursion; softmax for a multiclass model): the probability of ``y_hat`` under the Gibbs
    distribution ``p_T(y | x) ∝ exp(w . Psi(x, y) / T)`` whose marginals ``predict_proba``
    gives. The weights of a max-margin model are not fitted to
    make this distribution calibrated: use the value as a score for ranking or thresholding
    predictions, not as a probability of being right.

    Parameters
    ----------
    estimator : BaseStructuredClassifier
        A fitted sklstruct estimator with a chain (:class:`~sklstruct.ChainStructure`) or
        multiclass (:class:`~sklstruct.MultiClass`) structure.
    X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
        Sequences (list form), flat tokens with ``lengths``, or plain samples (multiclass).
        A sequence may be empty.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths when ``X`` is flat.

    Returns
    -------
    confidence : ndarray of shape (n_sequences,) or (n_samples,)
        Values in ``[0, 1]``; 1 for an empty sequence (its only labelling is the empty one).
    """
    batch, form, unary, transition, start, end = _chain_potentials(estimator, X, lengths)
    temperature = getattr(estimator, "temperature_", 1.0)
    if temperature != 1.0:  # the distribution predict_proba's marginals come from
        unary, transition = unary / temperature, transition / temperature
        start = None if start is None else start / temperature
        end = None if end is None else end / temperature
    output_lengths = np.diff(_output_offsets(batch))
    confidence = np.ones(output_lengths.shape[0])
    if batch.n_sequences:
        _, best = chain_kernels.viterbi(unary, batch.offsets, transition, start, end,
                                        n_jobs=estimator.n_jobs)
        log_z = chain_kernels.log_partition(unary, batch.offsets, transition, start, end,
                                            n_jobs=estimator.n_jobs)
        confidence[output_lengths > 0] = np.exp(np.minimum(best - log_z, 0.0))
    return confidence
