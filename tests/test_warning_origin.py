"""Warnings name the line of the code that called the library, however deep inside a fit
they arise and whichever path (learner, parser, meta-estimator) led there."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, UndefinedMetricWarning
from sklearn.model_selection import cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from sklstruct import (L1M3N, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)
from sklstruct.datasets import make_dependency_treebank
from sklstruct.metrics import chunk_f1_score
from sklstruct.parsing import DependencyParser

from ._helpers import make_chain_data


def _caught(call, category):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, f"no {category.__name__} from {call}"
    return found


@pytest.mark.parametrize("model", [
    StructSVMCuttingPlane(max_iter=1), M3NExpGrad(max_iter=1), M3NExcessiveGap(max_iter=1),
    L1M3N(max_iter=1), M3NSimplicialDecomposition(max_iter=1)], ids=type)
def test_a_convergence_warning_names_the_callers_line(model):
    X, y = make_chain_data(n_sequences=8, seed=0)
    for w in _caught(lambda: model.fit(X, y), ConvergenceWarning):
        assert w.filename == __file__
    # through a meta-estimator: the first frame outside the library is scikit-learn's
    pipeline = make_pipeline(FunctionTransformer(), model)
    for w in _caught(lambda: pipeline.fit(np.vstack(X), np.concatenate(y),
                                          **{f"{type(model).__name__.lower()}__lengths":
                                             [len(x) for x in X]}), ConvergenceWarning):
        assert "sklearn" in w.filename and "sklstruct" not in w.filename


def test_parser_and_metric_warnings_name_the_callers_line():
    treebank = make_dependency_treebank(6, random_state=0)
    parser = DependencyParser(learner=M3NSimplicialDecomposition(C=5.0, max_iter=1))
    for w in _caught(lambda: parser.fit(treebank.sentences, treebank.heads), UserWarning):
        assert w.filename == __file__
    for w in _caught(lambda: chunk_f1_score([["O"]], [["O"]]), UndefinedMetricWarning):
        assert w.filename == __file__
    # code run with globals whose __name__ is not a module name (exec) warns all the same
    for w in _caught(lambda: exec("chunk_f1_score([['O']], [['O']])",
                                  {"__name__": 5, "chunk_f1_score": chunk_f1_score}),
                     UndefinedMetricWarning):
        assert w.filename == "<string>"
    # SequencePipeline runs scikit-learn's Pipeline.fit, which calls the estimator: the
    # user's line, all the same
    from sklstruct.pipeline import make_sequence_pipeline

    dicts = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}, {"w": "c"}]]
    labels = [["x", "y"], ["y", "x", "x"]]
    pipeline = make_sequence_pipeline(M3NSimplicialDecomposition(max_iter=1))
    for w in _caught(lambda: pipeline.fit(dicts, labels), ConvergenceWarning):
        assert w.filename == __file__
    # under cross-validation the scorer's warning names scikit-learn's line, not ours
    X, y = make_chain_data(n_sequences=8, seed=0)
    for w in _caught(lambda: cross_validate(M3NSimplicialDecomposition(max_iter=1), X, y,
                                            cv=2), ConvergenceWarning):
        assert "sklstruct" not in w.filename
