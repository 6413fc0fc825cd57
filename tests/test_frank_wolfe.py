"""The compiled block-coordinate Frank-Wolfe pass (Yu and Rousu 2007 with dimension limit 1)."""

import numpy as np
import pytest

from sklstruct import ChainStructure, MultiClass, StructSVMCuttingPlane
from sklstruct.learners._factored_dual import FactoredDualState
from sklstruct.learners._frank_wolfe import (BlockFrankWolfeState,
                                                       MultiPointFrankWolfeState)
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from ._helpers import make_chain_data


def _bound(structure, X, y):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    n_states = int(Y.max()) + 1
    return structure.bind(batch.X.shape[1], n_states, np.arange(n_states), Y), batch, Y


@pytest.mark.parametrize("structure", [ChainStructure(), ChainStructure(start_end=False),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5])])
def test_passes_ascend_the_dual_and_reach_the_exact_optimum(structure):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    bound, batch, Y = _bound(structure, X, y)
    C = 0.5
    state = BlockFrankWolfeState(bound, batch, Y, C)
    _, dual = state.certificate()
    assert dual == 0.0  # starts at the true labelings: w = 0
    for _ in range(3000):
        state.run_pass()
        incremental = state.w.copy()
        w, new_dual = state.certificate()
        np.testing.assert_allclose(incremental, w, atol=1e-10)
        assert new_dual >= dual - 1e-12  # exact line search: every block step ascends
        dual = new_dual
    lower, upper, _ = exact_optimum(bound, batch, Y, C)
    primal = primal_objective(bound, batch, Y, w, C)
    assert dual <= upper + 1e-9 and primal >= lower - 1e-9
    assert primal - dual <= 1e-2 * primal  # plain BCFW (no away steps) converges as O(1/k)
    np.testing.assert_allclose(state.node_marg.sum(axis=1), 1.0, atol=1e-12)


def test_multiclass_matches_the_cutting_plane_learner():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = rng.integers(0, 3, size=60)
    reference = StructSVMCuttingPlane(C=0.3, tol=1e-8, fit_intercept=False).fit(X, y)
    bound = MultiClass().bind(4, 3, np.arange(3), y)
    batch = SequenceBatch(X, np.arange(61, dtype=np.int64))
    state = BlockFrankWolfeState(bound, batch, y.astype(np.intp), 0.3)
    for _ in range(2000):
        state.run_pass()
    w, dual = state.certificate()
    primal = reference.objective(X, y)
    assert dual <= primal + 1e-9
    assert primal - dual <= 1e-3 * primal


class _AsymmetricLoss(ChainStructure):
    """A chain whose loss of predicting state ``s`` instead of the truth is ``1 + s / 2``
    (not a weighted Hamming loss: the passes keep its token loss matrix)."""

    def token_loss(self, Y):
        loss = np.repeat(1.0 + 0.5 * np.arange(self.n_states_)[None, :], Y.shape[0], axis=0)
        loss[np.arange(Y.shape[0]), Y] = 0.0
        return loss


@pytest.mark.parametrize("structure", [ChainStructure(), ChainStructure(start_end=False),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5]),
                                       _AsymmetricLoss()])
