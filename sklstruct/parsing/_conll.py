"""Dependency treebanks: CoNLL-X and CoNLL-U readers, a CoNLL-X writer, word-POS-head columns."""

import numbers
import os
import re

import numpy as np
from sklearn.utils import Bunch

from ._io import numbered_lines, open_text

__all__ = ["read_conll", "read_dependency_columns", "write_conll"]

# token-dict keys of the columns 2-6 (and 10 for CoNLL-U); ID, HEAD and DEPREL are not kept in
# the dicts, and neither are PHEAD/PDEPREL (CoNLL-X) or DEPS (CoNLL-U)
_CONLLX_KEYS = ("form", "lemma", "cpostag", "postag", "feats")
_CONLLU_KEYS = ("form", "lemma", "upos", "xpos", "feats")
_FORMATS = ("auto", "conllx", "conllu")
# CoNLL-U ids of a multiword token (a range) and of an empty node (a decimal)
_SKIPPED_ID = re.compile(r"[0-9]+-[0-9]+|[0-9]+\.[0-9]+")


def _parse_int(text, what, line_number):
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"line {line_number}: the {what} {text!r} is not an integer."
        ) from None


def _check_heads(heads, line_numbers):
    """Every head of a finished sentence lies in 0..n and is not the token itself."""
    n = len(heads)
    for position, (head, line_number) in enumerate(zip(heads, line_numbers), 1):
        if head < 0 or head > n:
            raise ValueError(
                f"line {line_number}: head {head} is outside 0..{n} (the sentence has "
                f"{n} tokens)."
            )
        if head == position:
            raise ValueError(f"line {line_number}: token {position} is its own head.")


def _sentence_blocks(lines):
    """Split numbered lines into sentences (lists of numbered lines) at blank lines."""
    block = []
    for number, line in lines:
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _detect_format(source, lines):
    """CoNLL-U when the path says so, or a comment or a multiword/empty-node id occurs."""
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(source)
        if path.endswith((".conllu", ".conllu.gz")):
            return "conllu"
    for _, line in lines:
        if line.startswith("#"):
            return "conllu"
        if _SKIPPED_ID.fullmatch(line.split("\t", 1)[0]):
            return "conllu"
    return "conllx"


