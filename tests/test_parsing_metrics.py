"""Attachment scores, evalb bracket scores and the parsing scorers of sklstruct.parsing."""

import gzip
import io
import os
import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.model_selection import GridSearchCV, cross_val_score

from sklstruct.parsing import (
    attachment_scorer,
    attachment_scores,
    bracket_f1_scorer,
    bracket_scores,
    read_conll,
    read_ptb_trees,
    tree_from_string,
    tree_to_string,
)

from ._parsing_reference import evalb_counts, evalb_skips, random_tree


# ------------------------------------------------------------------------ attachment
def _reference_attachment(heads_true, heads_pred, rel_true, rel_pred, scored):
    n = uas = las = 0
    for ht, hp, rt, rp, keep in zip(heads_true, heads_pred, rel_true, rel_pred, scored):
        for i in range(len(ht)):
            if keep[i]:
                n += 1
                uas += ht[i] == hp[i]
                las += ht[i] == hp[i] and rt[i] == rp[i]
    return uas / n, las / n, n


def _random_heads(rng, n):
    return rng.integers(0, n + 1, size=n)


def test_attachment_scores_against_reference():
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 12, size=60)
    heads_true = [_random_heads(rng, n) for n in lengths]
    # predictions that agree with the truth about half of the time
    heads_pred = [np.where(rng.random(n) < 0.5, h, _random_heads(rng, n))
                  for h, n in zip(heads_true, lengths)]
    rel_true = [rng.choice(["a", "b", "c"], size=n).tolist() for n in lengths]
    rel_pred = [np.where(rng.random(n) < 0.7, r, "a") for r, n in zip(rel_true, lengths)]
    scores = attachment_scores(heads_true, heads_pred, rel_true, rel_pred)
    uas, las, n = _reference_attachment(heads_true, heads_pred, rel_true, rel_pred,
                                        [np.ones(n, bool) for n in lengths])
    assert scores == {"uas": pytest.approx(uas), "las": pytest.approx(las), "n_tokens": n}
    assert 0 < las < uas < 1
    # forms: "p" is punctuation by the default rule, "w" is not
    sentences = [rng.choice(["w", "w", "p"], size=n).tolist() for n in lengths]
    sentences = [[{"form": "," if f == "p" else "dog"} for f in s] for s in sentences]
    scored = [np.array([t["form"] != "," for t in s], dtype=bool) for s in sentences]
    scores = attachment_scores(heads_true, heads_pred, rel_true, rel_pred,
                               sentences=sentences, exclude_punctuation=True)
    uas, las, n = _reference_attachment(heads_true, heads_pred, rel_true, rel_pred, scored)
    assert scores == {"uas": pytest.approx(uas), "las": pytest.approx(las), "n_tokens": n}
    assert n < sum(lengths)


def test_attachment_scores_small_cases():
    # token 3's head is wrong; token 1 has the right head and the wrong relation
    scores = attachment_scores([np.array([2, 0, 2])], [np.array([2, 0, 1], dtype=np.int32)],
                               [["nsubj", "root", "obj"]], [["obj", "root", "obj"]])
    assert scores == {"uas": pytest.approx(2 / 3), "las": pytest.approx(1 / 3), "n_tokens": 3}
    # a right relation on a wrong head does not count for LAS
    scores = attachment_scores([[0, 1]], [[2, 0]], [["root", "x"]], [["root", "x"]])
    assert scores == {"uas": 0.0, "las": 0.0, "n_tokens": 2}
    # empty sentences are allowed beside others; tuples of arrays too
    scores = attachment_scores(([], [0]), ([], [0]))
    assert scores == {"uas": 1.0, "las": None, "n_tokens": 1}


def test_attachment_scores_take_heads_and_relations_pairs():
    # the form of DependencyParser's y and of its predictions with relations
    true = [(np.array([2, 0, 2]), ["nsubj", "root", "obj"]), ([0], ["root"])]
    pred = [(np.array([2, 0, 1]), ["obj", "root", "obj"]), ([0], ["dep"])]
    assert attachment_scores(true, pred) == attachment_scores(
        [[2, 0, 2], [0]], [[2, 0, 1], [0]], [["nsubj", "root", "obj"], ["root"]],
        [["obj", "root", "obj"], ["dep"]])
    assert attachment_scores(true, pred)["las"] == pytest.approx(1 / 4)
    with pytest.raises(ValueError, match="given twice"):
        attachment_scores(true, pred, [["a", "b", "c"], ["d"]], [["a", "b", "c"], ["d"]])
    with pytest.raises(ValueError, match="both be head arrays or both"):
        attachment_scores(true, [[2, 0, 1], [0]])


