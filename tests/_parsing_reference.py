"""Test-only references for the parsing metrics and random trees for the parsing tests."""

import unicodedata

# evalb's COLLINS.prm
_DELETE_LABELS = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
_EQ_LABELS = (("ADVP", "PRT"),)


def _label_comp(a, b):
    return a == b or (a, b) in _EQ_LABELS or (b, a) in _EQ_LABELS


def _read_line(text):
    """Terminals and brackets of one bracketed tree, as evalb's read_line builds them.

    A bracket whose first element after the label is a word is a terminal; a terminal with a
    delete label is dropped and does not advance the word position. Every other bracket is
    recorded with its start and end word positions and its raw label.
    """
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    words, brackets, stack = [], [], []
    i = 0
    while i < len(tokens):
        if tokens[i] == ")":
            brackets[stack.pop()][2] = len(words)
            i += 1
            continue
        i += 1  # past "(": words occur only inside terminals, consumed below
        label = ""
        if tokens[i] not in ("(", ")"):
            label = tokens[i]
            i += 1
        if tokens[i] not in ("(", ")") and tokens[i + 1] == ")":  # (tag word)
            if label not in _DELETE_LABELS:
                words.append((tokens[i], label))
            i += 2
            continue
        brackets.append([label, len(words), None])
        stack.append(len(brackets) - 1)
    return words, brackets


def _massage(brackets):
    """evalb's massage_data: zero-width and deleted brackets are dropped, labels cut at - or =."""
    kept = []
    for label, start, end in brackets:
        if start == end:
            continue
        for k, c in enumerate(label):
            if c in "-=":
                label = label[:k]
                break
        if label in _DELETE_LABELS:
            continue
        kept.append([label, start, end, False])
    return kept


def evalb_counts(gold, test):
    """(matched, gold, test) bracket counts of evalb -p COLLINS.prm for one sentence.

    ``gold`` and ``test`` are one-line bracketed trees over the same words and with the same
    punctuation tags. The matching is evalb's greedy loop: each gold bracket takes the first
    unmatched test bracket with its span and an equivalent label.
    """
    gold_words, gold_brackets = _read_line(gold)
    test_words, test_brackets = _read_line(test)
    assert [w for w, _ in gold_words] == [w for w, _ in test_words]
    gold_brackets = _massage(gold_brackets)
    test_brackets = _massage(test_brackets)
    match = 0
    for label, start, end, _ in gold_brackets:
        for candidate in test_brackets:
            if (not candidate[3] and candidate[1] == start and candidate[2] == end
                    and _label_comp(label, candidate[0])):
                candidate[3] = True
                match += 1
                break
    return match, len(gold_brackets), len(test_brackets)


def evalb_skips(gold):
    """Whether evalb skips the sentence (no word left after its deletions): it then counts
    in no figure, its complete match included."""
    return not _read_line(gold)[0]


def is_punctuation_form(form):
    """eval.pl's rule, character by character: /^\\p{Punctuation}+$/."""
    return len(form) > 0 and all(unicodedata.category(c)[0] == "P" for c in form)


def random_tree(rng, words, labels, tags, max_children=4):
    """A random tree over ``words``: random splits, labels and tags, some unary nodes."""

    def build(lo, hi, depth):
        if hi - lo == 1 and (depth > 0 and rng.random() < 0.6):
            return (tags[rng.integers(len(tags))], words[lo])
        if hi - lo == 1:
            return (labels[rng.integers(len(labels))], build(lo, hi, depth + 1))
        n_children = int(rng.integers(2, min(max_children, hi - lo) + 1))
        cuts = sorted(rng.choice(range(lo + 1, hi), n_children - 1, replace=False).tolist())
        bounds = [lo, *cuts, hi]
        children = [build(a, b, depth + 1) for a, b in zip(bounds, bounds[1:])]
        node = (labels[rng.integers(len(labels))], *children)
        if rng.random() < 0.15:
            node = (labels[rng.integers(len(labels))], node)
        return node

    return build(0, len(words), 0)


# a toy English grammar: unary chains (NP -> NNP), long rules (NP -> DT JJ JJ NN), recursion
_TOY_RULES = {
    "S": [(("NP", "VP"), 6), (("NP", "VP", "."), 3), (("PP", ",", "NP", "VP", "."), 1)],
    "NP": [(("DT", "NN"), 5), (("DT", "JJ", "NN"), 2), (("DT", "JJ", "JJ", "NN"), 1),
           (("NNP",), 2), (("PRP",), 2), (("NP", "PP"), 1)],
    "VP": [(("VBZ",), 2), (("VBZ", "NP"), 4), (("VBZ", "NP", "PP"), 2), (("VBZ", "ADVP"), 1),
           (("VBD", "SBAR"), 1)],
    "SBAR": [(("IN", "S"), 1)],
    "PP": [(("IN", "NP"), 1)],
    "ADVP": [(("RB",), 1)],
}
_TOY_WORDS = {
    "DT": ["the", "a", "every"], "NN": ["dog", "cat", "park", "idea", "house"],
    "JJ": ["big", "red", "quiet"], "NNP": ["Rex", "Paris", "Ada"], "PRP": ["it", "she"],
    "VBZ": ["sees", "likes", "sleeps"], "VBD": ["said", "thought"], "IN": ["in", "near", "that"],
    "RB": ["here", "often"], ".": ["."], ",": [","],
}


def toy_treebank(n_sentences, seed=0, max_words=12):
    """Trees sampled from a toy English grammar, with their tagged sentences.

    Returns ``(X, y)``: sentences as lists of ``(word, tag)`` and trees as nested tuples.
    """
    import numpy as np

    rng = np.random.default_rng(seed)

    def sample(symbol, depth):
        if symbol in _TOY_WORDS:
            words = _TOY_WORDS[symbol]
            return (symbol, words[rng.integers(len(words))])
        options = _TOY_RULES[symbol]
        if depth > 3:  # no recursion below this depth
            options = [o for o in options if "S" not in o[0] and "PP" not in o[0]
                       and "SBAR" not in o[0]] or options[:1]
        weights = np.array([w for _, w in options], dtype=float)
        children, _ = options[rng.choice(len(options), p=weights / weights.sum())]
        return (symbol, *[sample(child, depth + 1) for child in children])

    X, y = [], []
    while len(y) < n_sentences:
        tree = sample("S", 0)
        leaves = []
        stack = [tree]
        while stack:
            node = stack.pop()
            if len(node) == 2 and isinstance(node[1], str):
                leaves.append((node[1], node[0]))
            else:
                stack.extend(reversed(node[1:]))
        if len(leaves) <= max_words:
            X.append(leaves)
            y.append(tree)
    return X, y
