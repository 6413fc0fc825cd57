"""Metrics for sequence labelling: token and sequence accuracy, chunk F1, reports.

Labels are given either as a list of sequences (one 1-D array or list per
sequence, as returned by the estimators' ``predict`` on a list input; a 2-D
array holds one sequence per row) or as flat 1-D arrays holding every token.
"""

import inspect
import numbers
from collections import Counter

import numpy as np
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import classification_report
from sklearn.utils.metadata_routing import UNUSED

from .utils._sklearn_compat import _MetadataRequester, _num_samples
from .utils._warnings import warn_user

__all__ = [
    "SequenceScorer",
    "chunk_f1_scorer",
    "chunk_f1_score",
    "chunk_precision_recall_fscore",
    "sequence_accuracy",
    "sequence_classification_report",
    "token_accuracy",
    "token_accuracy_scorer",
]


def _is_sequence(obj):
    return isinstance(obj, (list, tuple, np.ndarray))


def _as_flat(y, name):
    """Return ``y`` as a flat 1-D array, or None if ``y`` is a list of sequences."""
    if isinstance(y, np.ndarray) and y.dtype != object:
        if y.ndim == 2 and y.shape[0] > 0 and y.shape[1] > 1:  # a row per sequence
            return None
        if y.ndim == 2 and y.shape[1] == 1:
            raise ValueError(
                f"{name} is a column of shape {y.shape}: give flat labels as a 1-D array "
                "(y.ravel()), or one-token sequences as a list of them.")
        if y.ndim != 1:
            raise ValueError(
                f"{name} must be a list of 1-D sequences or a flat 1-D array; "
                f"got an array of shape {y.shape}."
            )
        return y
    if not _is_sequence(y) and not hasattr(y, "__array__"):
        raise TypeError(
            f"{name} must be a list of 1-D sequences or a flat 1-D array; "
            f"got {type(y).__name__}."
        )
    if not _is_sequence(y):
        return _as_flat(np.asarray(y), name)
    nested = [_is_sequence(item) for item in y]
    if all(nested) and len(y) > 0:
        return None
    if any(nested):
        raise TypeError(
            f"{name} mixes sequences and single labels; pass either a list of "
            "sequences or a flat 1-D array of labels."
        )
    return np.asarray(y, dtype=object)


def _as_sequences(y, name):
    sequences = []
    for i, seq in enumerate(y):
        try:
            seq = np.asarray(seq)
        except ValueError as exc:  # (numpy: "inhomogeneous shape")
            raise ValueError(f"{name}[{i}] must be a 1-D sequence of labels; it nests "
                             "sequences of labels.") from exc
        if seq.ndim != 1:
            raise ValueError(
                f"{name}[{i}] must be 1-D; got an array of shape {seq.shape}."
            )
        sequences.append(seq)
    return sequences


def _split_lengths(y, lengths, name):
    """Split a flat label array into sequences of the given lengths."""
    lengths = np.asarray(lengths)
    integral = (
        lengths.size == 0
        or lengths.dtype.kind in "iu"
        or (
            lengths.dtype == object
            and all(isinstance(n, numbers.Integral) for n in lengths)
        )
    )
    if lengths.ndim != 1 or not integral:
        raise ValueError("lengths must be a 1-D array of non-negative integers.")
    lengths = lengths.astype(np.int64)
    if np.any(lengths < 0):
        raise ValueError("lengths must be a 1-D array of non-negative integers.")
    if lengths.sum() != len(y):
        raise ValueError(
            f"lengths sum to {lengths.sum()} but {name} has {len(y)} labels."
        )
    if lengths.size == 0:
        return []
    return np.split(y, np.cumsum(lengths)[:-1])


