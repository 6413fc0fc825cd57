"""Structure oracles against enumeration of all labelings."""

import numpy as np
import pytest
from scipy.special import logsumexp

from sklstruct import ChainStructure, MultiClass
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import all_labelings


@pytest.mark.parametrize("structure", [ChainStructure(start_end=True),
                                       ChainStructure(start_end=False)])
def test_chain_marginals_and_expected_joint_feature(structure):
    rng = np.random.default_rng(0)
    lengths = [3, 1, 4]
    batch = SequenceBatch(rng.normal(size=(8, 2)), offsets_from_lengths(lengths))
    bound = structure.bind(n_features=2, n_states=3)
    w = rng.normal(size=bound.size_joint_feature_)
    node, pairwise, log_z = bound.marginals(batch, *bound.potentials(batch, w))
    expected = np.zeros(bound.size_joint_feature_)
    for i, length in enumerate(lengths):
        sub = batch.take([i])
        labelings = all_labelings(3, length)
        psi = np.array([bound.joint_feature(sub, y) for y in labelings])
        scores = psi @ w
        assert log_z[i] == pytest.approx(logsumexp(scores), abs=1e-10)
        expected += np.exp(scores - logsumexp(scores)) @ psi
        np.testing.assert_allclose(bound.score(sub, *bound.potentials(sub, w), labelings[0]), scores[0])
    np.testing.assert_allclose(bound.expected_joint_feature(batch, node, pairwise), expected,
                               atol=1e-10)


def test_multiclass_marginals_are_softmax():
    rng = np.random.default_rng(1)
    batch = SequenceBatch(rng.normal(size=(5, 3)), offsets_from_lengths([1] * 5))
    bound = MultiClass().bind(n_features=3, n_states=4)
    w = rng.normal(size=bound.size_joint_feature_)
    node, _, log_z = bound.marginals(batch, *bound.potentials(batch, w))
    scores = bound.unary_potentials(batch, w)
    np.testing.assert_allclose(node, np.exp(scores - logsumexp(scores, axis=1)[:, None]))
    np.testing.assert_allclose(log_z, logsumexp(scores, axis=1))


def test_structure_for_form_refuses_an_unknown_form():
    from sklstruct.structures import (ChainStructure, Grid3DStructure, GridStructure,
                                      MultiClass, structure_for_form)

    assert type(structure_for_form("list")) is ChainStructure
    assert type(structure_for_form("flat")) is ChainStructure
    assert type(structure_for_form("multiclass")) is MultiClass
    assert type(structure_for_form("images")) is GridStructure
    assert type(structure_for_form("volumes")) is Grid3DStructure
    for bad in ("bogus", None, 3, "IMAGES"):
        with pytest.raises(ValueError, match="form must be one of"):
            structure_for_form(bad)
