"""Sequences packed in one matrix (PackedSequences), the vectoriser that makes them, and the
paths that take them: the same weights and predictions as the list of per-sequence matrices
and as the flat matrix with lengths; the sparse Viterbi on any number of threads."""

import numpy as np
import pytest
import scipy.sparse as sp
from joblib import parallel_config
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction import DictVectorizer

from sklstruct import M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct._inference import chain
from sklstruct._inference._validation import run_chunks
from sklstruct._input import encode_targets
from sklstruct._progress import BestCertified
from sklstruct.pipeline import make_sequence_pipeline
from sklstruct.preprocessing import SequenceVectorizer, window_features
from sklstruct.utils import PackedSequences
from sklstruct.utils._sequences import flatten_labels

from ._helpers import make_chain_data

pytestmark = pytest.mark.filterwarnings("ignore", category=ConvergenceWarning)

WORDS = ["the", "cat", "sat", "on", "a", "mat", "The", "dog", "ran", "2", "USA", "and"]
TAGS = ["DT", "NN", "VBD", "IN", "DT", "NN", "DT", "NN", "VBD", "CD", "NNP", "CC"]


def _sentences(n, seed):
    """Token dicts of random sentences (window features) and chunk-like str labels."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        picks = rng.integers(0, len(WORDS), size=rng.integers(1, 9))
        words, pos = [WORDS[k] for k in picks], [TAGS[k] for k in picks]
        X.append(window_features(words, pos, window=1))
        y.append(["B-NP" if p == "DT" else "I-NP" if p.startswith("NN") else "O"
                  for p in pos])
    return X, y


def _tokens(X):
    return [token for sequence in X for token in sequence]


# ------------------------------------------------------------------ the vectoriser
@pytest.mark.parametrize("sort", [True, False])
def test_vectorizer_matches_dict_vectorizer_with_every_kind_of_value(sort):
    X = [[{"w": "a", "n": 2.5, "flag": True, "tags": ["x", "y"]}, {"w": "b", "flag": False}],
         [{"w": "c", "n": 1, "tags": ("y",), "off": np.float32(3)}]]
    vec = SequenceVectorizer(sort=sort)
    Xt = vec.fit_transform(X)
    reference = DictVectorizer(sort=sort)
    expected = reference.fit_transform(_tokens(X))
    assert isinstance(Xt, PackedSequences) and Xt.lengths.tolist() == [2, 1]
    assert Xt.X.indices.dtype == np.int32 and Xt.X.has_canonical_format
    assert vec.feature_names_ == reference.feature_names_
    assert vec.vocabulary_ == reference.vocabulary_
    np.testing.assert_array_equal(Xt.X.toarray(), expected.toarray())
    other = [[{"w": "b", "n": 4, "tags": ["z", "x"], "new": "q"}], []]
    np.testing.assert_array_equal(vec.transform(other).X.toarray(),
                                  reference.transform(_tokens(other)).toarray())
    assert vec.transform(other).lengths.tolist() == [1, 0]


@pytest.mark.parametrize("sort", [True, False])
def test_vectorizer_names_shared_by_a_string_and_a_number_feature(sort):
    """``{"a": "b"}`` and ``{"a=b": 1}`` are both the feature ``a=b``, one column, as
    DictVectorizer has it; a key that begins another's group string keeps the order of the
    names."""
    X = [[{"a": "b", "a=b": 1.0}, {"a=b": 2.0, "ab": "x"}], [{"a": "b=c", "a=b": "c"}]]
    vec = SequenceVectorizer(sort=sort)
    Xt = vec.fit_transform(X)
    reference = DictVectorizer(sort=sort)
    expected = reference.fit_transform(_tokens(X))
    assert vec.feature_names_ == reference.feature_names_
    np.testing.assert_array_equal(Xt.X.toarray(), expected.toarray())
    np.testing.assert_array_equal(vec.transform(X).X.toarray(), expected.toarray())


def test_vectorizer_on_window_features_and_pickle():
    import pickle

    X, _ = _sentences(40, seed=0)
    vec = SequenceVectorizer()
    Xt = vec.fit_transform(X)
    expected = DictVectorizer().fit_transform(_tokens(X))
    np.testing.assert_array_equal(Xt.X.toarray(), expected.toarray())
    restored = pickle.loads(pickle.dumps(vec))
    Xo, _ = _sentences(10, seed=1)
    np.testing.assert_array_equal(restored.transform(Xo).X.toarray(),
                                  vec.transform(Xo).X.toarray())
    assert vec.dict_vectorizer_.vocabulary_ == vec.vocabulary_


def test_vectorizer_transform_in_small_blocks(monkeypatch):
    """transform looks the features up a block of sequences at a time: blocks of a few
    features give the same matrix, numbers and unknown features included."""
    from sklstruct import preprocessing

    X, _ = _sentences(30, seed=5)
    X[3][0]["weight"] = 2.5
    vec = SequenceVectorizer().fit(X)
    Xo, _ = _sentences(20, seed=6)
    Xo[1][0]["weight"] = 0.5
    Xo.insert(2, [])
    expected = vec.transform(Xo)
    monkeypatch.setattr(preprocessing, "_LOOKUP_BLOCK", 3)
    got = vec.transform(Xo)
    np.testing.assert_array_equal(got.X.toarray(), expected.X.toarray())
    np.testing.assert_array_equal(got.lengths, expected.lengths)
    reference = DictVectorizer().fit(_tokens(X)).transform(_tokens(Xo))
    np.testing.assert_array_equal(got.X.toarray(), reference.toarray())


def test_vectorizer_bad_values():
    with pytest.raises(ValueError, match="Feature 'b' of token 1 of sequence 0 is None"):
        SequenceVectorizer().fit([[{"a": "x"}, {"b": None}]])
    with pytest.raises(TypeError, match="only strings can be one-hot"):
        SequenceVectorizer().fit([[{"a": ["x", 1]}]])
    # the forms sklearn-crfsuite also takes: messages that say what to give instead
    with pytest.raises(TypeError, match="dict value; flatten it"):
        SequenceVectorizer().fit([[{"a": {"b": 1}}]])
    with pytest.raises(TypeError, match="bytes value; decode it"):
        SequenceVectorizer().fit([[{"a": b"x"}]])
    with pytest.raises(TypeError, match="a list of feature names"):
        SequenceVectorizer().fit([[["a=x", "bias"]]])
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="Feature 'b' of token 0 of sequence 1 is"):
            SequenceVectorizer().fit([[{"a": "x"}], [{"b": bad}]])
        fitted = SequenceVectorizer().fit([[{"a": 1.0}]])
        with pytest.raises(ValueError, match="Feature 'a' of token 0 of sequence 0 is"):
            fitted.transform([[{"a": bad}]])
        # a feature transform does not know is left out, whatever its value
        assert fitted.transform([[{"a": 2.0, "zz": bad}]])[0].nnz == 1


def test_vectorizer_stores_no_zeros():
    """A False or 0.0 value keeps its column but stores no entry: the tutorial features of
    CoNLL-2002 are 35% False booleans, which DictVectorizer stores as zeros."""
    from sklearn.feature_extraction import DictVectorizer

    X = [[{"w": "a", "upper": False, "n": 0.0}, {"w": "b", "upper": True, "n": 2.5}],
         [{"w": "c", "upper": False}]]
    vectorizer = SequenceVectorizer()
    matrices = vectorizer.fit_transform(X)
    reference = DictVectorizer().fit(t for s in X for t in s)
    assert list(vectorizer.get_feature_names_out()) == list(reference.get_feature_names_out())
    stacked = sp.vstack(matrices).tocsr()
    np.testing.assert_array_equal(stacked.toarray(),
                                  reference.transform([t for s in X for t in s]).toarray())
    assert stacked.nnz == np.count_nonzero(stacked.toarray()) == 5
    assert sp.vstack(vectorizer.transform(X)).nnz == 5
    from sklstruct.preprocessing import HashingSequenceVectorizer

    hashed = HashingSequenceVectorizer(n_features=2**12).transform(X)
    assert sum(m.nnz for m in hashed) == 5  # (w three times, upper and n once each)
    with pytest.raises(ValueError, match="Feature 'n' is nan"):
        HashingSequenceVectorizer().transform([[{"n": np.nan}]])
    with pytest.raises(TypeError, match="bytes value"):
        HashingSequenceVectorizer().transform([[{"n": b"x"}]])


# ------------------------------------------------------------------ the container
def test_packed_sequences_read_as_the_list():
    X = sp.random(9, 4, density=0.5, format="csr", random_state=0)
    packed = PackedSequences(X, [2, 0, 3, 4])
    blocks = [X[0:2], X[2:2], X[2:5], X[5:9]]
    assert len(packed) == 4 and packed.offsets.tolist() == [0, 2, 2, 5, 9]
    for got, expected in zip(packed, blocks):
        np.testing.assert_array_equal(got.toarray(), expected.toarray())
    np.testing.assert_array_equal(packed[-1].toarray(), blocks[3].toarray())
    for key, chosen in ((slice(1, 3), [1, 2]), (np.array([3, 0]), [3, 0]),
                        (np.array([True, False, False, True]), [0, 3]), ([-1], [3])):
        sub = packed[key]
        assert isinstance(sub, PackedSequences) and len(sub) == len(chosen)
        for got, k in zip(sub, chosen):
            np.testing.assert_array_equal(got.toarray(), blocks[k].toarray())
    assert "4 sequences, 9 tokens" in repr(packed)
    with pytest.raises(IndexError):
        packed[4]
    with pytest.raises(IndexError):
        packed[np.array([True, False])]
    with pytest.raises(IndexError):
        packed[np.array([0.5])]
    with pytest.raises(ValueError, match="does not match"):
        PackedSequences(X, [2, 2])
    with pytest.raises(ValueError, match="2-D"):
        PackedSequences(np.zeros(3), [3])


# ------------------------------------------------------------------ the same fits
def _forms(X_packed):
    flat, lengths = X_packed.X, X_packed.lengths
    return {"packed": (X_packed, None), "list": (list(X_packed), None),
            "flat": (flat, lengths)}


@pytest.mark.parametrize("labels", ["str", "int"])
def test_packed_list_and_flat_forms_give_the_same_model(labels):
    X, y = _sentences(60, seed=2)
    X_packed = SequenceVectorizer().fit_transform(X)
    if labels == "int":
        y = [np.array([{"B-NP": 3, "I-NP": 5, "O": 7}[t] for t in tags]) for tags in y]
    y_flat = np.concatenate([np.asarray(tags) for tags in y])
    weights, predictions = {}, {}
    for name, (X_form, lengths) in _forms(X_packed).items():
        model = M3NSimplicialDecomposition(C=0.5, max_iter=30, random_state=0)
        model.fit(X_form, y_flat if lengths is not None else y, lengths=lengths)
        weights[name] = model.w_
        predicted = model.predict(X_form, lengths=lengths)
        predictions[name] = np.concatenate(predicted) if isinstance(predicted, list) \
            else predicted
        if name == "packed":
            assert isinstance(predicted, list) and len(predicted) == len(X)
    for name in ("list", "flat"):
        np.testing.assert_array_equal(weights[name], weights["packed"])
        np.testing.assert_array_equal(predictions[name], predictions["packed"])


def test_pipeline_from_dicts_equals_the_list_of_matrices():
    X, y = _sentences(50, seed=3)
    pipe = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0, max_iter=30,
                                                             random_state=0)).fit(X, y)
    X_list = list(SequenceVectorizer().fit_transform(X))
    model = M3NSimplicialDecomposition(C=1.0, max_iter=30, random_state=0).fit(X_list, y)
    np.testing.assert_array_equal(pipe[-1].w_, model.w_)
    predicted = pipe.predict(X)
    assert predicted == [labels.tolist() for labels in model.predict(X_list)]
    assert all(isinstance(label, str) for labels in predicted for label in labels)
    # other estimators take the packed form too
    cutting_plane = make_sequence_pipeline(StructSVMCuttingPlane(C=1.0, max_iter=5)).fit(X, y)
    assert cutting_plane.score(X, y) > 0.5


def test_packed_input_errors():
    X, y = _sentences(5, seed=4)
    X_packed = SequenceVectorizer().fit_transform(X)
    model = M3NSimplicialDecomposition(max_iter=5)
    with pytest.raises(ValueError, match="lengths= is not used with PackedSequences"):
        model.fit(X_packed, y, lengths=X_packed.lengths)
    with pytest.raises(ValueError, match="Sequence 1 of X is empty"):
        model.fit(PackedSequences(X_packed.X, np.r_[X_packed.lengths[0], 0,
                                                     X_packed.lengths[1:]]), y[:1] + [[]] + y[1:])
    with pytest.raises(ValueError, match="y has 4 label sequences"):
        model.fit(X_packed, y[:4])
    model.fit(X_packed, y)
    empty = PackedSequences(X_packed.X[:3], [0, 3, 0])
    assert [p.shape[0] for p in model.predict(empty)] == [0, 3, 0]


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize("y", [
    [["a", "b"], ["c"]], [("a", "b"), ["c"]], [np.array(["a", "b"]), np.array(["cc"])],
    [[1, 2], [3]], [np.array([1, 2]), np.array([3], dtype=np.int32)], [[True, False], [True]],
    [[1, 2.5], [3]], [np.array([1, 2]), np.array([2.5])]])
def test_flat_labels_are_those_of_the_per_sequence_path(y):
    flat = flatten_labels(y, np.array([2, 1]))
    reference = np.concatenate([np.asarray(labels) for labels in y])
    assert flat.tolist() == reference.tolist()
    if reference.dtype.kind == "f":  # (continuous labels: refused by both)
        return
    classes, codes = encode_targets(flat)
    expected_classes, expected_codes = np.unique(reference, return_inverse=True)
    assert classes.tolist() == expected_classes.tolist()
    np.testing.assert_array_equal(codes, expected_codes)


@pytest.mark.parametrize("y, error, message", [
    ([["a", "b"], ["c", "d"]], ValueError, "Sequence 1 has 1 tokens but 2 labels"),
    ([["a", "b"], [1]], TypeError, "mixes number, str"),
    ([["a", "b"], [["c"]]], ValueError, "Labels of sequence 1 must be 1-D"),
    ([np.array(["a", "b"]), np.array([1])], TypeError, "mixes number, str"),
])
def test_flat_labels_errors_name_the_sequence(y, error, message):
    with pytest.raises(error, match=message):
        flatten_labels(y, np.array([2, 1]))


@pytest.mark.parametrize("sparse", [True, False])
def test_batch_select_of_a_run_is_a_view(sparse):
    from sklstruct.utils._sequences import SequenceBatch

    rng = np.random.default_rng(2)
    dense = rng.normal(size=(30, 5)) * (rng.random((30, 5)) < 0.4)
    X = sp.csr_matrix(dense) if sparse else dense
    batch = SequenceBatch(X, np.array([0, 4, 9, 17, 22, 30]))
    sub, rows = batch.select([1, 2, 3])
    np.testing.assert_array_equal(rows, np.arange(4, 22))
    np.testing.assert_array_equal(sub.offsets, [0, 5, 13, 18])
    got = sub.X.toarray() if sparse else sub.X
    np.testing.assert_array_equal(got, dense[4:22])
    shared = sub.X.data if sparse else sub.X
    assert np.shares_memory(shared, X.data if sparse else X)
    other, rows = batch.select([3, 1])  # not a run: the rows copied, in that order
    np.testing.assert_array_equal(rows, np.r_[17:22, 4:9])
    got = other.X.toarray() if sparse else other.X
    np.testing.assert_array_equal(got, dense[rows])


# ------------------------------------------------------------------ sparse Viterbi on threads
def _chain_problem(seed, n_states=4, ties=False):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, size=25)
    X = sp.random(int(lengths.sum()), 12, density=0.3, format="csr", random_state=seed)
    if ties:  # integer features and weights: equal scores are common
        X.data = np.rint(3 * X.data)
        weights = rng.integers(-2, 3, size=(12, n_states)).astype(float)
        transition = rng.integers(-1, 2, size=(n_states, n_states)).astype(float)
    else:
        weights = rng.normal(size=(12, n_states))
        transition = rng.normal(size=(n_states, n_states))
    offsets = np.r_[0, np.cumsum(lengths)]
    return X, weights, offsets, transition, rng.normal(size=n_states), rng.normal(size=n_states)


# joblib's limits on the arrays a worker process gets pickled: the default (1 MB, above
# which they are memory-mapped) and 1 byte (every array memory-mapped, as a large batch's)
PROCESS_ARRAY_LIMITS = ("1M", 1)


@pytest.mark.parametrize("ties", [False, True])
def test_viterbi_sparse_equals_viterbi_of_the_product_on_any_threads(ties, monkeypatch):
    monkeypatch.setattr(chain, "THREAD_MIN_TOKENS", 1)  # chunks of any size on threads
    X, weights, offsets, transition, start, end = _chain_problem(5, ties=ties)
    labels, scores = chain.viterbi(X @ weights, offsets, transition, start, end)
    for n_jobs in (None, 1, 2, 3):
        got_labels, got_scores = chain.viterbi_sparse(X, weights, offsets, transition,
                                                      start, end, n_jobs=n_jobs)
        np.testing.assert_array_equal(got_labels, labels)
        np.testing.assert_array_equal(got_scores, scores)  # the same doubles
    with parallel_config(backend="threading", n_jobs=2):  # a backend the user set
        np.testing.assert_array_equal(chain.viterbi_sparse(
            X, weights, offsets, transition, start, end, n_jobs=2)[0], labels)
    for max_nbytes in PROCESS_ARRAY_LIMITS:  # chunks in worker processes
        with parallel_config(backend="loky", n_jobs=2, max_nbytes=max_nbytes):
            got_labels, got_scores = chain.viterbi_sparse(X, weights, offsets, transition,
                                                          start, end, n_jobs=2)
        np.testing.assert_array_equal(got_labels, labels)
        np.testing.assert_array_equal(got_scores, scores)


def test_viterbi_sparse_blocks_and_a_sequence_longer_than_a_block():
    """The compiled loop forms the scores of about 4,096 tokens at a time: sequences across
    block bounds and one longer than a block decode as the product's Viterbi does."""
    rng = np.random.default_rng(11)
    lengths = np.r_[rng.integers(1, 300, size=40), 5000, rng.integers(1, 50, size=10)]
    X = sp.random(int(lengths.sum()), 30, density=0.2, format="csr", random_state=11)
    weights, transition = rng.normal(size=(30, 3)), rng.normal(size=(3, 3))
    offsets = np.r_[0, np.cumsum(lengths)]
    labels, scores = chain.viterbi(X @ weights, offsets, transition)
    for n_jobs in (1, 2):
        got = chain.viterbi_sparse(X, weights, offsets, transition, n_jobs=n_jobs)
        np.testing.assert_array_equal(got[0], labels)
        np.testing.assert_array_equal(got[1], scores)


