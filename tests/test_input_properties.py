"""The input boundary as a property: random input forms against the documented contract.

Every accepted form of the same sequences (a list of dense or sparse matrices or DataFrames,
an object array of them, a flat matrix or DataFrame with ``lengths`` or ``sequence_ids``)
gives the same predictions, in the input's form; labels of one kind (str, int, bool) come back
as given; anything else (mixed label kinds, DataFrame columns in another order or under other
names) is a clear ``ValueError`` or ``TypeError``.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sklstruct import StructSVMCuttingPlane
from sklstruct.utils import lengths_to_groups

from ._helpers import make_chain_data

pd = pytest.importorskip("pandas")

COLUMNS = ["a", "b", "c", "d"]
X_ALL, Y_ALL = make_chain_data(n_sequences=30, n_states=2, n_features=4, max_length=5, seed=7)
LABELS = {"str": np.array(["no", "yes"]), "int": np.array([3, 11]),
          "bool": np.array([False, True])}
FORMS = ["list", "sparse", "frames", "objects", "flat", "flat_sparse", "flat_ids",
         "flat_frame"]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _fit(kind, frames):
    y = [LABELS[kind][labels] for labels in Y_ALL]
    X = [pd.DataFrame(x, columns=COLUMNS) for x in X_ALL] if frames else X_ALL
    return StructSVMCuttingPlane(C=1.0, tol=1e-3).fit(X, y)


MODELS = {(kind, frames): _fit(kind, frames) for kind in LABELS for frames in (False, True)}


def _as_form(X, form):
    """The sequences ``X`` in ``form``: ``(X, keyword arguments of predict, flat output)``."""
    lengths = [x.shape[0] for x in X]
    flat = np.vstack(X)
    if form == "list":
        return list(X), {}, False
    if form == "sparse":
        return [sp.csr_matrix(x) for x in X], {}, False
    if form == "frames":
        return [pd.DataFrame(x, columns=COLUMNS) for x in X], {}, False
    if form == "objects":
        objects = np.empty(len(X), dtype=object)
        objects[:] = list(X)
        return objects, {}, False
    if form == "flat":
        return flat, {"lengths": lengths}, True
    if form == "flat_sparse":
        return sp.csr_matrix(flat), {"lengths": lengths}, True
    if form == "flat_ids":
        return flat, {"sequence_ids": lengths_to_groups(lengths) * 7 + 3}, True
    return pd.DataFrame(flat, columns=COLUMNS), {"lengths": lengths}, True


subsets = st.lists(st.integers(0, len(X_ALL) - 1), min_size=1, max_size=8)


@SETTINGS
@given(kind=st.sampled_from(sorted(LABELS)), frames=st.booleans(),
       form=st.sampled_from(FORMS), rows=subsets)
def test_every_form_of_the_same_sequences_predicts_the_same(kind, frames, form, rows):
    model = MODELS[kind, frames]
    X = [X_ALL[i] for i in rows]
    expected = model.predict([pd.DataFrame(x, columns=COLUMNS) for x in X] if frames else X)
    given_X, params, flat = _as_form(X, form)
    named = form in ("frames", "flat_frame")
    if frames != named:
        # names at fit and none now (or the reverse): scikit-learn's warning, same result
        with pytest.warns(UserWarning, match="feature names"):
            predicted = model.predict(given_X, **params)
    else:
        predicted = model.predict(given_X, **params)
    if flat:
        assert isinstance(predicted, np.ndarray)
        predicted = np.split(predicted, np.cumsum([x.shape[0] for x in X])[:-1])
    else:
        assert isinstance(predicted, list) and len(predicted) == len(X)
    for a, b in zip(predicted, expected):
        np.testing.assert_array_equal(a, b)
        assert a.dtype.kind == LABELS[kind].dtype.kind  # labels come back as given
    # scoring the same labels in the same form agrees with the list form
    y = [model.predict([x])[0] for x in (X if not frames else
                                        [pd.DataFrame(x, columns=COLUMNS) for x in X])]
    y_given = np.concatenate(y) if flat else y
    if frames == named:
        assert model.score(given_X, y_given, **params) == 1.0


@SETTINGS
@given(frames_at_fit=st.booleans(), order=st.permutations(COLUMNS), rows=subsets,
       rename=st.booleans())
def test_dataframe_columns_are_checked_not_read_by_position(frames_at_fit, order, rows,
                                                            rename):
    model = MODELS["str", frames_at_fit]
    X = [pd.DataFrame(X_ALL[i], columns=COLUMNS)[list(order)] for i in rows]
    if not frames_at_fit:  # fitted without names: columns are read by position, with a warning
        with pytest.warns(UserWarning, match="was fitted without feature names"):
            model.predict(X)
        return
    expected = MODELS["str", False].predict([X_ALL[i] for i in rows])
    # the columns put back in order give the model's predictions
    restored = model.predict([x[COLUMNS] for x in X])
    assert all(np.array_equal(a, b) for a, b in zip(restored, expected))
    if rename:
        X = [x.rename(columns={order[0]: "other"}) for x in X]
    if list(order) == COLUMNS and not rename:
        return
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(X)
    flat = pd.concat(X)
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(flat, lengths=[x.shape[0] for x in X])


@SETTINGS
@given(kinds=st.lists(st.sampled_from(["str", "int", "bool", "float"]), min_size=2,
                      max_size=4, unique=True),
       as_arrays=st.booleans(), seed=st.integers(0, 100))
def test_labels_mixing_kinds_are_refused_in_every_form(kinds, as_arrays, seed):
    rng = np.random.default_rng(seed)
    values = {"str": ["no", "yes"], "int": [3, 11], "bool": [False, True],
              "float": [0.5, 2.5]}
    y = [[values[kinds[rng.integers(len(kinds))]][label] for label in labels]
         for labels in Y_ALL]
    used = {kind for labels in y for kind in kinds
            if any(type(v) is type(values[kind][0]) for v in labels)}
    if as_arrays:
        y = [np.array(labels, dtype=object) for labels in y]
    numeric_only = used <= {"int", "float"}
    if len(used) < 2 or numeric_only:
        return  # one kind (ints and floats are numbers): nothing to refuse
    with pytest.raises(TypeError, match="mutually comparable values of one kind"):
        StructSVMCuttingPlane(max_iter=5).fit(X_ALL, y)
    flat_y = np.concatenate([np.asarray(labels, dtype=object) for labels in y])
    with pytest.raises(TypeError, match="mutually comparable values of one kind"):
        StructSVMCuttingPlane(max_iter=5).fit(np.vstack(X_ALL), flat_y,
                                              lengths=[x.shape[0] for x in X_ALL])


@SETTINGS
@given(kind=st.sampled_from(sorted(LABELS)), other=st.sampled_from(sorted(LABELS)),
       rows=subsets)
def test_scoring_labels_of_another_kind(kind, other, rows):
    model = MODELS[kind, False]
    X = [X_ALL[i] for i in rows]
    y = [LABELS[other][Y_ALL[i]] for i in rows]
    if (kind == "str") != (other == "str"):
        with pytest.raises(ValueError, match="Mix of label input types"):
            model.score(X, y)
    else:  # numbers and booleans compare as numbers, as in scikit-learn
        assert 0.0 <= model.score(X, y) <= 1.0
