"""Dependency parsing: sklstruct's DependencyParser beside UDPipe 1, in the same run.

Data (from ``--data-home``, never shipped with the package):

basque
    CoNLL-2007 Basque (``conll2007_eus``, Latin-1, labelled, gold POS): train on eus.train,
    test on eus.test. ``C`` is chosen on a held-out part of the training set (its last 15%)
    from ``--grid`` (a grid of one value is used as given), then the parser is refitted on
    the whole training set.
ptb
    The Penn Treebank sample in dependency form (``ptb_sample/dependency.dp.gz``, heads only,
    gold POS): train on files wsj_0001-0159, test on wsj_0160-0199 (``files.tsv``); ``C`` chosen
    the same way.

Rows (each fit in a fresh worker process; peak memory is the resident memory above the
level before the fit, features included, sampled every 5 ms):

- ``sklstruct``: ``DependencyParser`` with ``M3NSimplicialDecomposition()`` (the default
  learner) at the chosen ``C``, projective (Eisner) and non-projective (Chu-Liu-Edmonds);
  relations by the default second stage; on Basque also ``relations="joint"``.
- ``udpipe``: UDPipe 1 (``ufal.udpipe``), parser only (``tokenizer=none, tagger=none``),
  gold POS, its default parser settings; on Basque with ``single_root=0``, since the
  treebank's sentences may attach several tokens to the root (UDPipe refuses them
  otherwise). Relations ``ROOT`` are written ``root`` for it and read back.
- ``learner=...``: every learner with its defaults at the chosen ``C`` on the Basque
  training set (``--learners``), stopped when it has not ended within 5 times the default
  learner's fit time (the row then says so).

Scores: UAS and LAS over all tokens (as the CoNLL-2007 shared task) and without punctuation
(``eval.pl``'s rule); ``predict`` speed in sentences per second on the test set; the
certified relative duality gap of the tree model.

    python benchmarks/bench_dependency.py [--data basque ptb] [--learners] [--no-udpipe] \\
        [--grid 0.003 0.01 0.03 0.1] [--json benchmarks/results/dependency.json]
"""

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import PeakMemory, parser, print_table, write_json  # noqa: E402

LEARNERS = ["StructSVMCuttingPlane", "M3NExpGrad", "M3NExcessiveGap", "L1M3N",
            "M3NSimplicialDecomposition"]


# ------------------------------------------------------------------------------ data
def load(name, data_home):
    """``(train_sentences, train_trees, test_sentences, test_trees, features)``; trees are
    ``(heads, relations)`` pairs (relations ``None`` for the PTB sample)."""
    from sklstruct.parsing import ArcFeatures, read_conll, read_dependency_columns

    if name == "basque":
        folder = os.path.join(data_home, "conll2007_eus")
        train = read_conll(os.path.join(folder, "eus.train.gz"), encoding="latin-1")
        test = read_conll(os.path.join(folder, "eus.test.gz"), encoding="latin-1")
        return (train.sentences, list(zip(train.heads, train.relations)), test.sentences,
                list(zip(test.heads, test.relations)),
                ArcFeatures(tag="cpostag", extra=("postag", "lemma", "feats")))
    folder = os.path.join(data_home, "ptb_sample")
    data = read_dependency_columns(os.path.join(folder, "dependency.dp.gz"))
    with open(os.path.join(folder, "files.tsv")) as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:]]
    boundary = next(int(first) for name_, first, _ in rows if name_ == "wsj_0160.mrg")
    sentences, heads = data.sentences, data.heads
    return (sentences[:boundary], heads[:boundary], sentences[boundary:], heads[boundary:],
            ArcFeatures(tag="postag"))


def _heads(trees):
    return [t[0] if isinstance(t, tuple) else t for t in trees]


def _relations(trees):
    return [t[1] for t in trees] if trees and isinstance(trees[0], tuple) else None