def _check_targets(y_true, y_pred, lengths=None, *, need_sequences=False):
    """Validate a pair of label collections and bring them to one form.

    Returns
    -------
    y_true, y_pred : list of ndarray or ndarray
        Lists of 1-D arrays (one per sequence) when the input is in list form
        or ``lengths`` is given, flat 1-D arrays otherwise (or a one-element
        list holding them when ``need_sequences`` is True).
    """
    flat_true = _as_flat(y_true, "y_true")
    flat_pred = _as_flat(y_pred, "y_pred")
    if (flat_true is None) != (flat_pred is None):
        raise ValueError(
            "y_true and y_pred must both be lists of sequences or both be flat "
            "1-D arrays."
        )
    if flat_true is None:
        if lengths is not None:
            raise ValueError("lengths can only be given with flat 1-D label arrays.")
        y_true = _as_sequences(y_true, "y_true")
        y_pred = _as_sequences(y_pred, "y_pred")
        if len(y_true) != len(y_pred):
            raise ValueError(
                f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}."
            )
        for i, (true, pred) in enumerate(zip(y_true, y_pred)):
            if true.shape[0] != pred.shape[0]:
                raise ValueError(
                    f"Sequence {i} has {true.shape[0]} labels in y_true but "
                    f"{pred.shape[0]} in y_pred."
                )
        return y_true, y_pred
    if flat_true.shape[0] != flat_pred.shape[0]:
        raise ValueError(
            f"y_true has {flat_true.shape[0]} labels but y_pred has "
            f"{flat_pred.shape[0]}."
        )
    if lengths is not None:
        return (
            _split_lengths(flat_true, lengths, "y_true"),
            _split_lengths(flat_pred, lengths, "y_pred"),
        )
    if need_sequences:
        return [flat_true], [flat_pred]
    return flat_true, flat_pred


def token_accuracy(y_true, y_pred, *, sample_weight=None):
    """Fraction of tokens whose predicted label is correct.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True labels, per sequence or flat.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted labels, in the same form as ``y_true``.
    sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
        Weights of the sequences (each given to its tokens; read this way when there are as
        many sequences as tokens) or of the tokens.

    Returns
    -------
    accuracy : float
        Number of correct tokens divided by the number of tokens (weighted: the weight of
        the correct tokens over the weight of all tokens).

    Examples
    --------
    >>> from sklstruct.metrics import token_accuracy
    >>> token_accuracy([["a", "b"], ["c"]], [["a", "a"], ["c"]])
    0.666...
    """
    y_true, y_pred = _check_targets(y_true, y_pred)
    if sample_weight is not None:
        from ._input import check_token_weights

        sequences_true = y_true if isinstance(y_true, list) else [y_true]
        sequences_pred = y_pred if isinstance(y_pred, list) else [y_pred]
        weights = check_token_weights(sample_weight, [t.shape[0] for t in sequences_true])
        correct = np.concatenate([t == p for t, p in zip(sequences_true, sequences_pred)]
                                 or [np.zeros(0, dtype=bool)])
        return float(weights @ correct) / float(weights.sum())
    if isinstance(y_true, list):
        n_correct = sum(int(np.sum(t == p)) for t, p in zip(y_true, y_pred))
        n_tokens = sum(t.shape[0] for t in y_true)
    else:
        n_correct = int(np.sum(y_true == y_pred))
        n_tokens = y_true.shape[0]
    if n_tokens == 0:
        raise ValueError("token_accuracy needs at least one token.")
    return n_correct / n_tokens


def sequence_accuracy(y_true, y_pred, *, lengths=None):
    """Fraction of sequences whose labels are all predicted correctly.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True labels, one sequence per element; flat labels need ``lengths``.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted labels, in the same form as ``y_true``.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths, required when the labels are flat arrays.

    Returns
    -------
    accuracy : float
        Number of entirely correct sequences divided by the number of
        sequences.

    Examples
    --------
    >>> from sklstruct.metrics import sequence_accuracy
    >>> sequence_accuracy([["a", "b"], ["c"]], [["a", "a"], ["c"]])
    0.5
    """
    y_true, y_pred = _check_targets(y_true, y_pred, lengths)
    if not isinstance(y_true, list):
        raise ValueError(
            "sequence_accuracy needs labels as a list of sequences, or flat "
            "labels with lengths."
        )
    if not y_true:
        raise ValueError("sequence_accuracy needs at least one sequence.")
    n_correct = sum(bool(np.all(t == p)) for t, p in zip(y_true, y_pred))
    return n_correct / len(y_true)


