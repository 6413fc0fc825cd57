"""What users of sklearn-crfsuite and LinearSVC do without reading the docs, each as a test."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.model_selection import (GridSearchCV, GroupKFold, RandomizedSearchCV,
                                     cross_val_score, cross_validate)
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC

from sklstruct import (ChainStructure, L1M3N, M3NExcessiveGap, M3NExpGrad,
                       M3NSimplicialDecomposition, MultiClass, StructSVMCuttingPlane)
from sklstruct.metrics import chunk_f1_score, chunk_f1_scorer, token_accuracy_scorer
from sklstruct.pipeline import SequencePipeline, make_sequence_pipeline
from sklstruct.preprocessing import SequenceVectorizer
from sklstruct.utils import lengths_from_sequence_ids as lengths_from_ids, lengths_to_groups

from ._helpers import make_chain_data

LEARNERS = [StructSVMCuttingPlane, M3NExpGrad, M3NExcessiveGap, L1M3N,
            M3NSimplicialDecomposition]


@pytest.fixture
def list_of_lists():
    """Sequences with labels as lists of str, crfsuite's convention."""
    X, y = make_chain_data(n_sequences=30, seed=3)
    names = np.array(["B-NP", "I-NP", "O"])
    return X, [list(names[labels]) for labels in y]


def token_dicts(X):
    return [[{f"f{j}": float(v) for j, v in enumerate(row)} | {"bias": 1.0} for row in seq]
            for seq in X]


# ---------------------------------------------------------------- y as a list of lists of str
@pytest.mark.parametrize("search", ["grid", "randomized", "cross_validate"])
def test_list_of_lists_labels_under_model_selection(list_of_lists, search):
    X, y = list_of_lists
    model = M3NSimplicialDecomposition(random_state=0)
    if search == "grid":
        result = GridSearchCV(model, {"C": [0.1, 1.0]}, cv=3).fit(X, y)
        assert result.best_params_["C"] in (0.1, 1.0)
        predicted = result.predict(X)
        assert isinstance(predicted, list) and predicted[0][0] in ("B-NP", "I-NP", "O")
    elif search == "randomized":
        result = RandomizedSearchCV(model, {"C": [0.1, 0.3, 1.0]}, n_iter=2, cv=3,
                                    random_state=0).fit(X, y)
        assert result.best_score_ > 0.5
    else:
        scores = cross_validate(model, X, y, cv=3)["test_score"]
        assert scores.shape == (3,) and np.all(scores > 0.5)


def test_sequence_models_are_not_stratified_classifiers_but_multiclass_ones_are():
    # Stratified folds need one label per sample; sequence labels have none (and scikit-learn's
    # target check rejects ragged lists of lists). MultiClass() declares the plain
    # classification task, where scikit-learn stratifies as for LinearSVC.
    assert not sklearn.base.is_classifier(M3NExpGrad())
    assert sklearn.base.is_classifier(M3NExpGrad(MultiClass()))


def test_unstratified_multiclass_folds_warn_and_say_how_to_stratify():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    X = rng.normal(size=(60, 3)) + 4.0 * np.eye(3)[y]
    with pytest.warns(UserWarning, match="class.*not seen in fit.*MultiClass"):
        scores = cross_val_score(M3NSimplicialDecomposition(C=1.0, random_state=0), X, y,
                                 cv=3, error_score="raise")
    assert np.all(scores < 0.7)  # each test fold is a class the model never saw
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*not seen in fit")
        scores = cross_val_score(M3NSimplicialDecomposition(MultiClass(), C=1.0,
                                                            random_state=0), X, y, cv=3,
                                 error_score="raise")
    assert np.all(scores > 0.8)


