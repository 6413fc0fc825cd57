"""Grid3DStructure: 6-connected volumes. Decoders against enumeration and a reference minimum
cut, joint features against a direct computation, compiled kernels against the batch oracles,
training to a certified optimum, the volume input form, bad input and the data generator."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (Grid3DStructure, GridStructure, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct._inference._grid3d_kernels import Grid3DKernels
from sklstruct._inference.graph import grid3d_map
from sklstruct.datasets import make_noisy_volumes
from sklstruct.learners.simplicial import _general as _rsd
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from ._grid3d_reference import (
    all_labellings,
    edge_features,
    joint_feature,
    labelling_scores,
    reference_min_cut,
)


def _volumes(shapes, n_features=3, seed=0, smooth=True):
    """Random volumes of the given shapes with labels that are mostly smooth."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for shape in shapes:
        field = rng.normal(size=shape)
        if smooth:
            field = field + sum(np.roll(field, 1, axis) for axis in range(3))
        labels = (field > 0).astype(np.int64)
        labels.flat[0], labels.flat[-1] = 0, 1  # both classes in every volume
        features = np.concatenate([labels[..., None] + rng.normal(size=shape + (n_features - 1,)),
                                   np.ones(shape + (1,))], axis=3)
        X.append(features)
        y.append(labels)
    return X, y


def _bound(structure, X, y):
    """The structure bound to volume input, its batch and the encoded labels."""
    model = M3NSimplicialDecomposition(structure)
    batch, y_flat, _ = model._validate_input(X, y, reset=True)
    Y = np.asarray(y_flat, dtype=np.intp)
    return structure.bind(batch.X.shape[1], 2, np.arange(2), Y), batch, Y


def _random_weights(structure, rng):
    w = rng.normal(size=structure.size_joint_feature_)
    w[structure.nonnegative_] = np.abs(w[structure.nonnegative_])
    return w


def _reference_unary_and_costs(volume, w, structure):
    """Unary scores and per-axis disagreement costs of one volume, read off the 4-D array."""
    d, k = volume.shape[3], structure.n_edge_features_
    WT = w[:2 * d].reshape(d, 2)
    theta = w[2 * d:]
    flat = volume.reshape(-1, d)
    unary = flat @ WT
    costs = np.zeros((flat.shape[0], 3))
    features = edge_features(volume, structure.edge_features, structure.contrast_gamma)
    index = np.arange(flat.shape[0]).reshape(volume.shape[:3])
    for axis in range(3):
        left = np.take(index, np.arange(volume.shape[axis] - 1), axis=axis).ravel()
        costs[left, axis] = features[axis] @ theta[axis * k:(axis + 1) * k]
    return unary, costs


# ---------------------------------------------------------------------- joint features
@pytest.mark.parametrize("edge_kind", ["contrast", "potts"])
def test_joint_feature_and_pairwise_statistics_match_a_direct_computation(edge_kind):
    shapes = [(2, 3, 4), (3, 1, 5), (1, 4, 2), (4, 3, 3)]
    X, y = _volumes(shapes, seed=1)
    structure, batch, _ = _bound(Grid3DStructure(edge_features=edge_kind,
                                                 contrast_gamma=0.3), X, y)
    assert structure.n_pairwise_ == 3 * (2 if edge_kind == "contrast" else 1)
    np.testing.assert_array_equal(structure.volume_shapes(batch), shapes)
    rng = np.random.default_rng(2)
    for trial in range(3):
        labels = [rng.integers(0, 2, size=s) for s in shapes] if trial else y
        flat = np.concatenate([lab.ravel() for lab in labels])
        expected = [joint_feature(x, lab, edge_kind, 0.3) for x, lab in zip(X, labels)]
        np.testing.assert_allclose(structure.joint_feature(batch, flat), np.sum(expected, 0),
                                   rtol=1e-12, atol=1e-12)
        n_unary = 2 * X[0].shape[3]
        per_volume = structure.pairwise_statistics(batch, flat, per_sequence=True)
        np.testing.assert_allclose(per_volume, [e[n_unary:] for e in expected], atol=1e-12)
        weights = rng.uniform(size=len(shapes))
        np.testing.assert_allclose(structure.pairwise_statistics(batch, flat, weights),
                                   weights @ per_volume)
        assert np.all(per_volume <= 0)