def _text(label):
    """A label as text: bytes (dtype "S" arrays, e.g. read from HDF5) read as UTF-8, other
    values through ``str``."""
    if isinstance(label, (bytes, np.bytes_)):
        try:
            return label.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the label {label!r} is bytes that are not UTF-8 text; decode "
                             "the labels to str.") from exc
    return str(label)


def _split_tag(tag):
    """Split a chunk tag into prefix and type as conlleval does.

    The prefix is the text before the first hyphen and the type the rest
    (types may contain hyphens); a tag without a hyphen has type "". Like
    Perl's truth test in conlleval, a type of "0" counts as no type.
    """
    prefix, hyphen, chunk_type = _text(tag).partition("-")
    if not hyphen or chunk_type == "0":
        return prefix, ""
    return prefix, chunk_type


def _end_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's ``endOfChunk``: did a chunk end before the current word?"""
    if prev_tag in ("B", "I") and tag in ("B", "O"):
        return True
    if prev_tag == "E" and tag in ("E", "I", "O"):
        return True
    if prev_tag not in ("O", ".") and prev_type != chunk_type:
        return True
    return prev_tag in ("[", "]")


def _start_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's ``startOfChunk``: does a chunk start at the current word?"""
    if prev_tag in ("B", "I", "O") and tag == "B":
        return True
    if prev_tag == "O" and tag in ("I", "E"):
        return True
    if prev_tag == "E" and tag in ("E", "I"):
        return True
    if tag not in ("O", ".") and prev_type != chunk_type:
        return True
    return tag in ("[", "]")


def _chunk_counts(y_true, y_pred, weights=None):
    """Count chunks per chunk type with conlleval's algorithm (each weighted by the weight of
    its sequence in ``weights``, when given).

    Every sequence is followed by a sentence break, which conlleval reads as
    the tag "O" in both columns and which ends every chunk of the IOB and IOE
    schemes. A chunk that a break does not end (tags whose prefix conlleval
    does not know, such as BILOU's ``L`` or a bare ``B`` followed by ``.``)
    runs on, as in conlleval, and a chunk still open at the end of the input
    is closed there, as conlleval closes it at the end of its input.

    Returns
    -------
    n_correct, n_true, n_pred : collections.Counter
        Per chunk type: correctly found chunks, chunks in ``y_true`` and
        chunks in ``y_pred``.
    """
    split_cache = {}
    transition_cache = {}

    def transition(prev, cur):
        key = (prev, cur)
        if key not in transition_cache:
            prev_tag, prev_type = prev
            tag, chunk_type = cur
            transition_cache[key] = (
                _end_of_chunk(prev_tag, tag, prev_type, chunk_type),
                _start_of_chunk(prev_tag, tag, prev_type, chunk_type),
            )
        return transition_cache[key]

    def split(label):
        if label not in split_cache:
            split_cache[label] = _split_tag(label)
        return split_cache[label]

    boundary = ("O", "")
    n_correct, n_true, n_pred = Counter(), Counter(), Counter()
    in_correct = False
    open_type = None  # the type of the chunk counted as correct if in_correct holds
    last_true = last_pred = boundary
    weight = 1
    for i, (seq_true, seq_pred) in enumerate(zip(y_true, y_pred)):
        if weights is not None:
            weight = float(weights[i])
        tokens_true = [split(label) for label in seq_true.tolist()]
        tokens_pred = [split(label) for label in seq_pred.tolist()]
        tokens_true.append(boundary)
        tokens_pred.append(boundary)
        for cur_true, cur_pred in zip(tokens_true, tokens_pred):
            end_true, start_true = transition(last_true, cur_true)
            end_pred, start_pred = transition(last_pred, cur_pred)
            if in_correct:
                if end_true and end_pred and last_true[1] == last_pred[1]:
                    in_correct = False
                    n_correct[last_true[1]] += weight
                elif end_true != end_pred or cur_true[1] != cur_pred[1]:
                    in_correct = False
            if start_true and start_pred and cur_true[1] == cur_pred[1]:
                in_correct = True
                open_type = cur_true[1]
            if start_true:
                n_true[cur_true[1]] += weight
            if start_pred:
                n_pred[cur_pred[1]] += weight
            last_true, last_pred = cur_true, cur_pred
    if in_correct:  # a chunk open in both at the end of the input ends there
        n_correct[open_type] += weight
    return n_correct, n_true, n_pred


