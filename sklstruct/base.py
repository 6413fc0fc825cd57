"""The estimator base shared by every learner: the one path every fit takes (staging, the
bound structure, the certificate, warm starts), the fitted parameters and the objective.

Learners subclass :class:`BaseStructuredClassifier` and implement ``_fit_batch``, which calls
their solver; the input forms live in :mod:`sklstruct._input`, prediction in
:mod:`sklstruct._prediction` and the progress of a fit in :mod:`sklstruct._progress`.
"""

import hashlib
import inspect
import numbers
from abc import abstractmethod

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ._input import InputMixin, check_sequence_weights, encode_targets
from ._prediction import PredictionMixin
from ._progress import Certificate
from .structures import BaseStructure, MultiLabelStructure, structure_for_form
from .structures._base import checked_token_loss, structured_hinge
from .utils._sklearn_compat import Interval, StrOptions, _fit_context
from .utils._warnings import warn_user


def _is_default(value, default):
    """Whether a parameter's value is its default (arrays and other values that do not
    compare to it as one boolean are not)."""
    if value is default:
        return True
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


def _warn_constant_labels(Y):
    """Warn of the labels of a multi-label ``Y`` (n_samples, n_labels) that take one value
    in every training sample (nothing in the data tells their values apart), as
    scikit-learn's ``OneVsRestClassifier`` warns."""
    constant = np.flatnonzero(Y.min(axis=0) == Y.max(axis=0)) if Y.shape[0] else []
    if len(constant):
        values = Y[0, constant].tolist()
        listed = ", ".join(f"label {k} always {v}" for k, v in zip(constant[:10], values))
        warn_user(f"{len(constant)} label(s) take one value in every training sample "
                  f"({listed}{' and more' if len(constant) > 10 else ''}).", UserWarning)