# ---------------------------------------------------------------- flat X + lengths under CV
def test_flat_form_under_cross_validation_with_sequence_ids():
    X, y = make_chain_data(n_sequences=30, seed=4)
    lengths = np.array([len(s) for s in X])
    X_flat, y_flat = np.vstack(X), np.concatenate(y)
    ids = lengths_to_groups(lengths)
    local = [StructSVMCuttingPlane(C=1.0).fit(X_flat[ids != k], y_flat[ids != k],
                                              sequence_ids=ids[ids != k])
             for k in range(2)]
    assert local[0].structure_.__class__ is ChainStructure
    with sklearn.config_context(enable_metadata_routing=True):
        model = StructSVMCuttingPlane(C=1.0).set_fit_request(
            sequence_ids=True, lengths=False).set_score_request(
            sequence_ids=True, lengths=False, sample_weight=False)
        scores = cross_validate(model, X_flat, y_flat, cv=GroupKFold(3),
                                params={"sequence_ids": ids, "groups": ids})["test_score"]
    assert np.all(scores > 0.5)
    # the sequence scorers take the fold's ids too (they hand them to predict)
    with sklearn.config_context(enable_metadata_routing=True):
        model = StructSVMCuttingPlane(C=1.0).set_fit_request(sequence_ids=True, lengths=False)
        tags = np.array(["B-NP", "I-NP", "O"])[y_flat]
        results = cross_validate(model, X_flat, tags, cv=GroupKFold(3),
                                 scoring={"f1": chunk_f1_scorer, "acc": token_accuracy_scorer},
                                 params={"sequence_ids": ids, "groups": ids})
    assert np.all(np.isfinite(results["test_f1"])) and np.all(results["test_acc"] > 0.5)
    # equals the list form fitted on the same sequences
    held_out = np.arange(len(X)) % 3 == 0
    flat_mask = held_out[ids] == False  # noqa: E712
    a = StructSVMCuttingPlane(C=1.0).fit(X_flat[flat_mask], y_flat[flat_mask],
                                         sequence_ids=ids[flat_mask])
    b = StructSVMCuttingPlane(C=1.0).fit([x for x, h in zip(X, held_out) if not h],
                                         [t for t, h in zip(y, held_out) if not h])
    np.testing.assert_allclose(a.w_, b.w_)


def test_sequence_ids_and_lengths_are_exclusive_and_checked():
    X, y = make_chain_data(n_sequences=5, seed=0)
    X_flat, y_flat = np.vstack(X), np.concatenate(y)
    lengths = [len(s) for s in X]
    with pytest.raises(ValueError, match="either lengths or sequence_ids"):
        StructSVMCuttingPlane().fit(X_flat, y_flat, lengths=lengths,
                                    sequence_ids=lengths_to_groups(lengths))
    with pytest.raises(ValueError, match="sequence_ids has 3 entries"):
        StructSVMCuttingPlane().fit(X_flat, y_flat, sequence_ids=[0, 0, 1])
    # numpy reads [1, "1"] as two equal strings: ids of mixed types are refused
    assert lengths_from_ids(["1", "1", "2"], 3).tolist() == [2, 1]
    with pytest.raises(TypeError, match="mixes strings"):
        lengths_from_ids([1, "1", "2"], 3)


# ---------------------------------------------------------------- flat X without lengths
def test_chain_model_refuses_flat_input_without_lengths():
    X, y = make_chain_data(n_sequences=10, seed=5)
    model = StructSVMCuttingPlane().fit(X, y)
    for method in ("predict", "predict_marginals", "decision_function", "predict_proba"):
        with pytest.raises(ValueError, match="lengths="):
            getattr(model, method)(np.vstack(X))
    with pytest.raises(ValueError, match="lengths=.*set_score_request"):
        model.score(np.vstack(X), np.concatenate(y))
    # an explicit chain structure with a flat y and no lengths is an error, not multiclass
    with pytest.raises(ValueError, match="lengths="):
        StructSVMCuttingPlane(ChainStructure()).fit(np.vstack(X), np.concatenate(y))
    # structure="auto" on a plain 2-D X is the documented multiclass form
    assert isinstance(StructSVMCuttingPlane().fit(np.vstack(X), np.concatenate(y))
                      .structure_, MultiClass)