def read_conll(source, encoding="utf-8", columns="auto"):
    """Read a dependency treebank in CoNLL-X or CoNLL-U format.

    Both formats have one token per line, ten tab-separated columns and a
    blank line after each sentence. CoNLL-X (the CoNLL 2006 and 2007 shared
    tasks) has the columns ``ID FORM LEMMA CPOSTAG POSTAG FEATS HEAD DEPREL
    PHEAD PDEPREL``; CoNLL-U (Universal Dependencies) has ``ID FORM LEMMA
    UPOS XPOS FEATS HEAD DEPREL DEPS MISC``. In CoNLL-U, comment lines
    (starting with ``#``), multiword-token lines (ids such as ``1-2``) and
    empty nodes (ids such as ``1.1``) are skipped: the tokens read are the
    syntactic words, numbered 1..n, that ``HEAD`` refers to.

    Parameters
    ----------
    source : str, path-like or file object
        A path (read through gzip when it ends in ``.gz``) or a file open in
        text mode.
    encoding : str, default="utf-8"
        Encoding of the file at ``source`` when it is a path; an open file
        is read with its own encoding. The CoNLL-2007 files of some
        languages (Basque among them) are ISO-8859-1: pass ``"latin-1"``.
    columns : {"auto", "conllx", "conllu"}, default="auto"
        The format. ``"auto"`` reads CoNLL-U when the path ends in
        ``.conllu`` (or ``.conllu.gz``) or when the file holds a comment
        line or a multiword-token or empty-node id, and CoNLL-X otherwise
        (so a CoNLL-U file with none of these is read as CoNLL-X, with
        CoNLL-X key names: pass ``columns="conllu"`` for it).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With the attributes:

        sentences : list of list of dict
            Per sentence, one dict per token with string values keyed by
            column: ``form, lemma, cpostag, postag, feats`` for CoNLL-X,
            ``form, lemma, upos, xpos, feats, misc`` for CoNLL-U. Values
            are kept as given (``"_"`` included). ``ID``, ``HEAD`` and
            ``DEPREL`` are in ``heads`` and ``relations``; ``PHEAD`` and
            ``PDEPREL`` (CoNLL-X) and ``DEPS`` (CoNLL-U) are not kept.
        heads : list of ndarray of int64
            Per sentence, the head of each token: the 1-based position of
            the head token, 0 for the root.
        relations : list of ndarray of object
            Per sentence, the relation (``DEPREL``) of each token, as str.
        format : str
            ``"conllx"`` or ``"conllu"``.

    Raises
    ------
    ValueError
        When a line has other than ten tab-separated columns, an id or head
        is not an integer, ids do not run 1, 2, ... within a sentence, or a
        head lies outside 0..n or points at the token itself, or the file
        does not decode with ``encoding``. The message names the line
        (counted from 1). Heads are not checked to form a tree.

    See Also
    --------
    write_conll : Write sentences in CoNLL-X format.
    read_dependency_columns : Read the three-column ``word POS head`` format.

    Examples
    --------
    >>> import io
    >>> from sklstruct.parsing import read_conll
    >>> text = ("1\\tThe\\tthe\\tDT\\tDT\\t_\\t2\\tdet\\t_\\t_\\n"
    ...         "2\\tdog\\tdog\\tNN\\tNN\\t_\\t3\\tnsubj\\t_\\t_\\n"
    ...         "3\\tbarks\\tbark\\tVB\\tVBZ\\t_\\t0\\tROOT\\t_\\t_\\n\\n")
    >>> data = read_conll(io.StringIO(text))
    >>> data.format, data.heads[0], data.relations[0]
    ('conllx', array([2, 3, 0]), array(['det', 'nsubj', 'ROOT'], dtype=object))
    >>> data.sentences[0][1]
    {'form': 'dog', 'lemma': 'dog', 'cpostag': 'NN', 'postag': 'NN', 'feats': '_'}
    """
    if not isinstance(columns, str) or columns not in _FORMATS:
        raise ValueError(f"columns must be one of {_FORMATS}; got {columns!r}.")
    with open_text(source, encoding) as handle:
        lines = list(numbered_lines(handle))
    fmt = _detect_format(source, lines) if columns == "auto" else columns
    keys = _CONLLU_KEYS if fmt == "conllu" else _CONLLX_KEYS

    sentences, heads, relations = [], [], []
    for block in _sentence_blocks(lines):
        tokens, sentence_heads, sentence_relations, line_numbers = [], [], [], []
        for number, line in block:
            if fmt == "conllu" and line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 10:
                raise ValueError(
                    f"line {number}: expected 10 tab-separated columns, got "
                    f"{len(fields)}: {line!r}."
                )
            token_id = fields[0]
            if fmt == "conllu" and _SKIPPED_ID.fullmatch(token_id):
                continue
            position = _parse_int(token_id, "token id", number)
            if position != len(tokens) + 1:
                raise ValueError(
                    f"line {number}: token id {position} out of order (expected "
                    f"{len(tokens) + 1})."
                )
            token = dict(zip(keys, fields[1:6]))
            if fmt == "conllu":
                token["misc"] = fields[9]
            tokens.append(token)
            sentence_heads.append(_parse_int(fields[6], "head", number))
            sentence_relations.append(fields[7])
            line_numbers.append(number)
        if not tokens:  # a block of comments and multiword lines only
            continue
        _check_heads(sentence_heads, line_numbers)
        sentences.append(tokens)
        heads.append(np.asarray(sentence_heads, dtype=np.int64))
        relations.append(np.asarray(sentence_relations, dtype=object))
    return Bunch(sentences=sentences, heads=heads, relations=relations, format=fmt)