def test_viterbi_sparse_bad_input():
    X, weights, offsets, transition, start, end = _chain_problem(6)
    with pytest.raises(TypeError, match="scipy.sparse"):
        chain.viterbi_sparse(X.toarray(), weights, offsets, transition)
    with pytest.raises(ValueError, match="weights must have shape"):
        chain.viterbi_sparse(X, weights[1:], offsets, transition)
    bad = X.copy()
    bad.indices[0] = 99
    with pytest.raises(ValueError, match="column index out of range"):
        chain.viterbi_sparse(bad, weights, offsets, transition)
    bad = X.copy()  # (an int64 index that int32 would wrap into range)
    bad.indices = bad.indices.astype(np.int64)
    bad.indices[0] = -2**32 + 1
    with pytest.raises(ValueError, match="column index out of range"):
        chain.viterbi_sparse(bad, weights, offsets, transition)
    with pytest.raises(ValueError, match="NaN"):
        chain.viterbi_sparse(X, np.where(weights > 1, np.nan, weights), offsets, transition)
    with pytest.raises(ValueError, match="offsets must end"):
        chain.viterbi_sparse(X, weights, offsets[:-1], transition)
    with pytest.raises(ValueError, match="sequence 0 is empty"):
        chain.viterbi_sparse(X, weights, np.r_[0, offsets], transition)
    with pytest.raises(ValueError, match="transition must have shape"):
        chain.viterbi_sparse(X, weights, offsets, transition[1:])


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["hamming", "weighted", "token_loss"])
def test_loss_augmented_viterbi_sparse_equals_the_product_path_on_any_threads(ties, loss,
                                                                            monkeypatch):
    monkeypatch.setattr(chain, "THREAD_MIN_TOKENS", 1)  # chunks of any size on threads
    X, weights, offsets, transition, start, end = _chain_problem(8, n_states=5, ties=ties)
    rng = np.random.default_rng(3)
    y = rng.integers(0, 5, size=X.shape[0])
    options = {"hamming": {}, "weighted": {"loss_weights": rng.uniform(0.5, 2.0, size=5)},
               "token_loss": {"token_loss": rng.uniform(0.0, 2.0, size=(X.shape[0], 5))}}[loss]
    unary = X @ weights
    expected = chain.loss_augmented_viterbi(unary, offsets, transition, start, end, y,
                                            **options)
    for n_jobs in (None, 1, 2, 3):
        got = chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, start, end,
                                                  y, n_jobs=n_jobs, **options)
        for a, b in zip(got, expected + (unary,)):
            np.testing.assert_array_equal(a, b)  # the same doubles and labels
    for max_nbytes in PROCESS_ARRAY_LIMITS:  # chunks in worker processes
        with parallel_config(backend="loky", n_jobs=2, max_nbytes=max_nbytes):
            got = chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, start, end,
                                                      y, n_jobs=2, **options)
        for a, b in zip(got, expected + (unary,)):
            np.testing.assert_array_equal(a, b)


