"""Turn a missing compiled extension into a readable ImportError."""
import os

_MESSAGE = """
sklstruct's compiled extensions could not be imported from
{path}
This usually means that the package was used from a source tree without
being built. Build it in place with

    pip install -e .        (or: make dev)

from the project root, then restart Python. The original error was:
{error}
"""

try:
    from ._check_build import check_build  # noqa: F401
except ImportError as exc:
    raise ImportError(
        _MESSAGE.format(path=os.path.dirname(os.path.dirname(__file__)), error=exc)
    ) from exc
