"""Parsers and parse metrics with ``sample_weight``: one weight per sentence, an integer
weight equal to repeating the sentence (the learners' weighted objective, the weighted
attachment and bracket scores) and passed through model selection."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklstruct import M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct.datasets import make_dependency_treebank
from sklstruct.parsing import (ConstituencyParser, DependencyParser, attachment_scorer,
                               attachment_scores, bracket_f1_scorer, bracket_scores)
from sklstruct.structures import DependencyTree

from ._parsing_reference import toy_treebank

WEIGHTS = np.array([2, 1, 1, 3, 1, 2, 1, 1, 2, 1, 1, 1])
CONFLICT_WEIGHTS = np.array([2, 1, 1, 3, 1, 2, 1, 1, 2, 1, 1, 1, 1, 3, 1, 1, 2, 1])


def _repeated(items, weights):
    return [item for item, k in zip(items, weights) for _ in range(int(k))]


def _fit(parser, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return parser.fit(X, y, **params)


def _treebank(n, seed):
    data = make_dependency_treebank(n, random_state=seed)
    return data.sentences, list(zip(data.heads, data.relations))


def _agree(weighted, repeated):
    """Two fits of the same objective: equal optima within the sum of their gaps."""
    a, b = weighted.history_, repeated.history_
    assert abs(a["primal"][-1] - b["primal"][-1]) <= a["gap"][-1] + b["gap"][-1] + 1e-9


def _conflicting_treebank():
    """Twelve sentences, and six of them again with chain trees (each token headed by the
    one before it): the trees cannot all be fitted, so the weights matter."""
    X, y = _treebank(12, seed=3)
    chains = [(np.arange(len(s)), np.array(["dep"] * len(s), dtype=object)) for s in X[:6]]
    return X + X[:6], y + chains


def test_dependency_parser_weights_equal_repeated_sentences():
    X, y = _conflicting_treebank()
    X_test, _ = _treebank(10, seed=4)
    learner = M3NSimplicialDecomposition(tol=1e-6, random_state=0)
    weighted = _fit(DependencyParser(C=1.0, learner=learner), X, y, sample_weight=CONFLICT_WEIGHTS)
    repeated = _fit(DependencyParser(C=1.0, learner=learner),
                    _repeated(X, CONFLICT_WEIGHTS), _repeated(y, CONFLICT_WEIGHTS))
    _agree(weighted.learner_, repeated.learner_)
    _agree(weighted.relation_learner_, repeated.relation_learner_)
    unweighted = _fit(DependencyParser(C=1.0, learner=learner), X, y)
    rows, n_rows = weighted.features_.transform_flat(X)
    labels = np.zeros(rows.shape[0], dtype=np.int64)
    heads = np.concatenate([np.asarray(h) for h, _ in y])
    labels[DependencyTree.arc_index(np.array([len(s) for s in X]), heads)] = 1
    # the weighted fit minimises the weighted objective, which the unweighted one does not
    objective = weighted.learner_.objective(rows, labels, lengths=n_rows,
                                            sample_weight=CONFLICT_WEIGHTS)
    assert objective < unweighted.learner_.objective(rows, labels, lengths=n_rows,
                                                     sample_weight=CONFLICT_WEIGHTS) \
        - 10 * weighted.learner_.history_["gap"][-1]
    assert objective == pytest.approx(weighted.learner_.history_["primal"][-1], rel=1e-9)
    for a, b in zip(weighted.predict(X_test), repeated.predict(X_test)):
        np.testing.assert_array_equal(a[0], b[0])


def test_constituency_parser_weights_equal_repeated_sentences():
    X, y = toy_treebank(12, seed=5)
    learner = StructSVMCuttingPlane(tol=1e-9, max_iter=5000)
    weighted = _fit(ConstituencyParser(1.0, learner=learner), X, y, sample_weight=WEIGHTS)
    repeated = _fit(ConstituencyParser(1.0, learner=learner),
                    _repeated(X, WEIGHTS), _repeated(y, WEIGHTS))
    _agree(weighted.learner_, repeated.learner_)
    objective = weighted.objective(X, y, sample_weight=WEIGHTS)
    assert objective == pytest.approx(weighted.learner_.history_["primal"][-1], rel=1e-9)
    assert objective == pytest.approx(weighted.objective(_repeated(X, WEIGHTS),
                                                         _repeated(y, WEIGHTS)), rel=1e-12)


def test_weighted_parse_scores_equal_those_of_repeated_sentences():
    rng = np.random.default_rng(0)
    weights = np.array([2, 0, 1, 3])
    true = [rng.integers(0, 5, size=4) for _ in range(4)]
    pred = [np.where(rng.random(4) < 0.4, 0, h) for h in true]
    rel_true = [np.array(["a", "b", "a", "c"])[rng.integers(0, 4, size=4) % 4] for _ in true]
    rel_pred = [np.where(rng.random(4) < 0.5, "a", r) for r in rel_true]
    scores = attachment_scores(true, pred, rel_true, rel_pred, sample_weight=weights)
    reference = attachment_scores(*(_repeated(a, weights)
                                    for a in (true, pred, rel_true, rel_pred)))
    assert scores["uas"] == pytest.approx(reference["uas"], rel=1e-12)
    assert scores["las"] == pytest.approx(reference["las"], rel=1e-12)
    assert scores["n_tokens"] == 16
    assert attachment_scores(true, pred, sample_weight=np.ones(4)) == \
        attachment_scores(true, pred)

    X, y = toy_treebank(6, seed=2)
    parser = _fit(ConstituencyParser(0.01, learner=StructSVMCuttingPlane(max_iter=3)), X, y)
    predicted = parser.predict(X)
    weights = np.array([2, 0, 1, 3, 1, 1])
    scores = bracket_scores(y, predicted, sample_weight=weights)
    reference = bracket_scores(_repeated(y, weights), _repeated(predicted, weights))
    for name in ("precision", "recall", "f1", "exact_match"):
        assert scores[name] == pytest.approx(reference[name], rel=1e-12)
    assert parser.score(X, y, sample_weight=weights) == pytest.approx(reference["f1"])
    assert bracket_f1_scorer(parser, X, y, sample_weight=weights) == \
        pytest.approx(reference["f1"])


def test_searches_fit_and_score_parsers_with_the_weights():
    """A search fitted with sample_weight fits each split with its weights and scores it
    weighted, through the parser's score and through the parse scorers."""
    X, y = _treebank(16, seed=6)
    weights = np.random.default_rng(3).uniform(0.2, 3.0, size=16)
    folds = KFold(2)
    learner = M3NSimplicialDecomposition(random_state=0)
    for scoring in (None, attachment_scorer, {"uas": attachment_scorer}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no "does not support sample_weight" warning)
            search = GridSearchCV(DependencyParser(learner=learner), {"C": [0.1]}, cv=folds,
                                  scoring=scoring, refit=False).fit(X, y,
                                                                    sample_weight=weights)
        key = "uas" if isinstance(scoring, dict) else "score"
        for k, (train, test) in enumerate(folds.split(X)):
            parser = _fit(DependencyParser(C=0.1, learner=learner), [X[i] for i in train],
                          [y[i] for i in train], sample_weight=weights[train])
            expected = parser.score([X[i] for i in test], [y[i] for i in test],
                                    sample_weight=weights[test])
            assert search.cv_results_[f"split{k}_test_{key}"][0] == pytest.approx(
                expected, rel=1e-12)


