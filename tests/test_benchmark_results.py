"""benchmarks/results stays curated: every file there is named by the README, a documentation
page or a benchmark script, every results path they name exists, every run records its
commit, command and machine, and the folder's README lists every file."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GENERATED = {"_build", "auto_examples", "generated"}  # written by the documentation build
MAX_FILES = 30


def _results_files():
    return sorted(path for path in RESULTS.rglob("*") if path.is_file()
                  and path.name != "README.md")


def _sources():
    """The texts that may cite a results file: README, documentation pages (and the extension
    that renders the tables), benchmark scripts; not the results folder's own README."""
    pages = [path for path in (ROOT / "doc").rglob("*.rst")
             if not GENERATED.intersection(path.relative_to(ROOT / "doc").parts)]
    paths = ([ROOT / "README.md"] + pages + sorted((ROOT / "doc" / "_ext").glob("*.py"))
             + sorted((ROOT / "benchmarks").glob("*.py")))
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in paths}


def _cited_paths(text):
    """Paths below benchmarks/results/ that a text names, relative to that folder: written
    out (``benchmarks/results/x.json``, ``results/x.json``) or joined in a script
    (``os.path.join(..., "results", "x.json")``)."""
    cited = {match.rstrip(".") for match in
             re.findall(r"(?<![\w.-])(?:benchmarks/)?results/([\w.-]+(?:/[\w.-]+)*)", text)}
    cited.update(re.findall(r'"results",\s*"([\w.-]+)"', text))
    return {path for path in cited if path}


def test_every_results_file_is_named_somewhere():
    sources = _sources()
    unnamed = []
    for path in _results_files():
        name = re.escape(path.relative_to(RESULTS).as_posix())
        if not any(re.search(r"(?<![\w.-])" + name + r"(?![\w-])", text)
                   for text in sources.values()):
            unnamed.append(path.relative_to(ROOT).as_posix())
    assert not unnamed, f"results files that no page, README or script names: {unnamed}"


def test_every_cited_results_path_exists():
    missing = []
    for source, text in _sources().items():
        if source.startswith("benchmarks/"):
            # a script's usage may suggest where to store a run that is not kept yet
            text = re.sub(r"--json\s+\S+", "", text)
        missing += [f"{source}: benchmarks/results/{path}" for path in sorted(_cited_paths(text))
                    if not (RESULTS / path).exists()]
    assert not missing, missing


def test_cited_path_detection():
    text = ('see ``benchmarks/results/a.json``. and results/b.png; '
            'os.path.join(HERE, "results", "c.json"); cv_results_["x"]; '
            '``benchmarks/results/``')
    assert _cited_paths(text) == {"a.json", "b.png", "c.json"}


@pytest.mark.parametrize("path", [p for p in _results_files() if p.suffix == ".json"],
                         ids=lambda p: p.name)
def test_every_run_records_its_provenance(path):
    data = json.loads(path.read_text())
    assert isinstance(data, dict) and isinstance(data.get("runs"), dict) and data["runs"]
    for name, run in data["runs"].items():
        for field in ("commit", "date", "command", "machine"):
            assert isinstance(run.get(field), str) and run[field].strip(), (name, field)
        assert run["command"].startswith("python benchmarks/"), name
        assert "rows" in run, name


def test_tables_and_text_name_existing_runs():
    runs = json.loads((RESULTS / "defaults.json").read_text())["runs"]
    page = (ROOT / "doc" / "user_guide" / "choosing.rst").read_text()
    listed = []
    for block in re.findall(r"\.\. benchmark-table:: \w+\n\n((?:   .*\n)+)", page):
        listed += [line.split()[0] for line in block.splitlines() if line.strip()]
    assert len(listed) > 10
    named = re.findall(r"``((?:conll|ocr)_\w+)``", page)
    missing = sorted(set(listed + named) - set(runs))
    assert not missing, f"runs of defaults.json named by choosing.rst but absent: {missing}"


def test_the_folder_readme_lists_every_file():
    readme = (RESULTS / "README.md").read_text()
    listed = set(re.findall(r"^- `([^`]+)`:", readme, flags=re.MULTILINE))
    files = {path.relative_to(RESULTS).as_posix() for path in _results_files()}
    assert listed == files


def test_the_folder_stays_small():
    assert len(_results_files()) + 1 <= MAX_FILES  # with its README
