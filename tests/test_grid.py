"""GridStructure: min-cut decoding against enumeration, and training with w_edge >= 0."""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import GridStructure, M3NSimplicialDecomposition, StructSVMCuttingPlane
from sklstruct._inference.grid import grid_map
from sklstruct.learners.simplicial import _general as _rsd
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective


def _brute_force(unary, height, width, right, down):
    best = -np.inf
    for labels in itertools.product((0, 1), repeat=height * width):
        y = np.array(labels)
        value = _score(unary, width, right, down, y)
        best = max(best, value)
    return best


def _score(unary, width, right, down, y):
    n = y.shape[0]
    t = np.arange(n)
    value = unary[t, y].sum()
    h = t[(t % width + 1 < width) & (t + 1 < n)]
    v = t[t + width < n]
    return value - right[h] @ (y[h] != y[h + 1]) - down[v] @ (y[v] != y[v + width])


def test_min_cut_matches_enumeration_on_small_grids():
    rng = np.random.default_rng(0)
    for _ in range(200):
        height, width = rng.integers(1, 4, size=2)
        n = height * width
        unary = rng.normal(scale=rng.choice([0.1, 1.0, 5.0]), size=(n, 2))
        right = rng.exponential(size=n) * rng.choice([0.0, 0.5, 3.0])
        down = rng.exponential(size=n) * rng.choice([0.0, 0.5, 3.0])
        labels, _ = grid_map(unary, [0, n], width, right, down)
        assert _score(unary, width, right, down, labels) == pytest.approx(
            _brute_force(unary, height, width, right, down), abs=1e-9)


def test_batched_images_are_independent_and_cut_value_is_the_energy_gap():
    rng = np.random.default_rng(1)
    sizes = [9, 6, 3, 9]
    offsets = offsets_from_lengths(sizes)
    unary = rng.normal(size=(sum(sizes), 2))
    right, down = rng.exponential(size=(2, sum(sizes)))
    labels, cut = grid_map(unary, offsets, 3, right, down)
    total = 0.0
    for i, size in enumerate(sizes):
        lo, hi = offsets[i], offsets[i + 1]
        alone, value = grid_map(unary[lo:hi], [0, size], 3, right[lo:hi], down[lo:hi])
        np.testing.assert_array_equal(alone, labels[lo:hi])
        total += value
        # min cut = sum of per-pixel best scores minus the best labelling's score
        best = _score(unary[lo:hi], 3, right[lo:hi], down[lo:hi], alone)
        assert value == pytest.approx(unary[lo:hi].max(axis=1).sum() - best, abs=1e-9)
    assert cut == pytest.approx(total)


@pytest.mark.parametrize("kwargs, match", [
    (dict(right=-np.ones(9)), "non-negative"),
    (dict(unary=np.zeros((9, 3))), "2 columns"),
    (dict(offsets=[0, 4, 9]), "multiple of the grid width"),
    (dict(unary=np.full((9, 2), np.nan)), "NaN"),
    (dict(right=np.ones(8)), "one entry per pixel"),
    (dict(offsets=[0, 3]), "end at the number of pixels"),
    (dict(width=2.5), "width must be a positive integer"),
])
def test_min_cut_rejects_bad_input(kwargs, match):
    args = dict(unary=np.zeros((9, 2)), offsets=[0, 9], right=np.ones(9), down=np.ones(9),
                width=3)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        grid_map(args["unary"], args["offsets"], args["width"], args["right"], args["down"])


def test_min_cut_is_exact_across_scales():
    # a tiny preference beside a huge one is still honoured (no capacity tolerance)
    labels, _ = grid_map([[0.0, 1e6], [0.0, 5e-8]], [0, 2], 2, [0.0, 0.0], [0.0, 0.0])
    np.testing.assert_array_equal(labels, [1, 1])


def _grid_data(n_images=5, side=3, n_features=3, seed=0, checkerboard=False):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_images):
        field = rng.normal(size=(side, side))
        if checkerboard:  # neighbours disagree: edges would rather reward disagreement
            labels = (np.add.outer(np.arange(side), np.arange(side)) % 2).ravel()
        else:
            smooth = field + np.roll(field, 1, 0) + np.roll(field, 1, 1)
            labels = (smooth > 0).astype(int).ravel()
        if labels.min() == labels.max():
            labels[0] = 1 - labels[0]
        features = np.column_stack([labels + rng.normal(scale=1.2, size=side * side),
                                    rng.normal(size=(side * side, n_features - 2)),
                                    np.ones(side * side)])
        X.append(features)
        y.append(labels)
    return X, y


