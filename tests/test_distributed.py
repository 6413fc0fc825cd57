"""The 1-slack fit on a dask LocalCluster (2 worker processes), model selection under joblib's
dask backend, and the hashing vectorizer that lets shards vectorise on their own."""

import os
import signal
import time
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils.validation import check_is_fitted

from sklstruct import MultiClass, StructSVMCuttingPlane
from sklstruct.preprocessing import (HashingSequenceVectorizer, SequenceVectorizer,
                                     window_features)

from ._helpers import make_chain_data


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    return make_chain_data(n_sequences=120, n_states=4, n_features=6, max_length=12, seed=1,
                           sparse=True)


def _model(**params):
    return StructSVMCuttingPlane(**{"variant": "1-slack", "C": 1.0, "tol": 1e-3, **params})


def _relative_gap(model):
    return model.history_["gap"][-1] / model.history_["primal"][-1]


def test_one_shard_is_the_local_fit_bit_for_bit(client, data):
    from sklstruct.distributed import ShardedSequences

    X, y = data
    local = _model().fit(X, y)
    shards = ShardedSequences.scatter(X, y, n_shards=1, client=client)
    distributed = _model().fit(shards)
    np.testing.assert_array_equal(distributed.w_, local.w_)
    np.testing.assert_array_equal(distributed.dual_coef_, local.dual_coef_)
    assert distributed.n_iter_ == local.n_iter_
    assert distributed.variant_ == "1-slack"
    assert distributed.n_inexact_examples_ == local.n_inexact_examples_ == 0
    for a, b in zip(distributed.predict(X), local.predict(X)):
        np.testing.assert_array_equal(a, b)
    # a model of sequences refuses images, fitted on shards as locally
    image = [np.zeros((4, 5, X[0].shape[1]))]
    for model in (local, distributed):
        with pytest.raises(ValueError, match="fitted on sequences or samples, not images"):
            model.predict(image)


def test_one_shard_with_weights_of_zero_is_the_local_fit_bit_for_bit(client, data):
    """Sequences of weight 0 take no part in a sharded fit, as in a local one, while their
    labels count in the structure's set-up of both (class_weight="balanced")."""
    from sklstruct import ChainStructure
    from sklstruct.distributed import ShardedSequences

    X, y = data
    weights = np.random.RandomState(1).choice([0.0, 0.5, 1.0, 2.0], size=len(X))
    model = lambda: _model(structure=ChainStructure(class_weight="balanced"))  # noqa: E731
    local = model().fit(X, y, sample_weight=weights)
    shards = ShardedSequences.scatter(X, y, sample_weight=weights, n_shards=1, client=client)
    distributed = model().fit(shards)
    np.testing.assert_array_equal(distributed.structure_.loss_weights_,
                                  local.structure_.loss_weights_)
    np.testing.assert_array_equal(distributed.w_, local.w_)
    assert distributed.history_["oracle_calls"][-1] == local.history_["oracle_calls"][-1]


def test_two_shards_agree_with_the_local_fit_within_the_certificate(client, data):
    from sklstruct.distributed import ShardedSequences

    X, y = data
    local = _model().fit(X, y)
    shards = ShardedSequences.scatter(X, y, client=client)
    assert shards.n_shards == 2 and len(set(shards.workers)) == 2
    distributed = _model().fit(shards)
    tol = distributed.tol
    assert _relative_gap(distributed) <= tol and _relative_gap(local) <= tol
    # both objectives are certified within tol * primal of the optimum
    p_local, p_dist = local.objective(X, y), distributed.objective(X, y)
    assert abs(p_dist - p_local) <= tol * max(p_dist, p_local)
    # strong convexity: ||w - w*||^2 <= 2 (P(w) - P(w*)) <= 2 gap
    bound = np.sqrt(2 * distributed.history_["gap"][-1]) + np.sqrt(2 * local.history_["gap"][-1])
    assert np.linalg.norm(distributed.w_ - local.w_) <= bound


def test_placement_of_the_shards_does_not_change_the_model(client, data):
    from sklstruct.distributed import ShardedSequences
    from sklstruct.learners.cutting_plane._sharded import _ShardData, _split

    X, y = data
    spread = ShardedSequences.scatter(X, y, n_shards=2, client=client)
    workers = sorted(client.scheduler_info()["workers"])
    pieces = _split(_ShardData(X, y), 2)
    together = ShardedSequences(client, [client.scatter(piece, workers=[workers[0]], hash=False)
                                         for piece in pieces], scattered=True)
    assert len(set(together.workers)) == 1
    np.testing.assert_array_equal(_model().fit(spread).w_, _model().fit(together).w_)


