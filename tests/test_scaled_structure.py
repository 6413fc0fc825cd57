"""``scaled_structure``: a structure whose joint feature map is ``s * Psi`` (the M-step of the
adaptive l1 learner). Its joint features, potentials and oracles must be those of the base
structure with the scales applied explicitly: to the joint feature vector, to the weights,
or, for per-feature scales, to the token features themselves."""

import numpy as np
import pytest
from scipy.special import logsumexp

from sklstruct import ChainStructure, MultiClass
from sklstruct.structures._base import primal_objective
from sklstruct.structures._scaled import scaled_structure
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import all_labelings
from ._helpers import make_chain_data

BASES = {
    "chain": ChainStructure(),
    "chain without start/end": ChainStructure(start_end=False),
    "chain with class weights": ChainStructure(class_weight=[1.0, 2.0, 0.5]),
    "multiclass": MultiClass(),
}


def _problem(name, seed, n_states=3, n_features=3):
    base = BASES[name]
    rng = np.random.default_rng(seed)
    if isinstance(base, MultiClass):
        X = rng.normal(size=(6, n_features))
        Y = rng.integers(0, n_states, size=6).astype(np.intp)
        batch = SequenceBatch(X, np.arange(7, dtype=np.int64))
    else:
        X, y = make_chain_data(n_sequences=5, n_states=n_states, n_features=n_features,
                               max_length=4, seed=seed)
        batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
        Y = np.concatenate(y).astype(np.intp)
    bound = base.bind(n_features, n_states, np.arange(n_states), Y)
    unary_scale = rng.uniform(0.2, 2.0, size=(n_features, n_states))
    unary_scale[rng.random(unary_scale.shape) < 0.2] = 0.0  # a zero drops the component
    pairwise_scale = rng.uniform(0.2, 2.0, size=bound.n_pairwise_)
    pairwise_scale[rng.random(bound.n_pairwise_) < 0.2] = 0.0
    scale = np.concatenate([unary_scale.ravel(), pairwise_scale])
    g = rng.normal(scale=0.7, size=bound.size_joint_feature_)
    return bound, batch, Y, scaled_structure(bound, unary_scale, pairwise_scale), scale, g


def _sequences(batch):
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        yield SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64)), \
            slice(lo, hi)


@pytest.mark.parametrize("name", list(BASES))
@pytest.mark.parametrize("seed", range(3))
def test_joint_features_are_scaled(name, seed):
    base, batch, Y, scaled, scale, g = _problem(name, seed)
    rng = np.random.default_rng(seed)
    for labels in (Y, rng.integers(0, base.n_states_, size=batch.n_tokens)):
        np.testing.assert_allclose(scaled.joint_feature(batch, labels),
                                   scale * base.joint_feature(batch, labels), rtol=1e-13)
        n_unary = base.n_features_ * base.n_states_
        np.testing.assert_allclose(
            scaled.pairwise_statistics(batch, labels, per_sequence=True),
            base.pairwise_statistics(batch, labels, per_sequence=True) * scale[n_unary:])
        weights = rng.random(batch.n_sequences)
        np.testing.assert_allclose(
            scaled.pairwise_statistics(batch, labels, weights=weights),
            base.pairwise_statistics(batch, labels, weights=weights) * scale[n_unary:])
    assert scaled.size_joint_feature_ == base.size_joint_feature_
    assert scaled.get_params() == base.get_params()
    np.testing.assert_array_equal(scaled.loss_weights_, base.loss_weights_)
    assert scaled.example_kernels(batch) is None  # compiled passes assume unscaled features