def test_voxel_matrices_with_slice_shape_match_volume_input():
    X, y = _volumes([(3, 2, 4), (5, 2, 4)], seed=3)
    volume_form, batch, Y = _bound(Grid3DStructure(), X, y)
    flat_form = Grid3DStructure(slice_shape=(2, 4)).bind(3, 2)
    flat_batch = SequenceBatch(batch.X, batch.offsets)
    np.testing.assert_array_equal(flat_form.volume_shapes(flat_batch),
                                  volume_form.volume_shapes(batch))
    np.testing.assert_allclose(flat_form.joint_feature(flat_batch, Y),
                               volume_form.joint_feature(batch, Y))


# ---------------------------------------------------------------------- decoders
@pytest.mark.parametrize("edge_kind", ["contrast", "potts"])
def test_decoders_match_enumeration_on_tiny_volumes(edge_kind):
    shapes = [(2, 2, 3), (2, 3, 3), (1, 2, 2), (3, 1, 2), (2, 2, 2)]
    X, y = _volumes(shapes, seed=4, smooth=False)
    structure, batch, Y = _bound(Grid3DStructure(edge_features=edge_kind,
                                                 contrast_gamma=0.5), X, y)
    rng = np.random.default_rng(5)
    for scale in (0.1, 1.0, 4.0):
        w = scale * _random_weights(structure, rng)
        if scale == 4.0:
            w[structure.nonnegative_[:2]] = 0.0  # no coupling along axis 0
        unary, pairwise = structure.potentials(batch, w)
        decoded = structure.decode(batch, unary, pairwise)
        augmented, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, Y)
        for i, x in enumerate(X):
            lo, hi = batch.offsets[i], batch.offsets[i + 1]
            ref_unary, costs = _reference_unary_and_costs(x, w, structure)
            labellings = all_labellings(hi - lo)
            values = labelling_scores(ref_unary, shapes[i], costs, labellings)
            loss = (labellings != Y[lo:hi]).sum(axis=1)
            best = values.max()
            assert labelling_scores(ref_unary, shapes[i], costs, decoded[lo:hi])[0] == \
                pytest.approx(best, abs=1e-9)
            assert w @ joint_feature(x, decoded[lo:hi], edge_kind, 0.5) == \
                pytest.approx(best, abs=1e-9)
            # the fewest ones among the maximisers: a voxel is 1 only if all of them say so
            ties = labellings[np.abs(values - best) <= 1e-9]
            assert np.all(decoded[lo:hi] <= ties.min(axis=0))
            assert scores[i] + losses[i] == pytest.approx((values + loss).max(), abs=1e-9)
            assert losses[i] == (augmented[lo:hi] != Y[lo:hi]).sum()
            assert scores[i] == pytest.approx(
                w @ joint_feature(x, augmented[lo:hi], edge_kind, 0.5), abs=1e-9)


def test_loss_augmented_decoding_with_class_weights_matches_enumeration():
    shapes = [(2, 2, 3), (1, 3, 3)]
    X, y = _volumes(shapes, seed=6, smooth=False)
    structure, batch, Y = _bound(Grid3DStructure(edge_features="potts",
                                                 class_weight={0: 0.3, 1: 2.5}), X, y)
    rng = np.random.default_rng(7)
    w = _random_weights(structure, rng)
    unary, pairwise = structure.potentials(batch, w)
    _, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, Y)
    for i, x in enumerate(X):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        ref_unary, costs = _reference_unary_and_costs(x, w, structure)
        labellings = all_labellings(hi - lo)
        loss = ((labellings != Y[lo:hi]) * np.where(Y[lo:hi] == 1, 2.5, 0.3)).sum(axis=1)
        best = (labelling_scores(ref_unary, shapes[i], costs, labellings) + loss).max()
        assert scores[i] + losses[i] == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_decoders_equal_a_reference_min_cut_on_bigger_volumes(seed):
    """Integer potentials: the exact cut is known, and the labelling with the fewest ones is
    unique, so the labels must agree voxel by voxel with SciPy's maximum flow."""
    rng = np.random.default_rng(seed)
    shapes = [(5, 6, 7), (8, 8, 8), (3, 10, 4), (1, 9, 9)]
    sizes = [int(np.prod(s)) for s in shapes]
    unary = rng.integers(-20, 21, size=(sum(sizes), 2)).astype(np.float64)
    costs = rng.integers(0, 12, size=(sum(sizes), 3)).astype(np.float64)
    labels, scores = grid3d_map(unary, shapes, costs)
    offsets = offsets_from_lengths(sizes)
    for i, shape in enumerate(shapes):
        lo, hi = offsets[i], offsets[i + 1]
        expected, best = reference_min_cut(unary[lo:hi], shape, costs[lo:hi])
        np.testing.assert_array_equal(labels[lo:hi], expected)
        assert scores[i] == pytest.approx(best)
        assert labelling_scores(unary[lo:hi], shape, costs[lo:hi], labels[lo:hi])[0] == \
            pytest.approx(best)


