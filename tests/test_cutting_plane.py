"""StructSVMCuttingPlane against exact optima computed by enumeration."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import ChainStructure, MultiClass, StructSVMCuttingPlane
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from ._helpers import make_chain_data


def _batch_and_labels(model, X, y):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    return batch, model._encode_known(np.concatenate(y))


@pytest.mark.parametrize("rescale", ["margin", "slack"])
@pytest.mark.parametrize("C", [0.1, 2.0])
def test_the_reference_bound_without_slsqp_multipliers_is_as_tight(rescale, C):
    """SciPy < 1.16 reports no SLSQP multipliers: the enumeration reference then takes them
    from the KKT conditions, and its lower bound must be as tight (this runs that path on
    any SciPy)."""
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    model = StructSVMCuttingPlane(ChainStructure(), C=C, rescale=rescale, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    batch, Y = _batch_and_labels(model, X, y)
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, C, rescale, kkt=True)
    assert 0 <= upper - lower < 1e-8 * max(1.0, upper)


@pytest.mark.parametrize("variant", ["1-slack", "n-slack"])
@pytest.mark.parametrize("rescale", ["margin", "slack"])
@pytest.mark.parametrize(
    "structure",
    [ChainStructure(start_end=False), ChainStructure(start_end=True),
     ChainStructure(class_weight=[1.0, 2.0, 0.5])],
)
@pytest.mark.parametrize("C", [0.1, 2.0])
def test_reaches_exact_optimum_on_tiny_chains(structure, rescale, C, variant):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    model = StructSVMCuttingPlane(structure, C=C, variant=variant, rescale=rescale, tol=1e-6,
                                  **({"batch_size": 4} if variant == "n-slack" else {})
                                  ).fit(X, y)
    batch, Y = _batch_and_labels(model, X, y)
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, C, rescale)
    # the reference is itself certified: the optimum lies in [lower, upper]
    assert 0 <= upper - lower < 1e-8 * max(1.0, upper)
    ours = primal_objective(model.structure_, batch, Y, model.w_, C, rescale)
    gap = model.history_["gap"][-1]
    assert ours >= lower - 1e-9
    assert ours - upper <= gap + 1e-9
    assert gap <= 1.1 * C * batch.n_sequences * model.tol * (1 if variant == "1-slack" else 2) \
        + 1e-9
    # the learner's own objective() agrees with enumeration, and with history
    assert model.objective(X, y) == pytest.approx(ours, rel=1e-10, abs=1e-10)
    assert model.history_["primal"][-1] == pytest.approx(ours, rel=1e-10, abs=1e-10)


def test_reaches_exact_optimum_multiclass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 4))
    y = rng.integers(0, 4, size=25)
    for rescale in ("margin", "slack"):
        model = StructSVMCuttingPlane(C=0.7, rescale=rescale, tol=1e-7,
                                      fit_intercept=False).fit(X, y)
        batch = SequenceBatch(X, offsets_from_lengths(np.ones(25, dtype=int)))
        lower, upper, _ = exact_optimum(model.structure_, batch, y, 0.7, rescale)
        assert 0 <= upper - lower < 1e-8 * max(1.0, upper)
        ours = model.objective(X, y)
        assert lower - 1e-9 <= ours <= upper + model.history_["gap"][-1] + 1e-9


def test_history_is_a_certificate():
    X, y = make_chain_data(n_sequences=30, seed=2)
    model = StructSVMCuttingPlane(C=1.0, tol=1e-4, cache_size=0).fit(X, y)
    h = model.history_
    assert set(h) >= {"primal", "dual", "gap", "time", "oracle_calls"}
    assert len(h["primal"]) == model.n_iter_
    np.testing.assert_allclose(h["gap"], h["primal"] - h["dual"])
    assert np.all(h["gap"] >= -1e-9)
    assert np.all(np.diff(h["dual"]) >= -1e-6 * max(1.0, abs(h["dual"][-1])))
    assert np.all(np.diff(h["time"]) >= 0)
    np.testing.assert_array_equal(h["oracle_calls"], 30 * np.arange(1, model.n_iter_ + 1))


def test_label_cache_saves_oracle_calls_and_keeps_the_certificate():
    X, y = make_chain_data(n_sequences=40, seed=8)
    plain = StructSVMCuttingPlane(C=1.0, tol=1e-4, cache_size=0).fit(X, y)
    cached = StructSVMCuttingPlane(C=1.0, tol=1e-4, cache_size=10).fit(X, y)
    h = cached.history_
    assert h["oracle_calls"][-1] < plain.history_["oracle_calls"][-1]
    assert h["oracle_calls"][-1] < 40 * cached.n_iter_
    assert np.all(np.diff(h["oracle_calls"]) >= 0)
    # iterations served by the cache have no exact primal; the last one always has
    served = np.diff(np.concatenate([[0], h["oracle_calls"]])) == 0
    assert np.all(np.isnan(h["primal"][served])) and np.all(np.isfinite(h["primal"][~served]))
    assert np.isfinite(h["gap"][-1]) and h["gap"][-1] >= 0
    gap = max(plain.history_["gap"][-1], h["gap"][-1])
    assert abs(plain.objective(X, y) - cached.objective(X, y)) <= gap + 1e-9


def test_max_iter_warns():
    X, y = make_chain_data(n_sequences=30, seed=2)
    with pytest.warns(ConvergenceWarning):
        model = StructSVMCuttingPlane(C=10.0, tol=1e-8, max_iter=3).fit(X, y)
    assert model.n_iter_ == 3


def test_sparse_and_dense_give_the_same_model():
    X, y = make_chain_data(n_sequences=20, seed=4)
    Xs, _ = make_chain_data(n_sequences=20, seed=4, sparse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        dense = StructSVMCuttingPlane(tol=1e-5).fit(X, y)
        sparse = StructSVMCuttingPlane(tol=1e-5).fit(Xs, y)
    # both are certified to their gaps, so their objectives agree within them
    gap = max(dense.history_["gap"][-1], sparse.history_["gap"][-1])
    assert abs(dense.objective(X, y) - sparse.objective(Xs, y)) <= gap + 1e-9
    assert abs(dense.objective(Xs, y) - dense.objective(X, y)) < 1e-9


def test_multiclass_structure_rejects_sequences():
    X, y = make_chain_data(n_sequences=5, seed=0, max_length=4)
    with pytest.raises(ValueError, match="one sample per sequence"):
        StructSVMCuttingPlane(MultiClass()).fit(X, y)


@pytest.mark.parametrize("start_end", [False, True])
def test_labeling_storage_matches_dense_storage(monkeypatch, start_end):
    from sklstruct.learners.cutting_plane import _one_slack as _working_set
    from sklstruct.learners.cutting_plane._one_slack import WorkingSet

    X, y = make_chain_data(n_sequences=12, seed=5)
    model = StructSVMCuttingPlane(ChainStructure(start_end=start_end), max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    batch, Y = _batch_and_labels(model, X, y)
    structure = model.structure_
    rng = np.random.default_rng(0)
    sets = [WorkingSet(structure, batch, Y)]
    monkeypatch.setattr(_working_set, "DENSE_BYTES_PER_CONSTRAINT", 0)
    sets.append(WorkingSet(structure, batch, Y))
    assert sets[0].dense and not sets[1].dense
    directions = []
    for k in range(6):
        Ybar = np.where(rng.random(Y.shape[0]) < 0.4, rng.integers(0, 3, Y.shape[0]), Y)
        scale = rng.uniform(0.5, 2.0, batch.n_sequences)
        for ws in sets:
            ws.add(Ybar, scale, offset=float(k))
        rows = [slice(batch.offsets[i], batch.offsets[i + 1]) for i in range(batch.n_sequences)]
        directions.append(sum(
            scale[i] * (structure.joint_feature(batch.take([i]), Y[rows[i]])
                        - structure.joint_feature(batch.take([i]), Ybar[rows[i]]))
            for i in range(batch.n_sequences)
        ))
    directions = np.array(directions)
    keep = np.array([True, False, True, True, False, True])
    for ws in sets:
        np.testing.assert_allclose(ws.gram, directions @ directions.T, rtol=1e-10, atol=1e-10)
        ws.remove(keep)
        np.testing.assert_allclose(ws.gram, (directions @ directions.T)[np.ix_(keep, keep)],
                                   rtol=1e-10, atol=1e-10)
        alpha = rng.uniform(0, 1, keep.sum())
        np.testing.assert_allclose(ws.combine(alpha), alpha @ directions[keep], atol=1e-10)
        np.testing.assert_array_equal(ws.offsets, np.arange(6.0)[keep])


def test_constraint_removal_keeps_the_optimum():
    X, y = make_chain_data(n_sequences=25, seed=6)
    keep_all = StructSVMCuttingPlane(tol=1e-5, inactive_window=10**6).fit(X, y)
    prune = StructSVMCuttingPlane(tol=1e-5, inactive_window=3).fit(X, y)
    assert np.any(np.diff(prune.history_["n_constraints"]) < 0)
    gap = max(keep_all.history_["gap"][-1], prune.history_["gap"][-1])
    assert abs(keep_all.objective(X, y) - prune.objective(X, y)) <= gap + 1e-9


@pytest.mark.parametrize("variant", ["1-slack", "n-slack"])
@pytest.mark.parametrize("rescale", ["margin", "slack"])
def test_sample_weight_equals_repetition(variant, rescale):
    X, y = make_chain_data(n_sequences=12, seed=9)
    weights = np.array([2, 0, 1, 3, 1, 1, 0, 2, 1, 1, 1, 1])
    X_rep = [x for x, k in zip(X, weights) for _ in range(k)]
    y_rep = [s for s, k in zip(y, weights) for _ in range(k)]
    params = dict(C=0.5, variant=variant, rescale=rescale, tol=1e-6, cache_size=0)
    weighted = StructSVMCuttingPlane(**params).fit(X, y, sample_weight=weights)
    repeated = StructSVMCuttingPlane(**params).fit(X_rep, y_rep)
    p_weighted = weighted.objective(X, y, sample_weight=weights)
    assert p_weighted == pytest.approx(weighted.objective(X_rep, y_rep), rel=1e-12)
    gap = weighted.history_["gap"][-1] + repeated.history_["gap"][-1]
    assert abs(p_weighted - repeated.objective(X_rep, y_rep)) <= gap + 1e-9


@pytest.mark.parametrize("variant", ["1-slack", "n-slack"])
def test_sequences_of_weight_zero_are_as_absent(variant):
    """A sequence of weight 0 takes no part in the fit: the same bits, working set and
    oracle calls as without it (n-slack's random order included)."""
    X, y = make_chain_data(n_sequences=30, seed=4)
    weights = np.array([0.0, 2.0, 1.0] * 10)
    kept = np.flatnonzero(weights)
    params = dict(C=0.5, variant=variant, random_state=0)
    with_zeros = StructSVMCuttingPlane(**params).fit(X, y, sample_weight=weights)
    without = StructSVMCuttingPlane(**params).fit([X[i] for i in kept], [y[i] for i in kept],
                                                  sample_weight=weights[kept])
    np.testing.assert_array_equal(with_zeros.w_, without.w_)
    np.testing.assert_array_equal(with_zeros.dual_coef_, without.dual_coef_)
    np.testing.assert_array_equal(with_zeros.history_["oracle_calls"],
                                  without.history_["oracle_calls"])


def test_batch_size_of_an_explicit_one_slack_fit_warns():
    X, y = make_chain_data(n_sequences=8, seed=2)
    with pytest.warns(UserWarning, match=r"variant='1-slack'\) does not use batch_size=5"):
        StructSVMCuttingPlane(variant="1-slack", batch_size=5).fit(X, y)
    with pytest.warns(UserWarning, match=r"variant='n-slack'\) does not use cache_size=3"):
        StructSVMCuttingPlane(variant="n-slack", cache_size=3).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        StructSVMCuttingPlane(variant="auto", batch_size=5).fit(X, y)  # (auto may pick it)


def test_sample_weight_per_token_of_a_flat_input_travels_through_cross_validation():
    """A flat X's weights, one per row, are indexed by cross-validation as its rows are: fit
    takes them (the same for the tokens of a sequence) and score too, and each fold gives
    what a fit and score by hand with one weight per sequence give."""
    import sklearn
    from sklearn.model_selection import GroupKFold, cross_validate

    from sklstruct.utils import lengths_to_groups

    X, y = make_chain_data(n_sequences=18, seed=3)
    lengths = np.array([len(s) for s in y])
    per_sequence = np.arange(18) % 4 + 0.5
    X_flat, y_flat, ids = np.vstack(X), np.concatenate(y), lengths_to_groups(lengths)
    per_token = np.repeat(per_sequence, lengths)
    params = dict(C=0.5, tol=1e-6)
    with sklearn.config_context(enable_metadata_routing=True):
        model = StructSVMCuttingPlane(**params).set_fit_request(
            sequence_ids=True, lengths=False, sample_weight=True).set_score_request(
            sequence_ids=True, lengths=False, sample_weight=True)
        folds = GroupKFold(3)
        scores = cross_validate(model, X_flat, y_flat, cv=folds,
                                params={"sequence_ids": ids, "groups": ids,
                                        "sample_weight": per_token})["test_score"]
    for score, (train, test) in zip(scores, folds.split(X_flat, y_flat, ids)):
        train_seq, test_seq = np.unique(ids[train]), np.unique(ids[test])
        by_hand = StructSVMCuttingPlane(**params).fit(
            [X[i] for i in train_seq], [y[i] for i in train_seq],
            sample_weight=per_sequence[train_seq])
        X_test, y_test = [X[i] for i in test_seq], [y[i] for i in test_seq]
        expected = by_hand.score(X_test, y_test, sample_weight=per_sequence[test_seq])
        assert score == expected
        assert expected == by_hand.score(X_test, y_test,
                                         sample_weight=np.repeat(per_sequence[test_seq],
                                                                 lengths[test_seq]))
    uneven = per_token.copy()
    uneven[1] += 1.0  # (the first sequence's tokens no longer share a weight)
    with pytest.raises(ValueError, match="tokens of a sequence differ"):
        StructSVMCuttingPlane(**params).fit(X_flat, y_flat, sequence_ids=ids,
                                            sample_weight=uneven)
    with pytest.raises(ValueError, match="one per sequence, or"):
        by_hand.score(X_test, y_test, sample_weight=np.ones(len(X_test) + 1))
    # with empty sequences there may be as many sequences as tokens: the weights are read
    # per sequence, as fit reads them
    longest = int(np.argmax([len(labels) for labels in y_test]))
    X_first, y_first = X_test[longest], y_test[longest]
    assert len(y_first) > 2
    right = by_hand.predict([X_first])[0] == y_first
    X_empty = [X_first] + [X_first[:0]] * (len(y_first) - 1)
    y_empty = [y_first] + [y_first[:0]] * (len(y_first) - 1)
    first_only = np.r_[1.0, np.zeros(len(y_first) - 1)]
    assert by_hand.score(X_empty, y_empty, sample_weight=first_only) == right.mean()
    with pytest.raises(ValueError, match="zero on every token"):
        by_hand.score(X_empty, y_empty, sample_weight=first_only[::-1])


def test_grid_search_passes_fits_sequence_weights_on_to_score():
    """scikit-learn (1.7 and later) hands fit's sample_weight to the default scorer too, so
    score takes one weight per sequence; each split's score is the weighted token accuracy
    of a fit and score by hand."""
    from sklearn.model_selection import GridSearchCV, KFold

    X, y = make_chain_data(n_sequences=15, seed=5)
    weights = np.arange(15) % 3 + 1.0
    folds = KFold(3)
    search = GridSearchCV(StructSVMCuttingPlane(tol=1e-6), {"C": [0.1, 1.0]}, cv=folds,
                          error_score="raise").fit(X, y, sample_weight=weights)
    for k, (train, test) in enumerate(folds.split(X)):
        model = StructSVMCuttingPlane(tol=1e-6, C=search.cv_results_["param_C"][0]).fit(
            [X[i] for i in train], [y[i] for i in train], sample_weight=weights[train])
        X_test, y_test = [X[i] for i in test], [y[i] for i in test]
        per_token = np.concatenate([np.full(len(y[i]), weights[i]) for i in test])
        correct = np.concatenate(model.predict(X_test)) == np.concatenate(y_test)
        assert search.cv_results_[f"split{k}_test_score"][0] == pytest.approx(
            np.average(correct, weights=per_token), rel=1e-15)


@pytest.mark.parametrize("variant", ["1-slack", "n-slack"])
def test_parallel_oracle_gives_the_same_model(variant):
    from joblib import parallel_backend

    X, y = make_chain_data(n_sequences=40, seed=10)
    params = dict(C=1.0, variant=variant, tol=1e-4, random_state=0,
                  **({"batch_size": 10} if variant == "n-slack" else {}))
    serial = StructSVMCuttingPlane(n_jobs=1, **params).fit(X, y)
    threaded = StructSVMCuttingPlane(n_jobs=2, **params).fit(X, y)
    np.testing.assert_array_equal(serial.w_, threaded.w_)
    with parallel_backend("loky", n_jobs=2):
        processes = StructSVMCuttingPlane(n_jobs=2, **params).fit(X, y)
    np.testing.assert_array_equal(serial.w_, processes.w_)


def test_auto_variant_follows_the_number_of_examples(monkeypatch):
    """variant="auto" takes n-slack above the threshold and both reach the same optimum."""
    from sklstruct.learners.cutting_plane import _estimator

    X, y = make_chain_data(n_sequences=12, n_states=3, n_features=4, max_length=5, seed=3)
    small = StructSVMCuttingPlane(C=0.5, tol=1e-6).fit(X, y)
    assert small.variant_ == "1-slack"
    monkeypatch.setattr(_estimator, "AUTO_N_SLACK_ABOVE", 10)
    large = StructSVMCuttingPlane(C=0.5, tol=1e-6).fit(X, y)
    assert large.variant_ == "n-slack"
    assert large.objective(X, y) == pytest.approx(small.objective(X, y), rel=1e-5)


def test_n_slack_gram_cache_matches_the_constraints():
    """The Gram matrices the n-slack sweeps keep per example, through constraints added,
    swept and removed, equal those of the constraints' joint-feature differences (and the
    constraints' blocks, kept up to date as they are added, are those sorted afresh)."""
    from sklstruct.learners.cutting_plane._n_slack import NSlackSolver

    X, y = make_chain_data(n_sequences=10, n_states=3, max_length=6, seed=3)
    model = StructSVMCuttingPlane(variant="n-slack", max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    batch, Y = _batch_and_labels(model, X, y)
    structure, n = model.structure_, batch.n_sequences
    solver = NSlackSolver(structure, batch, Y, np.full(n, 0.5), "margin", 1e-9, None)
    everything = np.arange(n)
    for stamp in range(6):
        for chunk in np.array_split(everything, 3):
            solver.add_violated(chunk, stamp)
            # the blocks kept up to date as constraints are added: as sorted afresh
            block_ptr, members = solver.constraints.blocks(n)
            owner = solver.constraints.owner.data
            np.testing.assert_array_equal(members, np.argsort(owner, kind="stable"))
            np.testing.assert_array_equal(block_ptr, np.concatenate(
                [[0], np.cumsum(np.bincount(owner, minlength=n))]))
            solver.optimise(chunk, 1e-9, max_sweeps=2)
        solver.constraints.remove_inactive(stamp, 2)
    solver.optimise(everything, 1e-9, max_sweeps=1)
    c = solver.constraints
    assert c.n_added > len(c)  # some constraints were removed
    sizes, expected_slack = [], np.zeros(n)
    for i in range(n):
        own = np.flatnonzero(c.owner.data == i)
        if own.size == 0:  # (the sweeps skip examples without constraints)
            continue
        gram, serial = solver.gram_cache.matrix(i)
        np.testing.assert_array_equal(serial, c.serial.data[own])
        rows = slice(batch.offsets[i], batch.offsets[i + 1])
        one = batch.take([i])
        directions = []
        for k in own:
            Ybar = Y.copy()
            entries = slice(c.entry_ptr.data[k], c.entry_ptr.data[k + 1])
            Ybar[c.tokens.data[entries]] = c.wrong_state.data[entries]
            directions.append(structure.joint_feature(one, Y[rows])
                              - structure.joint_feature(one, Ybar[rows]))
        directions = np.array(directions).reshape(len(own), -1)
        np.testing.assert_allclose(gram, directions @ directions.T, rtol=1e-12, atol=1e-12)
        sizes.append(len(own))
        expected_slack[i] = max(0.0, np.max(c.offsets.data[own] - directions @ solver.w))
    assert max(sizes) >= 2
    # the slacks of any examples, in any order (through the blocks): max(0, max_k c_k - w.g_k)
    order = np.random.default_rng(0).permutation(n)[:7]
    np.testing.assert_allclose(solver.slacks(order), expected_slack[order], rtol=1e-10,
                               atol=1e-12)
    assert np.any(expected_slack[order] > 0)
    for i in range(n):  # one at a time
        np.testing.assert_allclose(solver.slacks([i]), expected_slack[[i]], rtol=1e-10,
                                   atol=1e-12)
    with pytest.raises(IndexError):
        solver.gram_cache.matrix(n)
    # the sweeps give every feature its slot back
    np.testing.assert_array_equal(solver.slot, -1)
    solver.slot = solver.slot[1:]
    with pytest.raises(ValueError, match="feature slots"):
        solver.optimise(everything, 1e-9, max_sweeps=1)
