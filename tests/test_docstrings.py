"""Every public class documents its parameters; every public method its parameters and what it
returns (numpydoc sections)."""

import importlib
import inspect
import pkgutil
import re

import pytest

import sklstruct


def _public_modules():
    """The package and its modules at any depth whose path has no leading underscore (as
    the API reference lists them), but ``learners``, whose names the package re-exports,
    and the estimator base."""
    names = ["sklstruct"]
    for info in pkgutil.walk_packages(sklstruct.__path__, "sklstruct."):
        parts = info.name.split(".")
        if not any(part.startswith("_") for part in parts) and \
                parts[1] not in ("learners", "base"):
            names.append(info.name)
    return [importlib.import_module(name) for name in names]


def _public_objects(kind):
    found, seen = [], set()
    for module in _public_modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if kind(obj) and id(obj) not in seen:
                seen.add(id(obj))
                found.append(obj)
    return found


PUBLIC_CLASSES = _public_objects(inspect.isclass)
PUBLIC_FUNCTIONS = _public_objects(inspect.isfunction)


def _section(doc, name):
    """The lines of a numpydoc section (between its underline and the next section)."""
    match = re.search(rf"\n\s*{name}\n\s*-+\n(.*?)(?:\n\s*\n\s*[A-Z][a-z]+\n\s*-+\n|\Z)",
                      doc or "", re.S)
    return match.group(1) if match else None


def _documented(section):
    """Names on ``name : type`` lines (``a, b : type`` documents both)."""
    names = set()
    for line in section.splitlines():
        match = re.match(r"\s*([\w, *]+?)\s*:", line)
        if match and not line.strip().startswith(("-", ">")):
            names.update(part.strip().lstrip("*") for part in match.group(1).split(","))
    return names


def _parameters(function):
    return [name for name, p in inspect.signature(function).parameters.items()
            if name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _public_methods(cls):
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") or member.__module__.startswith(("sklearn",
                                                                 "collections.abc")):
            continue
        yield name, member


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_class_docstring_lists_its_parameters(cls):
    parameters = _parameters(cls.__init__)
    if not parameters:
        return
    section = _section(cls.__doc__, "Parameters")
    assert section is not None, f"{cls.__name__} has no Parameters section"
    missing = set(parameters) - _documented(section)
    assert not missing, f"{cls.__name__} does not document {sorted(missing)}"


@pytest.mark.parametrize("cls", PUBLIC_CLASSES, ids=lambda c: c.__name__)
def test_public_methods_document_parameters_and_returns(cls):
    for name, method in _public_methods(cls):
        doc = inspect.getdoc(method)
        assert doc, f"{cls.__name__}.{name} has no docstring"
        parameters = _parameters(method)
        if parameters:
            section = _section(doc, "Parameters")
            assert section is not None, f"{cls.__name__}.{name} has no Parameters section"
            missing = set(parameters) - _documented(section)
            assert not missing, f"{cls.__name__}.{name} does not document {sorted(missing)}"
        source = inspect.getsource(method)
        if re.search(r"\n\s+return[ \t]+\S", source) and "NotImplementedError" not in source:
            assert _section(doc, "Returns") is not None, \
                f"{cls.__name__}.{name} has no Returns section"


@pytest.mark.parametrize("function", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_public_functions_document_parameters(function):
    doc = inspect.getdoc(function)
    assert doc, f"{function.__name__} has no docstring"
    parameters = _parameters(function)
    if parameters:
        section = _section(doc, "Parameters")
        assert section is not None, f"{function.__name__} has no Parameters section"
        missing = set(parameters) - _documented(section)
        assert not missing, f"{function.__name__} does not document {sorted(missing)}"
    if re.search(r"\n\s+return[ \t]+\S", inspect.getsource(function)):
        assert _section(doc, "Returns") is not None, \
            f"{function.__name__} has no Returns section"


def test_the_walk_finds_the_whole_api():
    names = {obj.__name__ for obj in PUBLIC_CLASSES + PUBLIC_FUNCTIONS}
    for name in ("SequenceBatch", "PackedSequences", "ShardedSequences", "SequenceScorer",
                 "Grammar", "DependencyTree", "make_dependency_treebank", "chow_liu_tree",
                 "M3NExpGrad", "DependencyParser", "expected_failed_checks"):
        assert name in names


def test_docstrings_cite_papers_not_internal_names():
    """Docstrings speak to users: no internal names of the papers or of design notes."""
    import pathlib

    offenders = []
    root = pathlib.Path(sklstruct.__file__).parent
    for path in root.rglob("*.py*"):
        if path.suffix not in (".py", ".pyx", ".pxd"):
            continue
        text = path.read_text()
        for pattern in (r"\bseed\s+\d{3}\b", r"\bseed's\b", r"DESIGN section"):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(root)}: {pattern}")
    assert not offenders, offenders


def test_docstring_examples_run():
    """Every example in the docstrings of the public API gives the output it shows (two had
    used a function without importing it)."""
    import doctest
    import importlib
    import warnings

    modules = ["sklstruct", "sklstruct.metrics", "sklstruct.preprocessing",
               "sklstruct.pipeline", "sklstruct.inspection", "sklstruct.parsing",
               "sklstruct.structures", "sklstruct.utils", "sklstruct.datasets",
               "sklstruct.distributed"]
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report, seen = [], set()
    for module in map(importlib.import_module, modules):
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            for test in finder.find(obj, f"{module.__name__}.{name}", globs={}):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.attempted > 200
    assert results.failed == 0, "".join(report)