def _path_scores(unary, offsets, transition, start, end, labels):
    """Each sequence's score of ``labels``, summed in the compiled decoders' order."""
    scores = []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        score = start[labels[lo]] + end[labels[hi - 1]]
        for t in range(lo, hi):
            score += unary[t, labels[t]]
        for t in range(lo + 1, hi):
            score += transition[labels[t - 1], labels[t]]
        scores.append(score)
    return np.array(scores)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("loss", ["hamming", "token_loss"])
def test_loss_augmented_margins_sparse_are_the_decoders_labels_and_the_true_scores(
        ties, loss, monkeypatch):
    monkeypatch.setattr(chain, "THREAD_MIN_TOKENS", 1)  # chunks of any size on threads
    X, weights, offsets, transition, start, end = _chain_problem(11, n_states=5, ties=ties)
    rng = np.random.default_rng(5)
    y = rng.integers(0, 5, size=X.shape[0])
    options = {"hamming": {},
               "token_loss": {"token_loss": rng.uniform(0.0, 2.0, size=(X.shape[0], 5))}}[loss]
    unary = X @ weights
    labels, losses, scores = chain.loss_augmented_viterbi(unary, offsets, transition, start,
                                                          end, y, **options)
    true_scores = _path_scores(unary, offsets, transition, start, end, y)
    # the labelling's scores are the decoders' (checked against enumeration elsewhere)
    np.testing.assert_array_equal(
        _path_scores(unary, offsets, transition, start, end, labels), scores)
    for n_jobs in (None, 1, 2, 3):
        got = chain.loss_augmented_margins_sparse(X, weights, offsets, transition, start, end,
                                                  y, n_jobs=n_jobs, **options)
        for a, b in zip(got, (labels, losses, scores, true_scores)):
            np.testing.assert_array_equal(a, b)  # the same labels and doubles
    for max_nbytes in PROCESS_ARRAY_LIMITS:  # chunks in worker processes
        with parallel_config(backend="loky", n_jobs=2, max_nbytes=max_nbytes):
            got = chain.loss_augmented_margins_sparse(X, weights, offsets, transition, start, end,
                                                      y, n_jobs=2, **options)
        for a, b in zip(got, (labels, losses, scores, true_scores)):
            np.testing.assert_array_equal(a, b)
    # no labelling beats the loss-augmented one, and y's is at most its augmented score
    assert np.all(true_scores <= scores + losses + 1e-12)