class BaseStructuredClassifier(InputMixin, PredictionMixin, ClassifierMixin, BaseEstimator):
    """Common base of sklstruct's learners.

    Input forms accepted by ``fit``, ``predict``, ``score`` and the other methods:

    - a list of per-sequence feature matrices (numpy 2-D or scipy.sparse, one row per token)
      with ``y`` a list of 1-D label arrays;
    - a flat ``X`` of shape (n_tokens, n_features) with ``lengths=`` (or per-token
      ``sequence_ids=``, the form that survives cross-validation's row indexing) and a flat
      ``y``;
    - a plain 2-D ``X`` with 1-D ``y`` and neither ``lengths`` nor ``sequence_ids``: multiclass
      classification (with ``structure="auto"``; a chain structure refuses it, and a model
      fitted on sequences refuses a flat ``X`` without lengths at prediction);
    - a list of images, 3-D arrays (n_rows, n_cols, n_features), with ``y`` a list of 2-D label
      masks: pixel grids (``structure="auto"`` gives :class:`~sklstruct.GridStructure`);
    - a list of volumes, 4-D arrays (n_slices, n_rows, n_cols, n_features), with ``y`` a list
      of 3-D label masks: voxel grids (``structure="auto"`` gives
      :class:`~sklstruct.Grid3DStructure`).

    Outputs follow the input form.

    With ``structure=MultiClass()`` the estimator is a drop-in for
    :class:`~sklearn.svm.LinearSVC` (``multi_class="crammer_singer"``, the same ``C``; for two
    classes ``LinearSVC(loss="hinge")`` at twice this ``C``): with ``fit_intercept`` a
    constant feature of value 1 is appended to every sample (its weights, regularised like the
    others, are ``intercept_``), ``coef_`` has shape (1, n_features) for two classes, and
    ``predict_proba`` gives the (temperature-scaled) softmax of the class scores.

    scikit-learn stratifies the integer ``cv`` folds of classifiers by their labels, which
    sequence labels cannot be; so the estimators declare themselves classifiers to
    scikit-learn (:func:`~sklearn.base.is_classifier`) only with ``structure=MultiClass()``,
    and ``GridSearchCV(cv=3)`` and ``cross_validate`` then take plain (unstratified) folds of
    sequences whatever form ``y`` has (lists of lists of str included). Pass
    ``structure=MultiClass()`` for stratified folds of plain multiclass data.

    A fit runs on a staged copy of the estimator whose fitted attributes replace the
    estimator's own only when the fit completes: a fit that fails or is interrupted leaves the
    estimator's fitted attributes as they were (a ``warm_start`` fit that fails drops the dual
    state it was continuing, which its passes changed: the next fit starts afresh).
    """

    _parameter_constraints = {
        "structure": [StrOptions({"auto"}), BaseStructure],
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        # scikit-learn's convention: None (one, unless in a joblib context), a positive
        # count, or -1, -2, ... (all processors, all but one, ...); 0 has no meaning
        "n_jobs": [Interval(numbers.Integral, None, -1, closed="right"),
                   Interval(numbers.Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
        "callback": [callable, None],
        "max_time": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "fit_intercept": ["boolean"],
    }

    # whether the learner keeps the weights a structure constrains (``nonnegative_``) feasible
    _keeps_nonnegative_weights = False
    # whether the learner reads every loss it needs off loss_augmented_decode, so that it
    # trains structures whose loss does not decompose over tokens (``loss_decomposes``)
    _takes_oracle_losses = False
    # whether the learner trains on the structure's marginals (the exp-oracle)
    _trains_on_marginals = False

    def _rescale(self):
        """The rescaling of the structured hinge used by :meth:`objective`."""
        return getattr(self, "rescale", "margin")

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Sequences (list form), flat tokens with ``lengths``, plain samples (multiclass),
            a list of images (n_rows, n_cols, n_features) or a list of volumes (n_slices,
            n_rows, n_cols, n_features).
        y : list of array-like, or array-like of shape (n_tokens,)
            Labels in the form of ``X`` (2-D masks for images, 3-D masks for volumes); a
            sequence's labels may be any 1-D array-like, e.g. a list of str.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
            Per-sequence weights ``s_i``: the objective's hinge terms become
            ``C sum_i s_i H_i(w)``, so that an integer weight equals repeating the sequence
            (the class's Notes say how its solver takes them). Sequences of weight 0 take no
            part in the optimisation. One weight per token (per row of a flat ``X``, so that
            cross-validation can index them as it indexes ``sequence_ids``) is taken when the
            tokens of each sequence share it; :meth:`score` takes either form.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, lengths, sample_weight, sequence_ids)

    def _fit(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """Fit on a staged copy; its fitted attributes replace ours only at the end."""
        staged = object.__new__(type(self))
        # parameters and the warm-start state carry over; fitted attributes ("_" suffix) do not
        staged.__dict__.update({k: v for k, v in vars(self).items() if not k.endswith("_")})
        try:
            staged._fit_staged(X, y, lengths, sample_weight, sequence_ids)
        except BaseException:
            if staged.__dict__.get("_warm_state_taken"):
                # its passes changed the previous fit's dual state in place: it no longer
                # matches the fitted attributes kept here, so the next fit starts afresh
                self.__dict__.pop("_dual_state", None)
            raise
        staged.__dict__.pop("_warm_state_taken", None)
        self.__dict__ = staged.__dict__
        return self

    def _fit_staged(self, X, y, lengths, sample_weight, sequence_ids):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        batch, y_flat, form = self._validate_input(X, y, lengths, reset=True,
                                                   sequence_ids=sequence_ids)
        if form == "multilabel":  # an indicator matrix: the states are always 0 and 1
            # (predictions in y's dtype: bool, integer or float)
            classes, Y = np.array([0, 1]).astype(y_flat.dtype), y_flat.astype(np.intp)
            _warn_constant_labels(Y.reshape(batch.n_sequences, -1))
        else:
            y_flat = column_or_1d(y_flat, warn=True) if form in ("flat", "multiclass") \
                else y_flat
            classes, Y = encode_targets(y_flat)
        y_flat = None  # (not kept through the fit: Y encodes it)
        self._bind_structure(form, batch.X.shape[1], classes, Y)
        self.structure_ = self.structure_.bind_batch(batch, Y)
        if form == "multilabel":
            # scikit-learn's multi-label classifiers (OneVsRestClassifier, MLPClassifier)
            # number the labels in classes_, one per column of predict_proba, which
            # cross_val_predict relies on; the states' values (0 and 1 in y's dtype) are kept
            self._indicator_values_ = classes
            self.classes_ = np.arange(self.structure_.n_labels_)
            # (predict returns a sparse y's form, as OneVsRestClassifier does)
            self._sparse_indicator_ = sp.issparse(y)
        # (a multi-label sample's labels are its "tokens": its weights are per sample)
        weights = check_sequence_weights(sample_weight, batch.n_sequences,
                                         lengths=None if form == "multilabel"
                                         else batch.lengths)
        if not np.isfinite(float(self.C) * float(weights.max())):
            raise ValueError(f"C * sample_weight overflows double precision (C={self.C}, "
                             f"largest weight {float(weights.max()):.3g}); lower C or the "
                             "weights.")
        if float(weights.max()) > 1.0:
            # (squares such as (C s_i ||x||)^2 must stay finite in the learners' sums: weights
            # may not raise C * |x| beyond 1e150, where C alone does not)
            data = batch.csr_arrays[2]
            scale = float(self.C) * max(1.0, float(np.abs(data).max()) if data.size else 0.0)
            if scale * float(weights.max()) > max(1e150, scale):
                raise ValueError(
                    f"C * sample_weight overflows double precision in the fit's sums (C="
                    f"{self.C}, largest weight {float(weights.max()):.3g}, times the largest "
                    "feature magnitude: above 1e150); lower C or the weights.")
        self._check_oracle_exactness(batch, weights)
        if self._trains_on_marginals and hasattr(self.structure_,
                                                 "check_learnable_by_marginals"):
            self.structure_.check_learnable_by_marginals(batch, Y, weights)
        self._check_user_token_loss(Y)
        self.w_ = self._fit_batch(batch, Y, weights)
        primal = getattr(self, "history_", {}).get("primal")
        if not np.all(np.isfinite(self.w_)) or (
                primal is not None and len(primal) and not np.isfinite(primal[-1])):
            # (e.g. features near the largest double, or a huge C * sample_weight)
            largest = float(abs(batch.X).max()) if batch.X.shape[0] else 0.0
            raise ValueError(f"{type(self).__name__} produced non-finite weights or "
                             f"objective: the features (largest magnitude {largest:.3g}) "
                             "or C * sample_weight (largest "
                             f"{float(self.C) * float(weights.max()):.3g}) "
                             "overflow double precision in its sums; scale the features "
                             "(e.g. StandardScaler or MaxAbsScaler) or lower C or the "
                             "weights.")
        self.temperature_ = 1.0
        if self.n_inexact_examples_:
            self._certify_with_bounds(batch, Y, weights)

    def _certify_with_bounds(self, batch, Y, weights):
        """With an approximate max-oracle, ``inexact_gap_bound_``: the last dual value
        subtracted from an upper bound on the true primal objective, ``1/2 ||w||^2 + C sum_i
        s_i max(0, U_i - score(y_i))`` with ``U_i`` the oracle's certified upper bound on
        the loss-augmented maximum (TRW-S's dual bound). The dual value of the learner's
        iterate stays a lower bound on the optimum (its labellings are real ones), so this
        is a true, if loose, certificate; ``None`` when the structure gives no such bounds
        or the learner keeps no dual value."""
        self.inexact_gap_bound_ = None
        dual = getattr(self, "history_", {}).get("dual")
        bounds_of = getattr(self.structure_, "hinge_upper_bounds", None)
        if bounds_of is None or dual is None or len(dual) == 0 or \
                self._rescale() != "margin":
            return
        unary, pairwise = self._potentials(batch)
        hinge = bounds_of(batch, unary, pairwise, Y, n_jobs=self.n_jobs)
        upper = self._regularizer() + float(self.C) * float(weights @ hinge)
        gap = upper - float(dual[-1])
        self.inexact_gap_bound_ = max(gap, 0.0) if np.isfinite(gap) else None

    def _check_user_token_loss(self, Y):
        """Check a ``token_loss`` written outside the library (:func:`checked_token_loss`)
        once, before the fit: some oracles take it from the structure at every call
        without checks of their own."""
        structure = self.structure_
        method = getattr(type(structure), "token_loss", None)
        if structure.loss_decomposes and method is not None and \
                not (getattr(method, "__module__", None) or "").startswith("sklstruct."):
            checked_token_loss(structure, Y)

    def _check_oracle_exactness(self, batch, weights):
        """Warn when the structure's max-oracle may be inexact on training examples of
        positive weight (those of weight 0 take no part in the fit) and record their number
        in ``n_inexact_examples_``.

        With an approximate (under-generating) max-oracle, e.g. TRW-S on graphs with cycles,
        the most violated labellings may be missed: the duality gap the learner computes
        from the oracle's labellings then bounds nothing (Finley and Joachims 2008, "Training
        structural SVMs when exact inference is intractable", section 4), and the fit may
        stop early or at a model whose true objective is larger than reported. Where the
        structure bounds the hinge losses from above (:meth:`_certify_with_bounds`), the fit
        also records a true, looser certificate in ``inexact_gap_bound_``.
        """
        inexact = np.asarray(self.structure_.inexact_examples(batch), dtype=np.intp)
        inexact = inexact[weights[inexact] > 0]
        self.n_inexact_examples_ = int(inexact.shape[0])
        if inexact.shape[0] and self._trains_on_marginals \
                and hasattr(self.structure_, "check_marginals"):
            # (a refusal to train comes before a warning about the certificate)
            self.structure_.check_marginals(batch.select(np.flatnonzero(weights > 0))[0])
        if inexact.shape[0]:
            warn_user(
                f"{type(self.structure_).__name__}'s max-oracle may be approximate on "
                f"{inexact.shape[0]} of {batch.n_sequences} training examples (e.g. example "
                f"{int(inexact[0])}: a graph with cycles, beyond enumeration, solved by "
                "TRW-S): the duality gap reported in history_ is then not a certificate of "
                "optimality (Finley and Joachims 2008).", UserWarning)

    def _bind_structure(self, form, n_features, classes, Y):
        """Set ``classes_`` and ``structure_``, the structure bound to the data: the part of
        a fit's preparation that local and sharded fits share. ``Y`` (the encoded labels,
        or labels with the right counts) serves ``class_weight="balanced"``."""
        self.classes_ = classes
        structure = self._resolve_structure(form)
        self.structure_ = structure.bind(n_features, classes.shape[0], classes, Y)
        if len(self.structure_.nonnegative_) and not self._keeps_nonnegative_weights:
            raise ValueError(
                f"{type(structure).__name__} constrains weights to be non-negative, which "
                f"{type(self).__name__} does not support; use M3NSimplicialDecomposition."
            )
        if not self.structure_.loss_decomposes and not self._takes_oracle_losses:
            raise ValueError(
                f"The loss of {type(structure).__name__} does not decompose over tokens, "
                f"which {type(self).__name__} needs (its marginals or per-token losses); "
                "use StructSVMCuttingPlane."
            )

    def _resolve_structure(self, form):
        """The structure parameter, or for ``"auto"`` the default of the input form."""
        return structure_for_form(form) if self.structure == "auto" else self.structure

    @abstractmethod
    def _fit_batch(self, batch, Y, sample_weight):
        """Optimise on a validated batch with encoded labels; return the flat weights.

        ``self.structure_`` is bound; the learner calls its solver with the data and its
        settings, records the fit's progress through a :meth:`_certificate` and sets its
        other fitted attributes (``history_``, ``n_iter_``...) on ``self``.
        """

    def _progress_label(self):
        """The name of this estimator in its warnings and verbose lines: its class, or the
        role a parser gave it (``"DependencyParser's arc M3NSimplicialDecomposition"``)."""
        return self.__dict__.get("_progress_name", type(self).__name__)

    def _certificate(self, unit="pass", extra_fields=(), max_iter=None):
        """The progress record of a fit with this estimator's stopping settings, verbosity and
        callback; ``max_iter`` overrides the parameter (a learner whose default budget depends
        on its solver). (A preliminary inner fit, such as ``L1M3N``'s default radius, builds
        its own record, without the callback and the printing.)"""
        return Certificate(self._progress_label(), tol=self.tol,
                           max_iter=self.max_iter if max_iter is None else max_iter,
                           max_time=getattr(self, "max_time", None), verbose=self.verbose,
                           callback=getattr(self, "callback", None), model_at=self._model_at,
                           unit=unit, extra_fields=extra_fields)

    def _model_at(self, w, attributes):
        """A fitted copy of this (staged) estimator with weights ``w`` and the fitted
        ``attributes``: the callback's model, on which ``predict``, ``score`` and
        ``objective`` work as if the fit had stopped there."""
        model = object.__new__(type(self))
        model.__dict__ = dict(self.__dict__)
        if w is not None:
            model.__dict__.update(attributes, w_=w, temperature_=1.0)
        return model

    def _record(self, certificate):
        """Store a finished fit's history and iteration count."""
        self.history_ = certificate.history()
        self.n_iter_ = certificate.n_iter

    # ------------------------------------------------------------------ parameters
    def _warn_unused_parameters(self, names, setting):
        """Warn of the parameters among ``names`` set away from their defaults, which
        ``setting`` (e.g. ``"solver='em'"``) does not read, as scikit-learn's
        ``LogisticRegression`` warns of an ``l1_ratio`` without the elastic-net penalty."""
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [name for name in names
                   if not _is_default(getattr(self, name), defaults[name].default)]
        if changed:
            listed = ", ".join(f"{name}={getattr(self, name)!r}" for name in changed)
            verb = "it is" if len(changed) == 1 else "they are"
            warn_user(f"{type(self).__name__}({setting}) does not use {listed}; {verb} "
                      "ignored.", UserWarning)

    # ------------------------------------------------------------------ warm starts
    def _warm_state(self, settings, batch, Y):
        """The dual state of the previous fit if ``warm_start`` is set and it was made on the
        same data (compared by a digest of ``X``, ``y`` and the bound structure) with the same
        ``settings``; else ``None``."""
        if not getattr(self, "warm_start", False):
            return None
        previous = getattr(self, "_dual_state", None)
        if previous is None or previous[0] != (settings, _digest(batch, Y, self.structure_)):
            return None
        self._warm_state_taken = True
        return previous[1]

    def _keep_warm_state(self, settings, batch, Y, state):
        """Keep ``state`` for a later warm start when this fit has ``warm_start`` set (in this
        process: it is not pickled); without, drop any (it holds several times the data)."""
        if not getattr(self, "warm_start", False):
            self.__dict__.pop("_dual_state", None)
            return
        self._dual_state = ((settings, _digest(batch, Y, self.structure_)), state)

    def __getstate__(self):
        # the dual state holds the training data; a pickled model is its fitted parameters
        state = dict(super().__getstate__())
        state.pop("_dual_state", None)
        return state

    # ------------------------------------------------------------------ fitted parameters
    def _fitted_view(self):
        """This estimator as one fit left it, for the length of a call.

        A fit replaces the estimator's ``__dict__`` as a whole when it completes, so a view
        that holds the current dict reads every fitted attribute (``w_``, ``structure_``,
        ``classes_``...) from the same fit even while another thread refits the estimator.
        """
        check_is_fitted(self)
        view = object.__new__(type(self))
        view.__dict__ = self.__dict__
        return view

    def _unary_weights(self):
        """Per-class weights on the token features and the intercepts (zeros without)."""
        weights = self.structure_.split_weights(self.w_)[0].T
        if getattr(self, "_with_intercept", False):
            return weights[:, :-1], weights[:, -1].copy()
        return weights, np.zeros(weights.shape[0])

    def _multilabel(self):
        return getattr(self.structure_, "input_form", None) == "multilabel"

    def _label_weights(self):
        """Per-label weights of label 1 over 0 on the features, (n_labels, n_features), and
        intercepts (n_labels,) (zeros without ``fit_intercept``) of a multi-label model: its
        unary block holds one block of features per label."""
        difference = np.diff(self.structure_.split_weights(self.w_)[0], axis=1)[:, 0]
        per_label = difference.reshape(self.structure_.n_labels_, -1)
        if getattr(self, "_with_intercept", False):
            return per_label[:, :-1], per_label[:, -1].copy()
        return per_label, np.zeros(per_label.shape[0])

    def _binary_multiclass(self):
        return self.structure_.one_token_per_example and self._state_labels().shape[0] == 2

    def _state_labels(self):
        """The label of each state: ``classes_``, except for multi-label models, whose
        ``classes_`` numbers the labels and whose states are the values 0 and 1 (in the
        dtype of the ``y`` they were fitted on)."""
        return self.__dict__.get("_indicator_values_", self.classes_)

    @property
    def coef_(self):
        """Per-class weights on token features, shape (n_classes, n_features).

        For two classes in the multiclass form, as ``LinearSVC``: the weights of class 1 minus
        those of class 0, shape (1, n_features). For multi-label models, per label the weights
        of 1 minus those of 0, shape (n_labels, n_features).
        """
        model = self._fitted_view()
        if model._multilabel():
            return model._label_weights()[0]
        weights, _ = model._unary_weights()
        if model._binary_multiclass():
            return (weights[1] - weights[0])[None, :]
        return weights

    @property
    def intercept_(self):
        """Per-class intercepts of the multiclass form, shape (n_classes,) (for two classes
        ``(1,)``: class 1's minus class 0's; per label for multi-label models, shape
        (n_labels,)); zeros without ``fit_intercept``. Sequence models
        have ``start_`` and ``end_`` biases and ``transition_`` scores instead."""
        model = self._fitted_view()
        if model._multilabel():
            return model._label_weights()[1]
        if not model.structure_.one_token_per_example:
            raise AttributeError("intercept_ exists only for the multiclass form; chains have "
                                 "start_, end_ and transition_.")
        _, intercept = model._unary_weights()
        if model._binary_multiclass():
            return np.array([intercept[1] - intercept[0]])
        return intercept

    def _named_parameter(self, name):
        """A named part of the pairwise weights (the structure's ``named_parameters``)."""
        model = self._fitted_view()
        pairwise = model.structure_.split_weights(model.w_)[1]
        parameters = model.structure_.named_parameters(pairwise)
        if name not in parameters:
            raise AttributeError(f"{name} exists only for structures that have it "
                                 f"({type(model.structure_).__name__} has "
                                 f"{sorted(parameters) or 'none'}).")
        return parameters[name]

    @property
    def transition_(self):
        """Transition scores ``T[a, b]`` of a chain model, shape (n_classes, n_classes)."""
        return self._named_parameter("transition_")

    @property
    def start_(self):
        """Scores of each label at the start of a sequence, shape (n_classes,) (chains with
        ``start_end=True``)."""
        return self._named_parameter("start_")

    @property
    def end_(self):
        """Scores of each label at the end of a sequence, shape (n_classes,) (chains with
        ``start_end=True``)."""
        return self._named_parameter("end_")

    @property
    def pairwise_(self):
        """Interaction matrices of a graph or multi-label model: one state x state matrix
        per edge feature (graphs) or per label pair (multi-label), shape (n, n_classes,
        n_classes)."""
        return self._named_parameter("pairwise_")

    # ------------------------------------------------------------------ objective
    def _weight_norm_sq(self):
        """``||w||^2`` of the fitted model."""
        return float(self.w_ @ self.w_)

    def _regularizer(self):
        """The regulariser of the objective at the fitted weights (``1/2 ||w||^2``)."""
        return 0.5 * self._weight_norm_sq()

    def _structured_hinge(self, batch, Y, unary, pairwise, rescale, token_loss=None):
        """Per-sequence hinge losses, most violating labellings and their losses
        (:func:`~sklstruct.structures._base.structured_hinge` on the fitted structure)."""
        return structured_hinge(self.structure_, batch, Y, unary, pairwise, rescale,
                                self.n_jobs, token_loss)

    def objective(self, X, y, lengths=None, sample_weight=None, sequence_ids=None):
        """The training objective at the fitted weights.

        ``1/2 ||w||^2 + C sum_i s_i H_i(w)`` (``L1M3N``: ``1/2 ||w||_1 + ...``) with ``H_i``
        the structured hinge loss of the learner's rescaling and ``s_i`` the sequence weights.
        ``H_i`` maximises over the labellings with the structure's max-oracle: where that is
        approximate (graphs with cycles beyond enumeration, decoded by TRW-S), the value is
        a lower bound on the objective, as the fit's ``history_`` is (see
        ``inexact_gap_bound_``).

        Parameters
        ----------
        X : list of array-like or sparse matrices, or array-like of shape (n_tokens, n_features)
            Input in any form accepted by :meth:`predict`.
        y : list of array-like, or array-like of shape (n_tokens,)
            True labels, in the form of ``X``; every label must have been seen in fit.
        lengths : array-like of shape (n_sequences,), default=None
            Sequence lengths when ``X`` is flat.
        sample_weight : array-like of shape (n_sequences,) or (n_tokens,), default=None
            Per-sequence weights ``s_i`` (ones by default); per token (a flat ``X``'s rows),
            the same for the tokens of a sequence.
        sequence_ids : array-like of shape (n_tokens,), default=None
            Instead of ``lengths``: one identifier per row of a flat ``X``, the same for the
            consecutive tokens of a sequence (:func:`~sklstruct.utils.lengths_to_groups`
            gives them). Unlike ``lengths`` they can be indexed by rows, so they pass through
            cross-validation (as ``groups`` of :class:`~sklearn.model_selection.GroupKFold`
            and, with metadata routing, as a fit and score parameter).

        Returns
        -------
        objective : float
        """
        model = self._fitted_view()
        batch, y_flat, form = model._validate_input(X, y, lengths, reset=False,
                                                    sequence_ids=sequence_ids)
        Y = model._encode_known(np.asarray(y_flat))
        weights = check_sequence_weights(sample_weight, batch.n_sequences,
                                         lengths=None if form == "multilabel"
                                         else batch.lengths)
        hinge, _, _ = model._structured_hinge(batch, Y, *model._potentials(batch),
                                              model._rescale())
        return model._regularizer() + model.C * float(weights @ hinge)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        if self.structure == "auto" or not self.structure.one_token_per_example:
            # folds of sequences cannot be stratified (see the class docstring)
            tags.estimator_type = None
        if isinstance(self.structure, MultiLabelStructure):  # (y an indicator matrix)
            tags.target_tags.multi_output = True
            tags.classifier_tags.multi_label = True
        return tags


def _digest(batch, Y, structure):
    """Digest of the training data and the bound structure (a warm start needs both equal)."""
    digest = hashlib.blake2b(digest_size=16)
    X = batch.X
    arrays = (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)
    # (the arrays' buffers, not bytes copies of them: the data is not held twice)
    for array in arrays + (batch.offsets, Y):
        _update(digest, array)
    for name, extra in sorted((batch.extras or {}).items()):
        digest.update(name.encode())
        _update(digest, extra.data)
        _update(digest, extra.offsets)
    digest.update(repr(sorted(structure.get_params().items())).encode())
    digest.update(repr(structure.loss_weights_.tolist()).encode())
    return digest.hexdigest()


def _update(digest, array):
    """Feed an array's shape, dtype and bytes to ``digest``: the bytes from the contiguous
    array's own memory, no copy (an empty array, such as graphs' edges when there is none,
    gives its shape and dtype alone)."""
    array = np.ascontiguousarray(array)
    digest.update(repr((array.shape, array.dtype.str)).encode())
    digest.update(array.reshape(-1).view(np.uint8))