def read_dependency_columns(source, encoding="utf-8"):
    """Read dependency trees in the three-column ``word POS head`` format.

    One token per line with three tab-separated columns: the word, its
    part-of-speech tag, and the 1-based position of its head (0 for the
    root); a blank line ends each sentence. This is the format of the
    dependency version of the Penn Treebank sample shipped with NLTK
    (``wsj_*.dp``).

    Parameters
    ----------
    source : str, path-like or file object
        A path (read through gzip when it ends in ``.gz``) or a file open in
        text mode.
    encoding : str, default="utf-8"
        Encoding of the file at ``source`` when it is a path.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With the attributes:

        sentences : list of list of dict
            Per sentence, one dict per token with keys ``form`` and
            ``postag``.
        heads : list of ndarray of int64
            Per sentence, the head of each token (0 for the root).

    Raises
    ------
    ValueError
        When a line has other than three tab-separated columns, a head is
        not an integer, or a head lies outside 0..n or points at the token
        itself; the message names the line.

    See Also
    --------
    read_conll : Read the ten-column CoNLL-X and CoNLL-U formats.

    Examples
    --------
    >>> import io
    >>> from sklstruct.parsing import read_dependency_columns
    >>> text = "Dogs\\tNNS\\t2\\nbark\\tVBP\\t0\\n\\nHi\\tUH\\t0\\n"
    >>> data = read_dependency_columns(io.StringIO(text))
    >>> data.heads
    [array([2, 0]), array([0])]
    >>> data.sentences[0][0]
    {'form': 'Dogs', 'postag': 'NNS'}
    """
    with open_text(source, encoding) as handle:
        lines = list(numbered_lines(handle))
    sentences, heads = [], []
    for block in _sentence_blocks(lines):
        tokens, sentence_heads, line_numbers = [], [], []
        for number, line in block:
            fields = line.split("\t")
            if len(fields) != 3:
                raise ValueError(
                    f"line {number}: expected 3 tab-separated columns (word, POS, "
                    f"head), got {len(fields)}: {line!r}."
                )
            tokens.append({"form": fields[0], "postag": fields[1]})
            sentence_heads.append(_parse_int(fields[2], "head", number))
            line_numbers.append(number)
        _check_heads(sentence_heads, line_numbers)
        sentences.append(tokens)
        heads.append(np.asarray(sentence_heads, dtype=np.int64))
    return Bunch(sentences=sentences, heads=heads)


def _field(token, keys, where):
    """The first of ``keys`` present in ``token`` (``"_"`` if none), checked for writing."""
    value = "_"
    for key in keys:
        if key in token:
            value = token[key]
            break
    if not isinstance(value, str):
        raise TypeError(f"{where}: the value of {keys[0]!r} must be a str; got "
                        f"{type(value).__name__}.")
    if value == "" or any(c in value for c in "\t\n\r"):
        raise ValueError(
            f"{where}: {value!r} cannot be written as a CoNLL field (it is empty or "
            "holds a tab or line break)."
        )
    return value


def _as_heads(heads, n_tokens, where):
    heads = np.asarray(heads)
    if heads.ndim != 1 or heads.shape[0] != n_tokens:
        raise ValueError(
            f"{where}: expected {n_tokens} heads, one per token; got an array of shape "
            f"{heads.shape}."
        )
    if heads.size and heads.dtype.kind not in "iu":
        if heads.dtype != object or not all(
            isinstance(h, numbers.Integral) and not isinstance(h, bool) for h in heads
        ):
            raise ValueError(f"{where}: heads must be integers; got dtype {heads.dtype}.")
    heads = heads.astype(np.int64)
    if heads.size and (heads.min() < 0 or heads.max() > n_tokens):
        raise ValueError(f"{where}: heads must lie in 0..{n_tokens}.")
    if np.any(heads == np.arange(1, n_tokens + 1)):
        raise ValueError(f"{where}: a token is its own head.")
    return heads


