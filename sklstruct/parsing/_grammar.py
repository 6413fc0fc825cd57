"""The grammar of a treebank, and trees <-> span states over it (private).

Trees are binarised (:func:`binarize`, with markovisation) and their unary chains collapsed
(:func:`collapse_unary`); every node of such a tree is a span labelled by a *label*, the
joined chain (``S+VP``, ``NP+PRP``, ``@NP|<DT>``), whose first element is its *top symbol*
and last its *bottom symbol*. The grammar is what the training trees use: the labels on words
(lexical: chains ending in a part-of-speech tag) and on longer spans (phrasal), the root
symbols and the binary rules ``(bottom of the parent, top of the left child, top of the
right child)``. A tree of ``n`` words is then one state per span row of the CKY layout: 0
off the tree, ``a + 1`` for a node labelled ``a``.
"""

from collections import Counter

import numpy as np

from .._inference.cfg import Grammar, span_index, span_position
from ._metrics import _EVALB_DELETED_LABELS, _EVALB_EQUIVALENT
from ._transforms import (
    _INTERMEDIATE,
    _PARENT,
    binarize,
    collapse_unary,
    expand_unary,
    unbinarize,
)
from ._trees import check_tree, is_preterminal, tree_words

# separators of the labels of collapsed unary chains: a grammar takes the first that none of
# its treebank's labels holds ("+" unless a label does, as the French treebank's "P+D")
_JOINS = ("+", "\x1f", "\x1e", "\x1d", "\x1c")
# token-dict keys of a word and of a part-of-speech tag, in order of preference
_WORD_KEYS = ("form", "word")
_TAG_KEYS = ("tag", "pos", "xpos", "postag", "upos", "cpostag")


def sentence_tokens(sentence, name="X"):
    """``(words, tags)`` of a sentence: tokens are words (str), ``(word, tag)`` pairs or
    dicts (``form`` or ``word``; ``tag``, ``pos``, ``xpos``, ``postag``, ``upos`` or
    ``cpostag``). ``tags`` is None for words without tags; a sentence mixing both is
    refused."""
    if isinstance(sentence, str) or not hasattr(sentence, "__len__"):
        raise TypeError(f"{name}: a sentence must be a list of tokens (words, (word, tag) "
                        f"pairs or token dicts); got {type(sentence).__name__}.")
    words, tags = [], []
    for token in sentence:
        if isinstance(token, str):
            words.append(token)
            tags.append(None)
        elif isinstance(token, dict):
            word = next((token[k] for k in _WORD_KEYS if k in token), None)
            tag = next((token[k] for k in _TAG_KEYS if k in token), None)
            if not isinstance(word, str) or not (tag is None or isinstance(tag, str)):
                raise TypeError(f"{name}: a token dict needs a str 'form' (or 'word') and "
                                f"optionally a str tag; got {token!r}.")
            words.append(word)
            tags.append(tag)
        elif isinstance(token, (tuple, list)) and len(token) == 2 \
                and all(isinstance(part, str) for part in token):
            words.append(token[0])
            tags.append(token[1])
        else:
            raise TypeError(f"{name}: a token must be a word (str), a (word, tag) pair of "
                            f"str or a token dict; got {token!r}.")
    if any(tag is None for tag in tags):
        if not all(tag is None for tag in tags):
            raise ValueError(f"{name}: a sentence mixes tokens with and without tags.")
        return words, None
    return words, tags


def as_tree(tree, name, allow_empty=False):
    """A tree given as nested tuples or as a bracketed string, checked; with ``allow_empty``
    the tree of an empty sentence, ``()`` or ``""`` (what ``predict`` returns for one), is
    ``()``."""
    if allow_empty and (tree == () if isinstance(tree, tuple) else
                        isinstance(tree, str) and not tree.strip()):
        return ()
    if isinstance(tree, str):
        from ._trees import tree_from_string
        tree = tree_from_string(tree)
    check_tree(tree, name)
    return tree