def _precision_recall_fscore(n_correct, n_true, n_pred):
    """Precision, recall and F1 from chunk counts, 0.0 where undefined."""
    precision = n_correct / n_pred if n_pred > 0 else 0.0
    recall = n_correct / n_true if n_true > 0 else 0.0
    if precision + recall > 0:
        f1 = 2 * precision * recall / (precision + recall)
    else:
        f1 = 0.0
    return precision, recall, f1


def chunk_precision_recall_fscore(y_true, y_pred, *, lengths=None, sample_weight=None):
    """Chunk (phrase) precision, recall and F1 with conlleval semantics.

    Tags are strings such as ``"B-NP"``, ``"I-NP"`` and ``"O"``: a prefix,
    a hyphen and a chunk type. Chunk starts and ends are found with the rules
    of the CoNLL shared-task script ``conlleval`` (its ``startOfChunk`` and
    ``endOfChunk``), so IOB1 (a chunk may start with ``I-``), IOB2 and IOE
    tags are handled as that script handles them: a sequence boundary ends
    their chunks, and a chunk still open at the end of the input (which
    happens for prefixes conlleval does not know) is closed there, as
    conlleval closes it at the end of its input. IOBES/BILOU tags
    are read with conlleval's semantics, which knows ``B``, ``I``, ``E`` and
    ``O`` only: ``S-PER S-PER`` is one chunk (the second ``S`` neither ends
    nor starts one), ``B-PER E-PER S-PER`` is one chunk; convert such tags to
    IOB2 first to score single-token chunks apart. A predicted chunk is
    correct only if its type, first token and last token all match a true
    chunk. Labels that are bytes are read as UTF-8 text, and other labels that are not
    strings are converted with ``str``.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True tags, per sequence or flat.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted tags, in the same form as ``y_true``.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths for flat tag arrays. Flat arrays without ``lengths``
        are read as a single sequence.
    sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
        Weights of the sequences (or the same weight for the tokens of each):
        every chunk counts with its sequence's weight.

    Returns
    -------
    precision : float
        Correct chunks divided by predicted chunks (0.0 without predicted
        chunks).
    recall : float
        Correct chunks divided by true chunks (0.0 without true chunks).
    f1 : float
        Harmonic mean of precision and recall (0.0 when both are 0).

    See Also
    --------
    sequence_classification_report : The same figures per chunk type; its
        "micro avg" row equals this function's result.

    Examples
    --------
    >>> from sklstruct.metrics import chunk_precision_recall_fscore
    >>> y_true = [["B-NP", "I-NP", "B-VP", "O"]]
    >>> y_pred = [["B-NP", "I-NP", "B-NP", "O"]]
    >>> chunk_precision_recall_fscore(y_true, y_pred)
    (0.5, 0.5, 0.5)
    """
    y_true, y_pred = _check_targets(y_true, y_pred, lengths, need_sequences=True)
    weights = None
    if sample_weight is not None:
        from ._input import check_sequence_weights

        weights = check_sequence_weights(sample_weight, len(y_true),
                                         lengths=[t.shape[0] for t in y_true])
    n_correct, n_true, n_pred = _chunk_counts(y_true, y_pred, weights)
    if not n_true and not n_pred:
        warn_user("Neither y_true nor y_pred holds a chunk: chunk scores read IOB tags "
                  "(B-X, I-X, O, ...); for other labels use token_accuracy.",
                  UndefinedMetricWarning)
    elif not any(n_true.values()) and not any(n_pred.values()):
        warn_user("Every chunk of y_true and y_pred is in a sequence of weight 0: "
                  "precision, recall and F1 are undefined (0.0 returned).",
                  UndefinedMetricWarning)
    return _precision_recall_fscore(
        sum(n_correct.values()), sum(n_true.values()), sum(n_pred.values())
    )