def test_shards_are_not_sent_again_per_iteration(client, data):
    from sklstruct.distributed import ShardedSequences

    X, y = data
    shards = ShardedSequences.scatter(X, y, client=client)
    before = shards.stats()
    with mock.patch.object(client, "scatter", wraps=client.scatter) as scatter:
        model = _model().fit(shards)
    assert scatter.call_count == 0
    after = shards.stats()
    w_bytes = model.w_.nbytes
    for a, b in zip(after, before):
        calls = a["calls"] - b["calls"]
        assert calls >= model.n_iter_
        # per call at most the weights (plus the classes once), never the shard's data
        assert a["bytes_in"] - b["bytes_in"] <= calls * w_bytes + model.classes_.nbytes
        assert a["shard_bytes"] == b["shard_bytes"] > 20 * w_bytes
        # per call at most one dense direction back (plus the classes and counts once)
        assert a["bytes_out"] - b["bytes_out"] <= calls * (w_bytes + 16) + a["shard_bytes"]


def test_a_lost_worker_stops_the_fit_with_a_clear_error(client, data):
    from sklstruct.distributed import ShardedSequences, ShardLostError

    X, y = data
    shards = ShardedSequences.scatter(X, y, client=client)
    victim = shards.workers[1]
    pid = client.run(os.getpid, workers=[victim])[victim]

    def kill(estimator, info):
        if info["iteration"] == 3:
            os.kill(pid, signal.SIGKILL)

    model = _model(callback=kill)
    with pytest.raises(ShardLostError, match=f"Shard 1 of 2 was lost with its worker {victim}"):
        model.fit(shards)
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(model)
    client.wait_for_workers(2, timeout=60)
    with pytest.raises(ValueError, match="give restore"):
        shards.restore()
    assert shards.restore(X, y) == [1]
    fresh = ShardedSequences.scatter(X, y, client=client)
    np.testing.assert_array_equal(_model().fit(shards).w_, _model().fit(fresh).w_)


def test_delayed_and_bag_shards_with_the_hashing_vectorizer(client):
    import dask
    import dask.bag as db

    from sklstruct.distributed import ShardedSequences

    rng = np.random.default_rng(0)
    labels = [rng.integers(0, 3, size=rng.integers(2, 8)) for _ in range(60)]
    sentences = [[{"word": f"w{label}{rng.integers(4)}", "noisy": f"n{rng.integers(6)}",
                   "x": float(rng.normal())} for label in sequence] for sequence in labels]
    vectorizer = HashingSequenceVectorizer(n_features=2**9)
    X = vectorizer.transform(sentences)
    local = _model().fit(X, labels)
    records = list(zip(sentences, labels))
    one = ShardedSequences.from_bag(db.from_sequence(records, npartitions=1), vectorizer,
                                    client=client)
    np.testing.assert_array_equal(_model().fit(one).w_, local.w_)
    parts = [dask.delayed(lambda lo: (X[lo:lo + 30], labels[lo:lo + 30]))(lo)
             for lo in (0, 30)]
    two = ShardedSequences.from_delayed(parts, client=client)
    bag = ShardedSequences.from_bag(db.from_sequence(records, npartitions=2), vectorizer,
                                    client=client)
    np.testing.assert_array_equal(_model().fit(two).w_, _model().fit(bag).w_)


def test_a_worker_lost_before_the_fit_stops_it_with_a_clear_error(client, data):
    """dask refuses a call to the actor of a worker lost before the call: the same
    ShardLostError as a loss during the fit."""
    from sklstruct.distributed import ShardedSequences, ShardLostError

    X, y = data
    shards = ShardedSequences.scatter(X, y, client=client)
    victim = shards.workers[1]
    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    client.wait_for_workers(2, timeout=60)  # (the nanny starts another worker)
    # until dask refuses calls to the lost actor at once (its future has failed), which it
    # does a moment after the loss; a fit started sooner sees the loss in an answer
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            shards._actors[1].stats
        except RuntimeError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("dask kept the lost shard's actor callable")
    with pytest.raises(ShardLostError, match=f"Shard 1 of 2 was lost with its worker {victim}"):
        _model().fit(shards)
    assert shards.restore(X, y) == [1]
    check_is_fitted(_model().fit(shards))