def scores(sentences, trees_true, trees_pred):
    from sklstruct.parsing import attachment_scores

    out = {}
    for suffix, exclude in (("", False), ("_nopunct", True)):
        s = attachment_scores(_heads(trees_true), _heads(trees_pred), _relations(trees_true),
                              _relations(trees_pred), sentences=sentences,
                              exclude_punctuation=exclude)
        out["uas" + suffix] = s["uas"]
        if "las" in s:
            out["las" + suffix] = s["las"]
    return out


# ------------------------------------------------------------------------------ workers
def _learner(name, C):
    import sklstruct

    return getattr(sklstruct, name)(C=C)


def work_sklstruct(spec):
    from sklstruct.parsing import DependencyParser

    train_x, train_y, test_x, test_y, features = load(spec["data"], spec["data_home"])
    learner = _learner(spec.get("learner", "M3NSimplicialDecomposition"), spec["C"])
    model = DependencyParser(spec["C"], learner=learner, features=features,
                             projective=spec["projective"],
                             relations=spec.get("relations", "separate"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with PeakMemory() as memory:
            model.fit(train_x, train_y)
    start = time.perf_counter()
    predicted = model.predict(test_x)
    predict_seconds = time.perf_counter() - start
    history = model.learner_.history_
    row = dict(fit_s=memory.seconds, peak_mb=memory.peak_mb,
               predict_sent_per_s=len(test_x) / predict_seconds,
               n_iter=int(model.learner_.n_iter_),
               rel_gap=float(history["gap"][-1] / history["primal"][-1]),
               primal=float(history["primal"][-1]),
               n_features=int(model.features_.n_features_out_),
               warnings=sorted({type(w.message).__name__ for w in caught}))
    row.update(scores(test_x, test_y, predicted))
    return row


def work_heldout(spec):
    """Held-out UAS of every C of the grid (fit on the first 85% of the training set)."""
    from sklstruct.parsing import DependencyParser

    train_x, train_y, _, _, features = load(spec["data"], spec["data_home"])
    cut = int(0.85 * len(train_x))
    out = {}
    for C in spec["grid"]:
        model = DependencyParser(C, features=features, projective=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(train_x[:cut], train_y[:cut])
        out[str(C)] = model.score(train_x[cut:], train_y[cut:])
    return out


def _conllu(sentences, trees, with_trees=True):
    lines = []
    for i, tokens in enumerate(sentences):
        heads = trees[i][0] if isinstance(trees[i], tuple) else trees[i]
        relations = trees[i][1] if isinstance(trees[i], tuple) else None
        for j, token in enumerate(tokens):
            upos = token.get("cpostag", token.get("postag"))
            if relations is not None:
                relation = "root" if relations[j] == "ROOT" else relations[j]
            else:
                relation = "root" if heads[j] == 0 else "dep"
            lines.append("\t".join([
                str(j + 1), token["form"], token.get("lemma", "_"), upos, token["postag"],
                token.get("feats", "_"), str(heads[j]) if with_trees else "_",
                relation if with_trees else "_", "_", "_"]))
        lines.append("")
    return "\n".join(lines) + "\n"


def _read_conllu(text, labelled):
    trees, heads, relations = [], [], []
    for line in text.split("\n"):
        if line.startswith("#"):
            continue
        if not line.strip():
            if heads:
                trees.append((np.array(heads), np.array(relations, dtype=object)) if labelled
                             else np.array(heads))
                heads, relations = [], []
            continue
        fields = line.split("\t")
        heads.append(int(fields[6]))
        relations.append("ROOT" if fields[7] == "root" else fields[7])
    return trees


def work_udpipe(spec):
    import tempfile

    from ufal.udpipe import (InputFormat, Model, Pipeline, ProcessingError, Sentence,
                             Sentences, Trainer)

    train_x, train_y, test_x, test_y, _ = load(spec["data"], spec["data_home"])
    error = ProcessingError()
    reader = InputFormat.newConlluInputFormat()
    reader.setText(_conllu(train_x, train_y))
    train = Sentences()
    sentence = Sentence()
    while reader.nextSentence(sentence, error):
        train.push_back(sentence)
        sentence = Sentence()
    with PeakMemory() as memory:
        model_bytes = Trainer.train("morphodita_parsito", train, Sentences(), "none", "none",
                                    spec.get("parser_options", ""), error)
    if error.occurred():
        raise RuntimeError(error.message)
    with tempfile.NamedTemporaryFile(suffix=".udpipe", delete=False) as f:
        f.write(model_bytes if isinstance(model_bytes, bytes) else
                model_bytes.encode("latin-1"))
    model = Model.load(f.name)
    os.unlink(f.name)
    pipeline = Pipeline(model, "conllu", Pipeline.NONE, Pipeline.DEFAULT, "conllu")
    start = time.perf_counter()
    output = pipeline.process(_conllu(test_x, test_y, with_trees=False), error)
    predict_seconds = time.perf_counter() - start
    labelled = isinstance(test_y[0], tuple)
    row = dict(fit_s=memory.seconds, peak_mb=memory.peak_mb,
               predict_sent_per_s=len(test_x) / predict_seconds)
    row.update(scores(test_x, test_y, _read_conllu(output, labelled)))
    return row


WORKERS = {"sklstruct": work_sklstruct, "udpipe": work_udpipe, "heldout": work_heldout}


def run_worker(spec, timeout=None):
    """Run one measurement in a fresh interpreter; its JSON result, or ``{"error": ...}`` when
    it fails or does not end within ``timeout`` seconds."""
    try:
        done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                              check=False, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"not done in {timeout:.0f} s"}
    if done.returncode:
        return {"error": done.stderr.strip()[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ main
def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", nargs="+", default=["basque", "ptb"])
    p.add_argument("--grid", nargs="+", type=float, default=[0.003, 0.01, 0.03, 0.1])
    p.add_argument("--learners", action="store_true")
    p.add_argument("--no-udpipe", action="store_true")
    p.add_argument("--worker", default=None)
    args = p.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(WORKERS[spec["kind"]](spec)))
        return
    rows = []
    for data in args.data:
        base = dict(data=data, data_home=os.path.abspath(args.data_home))
        if len(args.grid) > 1:
            heldout = run_worker(dict(base, kind="heldout", grid=args.grid))
            C = float(max(heldout, key=heldout.get))
        else:  # one C given: no held-out selection
            heldout, C = {}, args.grid[0]
        print(f"{data}: held-out UAS by C {heldout}; C = {C}", flush=True)
        rows.append(dict(data=data, system="heldout", heldout_uas=heldout, C=C))
        runs = [("sklstruct projective", dict(kind="sklstruct", projective=True)),
                ("sklstruct non-projective", dict(kind="sklstruct", projective=False))]
        if data == "basque":
            runs.append(("sklstruct joint relations",
                         dict(kind="sklstruct", projective=True, relations="joint")))
        if not args.no_udpipe:
            options = "single_root=0" if data == "basque" else ""
            runs.append(("udpipe", dict(kind="udpipe", parser_options=options)))
        if args.learners and data == "basque":
            runs += [(f"learner={name}", dict(kind="sklstruct", projective=True, learner=name))
                     for name in LEARNERS]
        default_fit_s = None
        for system, spec in runs:
            row = dict(data=data, system=system, C=C if spec["kind"] == "sklstruct" else None)
            # every learner gets 5 times the default learner's time (the goal it is held to)
            timeout = 5 * default_fit_s if "learner" in spec and default_fit_s else None
            row.update(run_worker(dict(base, C=C, **spec), timeout=timeout))
            if system == "sklstruct projective":
                default_fit_s = row.get("fit_s")
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_json(args.json, rows, args.run)
    print_table([r for r in rows if r["system"] != "heldout"],
                ["data", "system", "C", "fit_s", "peak_mb", "uas", "las", "uas_nopunct",
                 "las_nopunct", "predict_sent_per_s", "rel_gap", "n_iter"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