def test_attachment_scores_punctuation_rules():
    forms = [",", "«", "...", "--", "¿", "“", "$", "``", "-LRB-", "a.", "%", "dog"]
    # eval.pl's rule: every character in a Unicode punctuation category (P*); "$" is Sc,
    # "`" is Sk, "-LRB-" and "a." have letters; "%" is Po
    expected = [True, True, True, True, True, True, False, False, False, False, True, False]
    n = len(forms)
    heads_true = [np.zeros(n, dtype=int)]
    heads_pred = [np.where(expected, 0, 1)]  # wrong exactly on the non-punctuation tokens
    scores = attachment_scores(heads_true, heads_pred, sentences=[forms],
                               exclude_punctuation=True)
    assert scores == {"uas": 0.0, "las": None, "n_tokens": n - sum(expected)}
    scores = attachment_scores(heads_true, heads_pred, sentences=[[{"form": f} for f in forms]],
                               exclude_punctuation=True)
    assert scores["n_tokens"] == n - sum(expected)
    # by tag, whichever tag keys the tokens have
    conllx = [{"form": ".", "cpostag": "PUNT", "postag": "PUNT_PUNT"},
              {"form": "etxe", "cpostag": "IZE", "postag": "IZE_ARR"}]
    conllu = [{"form": "(", "upos": "PUNCT", "xpos": "-LRB-"},
              {"form": "home", "upos": "NOUN", "xpos": "NN"}]
    for tokens, tags in [(conllx, {"PUNT"}), (conllu, ["PUNCT"]), (conllu, {"-LRB-"}),
                         ([{"form": ".", "postag": "."}, {"form": "x", "postag": "NN"}],
                          frozenset({".", ","}))]:
        scores = attachment_scores([[0, 1]], [[2, 1]], sentences=[tokens],
                                   exclude_punctuation=True, punctuation=tags)
        assert scores == {"uas": 1.0, "las": None, "n_tokens": 1}
    # a user predicate gets each token as given
    scores = attachment_scores([[0, 1]], [[0, 0]], sentences=[conllu],
                               exclude_punctuation=True,
                               punctuation=lambda token: token["form"] == "home")
    assert scores == {"uas": 1.0, "las": None, "n_tokens": 1}


def test_attachment_scores_nothing_to_score_warns():
    with pytest.warns(UndefinedMetricWarning, match="No token"):
        scores = attachment_scores([[0]], [[0]], [["p"]], [["p"]], sentences=[["."]],
                                   exclude_punctuation=True)
    assert scores == {"uas": 0.0, "las": 0.0, "n_tokens": 0}
    with pytest.warns(UndefinedMetricWarning):
        assert attachment_scores([[]], [[]])["uas"] == 0.0


