"""What the structures over part rows share (PartsStructure) and what the parsers over them
share (C, learner, features), checked on both dependency and constituency trees."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone

from sklstruct import StructSVMCuttingPlane
from sklstruct._inference.cfg import Grammar
from sklstruct.parsing import (
    ArcFeatures,
    ConstituencyParser,
    DependencyParser,
    SpanFeatures,
)
from sklstruct.structures import ConstituencyTree, DependencyTree, PartsStructure
from sklstruct.utils import SequenceBatch
from sklstruct.utils._sequences import offsets_from_lengths

from ._cfg_reference import random_cfg_problem


def _structures():
    spec = random_cfg_problem(0)[0]
    grammar = Grammar(**spec)
    return [DependencyTree().bind(2, 2),
            ConstituencyTree(grammar).bind(2, grammar.n_labels + 1)]


def _batch(lengths, n_features=2):
    lengths = np.asarray(lengths, dtype=np.int64)
    X = np.random.default_rng(0).normal(size=(int(lengths.sum()), n_features))
    return SequenceBatch(X, offsets_from_lengths(lengths))


@pytest.mark.parametrize("structure", _structures(), ids=lambda s: type(s).__name__)
def test_sentence_lengths_invert_rows_of(structure):
    assert isinstance(structure, PartsStructure)
    n_words = np.array([1, 2, 3, 7, 1, 40, 5, 129])
    rows = structure.rows_of(n_words)
    assert np.all(np.diff(structure.rows_of(np.arange(200))) > 0)
    np.testing.assert_array_equal(structure.sentence_lengths(_batch(rows)), n_words)
    assert structure.sentence_lengths(_batch([])).shape == (0,)
    bad = rows.copy()
    bad[2] += 1
    unit, _formula, part = structure._rows_text
    with pytest.raises(ValueError, match=f"example 2 has {bad[2]} rows; a sentence of n "
                                         f"{unit} has .* {part} rows"):
        structure.sentence_lengths(_batch(bad))


@pytest.mark.parametrize("structure", _structures(), ids=lambda s: type(s).__name__)
def test_layout_is_kept_per_batch_and_not_pickled(structure):
    batch = _batch(structure.rows_of(np.array([3, 4])))
    first = structure._layout(batch)
    assert structure._layout(batch) is first
    other = _batch(structure.rows_of(np.array([2])))
    assert structure._layout(other)[0].tolist() == [2]
    assert "_layout_cache" not in pickle.loads(pickle.dumps(structure)).__dict__
    assert "_layout_cache" not in clone(structure).__dict__


@pytest.mark.parametrize("structure", _structures(), ids=lambda s: type(s).__name__)
def test_the_shifted_max_oracle_is_decoding_on_loss_shifted_scores(structure):
    n_words = np.array([3, 4])
    batch = _batch(structure.rows_of(n_words))
    rng = np.random.default_rng(1)
    unary = rng.normal(size=(batch.n_tokens, structure.n_states_))
    pairwise = rng.normal(size=structure.n_pairwise_)
    Y = structure.decode(batch, rng.normal(size=unary.shape), pairwise)
    labels, losses, scores = structure.loss_augmented_decode(batch, unary, pairwise, Y)
    loss = structure.token_loss(Y)
    np.testing.assert_array_equal(labels, structure.decode(batch, unary + loss, pairwise))
    np.testing.assert_allclose(losses, structure.loss(batch, Y, labels))
    np.testing.assert_allclose(scores, structure.score(batch, unary, pairwise, labels))
    with pytest.raises(ValueError, match="margin rescaling only"):
        structure.loss_augmented_decode(batch, unary, pairwise, Y, rescale="slack")


@pytest.mark.parametrize("parser, features", [(DependencyParser, ArcFeatures),
                                              (ConstituencyParser, SpanFeatures)])
def test_parsers_share_their_parameters(parser, features):
    params = parser().get_params(deep=False)
    assert {"C", "learner", "features"} <= set(params)
    assert parser(C=0.5, learner=StructSVMCuttingPlane(C=7.0))._learner_for("auto", "tree").C == 0.5
    with pytest.raises(TypeError, match="structure parameter"):
        parser(learner=features())._learner_for("auto", "tree")
    assert hasattr(features, "transform_flat") and hasattr(features, "transform")