@pytest.mark.parametrize("weights, match", [
    (np.ones(3), "expected \\(4,\\)"),
    (np.array([1.0, -1.0, 1.0, 1.0]), "Negative"),
    (np.zeros(4), "all zero"),
])
def test_bad_sentence_weights_are_refused(weights, match):
    X, y = _treebank(4, seed=1)
    with pytest.raises(ValueError, match=match):
        DependencyParser().fit(X, y, sample_weight=weights)
    Xc, yc = toy_treebank(4, seed=1)
    with pytest.raises(ValueError, match=match):
        ConstituencyParser().fit(Xc, yc, sample_weight=weights)


def test_pcfg_weights_equal_repeated_trees():
    """The relative frequencies with weighted counts are those of the repeated trees; a
    tree of weight 0 is left out, its labels and rules included."""
    from sklstruct.parsing import PCFGParser

    X, y = toy_treebank(12, seed=7)
    weights = np.array([2, 0, 1, 3, 1, 2, 0, 1, 2, 1, 1, 1])
    weighted = PCFGParser().fit(X, y, sample_weight=weights)
    repeated = PCFGParser().fit(_repeated(X, weights), _repeated(y, weights))
    assert weighted.grammar_.labels == repeated.grammar_.labels
    assert weighted.grammar_.rules == repeated.grammar_.rules
    for name in ("label_log_prob_", "rule_log_prob_", "root_log_prob_"):
        np.testing.assert_allclose(getattr(weighted, name), getattr(repeated, name),
                                   rtol=1e-12)
    assert weighted.predict(X) == repeated.predict(X)
    plain = PCFGParser().fit(X, y)
    ones = PCFGParser().fit(X, y, sample_weight=np.ones(12))
    np.testing.assert_array_equal(plain.rule_log_prob_, ones.rule_log_prob_)