@pytest.mark.parametrize("args, kwargs, error, message", [
    (([], []), {}, ValueError, "at least one sentence"),
    (([[0]], []), {}, ValueError, "heads_true has 1 sentences and heads_pred 0"),
    (([[0, 1]], [[0]]), {}, ValueError, "Sentence 0 has 2 true heads and 1 predicted"),
    (([[0, 3]], [[0, 1]]), {}, ValueError, r"heads_true\[0\] has heads outside 0..2"),
    (([[0, 1]], [[-1, 1]]), {}, ValueError, r"heads_pred\[0\] has heads outside"),
    (([[0, 1]], [[0.0, 1.0]]), {}, ValueError, "must hold integers"),
    (([[0, 1]], [[True, False]]), {}, ValueError, "must hold integers"),
    (([[[0, 1]]], [[[0, 1]]]), {}, ValueError, "must be 1-D"),
    (({0: [0]}, [[0]]), {}, TypeError, "list of per-sentence head arrays"),
    (([[0]], [[0]], [["r"]]), {}, ValueError, "both relations_true and relations_pred"),
    (([[0]], [[0]], None, [["r"]]), {}, ValueError, "both relations_true"),
    (([[0]], [[0]], [["r", "s"]], [["r"]]), {}, ValueError, "2 relations for 1 tokens"),
    (([[0]], [[0]], [["r"]], []), {}, ValueError, "relations_pred has 0 sentences"),
    (([[0]], [[0]]), {"punctuation": {"PUNCT"}}, ValueError, "exclude_punctuation is False"),
    (([[0]], [[0]]), {"exclude_punctuation": True}, ValueError, "pass sentences"),
    (([[0]], [[0]]), {"exclude_punctuation": True, "sentences": [["a"], ["b"]]},
     ValueError, "sentences has 2 sentences"),
    (([[0]], [[0]]), {"exclude_punctuation": True, "sentences": [["a", "b"]]},
     ValueError, r"sentences\[0\] has 2 tokens for 1 heads"),
    (([[0]], [[0]]), {"exclude_punctuation": True, "sentences": [["a"]],
                      "punctuation": "PUNCT"}, ValueError, "collection of tags"),
    (([[0]], [[0]]), {"exclude_punctuation": True, "sentences": [["a"]],
                      "punctuation": {"PUNCT"}}, ValueError, "needs tokens with a tag"),
    (([[0]], [[0]]), {"exclude_punctuation": True, "sentences": [[{"lemma": "a"}]]},
     ValueError, "'form' key"),
])
def test_attachment_scores_errors(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        attachment_scores(*args, **kwargs)


def test_attachment_scores_basque(data_home):
    directory = os.path.join(data_home, "conll2007_eus")
    data = read_conll(os.path.join(directory, "eus.test.gz"), encoding="latin-1")
    gold = attachment_scores(data.heads, data.heads, data.relations, data.relations)
    assert gold == {"uas": 1.0, "las": 1.0, "n_tokens": 10096}
    # a baseline attaching every token to the next one (the last to the root)
    chain = [np.append(np.arange(2, len(h) + 1), 0) for h in data.heads]
    every = attachment_scores(data.heads, chain)
    by_form = attachment_scores(data.heads, chain, sentences=data.sentences,
                                exclude_punctuation=True)
    by_tag = attachment_scores(data.heads, chain, sentences=data.sentences,
                               exclude_punctuation=True, punctuation={"PUNT"})
    # 1,879 tokens are tagged PUNT; 1,872 of them have punctuation forms, the other seven
    # are "PUNT_PUNT" (six) and "+" (a math symbol, Sm)
    n_punt = sum(t["cpostag"] == "PUNT" for s in data.sentences for t in s)
    assert n_punt == 1879
    assert by_tag["n_tokens"] == 10096 - 1879
    assert by_form["n_tokens"] == 10096 - 1872
    assert 0.2 < every["uas"] < by_form["uas"] < by_tag["uas"] < 0.4


# ---------------------------------------------------------------------- bracket scores
def _scores(gold, pred):
    return bracket_scores([tree_from_string(g) for g in gold],
                          [tree_from_string(p) for p in pred])


def test_bracket_scores_hand_cases():
    # The numbers are those evalb -p COLLINS.prm prints for these files.
    # 1. "." is deleted, leaving The/dog/barked (0-3). Gold: S 0-3, NP 0-2, VP 2-3; predicted:
    #    S 0-3, NP 0-1, VP 1-3. Only S matches: 1 of 3 both ways.
    case1 = ("(S (NP (DT The) (NN dog)) (VP (VBD barked)) (. .))",
             "(S (NP (DT The)) (VP (NN dog) (VBD barked)) (. .))")
    scores = _scores(*zip(case1))
    assert scores == {"precision": pytest.approx(1 / 3), "recall": pytest.approx(1 / 3),
                      "f1": pytest.approx(1 / 3), "exact_match": 0.0, "n_sentences": 1}
    # 2. punctuation goes before the spans are computed: over John/left the predicted NP
    #    holding "John ," spans 0-1 like the gold NP, and the VP holding "left ." spans 1-2:
    #    3 of 3 match (with the commas counted, NP would be 0-2 against 0-1).
    case2 = ("(S (NP (NNP John)) (, ,) (VP (VBD left)) (. .))",
             "(S (NP (NNP John) (, ,)) (VP (VBD left) (. .)))")
    assert _scores(*zip(case2))["f1"] == 1.0
    # 3. a constituent over punctuation only spans 1-1 and is not counted: still 3 of 3
    case3 = (case2[0], "(S (NP (NNP John)) (PRN (, ,)) (VP (VBD left)) (. .))")
    assert _scores(*zip(case3))["precision"] == 1.0
    # 4. EQ_LABEL ADVP PRT: PRT and ADVP over "up" match (S, NP, VP, ADVP/PRT: 4 of 4);
    #    PP does not (3 of 4)
    gold4 = "(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    assert _scores([gold4], [gold4.replace("PRT", "ADVP")])["f1"] == 1.0
    assert _scores([gold4], [gold4.replace("PRT", "PP")])["precision"] == 0.75
    # 5. TOP is deleted, function tags and indices are cut, -NONE- leaves go with the
    #    constituents over nothing else (NP-SBJ); the S over "to go" stays: 6 brackets each
    #    (S 0-4, NP 0-1, VP 1-4, S 2-4, VP 2-4, VP 3-4), all matching.
    gold5 = ("(TOP (S (NP-SBJ-1 (PRP He)) (VP (VBD tried) (S (NP-SBJ (-NONE- *-1)) "
             "(VP (TO to) (VP (VB go))))) (. .)))")
    pred5 = "(S (NP (PRP He)) (VP (VBD tried) (S (VP (TO to) (VP (VB go))))) (. .))"
    assert _scores([gold5], [pred5]) == {"precision": 1.0, "recall": 1.0, "f1": 1.0,
                                         "exact_match": 1.0, "n_sentences": 1}
    # 6. multisets: the gold NP 0-2 occurs twice (a unary chain), the predicted once; it
    #    matches once. Gold S, NP, NP, VP (4); predicted S, NP, VP (3); 3 matches:
    #    precision 3/3, recall 3/4, not an exact match.
    gold6 = "(S (NP (NP (DT the) (NN man))) (VP (VBD ran)))"
    pred6 = "(S (NP (DT the) (NN man)) (VP (VBD ran)))"
    assert _scores([gold6], [pred6]) == {
        "precision": 1.0, "recall": 0.75, "f1": pytest.approx(6 / 7), "exact_match": 0.0,
        "n_sentences": 1}
    assert _scores([pred6], [gold6])["precision"] == 0.75
    # 7. the root bracket counts and preterminals do not: gold S 0-1, NP 0-1; predicted
    #    FRAG 0-1, NP 0-1 (its tag UH against NN is not scored): 1 of 2
    assert _scores(["(S (NP (NN Hi)))"], ["(FRAG (NP (UH Hi)))"])["recall"] == 0.5
    # 8. sums over sentences (micro average): cases 1 and 6 give 1 + 3 matches, 3 + 3
    #    predicted and 3 + 4 gold brackets
    scores = _scores([case1[0], gold6], [case1[1], pred6])
    assert scores["precision"] == pytest.approx(4 / 6)
    assert scores["recall"] == pytest.approx(4 / 7)
    assert scores["exact_match"] == 0.0 and scores["n_sentences"] == 2
    # 9. no bracket at all (a lone preterminal, or an S over punctuation only): the ratios
    #    have no denominator and are 0.0, as evalb prints them; the lone preterminal matches
    #    exactly, and evalb skips the sentence of punctuation only (no word is left)
    assert _scores(["(NN Hi)", "(S (. .))"], ["(NN Hi)", "(S (. .))"]) == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "exact_match": 1.0, "n_sentences": 2}
    assert _scores(["(NN Hi)", "(S (. .))"], ["(VB Hi)", "(X (. .))"])["exact_match"] == 1.0
    assert _scores(["(S (NP (NN a)))", "(S (. .))"],
                   ["(S (VP (NN a)))", "(X (. .))"])["exact_match"] == 0.0
    assert _scores(["(S (. .))"], ["(X (. .))"])["exact_match"] == 0.0  # (no denominator)


