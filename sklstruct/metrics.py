"""Metrics for sequence labelling: token and sequence accuracy, chunk F1.

Labels are given either as a list of sequences (one 1-D array or list per
sequence, as returned by the estimators' ``predict`` on a list input) or as
flat 1-D arrays holding every token.
"""

import numbers

import numpy as np
from sklearn.metrics import make_scorer

__all__ = [
    "chunk_f1_scorer",
    "chunk_f1_score",
    "chunk_precision_recall_fscore",
    "sequence_accuracy",
    "token_accuracy",
    "token_accuracy_scorer",
]


def _is_sequence(obj):
    return isinstance(obj, (list, tuple, np.ndarray))


def _as_flat(y, name):
    """Return ``y`` as a flat 1-D array, or None if ``y`` is a list of sequences."""
    if isinstance(y, np.ndarray) and y.dtype != object:
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
        seq = np.asarray(seq)
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


def token_accuracy(y_true, y_pred):
    """Fraction of tokens whose predicted label is correct.

    Parameters
    ----------
    y_true : list of array-like or array-like of shape (n_tokens,)
        True labels, per sequence or flat.
    y_pred : list of array-like or array-like of shape (n_tokens,)
        Predicted labels, in the same form as ``y_true``.

    Returns
    -------
    accuracy : float
        Number of correct tokens divided by the number of tokens.

    Examples
    --------
    >>> from sklstruct.metrics import token_accuracy
    >>> token_accuracy([["a", "b"], ["c"]], [["a", "a"], ["c"]])
    0.666...
    """
    y_true, y_pred = _check_targets(y_true, y_pred)
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


def _split_tag(tag):
    """Split a chunk tag into prefix and type as conlleval does.

    The prefix is the text before the first hyphen and the type the rest
    (types may contain hyphens); a tag without a hyphen has type "". Like
    Perl's truth test in conlleval, a type of "0" counts as no type.
    """
    prefix, hyphen, chunk_type = str(tag).partition("-")
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


def _chunk_counts(y_true, y_pred):
    """Count chunks with conlleval's algorithm.

    Every sequence is followed by a sentence break, which conlleval reads as
    the tag "O" in both columns.

    Returns
    -------
    n_correct, n_true, n_pred : int
        Correctly found chunks, chunks in ``y_true`` and chunks in ``y_pred``.
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
    n_correct = n_true = n_pred = 0
    in_correct = False
    last_true = last_pred = boundary
    for seq_true, seq_pred in zip(y_true, y_pred):
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
                    n_correct += 1
                elif end_true != end_pred or cur_true[1] != cur_pred[1]:
                    in_correct = False
            if start_true and start_pred and cur_true[1] == cur_pred[1]:
                in_correct = True
            n_true += start_true
            n_pred += start_pred
            last_true, last_pred = cur_true, cur_pred
    if in_correct:
        n_correct += 1
    return n_correct, n_true, n_pred


def chunk_precision_recall_fscore(y_true, y_pred, *, lengths=None):
    """Chunk (phrase) precision, recall and F1 with conlleval semantics.

    Tags are strings such as ``"B-NP"``, ``"I-NP"`` and ``"O"``: a prefix,
    a hyphen and a chunk type. Chunk starts and ends are found with the rules
    of the CoNLL shared-task script ``conlleval`` (its ``startOfChunk`` and
    ``endOfChunk``), so IOB1 (a chunk may start with ``I-``), IOB2 and IOE
    tags are handled as that script handles them, and a chunk never extends
    over a sequence boundary. A predicted chunk is correct only if its type,
    first token and last token all match a true chunk. Labels that are not
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

    Returns
    -------
    precision : float
        Correct chunks divided by predicted chunks (0.0 without predicted
        chunks).
    recall : float
        Correct chunks divided by true chunks (0.0 without true chunks).
    f1 : float
        Harmonic mean of precision and recall (0.0 when both are 0).

    Examples
    --------
    >>> from sklstruct.metrics import chunk_precision_recall_fscore
    >>> y_true = [["B-NP", "I-NP", "B-VP", "O"]]
    >>> y_pred = [["B-NP", "I-NP", "B-NP", "O"]]
    >>> chunk_precision_recall_fscore(y_true, y_pred)
    (0.5, 0.5, 0.5)
    """
    y_true, y_pred = _check_targets(y_true, y_pred, lengths, need_sequences=True)
    n_correct, n_true, n_pred = _chunk_counts(y_true, y_pred)
    precision = n_correct / n_pred if n_pred > 0 else 0.0
    recall = n_correct / n_true if n_true > 0 else 0.0
    if precision + recall > 0:
        f1 = 2 * precision * recall / (precision + recall)
    else:
        f1 = 0.0
    return precision, recall, f1


def chunk_f1_score(y_true, y_pred, *, lengths=None):
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
    return chunk_precision_recall_fscore(y_true, y_pred, lengths=lengths)[2]


chunk_f1_scorer = make_scorer(chunk_f1_score)
"""Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: chunk F1."""

token_accuracy_scorer = make_scorer(token_accuracy)
"""Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: token accuracy."""
