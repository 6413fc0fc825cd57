"""Warnings attributed to the caller's code.

A warning raised deep inside a fit (a solver's convergence, an unused parameter) would name
a line of the library with a fixed ``stacklevel``, whatever path led there: the learners,
the parsers and the pipelines reach the same code at different depths. :func:`warn_user`
names the first frame outside the package instead: the user's line, or the line of the
scikit-learn meta-estimator that called the library. The decorators scikit-learn wraps
around the library's methods (``_fit_context``'s ``wrapper``, ``set_output``'s
``wrapped``) are passed over, so that a direct ``fit`` names the user's line.
"""

import os
import sys
import warnings

import sklearn

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKLEARN_DIR = os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep
_DECORATOR_NAMES = ("wrapper", "wrapped")


def _outside_stacklevel():
    """The ``stacklevel`` of the first frame whose code is neither the package's nor a
    scikit-learn decorator's around it, counted from the caller of :func:`warn_user`."""
    frame = sys._getframe(2)  # the caller of warn_user
    level = 1
    inside = True  # (whether the frame below was the package's)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_PACKAGE_DIR):
            inside = True
        elif inside and filename.startswith(_SKLEARN_DIR) \
                and frame.f_code.co_name in _DECORATOR_NAMES:
            inside = False
        else:
            break
        frame = frame.f_back
        level += 1
    return level


def warn_user(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the first frame outside sklstruct.

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    warnings.warn(message, category, stacklevel=_outside_stacklevel() + 1)
