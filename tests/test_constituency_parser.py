"""ConstituencyParser, PCFGParser and SpanFeatures as users call them: fit and predict on a
toy treebank, outputs, fallbacks, bad input, model selection and persistence."""

import os
import pickle
import sys
import warnings
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from sklstruct import M3NExpGrad, M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct.parsing import (
    ConstituencyParser,
    PCFGParser,
    SpanFeatures,
    bracket_f1_scorer,
    bracket_scores,
    labelled_spans,
    read_ptb_trees,
    tree_from_string,
    tree_tags,
    tree_to_string,
    tree_words,
)
from sklstruct.parsing._grammar import TreeGrammar, _nodes
from sklstruct.parsing._trees import strip_function_tag
from sklstruct.structures import ConstituencyTree
from sklstruct.utils import SequenceBatch

from ._parsing_reference import toy_treebank

PTB = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "ptb_sample")


@pytest.fixture(scope="module")
def toy():
    X, y = toy_treebank(60, seed=0)
    X_test, y_test = toy_treebank(30, seed=1)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def fitted(toy):
    X, y, _, _ = toy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return ConstituencyParser(10.0, learner=StructSVMCuttingPlane(
            tol=1e-3, variant="n-slack")).fit(X, y)


def test_parses_a_toy_treebank(fitted, toy):
    _X, _y, X_test, y_test = toy
    predicted = fitted.predict(X_test)
    assert len(predicted) == len(X_test)
    for sentence, tree in zip(X_test, predicted):
        assert tree_words(tree) == [word for word, _ in sentence]
    assert fitted.score(X_test, y_test) == bracket_scores(y_test, predicted)["f1"]
    assert fitted.score(X_test, y_test) > 0.95
    assert bracket_f1_scorer(fitted, X_test, y_test) == fitted.score(X_test, y_test)
    assert fitted.learner_.structure_.grammar is fitted.grammar_.grammar
    assert fitted.learner_.history_["gap"][-1] <= 1e-3 * fitted.learner_.history_["primal"][-1]


def test_output_forms(fitted, toy):
    X_test = toy[2][:5] + [[]]
    trees = fitted.predict(X_test)
    assert trees[-1] == ()
    strings = clone(fitted).set_params(output="string")
    strings.__dict__.update({k: v for k, v in vars(fitted).items() if k.endswith("_")})
    as_strings = strings.predict(X_test)
    assert as_strings[:-1] == [tree_to_string(tree) for tree in trees[:-1]]
    assert as_strings[-1] == ""
    # the scorer reads trees as the parsers do: bracketed strings too, on either side
    y_test = toy[3][:5] + [()]
    y_strings = [tree_to_string(tree) for tree in y_test[:-1]] + [""]
    expected = fitted.score(X_test, y_test)
    assert bracket_f1_scorer(fitted, X_test, y_strings) == expected
    assert bracket_f1_scorer(strings, X_test, y_strings) == expected
    assert bracket_f1_scorer(strings, X_test, y_test) == expected
    nltk = pytest.importorskip("nltk")
    strings.set_params(output="nltk")
    as_nltk = strings.predict(X_test)
    assert all(isinstance(tree, nltk.Tree) for tree in as_nltk)
    assert [str(t).split() for t in as_nltk[:-1]] == [s.split() for s in as_strings[:-1]]
    assert len(as_nltk[-1]) == 0
    assert fitted.predict([]) == []


def test_tokens_may_be_words_pairs_or_dicts(toy):
    X, y, X_test, y_test = toy
    words = [[word for word, _ in sentence] for sentence in X]
    dicts = [[{"form": word, "xpos": tag} for word, tag in sentence] for sentence in X]
    learner = StructSVMCuttingPlane(tol=1e-2, variant="n-slack")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        untagged = ConstituencyParser(10.0, learner=learner).fit(words, y)
        from_dicts = ConstituencyParser(10.0, learner=learner).fit(
            dicts, [tree_to_string(t) for t in y])
    assert not untagged.features_.tagged_ and from_dicts.features_.tagged_
    assert untagged.score([[w for w, _ in s] for s in X_test], y_test) > 0.8
    assert from_dicts.score(X_test, y_test) > 0.9
    with pytest.raises(ValueError, match="fitted on tagged sentences"):
        from_dicts.predict([["the", "dog", "sleeps"]])


