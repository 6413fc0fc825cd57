"""The ``benchmark-table`` directive: a table of ``benchmarks/bench_defaults.py`` results.

The figures are read at build time from the runs that the benchmark script stored in
``benchmarks/results/defaults.json`` (``--run NAME --json``), so that no figure is copied by
hand::

    .. benchmark-table:: conll2000

       conll_peers
       conll_fast
       conll_final
       conll_slow
       ocr_l1_subgradient  L1M3N(solver="subgradient")

Each line names a run of that file, optionally followed by the label to give its sklstruct
rows (when the run passed ``--params``; a row of a ``NAME{JSON}`` system is labelled with its
parameters). Rows of the same system are merged: the table gives the median over runs and the
range; a sklstruct system (a label) is read only from the last listed run that has it, since
earlier runs measured an earlier version of it, while the peers' rows are merged over all runs.
The ratio to sklearn-crfsuite's passive-aggressive trainer is taken within each run (against
the nearest crfsuite-pa row before it), as the script's processes share a machine.
"""

import json
import math
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "defaults.json"
SOURCE = "benchmarks/results/defaults.json"

PEERS = {
    "crfsuite-pa": "sklearn-crfsuite, passive-aggressive (20 iterations)",
    "crfsuite-lbfgs": "sklearn-crfsuite, L-BFGS (c2=1)",
    "linear-svc": "``LinearSVC``, token by token",
}
QUALITY = {"conll2000": ("chunk_F1", "chunk F1 (%)", 100.0, 2),
           "ocr": ("letter_accuracy", "letter accuracy (%)", 100.0, 1)}


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def _median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def _spread(values, fmt):
    """``median`` or ``median (min-max)`` of the runs."""
    values = [v for v in values if _finite(v)]
    if not values:
        return ""
    text = fmt.format(_median(values))
    low, high = fmt.format(min(values)), fmt.format(max(values))
    if len(values) > 1 and low != high:
        text += f" ({low}-{high})"
    return text


def _fit_format(seconds):
    return "{:.2f}" if seconds < 10 else "{:.1f}"


def _system_key(row, label):
    """A sklstruct row's label: the file's, else the estimator with the parameters the row
    carries (``NAME{JSON}`` systems of the script), else the estimator with its defaults."""
    if label:
        return label
    params = row.get("params") or {}
    arguments = ", ".join(f"{name}={value!r}" for name, value in params.items())
    return f"``{row['system']}({arguments})``"


def _rows(results, name):
    if name not in results["runs"]:
        raise KeyError(f"{SOURCE} has no run {name!r}")
    return results["runs"][name]["rows"]


def read_runs(dataset, entries):
    """Merge the rows of the listed runs: label -> dict of lists, in first-seen order."""
    systems = {}
    results = json.loads(RESULTS.read_text())
    runs = [(name, label, _rows(results, name)) for name, label in entries]
    # each sklstruct system from the last run that has it
    latest = {}
    for name, label, rows in runs:
        for row in rows:
            if row["system"] not in PEERS:
                latest[_system_key(row, label)] = name
    for name, label, rows in runs:
        pa_fit = None
        pa_any = [r["fit_s"] for r in rows if r.get("system") == "crfsuite-pa" and "fit_s" in r]
        for row in rows:
            if row.get("dataset") != dataset:
                raise ValueError(f"{name}: a row of data set {row.get('dataset')!r}, expected "
                                 f"{dataset!r}.")
            system = row["system"]
            if system == "crfsuite-pa" and "fit_s" in row:
                pa_fit = row["fit_s"]
            key = PEERS.get(system) or _system_key(row, label)
            if system not in PEERS and latest[key] != name:
                continue
            entry = systems.setdefault(key, {"peer": system in PEERS, "fit": [], "ratio": [],
                                             "quality": [], "peak": [], "before": [],
                                             "gap": [], "stopped": [], "runs": []})
            if name not in entry["runs"]:
                entry["runs"].append(name)
            if "error" in row:
                entry["stopped"].append((row["error"], row.get("last_check", {})))
                continue
            entry["fit"].append(row["fit_s"])
            reference = pa_fit if pa_fit is not None else (pa_any[0] if pa_any else None)
            if reference:
                entry["ratio"].append(row["fit_s"] / reference)
            entry["quality"].append(row.get(QUALITY[dataset][0]))
            entry["peak"].append(row.get("peak_RSS_MB"))
            entry["before"].append(row.get("rss_before_MB"))
            entry["gap"].append(row.get("rel_gap"))
    return systems