def test_structure_decode_equals_reference_min_cut():
    """Potts weights per axis, integer unary scores: the structure's decoders (batch oracle
    and compiled kernels) give the reference cut's labels."""
    rng = np.random.default_rng(8)
    shapes = [(6, 5, 7), (4, 9, 3)]
    X = [rng.integers(-3, 4, size=s + (2,)).astype(np.float64) for s in shapes]
    y = [rng.integers(0, 2, size=s) for s in shapes]
    structure, batch, Y = _bound(Grid3DStructure(edge_features="potts"), X, y)
    w = np.concatenate([rng.integers(-4, 5, size=4), [3.0, 1.0, 5.0]]).astype(np.float64)
    unary, pairwise = structure.potentials(batch, w)
    decoded = structure.decode(batch, unary, pairwise)
    np.testing.assert_array_equal(structure.decode(batch, unary, pairwise, n_jobs=2), decoded)
    token_loss = structure.token_loss(Y)
    augmented, _, _ = structure.loss_augmented_decode(batch, unary, pairwise, Y)
    kernels = structure.example_kernels(batch)
    for i, shape in enumerate(shapes):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        costs = np.tile(pairwise, (hi - lo, 1))
        expected, _ = reference_min_cut(unary[lo:hi], shape, costs)
        np.testing.assert_array_equal(decoded[lo:hi], expected)
        expected, _ = reference_min_cut(unary[lo:hi] + token_loss[lo:hi], shape, costs)
        np.testing.assert_array_equal(augmented[lo:hi], expected)
        np.testing.assert_array_equal(
            kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], pairwise), expected)


@pytest.mark.parametrize("edge_kind", ["contrast", "potts"])
def test_compiled_kernels_equal_the_structure_oracles(edge_kind):
    shapes = [(4, 5, 6), (2, 7, 3), (1, 1, 4), (6, 1, 1)]
    X, y = _volumes(shapes, seed=9)
    structure, batch, Y = _bound(Grid3DStructure(edge_features=edge_kind), X, y)
    kernels = structure.example_kernels(batch)
    assert isinstance(kernels, Grid3DKernels)
    assert kernels.n_pairwise == structure.n_pairwise_ and not kernels.has_marginals
    rng = np.random.default_rng(10)
    token_loss = structure.token_loss(Y)
    for _ in range(3):
        w = _random_weights(structure, rng)
        unary, pairwise = structure.potentials(batch, w)
        augmented, _, _ = structure.loss_augmented_decode(batch, unary, pairwise, Y)
        zero_loss = np.zeros_like(token_loss)
        decoded = structure.decode(batch, unary, pairwise)
        stats = structure.pairwise_statistics(batch, augmented, per_sequence=True)
        for i in range(len(shapes)):
            lo, hi = batch.offsets[i], batch.offsets[i + 1]
            np.testing.assert_array_equal(
                kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], pairwise),
                augmented[lo:hi])
            np.testing.assert_array_equal(
                kernels.max_oracle_example(i, unary[lo:hi], zero_loss[lo:hi], pairwise),
                decoded[lo:hi])
            np.testing.assert_allclose(
                kernels.pairwise_statistics_example(i, augmented[lo:hi]), stats[i],
                atol=1e-12)


