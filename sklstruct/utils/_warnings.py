"""Warnings attributed to the caller's code.

A warning raised deep inside a fit (a solver's convergence, an unused parameter) would name
a line of the library with a fixed ``stacklevel``, whatever path led there: the learners,
the parsers and the pipelines reach the same code at different depths. :func:`warn_user`
names the line that called into the library instead: the frame above the outermost of the
library's frames, where scikit-learn code between two of them counts as the library's (a
``SequencePipeline`` runs scikit-learn's ``Pipeline.fit``, which calls a sklstruct
estimator), and the decorators scikit-learn wraps around methods (``_fit_context``'s
``wrapper``, ``set_output``'s ``wrapped``) are passed over. A scikit-learn meta-estimator
that calls the library (``GridSearchCV``, ``Pipeline``) is named by its own line, as
scikit-learn's warnings are.

Frames are told apart by their module's name, not their file, so that installs of compiled
``.pyc`` files only (whose code objects keep their build paths) are read the same.
"""

import sys
import warnings

_DECORATOR_NAMES = ("wrapper", "wrapped")


def _module_of(frame):
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) else ""  # (exec'd code may give any value)


def _is_ours(module):
    return module == "sklstruct" or module.startswith("sklstruct.")


def _is_sklearn(module):
    return module == "sklearn" or module.startswith("sklearn.")


def _outside_stacklevel():
    """The ``stacklevel`` of the line that called into the library, counted from the
    caller of :func:`warn_user`."""
    frames = []
    frame = sys._getframe(2)  # the caller of warn_user
    while frame is not None:
        module = _module_of(frame)
        if not (_is_ours(module) or _is_sklearn(module)):
            break
        frames.append((module, frame.f_code.co_name))
        frame = frame.f_back
    outermost = max(i for i, (module, _) in enumerate(frames) if _is_ours(module)) \
        if any(_is_ours(module) for module, _ in frames) else -1
    level = outermost + 1  # (0-based index of the frame above it)
    while level < len(frames) and _is_sklearn(frames[level][0]) \
            and frames[level][1] in _DECORATOR_NAMES:
        level += 1
    return level + 1


def warn_user(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the line that called sklstruct.

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    warnings.warn(message, category, stacklevel=_outside_stacklevel() + 1)