def chunk_f1_score(y_true, y_pred, *, lengths=None, sample_weight=None):
    """Chunk (phrase) F1 score with conlleval semantics.

    See :func:`chunk_precision_recall_fscore` for how chunks are found.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True tags, per sequence or flat.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted tags, in the same form as ``y_true``.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths for flat tag arrays. Flat arrays without ``lengths``
        are read as a single sequence.
    sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
        Weights of the sequences (or the same weight for the tokens of each):
        every chunk counts with its sequence's weight.

    Returns
    -------
    f1 : float
        Harmonic mean of chunk precision and recall, between 0 and 1.

    Examples
    --------
    >>> from sklstruct.metrics import chunk_f1_score
    >>> chunk_f1_score([["B-NP", "I-NP", "O"]], [["B-NP", "B-NP", "O"]])
    0.0
    """
    return chunk_precision_recall_fscore(y_true, y_pred, lengths=lengths,
                                         sample_weight=sample_weight)[2]


def _format_report(rows, averages, digits):
    """Text table of ``(name, precision, recall, f1, support)`` rows."""
    headers = ("precision", "recall", "f1-score", "support")
    name_width = max(len(str(row[0])) for row in rows + averages)
    column_width = max([len(header) for header in headers] + [digits + 2])

    def line(name, precision, recall, f1, support):
        figures = "".join(
            f" {value:>{column_width}.{digits}f}" for value in (precision, recall, f1)
        )
        return f"{name:>{name_width}} {figures} {support:>{column_width}}"

    header = " " * (name_width + 1) + "".join(
        f" {title:>{column_width}}" for title in headers
    )
    lines = [header, ""]
    if rows:
        lines += [line(str(row[0]), *row[1:]) for row in rows] + [""]
    lines += [line(*row) for row in averages]
    return "\n".join(lines) + "\n"


