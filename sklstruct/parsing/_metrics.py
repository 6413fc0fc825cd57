"""Parser evaluation: attachment scores (CoNLL eval.pl) and labelled brackets (evalb)."""

import unicodedata
from collections import Counter

import numpy as np
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.utils.metadata_routing import UNUSED

from .._input import check_sequence_weights
from ..utils._sklearn_compat import _MetadataRequester
from ..utils._warnings import warn_user
from ._dependency_targets import _as_relation_arrays, split_trees
from ._trees import check_tree, is_preterminal, strip_function_tag

__all__ = ["attachment_scorer", "attachment_scores", "bracket_f1_scorer", "bracket_scores"]

# token-dict keys holding a part-of-speech tag (CoNLL-U, then CoNLL-X)
_TAG_KEYS = ("upos", "xpos", "cpostag", "postag")
# evalb's COLLINS.prm: DELETE_LABEL TOP, -NONE-, the punctuation tags; EQ_LABEL ADVP PRT
_EVALB_PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})
_EVALB_DELETED_LABELS = frozenset({"TOP", "", "-NONE-"}) | _EVALB_PUNCTUATION_TAGS
_EVALB_EQUIVALENT = {"PRT": "ADVP"}


# ----------------------------------------------------------------------- attachment scores
def _is_punctuation_form(form):
    return bool(form) and all(unicodedata.category(c).startswith("P") for c in form)


def _punctuation_predicate(punctuation):
    """A function token -> bool for the ``punctuation`` argument of attachment_scores."""
    if punctuation is None:

        def predicate(token):
            form = token if isinstance(token, str) else token.get("form")
            if not isinstance(form, str):
                raise ValueError(
                    "The default punctuation rule reads each token's form: give the "
                    "tokens as dicts with a 'form' key (or as str)."
                )
            return _is_punctuation_form(form)

        return predicate
    if callable(punctuation):
        return punctuation
    if isinstance(punctuation, str) or not all(isinstance(t, str) for t in punctuation):
        raise ValueError(
            "punctuation must be None, a callable token -> bool, or a collection of "
            f"tags such as {{'PUNCT'}}; got {punctuation!r}."
        )
    tags = frozenset(punctuation)

    def predicate(token):
        found = [token[key] for key in _TAG_KEYS if isinstance(token, dict) and key in token]
        if not found:
            raise ValueError(
                f"A set of punctuation tags needs tokens with a tag among {_TAG_KEYS}; "
                f"got {token!r}."
            )
        return any(tag in tags for tag in found)

    return predicate


