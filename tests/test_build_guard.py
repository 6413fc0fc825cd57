"""A source tree without compiled extensions fails with a readable ImportError."""

import shutil
import subprocess
import sys
from pathlib import Path

import sklstruct


def test_missing_extension_gives_build_instructions(tmp_path):
    source = Path(sklstruct.__file__).parent
    shutil.copytree(source, tmp_path / "sklstruct",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "build", "__pycache__"))
    result = subprocess.run(
        [sys.executable, "-c", "import sklstruct"], cwd=tmp_path, capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert "pip install -e ." in result.stderr
