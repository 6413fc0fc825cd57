"""Inspection of fitted models: state features, transitions, start and end biases.

:func:`state_features` lists the largest positive and negative feature weights
of every label, with names taken from a :class:`~sklstruct.preprocessing.SequenceVectorizer`
in a pipeline; :func:`format_state_features` prints them. :func:`transition_table`
and :func:`start_end_table` label the pairwise weights of a chain model. Tables are
:class:`pandas.DataFrame` objects when pandas is installed, :class:`LabelledTable`
objects otherwise.
"""

import numbers

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .base import BaseStructuredClassifier
from .structures import ChainStructure

__all__ = [
    "LabelledTable",
    "format_state_features",
    "start_end_table",
    "state_features",
    "transition_table",
]


class LabelledTable:
    """A 2-D array with labelled rows and columns, printed as a table.

    The tables of this module are of this type when pandas is not installed.
    Its attributes ``values``, ``index`` and ``columns`` have the names and
    meaning of those of a :class:`pandas.DataFrame`, so code reading them works
    with either.

    Parameters
    ----------
    values : array-like of shape (n_rows, n_columns)
        The entries.
    index : array-like of shape (n_rows,)
        Row labels.
    columns : array-like of shape (n_columns,)
        Column labels.
    corner : str, default=""
        Text of the top left cell, naming the rows and columns.

    Attributes
    ----------
    values : ndarray of shape (n_rows, n_columns)
    index : ndarray of shape (n_rows,)
    columns : ndarray of shape (n_columns,)
    corner : str

    Examples
    --------
    >>> from sklstruct.inspection import LabelledTable
    >>> print(LabelledTable([[1.0, -0.5], [0.25, 2.0]], ["a", "b"], ["x", "y"]))
           x       y
    a  1.000  -0.500
    b  0.250   2.000
    """

    def __init__(self, values, index, columns, corner=""):
        self.values = np.asarray(values, dtype=np.float64)
        self.index = np.asarray(index)
        self.columns = np.asarray(columns)
        self.corner = corner
        if self.values.shape != (self.index.shape[0], self.columns.shape[0]):
            raise ValueError(
                f"values has shape {self.values.shape} but there are "
                f"{self.index.shape[0]} row and {self.columns.shape[0]} column labels."
            )

    def __str__(self):
        cells = [[f"{value:.3f}" for value in row] for row in self.values]
        row_names = [str(label) for label in self.index]
        name_width = max([len(self.corner)] + [len(name) for name in row_names])
        widths = [
            max([len(str(label))] + [len(row[j]) for row in cells])
            for j, label in enumerate(self.columns)
        ]
        lines = [
            f"{self.corner:<{name_width}}"
            + "".join(f"  {label!s:>{width}}" for label, width in zip(self.columns, widths))
        ]
        for name, row in zip(row_names, cells):
            lines.append(
                f"{name:<{name_width}}"
                + "".join(f"  {cell:>{width}}" for cell, width in zip(row, widths))
            )
        return "\n".join(lines)

    def __repr__(self):
        return str(self)


def _table(values, index, columns, index_name, columns_name):
    """A :class:`pandas.DataFrame` if pandas is installed, else a LabelledTable."""
    values = np.array(values, dtype=np.float64)
    try:
        import pandas as pd
    except ImportError:
        corner = f"{index_name} \\ {columns_name}" if columns_name else index_name
        return LabelledTable(values, index, columns, corner=corner)
    return pd.DataFrame(
        values,
        index=pd.Index(index, name=index_name),
        columns=pd.Index(columns, name=columns_name),
    )


def _fitted_model(estimator, caller):
    """The fitted sklstruct estimator of ``estimator`` (itself or a pipeline's last step)."""
    model = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    if not isinstance(model, BaseStructuredClassifier):
        raise TypeError(
            f"{caller} needs a sklstruct estimator or a Pipeline ending in one; got "
            f"{type(model).__name__}."
        )
    check_is_fitted(estimator)  # (a pipeline's own NotFittedError, as its predict's)
    check_is_fitted(model)
    return model


def _chain_model(estimator, caller):
    model = _fitted_model(estimator, caller)
    if not isinstance(model.structure_, ChainStructure):
        raise ValueError(
            f"{caller} needs a chain model; this {type(model).__name__} was fitted "
            f"with the structure {type(model.structure_).__name__}."
        )
    return model