# ---------------------------------------------------------------- token feature dicts
def test_feature_dicts_name_the_pipeline_helper():
    X, y = make_chain_data(n_sequences=10, seed=6)
    with pytest.raises(TypeError, match="make_sequence_pipeline"):
        StructSVMCuttingPlane().fit(token_dicts(X), y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_feature_dicts_through_the_pipeline_helper(list_of_lists):
    X, y = list_of_lists
    pipe = make_sequence_pipeline(M3NSimplicialDecomposition(max_iter=30))
    assert isinstance(pipe, SequencePipeline)
    pipe.fit(token_dicts(X), y)
    assert pipe.score(token_dicts(X), y) > 0.6
    search = GridSearchCV(pipe, {"m3nsimplicialdecomposition__C": [0.1, 1.0]}, cv=3)
    search.fit(token_dicts(X), y)
    # named views of the weights, as sklearn-crfsuite's CRF has
    state = pipe.state_features_
    assert state[("f0", "B-NP")] == pytest.approx(
        pipe[-1].coef_[0, pipe[0].vocabulary_["f0"]])
    transitions = pipe.transition_features_
    assert transitions[("B-NP", "I-NP")] == pytest.approx(pipe[-1].transition_[0, 1])
    assert set(transitions) == {(a, b) for a in pipe.classes_ for b in pipe.classes_}


def test_none_feature_value_is_an_error_not_a_number():
    with pytest.raises(ValueError, match="None"):
        SequenceVectorizer().fit([[{"word": "a", "prev": None}]])


# ---------------------------------------------------------------- predict_proba + temperature
def test_predict_proba_through_a_pipeline_in_the_input_form(list_of_lists):
    X, y = list_of_lists
    pipe = make_pipeline(M3NSimplicialDecomposition(C=1.0, max_iter=50)).fit(X, y)
    proba = pipe.predict_proba(X)
    assert isinstance(proba, list) and len(proba) == len(X)
    for p, x in zip(proba, X):
        assert p.shape == (len(x), 3)
        np.testing.assert_allclose(p.sum(axis=1), 1.0)
    for p, m in zip(proba, pipe[-1].predict_marginals(X)):
        np.testing.assert_allclose(p, m)  # temperature 1 before calibration


def test_temperature_calibration_lowers_held_out_log_loss():
    X, y = make_chain_data(n_sequences=120, seed=7)
    model = M3NSimplicialDecomposition(C=0.1).fit(X[:60], y[:60])

    def log_loss(m, X_, y_):
        p = np.vstack(m.predict_proba(X_))
        return -np.mean(np.log(p[np.arange(p.shape[0]), np.concatenate(y_)]))

    predicted = np.concatenate(model.predict(X))
    before = log_loss(model, X[90:], y[90:])
    model.calibrate_temperature(X[60:90], y[60:90])
    assert model.temperature_ != 1.0
    after = log_loss(model, X[90:], y[90:])
    assert after < before
    # the temperature is the minimiser of the calibration set's log loss
    on_calibration = log_loss(model, X[60:90], y[60:90])
    t = model.temperature_
    for factor in (0.8, 1.25):
        model.temperature_ = t * factor
        assert log_loss(model, X[60:90], y[60:90]) >= on_calibration - 1e-9
    model.temperature_ = t
    # predictions never change
    np.testing.assert_array_equal(np.concatenate(model.predict(X)), predicted)
    # empty sequences, which predict and score take, change nothing (they were refused)
    empty_X, empty_y = np.zeros((0, X[0].shape[1])), np.zeros(0, dtype=y[0].dtype)
    model.calibrate_temperature(X[60:75] + [empty_X] + X[75:90] + [empty_X],
                                y[60:75] + [empty_y] + y[75:90] + [empty_y])
    assert model.temperature_ == t
    with pytest.raises(ValueError, match="at least one labelled token"):
        model.calibrate_temperature([empty_X], [empty_y])
    with pytest.raises(ValueError, match="requires y"):
        model.calibrate_temperature(X[60:90], None)


# ---------------------------------------------------------------- named start/end biases
def test_start_and_end_biases_are_named_attributes():
    X, y = make_chain_data(n_sequences=20, seed=8)
    model = StructSVMCuttingPlane().fit(X, y)
    transition, start, end = model.structure_.pairwise_parameters(
        model.structure_.split_weights(model.w_)[1])
    np.testing.assert_array_equal(model.start_, start)
    np.testing.assert_array_equal(model.end_, end)
    no_bias = StructSVMCuttingPlane(ChainStructure(start_end=False)).fit(X, y)
    with pytest.raises(AttributeError):
        no_bias.start_


# ---------------------------------------------------------------- LinearSVC drop-in
def binary_data(seed=0, shift=3.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return X + shift, y  # shifted: no intercept, no fit


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Learner", LEARNERS)
def test_multiclass_form_is_a_linear_svc_drop_in(Learner):
    X, y = binary_data()
    model = Learner().fit(X, y)
    reference = LinearSVC().fit(X, y)
    assert model.coef_.shape == reference.coef_.shape == (1, 5)
    assert model.intercept_.shape == reference.intercept_.shape == (1,)
    np.testing.assert_allclose(model.decision_function(X), X @ model.coef_[0]
                               + model.intercept_[0], atol=1e-8)
    assert model.score(X, y) >= reference.score(X, y) - 0.03
    without = Learner(fit_intercept=False).fit(X, y)
    assert without.intercept_.shape == (1,) and without.intercept_[0] == 0.0
    proba = model.predict_proba(X)
    assert proba.shape == (200, 2)
    np.testing.assert_array_equal(model.classes_[proba.argmax(axis=1)], model.predict(X))


def test_multiclass_intercept_shapes_and_sparse_input():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 4)) + 5.0
    y = rng.integers(3, size=150)
    X[np.arange(150), y] += 3.0
    model = StructSVMCuttingPlane(C=1.0).fit(X, y)
    assert model.coef_.shape == (3, 4) and model.intercept_.shape == (3,)
    np.testing.assert_allclose(model.decision_function(X),
                               X @ model.coef_.T + model.intercept_, atol=1e-8)
    sparse = StructSVMCuttingPlane(C=1.0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.w_, model.w_, atol=1e-6)
    assert model.n_features_in_ == 4
    # stratified folds as for LinearSVC when the structure says multiclass
    search = GridSearchCV(StructSVMCuttingPlane(MultiClass()), {"C": [0.1, 1.0]}, cv=3)
    search.fit(X[np.argsort(y)], np.sort(y))
    assert search.best_score_ > 0.5  # sorted labels: unstratified 3-fold would score ~0