def attachment_scores(
    heads_true, heads_pred, relations_true=None, relations_pred=None, *, sentences=None,
    exclude_punctuation=False, punctuation=None, sample_weight=None,
):
    """Unlabelled and labelled attachment scores (UAS, LAS) of dependency trees.

    UAS is the fraction of scored tokens whose predicted head is the true
    head; LAS the fraction whose head and relation are both right. Every
    token is scored, as in the CoNLL-2007 shared task, unless
    ``exclude_punctuation`` is set: then punctuation tokens are left out,
    as the CoNLL-X scorer ``eval.pl`` does by default.

    Parameters
    ----------
    heads_true : list of array-like of int, or of (heads, relations) pairs
        Per sentence, the true head of each token (1-based, 0 for the root), or the pair of
        heads and relations that :class:`DependencyParser` takes as ``y`` (then LAS uses
        its relations).
    heads_pred : list of array-like of int, or of (heads, relations) pairs
        Per sentence, the predicted heads, of the same lengths (pairs when ``heads_true``
        holds pairs, as ``DependencyParser.predict`` gives them with relations).
    relations_true : list of array-like of str, default=None
        Per sentence, the true relations. LAS needs both relation lists.
    relations_pred : list of array-like of str, default=None
        Per sentence, the predicted relations.
    sentences : list of list of dict or str, default=None
        The true tokens (as returned by :func:`read_conll`), needed to find
        punctuation; a token given as a str is its form.
    exclude_punctuation : bool, default=False
        Leave punctuation tokens out of the scores.
    punctuation : None, callable or collection of str, default=None
        How a punctuation token is recognised when ``exclude_punctuation``
        is set:

        - None: by its form, punctuation when every character has a Unicode
          general category starting with ``P`` (``Pc, Pd, Ps, Pe, Pi, Pf,
          Po``), the rule of ``eval.pl`` (``/^\\p{Punctuation}+$/``). So
          ``,``, ``.``, ``"``, ``--`` and ``...`` are punctuation; ``$``
          (``Sc``), the Penn Treebank opening quotes made of two backticks
          (``Sk``) and ``-LRB-`` are not.
        - a callable: ``punctuation(token) -> bool`` for each token of
          ``sentences``.
        - a collection of tags: a token is punctuation when one of its tags
          (``upos``, ``xpos``, ``cpostag`` or ``postag``, whichever it has) is
          in it, for example ``{"PUNCT"}`` for Universal Dependencies.
    sample_weight : array-like of shape (n_sentences,), default=None
        One weight per sentence: each of its scored tokens counts with it (an integer
        weight equals repeating the sentence).

    Returns
    -------
    scores : dict
        ``"uas"`` (float), ``"las"`` (float, or None without relations) and
        ``"n_tokens"``, the number of tokens scored (not weighted). With no token to score
        both scores are 0.0 and an ``UndefinedMetricWarning`` is raised.

    Raises
    ------
    ValueError
        When the lists are empty or differ in length, a sentence's heads,
        relations or tokens differ in number, a head lies outside 0..n,
        only one relation list is given, or ``punctuation`` is given
        without ``exclude_punctuation``.

    See Also
    --------
    attachment_scorer : UAS as a scorer for model selection.

    Examples
    --------
    >>> from sklstruct.parsing import attachment_scores
    >>> heads_true = [[2, 0, 2]]
    >>> heads_pred = [[2, 0, 1]]
    >>> attachment_scores(heads_true, heads_pred, [["nsubj", "root", "punct"]],
    ...                   [["obj", "root", "punct"]])
    {'uas': 0.666..., 'las': 0.333..., 'n_tokens': 3}
    >>> tokens = [["Dogs", "bark", "."]]
    >>> attachment_scores(heads_true, heads_pred, sentences=tokens,
    ...                   exclude_punctuation=True)
    {'uas': 1.0, 'las': None, 'n_tokens': 2}
    """
    for name, heads in (("heads_true", heads_true), ("heads_pred", heads_pred)):
        if not isinstance(heads, (list, tuple, np.ndarray)):
            raise TypeError(f"{name} must be a list of per-sentence head arrays (or of "
                            f"(heads, relations) pairs); got {type(heads).__name__}.")
    true, paired_true = split_trees(heads_true, "heads_true")
    pred, paired_pred = split_trees(heads_pred, "heads_pred")
    if paired_true is not None or paired_pred is not None:
        if relations_true is not None or relations_pred is not None:
            raise ValueError("The relations are given twice: in the (heads, relations) pairs "
                             "and as relations_true / relations_pred.")
        if (paired_true is None) != (paired_pred is None):
            raise ValueError("heads_true and heads_pred must both be head arrays or both "
                             "(heads, relations) pairs.")
        relations_true, relations_pred = paired_true, paired_pred
    if len(true) == 0:
        raise ValueError("attachment_scores needs at least one sentence.")
    if len(true) != len(pred):
        raise ValueError(
            f"heads_true has {len(true)} sentences and heads_pred {len(pred)}."
        )
    lengths = [a.shape[0] for a in true]
    weights = None if sample_weight is None else check_sequence_weights(sample_weight,
                                                                        len(true))
    for i, (t, p) in enumerate(zip(true, pred)):
        if t.shape != p.shape:
            raise ValueError(
                f"Sentence {i} has {t.shape[0]} true heads and {p.shape[0]} predicted."
            )
    if (relations_true is None) != (relations_pred is None):
        raise ValueError("Give both relations_true and relations_pred, or neither.")
    labelled = relations_true is not None
    if labelled:
        rel_true = _as_relation_arrays(relations_true, lengths, "relations_true")
        rel_pred = _as_relation_arrays(relations_pred, lengths, "relations_pred")
    if punctuation is not None and not exclude_punctuation:
        raise ValueError("punctuation is given but exclude_punctuation is False.")
    if exclude_punctuation:
        if sentences is None:
            raise ValueError(
                "exclude_punctuation needs the true tokens: pass sentences=..."
            )
        if len(sentences) != len(true):
            raise ValueError(
                f"sentences has {len(sentences)} sentences; the heads have {len(true)}."
            )
        predicate = _punctuation_predicate(punctuation)
        masks = []
        for i, (tokens, n) in enumerate(zip(sentences, lengths)):
            if len(tokens) != n:
                raise ValueError(f"sentences[{i}] has {len(tokens)} tokens for {n} heads.")
            masks.append(np.array([not predicate(token) for token in tokens], dtype=bool))
    else:
        masks = [np.ones(n, dtype=bool) for n in lengths]

    n_tokens = n_heads = n_both = 0
    total = 0.0  # (the scored tokens' weights)
    for i, (t, p, scored) in enumerate(zip(true, pred, masks)):
        right_head = (t == p) & scored
        weight = 1 if weights is None else float(weights[i])
        n_tokens += int(scored.sum())
        total += weight * int(scored.sum())
        n_heads += weight * int(right_head.sum())
        if labelled:
            n_both += weight * int((right_head & (rel_true[i] == rel_pred[i])).sum())
    if total == 0:
        warn_user("No token to score; the attachment scores are set to 0.0.",
                  UndefinedMetricWarning)
        return {"uas": 0.0, "las": 0.0 if labelled else None, "n_tokens": n_tokens}
    return {
        "uas": n_heads / total,
        "las": n_both / total if labelled else None,
        "n_tokens": n_tokens,
    }