def test_compiled_hinge_equals_the_structures_oracle():
    """The certificates' compiled per-example hinge (a cut per volume) equals the hinge from
    the structure's batch oracle."""
    from sklstruct.learners._frank_wolfe import MultiPointFrankWolfeState
    from sklstruct.structures._base import structured_hinge

    X, y = _volumes([(3, 4, 4), (2, 5, 3), (4, 3, 3)], seed=11)
    structure, batch, Y = _bound(Grid3DStructure(), X, y)
    state = MultiPointFrankWolfeState(structure, batch, Y, 0.5, 4)
    for _ in range(3):
        state.run_pass()
        w, _ = state.certificate()
        hinge, _, _ = structured_hinge(structure, batch, Y, *structure.potentials(batch, w),
                                       "margin")
        assert state.primal() == pytest.approx(0.5 * w @ w + 0.5 * hinge.sum(), rel=1e-12)


# ---------------------------------------------------------------------- training
@pytest.mark.parametrize("config", [
    dict(max_points=1, working_set_size=1),
    dict(max_points=6),
    dict(max_points=30, blocks="single"),
])
@pytest.mark.parametrize("dense_mb", [256, 0])
def test_training_reaches_the_constrained_optimum(config, dense_mb, monkeypatch):
    monkeypatch.setattr(_rsd, "DENSE_POINTS_MB", dense_mb)
    X, y = _volumes([(2, 2, 2)] * 4, seed=12)
    C, tol = 0.8, 1e-5
    flat_X = [x.reshape(-1, 3) for x in X]
    flat_y = [labels.ravel() for labels in y]
    structure = Grid3DStructure(slice_shape=(2, 2), contrast_gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NSimplicialDecomposition(structure, C=C, tol=tol, max_iter=400,
                                           random_state=0, **config).fit(flat_X, flat_y)
    bound = structure.bind(3, 2)
    batch = SequenceBatch(np.vstack(flat_X), offsets_from_lengths([8] * 4))
    Y = np.concatenate(flat_y).astype(np.intp)
    lower, upper, _ = exact_optimum(bound, batch, Y, C, nonnegative=bound.nonnegative_.tolist())
    h = model.history_
    assert np.all(model.w_[bound.nonnegative_] >= 0)
    primal = primal_objective(bound, batch, Y, model.w_, C)
    np.testing.assert_allclose(primal, h["primal"][-1], rtol=1e-9)
    assert h["dual"][-1] <= upper + 1e-8 and primal >= lower - 1e-8
    if config["max_points"] > 1:
        assert h["gap"][-1] <= tol * h["primal"][-1]


def test_fit_on_volumes_of_different_sizes_certifies_its_gap():
    X, y = _volumes([(3, 5, 4), (4, 4, 4), (2, 6, 5), (5, 3, 3)], seed=13)
    tol = 1e-3
    model = M3NSimplicialDecomposition(C=1.0, tol=tol, max_iter=2000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.fit(X, y)
    assert isinstance(model.structure_, Grid3DStructure)
    h = model.history_
    assert 0 <= h["gap"][-1] <= tol * h["primal"][-1]
    assert h["primal"][-1] == pytest.approx(model.objective(X, y), rel=1e-9)
    assert np.all(model.w_[model.structure_.nonnegative_] >= 0)


# ---------------------------------------------------------------------- the input form
def test_volume_input_form_round_trip():
    X, y = _volumes([(3, 4, 5), (2, 3, 3), (4, 2, 6)], seed=14)
    params = dict(C=0.5, tol=1e-4, max_iter=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        shaped = M3NSimplicialDecomposition(**params).fit(X, y)  # auto: Grid3DStructure
        flat = M3NSimplicialDecomposition(Grid3DStructure(slice_shape=(3, 3)), **params).fit(
            [x.reshape(-1, 3) for x in X[1:2]] * 2, [m.ravel() for m in y[1:2]] * 2)
    assert isinstance(shaped.structure_, Grid3DStructure)
    predicted = shaped.predict(X)
    assert [p.shape for p in predicted] == [(3, 4, 5), (2, 3, 3), (4, 2, 6)]
    assert all(p.dtype == y[0].dtype for p in predicted)
    assert shaped.score(X, y) == pytest.approx(
        np.mean(np.concatenate([(p == t).ravel() for p, t in zip(predicted, y)])))
    assert shaped.decision_function(X[:1])[0].shape == (3, 4, 5, 2)
    # pickling drops the structure's edge cache and keeps the predictions
    assert "_edge_cache" in vars(shaped.structure_)
    restored = pickle.loads(pickle.dumps(shaped))
    assert "_edge_cache" not in vars(restored.structure_)
    for p, q in zip(restored.predict(X), predicted):
        np.testing.assert_array_equal(p, q)
    assert clone(shaped).get_params()["structure"] == "auto"
    # voxel matrices with slice_shape give the same predictions as the volumes
    shaped_again = M3NSimplicialDecomposition(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        shaped_again.fit([X[1]] * 2, [y[1]] * 2)
    np.testing.assert_allclose(shaped_again.w_, flat.w_)
    np.testing.assert_array_equal(shaped_again.predict([X[1]])[0].ravel(),
                                  flat.predict([X[1].reshape(-1, 3)])[0])
    # string labels and the flat form with lengths
    named = [np.where(m == 1, "organ", "bg") for m in y]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NSimplicialDecomposition(**params).fit(X, named)
    assert model.predict(X[:1])[0].shape == (3, 4, 5)
    assert set(np.unique(model.predict(X)[0])) <= {"organ", "bg"}


def _fitted(structure=None):
    X, y = _volumes([(2, 3, 3), (3, 2, 2)], seed=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NSimplicialDecomposition(structure or "auto", max_iter=5).fit(X, y)
    return model, X, y


@pytest.mark.parametrize("make_input, match", [
    (lambda X, y: ([X[0], X[1][0]], y), "Volume 1 must be 4-D"),
    (lambda X, y: (X, [y[0], y[1][:, :1]]), "Volume 1 has shape .* labels have shape"),
    (lambda X, y: (X, y[0]), "list of as many 3-D label masks"),
    (lambda X, y: (X, y[:1]), "list of as many 3-D label masks"),
    (lambda X, y: ([X[0], X[1][:0]], [y[0], y[1][:0]]), "at least one voxel"),
    (lambda X, y: ([X[0], X[1][..., :2]], y), "same number of features"),
    (lambda X, y: ([X[0], np.full_like(X[1], np.nan)], y), "NaN"),
    (lambda X, y: (X, [y[0], y[1] + 2 * (y[1] == 0)]), "binary"),
    (lambda X, y: ([x[None] for x in X], [m[None] for m in y]), "X.0. has 5 dimensions"),
])
def test_bad_volume_input_is_refused(make_input, match):
    X, y = _volumes([(2, 3, 3), (3, 2, 2)], seed=16)
    X_bad, y_bad = make_input(X, y)
    with pytest.raises((ValueError, TypeError), match=match):
        M3NSimplicialDecomposition(max_iter=2).fit(X_bad, y_bad)


def test_bad_structure_settings_and_mismatched_forms_are_refused():
    X, y = _volumes([(2, 3, 3), (3, 2, 2)], seed=17)
    fit = M3NSimplicialDecomposition(max_iter=2)
    for bad in [0, (2,), (2, 0), (2.0, 3), "ab", (True, 2)]:
        with pytest.raises(ValueError, match="slice_shape must be"):
            M3NSimplicialDecomposition(Grid3DStructure(slice_shape=bad)).fit(X, y)
    with pytest.raises(ValueError, match="edge_features"):
        M3NSimplicialDecomposition(Grid3DStructure(edge_features="sobel")).fit(X, y)
    with pytest.raises(ValueError, match="contrast_gamma"):
        M3NSimplicialDecomposition(Grid3DStructure(contrast_gamma=-1.0)).fit(X, y)
    with pytest.raises(ValueError, match=r"volume 1 has slices of shape \(2, 2\)"):
        M3NSimplicialDecomposition(Grid3DStructure(slice_shape=(3, 3))).fit(X, y)
    flat_X = [x.reshape(-1, 3) for x in X]
    flat_y = [m.ravel() for m in y]
    with pytest.raises(ValueError, match="not a multiple of the slice size 2 x 2"):
        M3NSimplicialDecomposition(Grid3DStructure(slice_shape=(2, 2))).fit(flat_X, flat_y)
    with pytest.raises(ValueError, match="needs volumes as 4-D arrays"):
        M3NSimplicialDecomposition(Grid3DStructure()).fit(flat_X, flat_y)
    with pytest.raises(ValueError, match="use Grid3DStructure"):
        M3NSimplicialDecomposition(GridStructure()).fit(X, y)
    with pytest.raises(ValueError, match="use Grid3DStructure"):
        M3NSimplicialDecomposition(GridStructure(width=3)).fit(X, y)
    images, masks = [x[0] for x in X], [m[0] for m in y]
    with pytest.raises(ValueError, match="use GridStructure"):
        M3NSimplicialDecomposition(Grid3DStructure()).fit(images, masks)
    with pytest.raises(ValueError, match="margin rescaling only"):
        M3NSimplicialDecomposition(Grid3DStructure(), rescale="slack").fit(X, y)
    with pytest.raises(ValueError, match="does not support; use M3NSimplicial"):
        StructSVMCuttingPlane(Grid3DStructure()).fit(X, y)
    with pytest.raises(ValueError, match="only used with a flat X, not a list of volumes"):
        fit.fit(X, y, lengths=[18, 12])
    with pytest.raises(ValueError, match="Grid3DStructure\\(slice_shape=\\(n_rows, n_cols\\)\\)"):
        M3NSimplicialDecomposition(Grid3DStructure(slice_shape=(3, 3))).fit(
            flat_X, [m for m in y])


def test_bad_input_at_prediction_is_refused():
    model, X, y = _fitted()
    with pytest.raises(ValueError, match="use GridStructure"):
        model.predict([x[0] for x in X])
    with pytest.raises(ValueError, match="features"):
        model.predict([x[..., :2] for x in X])
    with pytest.raises(ValueError, match="at least one voxel"):
        model.predict([X[0], X[1][:, :0]])
    # no marginal oracle: the probability methods are absent from the fitted model
    for name in ("predict_marginals", "predict_proba", "calibrate_temperature"):
        assert not hasattr(model, name)
        with pytest.raises(AttributeError) as error:
            getattr(model, name)
        assert "no marginal oracle" in str(error.value.__cause__)
    for name in ("predict_topk", "sequence_confidence"):  # (no chain form)
        assert not hasattr(model, name)
        with pytest.raises(AttributeError) as error:
            getattr(model, name)
        assert "is not a chain" in str(error.value.__cause__)
    w = model.w_.copy()
    w[model.structure_.nonnegative_] = -1.0
    batch, _, _ = model._validate_input(X, None, reset=False)
    with pytest.raises(ValueError, match="non-negative edge weights"):
        model.structure_.decode(batch, *model.structure_.potentials(batch, w))
    images = [x[0] for x in X]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        image_model = M3NSimplicialDecomposition(max_iter=2).fit(images, [m[0] for m in y])
    with pytest.raises(ValueError, match="use Grid3DStructure"):
        image_model.predict(X)
    with pytest.raises(ValueError, match="an image needs at least one pixel"):
        image_model.predict([images[0], images[1][:0]])


def test_kernels_refuse_mismatched_arrays():
    offsets = [0, 8, 20]
    features = np.zeros((20, 3, 1))
    with pytest.raises(ValueError, match="shapes must hold"):
        Grid3DKernels(offsets, [(2, 2, 2), (2, 2, 2)], features)
    with pytest.raises(ValueError, match="shapes must hold"):
        Grid3DKernels(offsets, [(2, 2, 2)], features)
    with pytest.raises(ValueError, match="one row per voxel"):
        Grid3DKernels(offsets, [(2, 2, 2), (3, 2, 2)], features[:19])
    with pytest.raises(ValueError, match="n_edge_features"):
        Grid3DKernels(offsets, [(2, 2, 2), (3, 2, 2)], features[:, :2])
    with pytest.raises(ValueError, match="offsets"):
        Grid3DKernels([0, 8, 8], [(2, 2, 2), (1, 1, 1)], features[:8])
    kernels = Grid3DKernels(offsets, [(2, 2, 2), (3, 2, 2)], features)
    with pytest.raises(ValueError, match="do not match"):
        kernels.max_oracle_example(0, np.zeros((7, 2)), np.zeros((8, 2)), np.zeros(3))
    with pytest.raises(IndexError):
        kernels.pairwise_statistics_example(2, np.zeros(8, dtype=int))


# ---------------------------------------------------------------------- the data generator
def test_make_noisy_volumes():
    X, y = make_noisy_volumes(3, shape=(5, 6, 7), n_channels=4, random_state=0)
    assert len(X) == len(y) == 3
    assert X[0].shape == (5, 6, 7, 5) and y[0].shape == (5, 6, 7)
    assert y[0].dtype == np.int64 and set(np.unique(np.concatenate(y))) == {0, 1}
    np.testing.assert_array_equal(X[1][..., -1], 1.0)
    again, labels = make_noisy_volumes(3, shape=(5, 6, 7), n_channels=4, random_state=0)
    for a, b, c, d in zip(X, again, y, labels):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, d)
    clean, masks = make_noisy_volumes(2, shape=[4, 4, 4], noise=0.0, constant_feature=False,
                                      random_state=1)
    assert clean[0].shape == (4, 4, 4, 2)
    for features, mask in zip(clean, masks):
        np.testing.assert_array_equal(features[..., 0], mask)
    _, box_masks = make_noisy_volumes(2, shape=(9, 9, 9), n_objects=1, kind="boxes",
                                      noise=0.0, random_state=2)
    for mask in box_masks:  # one box: the bounding box of the mask is full
        z, r, c = (np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != b)))
                   for b in range(3))
        assert mask[z.min():z.max() + 1, r.min():r.max() + 1, c.min():c.max() + 1].all()
    ellipsoids, _ = make_noisy_volumes(1, kind="ellipsoids", random_state=3)
    assert ellipsoids[0].shape == (16, 16, 16, 3)
    for bad in [(4, 4), (4, 0, 4), (4, 4.5, 4), "abc"]:
        with pytest.raises(ValueError, match="shape"):
            make_noisy_volumes(1, shape=bad)
    with pytest.raises(ValueError, match="kind"):
        make_noisy_volumes(1, kind="spheres")
    with pytest.raises(ValueError, match="noise"):
        make_noisy_volumes(1, noise=-1.0)


def test_grid_model_beats_voxel_by_voxel_classification():
    """On noisy volumes the neighbours' labels matter: the grid model's voxel accuracy is
    well above a per-voxel linear classifier's on the same features."""
    from sklearn.svm import LinearSVC

    X, y = make_noisy_volumes(6, shape=(10, 10, 10), noise=1.2, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = M3NSimplicialDecomposition(C=1.0, max_iter=100, random_state=0).fit(X[:4], y[:4])
    svc = LinearSVC(C=1.0).fit(np.vstack([x.reshape(-1, 3) for x in X[:4]]),
                               np.concatenate([m.ravel() for m in y[:4]]))
    test_X = np.vstack([x.reshape(-1, 3) for x in X[4:]])
    test_y = np.concatenate([m.ravel() for m in y[4:]])
    assert model.score(X[4:], y[4:]) > svc.score(test_X, test_y) + 0.05


def test_shapes_whose_product_overflows_are_refused():
    """9 x 2049638230412172402 wraps to 2 in int64: the shape passed for a volume of two
    voxels and the compiled cut wrote far outside its workspace (a bus error)."""
    huge = (9, 2049638230412172402)
    batch = SequenceBatch(np.zeros((2, 2)), np.array([0, 2]))
    structure = Grid3DStructure(slice_shape=huge, edge_features="potts").bind(2, 2)
    with pytest.raises(ValueError, match="more than 2\\*\\*62"):
        structure.decode(batch, np.zeros((2, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="more than 2\\*\\*62"):
        grid3d_map(np.zeros((2, 2)), [1, *huge], np.zeros((2, 3)))
    sliced = SequenceBatch(np.zeros((2, 2)), np.array([0, 2]), slice_shapes=np.array([huge]))
    with pytest.raises(ValueError, match="more than 2\\*\\*62"):
        Grid3DStructure(edge_features="potts").bind(2, 2).decode(sliced, np.zeros((2, 2)),
                                                                  np.zeros(3))