def _bound(structure, X, y):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    return structure.bind(batch.X.shape[1], 2, np.arange(2), Y), batch, Y


@pytest.mark.parametrize("edge_features", ["contrast", "potts"])
def test_structure_oracles_match_enumeration(edge_features):
    X, y = _grid_data(n_images=3, seed=2)
    structure, batch, Y = _bound(GridStructure(width=3, edge_features=edge_features), X, y)
    rng = np.random.default_rng(3)
    w = rng.normal(size=structure.size_joint_feature_)
    w[structure.nonnegative_] = np.abs(w[structure.nonnegative_])
    decoded = structure.decode(batch, *structure.potentials(batch, w))
    augmented, losses, scores = structure.loss_augmented_decode(
        batch, *structure.potentials(batch, w), Y)
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64))
        values, augmented_values = [], []
        for labels in itertools.product((0, 1), repeat=hi - lo):
            ybar = np.array(labels)
            s = w @ structure.joint_feature(sub, ybar)
            values.append(s)
            augmented_values.append(s + structure.loss(sub, Y[lo:hi], ybar)[0])
        assert w @ structure.joint_feature(sub, decoded[lo:hi]) == pytest.approx(max(values))
        assert scores[i] + losses[i] == pytest.approx(max(augmented_values))
        assert scores[i] == pytest.approx(w @ structure.joint_feature(sub, augmented[lo:hi]))
    stats = structure.pairwise_statistics(batch, Y, per_sequence=True)
    np.testing.assert_allclose(stats.sum(axis=0), structure.pairwise_statistics(batch, Y))
    assert np.all(stats <= 0)  # minus non-negative edge features on disagreeing edges


