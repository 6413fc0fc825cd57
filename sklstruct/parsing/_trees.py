"""Constituency trees as nested tuples: reading, writing, words, tags and spans.

A tree is a tuple ``(label, child, child, ...)``. A preterminal is
``(tag, word)`` with ``word`` a str, its only child; every other node has one
or more tree children and no words.
"""

import re
from collections import Counter

from ._io import numbered_lines, open_text

__all__ = [
    "from_nltk",
    "labelled_spans",
    "read_ptb_trees",
    "to_nltk",
    "tree_from_string",
    "tree_tags",
    "tree_to_string",
    "tree_words",
]

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_FUNCTION_TAG = re.compile(r"(?<=.)[-=]")
_UNWRAPPED = ("", "TOP", "ROOT")
_NOT_WRITABLE = re.compile(r"[\s()]")


def is_preterminal(node):
    return len(node) == 2 and isinstance(node[1], str)


def check_tree(tree, name="tree"):
    """Raise TypeError/ValueError unless ``tree`` is a well-formed nested-tuple tree."""
    stack = [tree]
    push, pop = stack.append, stack.pop
    while stack:
        node = pop()
        if not isinstance(node, tuple):
            raise TypeError(
                f"{name}: a tree node must be a tuple (label, child, ...); got "
                f"{type(node).__name__}."
            )
        if len(node) < 2:
            raise ValueError(f"{name}: the node {node!r} has no children.")
        if not isinstance(node[0], str):
            raise TypeError(
                f"{name}: a label must be a str; got {type(node[0]).__name__}."
            )
        if len(node) == 2 and isinstance(node[1], str):
            continue
        for child in node[1:]:
            if isinstance(child, str):
                raise ValueError(
                    f"{name}: a word must be the only child of its preterminal; the "
                    f"node {node[0]!r} has {len(node) - 1} children."
                )
            push(child)


def strip_function_tag(label):
    """``NP-SBJ-1 -> NP``, ``PP-LOC=2 -> PP``; labels starting with ``-`` stay whole."""
    if label.startswith("-"):
        return label
    match = _FUNCTION_TAG.search(label)
    return label if match is None else label[:match.start()]


def _parse_trees(text):
    """Yield ``(tree, line_number)`` for each top-level bracketed tree of ``text``."""
    stack = []  # open brackets: [label, children, start position]
    expect_label = False
    line, line_pos = 1, 0

    def line_of(pos):
        nonlocal line, line_pos
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        return line

    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "(":
            if expect_label:  # "( (": an unlabelled bracket
                stack[-1][0] = ""
            stack.append([None, [], match.start()])
            expect_label = True
            continue
        if token == ")":
            if not stack:
                raise ValueError(f"line {line_of(match.start())}: unbalanced ')'.")
            label, children, start = stack.pop()
            if label is None or not children:
                raise ValueError(f"line {line_of(start)}: empty bracket.")
            if len(children) > 1 and any(isinstance(c, str) for c in children):
                raise ValueError(
                    f"line {line_of(start)}: a word must be the only child of its "
                    f"preterminal; the bracket {label!r} has {len(children)} children."
                )
            node = (label, *children)
            if stack:
                stack[-1][1].append(node)
            else:
                yield node, line_of(start)
        elif not stack:
            raise ValueError(
                f"line {line_of(match.start())}: {token!r} outside brackets."
            )
        elif expect_label:
            stack[-1][0] = token
        else:
            stack[-1][1].append(token)
        expect_label = False
    if stack:
        raise ValueError(f"line {line_of(stack[0][2])}: unbalanced '(' (a ')' is missing).")


def tree_from_string(string):
    """Parse one bracketed tree, such as ``"(S (NP (PRP It)) (VP (VBZ works)))"``.

    The tree is returned as written: labels keep their function tags and
    ``-NONE-`` elements stay. An unlabelled bracket, such as the outer one
    of the Penn Treebank files, gets the label ``""``. For the treebank
    preprocessing, read the text with :func:`read_ptb_trees` (an
    :class:`io.StringIO` will do).

    Parameters
    ----------
    string : str
        Exactly one bracketed tree. Words may not contain whitespace or
        parentheses (the Penn Treebank writes ``-LRB-`` and ``-RRB-``).

    Returns
    -------
    tree : tuple
        The tree as nested tuples ``(label, child, ...)``, preterminals
        ``(tag, word)``.

    Raises
    ------
    ValueError
        When the brackets are unbalanced or empty, a word shares its bracket
        with another child, or the string holds no tree or several.

    See Also
    --------
    tree_to_string : The inverse.

    Examples
    --------
    >>> from sklstruct.parsing import tree_from_string
    >>> tree_from_string("(S (NP (PRP It)) (VP (VBZ works)))")
    ('S', ('NP', ('PRP', 'It')), ('VP', ('VBZ', 'works')))
    """
    if not isinstance(string, str):
        raise TypeError(f"string must be a str; got {type(string).__name__}.")
    trees = list(_parse_trees(string))
    if len(trees) != 1:
        raise ValueError(f"Expected one bracketed tree; found {len(trees)}.")
    return trees[0][0]


