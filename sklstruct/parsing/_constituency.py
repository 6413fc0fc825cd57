"""Constituency parsers: a max-margin weighted CFG and the relative-frequency PCFG."""

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._inference import cfg as cky
from ..structures import ConstituencyTree
from ..utils._warnings import warn_user
from ._grammar import TreeGrammar, as_tree, sentence_tokens
from ._metrics import bracket_scores
from ._parts import PartsParser, check_sentences, weighted_sentences
from ._span_features import SpanFeatures
from ._transforms import expand_unary, unbinarize
from ._trees import _import_nltk, tree_to_string, tree_words

__all__ = ["ConstituencyParser", "PCFGParser"]


class _TreeParser(BaseEstimator):
    """Shared by the constituency parsers: input checks, grammar, outputs and the score."""

    _parameter_constraints = {
        "horizontal": [Interval(Integral, 0, None, closed="left"), None],
        "vertical": [Interval(Integral, 1, None, closed="left")],
        "output": [StrOptions({"tuple", "string", "nltk"})],
    }

    def _training_data(self, X, y, tree_weights=None):
        """Checked sentences ``(words, tags)`` and trees of a fit; the grammar is read from
        the trees, each counted with its weight in ``tree_weights`` when given."""
        self._validate_params()
        X = check_sentences(X)
        if not X:
            raise ValueError(f"{type(self).__name__} needs at least one sentence to fit.")
        tokens, trees = self._checked_pairs(X, y)
        self.grammar_ = TreeGrammar(trees, self.horizontal, self.vertical,
                                    weights=tree_weights)
        return X, tokens, trees

    def _checked_pairs(self, X, y):
        """``(tokens, trees)``: every sentence's ``(words, tags)`` and its tree, checked to
        span its words."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None (y: the trees of the sentences).")
        y = check_sentences(y, "y")
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sentences but y has {len(y)} trees.")
        tokens, trees = [], []
        for i, (sentence, tree) in enumerate(zip(X, y)):
            words, tags = sentence_tokens(sentence, f"X[{i}]")
            if not words:
                raise ValueError(f"X[{i}] is empty; every training sentence needs a word.")
            tree = as_tree(tree, f"y[{i}]")
            if tree_words(tree) != words:
                raise ValueError(f"y[{i}] does not span the sentence X[{i}]: its words are "
                                 f"{tree_words(tree)!r}, the sentence's {words!r}.")
            tokens.append((words, tags))
            trees.append(tree)
        return tokens, trees

    def _format(self, trees):
        """Trees in the ``output`` form (empty sentences: ``()``, ``""`` or an empty
        ``nltk.Tree``)."""
        if self.output == "tuple":
            return trees
        if self.output == "string":
            return [tree_to_string(tree) if tree else "" for tree in trees]
        nltk = _import_nltk()
        from ._trees import to_nltk
        return [to_nltk(tree) if tree else nltk.Tree("", []) for tree in trees]

    def _flat_tree(self, words, tags):
        """The fallback of a sentence without a tree of the grammar."""
        return (self.grammar_.root_label, *[(tag, word) for word, tag in zip(words, tags)])

    def predict(self, X):
        """Parse the sentences.

        Parameters
        ----------
        X : list of list of tokens
            Sentences: tokens are words (str), ``(word, tag)`` pairs or token dicts with a
            ``form`` (or ``word``) and a tag (``tag``, ``pos``, ``xpos``, ``postag``,
            ``upos`` or ``cpostag``), as in fit.

        Returns
        -------
        trees : list
            One tree per sentence in the ``output`` form: nested tuples ``(label, child,
            ...)`` with preterminals ``(tag, word)``, bracketed strings, or
            :class:`nltk.tree.Tree`. An empty sentence gives an empty prediction (``()``,
            ``""`` or an empty ``nltk.Tree``). A sentence that no tree of the grammar
            covers gets a flat tree, the training trees' most frequent root label over the
            words' preterminals, and a ``UserWarning``.
        """
        check_is_fitted(self, "grammar_")
        X = check_sentences(X)
        tokens = [sentence_tokens(sentence, f"X[{i}]") for i, sentence in enumerate(X)]
        return self._format(self._parse(X, tokens))

    def score(self, X, y, sample_weight=None):
        """Labelled-bracket F1 of the parses of ``X`` against the trees ``y`` (evalb's
        ``COLLINS.prm`` conventions, :func:`~sklstruct.parsing.bracket_scores`).

        Parameters
        ----------
        X : list of list of tokens
        y : list of tuple or str
            True trees, nested tuples or bracketed strings (``()`` or ``""`` for an empty
            sentence, as ``predict`` gives).
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, given to each of its brackets.

        Returns
        -------
        f1 : float
        """
        check_is_fitted(self, "grammar_")
        X, y = check_sentences(X), check_sentences(y, "y")
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sentences but y has {len(y)} trees.")
        tokens = [sentence_tokens(sentence, f"X[{i}]") for i, sentence in enumerate(X)]
        predicted = self._parse(X, tokens)
        return bracket_scores([as_tree(tree, f"y[{i}]", allow_empty=True)
                               for i, tree in enumerate(y)],
                              predicted, sample_weight=sample_weight)["f1"]

    def _warn_fallbacks(self, count):
        if count:
            warn_user(f"{count} sentence(s) have no tree of the grammar read at fit; "
                      "they get flat trees.", UserWarning)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.target_tags.required = True
        return tags


class ConstituencyParser(PartsParser, _TreeParser):
    """Max-margin constituency parser: a weighted CFG trained by any sklstruct learner.

    The grammar is read from the training trees: they are binarised (right-factored, with
    ``horizontal`` and ``vertical`` markovisation, :func:`~sklstruct.parsing.binarize`) and
    their unary chains collapsed (:func:`~sklstruct.parsing.collapse_unary`); the labels,
    the root labels and the binary rules they use make the grammar. The model is the
    :class:`~sklstruct.structures.ConstituencyTree` structure over the spans of each sentence:
    one weight per rule (the rule counts of Joachims, Finley and Yu's ``Psi_CFG``), label
    weights on span features and preterminal weights on word features
    (:class:`~sklstruct.parsing.SpanFeatures`), so that the score of a tree is a sum over its
    labelled spans and rules. ``fit`` builds one row per span of every sentence and trains a
    clone of ``learner`` on them; ``predict`` runs CKY (``O(n^3 |rules| + n^2 |labels|)`` per
    sentence of ``n`` words) and undoes the transforms.

    Parameters
    ----------
    C : float, default=1.0
        Weight of the loss term of the objective, given to the learner (its own ``C`` is
        not used): the parameter to tune, as for
        :class:`~sklstruct.parsing.DependencyParser`. The default was the best of 0.1-10
        with :class:`SpanFeatures` and the bracket loss on files wsj_0140-0159 of the Penn
        Treebank sample (training on wsj_0001-0139, sentences of at most 15 words).
    learner : sklstruct estimator, default=None
        The learner, cloned at fit with its ``C`` and ``structure`` set (to the grammar's
        :class:`~sklstruct.structures.ConstituencyTree`);
        ``M3NSimplicialDecomposition()`` by default. Its ``max_time`` does not count the
        feature extraction before its fit.
    features : transformer, default=None
        Turns the sentences into the features of their spans: ``fit(X, y)`` and
        ``transform_flat(X) -> (csr_matrix, n_rows)`` as :class:`SpanFeatures` has them,
        which is the default (``SpanFeatures()``).
    horizontal : int or None, default=1
        Horizontal markovisation of the binarisation (previous siblings named in
        intermediate labels; None: all).
    vertical : int, default=1
        Vertical markovisation (1: none, 2: parent annotation).
    loss : {"brackets", "zero_one"}, default="brackets"
        ``"brackets"``: the number of labelled brackets in one of the true and predicted
        trees only (false positives plus false negatives, labelled-bracket F1's
        complement), over the spans of the binarised trees. ``"zero_one"``: 1 for any
        other tree, the loss of Joachims et al. (2009, section 5), which only
        :class:`~sklstruct.StructSVMCuttingPlane` trains.
    output : {"tuple", "string", "nltk"}, default="tuple"
        Form of the predicted trees: nested tuples, bracketed strings or
        :class:`nltk.tree.Tree` (nltk is needed only then). A bracketed string
        cannot hold a word with whitespace or a parenthesis (see
        :func:`~sklstruct.parsing.tree_to_string`): with ``"string"``, ``predict``
        raises ``ValueError`` for a batch with such a word (the Penn Treebank
        writes ``(`` and ``)`` as ``-LRB-`` and ``-RRB-``).
    random_state : int, RandomState instance or None, default=None
        Set on the learner when not None, for reproducible fits; None leaves the learner's
        own (the default learner's is None).

    Attributes
    ----------
    learner_ : sklstruct learner
        The fitted learner (``learner_.history_`` has its certificates).
    features_ : transformer
        The fitted feature extractor.
    grammar_ : object
        The grammar read at fit: ``grammar_.labels`` (collapsed chains such as ``S+VP``;
        label ``a`` is state ``a + 1`` of the span rows), ``grammar_.symbols``,
        ``grammar_.rules`` (symbol indices ``(parent, left, right)``) and
        ``grammar_.grammar`` (the compiled :class:`~sklstruct.structures.Grammar`).

    Examples
    --------
    >>> from sklstruct import StructSVMCuttingPlane
    >>> from sklstruct.parsing import ConstituencyParser, tree_from_string
    >>> trees = [tree_from_string(s) for s in [
    ...     "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))",
    ...     "(S (NP (DT a) (NN cat)) (VP (VBZ sleeps) (ADVP (RB here))))"]]
    >>> X = [[("the", "DT"), ("dog", "NN"), ("barks", "VBZ")],
    ...      [("a", "DT"), ("cat", "NN"), ("sleeps", "VBZ"), ("here", "RB")]]
    >>> parser = ConstituencyParser(10.0, learner=StructSVMCuttingPlane(), output="string")
    >>> parser.fit(X, trees).predict([[("the", "DT"), ("cat", "NN"), ("barks", "VBZ")]])
    ['(S (NP (DT the) (NN cat)) (VP (VBZ barks)))']
    """

    _parameter_constraints = {
        **PartsParser._parameter_constraints,
        **_TreeParser._parameter_constraints,
        "loss": [StrOptions({"brackets", "zero_one"})],
    }

    def __init__(self, C=1.0, *, learner=None, features=None, horizontal=1, vertical=1,
                 loss="brackets", output="tuple", random_state=None):
        self.C = C
        self.learner = learner
        self.features = features
        self.horizontal = horizontal
        self.vertical = vertical
        self.loss = loss
        self.output = output
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        """Read the grammar of the trees ``y`` and train the learner on the span rows of ``X``.

        Parameters
        ----------
        X : list of list of tokens
            Sentences: tokens are words (str), ``(word, tag)`` pairs or token dicts (see
            :meth:`predict`); tags, when given, are features (the trees' own tags are
            what the model predicts).
        y : list of tuple or str
            Their trees, nested tuples ``(label, child, ...)`` with preterminals
            ``(tag, word)`` over the sentence's words, or bracketed strings.
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, the learner's ``sample_weight`` (an integer weight
            equals repeating the sentence). Sentences of weight 0 are left out; the grammar
            and the feature extractor read the others' trees unweighted.

        Returns
        -------
        self : ConstituencyParser
        """
        staged = clone(self)
        X, y, weights = weighted_sentences(check_sentences(X), y, sample_weight,
                                           check=staged._checked_pairs)
        X, tokens, trees = staged._training_data(X, y)
        staged._warn_unused_learner_C()
        if max(len(words) for words, _ in tokens) < 3:
            raise ValueError("ConstituencyParser needs a training sentence of three words or "
                             "more (shorter ones have no span off their trees).")
        grammar = staged.grammar_
        states = np.concatenate([grammar.states(tree, f"y[{i}]")
                                 for i, tree in enumerate(trees)])
        staged.features_, rows, n_rows = staged._fit_features(SpanFeatures(), X, trees)
        structure = ConstituencyTree(grammar.grammar, label_brackets=grammar.label_brackets,
                                     loss_type=self.loss)
        staged.learner_ = staged._fit_parts(rows, states, n_rows, structure, weights, "span")
        self.__dict__.update({k: v for k, v in vars(staged).items() if k.endswith("_")})
        return self

    def _parse(self, X, tokens):
        """Trees (nested tuples) of the sentences; ``()`` for an empty one."""
        trees = [()] * len(tokens)
        n_words = np.array([len(words) for words, _ in tokens], dtype=np.int64)
        kept, rows, n_rows, states = self._decode_parts(X, n_words)
        offsets = np.concatenate(([0], np.cumsum(n_rows)))
        fallbacks = []
        for k, i in enumerate(kept):
            words, _ = tokens[i]
            sentence = states[offsets[k]:offsets[k + 1]]
            if np.all(sentence[:len(words)] > 0):
                trees[i] = self.grammar_.tree(sentence, words)
            else:  # no tree of the grammar: all states 0
                fallbacks.append(k)
        if fallbacks:
            lexical = self._best_preterminals(rows, n_rows, offsets, n_words[kept], fallbacks)
            for k, tags in zip(fallbacks, lexical):
                words, given = tokens[kept[k]]
                trees[kept[k]] = self._flat_tree(words, given if given is not None else tags)
            self._warn_fallbacks(len(fallbacks))
        return trees

    def _best_preterminals(self, rows, n_rows, offsets, n_words, sentences):
        """The tags of the best lexical label of every word of the given sentences (the
        first ``n`` rows of a sentence of ``n`` words are its words)."""
        grammar = self.grammar_
        scores = self.learner_.decision_function(rows, lengths=n_rows)
        lexical = np.flatnonzero(grammar.lexical) + 1
        found = []
        for k in sentences:
            words = scores[offsets[k]:offsets[k] + n_words[k]]
            best = lexical[np.argmax(words[:, lexical], axis=1)]
            found.append([grammar.bottom_label(grammar.labels[a - 1]) for a in best])
        return found

    def objective(self, X, y, sample_weight=None):
        """The learner's training objective at the fitted weights on sentences and trees.

        Parameters
        ----------
        X : list of list of tokens
        y : list of tuple or str
            Their trees; a tree whose labels or rules (after binarisation) the grammar read
            at fit lacks raises ``ValueError`` naming them.
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per sentence, as in :meth:`fit` (sentences of weight 0 are left
            out).

        Returns
        -------
        objective : float
        """
        check_is_fitted(self, "learner_")
        X, y, weights = weighted_sentences(check_sentences(X), y, sample_weight,
                                           check=self._checked_pairs)
        y = check_sentences(y, "y")  # (X is a list already)
        tokens = [sentence_tokens(sentence, f"X[{i}]") for i, sentence in enumerate(X)]
        states = []
        for i, ((words, _), tree) in enumerate(zip(tokens, y)):
            tree = as_tree(tree, f"y[{i}]")
            if tree_words(tree) != words:
                raise ValueError(f"y[{i}] does not span the sentence X[{i}].")
            states.append(self.grammar_.states(tree, f"y[{i}]"))
        rows, n_rows = self.features_.transform_flat(X)
        return self.learner_.objective(rows, np.concatenate(states), lengths=n_rows,
                                       sample_weight=weights)


class PCFGParser(_TreeParser):
    """The relative-frequency PCFG of the training trees, parsed from part-of-speech tags.

    The grammar is that of :class:`ConstituencyParser` (binarised, markovised trees with
    collapsed unary chains), with the maximum-likelihood probabilities of its generative
    reading: the root's top symbol, then at every node of top symbol ``X`` its label
    ``a`` (a collapsed chain; ``P(a | X)``), at a phrasal node the binary rule
    ``P(L R | bottom(a))``, at a word its tag, which is the chain's last symbol. The parse of
    a tag sequence is the most probable tree (Viterbi CKY on log-probabilities, the CKY of
    :class:`ConstituencyParser`). Any word may take a lexical label that does not end in its
    own tag, at a cost of ``log(1e-6)`` per word: the given tags stay unless the grammar has
    no tree over them (a tag it never saw, or a tag sequence that none of its trees covers)
    or only trees a million times less probable than one with a word relabelled, and the
    predicted tree's preterminals show the tags taken. A sentence with no tree at all gets a
    flat tree (see :meth:`predict`).

    Parameters
    ----------
    horizontal : int or None, default=1
    vertical : int, default=1
        Markovisation, as for :class:`ConstituencyParser`.
    output : {"tuple", "string", "nltk"}, default="tuple"

    Attributes
    ----------
    grammar_ : object
        The grammar (see :class:`ConstituencyParser`).
    label_log_prob_ : ndarray of shape (n_labels,)
        ``log P(a | top(a))``.
    rule_log_prob_ : ndarray of shape (n_rules,)
        ``log P(rule | parent)``.
    root_log_prob_ : ndarray of shape (n_symbols,)
        ``log P(root symbol)`` (-inf for symbols never at the root).
    """

    # log-probability of a lexical label whose last symbol is not the word's tag
    _TAG_MISMATCH = np.log(1e-6)

    def __init__(self, *, horizontal=1, vertical=1, output="tuple"):
        self.horizontal = horizontal
        self.vertical = vertical
        self.output = output

    def fit(self, X, y, sample_weight=None):
        """Count the labels, rules and roots of the trees ``y``.

        Parameters
        ----------
        X : list of list of tokens
            Tagged sentences (``(word, tag)`` pairs or token dicts with a tag).
        y : list of tuple or str
            Their trees.
        sample_weight : array-like of shape (n_sentences,), default=None
            One weight per tree: its labels, rules and root count with it (an integer
            weight equals repeating the tree; a tree of weight 0 is left out, the grammar
            included).

        Returns
        -------
        self : PCFGParser
        """
        staged = clone(self)
        X, y, weights = weighted_sentences(check_sentences(X), y, sample_weight,
                                           check=staged._checked_pairs)
        _, tokens, _ = staged._training_data(X, y, tree_weights=weights)
        _require_tags(tokens)
        g = staged.grammar_
        counts = np.array([g.label_counts[label] for label in g.labels], dtype=np.float64)
        by_top = np.bincount(g.top, weights=counts, minlength=len(g.symbols))
        staged.label_log_prob_ = np.log(counts / by_top[g.top])
        rules = np.array(g.rules, dtype=np.int64).reshape(-1, 3)
        rule_counts = np.array([g.rule_counts[r] for r in range(len(g.rules))],
                               dtype=np.float64)
        by_parent = np.bincount(rules[:, 0], weights=rule_counts, minlength=len(g.symbols))
        staged.rule_log_prob_ = np.log(rule_counts / by_parent[rules[:, 0]])
        roots = np.zeros(len(g.symbols))
        for label, count in g.root_counts.items():
            roots[g.top[g.index[label]]] += count
        with np.errstate(divide="ignore"):
            staged.root_log_prob_ = np.log(roots / roots.sum())
        self.__dict__.update({k: v for k, v in vars(staged).items() if k.endswith("_")})
        return self

    def _decode(self, tokens):
        """Span states (flat) and log-probabilities of the best trees of the (non-empty,
        tagged) sentences ``tokens``."""
        g = self.grammar_
        tag_of = np.array([g.bottom_label(label) for label in g.labels], dtype=object)
        blocks, lengths = [], []
        for words, tags in tokens:
            n = len(words)
            scores = np.tile(self.label_log_prob_, (n * (n + 1) // 2, 1))
            match = tag_of[None, :] == np.array(tags, dtype=object)[:, None]
            scores[:n] += np.where(match, 0.0, self._TAG_MISMATCH)
            scores[-1] += self.root_log_prob_[g.top]
            blocks.append(scores)
            lengths.append(n)
        labels, best = cky.cky_decode(np.vstack(blocks), np.array(lengths), g.grammar,
                                      self.rule_log_prob_)
        return labels + 1, best

    def _parse(self, X, tokens):
        check_is_fitted(self, "rule_log_prob_")
        _require_tags(tokens)
        trees = [()] * len(tokens)
        kept = [i for i, (words, _) in enumerate(tokens) if words]
        if not kept:
            return trees
        states, best = self._decode([tokens[i] for i in kept])
        offsets = cky.span_offsets([len(tokens[i][0]) for i in kept])
        fallbacks = 0
        for k, i in enumerate(kept):
            words, tags = tokens[i]
            if np.isfinite(best[k]):
                trees[i] = self.grammar_.tree(states[offsets[k]:offsets[k + 1]], words)
            else:
                trees[i] = self._flat_tree(words, tags)
                fallbacks += 1
        self._warn_fallbacks(fallbacks)
        return trees

    def to_nltk_grammar(self):
        """The PCFG as an :class:`nltk.grammar.PCFG` over part-of-speech tags.

        Its nonterminals are the symbols (``"S"``) and the labels (``"[S+VP]"``); the start
        symbol ``ROOT`` (primed, ``ROOT'``, when the treebank has a symbol ``ROOT``)
        rewrites to the root symbols, a symbol to its labels, a phrasal label
        to the binary rules of its bottom symbol and a lexical label to its tag (a terminal),
        with the fitted probabilities, so that :class:`nltk.parse.ViterbiParser` parses tag
        sequences with the same model (without the tag-mismatch fallback; a label both
        lexical and phrasal has its probabilities halved between the two uses).

        Returns
        -------
        grammar : nltk.grammar.PCFG
        """
        check_is_fitted(self, "rule_log_prob_")
        nltk = _import_nltk()
        Nonterminal, ProbabilisticProduction = nltk.Nonterminal, nltk.ProbabilisticProduction
        g = self.grammar_
        symbol = [Nonterminal(s) for s in g.symbols]
        label = [Nonterminal(f"[{a}]") for a in g.labels]
        start = Nonterminal(_fresh_name("ROOT", set(g.symbols)))
        productions = [ProbabilisticProduction(start, [symbol[x]],
                                               prob=float(np.exp(self.root_log_prob_[x])))
                       for x in np.flatnonzero(np.isfinite(self.root_log_prob_))]
        for a in range(g.n_labels):
            productions.append(ProbabilisticProduction(
                symbol[g.top[a]], [label[a]], prob=float(np.exp(self.label_log_prob_[a]))))
            share = 0.5 if g.lexical[a] and g.phrasal[a] else 1.0
            if g.lexical[a]:
                productions.append(ProbabilisticProduction(
                    label[a], [g.bottom_label(g.labels[a])], prob=share))
            if g.phrasal[a]:
                for r, (parent, left, right) in enumerate(g.rules):
                    if parent == g.bottom[a]:
                        productions.append(ProbabilisticProduction(
                            label[a], [symbol[left], symbol[right]],
                            prob=share * float(np.exp(self.rule_log_prob_[r]))))
        return nltk.PCFG(start, productions)

    def from_nltk_parse(self, parse, words):
        """The tree of a parse by :meth:`to_nltk_grammar`'s grammar over ``words``.

        Parameters
        ----------
        parse : nltk.tree.Tree
            A tree of that grammar over the sentence's tags.
        words : list of str

        Returns
        -------
        tree : tuple
            The n-ary tree, as :meth:`predict` gives it.
        """
        check_is_fitted(self, "rule_log_prob_")
        position = iter(range(len(words)))

        def convert(node):  # node: a symbol over one label
            (labelled,) = list(node)
            name = labelled.label()[1:-1]
            if isinstance(labelled[0], str):
                return (name, words[next(position)])
            return (name, *[convert(child) for child in labelled])

        (top,) = list(parse)
        return unbinarize(expand_unary(convert(top), self.grammar_.join))


def _fresh_name(name, taken):
    """``name``, primed as often as needed to differ from every name of ``taken``."""
    while name in taken:
        name += "'"
    return name


def _require_tags(tokens):
    for i, (words, tags) in enumerate(tokens):
        if words and tags is None:
            raise ValueError(f"PCFGParser parses part-of-speech tags: X[{i}] has none; give "
                             "(word, tag) pairs or token dicts with a tag.")