@pytest.mark.parametrize("checkerboard", [False, True])
@pytest.mark.parametrize("config", [
    dict(max_points=1, working_set_size=1),
    dict(max_points=6, working_set_size=2),
    dict(max_points=30, blocks="single"),
])
@pytest.mark.parametrize("dense_mb", [256, 0])
def test_training_reaches_the_constrained_optimum(config, checkerboard, dense_mb, monkeypatch):
    monkeypatch.setattr(_rsd, "DENSE_POINTS_MB", dense_mb)
    X, y = _grid_data(n_images=4, seed=5, checkerboard=checkerboard)
    C = 0.8
    structure = GridStructure(width=3, contrast_gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NSimplicialDecomposition(structure, C=C, tol=1e-5, max_iter=400,
                                           random_state=0, **config).fit(X, y)
    bound, batch, Y = _bound(structure, X, y)
    lower, upper, w_exact = exact_optimum(bound, batch, Y, C,
                                          nonnegative=bound.nonnegative_.tolist())
    h = model.history_
    edge = model.w_[bound.nonnegative_]
    assert np.all(edge >= 0)
    primal = primal_objective(bound, batch, Y, model.w_, C)
    np.testing.assert_allclose(primal, h["primal"][-1], rtol=1e-9)
    assert h["dual"][-1] <= upper + 1e-8 and primal >= lower - 1e-8
    if config["max_points"] > 1:
        assert h["gap"][-1] <= 1e-5 * h["primal"][-1]
    if checkerboard:  # the constraint binds: the unconstrained optimum has negative weights
        assert np.all(w_exact[bound.nonnegative_] <= 1e-6)
        free = StructSVMCuttingPlane(GridStructure(width=3), C=C)
        with pytest.raises(ValueError, match="does not support; use M3NSimplicial"):
            free.fit(X, y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_structure_validation():
    X, y = _grid_data(n_images=2)
    with pytest.raises(ValueError, match="binary"):
        M3NSimplicialDecomposition(GridStructure(width=3)).fit(X, [np.arange(9) % 3] * 2)
    with pytest.raises(ValueError, match="multiple of the grid width"):
        M3NSimplicialDecomposition(GridStructure(width=4)).fit(X, y)
    with pytest.raises(ValueError, match="width"):
        M3NSimplicialDecomposition(GridStructure(width=0)).fit(X, y)
    with pytest.raises(ValueError, match="edge_features"):
        M3NSimplicialDecomposition(GridStructure(width=3, edge_features="sobel")).fit(X, y)
    with pytest.raises(ValueError, match="margin rescaling only"):
        M3NSimplicialDecomposition(GridStructure(width=3), rescale="slack").fit(X, y)
    model = M3NSimplicialDecomposition(GridStructure(width=3), max_iter=5).fit(X, y)
    w = model.w_.copy()
    w[model.structure_.nonnegative_] = -1.0
    with pytest.raises(ValueError, match="non-negative edge weights"):
        batch = _bound(GridStructure(width=3), X, y)[1]
        model.structure_.decode(batch, *model.structure_.potentials(batch, w))
    assert [p.shape for p in model.predict(X)] == [(9,), (9,)]
    # no marginal oracle: the probability methods are absent from the fitted model
    for name in ("predict_marginals", "predict_proba", "calibrate_temperature"):
        assert not hasattr(model, name)
        with pytest.raises(AttributeError) as error:
            getattr(model, name)
        assert "no marginal oracle" in str(error.value.__cause__)


def test_image_shaped_input_matches_pixel_matrices():
    X, y = _grid_data(n_images=4, seed=7)
    images = [x.reshape(3, 3, -1) for x in X]
    masks = [labels.reshape(3, 3) for labels in y]
    params = dict(C=0.5, tol=1e-6, max_iter=300, random_state=0)
    flat = M3NSimplicialDecomposition(GridStructure(width=3), **params).fit(X, y)
    shaped = M3NSimplicialDecomposition(**params).fit(images, masks)  # auto: GridStructure
    assert isinstance(shaped.structure_, GridStructure)
    np.testing.assert_allclose(shaped.w_, flat.w_)
    predicted = shaped.predict(images)
    assert [p.shape for p in predicted] == [(3, 3)] * 4
    for p, q in zip(predicted, flat.predict(X)):
        np.testing.assert_array_equal(p.ravel(), q)
    assert shaped.score(images, masks) == pytest.approx(flat.score(X, y))
    assert shaped.decision_function(images)[0].shape == (3, 3, 2)
    assert shaped.objective(images, masks) == pytest.approx(flat.objective(X, y))
    # images of different sizes, and the checks of the image form
    rng = np.random.default_rng(0)
    mixed = [rng.normal(size=(2, 4, 3)), rng.normal(size=(3, 2, 3))]
    mixed_masks = [np.array([[0, 1, 1, 0], [1, 1, 0, 0]]), np.array([[1, 0], [1, 1], [0, 0]])]
    model = M3NSimplicialDecomposition(GridStructure(), max_iter=20).fit(mixed, mixed_masks)
    assert [p.shape for p in model.predict(mixed)] == [(2, 4), (3, 2)]
    with pytest.raises(ValueError, match="labels have shape"):
        M3NSimplicialDecomposition().fit(mixed, [m.T for m in mixed_masks])
    with pytest.raises(ValueError, match="pixels wide but the structure has width=4"):
        M3NSimplicialDecomposition(GridStructure(width=4), max_iter=2).fit(mixed, mixed_masks)
    with pytest.raises(ValueError, match="needs images as 3-D arrays"):
        M3NSimplicialDecomposition(GridStructure(), max_iter=2).fit(X, y)


def test_min_cut_with_one_width_per_image():
    rng = np.random.default_rng(2)
    sizes, widths = [6, 6, 4], [3, 2, 4]
    offsets = offsets_from_lengths(sizes)
    unary = rng.normal(size=(16, 2))
    right, down = rng.exponential(size=(2, 16))
    labels, _ = grid_map(unary, offsets, widths, right, down)
    for i, (size, width) in enumerate(zip(sizes, widths)):
        lo = offsets[i]
        alone, _ = grid_map(unary[lo:lo + size], [0, size], width, right[lo:lo + size],
                            down[lo:lo + size])
        np.testing.assert_array_equal(labels[lo:lo + size], alone)


def test_compiled_hinge_equals_the_structures_oracle():
    """The certificates' compiled per-example hinge (min-cut per image) equals the hinge
    from the structure's batch oracle."""
    from sklstruct.learners._frank_wolfe import MultiPointFrankWolfeState
    from sklstruct.structures._base import structured_hinge

    X, y = _grid_data(n_images=4, seed=5)
    structure, batch, Y = _bound(GridStructure(width=3), X, y)
    state = MultiPointFrankWolfeState(structure, batch, Y, 0.5, 4)
    for _ in range(3):
        state.run_pass()
        w, _ = state.certificate()
        hinge, _, _ = structured_hinge(structure, batch, Y, *structure.potentials(batch, w),
                                       "margin")
        assert state.primal() == pytest.approx(0.5 * w @ w + 0.5 * hinge.sum(), rel=1e-12)
