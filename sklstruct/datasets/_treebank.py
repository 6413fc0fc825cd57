"""A synthetic dependency treebank with a known grammar (prepositional-phrase attachment)."""

import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

_WORDS = {
    "DT": ["the", "a", "every", "this"],
    "JJ": ["old", "red", "small", "happy", "quiet"],
    "NN": ["dog", "man", "woman", "child", "cat", "farmer"],
    "NN-INSTRUMENT": ["telescope", "stick", "hammer", "spoon"],
    "NN-PLACE": ["park", "garden", "kitchen", "house"],
    "VB": ["sees", "hits", "feeds", "watches", "finds"],
    "IN-INSTRUMENT": ["with"],
    "IN-PLACE": ["in", "near"],
    "RB": ["today", "quickly", "again"],
}


class _Sentence:
    def __init__(self, rng):
        self.rng = rng
        self.tokens, self.heads, self.relations = [], [], []

    def add(self, kind, head, relation):
        tag = kind.split("-")[0]
        self.tokens.append({"form": str(self.rng.choice(_WORDS[kind])), "postag": tag})
        self.heads.append(head)
        self.relations.append(relation)
        return len(self.tokens)

    def noun_phrase(self, head, relation, kind="NN"):
        """``DT? JJ* NN``; the noun attaches to ``head``; returns the noun's position."""
        modifiers = (["DT"] if self.rng.rand() < 0.8 else []) + \
            ["JJ"] * int(self.rng.poisson(0.5))
        first = len(self.tokens) + 1
        noun = first + len(modifiers)
        for tag in modifiers:
            self.add(tag, noun, "det" if tag == "DT" else "amod")
        self.add(kind, head, relation)
        return noun

    def prepositional_phrase(self, head, kind):
        preposition = self.add("IN-" + kind, head, "prep")
        self.noun_phrase(preposition, "pobj", "NN-" + kind)

    def set_head(self, position, head):
        self.heads[position - 1] = head


def make_dependency_treebank(n_sentences=200, *, random_state=None):
    """Sentences of a small English-like grammar with their dependency trees.

    Every sentence is ``NP VB NP PP* RB? .`` with noun phrases ``DT? JJ* NN``; a
    prepositional phrase attaches to the verb when its noun is an instrument ("with a
    stick") and to the object noun when it is a place ("the dog in the garden"; places come
    first), so that
    the attachment is decided by the words, not by the tags (the classic ambiguity a
    first-order parser resolves with head-word features). The trees are projective and
    single-rooted, with the relations ``root, nsubj, obj, det, amod, prep, pobj, advmod,
    punct``.

    Parameters
    ----------
    n_sentences : int, default=200
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        sentences : list of list of dict
            Tokens as dicts with the keys ``form`` and ``postag``, as
            :func:`~sklstruct.parsing.read_conll` gives them.
        heads : list of ndarray of int64
            Per sentence, the head of each token (1-based, 0 for the root).
        relations : list of ndarray of object
            Per sentence, the relation of each token.

    Examples
    --------
    >>> from sklstruct.datasets import make_dependency_treebank
    >>> data = make_dependency_treebank(2, random_state=0)
    >>> [token["form"] for token in data.sentences[0]][:3]
    ['this', 'red', 'child']
    """
    if isinstance(n_sentences, (bool, np.bool_)) or \
            not isinstance(n_sentences, numbers.Integral) or n_sentences < 1:
        raise ValueError(f"n_sentences must be an int >= 1; got {n_sentences!r}.")
    rng = check_random_state(random_state)
    n_sentences = int(n_sentences)
    if n_sentences < 0:
        raise ValueError(f"n_sentences must be non-negative, got {n_sentences}.")
    sentences, heads, relations = [], [], []
    for _ in range(n_sentences):
        s = _Sentence(rng)
        subject = s.noun_phrase(0, "nsubj")
        verb = s.add("VB", 0, "root")
        s.set_head(subject, verb)
        obj = s.noun_phrase(verb, "obj")
        # places before instruments keep the trees projective
        kinds = sorted(rng.choice(["INSTRUMENT", "PLACE"], size=rng.poisson(0.8)),
                       reverse=True)
        for kind in kinds:
            s.prepositional_phrase(obj if kind == "PLACE" else verb, kind)
        if rng.rand() < 0.3:
            s.add("RB", verb, "advmod")
        s.tokens.append({"form": ".", "postag": "."})
        s.heads.append(verb)
        s.relations.append("punct")
        sentences.append(s.tokens)
        heads.append(np.asarray(s.heads, dtype=np.int64))
        relations.append(np.asarray(s.relations, dtype=object))
    return Bunch(sentences=sentences, heads=heads, relations=relations)