def test_multi_point_pass_ascends_and_reaches_the_exact_optimum(structure):
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=7)
    bound, batch, Y = _bound(structure, X, y)
    C = 0.5
    plain = BlockFrankWolfeState(bound, batch, Y, C)
    for _ in range(1000):
        plain.run_pass()
    duals = {1: plain.certificate()[1]}
    for r, cached in ((3, False), (10, False), (3, True)):
        state = MultiPointFrankWolfeState(bound, batch, Y, C, r, cached=cached)
        dual = 0.0
        for _ in range(1000):
            state.run_pass()
            incremental = state.w.copy()
            w, new_dual = state.certificate()
            np.testing.assert_allclose(incremental, w, atol=1e-10)
            assert new_dual >= dual - 1e-12
            dual = new_dual
        assert np.all(state.n_vertices <= r)
        # x = (1 - sum mu) a + sum mu_k z_k from the kept weights and the packed anchors:
        # a distribution's statistics, whose weights are the certificate's
        assert np.all(state.vertex_weight >= 0)
        assert np.all(state.vertex_weight.sum(axis=1) <= 1.0 + 1e-9)
        if cached:
            assert state.cached
            duals["cached"] = dual
            continue
        node, pair = state.point_statistics()
        np.testing.assert_allclose(node.sum(axis=1), 1.0, atol=1e-12)
        assert node.min() >= -1e-12 and pair.min() >= -1e-12
        reference = FactoredDualState(bound, batch, Y, C, node, pair)
        np.testing.assert_allclose(reference.w, w, atol=1e-10)
        np.testing.assert_allclose(reference.expected_loss, state.expected_loss, atol=1e-12)
        if r == 3:  # anchors were folded and packed
            assert (state.anchors.start >= 0).any()
        # the loss matrix is kept only for a loss that is not the weighted Hamming loss
        assert (state.token_loss.size > 0) == isinstance(structure, _AsymmetricLoss)
        duals[r] = dual
    lower, upper, _ = exact_optimum(bound, batch, Y, C)
    assert duals[1] < duals[3] < duals[10] <= upper + 1e-9
    # the cached rows reach the same point by other arithmetic
    assert duals[1] < duals["cached"] <= upper + 1e-9
    assert abs(duals["cached"] - duals[3]) <= 1e-5 * upper
    assert upper - duals[10] <= 1e-5 * upper


@pytest.mark.parametrize("features", ["real", "integer", "binary"])
def test_kept_token_gram_matrices_change_nothing(monkeypatch, features):
    """Keeping the examples' token Gram matrices between visits gives the same iterates as
    recomputing them (the cached mode off, so the token products are used); with integer
    features they are kept in single precision, with binary ones as bytes, exactly."""
    from sklstruct.learners import _frank_wolfe

    X, y = make_chain_data(n_sequences=12, n_states=3, n_features=5, max_length=7, seed=4)
    if features == "integer":
        X = [np.rint(3 * x) for x in X]
    elif features == "binary":
        X = [(x > 0).astype(np.float64) for x in X]
    bound, batch, Y = _bound(ChainStructure(), X, y)
    weights = []
    for budget in (0, 128):
        monkeypatch.setattr(_frank_wolfe, "TOKEN_GRAM_MB", budget)
        state = MultiPointFrankWolfeState(bound, batch, Y, 0.5, 4, cached=False)
        assert (state.token_gram_ptr >= 0).all() == (budget > 0)
        kept = {"real": state.token_gram, "integer": state.token_gram32,
                "binary": state.token_gram8}
        for kind, gram in kept.items():
            assert (gram.size > 0) == (kind == features and budget > 0)
        if budget:  # upper triangles
            lengths = batch.lengths
            assert sum(gram.size for gram in kept.values()) == (
                lengths * (lengths + 1) // 2).sum()
        for _ in range(30):
            state.run_pass()
        assert state.token_gram_ready.any() == (budget > 0)  # the token path was taken
        weights.append(state.certificate()[0].copy())
    np.testing.assert_array_equal(weights[0], weights[1])


@pytest.mark.parametrize("structure", [ChainStructure(), ChainStructure(start_end=False),
                                       MultiClass()])
def test_compiled_hinge_equals_the_structures_oracle(structure):
    """The certificates' compiled per-example hinge equals the structure's batch oracle's."""
    from sklstruct.structures._base import structured_hinge

    X, y = make_chain_data(n_sequences=15, n_states=4, n_features=5, max_length=8, seed=9)
    if isinstance(structure, MultiClass):
        X, y = [x[:1] for x in X], [labels[:1] for labels in y]
    bound, batch, Y = _bound(structure, X, y)
    state = MultiPointFrankWolfeState(bound, batch, Y, 0.7, 3)
    for _ in range(3):
        state.run_pass()
        w, _ = state.certificate()
        hinge, _, _ = structured_hinge(bound, batch, Y, *bound.potentials(batch, w), "margin")
        assert state.primal() == pytest.approx(0.5 * w @ w + 0.7 * hinge.sum(), rel=1e-12)


def test_anchor_pool_growth_and_compaction_change_nothing():
    """Anchors packed into a pool that starts tiny (so it grows and compacts many times) give
    the same iterates as a roomy pool."""
    from sklstruct.learners._frank_wolfe import AnchorStore

    X, y = make_chain_data(n_sequences=30, n_states=4, n_features=5, max_length=9, seed=11)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    weights = []
    for n_entries in (100000, 0):
        state = MultiPointFrankWolfeState(bound, batch, Y, 2.0, 2, cached=False)
        state.anchors = AnchorStore(batch.n_sequences, n_entries)
        for _ in range(40):
            state.run_pass()
        weights.append(state.certificate()[0].copy())
        live = state.anchors.start >= 0
        assert live.sum() > 10
        # live slots do not overlap and hold their entries
        order = np.argsort(state.anchors.start[live])
        ends = (state.anchors.start + state.anchors.capacity)[live][order]
        assert np.all(ends[:-1] <= state.anchors.start[live][order][1:])
        assert np.all(state.anchors.n_node + state.anchors.n_pair
                      <= state.anchors.capacity)
    assert state.anchors.keys.shape[0] < 100000
    np.testing.assert_array_equal(weights[0], weights[1])


def test_distinct_features_in_chunks_equal_each_examples_features():
    import scipy.sparse as sp

    from sklstruct.learners._frank_wolfe import _distinct_features

    rng = np.random.default_rng(0)
    for trial in range(10):
        lengths = rng.integers(1, 8, size=rng.integers(1, 30))
        n_features = int(rng.integers(1, 12))
        X = sp.random(lengths.sum(), n_features, density=rng.uniform(0, 1), format="csr",
                      random_state=trial)
        batch = SequenceBatch(X, offsets_from_lengths(lengths))
        for chunk in (1, 3, 7, 10**6):
            features, ptr = _distinct_features(batch, n_features, None, chunk)
            for i in range(lengths.size):
                rows = X[batch.offsets[i]:batch.offsets[i + 1]]
                assert sorted(features[ptr[i]:ptr[i + 1]]) == sorted(np.unique(rows.indices))
            # counting stops past the limit (in chunks of at most a quarter of it); within
            # it, the same features
            within = _distinct_features(batch, n_features, ptr[-1], chunk)
            np.testing.assert_array_equal(within[0], features)
            np.testing.assert_array_equal(within[1], ptr)
            if ptr[-1]:
                assert _distinct_features(batch, n_features, ptr[-1] - 1, chunk) is None


def test_a_cached_state_refuses_to_be_rescaled():
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=7)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    state = MultiPointFrankWolfeState(bound, batch, Y, 0.5, 3, cached=True)
    assert state.cached
    with pytest.raises(ValueError, match="cached mode"):
        state.rescale(np.full(bound.size_joint_feature_, 4.0))
    scaled = MultiPointFrankWolfeState(bound, batch, Y, 0.5, 3, cached=True,
                                       scale2=np.ones(bound.size_joint_feature_))
    assert not scaled.cached
    scaled.rescale(np.full(bound.size_joint_feature_, 4.0))