def tree_to_string(tree):
    """Write a tree on one line in bracketed form, the inverse of :func:`tree_from_string`.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.

    Returns
    -------
    string : str
        For example ``"(S (NP (PRP It)) (VP (VBZ works)))"``. A label
        ``""`` is written as an unlabelled bracket ``"( ...)"``.

    Raises
    ------
    ValueError
        When a label or word holds whitespace or a parenthesis, a word or a
        preterminal's label is empty: the string could not be read back.

    Examples
    --------
    >>> from sklstruct.parsing import tree_to_string
    >>> tree_to_string(("S", ("NP", ("PRP", "It")), ("VP", ("VBZ", "works"))))
    '(S (NP (PRP It)) (VP (VBZ works)))'
    """
    check_tree(tree)

    def writable(text, what):
        if _NOT_WRITABLE.search(text):
            raise ValueError(
                f"The {what} {text!r} holds whitespace or a parenthesis and cannot be "
                "written in bracketed form."
            )
        return text

    def write(node):
        if is_preterminal(node):
            if not node[0] or not node[1]:
                raise ValueError(
                    f"The preterminal {node!r} has an empty tag or word and cannot be "
                    "written in bracketed form."
                )
            return f"({writable(node[0], 'tag')} {writable(node[1], 'word')})"
        children = " ".join(write(child) for child in node[1:])
        return f"({writable(node[0], 'label')} {children})"

    return write(tree)


def _clean(node, remove_empty, strip_tags):
    if is_preterminal(node):
        if remove_empty and node[0] == "-NONE-":
            return None
        return (strip_function_tag(node[0]) if strip_tags else node[0], node[1])
    children = [_clean(child, remove_empty, strip_tags) for child in node[1:]]
    children = [child for child in children if child is not None]
    if not children:
        return None
    return (strip_function_tag(node[0]) if strip_tags else node[0], *children)


def read_ptb_trees(source, encoding="utf-8", remove_empty=True, strip_function_tags=True):
    """Read Penn Treebank bracketed trees (``.mrg`` files).

    The file holds one tree after another, each usually wrapped in an
    unlabelled outer bracket: ``( (S (NP-SBJ (NNP Vinken)) ...) )``. An
    outer bracket that is unlabelled or labelled ``TOP`` or ``ROOT`` and
    holds a single constituent is removed, so the root of each tree is its
    first real constituent (usually ``S``). The usual preprocessing for
    parsing is applied:

    - ``remove_empty``: the ``-NONE-`` elements (traces and null elements
      such as ``*T*-1``) are removed, then every constituent left without
      children, recursively; ``(S (NP-SBJ (-NONE- *-1)) (VP ...))`` becomes
      ``(S (VP ...))``.
    - ``strip_function_tags``: function tags and co-indices are removed from
      every label, at the first ``-`` or ``=`` after its first character:
      ``NP-SBJ-1 -> NP``, ``PP-LOC=2 -> PP``, ``S-TPC-1 -> S``. Labels that
      start with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``) stay whole.

    Parameters
    ----------
    source : str, path-like or file object
        A path (read through gzip when it ends in ``.gz``) or a file open in
        text mode.
    encoding : str, default="utf-8"
        Encoding of the file at ``source`` when it is a path.
    remove_empty : bool, default=True
        Remove ``-NONE-`` elements and the constituents left empty.
    strip_function_tags : bool, default=True
        Remove function tags and co-indices from the labels.

    Returns
    -------
    trees : list of tuple
        One tree per sentence, as nested tuples ``(label, child, ...)`` with
        preterminals ``(tag, word)``.

    Raises
    ------
    ValueError
        When the brackets are unbalanced or empty, a word shares its bracket
        with another child, text lies outside brackets, or a tree holds only
        ``-NONE-`` elements; the message names the line.

    Examples
    --------
    >>> import io
    >>> from sklstruct.parsing import read_ptb_trees, tree_to_string
    >>> text = '''( (S (NP-SBJ-1 (DT The) (NN deal))
    ...   (VP (VBD was) (VP (VBN made) (NP (-NONE- *-1)))) (. .)) )'''
    >>> [tree] = read_ptb_trees(io.StringIO(text))
    >>> tree_to_string(tree)
    '(S (NP (DT The) (NN deal)) (VP (VBD was) (VP (VBN made))) (. .))'
    """
    with open_text(source, encoding) as handle:
        # (the lines' decoding errors name the line; a byte-order mark is dropped)
        text = "\n".join(line for _, line in numbered_lines(handle))
    trees = []
    for tree, line in _parse_trees(text):
        cleaned = _clean(tree, remove_empty, strip_function_tags)
        if cleaned is None:
            raise ValueError(
                f"line {line}: the tree holds only -NONE- elements; no word is left."
            )
        if cleaned[0] in _UNWRAPPED and len(cleaned) == 2 and isinstance(cleaned[1], tuple):
            cleaned = cleaned[1]
        trees.append(cleaned)
    return trees