def test_topk_and_confidence_from_the_estimator_and_the_pipeline(list_of_lists):
    X, y = list_of_lists
    model = StructSVMCuttingPlane(C=1.0).fit(X, y)
    labels, scores = model.predict_topk(X, k=4)
    for best, top, s in zip(model.predict(X), labels, scores):
        np.testing.assert_array_equal(top[0], best)
        assert np.all(np.diff(s) <= 1e-12)
    confidence = model.sequence_confidence(X)
    assert confidence.shape == (len(X),) and np.all((confidence > 0) & (confidence <= 1))
    lengths = [len(x) for x in X]
    flat = model.predict_topk(np.vstack(X), k=4, sequence_ids=lengths_to_groups(lengths))
    for a, b in zip(flat[0], labels):
        np.testing.assert_array_equal(a, b)
    pipe = make_sequence_pipeline(StructSVMCuttingPlane(C=1.0)).fit(token_dicts(X), y)
    top, _ = pipe.predict_topk(token_dicts(X), k=2)
    np.testing.assert_array_equal(top[0][0], pipe.predict(token_dicts(X))[0])
    assert pipe.sequence_confidence(token_dicts(X)).shape == (len(X),)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_exact_kernel_model_has_neither_coef_nor_intercept():
    X, y = binary_data(seed=2)
    model = M3NExcessiveGap(kernel="rbf", max_iter=30).fit(X, y)
    assert not hasattr(model, "coef_") and not hasattr(model, "intercept_")
    assert model.predict_proba(X).shape == (200, 2)