def test_loss_augmented_margins_sparse_bad_input():
    X, weights, offsets, transition, start, end = _chain_problem(6)
    y = np.zeros(X.shape[0], dtype=int)
    with pytest.raises(ValueError, match="y .* is required"):
        chain.loss_augmented_margins_sparse(X, weights, offsets, transition)
    with pytest.raises(ValueError, match="y must lie"):
        chain.loss_augmented_margins_sparse(X, weights, offsets, transition, y=y - 1)
    with pytest.raises(ValueError, match="weights must have shape"):
        chain.loss_augmented_margins_sparse(X, weights[1:], offsets, transition, y=y)
    with pytest.raises(ValueError, match="offsets must end"):
        chain.loss_augmented_margins_sparse(X, weights, offsets[:-1], transition, y=y)
    with pytest.raises(ValueError, match="NaN"):
        chain.loss_augmented_margins_sparse(X, np.full_like(weights, np.inf), offsets,
                                            transition, y=y)


def test_csr_decoders_give_each_thread_enough_tokens(monkeypatch):
    offsets = np.r_[0, np.cumsum(np.full(100, 50))]  # 5,000 tokens
    assert chain._csr_chunks(offsets, 4, 22) == [(0, 100)]  # (one chunk: below 2 x 4,096)
    monkeypatch.setattr(chain, "THREAD_MIN_TOKENS", 2000)
    assert chain._csr_chunks(offsets, 4, 22) == [(0, 50), (50, 100)]
    assert chain._csr_chunks(offsets, 1, 22) == [(0, 100)]
    assert chain._csr_chunks(np.zeros(1, dtype=np.int64), 2, 22) == []