def evalb_brackets(label, lexical, join="+"):
    """The evalb brackets a (transformed) label stands for: the treebank labels of its
    chain (joined by ``join``), without intermediate nodes, annotations, labels evalb
    deletes, or the part-of-speech tag that ends a lexical chain (``ADVP`` and ``PRT``
    count as one)."""
    chain = label.split(join)
    if lexical:
        chain = chain[:-1]
    found = []
    for part in chain:
        if part.startswith(_INTERMEDIATE):
            continue
        part = part.split(_PARENT, 1)[0]
        if part in _EVALB_DELETED_LABELS:
            continue
        found.append(_EVALB_EQUIVALENT.get(part, part))
    return found


class TreeGrammar:
    """The grammar of transformed training trees, and trees <-> span states.

    Parameters
    ----------
    trees : list of tuple
        Training trees (n-ary, as read).
    horizontal, vertical : markovisation orders of :func:`binarize`.
    weights : sequence of float, default=None
        A count for each tree's labels, roots and rules (1 each by default).

    Attributes
    ----------
    labels : list of str
        The labels, sorted: label ``a`` is state ``a + 1``.
    symbols : list of str
    grammar : sklstruct._inference.cfg.Grammar
    label_brackets : ndarray of shape (n_labels, n_kinds)
        evalb brackets per label (:func:`evalb_brackets`), one column per bracket label.
    label_counts, root_counts, rule_counts : Counter
        Occurrences in the training trees (labels; root labels; rule indices), each tree
        counted with its weight.
    root_label : str
        The most frequent label of the untransformed roots (for flat fallback trees).
    join : str
        The separator of the labels of collapsed unary chains: ``"+"``, or a control
        character when a treebank label holds ``"+"``.
    """

    join = "+"  # (grammars pickled before the separator was chosen per treebank)

    def __init__(self, trees, horizontal, vertical, weights=None):
        self.horizontal, self.vertical = horizontal, vertical
        self.join = _unused_join(trees)
        transformed = [self.transform(tree) for tree in trees]
        weights = [1] * len(trees) if weights is None else [float(w) for w in weights]
        lexical, phrasal = Counter(), Counter()
        roots, untransformed_roots = Counter(), Counter()
        for tree, original, weight in zip(transformed, trees, weights):
            roots[tree[0]] += weight
            untransformed_roots[original[0]] += weight
            for node, _, _ in _nodes(tree):
                (lexical if is_preterminal(node) else phrasal)[node[0]] += weight
        self.labels = sorted(set(lexical) | set(phrasal))
        self.index = {label: a for a, label in enumerate(self.labels)}
        chains = [label.split(self.join) for label in self.labels]
        self.symbols = sorted({chain[0] for chain in chains} | {chain[-1] for chain in chains})
        symbol_index = {symbol: x for x, symbol in enumerate(self.symbols)}
        self.top = np.array([symbol_index[chain[0]] for chain in chains], dtype=np.int64)
        self.bottom = np.array([symbol_index[chain[-1]] for chain in chains], dtype=np.int64)
        self.lexical = np.array([label in lexical for label in self.labels])
        self.phrasal = np.array([label in phrasal for label in self.labels])
        root = np.zeros(len(self.symbols), dtype=bool)
        root[[self.top[self.index[label]] for label in roots]] = True
        rule_counts = Counter()
        for tree, weight in zip(transformed, weights):
            for node, _, _ in _nodes(tree):
                if not is_preterminal(node):
                    rule_counts[self._rule_key(node)] += weight
        self.rules = sorted(rule_counts)
        self.rule_index = {rule: r for r, rule in enumerate(self.rules)}
        self.grammar = Grammar(self.top, self.bottom, self.lexical, self.phrasal, root,
                               np.array(self.rules, dtype=np.int64).reshape(-1, 3))
        self.label_counts = lexical + phrasal
        self.root_counts = roots
        self.rule_counts = Counter({self.rule_index[rule]: count
                                    for rule, count in rule_counts.items()})
        self.root_label = untransformed_roots.most_common(1)[0][0]
        kinds = sorted({kind for a, label in enumerate(self.labels)
                        for kind in evalb_brackets(label, self.lexical[a], self.join)})
        kind_index = {kind: k for k, kind in enumerate(kinds)}
        self.label_brackets = np.zeros((len(self.labels), len(kinds)))
        for a, label in enumerate(self.labels):
            for kind in evalb_brackets(label, self.lexical[a], self.join):
                self.label_brackets[a, kind_index[kind]] += 1

    @property
    def n_labels(self):
        return len(self.labels)

    def transform(self, tree):
        """Binarise with markovisation, then collapse the unary chains."""
        return collapse_unary(binarize(tree, self.horizontal, self.vertical), self.join)

    def bottom_label(self, label):
        """The last label of a collapsed chain (a lexical chain's part-of-speech tag)."""
        return label.split(self.join)[-1]

    def _rule_key(self, node):
        """The symbols ``(bottom of the parent, top of the children)`` of a binary node."""
        index = self.index
        return (int(self.bottom[index[node[0]]]), int(self.top[index[node[1][0]]]),
                int(self.top[index[node[2][0]]]))

    def states(self, tree, name):
        """Span states of a (n-ary) tree: one per span row, 0 off the tree.

        Raises ValueError naming the label or the rule of the tree that the grammar lacks.
        """
        transformed = self.transform(tree)
        n = len(tree_words(tree))
        states = np.zeros(n * (n + 1) // 2, dtype=np.int64)
        for node, start, end in _nodes(transformed):
            label = node[0]
            a = self.index.get(label)
            kind = "lexical" if is_preterminal(node) else "phrasal"
            if a is None or not (self.lexical if kind == "lexical" else self.phrasal)[a]:
                # (the tree's own label: without the intermediate mark, the markovised
                # siblings and the parent annotation of binarisation)
                given = label.lstrip("@").split("|")[0].split("^")[0]
                shown = repr(given) if given == label else \
                    f"{given!r} ({label!r} after binarisation)"
                raise ValueError(f"{name} holds the {kind} label {shown} over words "
                                 f"{start}..{end - 1}, which the grammar read at fit lacks.")
            if not is_preterminal(node) and self._rule_key(node) not in self.rule_index:
                raise ValueError(
                    f"{name} holds the rule {label} -> {node[1][0]} {node[2][0]} (after "
                    f"binarisation) over words {start}..{end - 1}, which the grammar read at "
                    "fit lacks.")
            states[span_position(start, end, n)] = a + 1
        root = self.index[transformed[0]]
        if not self.grammar.root[self.top[root]]:
            raise ValueError(f"{name} has the root label {transformed[0]!r}, which no "
                             "training tree has at its root.")
        return states

    def tree(self, states, words):
        """The n-ary tree of a sentence's span states (a tree of the grammar)."""
        n = len(words)
        start, end = span_index(n)
        label_of = {(int(start[s]), int(end[s])): self.labels[states[s] - 1]
                    for s in np.flatnonzero(states)}

        def build(i, j):
            label = label_of[i, j]
            if j == i + 1:
                return (label, words[i])
            k = j - 1
            while (i, k) not in label_of:
                k -= 1
            return (label, build(i, k), build(k, j))

        return unbinarize(expand_unary(build(0, n), self.join))


def _unused_join(trees):
    """The first separator of ``_JOINS`` that no label of ``trees`` holds."""
    labels = {node[0] for tree in trees for node, _, _ in _nodes(tree)}
    for join in _JOINS:
        if not any(join in label for label in labels):
            return join
    raise ValueError(f"The treebank's labels hold every separator the grammar can join "
                     f"unary chains with ({_JOINS!r}); relabel them.")


def _nodes(tree):
    """``(node, start, end)`` of every node of ``tree``, children before their parent."""
    found = []

    def visit(node, start):
        if is_preterminal(node):
            found.append((node, start, start + 1))
            return start + 1
        end = start
        for child in node[1:]:
            end = visit(child, end)
        found.append((node, start, end))
        return end

    visit(tree, 0)
    return found