def test_bracket_scores_conventions_beyond_evalb():
    # the punctuation deleted is found from the gold tags and deleted from both trees
    # (evalb would stop on a length mismatch here): NP 0-1 matches
    gold = "(S (NP (NNP John)) (, ,) (VP (VBD left)))"
    pred = "(S (NP (NNP John) (NN ,)) (VP (VBD left)))"
    assert _scores([gold], [pred])["f1"] == 1.0
    # an unlabelled outer bracket is not counted, like TOP
    assert _scores(["( (S (NP (NN a)) (VP (VB b))))"], ["(S (NP (NN a)) (VP (VB b)))"]) == {
        "precision": 1.0, "recall": 1.0, "f1": 1.0, "exact_match": 1.0, "n_sentences": 1}


def test_bracket_scores_of_empty_sentences():
    # an empty sentence's tree is (), what the parsers predict for it: no brackets, and no
    # part in exact_match (evalb skips sentences without words)
    tree = tree_from_string("(S (NP (NN a)) (VP (VB b)))")
    other = tree_from_string("(S (VP (NN a) (VB b)))")
    assert bracket_scores([(), tree, ()], [(), tree, ()]) == {
        "precision": 1.0, "recall": 1.0, "f1": 1.0, "exact_match": 1.0, "n_sentences": 3}
    assert bracket_scores([(), tree, (), tree], [(), tree, (), other])["exact_match"] == 0.5
    with pytest.raises(ValueError, match="different words"):
        bracket_scores([()], [tree])