@pytest.mark.parametrize("max_points", [2, 5])
def test_masters_from_token_and_feature_statistics_agree(max_points):
    """The masters' Gram matrices from the token Gram matrix and from the feature statistics
    are the same matrices: over the first passes the iterates agree to the masters' solver
    tolerance (later, a point dropped at a near tie can differ, and the paths part)."""
    X, y = make_chain_data(n_sequences=15, n_states=4, n_features=6, max_length=9, seed=5)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    weights = {}
    for how in ("tokens", "features"):
        state = MultiPointFrankWolfeState(bound, batch, Y, 2.0, max_points, cached=False)
        state.master_gram = how
        rng = np.random.RandomState(0)
        for _ in range(5):
            state.run_pass(rng.permutation(batch.n_sequences))
        assert state.n_vertices.max() >= 2
        weights[how] = state.certificate()[0].copy()
    assert np.abs(weights["tokens"]).max() > 0.1
    np.testing.assert_allclose(weights["tokens"], weights["features"], atol=1e-5)


def _sparse_sentences(n_sequences=60, n_features=600, per_token=40, n_states=8, seed=3):
    """Text-like sequences: every token has ``per_token`` of ``n_features`` binary features,
    its label given by a few of them and its predecessor's label."""
    rng = np.random.default_rng(seed)
    relevant = rng.normal(size=(n_features, n_states))
    X, y = [], []
    for _ in range(n_sequences):
        length = int(rng.integers(3, 13))
        x = np.zeros((length, n_features))
        for t in range(length):
            x[t, rng.choice(n_features, per_token, replace=False)] = 1.0
        labels = np.argmax(x @ relevant + rng.normal(scale=2.0, size=(length, n_states)),
                           axis=1)
        X.append(x)
        y.append(labels)
    return X, y