def _leaves(tree):
    """Yield the preterminals of ``tree`` from left to right."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if is_preterminal(node):
            yield node
        else:
            stack.extend(reversed(node[1:]))


def tree_words(tree):
    """The words of a tree, from left to right.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.

    Returns
    -------
    words : list of str

    Examples
    --------
    >>> from sklstruct.parsing import tree_from_string, tree_words
    >>> tree_words(tree_from_string("(S (NP (PRP It)) (VP (VBZ works)))"))
    ['It', 'works']
    """
    check_tree(tree)
    return [node[1] for node in _leaves(tree)]


def tree_tags(tree):
    """The part-of-speech tags of a tree (its preterminal labels), from left to right.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.

    Returns
    -------
    tags : list of str

    Examples
    --------
    >>> from sklstruct.parsing import tree_from_string, tree_tags
    >>> tree_tags(tree_from_string("(S (NP (PRP It)) (VP (VBZ works)))"))
    ['PRP', 'VBZ']
    """
    check_tree(tree)
    return [node[0] for node in _leaves(tree)]


def labelled_spans(tree):
    """The labelled spans of the phrasal nodes of a tree, as a multiset.

    Each phrasal node (every node but the preterminals) gives ``(label,
    start, end)``: its label and the word positions it covers, ``start``
    included and ``end`` excluded. The root counts; a unary chain of one
    label over one span, such as ``(NP (NP ...))``, counts once per node.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.

    Returns
    -------
    spans : collections.Counter
        Maps each ``(label, start, end)`` to its number of nodes.

    See Also
    --------
    bracket_scores : Labelled bracket precision and recall (evalb).

    Examples
    --------
    >>> from sklstruct.parsing import labelled_spans, tree_from_string
    >>> tree = tree_from_string("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))")
    >>> sorted(labelled_spans(tree).items())
    [(('NP', 0, 2), 1), (('S', 0, 3), 1), (('VP', 2, 3), 1)]
    """
    check_tree(tree)
    spans = Counter()

    def visit(node, start):
        if is_preterminal(node):
            return start + 1
        end = start
        for child in node[1:]:
            end = visit(child, end)
        spans[(node[0], start, end)] += 1
        return end

    visit(tree, 0)
    return spans


def _import_nltk():
    try:
        import nltk
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "This function needs nltk, which is not installed (pip install nltk)."
        ) from exc
    return nltk


def to_nltk(tree):
    """Convert a tree to an :class:`nltk.tree.Tree` (nltk is imported only here).

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.

    Returns
    -------
    nltk_tree : nltk.tree.Tree

    Examples
    --------
    >>> from sklstruct.parsing import to_nltk
    >>> to_nltk(("S", ("NP", ("PRP", "It")), ("VP", ("VBZ", "works"))))  # doctest: +SKIP
    Tree('S', [Tree('NP', [Tree('PRP', ['It'])]), Tree('VP', [Tree('VBZ', ['works'])])])
    """
    check_tree(tree)
    nltk = _import_nltk()

    def convert(node):
        if is_preterminal(node):
            return nltk.Tree(node[0], [node[1]])
        return nltk.Tree(node[0], [convert(child) for child in node[1:]])

    return convert(tree)


def from_nltk(tree):
    """Convert an :class:`nltk.tree.Tree` to nested tuples (nltk is imported only here).

    Parameters
    ----------
    tree : nltk.tree.Tree
        A tree whose leaves are str, each the only child of its preterminal.

    Returns
    -------
    tree : tuple
        The tree ``(label, child, ...)``.

    Raises
    ------
    TypeError
        When ``tree`` is not an nltk tree, or a label or leaf is not a str.
    ValueError
        When a leaf shares its parent with another child.

    Examples
    --------
    >>> from nltk import Tree  # doctest: +SKIP
    >>> from sklstruct.parsing import from_nltk
    >>> from_nltk(Tree("S", [Tree("NP", [Tree("PRP", ["It"])])]))  # doctest: +SKIP
    ('S', ('NP', ('PRP', 'It')))
    """
    nltk = _import_nltk()
    if not isinstance(tree, nltk.Tree):
        raise TypeError(f"Expected an nltk.Tree; got {type(tree).__name__}.")

    def convert(node):
        if isinstance(node, nltk.Tree):
            return (node.label(), *[convert(child) for child in node])
        if not isinstance(node, str):
            raise TypeError(f"A leaf must be a str; got {type(node).__name__}.")
        return node

    converted = convert(tree)
    check_tree(converted)
    return converted