def _feature_names(estimator, model, feature_names, n_features):
    """Names of the model's features, as a list of str."""
    if feature_names is None:
        if isinstance(estimator, Pipeline) and len(estimator) > 1:
            names = estimator[:-1].get_feature_names_out()
        else:
            return [f"x{j}" for j in range(n_features)]
    elif hasattr(feature_names, "get_feature_names_out"):
        names = feature_names.get_feature_names_out()
    else:
        names = feature_names
    names = [str(name) for name in names]
    if len(names) != n_features:
        raise ValueError(
            f"There are {len(names)} feature names but {type(model).__name__} has "
            f"{n_features} features."
        )
    return names


def state_features(estimator, feature_names=None, *, top=20):
    """The largest positive and negative feature weights of every label.

    The weight of feature ``j`` for label ``k`` is ``coef_[k, j]``: how much
    the feature, at value 1 on a token, adds to the score of labelling the
    token ``k``. Only strictly positive (negative) weights are listed as
    positive (negative), largest magnitude first; equal weights keep the
    feature order.

    Parameters
    ----------
    estimator : sklstruct estimator or Pipeline
        A fitted linear sklstruct estimator, or a fitted
        :class:`~sklearn.pipeline.Pipeline` whose last step is one; then the
        feature names are those of the steps before it (such as a
        :class:`~sklstruct.preprocessing.SequenceVectorizer`).
    feature_names : array-like of str or fitted transformer, default=None
        Name of each feature, or a fitted transformer with
        ``get_feature_names_out`` (such as a ``SequenceVectorizer``). By
        default, the names from the pipeline, or ``"x0"``, ``"x1"``...
    top : int or None, default=20
        Number of positive and of negative features per label; None lists
        every feature with a nonzero weight.

    Returns
    -------
    features : dict
        Maps each label of ``classes_``, in order, to a dict with keys
        ``"positive"`` and ``"negative"``, each a list of
        ``(feature name, weight)`` pairs. A two-class multiclass model, whose
        ``coef_`` has a single row (class 1's weights minus class 0's, as in
        :class:`~sklearn.svm.LinearSVC`), has the single entry
        ``classes_[1]``.

    Raises
    ------
    ValueError
        If the model has no weights on its input features (a kernel model),
        or the number of names does not match the number of features.

    See Also
    --------
    format_state_features : The same lists as text.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.inspection import state_features
    >>> from sklstruct.preprocessing import SequenceVectorizer
    >>> X = [[{"word": "the"}, {"word": "cat"}, {"word": "sat"}],
    ...      [{"word": "a"}, {"word": "dog"}, {"word": "ran"}]]
    >>> y = [["B-NP", "I-NP", "B-VP"], ["B-NP", "I-NP", "B-VP"]]
    >>> model = make_pipeline(SequenceVectorizer(), StructSVMCuttingPlane(C=10.0))
    >>> features = state_features(model.fit(X, y), top=2)
    >>> list(features)
    ['B-NP', 'B-VP', 'I-NP']
    >>> sorted(name for name, weight in features["I-NP"]["positive"])
    ['word=cat', 'word=dog']
    """
    model = _fitted_model(estimator, "state_features")
    if top is not None and (
        not isinstance(top, numbers.Integral) or isinstance(top, bool) or top < 1
    ):
        raise ValueError(f"top must be a positive int or None; got {top!r}.")
    if getattr(model, "token_map_", None) is not None:
        raise ValueError(
            f"state_features needs a linear model; this {type(model).__name__} uses a "
            "kernel, so its weights are on basis features, not on input features."
        )
    try:
        coef = model.coef_
    except AttributeError as error:
        raise ValueError(
            f"state_features needs a linear model: {type(model).__name__} has no "
            f"coef_ ({error})"
        ) from error
    names = _feature_names(estimator, model, feature_names, coef.shape[1])
    labels = model.classes_.tolist()
    if coef.shape[0] == 1 and len(labels) == 2:
        labels = labels[1:]
    features = {}
    for label, weights in zip(labels, coef):
        positive = np.argsort(-weights, kind="stable")
        positive = positive[weights[positive] > 0][:top]
        negative = np.argsort(weights, kind="stable")
        negative = negative[weights[negative] < 0][:top]
        features[label] = {
            "positive": [(names[j], float(weights[j])) for j in positive],
            "negative": [(names[j], float(weights[j])) for j in negative],
        }
    return features