def test_threads_take_tasks_of_bounded_work():
    """With several threads a large batch is cut into more tasks than threads, so that an
    interrupted call waits for one task per thread, not for a thread's share of the batch;
    a single thread decodes it in one piece."""
    from sklstruct._inference._validation import TASK_WORK, thread_chunks

    offsets = np.r_[0, np.cumsum(np.full(2000, 100))]  # 200,000 tokens
    per_task = TASK_WORK // 600**2
    chunks = thread_chunks(offsets, 2, 600, min_tokens=chain.THREAD_MIN_TOKENS)
    sizes = [offsets[hi] - offsets[lo] for lo, hi in chunks]
    assert len(chunks) >= 200_000 // max(per_task, chain.THREAD_MIN_TOKENS)
    assert max(sizes) <= max(per_task, chain.THREAD_MIN_TOKENS) + 100
    assert chunks[0][0] == 0 and chunks[-1][1] == 2000
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    assert thread_chunks(offsets, 1, 600) == [(0, 2000)]
    assert len(thread_chunks(offsets, 2, 22)) == 2  # (22 states: 277,000 tokens a task)


def test_loss_augmented_viterbi_sparse_bad_input():
    X, weights, offsets, transition, start, end = _chain_problem(6)
    y = np.zeros(X.shape[0], dtype=int)
    with pytest.raises(TypeError, match="scipy.sparse"):
        chain.loss_augmented_viterbi_sparse(X.toarray(), weights, offsets, transition, y=y)
    with pytest.raises(ValueError, match="weights must have shape"):
        chain.loss_augmented_viterbi_sparse(X, weights[:, None], offsets, transition, y=y)
    with pytest.raises(ValueError, match="y .* is required"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition)
    with pytest.raises(ValueError, match="y must have"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, y=y[1:])
    with pytest.raises(ValueError, match="y"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, y=y + 4)
    with pytest.raises(ValueError, match="not both"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, y=y,
                                            loss_weights=np.ones(4),
                                            token_loss=np.ones((X.shape[0], 4)))
    with pytest.raises(ValueError, match="token_loss must have shape"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets, transition, y=y,
                                            token_loss=np.ones((X.shape[0], 3)))
    with pytest.raises(ValueError, match="offsets must end"):
        chain.loss_augmented_viterbi_sparse(X, weights, offsets[:-1], transition, y=y)
    with pytest.raises(ValueError, match="NaN"):
        chain.loss_augmented_viterbi_sparse(X, np.full_like(weights, np.nan), offsets,
                                            transition, y=y)


