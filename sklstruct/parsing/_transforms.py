"""Tree transforms for grammars: binarization with markovisation, unary collapsing."""

import numbers

from ._trees import check_tree, is_preterminal

__all__ = ["binarize", "collapse_unary", "expand_unary", "unbinarize"]

# reserved characters: an intermediate node's label starts with "@", a parent annotation
# follows "^"; no Penn Treebank label uses either
_INTERMEDIATE = "@"
_PARENT = "^"


def _check_order(value, name, minimum, allow_none):
    if value is None and allow_none:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        kind = "None or an int" if allow_none else "an int"
        raise ValueError(f"{name} must be {kind} >= {minimum}; got {value!r}.")


def _phrasal_labels(tree):
    stack = [tree]
    while stack:
        node = stack.pop()
        if not is_preterminal(node):
            yield node[0]
            stack.extend(node[1:])


def binarize(tree, horizontal=None, vertical=1):
    """Binarize a tree, right-factored, with horizontal and vertical markovisation.

    A node ``A`` with children ``B1 ... Bk`` (k > 2) becomes ``A -> B1
    @A|<B1>``, ``@A|<B1> -> B2 @A|<B1-B2>``, ..., ``@A|<B1-...-Bk-2> -> Bk-1
    Bk``: each intermediate node covers the children that remain, and its
    label names the siblings already generated to its left, the last
    ``horizontal`` of them (horizontal markovisation, Klein and Manning,
    "Accurate Unlexicalized Parsing", ACL 2003, section 2). With
    ``vertical=v`` every phrasal node but the root is annotated with its
    ``v - 1`` nearest ancestors' labels, nearest first: ``NP^S``,
    ``NP^VP^S`` (parent annotation, Johnson, "PCFG Models of Linguistic Tree
    Representations", Computational Linguistics 24(4), 1998; vertical
    markovisation, Klein and Manning, section 2). Intermediate nodes carry
    their node's annotated label: ``@NP^S|<DT-JJ>``. Preterminals are left
    as they are, so the words and tags do not change, and unary nodes stay
    unary (see :func:`collapse_unary`).

    The names cannot clash with treebank labels: an intermediate label
    starts with ``@`` and an annotation follows ``^``, two characters that
    no Penn Treebank label holds, and phrasal labels holding them are
    refused. :func:`unbinarize` recognises intermediate nodes by the
    ``@`` alone and cuts labels at the first ``^``, so the ``|`` of
    treebank labels such as ``ADVP|PRT`` is no problem.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.
    horizontal : int or None, default=None
        Number of previous siblings named in an intermediate label; None
        names them all (no markovisation), 0 none (``@NP|<>``).
    vertical : int, default=1
        Vertical markovisation order: 1 annotates nothing, 2 adds the
        parent's label, 3 the parent's and the grandparent's, and so on.

    Returns
    -------
    binarized : tuple
        A tree whose nodes have at most two children.

    Raises
    ------
    ValueError
        When a phrasal label starts with ``@`` or holds ``^``, or the
        orders are out of range.

    See Also
    --------
    unbinarize : The exact inverse.

    Examples
    --------
    >>> from sklstruct.parsing import binarize, tree_from_string, tree_to_string
    >>> tree = tree_from_string(
    ...     "(S (NP (DT the) (JJ big) (JJ red) (NN dog)) (VP (VBZ barks)))")
    >>> print(tree_to_string(binarize(tree)))
    (S (NP (DT the) (@NP|<DT> (JJ big) (@NP|<DT-JJ> (JJ red) (NN dog)))) (VP (VBZ barks)))
    >>> print(tree_to_string(binarize(tree, horizontal=1, vertical=2)))
    (S (NP^S (DT the) (@NP^S|<DT> (JJ big) (@NP^S|<JJ> (JJ red) (NN dog)))) (VP^S (VBZ barks)))
    """
    check_tree(tree)
    _check_order(horizontal, "horizontal", 0, allow_none=True)
    _check_order(vertical, "vertical", 1, allow_none=False)
    for label in _phrasal_labels(tree):
        if label.startswith(_INTERMEDIATE) or _PARENT in label:
            raise ValueError(
                f"The label {label!r} starts with {_INTERMEDIATE!r} or holds "
                f"{_PARENT!r}, which binarize reserves for the labels it makes."
            )

    def visit(node, ancestors):
        if is_preterminal(node):
            return node
        label = node[0]
        annotated = label + "".join(_PARENT + a for a in ancestors[:vertical - 1])
        inner = (label,) + ancestors[:max(vertical - 2, 0)]
        children = [visit(child, inner) for child in node[1:]]
        if len(children) <= 2:
            return (annotated, *children)
        child_labels = [child[0] for child in node[1:]]
        rest = children[-1]
        for i in range(len(children) - 2, 0, -1):
            context = child_labels[:i]
            if horizontal is not None:
                context = context[len(context) - horizontal:] if horizontal else []
            rest = (f"{_INTERMEDIATE}{annotated}|<{'-'.join(context)}>", children[i], rest)
        return (annotated, children[0], rest)

    return visit(tree, ())