def test_a_sentence_without_a_tree_gets_a_flat_tree(fitted):
    # every training tree is an S over two words or more: no one-word tree
    with pytest.warns(UserWarning, match="1 sentence\\(s\\) have no tree"):
        trees = fitted.predict([[("Rex", "NNP")], [("it", "PRP"), ("sleeps", "VBZ")]])
    assert trees[0] == ("S", ("NNP", "Rex"))
    assert tree_words(trees[1]) == ["it", "sleeps"]
    untagged = PCFGParser().fit(*toy_treebank(20, seed=3))
    with pytest.warns(UserWarning, match="no tree"):
        assert untagged.predict([[("Rex", "NNP")]]) == [("S", ("NNP", "Rex"))]


def test_empty_sentences_score_with_the_tree_predict_gives(fitted, toy):
    X, y, _, _ = toy
    assert fitted.predict([[]]) == [()]
    assert fitted.score([[], X[0]], [(), y[0]]) == fitted.score([X[0]], [y[0]])
    assert fitted.score([[], X[0]], ["", y[0]]) == fitted.score([X[0]], [y[0]])
    # fit names the empty sentence, before looking at its tree
    with pytest.raises(ValueError, match=r"X\[1\] is empty"):
        ConstituencyParser().fit([X[0], []], [y[0], ()])


def test_trees_that_do_not_fit_are_refused(fitted, toy):
    X, y, X_test, y_test = toy
    parser = ConstituencyParser(learner=StructSVMCuttingPlane())
    with pytest.raises(ValueError, match="does not span the sentence"):
        parser.fit([X[0]], [y[1]])
    with pytest.raises(ValueError, match="2 sentences but y has 1 trees"):
        parser.fit(X[:2], y[:1])
    with pytest.raises(ValueError, match="X\\[0\\] is empty"):
        parser.fit([[]], [y[0]])
    with pytest.raises(ValueError, match="at least one sentence"):
        parser.fit([], [])
    with pytest.raises(TypeError, match="token must be"):
        parser.fit([[1, 2]], [y[0]])
    with pytest.raises(ValueError, match="mixes tokens"):
        parser.fit([[("the", "DT"), "dog"]], [tree_from_string("(NP (DT the) (NN dog))")])
    with pytest.raises(ValueError, match="three words or more"):
        parser.fit([[("it", "PRP"), ("sleeps", "VBZ")]],
                   [tree_from_string("(S (NP (PRP it)) (VP (VBZ sleeps)))")])
    with pytest.raises(ValueError, match="unbalanced"):
        parser.fit([X[0]], ["(S (NP"])
    # a tree whose rule the grammar lacks, where the learner's objective needs its parts
    odd = tree_from_string("(S (VP (VBZ sleeps)) (NP (PRP it)))")
    with pytest.raises(ValueError, match="rule S -> VP\\+VBZ NP\\+PRP"):
        fitted.objective([[("sleeps", "VBZ"), ("it", "PRP")]], [odd])
    # a label the grammar lacks is named as the tree has it
    with pytest.raises(ValueError, match="phrasal label 'ZZZ'"):
        fitted.objective([[("the", "DT"), ("big", "JJ"), ("red", "JJ"), ("dog", "NN")]],
                         [tree_from_string("(ZZZ (DT the) (JJ big) (JJ red) (NN dog))")])
    with pytest.raises(ValueError, match="lexical label 'FRAG\\+VBZ'"):
        fitted.objective([[("sleeps", "VBZ")]], [tree_from_string("(FRAG (VBZ sleeps))")])
    assert np.isfinite(fitted.objective(X_test, y_test))
    for params, error, match in [({"loss": "hamming"}, ValueError, "loss"),
                                 ({"horizontal": -1}, ValueError, "horizontal"),
                                 ({"vertical": 0}, ValueError, "vertical"),
                                 ({"output": "xml"}, ValueError, "output"),
                                 ({"learner": KFold()}, TypeError, "learner"),
                                 ({"learner": PCFGParser()}, TypeError,
                                  "structure parameter"),
                                 ({"C": 0.0}, ValueError, "'C' parameter")]:
        with pytest.raises(error, match=match):
            ConstituencyParser(**params).fit(X, y)