# ------------------------------------------------------------------------- bracket scores
def _evalb_items(tree):
    """Words, tags and brackets ``(label, start, end)`` of a tree, ``-NONE-`` leaves removed."""
    words, tags, brackets = [], [], []

    def visit(node, start):
        if is_preterminal(node):
            if node[0] == "-NONE-":
                return start
            tags.append(node[0])
            words.append(node[1])
            return start + 1
        end = start
        for child in node[1:]:
            end = visit(child, end)
        brackets.append((node[0], start, end))
        return end

    visit(tree, 0)
    return words, tags, brackets


def _evalb_brackets(brackets, kept_before):
    counted = Counter()
    for label, start, end in brackets:
        start, end = kept_before[start], kept_before[end]
        if start == end:  # dominates deleted words only
            continue
        label = strip_function_tag(label)
        if label in _EVALB_DELETED_LABELS:
            continue
        counted[(_EVALB_EQUIVALENT.get(label, label), start, end)] += 1
    return counted


def _checked_items(tree, name):
    """:func:`_evalb_items` of a checked tree; an empty sentence's tree ``()`` has none."""
    if isinstance(tree, tuple) and tree == ():
        return [], [], []
    check_tree(tree, name)
    return _evalb_items(tree)


def bracket_scores(trees_true, trees_pred, *, sample_weight=None):
    """Labelled bracket precision, recall and F1 with evalb's ``COLLINS.prm`` conventions.

    The figures are those of ``evalb -p COLLINS.prm`` (Sekine and Collins,
    1997), the standard Penn Treebank parsing score:

    - ``-NONE-`` elements are removed, and so are the constituents that
      dominate nothing else;
    - words tagged ``,`` ``:`` `````` ``''`` or ``.`` are removed before the
      spans are computed, and constituents left without words are not
      counted;
    - labels lose their function tags and co-indices (``NP-SBJ-1 -> NP``);
      brackets labelled ``TOP`` are not counted, ``ADVP`` and ``PRT`` count
      as the same label;
    - every other phrasal node counts, the root included; preterminals do
      not (part-of-speech tags are not scored);
    - in each sentence, brackets match as multisets: a (label, span) that
      occurs ``n`` times in the true tree and ``m`` times in the predicted
      one gives ``min(n, m)`` matches.

    Precision and recall are then summed over the sentences (micro
    average), and ``exact_match`` is the fraction of sentences whose true
    and predicted brackets agree entirely, among the sentences with a word
    left after the deletions (evalb skips the others: empty sentences and
    sentences of punctuation only).

    Two conventions differ from the evalb program, for trees it would
    reject or that it reads differently: the punctuation removed is found
    from the true tree's tags and removed from both trees (evalb uses each
    tree's own tags, and reports a length mismatch and skips the sentence
    when they disagree); and an unlabelled bracket (label ``""``) is
    treated as ``TOP``, as the outer bracket of treebank files is.

    Parameters
    ----------
    trees_true : list of tuple
        The true trees, as nested tuples ``(label, child, ...)``; ``()`` for an empty
        sentence (no brackets, and left out of ``exact_match``).
    trees_pred : list of tuple
        The predicted trees over the same words.
    sample_weight : array-like of shape (n_sentences,), default=None
        One weight per sentence: its brackets (and its exact match) count with it (an
        integer weight equals repeating the sentence).

    Returns
    -------
    scores : dict
        ``"precision"``, ``"recall"``, ``"f1"`` and ``"exact_match"``
        (floats between 0 and 1; a ratio without a denominator is 0.0, as
        in evalb) and ``"n_sentences"`` (not weighted).

    Raises
    ------
    ValueError
        When the lists are empty or differ in length, or a true and a
        predicted tree differ in their words (``-NONE-`` elements aside).

    See Also
    --------
    labelled_spans : The spans of a tree, without evalb's deletions.
    bracket_f1_scorer : F1 as a scorer for model selection.

    Examples
    --------
    >>> from sklstruct.parsing import bracket_scores, tree_from_string
    >>> true = tree_from_string("(S (NP (DT The) (NN dog)) (VP (VBD barked)) (. .))")
    >>> pred = tree_from_string("(S (NP (DT The)) (VP (NN dog) (VBD barked)) (. .))")
    >>> scores = bracket_scores([true], [pred])
    >>> scores["precision"], scores["recall"], scores["exact_match"]
    (0.333..., 0.333..., 0.0)
    """
    for name, trees in (("trees_true", trees_true), ("trees_pred", trees_pred)):
        if not isinstance(trees, (list, tuple)) or (trees and isinstance(trees[0], str)):
            raise TypeError(
                f"{name} must be a list of trees (nested tuples; parse bracketed strings "
                f"with tree_from_string); got {type(trees).__name__}."
            )
    if len(trees_true) == 0:
        raise ValueError("bracket_scores needs at least one sentence.")
    if len(trees_true) != len(trees_pred):
        raise ValueError(
            f"trees_true has {len(trees_true)} trees and trees_pred {len(trees_pred)}."
        )
    weights = None if sample_weight is None else check_sequence_weights(sample_weight,
                                                                        len(trees_true))
    n_true = n_pred = n_match = n_exact = n_scored = 0
    for i, (tree_true, tree_pred) in enumerate(zip(trees_true, trees_pred)):
        words_true, tags_true, brackets_true = _checked_items(tree_true, f"trees_true[{i}]")
        words_pred, _, brackets_pred = _checked_items(tree_pred, f"trees_pred[{i}]")
        if words_true != words_pred:
            raise ValueError(
                f"Sentence {i}: the true and predicted trees have different words "
                f"({len(words_true)} and {len(words_pred)} words)."
            )
        kept = [tag not in _EVALB_PUNCTUATION_TAGS for tag in tags_true]
        kept_before = np.concatenate([[0], np.cumsum(kept, dtype=np.int64)]).tolist()
        counted_true = _evalb_brackets(brackets_true, kept_before)
        counted_pred = _evalb_brackets(brackets_pred, kept_before)
        sentence_true = sum(counted_true.values())
        sentence_pred = sum(counted_pred.values())
        sentence_match = sum((counted_true & counted_pred).values())
        weight = 1 if weights is None else float(weights[i])
        n_true += weight * sentence_true
        n_pred += weight * sentence_pred
        n_match += weight * sentence_match
        if kept_before[-1]:  # (evalb skips a sentence without words: no exact match)
            n_scored += weight
            n_exact += weight * (sentence_true == sentence_pred == sentence_match)
    precision = n_match / n_pred if n_pred else 0.0
    recall = n_match / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "exact_match": n_exact / n_scored if n_scored else 0.0,
        "n_sentences": len(trees_true),
    }