def test_shards_of_a_closed_client_say_so():
    distributed = pytest.importorskip("dask.distributed")
    from sklstruct.distributed import ShardedSequences

    X, y = make_chain_data(n_sequences=20, seed=2, sparse=True)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        own = distributed.Client(cluster)
        shards = ShardedSequences.scatter(X, y, client=own)
        own.close()
        with pytest.raises(RuntimeError, match="client of these 1 shards is closed"):
            _model().fit(shards)


def test_sharded_input_refuses_what_it_cannot_do(client, data):
    from sklstruct import M3NSimplicialDecomposition
    from sklstruct.distributed import ShardedSequences

    X, y = data
    shards = ShardedSequences.scatter(X, y, client=client)
    fitted = _model().fit(shards)
    for method in ("predict", "score", "objective", "decision_function"):
        args = (shards,) if method in ("predict", "decision_function") else (shards, y)
        with pytest.raises(TypeError, match="training data for StructSVMCuttingPlane.fit "
                                            "only; predict, score"):
            getattr(fitted, method)(*args)
    with pytest.raises(TypeError, match="fit this learner on local data"):
        M3NSimplicialDecomposition().fit(shards, y)
    with pytest.warns(UserWarning, match="fitted by 1-slack\\) does not use batch_size=5"):
        _model(batch_size=5, max_iter=2).fit(shards)
    with pytest.raises(ValueError, match="pass no y"):
        _model().fit(shards, y)
    with pytest.raises(ValueError, match="1-slack variant only"):
        StructSVMCuttingPlane(variant="n-slack").fit(shards)
    with pytest.raises(ValueError, match="fit_intercept=False"):
        StructSVMCuttingPlane(MultiClass()).fit(shards)
    with pytest.raises(ValueError, match="n_shards must be between"):
        ShardedSequences.scatter(X, y, n_shards=len(X) + 1, client=client)
    with pytest.raises(ValueError, match="requires y"):
        StructSVMCuttingPlane().fit(X)


def test_a_shard_that_fails_on_its_worker_surfaces_its_own_error(client, data):
    import dask

    from sklstruct.distributed import ShardedSequences

    X, y = data
    with_nan = [x.copy() for x in X[:30]]
    with_nan[3].data[0] = np.nan
    cases = [((with_nan, y[:30]), "NaN"),
             ((X[:30], y[:29]), "30 sequences but y has 29")]
    for bad, message in cases:
        parts = [dask.delayed(lambda part: part)((X[30:60], y[30:60])),
                 dask.delayed(lambda part: part)(bad)]
        with pytest.raises(ValueError, match=f"Shard 1 of 2 failed on its worker: .*{message}"):
            ShardedSequences.from_delayed(parts, client=client)


def test_empty_shards_are_left_out(client):
    import dask.bag as db

    from sklstruct.distributed import ShardedSequences

    rng = np.random.default_rng(0)
    labels = [rng.integers(0, 3, size=rng.integers(2, 8)) for _ in range(40)]
    sentences = [[{"word": f"w{label}{rng.integers(4)}"} for label in sequence]
                 for sequence in labels]
    vectorizer = HashingSequenceVectorizer(n_features=2**8)
    records = list(zip(sentences, labels))
    # the filter empties the second and fourth partitions (10 records each)
    bag = db.from_sequence(list(enumerate(records)), npartitions=4).filter(
        lambda item: item[0] % 20 < 10).map(lambda item: item[1])
    shards = ShardedSequences.from_bag(bag, vectorizer, client=client)
    assert shards.n_shards == 2
    kept = [record for k, record in enumerate(records) if k % 20 < 10]
    local = _model().fit(vectorizer.transform([r[0] for r in kept]), [r[1] for r in kept])
    np.testing.assert_allclose(_model().fit(shards).objective(
        vectorizer.transform([r[0] for r in kept]), [r[1] for r in kept]),
        local.objective(vectorizer.transform([r[0] for r in kept]), [r[1] for r in kept]),
        rtol=2e-3)
    with pytest.raises(ValueError, match="None of the 2 shards holds a sequence"):
        ShardedSequences.from_bag(db.from_sequence(records, npartitions=2).filter(
            lambda record: False), vectorizer, client=client)