def test_a_failed_fit_leaves_the_parser_as_it_was(fitted, toy):
    X, y, X_test, _ = toy
    parser = pickle.loads(pickle.dumps(fitted))
    before = parser.predict(X_test[:3])
    with pytest.raises(ValueError):
        parser.fit([X[0]], [y[1]])
    assert parser.predict(X_test[:3]) == before


def test_zero_one_loss_needs_a_cutting_plane_learner(toy):
    X, y, X_test, y_test = toy
    with pytest.raises(ValueError, match="does not decompose"):
        ConstituencyParser(learner=M3NSimplicialDecomposition(), loss="zero_one").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        parser = ConstituencyParser(1.0, learner=StructSVMCuttingPlane(tol=1e-2,
                                                                       variant="n-slack"),
                                    loss="zero_one").fit(X[:30], y[:30])
    assert parser.score(X_test, y_test) > 0.8


def test_grid_search_over_C(toy):
    X, y, _, _ = toy
    search = GridSearchCV(ConstituencyParser(features=SpanFeatures(span_features=False)),
                          {"C": [0.01, 1.0]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X[:40], y[:40])
        scores = cross_val_score(ConstituencyParser(learner=M3NExpGrad(max_iter=30)), X[:40],
                                 y[:40], cv=2, scoring=bracket_f1_scorer)
    assert search.best_params_["C"] in (0.01, 1.0)
    assert search.best_estimator_.learner_.C == search.best_params_["C"]
    assert 0.0 <= search.best_score_ <= 1.0
    assert scores.shape == (2,) and np.all(scores > 0.5)


def test_pickle_and_clone(fitted, toy):
    X_test = toy[2]
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.predict(X_test) == fitted.predict(X_test)
    fresh = clone(fitted)
    assert not hasattr(fresh, "learner_") and fresh.get_params()["C"] == 10.0
    assert fitted.learner_.C == 10.0


def test_random_state_is_given_to_the_learner(toy):
    X, y = toy[0][:30], toy[1][:30]
    fits = []
    for parser in (ConstituencyParser(random_state=0), ConstituencyParser(random_state=0),
                   ConstituencyParser(learner=M3NSimplicialDecomposition(random_state=0))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(parser.fit(X, y))
    assert fits[0].learner_.random_state == 0
    np.testing.assert_array_equal(fits[0].learner_.w_, fits[1].learner_.w_)
    np.testing.assert_array_equal(fits[0].learner_.w_, fits[2].learner_.w_)
    kept = ConstituencyParser(learner=M3NExpGrad(max_iter=2, random_state=3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert kept.fit(X, y).learner_.random_state == 3


def test_pcfg_is_the_relative_frequency_grammar(toy):
    X, y, X_test, y_test = toy
    parser = PCFGParser().fit(X, y)
    g = parser.grammar_
    by_top = np.zeros(len(g.symbols))
    np.add.at(by_top, g.top, np.exp(parser.label_log_prob_))
    np.testing.assert_allclose(by_top[np.unique(g.top)], 1.0)
    by_parent = np.zeros(len(g.symbols))
    np.add.at(by_parent, np.array(g.rules)[:, 0], np.exp(parser.rule_log_prob_))
    np.testing.assert_allclose(by_parent[np.unique(np.array(g.rules)[:, 0])], 1.0)
    np.testing.assert_allclose(np.exp(parser.root_log_prob_).sum(), 1.0)
    assert parser.score(X_test, y_test) > 0.9
    with pytest.raises(ValueError, match="parses part-of-speech tags"):
        parser.predict([["the", "dog"]])
    with pytest.raises(ValueError, match="parses part-of-speech tags"):
        PCFGParser().fit([[w for w, _ in s] for s in X], y)


def test_pcfg_relabels_a_word_only_where_the_given_tags_have_no_tree():
    """The given tags stay where the grammar parses them; where it has no tree over them,
    known tags or not, a word takes another lexical label (shown in the preterminals)."""
    parser = PCFGParser().fit([[("a", "DT"), ("b", "NN"), ("c", "VB")]],
                              ["(S (NP (DT a) (NN b)) (VP (VB c)))"])
    assert parser.predict([[("x", "DT"), ("y", "NN"), ("z", "VB")]]) == \
        [("S", ("NP", ("DT", "x"), ("NN", "y")), ("VP", ("VB", "z")))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a relabelled word is no flat-tree fallback)
        tree, = parser.predict([[("b", "NN"), ("a", "DT"), ("c", "VB")]])
    assert tree == ("S", ("NP", ("DT", "b"), ("NN", "a")), ("VP", ("VB", "c")))
    tree, = parser.predict([[("a", "DT"), ("b", "XX"), ("c", "VB")]])  # (an unseen tag)
    assert tree == ("S", ("NP", ("DT", "a"), ("NN", "b")), ("VP", ("VB", "c")))


def test_pcfg_equals_nltk_viterbi_parser(toy):
    nltk = pytest.importorskip("nltk")
    X, y, X_test, _ = toy
    parser = PCFGParser(vertical=2).fit(X, y)
    try:
        viterbi = nltk.parse.ViterbiParser(parser.to_nltk_grammar(), max_time=None)
    except TypeError:  # nltk < 3.10 has no time limit
        viterbi = nltk.parse.ViterbiParser(parser.to_nltk_grammar())
    tokens = [([w for w, _ in s], [t for _, t in s]) for s in X_test]
    _, log_probs = parser._decode(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        predicted = parser.predict(X_test)
    compared = 0
    for (words, tags), ours, log_prob in zip(tokens, predicted, log_probs):
        parses = list(viterbi.parse(tags))
        if not parses:  # (ours then needs a lexical label of another tag)
            assert log_prob < np.log(1e-6)
            continue
        (best,) = parses
        assert np.log(best.prob()) == pytest.approx(log_prob, rel=1e-12)
        assert parser.from_nltk_parse(best, words) == ours
        compared += 1
    assert compared >= 0.8 * len(tokens)


def _relabel(tree, names):
    if isinstance(tree, str):
        return tree
    return (names.get(tree[0], tree[0]), *[_relabel(child, names) for child in tree[1:]])


def test_labels_with_the_chain_separator_and_a_root_label(toy):
    """A treebank whose tags hold "+" (the French treebank's "P+D") and whose trees hang
    from a "ROOT" node (CoreNLP's output): the unary chains get another separator, and the
    PCFG's nltk grammar another start symbol."""
    nltk = pytest.importorskip("nltk")
    X, y, X_test, y_test = toy

    def convert(trees, sentences):
        trees = [("ROOT", _relabel(tree, {"DT": "P+D", "NP": "NP+X"})) for tree in trees]
        return [[(w, "P+D" if t == "DT" else t) for w, t in s] for s in sentences], trees

    X, y = convert(y, X)
    X_test, y_test = convert(y_test, X_test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        parser = ConstituencyParser(10.0, learner=StructSVMCuttingPlane(
            tol=1e-3, variant="n-slack")).fit(X, y)
    assert parser.grammar_.join != "+"
    predicted = parser.predict(X_test)
    assert parser.score(X_test, y_test) > 0.95
    assert sum(tree == true for tree, true in zip(predicted, y_test)) >= 0.8 * len(y_test)
    assert {"P+D", "NP+X", "ROOT"} <= {node[0] for tree in predicted
                                      for node, _, _ in _nodes(tree)}
    pcfg = PCFGParser().fit(X, y)
    grammar = pcfg.to_nltk_grammar()
    assert str(grammar.start()) == "ROOT'"
    viterbi = nltk.parse.ViterbiParser(grammar)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ours = pcfg.predict(X_test[:5])
    for sentence, tree in zip(X_test[:5], ours):
        (best,) = viterbi.parse([t for _, t in sentence])
        assert pcfg.from_nltk_parse(best, [w for w, _ in sentence]) == tree


def test_span_features():
    X = [[("The", "DT"), ("dog", "NN"), ("barks", "VBZ")], [("Rex", "NNP")]]
    features = SpanFeatures(suffix_length=2).fit(X)
    rows, n_rows = features.transform_flat(X)
    assert rows.shape == (7, features.n_features_out_) and n_rows.tolist() == [6, 1]
    per_sentence = features.transform(X)
    assert [m.shape[0] for m in per_sentence] == [6, 1]
    assert (sp.vstack(per_sentence) != rows).nnz == 0
    names = features.get_feature_names_out()
    row_names = [sorted(names[rows[r].indices]) for r in range(7)]
    assert row_names[0] == sorted(["bias.word", "word=the", "shape=title", "suffix=e",
                                   "suffix=he", "tag=DT", "tag-1=<s>", "tag+1=NN"])
    assert "root" in row_names[5] and "span.length=3" in row_names[5]
    assert "span.first_last.tag=DT|VBZ" in row_names[5]
    assert "span.before.word=<s>" in row_names[5] and "span.after.word=barks" in row_names[3]
    assert "root" in row_names[6] and "bias.word" in row_names[6]   # the one-word sentence
    assert set(row_names[3]) >= {"span.first.word=the", "span.last.word=dog"}
    unknown, _ = features.transform_flat([[("A", "DT"), ("cat", "NN")]])
    assert unknown.shape == (3, features.n_features_out_)
    assert "word=a" not in names and sorted(names[unknown[0].indices]) == sorted(
        ["bias.word", "tag=DT", "tag-1=<s>", "tag+1=NN"])  # (shape "upper" is unknown)
    basic = SpanFeatures(span_features=False).fit(X)
    assert basic.n_features_out_ < features.n_features_out_
    assert sorted(basic.get_feature_names_out()[basic.transform_flat(X)[0][5].indices]) == \
        ["bias.span", "root"]
    empty, n_rows = features.transform_flat([[]])
    assert empty.shape == (0, features.n_features_out_) and n_rows.tolist() == [0]
    with pytest.raises(ValueError, match="suffix_length"):
        SpanFeatures(suffix_length=-1).fit(X)
    with pytest.raises(TypeError, match="list of sentences"):
        SpanFeatures().fit("the dog")


@pytest.mark.skipif(not os.path.isdir(PTB), reason="the Penn Treebank sample is not here")
def test_max_margin_grammar_beats_the_pcfg_on_treebank_sentences():
    trees = [t for t in read_ptb_trees(os.path.join(PTB, "treebank.mrg.gz"))
             if 4 <= len(tree_words(t)) <= 10]
    X = [list(zip(tree_words(t), tree_tags(t))) for t in trees]
    X_train, y_train, X_test, y_test = X[:150], trees[:150], X[150:230], trees[150:230]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pcfg = PCFGParser().fit(X_train, y_train).score(X_test, y_test)
        model = ConstituencyParser(0.3, learner=M3NSimplicialDecomposition(random_state=0)).fit(
            X_train, y_train)
        assert model.score(X_test, y_test) > pcfg


def _ptb_trees(count):
    if not os.path.isdir(PTB):
        pytest.skip("the Penn Treebank sample is not here")
    return read_ptb_trees(os.path.join(PTB, "treebank.mrg.gz"))[:count]


def _brackets(tree):
    """Labelled brackets ``(label, start, end)`` of the phrasal nodes as the bracket loss
    counts them: function tags stripped, ``PRT`` as ``ADVP``, over all word positions."""
    found = Counter()
    for (label, start, end), count in labelled_spans(tree).items():
        label = strip_function_tag(label)
        found["ADVP" if label == "PRT" else label, start, end] += count
    return found


@pytest.mark.parametrize("horizontal, vertical", [(None, 1), (0, 1), (1, 1), (2, 2)])
def test_trees_and_span_states_round_trip(horizontal, vertical):
    """A tree becomes one state per span (2n - 1 nodes of the binarised, collapsed tree),
    and the span states give the tree back, unary chains and markovisation undone."""
    trees = toy_treebank(40, seed=4)[1] + _ptb_trees(150)
    grammar = TreeGrammar(trees, horizontal, vertical)
    for tree in trees:
        words = tree_words(tree)
        n = len(words)
        states = grammar.states(tree, "tree")
        assert states.shape == (n * (n + 1) // 2,)
        assert np.count_nonzero(states) == 2 * n - 1 and np.all(states[:n] > 0)
        assert grammar.tree(states, words) == tree


def test_the_bracket_loss_counts_the_brackets_in_one_tree_only():
    """On treebank trees and the PCFG's parses of their sentences, the loss of
    ConstituencyTree with the grammar's bracket counts is the number of labelled brackets
    in one tree but not the other (false positives plus false negatives)."""
    trees = [t for t in _ptb_trees(1500) if len(tree_words(t)) <= 15]
    X = [list(zip(tree_words(t), tree_tags(t))) for t in trees]
    pcfg = PCFGParser().fit(X, trees)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        parses = pcfg.predict(X)
    grammar = pcfg.grammar_
    structure = ConstituencyTree(grammar.grammar,
                                 label_brackets=grammar.label_brackets).bind(
        1, grammar.n_labels + 1)
    compared = 0
    for tree, parse in zip(trees, parses):
        try:
            predicted = grammar.states(parse, "parse")
        except ValueError:  # a flat fallback tree is no tree of the grammar
            continue
        gold = grammar.states(tree, "tree")
        batch = SequenceBatch(np.zeros((gold.shape[0], 1)),
                              np.array([0, gold.shape[0]], dtype=np.int64))
        expected = sum(((_brackets(tree) - _brackets(parse))
                        + (_brackets(parse) - _brackets(tree))).values())
        assert structure.loss(batch, gold, predicted)[0] == expected
        compared += expected > 0
    assert compared > 30


def test_parsing_needs_no_nltk(fitted, toy, monkeypatch):
    """nltk is optional: without it, parsers fit and predict; output="nltk" says what is
    missing."""
    monkeypatch.setitem(sys.modules, "nltk", None)
    X, y, X_test, _ = toy
    assert PCFGParser().fit(X, y).predict(X_test[:2])
    assert fitted.predict(X_test[:2])
    with pytest.raises(ImportError, match="needs nltk"):
        clone(fitted).set_params(output="nltk").fit(X[:20], y[:20]).predict(X_test[:1])


def test_every_parser_asks_for_y_in_scikit_learns_words():
    from sklstruct.parsing import DependencyParser, PCFGParser

    X, _ = toy_treebank(4, seed=0)
    for parser in (DependencyParser(), ConstituencyParser(), PCFGParser()):
        for sample_weight in (None, [0.0, 1.0, 1.0, 1.0]):
            with pytest.raises(ValueError, match="requires y to be passed, but the target y "
                                                 "is None"):
                parser.fit(X, None, sample_weight=sample_weight)