def test_bracket_scores_errors():
    tree = tree_from_string("(S (NP (NN a)) (VP (VB b)))")
    other = tree_from_string("(S (NP (NN a)) (VP (VB c)))")
    with pytest.raises(ValueError, match="Sentence 1: the true and predicted trees"):
        bracket_scores([tree, tree], [tree, other])
    with pytest.raises(ValueError, match="different words"):
        bracket_scores([tree], [("S", ("NN", "a"))])
    with pytest.raises(ValueError, match="1 trees and trees_pred 2"):
        bracket_scores([tree], [tree, tree])
    with pytest.raises(ValueError, match="at least one sentence"):
        bracket_scores([], [])
    with pytest.raises(TypeError, match="list of trees"):
        bracket_scores(tree, tree)
    with pytest.raises(TypeError):
        bracket_scores([tree], ["(S (NN a))"])
    with pytest.raises(ValueError):
        bracket_scores([tree], [("S", ("NN", "a"), "b")])


def _retag(tree, tags):
    position = iter(range(len(tags)))

    def visit(node):
        if isinstance(node[1], str):
            return (tags[next(position)], node[1])
        return (node[0], *[visit(child) for child in node[1:]])

    return visit(tree)


def _add_traces(tree, rng):
    """Put -NONE- elements (under NP-SBJ, or bare) before some children."""
    if isinstance(tree[1], str):
        return tree
    children = []
    for child in tree[1:]:
        if rng.random() < 0.1:
            trace = ("-NONE-", "*T*-1")
            children.append(("NP-SBJ", trace) if rng.random() < 0.5 else trace)
        children.append(_add_traces(child, rng))
    return (tree[0], *children)


def test_bracket_scores_against_evalb_reference():
    # random trees over the same words, with gold-only traces and function tags, scored by
    # a line-by-line port of evalb's algorithm (tests/_parsing_reference.py)
    rng = np.random.default_rng(0)
    labels = ["S", "NP", "VP", "PP-LOC=2", "NP-SBJ-1", "ADVP", "PRT", "ADJP", "TOP", "SBAR"]
    gold_trees, pred_trees, counts, exact = [], [], [], []
    for n in rng.integers(1, 14, size=300):
        words = [f"w{i}" for i in range(n)]
        tags = rng.choice(["NN", "VB", "DT", ",", ".", "``", "-LRB-", "RP"], size=n).tolist()
        gold = _add_traces(_retag(random_tree(rng, words, labels, ["NN"]), tags), rng)
        pred = _retag(random_tree(rng, words, labels[:-4] + ["PRT", "ADVP"], ["NN"]), tags)
        gold_trees.append(gold)
        pred_trees.append(pred)
        counts.append(evalb_counts(tree_to_string(gold), tree_to_string(pred)))
        one = bracket_scores([gold], [pred])
        match, n_gold, n_pred = counts[-1]
        assert one["precision"] == pytest.approx(match / n_pred if n_pred else 0.0)
        assert one["recall"] == pytest.approx(match / n_gold if n_gold else 0.0)
        if not evalb_skips(tree_to_string(gold)):
            exact.append(match == n_gold == n_pred)
        assert one["exact_match"] == (float(exact[-1]) if not evalb_skips(
            tree_to_string(gold)) else 0.0)
    match, n_gold, n_pred = np.sum(counts, axis=0)
    scores = bracket_scores(gold_trees, pred_trees)
    assert scores["precision"] == pytest.approx(match / n_pred)
    assert scores["recall"] == pytest.approx(match / n_gold)
    assert scores["exact_match"] == pytest.approx(np.mean(exact))
    assert len(exact) < 300  # (sentences of punctuation only were drawn, and skipped)
    assert 0.05 < scores["f1"] < 0.95