@pytest.mark.parametrize("rescale", ["margin", "slack"])
def test_chain_loss_augmented_margins_are_those_of_the_potentials(rescale, monkeypatch):
    monkeypatch.setattr(chain, "THREAD_MIN_TOKENS", 1)
    from sklstruct.structures import ChainStructure
    from sklstruct.utils._sequences import SequenceBatch

    X, weights, offsets, transition, start, end = _chain_problem(9, n_states=3, ties=True)
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, size=X.shape[0])
    structure = ChainStructure().bind(X.shape[1], 3)
    w = np.concatenate([weights.ravel(), transition.ravel(), start, end])
    for features in (X, X.toarray()):  # the sparse path and the base class's
        batch = SequenceBatch(features, offsets)
        unary, pairwise = structure.potentials(batch, w)
        labels, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, y,
                                                                 rescale=rescale)
        got = structure.loss_augmented_margins(batch, w, y, rescale=rescale, n_jobs=2)
        np.testing.assert_array_equal(got[0], labels)
        np.testing.assert_array_equal(got[1], losses)
        # (up to the rounding of the sums' order)
        np.testing.assert_allclose(got[2], structure.score(batch, unary, pairwise, y)
                                   - scores, rtol=1e-13, atol=1e-12)


def test_predict_on_two_threads_is_the_same():
    X, y = make_chain_data(n_sequences=40, n_states=4, n_features=6, max_length=8, seed=7)
    X = [sp.csr_matrix(x) for x in X]
    model = M3NSimplicialDecomposition(C=1.0, max_iter=20, random_state=0).fit(X, y)
    one = model.predict(X)
    model.set_params(n_jobs=2)
    two = model.predict(X)
    batch = model._validate_input(X, None, reset=False)[0]
    from_potentials = model.structure_.decode(batch, *model._potentials(batch))
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.classes_[from_potentials], np.concatenate(one))


