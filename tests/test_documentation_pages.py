"""The developer pages stay true to the tree: every module is on the architecture page, and no
docstring of the package quotes a results file."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sklstruct"


def _modules():
    return sorted(path for path in PACKAGE.rglob("*")
                  if path.suffix in (".py", ".pyx", ".pxd") and path.name != "__init__.py")


def test_the_architecture_page_lists_every_module():
    page = (ROOT / "doc" / "developers" / "architecture.rst").read_text()
    missing = [str(path.relative_to(ROOT)) for path in _modules()
               if not re.search(r"(?<![\w.])" + re.escape(path.stem) + r"(\.|/|\b)", page)]
    assert not missing, f"not on doc/developers/architecture.rst: {missing}"


def test_no_results_file_is_quoted_in_the_package():
    quoted = [f"{path.relative_to(ROOT)}:{number}" for path in _modules()
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"results/|\.json\b", line)
              and "datasets" not in path.parts]
    assert not quoted, quoted