def sequence_classification_report(
    y_true, y_pred, *, lengths=None, scheme="chunk", labels=None, digits=2,
    output_dict=False
):
    """Precision, recall, F1 and support per chunk type or per label.

    With ``scheme="chunk"`` the rows are chunk types (``"NP"``, ``"VP"``...),
    scored with the chunk rules of the CoNLL script ``conlleval`` (see
    :func:`chunk_precision_recall_fscore`): the precision, recall and F1 of
    a type are conlleval's per-type figures, as fractions between 0 and 1
    where conlleval prints percentages, and the support is the number of
    true chunks of the type. The rows are followed by three averages:

    - ``"micro avg"``: figures over the chunks of all listed types; with
      ``labels=None`` these are conlleval's overall figures and equal
      :func:`chunk_precision_recall_fscore`;
    - ``"macro avg"``: the unweighted mean of the per-type figures;
    - ``"weighted avg"``: the mean of the per-type figures weighted by
      their support (0.0 when no type has a true chunk).

    Figures without a denominator (a type never predicted, or never true)
    are 0.0, as in conlleval. Chunks of tags without a type (such as a bare
    ``"B"``) are reported under the type ``""``.

    With ``scheme="token"`` the rows are the labels themselves, scored token
    by token: the result is that of
    :func:`sklearn.metrics.classification_report` on the flattened labels
    (with ``zero_division=0``), including its ``"accuracy"`` row.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True tags, per sequence or flat.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted tags, in the same form as ``y_true``.
    lengths : array-like of shape (n_sequences,), default=None
        Sequence lengths for flat tag arrays. Flat arrays without ``lengths``
        are read as a single sequence.
    scheme : {"chunk", "token"}, default="chunk"
        Score chunks per chunk type, or tokens per label.
    labels : array-like, default=None
        The rows of the report, in this order: chunk types (such as
        ``"NP"``) for ``scheme="chunk"``, labels for ``scheme="token"``.
        By default, every chunk type or label found in ``y_true`` or
        ``y_pred``, sorted. The averages are taken over these rows only.
    digits : int, default=2
        Number of digits of the figures in the text report.
    output_dict : bool, default=False
        Return a dict instead of a text table.

    Returns
    -------
    report : str or dict
        Text table, or with ``output_dict=True`` a dict mapping each row name
        to a dict with keys ``"precision"``, ``"recall"``, ``"f1-score"``
        and ``"support"`` (unrounded), for example::

            {"NP": {"precision": 0.5, "recall": 1.0, "f1-score": 0.67,
                    "support": 1},
             ...
             "micro avg": {...}, "macro avg": {...}, "weighted avg": {...}}

    See Also
    --------
    chunk_precision_recall_fscore : The overall chunk figures alone.
    sklearn.metrics.classification_report : The report on flat labels.

    Examples
    --------
    >>> from sklstruct.metrics import sequence_classification_report
    >>> y_true = [["B-NP", "I-NP", "B-VP", "B-NP"], ["B-PP", "B-NP", "O"]]
    >>> y_pred = [["B-NP", "I-NP", "B-VP", "I-VP"], ["B-PP", "B-NP", "O"]]
    >>> print(sequence_classification_report(y_true, y_pred))
                  precision    recall  f1-score   support
    <BLANKLINE>
              NP       1.00      0.67      0.80         3
              PP       1.00      1.00      1.00         1
              VP       0.00      0.00      0.00         1
    <BLANKLINE>
       micro avg       0.75      0.60      0.67         5
       macro avg       0.67      0.56      0.60         5
    weighted avg       0.80      0.60      0.68         5
    <BLANKLINE>
    >>> report = sequence_classification_report(y_true, y_pred, output_dict=True)
    >>> report["NP"]["recall"], report["NP"]["support"]
    (0.666..., 3)
    """
    if scheme not in ("chunk", "token"):
        raise ValueError(f'scheme must be "chunk" or "token"; got {scheme!r}.')
    if scheme == "token":
        y_true, y_pred = _check_targets(y_true, y_pred, lengths)
        if isinstance(y_true, list):
            y_true = np.concatenate(y_true) if y_true else np.zeros(0)
            y_pred = np.concatenate(y_pred) if y_pred else np.zeros(0)
        if y_true.shape[0] == 0:
            raise ValueError("sequence_classification_report needs at least one token.")
        return classification_report(
            y_true, y_pred, labels=labels, digits=digits, output_dict=output_dict,
            zero_division=0,
        )

    y_true, y_pred = _check_targets(y_true, y_pred, lengths, need_sequences=True)
    n_correct, n_true, n_pred = _chunk_counts(y_true, y_pred)
    if labels is None:
        types = sorted(set(n_true) | set(n_pred))
    else:
        types = [_text(label) for label in labels]
        if len(types) == 0:
            raise ValueError("labels must name at least one chunk type.")
    rows = [
        (t, *_precision_recall_fscore(n_correct[t], n_true[t], n_pred[t]), n_true[t])
        for t in types
    ]
    support = sum(n_true[t] for t in types)
    micro = _precision_recall_fscore(
        sum(n_correct[t] for t in types), support, sum(n_pred[t] for t in types)
    )
    figures = np.array([row[1:4] for row in rows]).reshape(-1, 3)
    weights = np.array([row[4] for row in rows], dtype=np.float64)
    macro = figures.mean(axis=0) if rows else np.zeros(3)
    weighted = figures.T @ weights / support if support > 0 else np.zeros(3)
    averages = [
        ("micro avg", *micro, support),
        ("macro avg", *macro.tolist(), support),
        ("weighted avg", *weighted.tolist(), support),
    ]
    if output_dict:
        keys = ("precision", "recall", "f1-score", "support")
        return {row[0]: dict(zip(keys, row[1:])) for row in rows + averages}
    return _format_report(rows, averages, digits)