def test_run_chunks_keeps_the_order_and_raises():
    def task(k):
        if k == 5:
            raise KeyError(k)
        return k * k

    assert run_chunks(task, [(k,) for k in range(5)], 3) == [0, 1, 4, 9, 16]
    with pytest.raises(KeyError):
        run_chunks(task, [(k,) for k in range(8)], 2)


# ------------------------------------------------------------------ the fit's copies
def test_warm_start_leaves_the_previous_weights_unchanged():
    X, y = make_chain_data(n_sequences=30, n_states=3, n_features=5, max_length=6, seed=8)
    model = M3NSimplicialDecomposition(C=1.0, max_iter=2, random_state=0,
                                       warm_start=True).fit(X, y)
    previous, kept = model.w_, model.w_.copy()
    model.set_params(max_iter=30).fit(X, y)
    assert model.history_["dual"][0] > 0  # (continued, not afresh)
    np.testing.assert_array_equal(previous, kept)
    assert not np.array_equal(model.w_, kept)


class _Record:
    def __init__(self, primal):
        self.primal = primal

    def last(self, name):
        return self.primal

    def amend_last(self, primal, dual):
        self.primal = primal


@pytest.mark.parametrize("density", [0.05, 0.9])
def test_best_certified_weights_are_kept_exactly(density):
    rng = np.random.default_rng(9)
    w = rng.normal(size=1000) * (rng.random(1000) < density)
    best = BestCertified()
    best.record(w, 1.0, 0.5)
    assert (best._kept is not None) == (density < 0.5)
    moved = w + 1.0
    best.record(moved, 2.0, 0.6)  # a worse check: not kept
    np.testing.assert_array_equal(best.result(_Record(2.0), moved), w)
    assert best.result(_Record(1.0), moved, copy=False) is moved


def test_empty_selections_are_empty_packed_sequences():
    """ps[2:0] and ps[[]] were refused ("lengths must be a non-empty 1-D array", "selected
    by an int..."), where a list gives an empty list, as the Sequence contract has it."""
    from sklstruct.utils import PackedSequences

    packed = PackedSequences(np.arange(12.0).reshape(6, 2), [1, 2, 3])
    for empty in (packed[2:0], packed[[]], packed[np.zeros(3, dtype=bool)],
                  PackedSequences(np.zeros((0, 2)), [])):
        assert len(empty) == 0 and list(empty) == [] and empty.X.shape == (0, 2)
    with pytest.raises(ValueError, match="lengths"):
        PackedSequences(np.zeros((2, 2)), [])
