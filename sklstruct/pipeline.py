"""A pipeline from token feature dicts to a structured model, with named weights.

``make_sequence_pipeline(estimator)`` is the one-liner for data in sklearn-crfsuite's form:
``X`` a list of sentences, each a list of per-token feature dicts, and ``y`` a list of label
lists.
"""

from collections.abc import Mapping

from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .preprocessing import SequenceVectorizer

__all__ = ["SequencePipeline", "make_sequence_pipeline"]


def _final_step_has(name):
    """Whether the last step has ``name`` (as scikit-learn's ``Pipeline`` delegates
    ``predict_proba``): a pipeline ending in a grid model has no ``predict_marginals``."""
    return lambda pipeline: hasattr(pipeline.steps[-1][1], name)


class SequencePipeline(Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` ending in a vectoriser and a structured model,
    with the model's weights named by the vectoriser's features.

    It behaves exactly as a ``Pipeline`` (``fit``, ``predict``, ``predict_proba``,
    ``score``, parameter search with ``<step>__<param>`` names); it adds named views of the
    fitted weights in the form sklearn-crfsuite's ``CRF`` has them. The second-to-last step must
    have ``get_feature_names_out`` (e.g. :class:`~sklstruct.preprocessing.SequenceVectorizer`)
    and the last must be a fitted sklstruct estimator.

    Parameters
    ----------
    steps : list of tuple
        ``(name, transformer)`` pairs, as for :class:`~sklearn.pipeline.Pipeline`.
    transform_input : list of str, default=None
        As for :class:`~sklearn.pipeline.Pipeline`.
    memory : str or object with the joblib.Memory interface, default=None
        As for :class:`~sklearn.pipeline.Pipeline`.
    verbose : bool, default=False
        As for :class:`~sklearn.pipeline.Pipeline`.

    Attributes
    ----------
    state_features_ : dict
        Non-zero weights of (feature name, label) pairs, as sklearn-crfsuite's
        ``CRF.state_features_``; the names are the vectoriser's (``name=value`` for a
        string value where crfsuite writes ``name:value``; ``SequenceVectorizer(separator=":")``
        gives crfsuite's).
    transition_features_ : dict
        Transition weights of (from label, to label) pairs of a chain model, as
        sklearn-crfsuite's ``CRF.transition_features_``.

    See Also
    --------
    make_sequence_pipeline : Build one from an estimator.
    sklstruct.inspection.state_features : The top weighted features of each label.
    """

    def fit(self, X, y=None, **params):
        """Fit every step, as :meth:`sklearn.pipeline.Pipeline.fit`; a fit that fails or is
        interrupted leaves every step as it was.

        The vectoriser is refitted before the model sees the data, so a refit whose model
        refuses the labels (or is interrupted) would otherwise leave a new vocabulary beside
        the old model. The other steps' attributes are restored then (a step's fit replaces its
        fitted attributes rather than changing them in place, as scikit-learn's do), and the
        model keeps its previous fit itself (its fits are staged; a failed ``warm_start`` fit
        drops the dual state it changed).

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts.
        y : list of list, default=None
            The label sequences.
        **params
            Passed to :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        self : SequencePipeline
            The fitted pipeline.
        """
        steps = list(self.steps)
        states = [(step, dict(vars(step))) for _, step in steps[:-1]
                  if hasattr(step, "__dict__")]
        try:
            return super().fit(X, y, **params)
        except BaseException:
            for step, state in states:
                step.__dict__ = state
            self.steps = steps
            raise

    def _named_parts(self):
        check_is_fitted(self)
        model = self.steps[-1][1]
        if getattr(model, "token_map_", None) is not None:
            raise AttributeError("state_features_ needs a linear model: a kernel model's "
                                 "weights are on its kernel basis, not on the features.")
        names = self.steps[-2][1].get_feature_names_out()
        if len(names) != getattr(model, "n_features_in_", len(names)):
            raise ValueError(f"The vectoriser gives {len(names)} features but the model was "
                             f"fitted on {model.n_features_in_}: they come from different "
                             "fits (a vectoriser refitted on its own?); "
                             "fit the pipeline again.")
        return model, names

    @property
    def state_features_(self):
        """Non-zero weights of (feature name, label) pairs, a dict as sklearn-crfsuite's
        ``CRF.state_features_`` (one entry per non-zero weight: large for L2 models on big
        vocabularies; :func:`sklstruct.inspection.state_features` lists only the top ones).
        A two-class multiclass model, whose ``coef_`` has one row (class 1's weights minus
        class 0's, as ``LinearSVC``), names its weights by ``classes_[1]``."""
        model, names = self._named_parts()
        coef = model.coef_
        labels = model.classes_.tolist()
        if coef.shape[0] != len(labels):  # the single row of a two-class model
            labels = labels[1:]
        return {(str(names[j]), label): float(coef[i, j])
                for i, label in enumerate(labels) for j in coef[i].nonzero()[0]}

    def predict(self, X, **params):
        """Predicted labels: the pipeline's ``predict``, in the input's form.

        For token feature dicts (sklearn-crfsuite's form) the labels of each sequence come as
        a list of Python values (``str`` for string labels), as sklearn-crfsuite gives them,
        so that they print and serialise (``json.dumps``) as such; otherwise as the last
        step's arrays.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts (the pipeline's input).
        **params
            Passed to :meth:`sklearn.pipeline.Pipeline.predict`.

        Returns
        -------
        y : list of list, or list of ndarray
        """
        return _in_input_form(super().predict(X, **params), X)

    def _final_input(self, X):
        check_is_fitted(self)  # (the pipeline's NotFittedError, as predict's)
        for _, _, transformer in self._iter(with_final=False):
            X = transformer.transform(X)
        return X

    @available_if(_final_step_has("predict_marginals"))
    def predict_marginals(self, X, **params):
        """The last step's ``predict_marginals`` (temperature 1) on the transformed ``X``.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts (the pipeline's input).
        **params
            Passed to the last step's ``predict_marginals``.

        Returns
        -------
        marginals : list of ndarray of shape (n_tokens_i, n_classes)
        """
        return self.steps[-1][1].predict_marginals(self._final_input(X), **params)

    @available_if(_final_step_has("predict_topk"))
    def predict_topk(self, X, k=5, **params):
        """The ``k`` best labellings of each sequence and their scores: the last step's
        ``predict_topk`` on the transformed ``X``.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts (the pipeline's input).
        k : int, default=5
            Labellings per sequence.
        **params
            Passed to the last step's ``predict_topk`` (e.g. ``lengths``).

        Returns
        -------
        labels, scores
            As the last step's ``predict_topk``; for token feature dicts each sequence's
            labellings come as lists of Python values (as :meth:`predict`'s).
        """
        labels, scores = self.steps[-1][1].predict_topk(self._final_input(X), k, **params)
        if _holds_token_dicts(X):
            labels = [rows.tolist() for rows in labels]
        return labels, scores

    @available_if(_final_step_has("sequence_confidence"))
    def sequence_confidence(self, X, **params):
        """The last step's ``sequence_confidence`` on the transformed ``X``.

        Parameters
        ----------
        X : list of list of dict
            Sequences of per-token feature dicts (the pipeline's input).
        **params
            Passed to the last step's ``sequence_confidence``.

        Returns
        -------
        confidence : ndarray of shape (n_sequences,)
        """
        return self.steps[-1][1].sequence_confidence(self._final_input(X), **params)

    @available_if(_final_step_has("calibrate_temperature"))
    def calibrate_temperature(self, X, y, **params):
        """Calibrate the last step's ``predict_proba`` on held-out data (its
        ``calibrate_temperature`` on the transformed ``X``).

        Parameters
        ----------
        X : list of list of dict
            Held-out sequences of per-token feature dicts.
        y : list of array-like
            Their labels.
        **params
            Passed to the last step's ``calibrate_temperature``.

        Returns
        -------
        self : SequencePipeline
        """
        self.steps[-1][1].calibrate_temperature(self._final_input(X), y, **params)
        return self

    @property
    def transition_features_(self):
        """Transition weights of (from label, to label) pairs of a chain model, a dict as
        sklearn-crfsuite's ``CRF.transition_features_``."""
        check_is_fitted(self)
        model = self.steps[-1][1]
        transition = model.transition_
        labels = model.classes_.tolist()
        return {(a, b): float(transition[i, j]) for i, a in enumerate(labels)
                for j, b in enumerate(labels)}


def make_sequence_pipeline(estimator, vectorizer=None, **kwargs):
    """A :class:`SequencePipeline` of a vectoriser and ``estimator``: fit and predict on token
    feature dicts.

    Parameters
    ----------
    estimator : sklstruct estimator
        The structured model, e.g. ``M3NSimplicialDecomposition(C=0.1)``.
    vectorizer : transformer, default=None
        Turns a list of sequences of feature dicts into a list of sparse matrices;
        ``SequenceVectorizer()`` by default.
    **kwargs
        Passed to :func:`~sklearn.pipeline.make_pipeline` (``memory``, ``verbose``,
        ``transform_input``).

    Returns
    -------
    pipeline : SequencePipeline
        Steps named as :func:`~sklearn.pipeline.make_pipeline` names them (e.g.
        ``"sequencevectorizer"`` and ``"m3nsimplicialdecomposition"``).

    Examples
    --------
    >>> from sklstruct import M3NSimplicialDecomposition
    >>> from sklstruct.pipeline import make_sequence_pipeline
    >>> X = [[{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}, {"w": "ran"}]]
    >>> y = [["DT", "NN"], ["DT", "NN", "VB"]]
    >>> tagger = make_sequence_pipeline(M3NSimplicialDecomposition(C=1.0)).fit(X, y)
    >>> tagger.predict([[{"w": "the"}, {"w": "dog"}]])
    [['DT', 'NN']]
    >>> round(tagger.state_features_[("w=cat", "NN")], 3) > 0
    True
    """
    pipeline = make_pipeline(SequenceVectorizer() if vectorizer is None else vectorizer,
                             estimator, **kwargs)
    return SequencePipeline(pipeline.steps, transform_input=pipeline.transform_input,
                            memory=pipeline.memory, verbose=pipeline.verbose)


def _holds_token_dicts(X):
    """Whether ``X`` is a list of sequences of per-token feature dicts (empty sentences
    only: when they are lists, as token dicts' sentences are, and not arrays)."""
    for sequence in X:
        if len(sequence):
            return isinstance(sequence[0], Mapping)
    return len(X) > 0 and all(isinstance(sequence, (list, tuple)) for sequence in X)


def _in_input_form(labels, X):
    """Per-sequence label arrays as lists of Python values when ``X`` holds token dicts."""
    if isinstance(labels, list) and _holds_token_dicts(X):
        return [sequence.tolist() for sequence in labels]
    return labels