@pytest.mark.parametrize("name", list(BASES))
@pytest.mark.parametrize("seed", range(3))
def test_potentials_and_scores_are_those_of_the_scaled_weights(name, seed):
    base, batch, Y, scaled, scale, g = _problem(name, seed)
    unary, pairwise = scaled.potentials(batch, g)
    unary_ref, pairwise_ref = base.potentials(batch, scale * g)
    np.testing.assert_allclose(unary, unary_ref, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(pairwise, pairwise_ref, rtol=1e-13)
    # weights whose scale is zero do not matter
    h = g + (scale == 0) * np.random.default_rng(seed).normal(size=g.shape[0])
    np.testing.assert_array_equal(scaled.potentials(batch, h)[0], unary)
    np.testing.assert_array_equal(scaled.potentials(batch, h)[1], pairwise)
    # score of a labelling = g . (s * Psi), sequence by sequence
    labels = np.random.default_rng(seed).integers(0, base.n_states_, size=batch.n_tokens)
    expected = [g @ scaled.joint_feature(sub, labels[rows]) for sub, rows in _sequences(batch)]
    np.testing.assert_allclose(scaled.score(batch, unary, pairwise, labels), expected,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(BASES))
@pytest.mark.parametrize("seed", range(3))
def test_oracles_against_enumeration_of_the_scaled_scores(name, seed):
    base, batch, Y, scaled, scale, g = _problem(name, seed)
    unary, pairwise = scaled.potentials(batch, g)
    decoded = scaled.decode(batch, unary, pairwise)
    node, _, log_partition = scaled.marginals(batch, unary, pairwise)
    augmented = {rescale: scaled.loss_augmented_decode(batch, unary, pairwise, Y,
                                                       rescale=rescale)
                 for rescale in ("margin", "slack")}
    for i, (sub, rows) in enumerate(_sequences(batch)):
        labelings = all_labelings(base.n_states_, rows.stop - rows.start)
        scores = np.array([g @ scaled.joint_feature(sub, ybar) for ybar in labelings])
        losses = np.array([scaled.loss(sub, Y[rows], ybar)[0] for ybar in labelings])
        true_score = g @ scaled.joint_feature(sub, Y[rows])
        assert g @ scaled.joint_feature(sub, decoded[rows]) == pytest.approx(scores.max(),
                                                                             abs=1e-10)
        assert log_partition[i] == pytest.approx(logsumexp(scores), abs=1e-10)
        p = np.exp(scores - logsumexp(scores))
        for t in range(rows.stop - rows.start):
            np.testing.assert_allclose(
                node[rows][t], np.bincount(labelings[:, t], weights=p,
                                           minlength=base.n_states_), atol=1e-10)
        for rescale, (labels, loss, score) in augmented.items():
            value = losses + scores if rescale == "margin" else losses * (
                1 + scores - true_score)
            chosen = loss[i] + score[i] if rescale == "margin" else loss[i] * (
                1 + score[i] - true_score)
            assert chosen == pytest.approx(max(value.max(), 0.0 if rescale == "slack"
                                               else -np.inf), abs=1e-10)
            assert score[i] == pytest.approx(g @ scaled.joint_feature(sub, labels[rows]),
                                             abs=1e-10)


@pytest.mark.parametrize("name", [
    "chain",
    "multiclass",
])
@pytest.mark.parametrize("seed", range(3))
def test_expected_joint_feature_is_scaled(name, seed):
    base, batch, Y, scaled, scale, g = _problem(name, seed)
    unary, pairwise = scaled.potentials(batch, g)
    node, pair, _ = scaled.marginals(batch, unary, pairwise)
    expected = np.zeros(base.size_joint_feature_)
    for sub, rows in _sequences(batch):
        labelings = all_labelings(base.n_states_, rows.stop - rows.start)
        psi = np.array([scaled.joint_feature(sub, ybar) for ybar in labelings])
        scores = psi @ g
        expected += np.exp(scores - logsumexp(scores)) @ psi
    np.testing.assert_allclose(scaled.expected_joint_feature(batch, node, pair), expected,
                               atol=1e-10)


@pytest.mark.parametrize("name", list(BASES))
@pytest.mark.parametrize("rescale", ["margin", "slack"])
def test_primal_objective_is_the_m_step_objective(name, rescale):
    # 1/2 ||g||^2 + C sum_i H_i(s * g) (Zhu, Xing and Zhang 2008, problem (5))
    base, batch, Y, scaled, scale, g = _problem(name, 7)
    C = 0.8
    value, hinge = primal_objective(scaled, batch, Y, g, C, rescale=rescale)
    base_value, base_hinge = primal_objective(base, batch, Y, scale * g, C, rescale=rescale)
    np.testing.assert_allclose(hinge, base_hinge, atol=1e-12)
    assert value == pytest.approx(base_value - 0.5 * (scale * g) @ (scale * g) + 0.5 * g @ g,
                                  abs=1e-10)


@pytest.mark.parametrize("name", list(BASES))
def test_per_feature_scales_are_scaled_token_features(name):
    # scales that are the same for every state are a rescaling of the token features
    base, batch, Y, _, _, g = _problem(name, 11)
    rng = np.random.default_rng(11)
    feature_scale = rng.uniform(0.2, 2.0, size=base.n_features_)
    feature_scale[0] = 0.0
    unary_scale = np.repeat(feature_scale[:, None], base.n_states_, axis=1)
    scaled = scaled_structure(base, unary_scale, np.ones(base.n_pairwise_))
    scaled_batch = SequenceBatch(batch.X * feature_scale, batch.offsets)
    labels = rng.integers(0, base.n_states_, size=batch.n_tokens)
    np.testing.assert_allclose(scaled.joint_feature(batch, labels),
                               base.joint_feature(scaled_batch, labels), rtol=1e-13)
    unary, pairwise = scaled.potentials(batch, g)
    unary_ref, pairwise_ref = base.potentials(scaled_batch, g)
    np.testing.assert_allclose(unary, unary_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(pairwise, pairwise_ref)
    np.testing.assert_array_equal(scaled.decode(batch, unary, pairwise),
                                  base.decode(scaled_batch, unary_ref, pairwise_ref))
    for rescale in ("margin", "slack"):
        got = scaled.loss_augmented_decode(batch, unary, pairwise, Y, rescale=rescale)
        want = base.loss_augmented_decode(scaled_batch, unary_ref, pairwise_ref, Y,
                                          rescale=rescale)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1:], want[1:], atol=1e-12)
    for got, want in zip(scaled.marginals(batch, unary, pairwise),
                         base.marginals(scaled_batch, unary_ref, pairwise_ref)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    assert primal_objective(scaled, batch, Y, g, 1.3)[0] == pytest.approx(
        primal_objective(base, scaled_batch, Y, g, 1.3)[0], rel=1e-12)


def test_scaling_an_unbound_structure_then_binding():
    unary_scale, pairwise_scale = np.full((2, 3), 0.5), np.full(15, 2.0)
    scaled = scaled_structure(ChainStructure(class_weight=[1.0, 2.0, 3.0]), unary_scale,
                              pairwise_scale)
    bound = scaled.bind(2, 3, np.arange(3), np.array([0, 1, 2]))
    assert type(bound) is type(scaled)
    assert isinstance(bound, ChainStructure)
    np.testing.assert_array_equal(bound.unary_scale_, unary_scale)
    np.testing.assert_array_equal(bound.pairwise_scale_, pairwise_scale)
    np.testing.assert_array_equal(bound.loss_weights_, [1.0, 2.0, 3.0])
    # one scaled class per base class
    assert type(scaled_structure(ChainStructure(), unary_scale, pairwise_scale)) is type(scaled)
