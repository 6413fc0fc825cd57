"""A max-margin dependency parser: arc features, a tree structure and any sklstruct learner."""

import numpy as np
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from .._inference.dependency import check_heads
from ..structures import DependencyTree
from ..utils._sequences import check_label_kinds, label_kinds
from ._arc_features import ArcFeatures
from ._dependency_targets import split_trees
from ._metrics import attachment_scores
from ._parts import PartsParser, check_sentences, weighted_sentences


def _relation_labels(relations):
    """The relations of all tokens (an object array) as an array of their own kind: strings,
    numbers or bools, never mixed (as an estimator's labels)."""
    kinds = label_kinds(relations)
    check_label_kinds(kinds)
    if relations.size and not kinds <= {"str", "number", "bool"}:
        raise TypeError(f"relations must be strings or numbers; got {', '.join(kinds)}.")
    return np.asarray(relations.tolist())


class DependencyParser(PartsParser):
    """First-order max-margin dependency parser (McDonald, Crammer and Pereira 2005).

    The parser scores a tree as the sum of its arcs' scores, each a linear function of the
    arc's features (:class:`ArcFeatures`), and predicts the best projective tree (Eisner's
    algorithm) or the best tree (Chu-Liu-Edmonds). Its weights minimise the objective every
    sklstruct learner minimises,

        1/2 ||w||^2 + C sum_i max_ybar [Delta(y_i, ybar) + w . Psi(x_i, ybar)
                                        - w . Psi(x_i, y_i)],

    with ``Delta`` the number of wrongly attached tokens (and, with ``relations="joint"``, of
    wrongly labelled ones): the structured SVM / max-margin Markov network of a
    :class:`~sklstruct.structures.DependencyTree`, trained by ``learner`` (any sklstruct
    estimator) at the parser's ``C``, the parameter to tune.

    Relations (dependency labels), when ``y`` holds them: ``"separate"`` (default) trains a
    second model of the same learner, a multiclass one on the features of the gold arcs,
    and labels the predicted arcs with it (the second stage of McDonald, Lerman and Pereira
    2006); ``"joint"`` gives every relation its own state of the arcs, so that heads and
    relations are decoded together and ``Delta`` counts both (LAS errors); its weights are
    ``n_relations + 1`` times those of the unlabelled model.

    Parameters
    ----------
    C : float, default=0.01
        Weight of the loss term of the objective, given to the learner (its own ``C`` is
        not used). The default was the best of 0.001-1 on held-out parts of the Basque
        (CoNLL-2007) and English (Penn Treebank sample) training sets with
        :class:`ArcFeatures`; the loss counts tokens and every token has ``n`` candidate
        arcs of many features, so the best ``C`` is smaller than for sequence labelling.
    learner : sklstruct estimator, default=None
        The learner, cloned at fit with its ``C`` and ``structure`` set;
        ``M3NSimplicialDecomposition()`` by default. Its stopping settings (``tol``,
        ``max_iter``, ``max_time``, ``callback``) apply to each of its fits: the arcs', then
        the relations' with ``relations="separate"``; the feature extraction before them is
        not counted in ``max_time``.
    features : transformer, default=None
        Turns the sentences into the features of their candidate arcs: ``fit(X, y)`` and
        ``transform_flat(X) -> (csr_matrix, n_rows)`` as :class:`ArcFeatures` has them, which
        is the default (``ArcFeatures()``).
    projective : bool, default=True
        Predict projective trees only (Eisner, O(n^3)) or any tree (Chu-Liu-Edmonds,
        O(n^2)). Training trees need not be projective either way.
    single_root : bool, default=False
        Attach exactly one token to the root (training trees must then have one).
    relations : {"separate", "joint"}, default="separate"
        How relations are learnt when ``y`` has them (see above).
    random_state : int, RandomState instance or None, default=None
        Set on the learner (and the relation learner) when not None, for reproducible fits;
        None leaves the learner's own (the default learner's is None).

    Attributes
    ----------
    features_ : transformer
        The fitted arc features.
    learner_ : sklstruct estimator
        The fitted tree model.
    relation_learner_ : sklstruct estimator or None
        The fitted relation model (``relations="separate"`` with relations of at least two
        kinds in ``y``; a treebank of one relation gets it on every arc).
    relations_ : ndarray or None
        The relations seen at fit, sorted, as given (strings or numbers; predictions return
        them as they are); None when ``y`` had heads only.

    Examples
    --------
    >>> from sklstruct.parsing import DependencyParser
    >>> sentences = [[{"form": "dogs", "postag": "NNS"}, {"form": "bark", "postag": "VBP"}],
    ...              [{"form": "cats", "postag": "NNS"}, {"form": "sleep", "postag": "VBP"}]]
    >>> trees = [[2, 0], [2, 0]]
    >>> parser = DependencyParser().fit(sentences, trees)
    >>> parser.predict([[{"form": "birds", "postag": "NNS"}, {"form": "sing", "postag": "VBP"}]])
    [array([2, 0])]
    """

    _parameter_constraints = {
        **PartsParser._parameter_constraints,
        "projective": ["boolean"],
        "single_root": ["boolean"],
        "relations": [StrOptions({"separate", "joint"})],
    }

    def __init__(self, C=0.01, *, learner=None, features=None, projective=True,
                 single_root=False, relations="separate", random_state=None):
        self.C = C
        self.learner = learner
        self.features = features
        self.projective = projective
        self.single_root = single_root
        self.relations = relations
        self.random_state = random_state

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _lengths(X):
        return np.array([len(sentence) for sentence in check_sentences(X)], dtype=np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.dict = True  # (sentences of token dicts)
        return tags

    def _structure(self):
        return DependencyTree(projective=self.projective, single_root=self.single_root)

    def _check_trees(self, X, y, single_root=None):
        """Raise the ``ValueError`` of a sentence without a tree of its words in ``y``."""
        lengths = self._lengths(X)
        heads, _ = split_trees(y, lengths=lengths)
        all_heads = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
        check_heads(all_heads, lengths,
                    single_root=self.single_root if single_root is None else single_root)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, sample_weight=None):
        """Train the parser.

        Parameters
        ----------
        X : list of list of dict
            Sentences, one dict of columns per token (as
            :func:`~sklstruct.parsing.read_conll` gives them).
        y : list
            Per sentence, its heads (1-based, 0 for the root) or a pair ``(heads,
            relations)``.
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, the learner's ``sample_weight`` (an integer weight
            equals repeating the sentence): its tree's hinge loss counts with it, and so
            do its arcs in the relation classifier (``relations="separate"``). Sentences of
            weight 0 are left out (their features and relations too); the feature
            extractor reads the others unweighted.

        Returns
        -------
        self : DependencyParser
        """
        self._validate_params()
        self._warn_unused_learner_C()
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None (y: the trees of the sentences).")
        X, y, weights = weighted_sentences(check_sentences(X), y, sample_weight,
                                           check=self._check_trees)
        lengths = self._lengths(X)
        heads, relations = split_trees(y, lengths=lengths)
        if np.any(lengths == 0):
            raise ValueError(f"sentence {int(np.flatnonzero(lengths == 0)[0])} is empty; "
                             "training sentences need at least one token.")
        if lengths.shape[0] == 0:
            raise ValueError("X has no sentences.")
        all_heads = np.concatenate(heads)
        check_heads(all_heads, lengths, single_root=self.single_root)
        states = relation_names = None
        if relations is not None:
            relation_names, relation_codes = np.unique(
                _relation_labels(np.concatenate(relations)), return_inverse=True)
            if self.relations == "joint":
                states = relation_codes + 1
        features, rows, n_rows = self._fit_features(ArcFeatures(), X, y)
        arcs = DependencyTree.arc_index(lengths, all_heads)
        if arcs.shape[0] == rows.shape[0]:
            raise ValueError("every candidate arc of the training sentences is in their "
                             "trees (one-token sentences only): the parser has nothing to "
                             "learn; train on sentences of two tokens or more.")
        labels = np.zeros(rows.shape[0], dtype=np.int64)
        labels[arcs] = 1 if states is None else states
        learner = self._fit_parts(rows, labels, n_rows, self._structure(), weights, "arc")
        relation_learner = None
        if relations is not None and self.relations == "separate" \
                and relation_names.shape[0] > 1:
            relation_learner = self._learner_for("auto", "relation")
            relation_learner.fit(rows[arcs], relation_names[relation_codes],
                                 **({} if weights is None else
                                    {"sample_weight": np.repeat(weights, lengths)}))
        self.relations_ = relation_names
        self.features_ = features
        self.learner_ = learner
        self.relation_learner_ = relation_learner
        return self

    def objective(self, X, y, sample_weight=None):
        """The tree learner's training objective at the fitted weights on sentences and
        trees (the relation classifier of ``relations="separate"`` has its own:
        ``relation_learner_.objective``).

        Parameters
        ----------
        X : list of list of dict
        y : list
            Per sentence, its heads or a pair ``(heads, relations)`` (the relations are
            needed with ``relations="joint"``, and must be among ``relations_``).
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, as in :meth:`fit` (sentences of weight 0 are left
            out).

        Returns
        -------
        objective : float
        """
        check_is_fitted(self, "learner_")
        single_root = self.learner_.structure_.single_root
        X, y, weights = weighted_sentences(
            check_sentences(X), y, sample_weight,
            check=lambda X, y: self._check_trees(X, y, single_root))
        lengths = self._lengths(X)
        heads, relations = split_trees(y, lengths=lengths)
        all_heads = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
        # (the fitted model's settings, not the parameters: set_params after fit changes
        # nothing until the next fit)
        check_heads(all_heads, lengths, single_root=single_root)
        states = None
        if self.relation_learner_ is None and self.relations_ is not None \
                and self.relations_.shape[0] > 1:  # ("joint": relations in the arcs' states)
            if relations is None:
                raise ValueError("A parser trained with relations=\"joint\" scores trees "
                                 "with their relations: give (heads, relations) pairs.")
            names = _relation_labels(np.concatenate(relations))
            codes = np.searchsorted(self.relations_, names)
            codes = np.minimum(codes, self.relations_.shape[0] - 1)
            unknown = self.relations_[codes] != names
            if np.any(unknown):
                raise ValueError(f"relation {names[np.flatnonzero(unknown)[0]]!r} was not "
                                 "seen at fit.")
            states = codes + 1
        labels = np.zeros(int(np.sum(lengths ** 2)), dtype=np.int64)
        labels[DependencyTree.arc_index(lengths, all_heads)] = 1 if states is None else states
        rows, n_rows = self.features_.transform_flat(X)
        return self.learner_.objective(rows, labels, lengths=n_rows, sample_weight=weights)

    # ------------------------------------------------------------------ predict
    def predict(self, X):
        """Parse sentences.

        Parameters
        ----------
        X : list of list of dict

        Returns
        -------
        trees : list
            Per sentence, its heads (an int64 array; 0 is the root), or a pair ``(heads,
            relations)`` when the parser was trained with relations. An empty sentence gets
            empty arrays.
        """
        check_is_fitted(self, "learner_")
        X = check_sentences(X)
        lengths = self._lengths(X)
        present, rows, _, labels = self._decode_parts(X, lengths)
        heads = np.zeros(0, dtype=np.int64)
        relations = np.zeros(0, dtype=object)
        if present.shape[0]:
            heads, states = DependencyTree.heads_from_labels(lengths[present], labels)
            if self.relation_learner_ is not None:
                arcs = DependencyTree.arc_index(lengths[present], heads)
                relations = np.asarray(self.relation_learner_.predict(rows[arcs]), dtype=object)
            elif self.relations_ is not None:
                relations = self.relations_[states - 1].astype(object)
        # empty sentences hold no tokens, so the tokens of sentence i start at sum(lengths[:i])
        at = np.concatenate(([0], np.cumsum(lengths)))
        if self.relations_ is None:
            return [heads[at[i]:at[i + 1]] for i in range(lengths.shape[0])]
        return [(heads[at[i]:at[i + 1]], relations[at[i]:at[i + 1]])
                for i in range(lengths.shape[0])]

    def score(self, X, y, sample_weight=None):
        """Unlabelled attachment score of the predictions: the fraction of tokens (all of
        them, punctuation included, as in the CoNLL-2007 shared task) whose head is right.

        Parameters
        ----------
        X : list of list of dict
        y : list of head arrays or of (heads, relations) pairs
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, given to each of its tokens.

        Returns
        -------
        uas : float
        """
        heads_pred, _ = split_trees(self.predict(X), name="predictions")
        heads_true, _ = split_trees(y, lengths=[heads.shape[0] for heads in heads_pred])
        return attachment_scores(heads_true, heads_pred, sample_weight=sample_weight)["uas"]