def test_sharded_fits_validate_labels_and_weights_as_local_fits(client, data):
    import dask

    from sklstruct.distributed import ShardedSequences

    X, y = data
    as_str = [labels.astype(str) for labels in y]
    parts = [dask.delayed(lambda part: part)((X[:60], y[:60])),
             dask.delayed(lambda part: part)((X[60:], as_str[60:]))]
    shards = ShardedSequences.from_delayed(parts, client=client)
    with pytest.raises(TypeError, match="mutually comparable values of one kind"):
        _model().fit(shards)
    with pytest.raises(TypeError, match="mutually comparable values of one kind"):
        _model().fit(X, y[:60] + as_str[60:])
    zero = ShardedSequences.scatter(X, y, sample_weight=np.zeros(len(X)), client=client)
    with pytest.raises(ValueError, match="sample_weight must not be all zero"):
        _model().fit(zero)
    with pytest.raises(ValueError, match="sample_weight must not be all zero"):
        _model().fit(X, y, sample_weight=np.zeros(len(X)))
    # a shard may weigh nothing as long as another does not
    half = np.r_[np.zeros(60), np.ones(len(X) - 60)]
    local = _model().fit(X, y, sample_weight=half)
    sharded = _model().fit(ShardedSequences.scatter(X, y, sample_weight=half, n_shards=2,
                                                    client=client))
    assert sharded.objective(X, y, sample_weight=half) == \
        pytest.approx(local.objective(X, y, sample_weight=half), rel=2e-3)


def test_grid_search_under_the_dask_backend_equals_the_local_one(client, data):
    from joblib import parallel_backend

    X, y = data
    grid = {"C": [0.1, 1.0]}
    search = GridSearchCV(_model(tol=1e-2), grid, cv=KFold(3), n_jobs=-1)
    local = search.fit(X, y).cv_results_
    with parallel_backend("dask"):
        on_dask = GridSearchCV(_model(tol=1e-2), grid, cv=KFold(3), n_jobs=-1).fit(X, y)
    np.testing.assert_array_equal(on_dask.cv_results_["mean_test_score"],
                                  local["mean_test_score"])
    np.testing.assert_array_equal(on_dask.cv_results_["split0_test_score"],
                                  local["split0_test_score"])
    assert on_dask.best_params_ == search.best_params_


# ---------------------------------------------------------------------- hashing vectorizer
def test_hashing_vectorizer_reads_values_as_sequence_vectorizer_does():
    X = [[{"w": "the", "n": 2.5, "b": True}, {"w": "cat", "tags": ["x", "y"]}],
         [{"w": "sat"}]]
    hashed = HashingSequenceVectorizer(n_features=2**18, alternate_sign=False).transform(X)
    exact = SequenceVectorizer().fit_transform(X)
    assert [m.shape[0] for m in hashed] == [2, 1]
    # with no collision, the hashed columns are a permutation of the learned ones
    H, E = sp.vstack(hashed).tocsc(), sp.vstack(exact).tocsc()
    used = np.flatnonzero(H.getnnz(axis=0))
    assert used.shape[0] == E.shape[1]
    assert sorted(map(tuple, H[:, used].T.toarray())) == sorted(map(tuple, E.T.toarray()))


def test_hashing_vectorizer_is_stateless_and_uses_the_separator():
    sentence = window_features(["He", "runs"], ["PRP", "VBZ"])
    vectorizer = HashingSequenceVectorizer(n_features=2**12)
    whole = sp.vstack(vectorizer.fit_transform([sentence, sentence[:1]]))
    parts = sp.vstack(vectorizer.transform([sentence]) + vectorizer.transform([sentence[:1]]))
    assert (whole != parts).nnz == 0
    other = HashingSequenceVectorizer(n_features=2**12, separator="#").transform([sentence])
    assert (sp.vstack(other) != sp.vstack(vectorizer.transform([sentence]))).nnz > 0
    with pytest.raises(TypeError, match="iterable with a value"):
        vectorizer.transform([[{"k": [1, 2]}]])
    with pytest.raises(TypeError, match="list of sequences"):
        vectorizer.transform("not a list")