def test_chunk_scores_warn_on_labels_that_are_not_iob_tags():
    from sklearn.exceptions import UndefinedMetricWarning

    with pytest.warns(UndefinedMetricWarning, match="IOB"):
        assert chunk_f1_score([["a", "b"]], [["a", "b"]]) == 0.0


def test_pipeline_predicts_on_empty_sequences_and_names_weights_with_plain_str(list_of_lists):
    X, y = list_of_lists
    pipe = make_sequence_pipeline(StructSVMCuttingPlane(C=1.0)).fit(token_dicts(X), y)
    out = pipe.predict([[], token_dicts(X)[0]])
    assert out[0] == [] and len(out[1]) == len(X[0])
    # (empty sentences only: still lists, which serialise, as for the other batches)
    assert pipe.predict([[], []]) == [[], []]
    assert pipe.predict_topk([[]], 2)[0] == [[[]]]
    assert pipe.predict_proba([[]])[0].shape == (0, 3)
    assert pipe.predict_marginals(token_dicts(X)[:1])[0].shape == (len(X[0]), 3)
    assert all(type(label) is str for _, label in pipe.state_features_)
    assert all(type(a) is str for a, _ in pipe.transition_features_)
    from sklstruct.inspection import format_state_features
    assert "Top positive" in format_state_features(pipe, top=2)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_review_findings():
    import numpy as np
    # array-valued features are not None
    SequenceVectorizer().fit([[{"w": "a", "tags": np.array(["x", "y"])}]])
    # sequence_ids that split a sequence are an error, not silent fragments
    with pytest.raises(ValueError, match="together"):
        lengths_from_ids([0, 1, 0, 1, 2, 2], 6)
    # make_sequence_pipeline keeps transform_input
    pipe = make_sequence_pipeline(StructSVMCuttingPlane(), transform_input=["sample_weight"])
    assert pipe.transform_input == ["sample_weight"]
    # a kernel model has no named state features; transitions need no names
    X, y = make_chain_data(n_sequences=15, seed=9)
    kernel = make_sequence_pipeline(StructSVMCuttingPlane(kernel="rbf", n_basis=5,
                                                          random_state=0))
    kernel.fit(token_dicts(X), y)
    with pytest.raises(AttributeError, match="kernel"):
        kernel.state_features_
    assert len(kernel.transition_features_) == 9
    # an exact-kernel multiclass model passes no constant feature to its kernel
    seen = []

    def linear_kernel(A, B):
        seen.append(A.shape[1])
        return A @ B.T

    Xm, ym = binary_data(seed=3)
    M3NExcessiveGap(kernel=linear_kernel, max_iter=5).fit(Xm, ym)
    assert set(seen) == {5}


def test_pipeline_on_token_dicts_returns_lists_of_python_str(list_of_lists):
    """crfsuite users get lists of str back, which print and serialise as such."""
    import json

    X, y = list_of_lists
    tagger = make_sequence_pipeline(M3NSimplicialDecomposition(random_state=0)).fit(
        token_dicts(X), y)
    predicted = tagger.predict(token_dicts(X)[:3])
    assert all(isinstance(labels, list) for labels in predicted)
    assert all(type(label) is str for labels in predicted for label in labels)
    json.dumps(predicted)
    rows, scores = tagger.predict_topk(token_dicts(X)[:2], k=2)
    assert all(type(label) is str for labelling in rows[0] for label in labelling)
    json.dumps(rows)
    assert repr(rows[0][0][0]) in ("'B-NP'", "'I-NP'", "'O'")