# -------------------------------------------------------------------------------- scorers
class _ParseScorer(_MetadataRequester):
    """``scorer(estimator, X, y, sample_weight=None)``: a figure of ``estimator.predict(X)``
    against ``y``, with one weight per sentence when given. A search fitted with
    ``sample_weight`` passes it on; under metadata routing the weights are not requested,
    so routed searches score unweighted unless asked:
    ``copy.deepcopy(attachment_scorer).set_score_request(sample_weight=True)``."""

    __metadata_request__score = {"estimator": UNUSED, "sample_weight": False}

    def __init__(self, name, metric, doc=None):
        self._name = name
        self._metric = metric
        if doc is not None:  # (what the API pages and the doctests read of this scorer)
            self.__doc__ = doc

    def __repr__(self):
        return self._name

    def __call__(self, estimator, X, y, sample_weight=None):
        return self.score(estimator, X, y, sample_weight=sample_weight)

    def _accept_sample_weight(self):
        """Every parse figure takes ``sample_weight`` (scikit-learn's searches, scoring with
        a dict of scorers, ask)."""
        return True

    def score(self, estimator, X, y, sample_weight=None):
        """The figure of ``estimator.predict(X)`` against ``y``.

        Parameters
        ----------
        estimator : fitted parser
        X : list of sentences
        y : list of trees
        sample_weight : array-like of shape (n_sentences,), default=None

        Returns
        -------
        score : float
        """
        return self._metric(y, estimator.predict(X), sample_weight)