class SequenceScorer(_MetadataRequester):
    """A scorer for sequence labels: ``scorer(estimator, X, y)`` as scikit-learn calls it.

    It predicts with the estimator and applies ``metric(y_true, y_pred)``. For the flat form
    it takes ``sequence_ids`` (one id per token, see
    :func:`sklstruct.utils.lengths_to_groups`) or ``lengths`` and hands them to ``predict``
    and to the metric; under scikit-learn's metadata routing ``sequence_ids`` is requested by
    default, so ``cross_validate(..., params={"sequence_ids": ids})`` reaches the scorer of
    every fold with the fold's ids (the estimator itself needs
    ``set_fit_request(sequence_ids=True)``, and a Pipeline's last step
    ``set_predict_request(lengths=True)``). Without metadata routing a flat ``X`` reaches the
    scorer without its ids, and a chain model refuses it. A search fitted with
    ``sample_weight`` hands the weights to the scorer when its metric takes them (without
    routing); under routing the scorer takes them only once requested, on a scorer of your
    own: ``SequenceScorer(token_accuracy).set_score_request(sample_weight=True)``.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_pred)`` or, when it accepts them, ``metric(y_true, y_pred,
        lengths=...)``; higher is better.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.metrics import token_accuracy_scorer
    >>> X = [np.eye(2)[[0, 1, 1]], np.eye(2)[[1, 0]]]
    >>> y = [["a", "b", "b"], ["b", "a"]]
    >>> model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    >>> token_accuracy_scorer(model, X, y)
    1.0
    """

    # sequence_ids follow the rows of every fold; lengths (per sequence) cannot be routed;
    # sample_weight only when requested (a scorer of your own:
    # SequenceScorer(token_accuracy).set_score_request(sample_weight=True)), so that routed
    # searches that did not ask for weighted scores keep them unweighted
    __metadata_request__score = {"sequence_ids": True, "lengths": UNUSED,
                                 "estimator": UNUSED, "sample_weight": False}

    def __init__(self, metric):
        self.metric = metric

    def __repr__(self):
        return f"SequenceScorer({getattr(self.metric, '__name__', repr(self.metric))})"

    def _accept_sample_weight(self):
        """Whether the metric takes ``sample_weight`` (scikit-learn's searches then hand it
        ``fit``'s weights)."""
        return "sample_weight" in inspect.signature(self.metric).parameters

    def score(self, estimator, X, y, sequence_ids=None, lengths=None, sample_weight=None):
        """Score ``estimator``'s predictions on ``X`` against ``y_true``.

        Parameters
        ----------
        estimator : fitted estimator
            A sklstruct estimator, or a Pipeline ending in one.
        X : list of array-like, or array-like of shape (n_tokens, n_features)
            Input in any form the estimator's ``predict`` accepts.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels in the form of ``X``.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Per-token sequence identifiers of a flat ``X``.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths of a flat ``X`` (instead of ``sequence_ids``).
        sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
            Weights of the sequences or of the tokens, for a metric that takes
            ``sample_weight`` (``token_accuracy``, ``chunk_f1_score``).

        Returns
        -------
        score : float
        """
        from ._input import check_sequence_weights, check_token_weights
        from .utils._sequences import lengths_from_sequence_ids

        if sequence_ids is not None:
            if lengths is not None:
                raise ValueError("Give either lengths or sequence_ids, not both.")
            lengths = lengths_from_sequence_ids(sequence_ids, _num_samples(X))
        if sample_weight is not None and not self._accept_sample_weight():
            raise TypeError(f"{self!r}: its metric takes no sample_weight.")
        if lengths is None:
            kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
            return self.metric(y, estimator.predict(X), **kwargs)
        kwargs = {}
        y_pred = estimator.predict(X, lengths=lengths)
        takes_lengths = "lengths" in inspect.signature(self.metric).parameters
        if sample_weight is not None:
            # a flat input's weights, per sequence or per token, go to the metric per token;
            # to chunk F1, which reads weights per sequence where there are as many
            # sequences as tokens, per sequence (a form it cannot misread)
            kwargs["sample_weight"] = check_sequence_weights(
                sample_weight, len(lengths), allow_all_zero=True, lengths=lengths) \
                if self.metric is chunk_f1_score else \
                check_token_weights(sample_weight, lengths)
        if takes_lengths:
            kwargs["lengths"] = lengths
        return self.metric(y, y_pred, **kwargs)

    __call__ = score  # (scikit-learn calls a scorer)


chunk_f1_scorer = SequenceScorer(chunk_f1_score)
"""Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: chunk F1."""

token_accuracy_scorer = SequenceScorer(token_accuracy)
"""Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: token accuracy."""