def write_conll(sentences, heads, relations, file, *, encoding="utf-8"):
    """Write dependency trees in CoNLL-X format, readable by :func:`read_conll`.

    Each token becomes a line ``ID FORM LEMMA CPOSTAG POSTAG FEATS HEAD
    DEPREL PHEAD PDEPREL`` (tab-separated, ``PHEAD`` and ``PDEPREL`` written
    as ``_``), and each sentence is followed by a blank line. The token
    fields come from the token dicts: ``form``, ``lemma``, ``cpostag`` (or
    ``upos``), ``postag`` (or ``xpos``) and ``feats``, ``"_"`` for a missing
    key, so the sentences of a CoNLL-U file can be written too.
    ``read_conll`` gives back what was written.

    Parameters
    ----------
    sentences : list of list of dict
        Per sentence, one dict of str values per token (as returned by
        :func:`read_conll` or :func:`read_dependency_columns`).
    heads : list of array-like of int
        Per sentence, the head of each token (1-based, 0 for the root).
    relations : list of array-like of str or int, or None
        Per sentence, the relation of each token (integers, as a
        :class:`DependencyParser` fitted on integer relations predicts them,
        are written as their digits); None writes ``_``.
    file : str, path-like or file object
        A path (written through gzip when it ends in ``.gz``; an existing
        file is overwritten) or a file open in text mode.
    encoding : str, default="utf-8"
        Encoding of the file written at a path.

    Returns
    -------
    None
        The sentences are written to ``file``; nothing is written when an
        error is raised.

    Raises
    ------
    ValueError
        When the lists differ in length, a sentence is empty, heads or
        relations do not match the tokens, a head lies outside 0..n or
        points at its own token, or a field is empty or holds a tab or line
        break.

    Examples
    --------
    >>> import io
    >>> from sklstruct.parsing import read_conll, write_conll
    >>> out = io.StringIO()
    >>> write_conll([[{"form": "Hi", "postag": "UH"}]], [[0]], [["ROOT"]], out)
    >>> out.getvalue()
    '1\\tHi\\t_\\t_\\tUH\\t_\\t0\\tROOT\\t_\\t_\\n\\n'
    >>> read_conll(io.StringIO(out.getvalue())).heads
    [array([0])]
    """
    n_sentences = len(sentences)
    if len(heads) != n_sentences or (relations is not None and len(relations) != n_sentences):
        raise ValueError(
            f"sentences, heads and relations must have the same length; got "
            f"{n_sentences}, {len(heads)} and "
            f"{'None' if relations is None else len(relations)}."
        )
    lines = []
    for i, tokens in enumerate(sentences):
        where = f"sentence {i}"
        n_tokens = len(tokens)
        if n_tokens == 0:
            raise ValueError(f"{where} is empty; CoNLL cannot represent it.")
        sentence_heads = _as_heads(heads[i], n_tokens, where)
        if relations is None:
            sentence_relations = ["_"] * n_tokens
        else:
            sentence_relations = [
                str(r) if isinstance(r, (numbers.Integral, np.integer))
                and not isinstance(r, (bool, np.bool_)) else r for r in relations[i]]
            if len(sentence_relations) != n_tokens:
                raise ValueError(
                    f"{where}: expected {n_tokens} relations, one per token; got "
                    f"{len(sentence_relations)}."
                )
        for position, token in enumerate(tokens, 1):
            at = f"{where}, token {position}"
            if not isinstance(token, dict):
                raise TypeError(f"{at}: tokens must be dicts; got {type(token).__name__}.")
            fields = [
                str(position),
                _field(token, ("form",), at),
                _field(token, ("lemma",), at),
                _field(token, ("cpostag", "upos"), at),
                _field(token, ("postag", "xpos"), at),
                _field(token, ("feats",), at),
                str(sentence_heads[position - 1]),
                _field({"relation": sentence_relations[position - 1]}, ("relation",), at),
                "_",
                "_",
            ]
            lines.append("\t".join(fields) + "\n")
        lines.append("\n")
    with open_text(file, encoding, mode="w") as handle:
        handle.writelines(lines)
