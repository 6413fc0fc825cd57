"""Task-level helpers for parsing: treebank readers, tree transforms, parser metrics.

Dependency trees are given per sentence as an array of heads (1-based, 0 for
the root) and an array of relations; tokens are dicts of their CoNLL columns.
Constituency trees are nested tuples ``(label, child, ...)`` whose
preterminals are ``(tag, word)``. :class:`DependencyParser` trains a
first-order dependency model on the candidate-arc rows of :class:`ArcFeatures`,
:class:`ConstituencyParser` a max-margin weighted grammar on the span rows of
:class:`SpanFeatures`, each with any sklstruct learner at the parser's ``C``;
:class:`PCFGParser` is the relative-frequency PCFG of the grammar.
"""

from ._arc_features import ArcFeatures
from ._conll import read_conll, read_dependency_columns, write_conll
from ._constituency import ConstituencyParser, PCFGParser
from ._dependency_parser import DependencyParser
from ._metrics import (
    attachment_scorer,
    attachment_scores,
    bracket_f1_scorer,
    bracket_scores,
)
from ._span_features import SpanFeatures
from ._transforms import binarize, collapse_unary, expand_unary, unbinarize
from ._trees import (
    from_nltk,
    labelled_spans,
    read_ptb_trees,
    to_nltk,
    tree_from_string,
    tree_tags,
    tree_to_string,
    tree_words,
)

__all__ = [
    "ArcFeatures",
    "ConstituencyParser",
    "DependencyParser",
    "PCFGParser",
    "SpanFeatures",
    "attachment_scorer",
    "attachment_scores",
    "binarize",
    "bracket_f1_scorer",
    "bracket_scores",
    "collapse_unary",
    "expand_unary",
    "from_nltk",
    "labelled_spans",
    "read_conll",
    "read_dependency_columns",
    "read_ptb_trees",
    "to_nltk",
    "tree_from_string",
    "tree_tags",
    "tree_to_string",
    "tree_words",
    "unbinarize",
    "write_conll",
]