def test_bracket_scores_ptb_sample(data_home):
    # the first 800 trees (every tree of the file starts a line with "(")
    with gzip.open(os.path.join(data_home, "ptb_sample", "treebank.mrg.gz"), "rt") as f:
        lines = f.read().splitlines(keepends=True)
    text = "".join(lines[:[i for i, line in enumerate(lines) if line.startswith("(")][800]])
    clean = read_ptb_trees(io.StringIO(text))
    raw = read_ptb_trees(io.StringIO(text), remove_empty=False, strip_function_tags=False)
    # evalb's deletions make the raw treebank trees score like the preprocessed ones
    assert bracket_scores(raw, clean) == {"precision": 1.0, "recall": 1.0, "f1": 1.0,
                                          "exact_match": 1.0, "n_sentences": 800}
    # flat predictions (one S over the words) match at most one bracket per sentence: an S
    # over every non-punctuation word, such as a root S
    flat = [("S", *_preterminals(t)) for t in clean]
    scores = bracket_scores(clean, flat)
    assert scores["precision"] >= sum(t[0] == "S" for t in clean) / 800 > 0.8
    assert scores["recall"] < 0.1


def _preterminals(tree):
    if isinstance(tree[1], str):
        return [tree]
    return [leaf for child in tree[1:] for leaf in _preterminals(child)]


# ----------------------------------------------------------------------------- scorers
class _ChainParser(BaseEstimator):
    """Attaches each token to its right (or left) neighbour; the last (or first) is the root."""

    def __init__(self, direction="right", pairs=False):
        self.direction = direction
        self.pairs = pairs

    def fit(self, X, y):
        return self

    def predict(self, X):
        heads = []
        for tokens in X:
            n = len(tokens)
            if self.direction == "right":
                heads.append(np.append(np.arange(2, n + 1), 0))
            else:
                heads.append(np.arange(n))
        if self.pairs:
            return [(h, np.full(len(h), "dep", dtype=object)) for h in heads]
        return heads


class _FlatParser(BaseEstimator):
    """One node labelled ``label`` over the words, each tagged NN."""

    def __init__(self, label="S"):
        self.label = label

    def fit(self, X, y):
        return self

    def predict(self, X):
        return [(self.label, *[("NN", word) for word in words]) for words in X]


def test_attachment_scorer_in_grid_search():
    rng = np.random.default_rng(0)
    X = [[f"w{i}" for i in range(n)] for n in rng.integers(1, 8, size=20)]
    y = [np.arange(len(tokens)) for tokens in X]  # left chains
    search = GridSearchCV(_ChainParser(), {"direction": ["right", "left"]},
                          scoring=attachment_scorer, cv=2).fit(X, y)
    assert search.best_params_ == {"direction": "left"}
    assert search.best_score_ == 1.0
    # (heads, relations) pairs on either side; relations are ignored
    pairs = [(h, ["x"] * len(h)) for h in y]
    for truth in (y, pairs):
        for as_pairs in (False, True):
            scores = cross_val_score(_ChainParser("right", as_pairs), X, truth,
                                     scoring=attachment_scorer, cv=2)
            assert np.all(scores < 1.0)
    assert attachment_scorer(_ChainParser("left", True), X, pairs) == 1.0
    assert attachment_scorer(_ChainParser("right"), [["a", "b"]], [[2, 0]]) == 1.0
    assert attachment_scorer(_ChainParser("right"), [["a", "b"]], [([2, 0], ["r", "s"])]) == 1.0


def test_bracket_f1_scorer_in_grid_search():
    X = [["a", "b"], ["c"], ["d", "e", "f"], ["g", "h"]]
    y = [("S", *[("NN", w) for w in words]) for words in X]
    search = GridSearchCV(_FlatParser(), {"label": ["X", "S"]}, scoring=bracket_f1_scorer,
                          cv=2).fit(X, y)
    assert search.best_params_ == {"label": "S"} and search.best_score_ == 1.0
    assert bracket_f1_scorer(_FlatParser("X"), X, y) == 0.0


def test_scorers_pickle_and_repr():
    for scorer in (attachment_scorer, bracket_f1_scorer):
        again = pickle.loads(pickle.dumps(scorer))
        assert repr(again) == repr(scorer)
    assert repr(attachment_scorer) == "attachment_scorer"
    X = [["a", "b", "c"]]
    again = pickle.loads(pickle.dumps(attachment_scorer))
    assert again(_ChainParser("left"), X, [[0, 1, 2]]) == 1.0