def format_state_features(features, *, top=20):
    """Text listing of :func:`state_features`, label by label.

    Parameters
    ----------
    features : dict, or fitted estimator or Pipeline
        The result of :func:`state_features`, or what it takes (its ``top`` features are
        listed).
    top : int or None, default=20
        The number of features per list when ``features`` is an estimator.

    Returns
    -------
    text : str
        For every label a "Top positive" and a "Top negative" block, one
        ``weight  name`` line per feature.

    Examples
    --------
    >>> from sklstruct.inspection import format_state_features
    >>> features = {"B-NP": {"positive": [("word=the", 1.5)],
    ...                      "negative": [("word=sat", -0.25)]}}
    >>> print(format_state_features(features))
    B-NP
      Top positive:
        +1.500  word=the
      Top negative:
        -0.250  word=sat
    """
    if not isinstance(features, dict):
        features = state_features(features, top=top)
    lines = []
    for label, lists in features.items():
        lines.append(str(label))
        for kind in ("positive", "negative"):
            lines.append(f"  Top {kind}:")
            pairs = lists[kind]
            if not pairs:
                lines.append("    (none)")
            width = max((len(f"{weight:+.3f}") for _, weight in pairs), default=0)
            lines += [f"    {weight:>+{width}.3f}  {name}" for name, weight in pairs]
    return "\n".join(lines)


def transition_table(estimator):
    """The transition weights of a chain model as a labelled table.

    Entry ``(a, b)`` is ``transition_[a, b]``, the score added when label
    ``a`` is followed by label ``b``.

    Parameters
    ----------
    estimator : sklstruct estimator or Pipeline
        A fitted sklstruct estimator with a chain structure, or a fitted
        :class:`~sklearn.pipeline.Pipeline` whose last step is one.

    Returns
    -------
    table : pandas.DataFrame or LabelledTable
        Shape (n_classes, n_classes); rows are the "from" labels and columns
        the "to" labels, both ``classes_``. A :class:`pandas.DataFrame` when
        pandas is installed, a :class:`LabelledTable` otherwise.

    Raises
    ------
    ValueError
        If the model is not a chain model.

    See Also
    --------
    start_end_table : The start and end biases of a chain model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.inspection import transition_table
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> model = StructSVMCuttingPlane(C=10.0).fit(X, y)
    >>> table = transition_table(model)
    >>> table.index.tolist(), table.columns.tolist()
    (['a', 'b'], ['a', 'b'])
    >>> np.array_equal(table.values, model.transition_)
    True
    """
    model = _chain_model(estimator, "transition_table")
    labels = model.classes_.tolist()
    return _table(model.transition_, labels, labels, "from", "to")


def start_end_table(estimator):
    """The start and end biases of a chain model as a labelled table.

    Parameters
    ----------
    estimator : sklstruct estimator or Pipeline
        A fitted sklstruct estimator with a chain structure that has start and
        end biases (``ChainStructure(start_end=True)``, the default), or a
        fitted :class:`~sklearn.pipeline.Pipeline` whose last step is one.

    Returns
    -------
    table : pandas.DataFrame or LabelledTable
        Shape (n_classes, 2); one row per label of ``classes_`` and the
        columns ``"start"`` (score of a sequence starting with the label) and
        ``"end"`` (score of a sequence ending with it).

    Raises
    ------
    ValueError
        If the model is not a chain model or has no start and end biases.

    See Also
    --------
    transition_table : The transition weights of a chain model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.inspection import start_end_table
    >>> X = [np.array([[1., 0.], [0., 1.]]), np.array([[0., 1.], [1., 0.], [1., 0.]])]
    >>> y = [np.array(["a", "b"]), np.array(["b", "a", "a"])]
    >>> table = start_end_table(StructSVMCuttingPlane(C=10.0).fit(X, y))
    >>> table.index.tolist(), table.columns.tolist()
    (['a', 'b'], ['start', 'end'])
    """
    model = _chain_model(estimator, "start_end_table")
    structure = model.structure_
    _, start, end = structure.pairwise_parameters(structure.split_weights(model.w_)[1])
    if start is None:
        raise ValueError(
            f"This {type(model).__name__} was fitted with "
            "ChainStructure(start_end=False): it has no start and end biases."
        )
    return _table(np.column_stack([start, end]), model.classes_.tolist(),
                  ["start", "end"], "label", None)