def table_lines(dataset, entries):
    """reStructuredText list-table of the merged runs."""
    field, quality_title, scale, digits = QUALITY[dataset]
    systems = read_runs(dataset, entries)
    finished = [(k, v) for k, v in systems.items() if v["fit"]]
    peers = [(k, v) for k, v in finished if v["peer"]]
    ours = sorted([(k, v) for k, v in finished if not v["peer"]],
                  key=lambda kv: _median(kv[1]["fit"]))
    stopped = [(k, v) for k, v in systems.items() if not v["fit"]]
    lines = [".. list-table::", "   :header-rows: 1", "   :class: benchmark-table", "",
             "   * - system", "     - runs", "     - fit (s)", "     - x crfsuite PA",
             f"     - {quality_title}", "     - peak RSS (MB)", "     - RSS before fit (MB)",
             "     - certified relative gap"]
    quality_fmt = "{:.%df}" % digits
    notes = []
    for key, v in peers + ours:
        fit_fmt = _fit_format(_median(v["fit"]))
        quality = [q * scale for q in v["quality"] if _finite(q)]
        gap = _spread(v["gap"], "{:.1e}") or "--"
        lines += [f"   * - {key}", f"     - {len(v['fit'])}",
                  f"     - {_spread(v['fit'], fit_fmt)}",
                  f"     - {_spread(v['ratio'], '{:.2f}') or '--'}",
                  f"     - {_spread(quality, quality_fmt)}",
                  f"     - {_spread(v['peak'], '{:.0f}')}",
                  f"     - {_spread(v['before'], '{:.0f}')}",
                  f"     - {gap}"]
    for key, v in stopped:
        error, last = v["stopped"][-1]
        quality = last.get(field)
        gap = last.get("rel_gap")
        lines += [f"   * - {key}", f"     - {len(v['stopped'])}",
                  f"     - > {error.replace('not done in', '').strip()} [#]_",
                  "     - --",
                  "     - " + (quality_fmt.format(quality * scale) + " (last check)"
                             if _finite(quality) else "--"),
                  "     - --", "     - --",
                  "     - " + ("{:.2g} (last check)".format(gap) if _finite(gap) else "--")]
        if _finite(last.get("time")):
            notes.append(f".. [#] {key}: stopped by the script's ``--timeout``; the last "
                         f"check was after {last['time']:.0f} s of fitting (iteration "
                         f"{last.get('iteration', '?')}).")
        else:  # a run without --curve records no check
            notes.append(f".. [#] {key}: stopped by the script's ``--timeout`` (the run "
                         "recorded no check).")
    runs = sorted({name for v in systems.values() for name in v["runs"]})
    lines += ["", "Source: the runs " + ", ".join(f"``{name}``" for name in runs)
              + f" of ``{SOURCE}``, each with its commit, command and machine.", ""]
    return lines + notes + [""]


class BenchmarkTable(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"class": directives.class_option}

    def run(self):
        dataset = self.arguments[0]
        if dataset not in QUALITY:
            raise self.error(f"unknown data set {dataset!r} (one of {sorted(QUALITY)}).")
        entries = []
        for line in self.content:
            if line.strip():
                name, _, label = line.strip().partition(" ")
                entries.append((name, label.strip() or None))
        self.state.document.settings.env.note_dependency(str(RESULTS))
        try:
            lines = table_lines(dataset, entries)
        except (OSError, KeyError, ValueError) as exc:
            raise self.error(f"benchmark-table: {exc}")
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="benchmark-table"),
                                self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("benchmark-table", BenchmarkTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