def _uas(y_true, y_pred, sample_weight=None):
    return attachment_scores(split_trees(y_true)[0], split_trees(y_pred)[0],
                             sample_weight=sample_weight)["uas"]


def _bracket_f1(y_true, y_pred, sample_weight=None):
    from ._grammar import as_tree  # (the parsers' reading of a tree: tuples or a string)

    def trees(items, name):
        return [as_tree(tree, f"{name}[{i}]", allow_empty=True) for i, tree in enumerate(items)]

    return bracket_scores(trees(y_true, "y"), trees(y_pred, "predictions"),
                          sample_weight=sample_weight)["f1"]


attachment_scorer = _ParseScorer("attachment_scorer", _uas, doc="""\
Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: unlabelled attachment.

Called as ``attachment_scorer(estimator, X, y, sample_weight=None)``, it returns the UAS
of ``estimator.predict(X)`` against ``y`` over all tokens (see
:func:`attachment_scores`; ``sample_weight``, one weight per sentence, weighs its tokens).
``y`` and the predictions are lists with one item per sentence: all arrays of heads, or
all pairs ``(heads, relations)`` (tuples or lists of two 1-D sequences), whose relations
are ignored.

Examples
--------
>>> from sklstruct.parsing import attachment_scorer
>>> class Chain:  # attaches each token to the next one, the last to the root
...     def predict(self, X):
...         return [list(range(2, len(tokens) + 1)) + [0] for tokens in X]
>>> X = [["Dogs", "bark"], ["Cats", "sleep", "a", "lot"]]
>>> y = [([2, 0], ["nsubj", "root"]), ([2, 0, 4, 2], ["nsubj", "root", "det", "obl"])]
>>> attachment_scorer(Chain(), X, y)
0.666...
""")

bracket_f1_scorer = _ParseScorer("bracket_f1_scorer", _bracket_f1, doc="""\
Scorer for ``GridSearchCV(scoring=...)`` and ``cross_validate``: labelled bracket F1.

Called as ``bracket_f1_scorer(estimator, X, y, sample_weight=None)``, it returns the
evalb F1 of ``estimator.predict(X)`` against ``y`` (see :func:`bracket_scores`; one weight
per sentence weighs its brackets); ``y``
and the predictions are lists of trees, each as nested tuples or as a
bracketed string (as the parsers take and, with ``output="string"``, give
them; ``()`` or ``""`` for an empty sentence).

Examples
--------
>>> from sklstruct.parsing import bracket_f1_scorer, tree_from_string
>>> class Flat:  # one S over the preterminals
...     def predict(self, X):
...         return [("S", *[("NN", word) for word in words]) for words in X]
>>> y = [tree_from_string("(S (NP (NN Dogs)) (VP (NN bark)))")]
>>> bracket_f1_scorer(Flat(), [["Dogs", "bark"]], y)
0.5
""")