def unbinarize(tree):
    """Undo :func:`binarize`: splice intermediate nodes, remove annotations.

    Every node whose label starts with ``@`` is replaced by its children,
    and every other phrasal label is cut at its first ``^``. For any tree
    ``t`` that :func:`binarize` accepts, ``unbinarize(binarize(t, h, v)) ==
    t`` for every ``h`` and ``v``.

    Parameters
    ----------
    tree : tuple
        A binarized tree.

    Returns
    -------
    tree : tuple
        The n-ary tree.

    Raises
    ------
    ValueError
        When the root itself is an intermediate node.

    Examples
    --------
    >>> from sklstruct.parsing import binarize, tree_from_string, unbinarize
    >>> tree = tree_from_string("(NP (DT the) (JJ big) (NN dog))")
    >>> binarize(tree, vertical=2)
    ('NP', ('DT', 'the'), ('@NP|<DT>', ('JJ', 'big'), ('NN', 'dog')))
    >>> unbinarize(binarize(tree, vertical=2)) == tree
    True
    """
    check_tree(tree)
    if not is_preterminal(tree) and tree[0].startswith(_INTERMEDIATE):
        raise ValueError(f"The root {tree[0]!r} is an intermediate node of a binarization.")

    def spliced(node):
        if not is_preterminal(node) and node[0].startswith(_INTERMEDIATE):
            return [grandchild for child in node[1:] for grandchild in spliced(child)]
        return [restore(node)]

    def restore(node):
        if is_preterminal(node):
            return node
        children = [grandchild for child in node[1:] for grandchild in spliced(child)]
        return (node[0].split(_PARENT, 1)[0], *children)

    return restore(tree)


def _check_join(join):
    if not isinstance(join, str) or not join:
        raise ValueError(f"join must be a non-empty str; got {join!r}.")


def collapse_unary(tree, join="+"):
    """Collapse unary chains into single nodes labelled ``A+B+...``.

    A phrasal node with a single non-word child is merged with that child,
    repeatedly: ``(S (VP (VB Go)))`` becomes ``(S+VP+VB Go)`` and ``(NP (PRP
    it))`` becomes ``(NP+PRP it)``. A chain ending in a preterminal becomes
    a preterminal, so tags may change and the words do not.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.
    join : str, default="+"
        Separator of the merged labels; no label of the tree may hold it.

    Returns
    -------
    collapsed : tuple
        A tree without unary phrasal nodes.

    Raises
    ------
    ValueError
        When a label holds ``join``, or ``join`` is empty.

    See Also
    --------
    expand_unary : The exact inverse.

    Examples
    --------
    >>> from sklstruct.parsing import collapse_unary, tree_from_string, tree_to_string
    >>> tree = tree_from_string("(S (NP (PRP it)) (VP (VBZ works)))")
    >>> tree_to_string(collapse_unary(tree))
    '(S (NP+PRP it) (VP+VBZ works))'
    """
    check_tree(tree)
    _check_join(join)
    stack = [tree]
    while stack:
        node = stack.pop()
        if join in node[0]:
            raise ValueError(
                f"The label {node[0]!r} holds the separator {join!r}; pass another join."
            )
        if not is_preterminal(node):
            stack.extend(node[1:])

    def visit(node):
        label = node[0]
        while len(node) == 2 and not isinstance(node[1], str):
            node = node[1]
            label = label + join + node[0]
        if is_preterminal(node):
            return (label, node[1])
        return (label, *[visit(child) for child in node[1:]])

    return visit(tree)


def expand_unary(tree, join="+"):
    """Undo :func:`collapse_unary`: a node labelled ``A+B`` becomes ``A`` over ``B``.

    ``expand_unary(collapse_unary(t, join), join) == t`` for every tree
    whose labels do not hold ``join``. Binarizing and collapsing, in either
    order, are undone by expanding and unbinarizing in the reverse order.

    Parameters
    ----------
    tree : tuple
        A tree ``(label, child, ...)``.
    join : str, default="+"
        The separator used by :func:`collapse_unary`.

    Returns
    -------
    expanded : tuple

    Examples
    --------
    >>> from sklstruct.parsing import expand_unary, tree_from_string, tree_to_string
    >>> tree_to_string(expand_unary(tree_from_string("(S (NP+PRP it) (VP+VBZ works))")))
    '(S (NP (PRP it)) (VP (VBZ works)))'
    """
    check_tree(tree)
    _check_join(join)

    def visit(node):
        if is_preterminal(node):
            children = (node[1],)
        else:
            children = tuple(visit(child) for child in node[1:])
        parts = node[0].split(join)
        expanded = (parts[-1], *children)
        for label in reversed(parts[:-1]):
            expanded = (label, expanded)
        return expanded

    return visit(tree)
