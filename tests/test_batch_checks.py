"""A SequenceBatch built by hand is checked: the compiled code reads the rows and columns its
arrays name, so broken offsets or a CSR matrix whose indices were changed after it was built
are a ValueError, not a read outside the weights."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklstruct import ChainStructure, GraphStructure, MultiClass
from sklstruct.utils import SequenceBatch
from sklstruct.utils._sequences import offsets_from_lengths


def _csr(seed=0):
    return sp.random(12, 5, density=0.5, format="csr", random_state=seed)


def test_broken_offsets_are_refused():
    X = _csr()
    for offsets in ([0, 5, 3, 12], [1, 6, 12], [0, 6, 13], [0, -5, 12], [[0, 12]],
                    np.array([0.0, 12.0]), []):
        with pytest.raises(ValueError, match="offsets"):
            SequenceBatch(X, np.asarray(offsets))


def test_offsets_of_any_integer_form_are_kept_as_int64():
    X = _csr()
    reference = SequenceBatch(X, offsets_from_lengths([5, 7]))
    for offsets in ([0, 5, 12], (0, 5, 12), np.array([0, 5, 12], dtype=np.int32),
                    np.array([0, 5, 12], dtype=np.uint16)):
        batch = SequenceBatch(X, offsets)
        assert batch.offsets.dtype == np.int64
        assert batch.n_sequences == 2 and batch.lengths.tolist() == [5, 7]
        assert (batch.take([1]).X != reference.take([1]).X).nnz == 0


def test_a_csr_matrix_changed_after_it_was_built_is_refused():
    for change in ("high", "negative", "indptr", "data"):
        X = _csr()
        if change == "high":
            X.indices[0] = 10**7
        elif change == "negative":
            X.indices[-1] = -1
        elif change == "data":  # (the compiled products read a value per entry)
            X.data = X.data[:-3]
        else:
            X.indptr[3] = X.indptr[4] + 1
        with pytest.raises(ValueError, match="A batch's X is a CSR matrix"):
            SequenceBatch(X, offsets_from_lengths([6, 6]))
    with pytest.raises(ValueError, match="2-D"):
        SequenceBatch(np.zeros(12), offsets_from_lengths([6, 6]))


@pytest.mark.parametrize("structure", [ChainStructure(), MultiClass(), GraphStructure()],
                         ids=repr)
def test_structure_methods_refuse_a_changed_matrix_before_reading_it(structure):
    """(These calls read the weights at the changed index and crashed the interpreter.)"""
    X = _csr()
    structure = structure.bind(5, 3)
    w = np.ones(structure.size_joint_feature_)
    X.indices[0] = 10**7
    with pytest.raises(ValueError, match="indices outside"):
        structure.potentials(SequenceBatch(X, offsets_from_lengths([6, 6])), w)


def test_a_csr_matrix_with_room_beyond_its_entries_is_a_valid_batch():
    X = _csr()
    n = X.nnz
    roomy = X.copy()  # (arrays longer than indptr says: scipy prunes them when it builds)
    roomy.indices = np.concatenate([X.indices, [99, -4]]).astype(X.indices.dtype)
    roomy.data = np.concatenate([X.data, [7.0, 7.0]])
    assert roomy.indptr[-1] == n < roomy.indices.shape[0]
    batch = SequenceBatch(roomy, offsets_from_lengths([6, 6]))
    np.testing.assert_array_equal(batch.X.toarray(), X.toarray())


def test_sub_batches_of_a_checked_batch_share_its_rows():
    X = _csr()
    batch = SequenceBatch(X, offsets_from_lengths([3, 4, 5]))
    sub, rows = batch.select([1, 2])
    np.testing.assert_array_equal(rows, np.arange(3, 12))
    assert sub.X.indices.base is not None  # a view of the batch's indices, not a copy
    np.testing.assert_array_equal(sub.X.toarray(), X.toarray()[3:])
    other = batch.take([2, 0])
    np.testing.assert_array_equal(other.X.toarray(), X.toarray()[[7, 8, 9, 10, 11, 0, 1, 2]])
    np.testing.assert_array_equal(other.offsets, [0, 5, 8])


def _changed(kind):
    """A 4 x 5 sparse matrix whose arrays were changed after it was built (scipy does not
    check them again; its own conversions and products read out of bounds)."""
    if kind == "csc_index":
        A = sp.csc_matrix(np.ones((4, 5)))
        A.indices[2] = 9_999_999
        return A
    if kind == "coo_col":
        A = sp.coo_matrix(np.ones((4, 5)))
        A.col[0] = 100
        return A
    A = sp.csr_matrix(np.ones((4, 5)))
    if kind == "csr_index":
        A.indices[0] = 10**6
    elif kind == "csr_negative":
        A.indices[3] = -2
    elif kind == "csr_indptr":
        A.indptr[2] = 100
    elif kind == "csr_int64_wrap":  # column 2**32 + 1 read as column 1 after an int32 cast
        A.indices = A.indices.astype(np.int64)
        A.indptr = A.indptr.astype(np.int64)
        A.indices[1] = 2**32 + 1
    return A


KINDS = ["csr_index", "csr_negative", "csr_indptr", "csr_int64_wrap", "csc_index", "coo_col"]


@pytest.mark.parametrize("kind", KINDS)
def test_estimators_refuse_a_sparse_matrix_changed_after_it_was_built(kind):
    from sklstruct import M3NExpGrad, StructSVMCuttingPlane

    rng = np.random.default_rng(0)
    good = [sp.csr_matrix(rng.random((4, 5))) for _ in range(6)]
    y = [np.array([0, 1, 0, 1])] * 6
    model = StructSVMCuttingPlane(C=0.1).fit(good, y)
    X = [_changed(kind)] + good[1:]
    with pytest.raises(ValueError, match="changed after it was built"):
        M3NExpGrad(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="changed after it was built"):
        model.predict(X)
    flat = _changed(kind)
    with pytest.raises(ValueError, match="changed after it was built"):
        model.predict(flat, lengths=[4])
    with pytest.raises(ValueError, match="changed after it was built"):
        StructSVMCuttingPlane(C=0.1).fit(flat, np.array([0, 1, 0, 1]))


def _fitted_forms():
    """(name, model, X, y) for a tiny fit of every token-state input form."""
    from sklstruct import M3NSimplicialDecomposition

    from ._helpers import make_chain_data

    rng = np.random.default_rng(0)
    X_chain, y_chain = make_chain_data(n_sequences=6, seed=1)
    X_flat, y_flat = rng.normal(size=(30, 4)), rng.integers(0, 3, 30)
    graphs = [(rng.normal(size=(4, 3)), np.array([[0, 1], [1, 2], [2, 3], [3, 0]]))
              for _ in range(6)]
    y_graphs = [rng.integers(0, 2, 4) for _ in range(6)]
    images = [rng.normal(size=(3, 4, 2)) for _ in range(4)]
    masks = [rng.integers(0, 2, (3, 4)) for _ in range(4)]
    Y_multi = rng.integers(0, 2, (30, 3))
    forms = [("chain", X_chain, y_chain), ("multiclass", X_flat, y_flat),
             ("graph", graphs, y_graphs), ("grid", images, masks),
             ("multilabel", X_flat, Y_multi)]
    for name, X, y in forms:
        yield name, M3NSimplicialDecomposition(max_iter=2).fit(X, y), X, y


def test_oracles_refuse_labellings_outside_the_states():
    """A negative state indexed the last states silently (every structure but the chain's),
    and a too-large one raised numpy's IndexError."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = list(_fitted_forms())
    for name, model, X, y in fitted:
        structure = model.structure_
        batch = model._validate_input(X, y, reset=False)[0]
        Y = model._encode_known(np.asarray(model._validate_input(X, y, reset=False)[1]))
        Y = np.asarray(Y, dtype=np.intp).reshape(-1)
        unary, pairwise = structure.potentials(batch, model.w_)
        np.testing.assert_array_equal(structure.check_labels(batch, Y), Y)
        for bad, message in ((np.where(np.arange(Y.shape[0]) == 0, -1, Y), r"lie in \[0"),
                             (np.full_like(Y, structure.n_states_), r"lie in \[0"),
                             (Y[:-1], "one state per token"),
                             (Y.astype(float), "integer states")):
            with pytest.raises(ValueError, match=message):
                structure.score(batch, unary, pairwise, bad)
            with pytest.raises(ValueError, match=message):
                structure.loss_augmented_decode(batch, unary, pairwise, bad)
            if structure.n_pairwise_:
                with pytest.raises(ValueError, match=message):
                    structure.pairwise_statistics(batch, bad)


def _parsing_structures():
    """(name, structure, batch, Y) of a dependency and a constituency problem."""
    from sklstruct._inference.cfg import Grammar
    from sklstruct.structures import ConstituencyTree, DependencyTree
    from sklstruct.utils._sequences import SequenceBatch

    from ._cfg_reference import random_cfg_problem

    spec, X, Y, lengths, _ = random_cfg_problem(0, n_features=3)
    grammar = Grammar(**spec)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    for loss in ("brackets", "zero_one"):
        tree = ConstituencyTree(grammar, loss_type=loss).bind(3, grammar.n_labels + 1)
        yield f"cfg-{loss}", tree, SequenceBatch(X, offsets), Y
    dependency = DependencyTree().bind(2, 3)
    rows = np.array([9, 4])  # sentences of 3 and 2 words: n * n arc rows each
    batch = SequenceBatch(np.random.default_rng(0).normal(size=(13, 2)),
                          np.concatenate(([0], np.cumsum(rows))).astype(np.int64))
    unary = np.random.default_rng(1).normal(size=(13, 3))
    yield "dependency", dependency, batch, dependency.decode(batch, unary, np.zeros(0))


PARSING_CASES = list(_parsing_structures())


@pytest.mark.parametrize("name, structure, batch, Y", PARSING_CASES,
                         ids=[case[0] for case in PARSING_CASES])
def test_parsing_structures_refuse_labellings_outside_the_states(name, structure, batch, Y):
    """The parsers' oracles and losses indexed a negative state as the last one, raised
    numpy's IndexError on a too-large one, and the grammar's rule counts read past the end
    of a too-short labelling."""
    unary = np.random.default_rng(2).normal(size=(batch.n_tokens, structure.n_states_))
    pairwise = np.zeros(structure.n_pairwise_)
    for bad, message in ((np.where(np.arange(Y.shape[0]) == 0, -1, Y), r"lie in \[0"),
                         (np.full_like(Y, structure.n_states_), r"lie in \[0"),
                         (Y[:-1], "one state per token"),
                         (Y.astype(float), "integer states")):
        calls = [lambda: structure.loss_augmented_decode(batch, unary, pairwise, bad),
                 lambda: structure.loss(batch, Y, bad), lambda: structure.loss(batch, bad, Y),
                 lambda: structure.score(batch, unary, pairwise, bad)]
        if structure.loss_decomposes:
            calls.append(lambda: structure.max_loss(batch, bad))
        if structure.n_pairwise_:
            calls.append(lambda: structure.pairwise_statistics(batch, bad))
        for call in calls:
            with pytest.raises(ValueError, match=message):
                call()


def test_tree_rules_refuses_arrays_of_another_length():
    """The compiled rule counts read ``states`` and wrote ``rules`` without bounds."""
    from sklstruct._inference._cfg_kernels import tree_rules
    from sklstruct._inference.cfg import Grammar

    from ._cfg_reference import random_cfg_problem

    spec, _, Y, _, n_words = random_cfg_problem(0, n_features=3)
    grammar = Grammar(**spec)
    n_words = np.asarray(n_words, dtype=np.int64)
    rules = np.empty(int(np.sum(n_words - 1)), dtype=np.int64)
    Y = np.ascontiguousarray(Y, dtype=np.int64)
    assert tree_rules(Y, n_words, grammar, rules) == -1
    with pytest.raises(ValueError, match="spans"):
        tree_rules(Y[:-1].copy(), n_words, grammar, rules)
    with pytest.raises(ValueError, match="spans"):
        tree_rules(Y, n_words, grammar, rules[:-1].copy())
    with pytest.raises(ValueError, match="at least one word"):
        tree_rules(Y, np.zeros(1, dtype=np.int64), grammar, rules)


def test_selections_count_negative_indices_from_the_end_and_read_masks():
    """A run of consecutive indices took the rows between offsets[i[0]] and
    offsets[i[-1] + 1] without wrapping negative indices (take([-1]) had -1 sequences),
    and a boolean mask was read as the indices 0 and 1; sums over an empty sequence took
    the next sequence's value."""
    from sklstruct.utils import ExampleArrays, SequenceBatch

    batch = SequenceBatch(np.arange(12.0).reshape(6, 2), np.array([0, 1, 3, 6]))
    for indices, expected in (([-1], [2]), ([-2, -1], [1, 2]), ([-3, -1], [0, 2]),
                              (np.array([True, False, True]), [0, 2])):
        sub, rows = batch.select(indices)
        np.testing.assert_array_equal(sub.lengths, batch.lengths[expected])
        np.testing.assert_array_equal(sub.X, batch.X[rows])
        np.testing.assert_array_equal(rows, np.concatenate(
            [np.arange(batch.offsets[k], batch.offsets[k + 1]) for k in expected]))
    for bad in ([3], [-4], np.array([True]), [0.5]):
        with pytest.raises(IndexError):
            batch.take(bad)
    arrays = ExampleArrays(np.arange(10).reshape(5, 2), np.array([0, 2, 2, 5]))
    np.testing.assert_array_equal(arrays.of(-1), arrays.of(2))
    np.testing.assert_array_equal(arrays.take([-1]).data, arrays.of(2))
    with pytest.raises(IndexError):
        arrays.of(3)
    with_empty = SequenceBatch(np.ones((3, 2)), np.array([0, 1, 1, 3]))
    np.testing.assert_array_equal(with_empty.sum_per_sequence([1.0, 2.0, 4.0]), [1, 0, 6])
    np.testing.assert_array_equal(
        SequenceBatch(np.ones((2, 2)), np.array([0, 2, 2])).sum_per_sequence([1.0, 2.0]),
        [3, 0])