def test_multi_point_visits_take_the_block_frank_wolfe_steps():
    """With one point per example the multi-point visits (one stage, uncached) step as
    block-coordinate Frank-Wolfe's pass does, up to rounding, pass after pass."""
    from sklstruct.learners._frank_wolfe import multi_point_block_steps

    X, y = _sparse_sentences()
    bound, batch, Y = _bound(ChainStructure(), X, y)
    assert multi_point_block_steps(bound, batch)
    C = 0.3
    plain = BlockFrankWolfeState(bound, batch, Y, C)
    visits = MultiPointFrankWolfeState(bound, batch, Y, C, 1, cached=False, two_stage=False)
    assert not visits.two_stage and not visits.cached
    rng = np.random.default_rng(0)
    for _ in range(25):
        order = rng.permutation(batch.n_sequences).astype(np.int64)
        gaps = plain.run_pass(order), visits.run_pass(order)
        w_plain, dual_plain = plain.certificate()
        w_visits, dual_visits = visits.certificate()
        np.testing.assert_allclose(w_visits, w_plain, rtol=1e-9, atol=1e-12)
        assert dual_visits == pytest.approx(dual_plain, rel=1e-11)
        assert gaps[1] == pytest.approx(gaps[0], rel=1e-8)
    assert dual_plain > 0.0


def test_max_points_one_takes_the_cheaper_visits():
    """``max_points=1``: the multi-point visits where an example has many stored entries
    times states (the same weights on one thread and on two: one stage), block-coordinate
    Frank-Wolfe's own pass elsewhere (few features; constrained edge weights)."""
    from sklstruct import GridStructure, M3NSimplicialDecomposition

    X, y = _sparse_sentences()
    # (warm_start: the fits keep their dual state, to be looked at)
    fits = [M3NSimplicialDecomposition(C=0.3, max_points=1, max_iter=20, random_state=0,
                                       n_jobs=n_jobs, warm_start=True).fit(X, y)
            for n_jobs in (1, 2)]
    for model in fits:
        state = model._dual_state[1]
        assert isinstance(state, MultiPointFrankWolfeState)
        assert not state.two_stage and not state.cached
    np.testing.assert_array_equal(fits[0].w_, fits[1].w_)
    X, y = make_chain_data(n_sequences=20, n_states=3, n_features=4, max_length=6, seed=1)
    model = M3NSimplicialDecomposition(C=0.3, max_points=1, max_iter=20, random_state=0,
                                       warm_start=True).fit(X, y)
    assert isinstance(model._dual_state[1], BlockFrankWolfeState)
    rng = np.random.default_rng(2)
    images = [rng.normal(size=(6, 6, 40)) for _ in range(4)]
    masks = [(image[:, :, 0] > 0).astype(int) for image in images]
    model = M3NSimplicialDecomposition(GridStructure(), C=0.3, max_points=1, max_iter=5,
                                       random_state=0, warm_start=True).fit(images, masks)
    assert isinstance(model._dual_state[1], BlockFrankWolfeState)


def test_a_sample_without_features_takes_the_whole_step():
    """A sample whose features are all zero (no intercept): its Frank-Wolfe direction is zero
    and only the loss changes, so the dual rises linearly along it and the line search must
    take the whole step; it took none, and the gap stayed at C for ever."""
    from sklstruct import M3NSimplicialDecomposition

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    X[0] = 0.0
    model = M3NSimplicialDecomposition(MultiClass(), max_points=1, fit_intercept=False,
                                       tol=1e-3, max_iter=2000, random_state=0,
                                       warm_start=True).fit(X, y)
    assert type(model._dual_state[1]) is BlockFrankWolfeState
    assert model.history_["gap"][-1] <= 1e-3 * model.history_["primal"][-1]
    reference = StructSVMCuttingPlane(MultiClass(), fit_intercept=False, tol=1e-6).fit(X, y)
    assert abs(model.objective(X, y) - reference.objective(X, y)) \
        <= model.history_["gap"][-1] + reference.history_["gap"][-1]