def test_sentences_of_weight_zero_are_left_out():
    """A sentence of weight 0 is absent from the fit: features, relations and grammar
    included (its unique relation and labels do not appear)."""
    X, y = _treebank(10, seed=3)
    heads, relations = y[0]
    y = [(heads, np.array(["ODD"] * len(heads), dtype=object))] + y[1:]
    weights = np.r_[0.0, np.ones(4), 2.0, np.ones(4)]
    learner = M3NSimplicialDecomposition(random_state=0)
    weighted = _fit(DependencyParser(C=0.1, learner=learner), X, y, sample_weight=weights)
    subset = _fit(DependencyParser(C=0.1, learner=learner), X[1:], y[1:],
                  sample_weight=weights[1:])
    assert "ODD" not in weighted.relations_
    np.testing.assert_array_equal(weighted.learner_.w_, subset.learner_.w_)
    np.testing.assert_array_equal(weighted.relation_learner_.w_, subset.relation_learner_.w_)

    Xc, yc = toy_treebank(12, seed=5)
    yc = [("ZZ", *yc[0][1:])] + yc[1:]  # a root label no other tree has
    weights = np.r_[0.0, np.ones(11)]
    for parser in (ConstituencyParser(1.0, learner=StructSVMCuttingPlane(max_iter=50)),):
        weighted = _fit(parser, Xc, yc, sample_weight=weights)
        assert "ZZ" not in weighted.grammar_.labels
        np.testing.assert_array_equal(
            weighted.learner_.w_, _fit(parser, Xc[1:], yc[1:]).learner_.w_)
        assert weighted.objective(Xc, yc, sample_weight=weights) == \
            weighted.objective(Xc[1:], yc[1:])


def test_routed_searches_score_parses_weighted_only_when_asked():
    import copy

    import sklearn

    X, y = _treebank(16, seed=6)
    weights = np.random.default_rng(3).uniform(0.2, 3.0, size=16)
    folds = KFold(2)
    requested = copy.deepcopy(attachment_scorer)
    with sklearn.config_context(enable_metadata_routing=True):
        requested.set_score_request(sample_weight=True)
        parser = DependencyParser(learner=M3NSimplicialDecomposition(random_state=0))
        parser.set_fit_request(sample_weight=True)
        results = {name: GridSearchCV(parser, {"C": [0.1]}, cv=folds, scoring=scoring).fit(
            X, y, sample_weight=weights).cv_results_
            for name, scoring in (("plain", attachment_scorer), ("requested", requested))}
    for k, (train, test) in enumerate(folds.split(X)):
        fitted = _fit(DependencyParser(C=0.1, learner=M3NSimplicialDecomposition(
            random_state=0)), [X[i] for i in train], [y[i] for i in train],
            sample_weight=weights[train])
        X_test, y_test = [X[i] for i in test], [y[i] for i in test]
        assert results["plain"][f"split{k}_test_score"][0] == \
            pytest.approx(fitted.score(X_test, y_test), rel=1e-12)
        assert results["requested"][f"split{k}_test_score"][0] == pytest.approx(
            fitted.score(X_test, y_test, sample_weight=weights[test]), rel=1e-12)


@pytest.mark.parametrize("relations", ["separate", "joint"])
def test_dependency_parser_objective_is_the_certified_primal(relations):
    X, y = _treebank(12, seed=2)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, size=12)
    parser = _fit(DependencyParser(C=0.1, relations=relations, learner=M3NSimplicialDecomposition(
        random_state=0)), X, y, sample_weight=weights)
    assert parser.objective(X, y, sample_weight=weights) == pytest.approx(
        parser.learner_.history_["primal"][-1], rel=1e-9)
    # parameters set after fit change nothing until the next fit (they were read)
    objective = parser.objective(X, y, sample_weight=weights)
    parser.set_params(relations="joint" if relations == "separate" else "separate",
                      single_root=True)
    assert parser.objective(X, y, sample_weight=weights) == objective
    if relations == "joint":
        with pytest.raises(ValueError, match="not seen at fit"):
            parser.objective(X[:1], [(y[0][0], np.array(["??"] * len(y[0][0])))])
        with pytest.raises(ValueError, match="give \\(heads, relations\\) pairs"):
            parser.objective(X, [heads for heads, _ in y])


def test_errors_name_sentences_by_their_position_whatever_the_weights():
    """Sentences of weight 0 are left out of a fit, but after every sentence is checked:
    an error names the caller's position (it named the position among the kept ones)."""
    from sklstruct.parsing import PCFGParser

    X, y = _treebank(12, seed=0)
    heads = np.asarray(y[10][0]).copy()
    heads[0] = 99
    y[10] = (heads, y[10][1])
    weights = np.ones(12)
    weights[:3] = 0
    for sample_weight in (None, weights):
        with pytest.raises(ValueError, match=r"y\[10\] has heads outside"):
            DependencyParser().fit(X, y, sample_weight=sample_weight)
    Xc, yc = toy_treebank(12, seed=5)
    yc[10] = yc[9] if len(Xc[9]) != len(Xc[10]) else yc[11]
    for parser in (ConstituencyParser(), PCFGParser()):
        for sample_weight in (None, weights):
            with pytest.raises(ValueError, match=r"y\[10\] does not span the sentence X\[10\]"):
                parser.fit(Xc, yc, sample_weight=sample_weight)