def test_pipeline_state_features_of_a_two_class_model():
    """A two-class multiclass model has one coef_ row (class 1's weights minus class 0's):
    its named weights are those of classes_[1], as sklstruct.inspection lists them."""
    from sklstruct.inspection import state_features

    rng = np.random.default_rng(0)
    X = [[{"w": str(word)}] for word in rng.integers(0, 6, 60)]
    y = [["yes" if token[0]["w"] in "024" else "no"] for token in X]
    tagger = make_sequence_pipeline(M3NSimplicialDecomposition(MultiClass(),
                                                                random_state=0)).fit(X, y)
    named = tagger.state_features_
    assert {label for _, label in named} == {"yes"}
    listed = state_features(tagger, top=None)
    assert set(listed) == {"yes"}
    assert dict(listed["yes"]["positive"] + listed["yes"]["negative"]) == \
        {feature: weight for (feature, _), weight in named.items()}


def test_a_pipeline_refit_that_fails_leaves_the_pipeline_as_it_was():
    """The vectoriser is refitted before the model refuses the labels (or is interrupted):
    the pipeline then restores it, so that it still predicts and names its weights as
    before, instead of pairing a new vocabulary with the old model."""
    X = [[{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}, {"w": "ran"}]]
    y = [["DT", "NN"], ["DT", "NN", "VB"]]
    tagger = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0)).fit(X, y)
    named, predicted = tagger.state_features_, tagger.predict(X)
    vectorizer, model = tagger.steps[0][1], tagger.steps[1][1]

    def interrupt(estimator, info):
        raise KeyboardInterrupt

    new_X = [[{"w": "x", "z": "q"}, {"w": "y"}]]
    with pytest.raises(TypeError):
        tagger.fit(new_X, [[1, "a"]])
    tagger.set_params(m3nsimplicialdecomposition__callback=interrupt)
    with pytest.raises(KeyboardInterrupt):
        tagger.fit(new_X, [["A", "B"]])
    assert tagger.steps[0][1] is vectorizer and tagger.steps[1][1] is model
    assert tagger.state_features_ == named
    assert tagger.predict(X) == predicted
    # a vectoriser refitted on its own still gives the clear error, not wrong names
    vectorizer.fit(new_X)
    with pytest.raises(ValueError, match="different fits"):
        _ = tagger.state_features_


def test_a_failed_warm_refit_of_a_pipeline_keeps_no_changed_dual_state():
    """The pipeline restores its vectoriser, not the model, whose failed warm fit dropped the
    dual state it changed: the next fit equals a fit from scratch."""
    X = [[{"w": w} for w in sentence.split()] for sentence in
         ["the cat sat", "a dog ran off", "the dog sat", "a cat ran", "the cat ran off"]]
    y = [["DT", "NN", "VB"], ["DT", "NN", "VB", "RP"], ["DT", "NN", "VB"], ["DT", "NN", "VB"],
         ["DT", "NN", "VB", "RP"]]

    def interrupt(estimator, info):
        raise KeyboardInterrupt

    model = M3NSimplicialDecomposition(C=1.0, tol=0.3, warm_start=True, random_state=0)
    tagger = make_sequence_pipeline(model).fit(X, y)
    tagger.set_params(m3nsimplicialdecomposition__tol=1e-9,
                      m3nsimplicialdecomposition__callback=interrupt)
    with pytest.raises(KeyboardInterrupt):
        tagger.fit(X, y)
    tagger.set_params(m3nsimplicialdecomposition__tol=0.3,
                      m3nsimplicialdecomposition__callback=None).fit(X, y)
    fresh = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0, tol=0.3,
                                                              random_state=0)).fit(X, y)
    np.testing.assert_array_equal(tagger[-1].coef_, fresh[-1].coef_)


def test_labels_unseen_in_fit_are_named():
    from sklstruct.datasets import load_ocr_sample

    words = load_ocr_sample()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = M3NSimplicialDecomposition(C=0.1, max_iter=3).fit(words.data[:30],
                                                                  words.target[:30])
    y = [labels.astype(object) for labels in words.target[30:33]]
    y[0][0] = "unknown"
    with pytest.raises(ValueError, match=r"not seen in fit: .*'unknown'.*; the model knows"):
        model.calibrate_temperature(words.data[30:33], y)
