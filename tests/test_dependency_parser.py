"""DependencyParser: the scikit-learn workflow of a max-margin dependency parser."""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from sklstruct import (
    L1M3N,
    M3NExcessiveGap,
    M3NExpGrad,
    M3NSimplicialDecomposition,
    StructSVMCuttingPlane,
)
from sklstruct._inference.dependency import check_heads
from sklstruct.datasets import make_dependency_treebank
from sklstruct.parsing import (
    ArcFeatures,
    DependencyParser,
    attachment_scorer,
    attachment_scores,
)

def make_treebank(n_sentences, seed):
    data = make_dependency_treebank(n_sentences, random_state=seed)
    return data.sentences, list(zip(data.heads, data.relations))


def _fit(parser, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return parser.fit(X, y)


@pytest.fixture(scope="module")
def treebank():
    return make_treebank(60, seed=0), make_treebank(30, seed=1)


@pytest.mark.parametrize("relations", ["separate", "joint"])
def test_parser_learns_heads_and_relations(treebank, relations):
    (X, y), (X_test, y_test) = treebank
    parser = _fit(DependencyParser(relations=relations), X, y)
    predictions = parser.predict(X_test)
    assert all(isinstance(p, tuple) and p[0].dtype == np.int64 for p in predictions)
    heads = [p[0] for p in predictions]
    scores = attachment_scores([t[0] for t in y_test], heads, [t[1] for t in y_test],
                               [p[1] for p in predictions])
    assert scores["uas"] >= 0.98 and scores["las"] >= 0.98
    assert parser.score(X_test, y_test) == scores["uas"]
    assert set(parser.relations_) == {"det", "amod", "nsubj", "obj", "root", "advmod", "prep",
                                      "pobj", "punct"}
    check_heads(np.concatenate(heads), [len(s) for s in X_test], projective=True)


def test_heads_only_trees_predict_heads(treebank):
    (X, y), _ = treebank
    parser = _fit(DependencyParser(), X, [t[0] for t in y])
    predictions = parser.predict(X[:3])
    assert all(isinstance(p, np.ndarray) for p in predictions)
    assert parser.relations_ is None and parser.relation_learner_ is None


def test_empty_sentences(treebank):
    (X, y), _ = treebank
    parser = _fit(DependencyParser(), X, y)
    predictions = parser.predict([[], X[0], []])
    assert [p[0].shape[0] for p in predictions] == [0, len(X[0]), 0]
    assert predictions[0][1].shape == (0,)
    assert parser.predict([]) == []
    with pytest.raises(ValueError, match="sentence 1 is empty"):
        DependencyParser().fit([X[0], []], [y[0], (np.zeros(0, int), np.zeros(0, object))])


def test_score_names_a_tree_of_the_wrong_length(treebank):
    (X, y), _ = treebank
    parser = _fit(DependencyParser(), X, y)
    wrong = [y[0], (y[1][0][:-1], y[1][1][:-1])]
    with pytest.raises(ValueError, match=f"tree 1 of y has {len(X[1]) - 1} heads for a "
                                         f"sentence of {len(X[1])} tokens"):
        parser.score(X[:2], wrong)


def test_trees_that_are_not_trees_name_their_sentence(treebank):
    (X, y), _ = treebank
    heads = [t[0].copy() for t in y[:3]]
    cyclic = [h.copy() for h in heads]
    cyclic[2][0], cyclic[2][1] = 2, 1  # tokens 1 and 2 head each other
    with pytest.raises(ValueError, match="sentence 2 are not a tree"):
        DependencyParser().fit(X[:3], cyclic)
    out_of_range = [h.copy() for h in heads]
    out_of_range[1][0] = 99
    with pytest.raises(ValueError, match=r"y\[1\] has heads outside"):
        DependencyParser().fit(X[:3], out_of_range)
    two_roots = [h.copy() for h in heads]
    two_roots[0][0] = 0
    with pytest.raises(ValueError, match="sentence 0 have 2 tokens attached to the root"):
        DependencyParser(single_root=True).fit(X[:3], two_roots)
    with pytest.raises(ValueError, match=r"tree 1 of y has (\d+) heads for a sentence of \d+ tokens"):
        DependencyParser().fit(X[:3], [heads[0], heads[1][:-1], heads[2]])
    with pytest.raises(ValueError, match="X has 3 sentences but y has 2"):
        DependencyParser().fit(X[:3], heads[:2])


@pytest.mark.parametrize("projective", [True, False])
def test_decoders_and_single_root(treebank, projective):
    (X, y), (X_test, _) = treebank
    parser = _fit(DependencyParser(projective=projective, single_root=True), X, y)
    heads = np.concatenate([p[0] for p in parser.predict(X_test)])
    check_heads(heads, [len(s) for s in X_test], projective=projective, single_root=True)


def test_clone_pickle_and_grid_search(treebank):
    (X, y), (X_test, y_test) = treebank
    parser = _fit(DependencyParser(0.1, learner=M3NSimplicialDecomposition(max_points=3)), X,
                  y)
    again = pickle.loads(pickle.dumps(parser))
    for a, b in zip(parser.predict(X_test), again.predict(X_test)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    fresh = clone(parser)
    assert not hasattr(fresh, "learner_") and fresh.C == 0.1
    assert parser.learner_.C == 0.1 and parser.learner_.max_points == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(DependencyParser(), {"C": [0.001, 0.1]}, cv=2,
                              scoring=attachment_scorer).fit(X, y)
    assert search.best_params_["C"] in (0.001, 0.1)
    assert search.score(X_test, y_test) == attachment_scorer(search.best_estimator_, X_test,
                                                             y_test)


def test_random_state_is_given_to_the_learners(treebank):
    (X, y), _ = treebank
    X, y = X[:30], y[:30]
    first = _fit(DependencyParser(random_state=0), X, y)
    second = _fit(DependencyParser(random_state=0), X, y)
    assert first.learner_.random_state == 0 and first.relation_learner_.random_state == 0
    np.testing.assert_array_equal(first.learner_.w_, second.learner_.w_)
    np.testing.assert_array_equal(first.relation_learner_.w_, second.relation_learner_.w_)
    same = _fit(DependencyParser(learner=M3NSimplicialDecomposition(random_state=0)), X, y)
    np.testing.assert_array_equal(first.learner_.w_, same.learner_.w_)
    other = _fit(DependencyParser(random_state=1), X, y)
    assert other.learner_.n_iter_ != first.learner_.n_iter_ or not np.array_equal(
        other.learner_.w_, first.learner_.w_)
    # None leaves the learner's own seed
    kept = DependencyParser(learner=M3NSimplicialDecomposition(random_state=5))
    assert _fit(kept, X, y).learner_.random_state == 5
    with pytest.raises(ValueError, match="random_state"):
        DependencyParser(random_state="seed").fit(X, y)


LEARNERS = [StructSVMCuttingPlane(), M3NExpGrad(), M3NExcessiveGap(max_iter=60),
            L1M3N(), M3NSimplicialDecomposition(max_points=1)]


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda e: type(e).__name__)
def test_every_learner_trains_the_parser(treebank, learner):
    (X, y), (X_test, y_test) = treebank
    parser = _fit(DependencyParser(0.1, learner=learner,
                                   features=ArcFeatures(features_from="all")), X[:30],
                  [t[0] for t in y[:30]])
    assert parser.score(X_test, y_test) >= 0.9


def test_a_learners_own_C_is_named_as_unused(treebank):
    """The parser sets its learner's C: a learner given another C (as a search over
    learner__C gives it) changed nothing, without a word."""
    (X, y), _ = treebank
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(DependencyParser(learner=M3NSimplicialDecomposition(C=5.0)), X[:10], y[:10])
    # once per fit, though the parser trains two learners (arcs and relations)
    assert sum("learner's C=5.0 is not used" in str(w.message) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*learner's C")
        _fit(DependencyParser(learner=M3NSimplicialDecomposition()), X[:10], y[:10])


def test_the_learners_warnings_and_lines_name_their_role(treebank, capsys):
    (X, y), _ = treebank
    parser = DependencyParser(learner=M3NSimplicialDecomposition(max_iter=1, verbose=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parser.fit(X[:10], y[:10])
    messages, out = [str(w.message) for w in caught], capsys.readouterr().out
    for role in ("arc", "relation"):
        name = f"DependencyParser's {role} M3NSimplicialDecomposition"
        assert any(m.startswith(f"{name} did not reach") for m in messages), messages
        assert f"[{name}]" in out


def test_a_learner_without_structure_is_refused(treebank):
    from sklearn.linear_model import LogisticRegression

    (X, y), _ = treebank
    with pytest.raises(TypeError, match="structure parameter"):
        DependencyParser(learner=LogisticRegression()).fit(X, y)


@pytest.mark.parametrize("relations", ["separate", "joint"])
def test_relations_keep_their_kind(treebank, relations):
    (X, y), _ = treebank
    names = sorted({r for _, rels in y for r in rels})
    code = {name: k + 1 for k, name in enumerate(names)}  # integer relations
    y_int = [(heads, np.array([code[r] for r in rels])) for heads, rels in y]
    parser = _fit(DependencyParser(relations=relations), X, y_int)
    assert parser.relations_.dtype.kind == "i"
    predictions = parser.predict(X)
    assert all(isinstance(r, (int, np.integer)) for _, rels in predictions for r in rels)
    scores = attachment_scores([t[0] for t in y_int], [p[0] for p in predictions],
                               [t[1] for t in y_int], [p[1] for p in predictions])
    assert scores["las"] >= 0.98  # (the predicted 1 is the true 1, not "1")


@pytest.mark.parametrize("bad, kinds", [(["nsubj", 1], "number, str"),
                                        ([None, None], "NoneType")])
def test_relations_of_mixed_or_unusable_kinds_are_refused(bad, kinds):
    X = [[{"form": "dogs", "postag": "NNS"}, {"form": "bark", "postag": "VBP"}]]
    with pytest.raises(TypeError, match=kinds):
        DependencyParser().fit(X, [([2, 0], bad)])


@pytest.mark.parametrize("relations", ["separate", "joint"])
def test_a_treebank_of_one_relation_predicts_it(treebank, relations):
    (X, y), _ = treebank
    y_one = [(heads, ["dep"] * len(heads)) for heads, _ in y]
    parser = _fit(DependencyParser(relations=relations), X, y_one)
    assert parser.relations_.tolist() == ["dep"] and parser.relation_learner_ is None
    predictions = parser.predict(X[:5])
    assert all(rels.tolist() == ["dep"] * len(rels) for _, rels in predictions)


def test_one_token_sentences_have_nothing_to_learn():
    X = [[{"form": "a", "postag": "A"}]] * 3
    with pytest.raises(ValueError, match="nothing to learn"):
        DependencyParser().fit(X, [[0]] * 3)


def test_conllu_token_dicts_train_the_default_parser(treebank):
    (X, y), _ = treebank
    # CoNLL-U columns: upos and xpos, here xpos empty ("_") as in many treebanks
    conllu = [[{"form": t["form"], "upos": t["postag"], "xpos": "_"} for t in sentence]
              for sentence in X]
    parser = _fit(DependencyParser(), conllu, y)
    assert parser.features_.tag_ == "upos"
    assert parser.score(conllu, y) == _fit(DependencyParser(), X, y).score(X, y)
    with_xpos = [[{**t, "xpos": t["upos"]} for t in sentence] for sentence in conllu]
    assert ArcFeatures().fit(with_xpos, y).tag_ == "xpos"
    assert ArcFeatures(tag="upos").fit(with_xpos, y).tag_ == "upos"
    untagged = [[{"form": t["form"]} for t in sentence] for sentence in X]
    with pytest.raises(ValueError, match=r"ArcFeatures\(tag=\.\.\.\)"):
        DependencyParser().fit(untagged, y)


# ------------------------------------------------- non-projective trees, projective decoding
def _basque(data_home, n):
    import os

    from sklstruct.parsing import read_conll

    data = read_conll(os.path.join(data_home, "conll2007_eus", "eus.train.gz"),
                      encoding="latin-1")
    return data.sentences[:n], data.heads[:n]


def test_projective_decoding_certifies_on_non_projective_training_trees(data_home):
    """Basque has non-projective trees; decoding projective trees, the structured hinge
    ``max(0, max_ybar ...)`` takes the true tree where it beats every projective one. The
    compiled passes' hinge and directions include it: their certified primal is
    ``objective()``, and the learners agree within their gaps; learners on marginals,
    which cannot represent such a tree, warn."""
    from sklstruct.structures import DependencyTree

    X, heads = _basque(data_home, 10)
    lengths = np.array([len(s) for s in X])
    with pytest.raises(ValueError, match="not projective"):
        check_heads(np.concatenate(heads), lengths, projective=True)
    fits = []
    for learner in (M3NSimplicialDecomposition(random_state=0, tol=1e-3),
                    M3NSimplicialDecomposition(random_state=0, max_points=1, tol=1e-3),
                    StructSVMCuttingPlane(tol=1e-3)):
        parser = _fit(DependencyParser(C=0.1, learner=learner), X, heads)
        rows, n_rows = parser.features_.transform_flat(X)
        labels = DependencyTree().labels_from_heads(lengths, np.concatenate(heads))
        h = parser.learner_.history_
        assert parser.learner_.objective(rows, labels, lengths=n_rows) == \
            pytest.approx(h["primal"][-1], rel=1e-9)
        certified = np.isfinite(h["gap"])  # (rows of uncertified passes hold NaN)
        assert np.all(h["gap"][certified] >= -1e-9 * np.abs(h["primal"][certified]))
        fits.append((h["primal"][-1], h["gap"][-1]))
    for (p1, g1), (p2, g2) in itertools.combinations(fits, 2):
        assert abs(p1 - p2) <= g1 + g2 + 1e-9
    for learner in (M3NExpGrad(max_iter=3), M3NExcessiveGap(max_iter=3)):
        with pytest.warns(UserWarning, match="cannot represent a non-projective"):
            _fit(DependencyParser(learner=learner), X, heads)
    # without projectivity the marginals hold every tree
    _fit(DependencyParser(C=0.1, projective=False, learner=M3NExpGrad(max_iter=5)), X, heads)
    # nor do trees of weight 0, which the fit leaves out
    projective = []
    for tree, length in zip(heads, lengths):
        try:
            check_heads(tree, [length], projective=True)
            projective.append(True)
        except ValueError:
            projective.append(False)
    assert 0 < sum(projective) < len(X)
    learner = M3NExpGrad(structure=DependencyTree(), max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("error", message=".*cannot represent")
        learner.fit(rows, labels, lengths=n_rows, sample_weight=np.array(projective, float))
        with pytest.raises(UserWarning, match="cannot represent"):
            learner.fit(rows, labels, lengths=n_rows)


def test_the_oracle_returns_a_non_projective_true_tree_that_beats_every_projective_one():
    from sklstruct.structures import DependencyTree
    from sklstruct.utils import SequenceBatch

    heads = np.array([3, 4, 0, 3])  # arcs 3 -> 1 and 4 -> 2 cross
    structure = DependencyTree().bind(1, 2, np.array([0, 1]), None)
    labels = structure.labels_from_heads(np.array([4]), heads)
    batch = SequenceBatch(np.ones((16, 1)), np.array([0, 16]))
    unary = np.zeros((16, 2))
    unary[:, 1] = np.where(labels == 1, 3.0, -3.0)  # the true arcs score far above the rest
    found, losses, scores = structure.loss_augmented_decode(batch, unary, np.zeros(0),
                                                            labels)
    np.testing.assert_array_equal(found, labels)
    assert losses[0] == 0.0 and scores[0] == pytest.approx(12.0)
    # a projective decoder alone returns another tree
    assert np.any(structure.decode(batch, unary, np.zeros(0)) != labels)
