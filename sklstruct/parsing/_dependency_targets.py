"""The targets of dependency parsing: per sentence an array of heads, or a pair
``(heads, relations)``."""

import numpy as np


def _as_head_arrays(heads, name):
    if not isinstance(heads, (list, tuple, np.ndarray)):
        raise TypeError(
            f"{name} must be a list of per-sentence head arrays; got {type(heads).__name__}."
        )
    arrays = []
    for i, sentence_heads in enumerate(heads):
        array = np.asarray(sentence_heads)
        if array.ndim != 1:
            raise ValueError(f"{name}[{i}] must be 1-D; got shape {array.shape}.")
        if array.size and array.dtype.kind not in "iu":
            raise ValueError(f"{name}[{i}] must hold integers; got dtype {array.dtype}.")
        array = array.astype(np.int64)
        n = array.shape[0]
        if n and (array.min() < 0 or array.max() > n):
            raise ValueError(
                f"{name}[{i}] has heads outside 0..{n} (0 is the root, 1..{n} the tokens)."
            )
        arrays.append(array)
    return arrays


def _as_relation_arrays(relations, lengths, name):
    if len(relations) != len(lengths):
        raise ValueError(
            f"{name} has {len(relations)} sentences; the heads have {len(lengths)}."
        )
    arrays = []
    for i, (sentence_relations, n) in enumerate(zip(relations, lengths)):
        array = np.asarray(list(sentence_relations), dtype=object)
        if array.shape != (n,):
            raise ValueError(f"{name}[{i}] has {array.size} relations for {n} tokens.")
        arrays.append(array)
    return arrays


def is_tree_pair(item):
    """Whether ``item`` is a pair ``(heads, relations)`` of two 1-D sequences."""
    return (
        isinstance(item, (tuple, list)) and len(item) == 2
        and all(np.ndim(part) == 1 for part in item)
    )


def split_trees(y, name="y", lengths=None):
    """Heads and relations of a list of trees.

    Parameters
    ----------
    y : list
        Per sentence, an array of heads (1-based, 0 for the root) or a pair
        ``(heads, relations)``; all items of one kind.
    name : str, default="y"
        The name errors give the list.
    lengths : array-like of int, default=None
        The sentence lengths, when known: a tree of another length is a ValueError.

    Returns
    -------
    heads : list of ndarray of int64
    relations : list of ndarray of object, or None
        None when the items are head arrays.
    """
    if not isinstance(y, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must be a list of per-sentence trees; got "
                        f"{type(y).__name__}.")
    pairs = [is_tree_pair(item) for item in y]
    if lengths is not None:
        if len(y) != len(lengths):
            raise ValueError(f"X has {len(lengths)} sentences but {name} has {len(y)} trees.")
        for i, (item, n) in enumerate(zip(y, lengths)):
            size = np.size(item[0] if pairs[i] else item)
            if size != n:
                raise ValueError(f"tree {i} of {name} has {size} heads for a sentence of {n} "
                                 "tokens.")
    if any(pairs) and not all(pairs):
        i = pairs.index(not pairs[0])
        raise ValueError(f"{name} mixes head arrays and (heads, relations) pairs (item {i} "
                         f"differs from item 0).")
    if not any(pairs):
        return _as_head_arrays(y, name), None
    heads = _as_head_arrays([item[0] for item in y], name)
    relations = _as_relation_arrays([item[1] for item in y], [h.shape[0] for h in heads],
                                    name)
    return heads, relations
