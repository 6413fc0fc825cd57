"""The estimators with their defaults beside sklearn-crfsuite, each system in its own process.

Data sets:

conll2000
    CoNLL-2000 chunking, full training set (8,936 sentences), official test set, with the
    CRFsuite chunking template (words at -2..2, word bigrams (-1,0) and (0,1), POS at -2..2,
    POS bigrams and trigrams in the window, BOS/EOS) plus lowercased words at -2..2: about
    420k binary attributes. Test chunk F1 (conlleval semantics).
conll2002_esp
    CoNLL-2002 Spanish named entities, esp.train (8,323 sentences), test on esp.testb, with
    sklearn-crfsuite's tutorial features (``word2features``); test entity F1 (conlleval).
conll2000_pos
    CoNLL-2000's part-of-speech column as the labels (44 tags), full training set, official
    test set, with word-window features (:func:`word_window_attributes`, no POS among them);
    test token accuracy.
ocr
    OCR letters, train fold 1 (704 words), test the other folds; letter accuracy.

Systems: ``crfsuite-pa`` (sklearn-crfsuite passive-aggressive, 20 iterations),
``crfsuite-lbfgs`` (L-BFGS, c2=1, to convergence), ``linear-svc`` (per-token LinearSVC) and the
sklstruct estimators (``StructSVMCuttingPlane``, ``M3NExpGrad``, ``M3NExcessiveGap``,
``L1M3N``, ``M3NSimplicialDecomposition``) at ``C`` (0.1) with every other parameter at its
default unless ``--params`` says otherwise. Every fit runs in a fresh process that loads the
prepared data (features are built once and cached in ``--cache``); the row reports the fit's
wall time, the process's resident memory before the fit and its peak (``VmHWM``),
test quality, the certified relative duality gap and the objective.

A system may carry its own parameters, ``NAME{JSON}`` (on top of ``--params``; the row then
has a ``params`` field), so that settings are compared within one run.

``--curve`` records, at every check of a sklstruct fit, the time (without the time spent
scoring), the relative gap, the primal objective and the test quality.

The runs that the documentation renders are stored in ``benchmarks/results/defaults.json``,
one per ``--run`` name (default: the data set's name):

    python benchmarks/bench_defaults.py --dataset conll2000 --systems crfsuite-pa \\
        StructSVMCuttingPlane [--params '{"tol": 0.01}'] [--curve] [--run NAME] [--json PATH]
"""

import json
import os
import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import ROOT, not_installed, ocr_fold1, parser, peak_rss_mb, print_table, write_json  # noqa: E402

ESTIMATORS = ["StructSVMCuttingPlane", "M3NExpGrad", "M3NExcessiveGap", "L1M3N",
              "M3NSimplicialDecomposition"]
PEERS = ["crfsuite-pa", "crfsuite-lbfgs", "linear-svc"]
TEMPLATES = (
    [(("w", i),) for i in range(-2, 3)]
    + [(("w", -1), ("w", 0)), (("w", 0), ("w", 1))]
    + [(("lw", i),) for i in range(-2, 3)]
    + [(("pos", i),) for i in range(-2, 3)]
    + [(("pos", i), ("pos", i + 1)) for i in range(-2, 2)]
    + [(("pos", i), ("pos", i + 1), ("pos", i + 2)) for i in range(-2, 1)]
)


def crfsuite_chunking_attributes(words, pos):
    """The attribute strings of every token of a sentence (CRFsuite's chunking template plus
    lowercased words)."""
    fields = {"w": list(words), "lw": [w.lower() for w in words], "pos": list(pos)}
    n = len(words)
    tokens = []
    for t in range(n):
        attributes = []
        for template in TEMPLATES:
            if all(0 <= t + offset < n for _, offset in template):
                name = "|".join(f"{field}[{offset}]" for field, offset in template)
                value = "|".join(fields[field][t + offset] for field, offset in template)
                attributes.append(f"{name}={value}")
        tokens.append(attributes)
    tokens[0].append("__BOS__")
    tokens[-1].append("__EOS__")
    return tokens


def crfsuite_tutorial_attributes(words, pos):
    """The attribute strings of every token of a sentence: sklearn-crfsuite's tutorial
    features for CoNLL-2002 (``word2features``: bias, lowercased word, 3- and 2-character
    suffixes, case and digit flags, POS and its first two characters, the same of the
    neighbours at -1 and +1, BOS/EOS). A boolean feature is present when it is true, as
    crfsuite reads ``False`` as weight 0."""
    def own(prefix, word, tag):
        flags = [f"{prefix}{name}" for name, on in (("word.isupper()", word.isupper()),
                                                    ("word.istitle()", word.istitle()),
                                                    ("word.isdigit()", word.isdigit()))
                 if on]
        return [f"{prefix}word.lower()={word.lower()}", f"{prefix}postag={tag}",
                f"{prefix}postag[:2]={tag[:2]}"] + flags

    n = len(words)
    tokens = []
    for t, (word, tag) in enumerate(zip(words, pos)):
        attributes = ["bias", f"word[-3:]={word[-3:]}", f"word[-2:]={word[-2:]}"]
        attributes += own("", word, tag)
        attributes += own("-1:", words[t - 1], pos[t - 1]) if t > 0 else ["BOS"]
        attributes += own("+1:", words[t + 1], pos[t + 1]) if t + 1 < n else ["EOS"]
        tokens.append(attributes)
    return tokens


def word_window_attributes(words, pos=None):
    """The attribute strings of every token of a sentence for tagging parts of speech: the
    lowercased word and its neighbours at -2..2, the word itself, its 1- to 4-character
    prefixes and suffixes, case, digit and hyphen flags, the lowercased word bigrams (-1, 0)
    and (0, 1), and BOS/EOS (``pos`` is not read)."""
    lower = [w.lower() for w in words]
    n = len(words)
    tokens = []
    for t, word in enumerate(words):
        attributes = ["bias", f"w={word}"]
        attributes += [f"lw[{k}]={lower[t + k]}" for k in range(-2, 3) if 0 <= t + k < n]
        attributes += [f"prefix{k}={lower[t][:k]}" for k in range(1, 5) if len(word) >= k]
        attributes += [f"suffix{k}={lower[t][-k:]}" for k in range(1, 5) if len(word) >= k]
        attributes += [name for name, on in (("isupper", word.isupper()),
                                             ("istitle", word.istitle()),
                                             ("isdigit", word.isdigit()),
                                             ("hasdigit", any(c.isdigit() for c in word)),
                                             ("hyphen", "-" in word)) if on]
        if t > 0:
            attributes.append(f"lw[-1]|lw[0]={lower[t - 1]}|{lower[t]}")
        if t + 1 < n:
            attributes.append(f"lw[0]|lw[1]={lower[t]}|{lower[t + 1]}")
        tokens.append(attributes)
    tokens[0].append("__BOS__")
    tokens[-1].append("__EOS__")
    return tokens


def _vectorize(sentences, vocabulary, grow):
    rows, columns = [], []
    lengths = []
    row = 0
    for sentence in sentences:
        lengths.append(len(sentence))
        for attributes in sentence:
            for attribute in attributes:
                column = vocabulary.get(attribute)
                if column is None and grow:
                    column = vocabulary[attribute] = len(vocabulary)
                if column is not None:
                    rows.append(row)
                    columns.append(column)
            row += 1
    return rows, columns, np.array(lengths), row


def prepare(dataset, data_home, cache):
    """Build the data set once; return the path of its cache folder."""
    folder = os.path.join(cache, dataset)
    if os.path.exists(os.path.join(folder, "done")):
        return folder
    os.makedirs(folder, exist_ok=True)
    if dataset == "ocr":
        X, y, X_test, y_test = ocr_fold1(data_home)
        parts = {"train": (sp.csr_matrix(np.vstack(X)), y), "test": (
            sp.csr_matrix(np.vstack(X_test)), y_test)}
        attributes = {name: [[[f"p{j}" for j in np.flatnonzero(row)] for row in x]
                             for x in xs] for name, xs in (("train", X), ("test", X_test))}
    else:
        from sklstruct.datasets import load_conll2000, load_conll2002

        parts, attributes, vocabulary = {}, {}, {}
        for name in ("train", "test"):
            if dataset == "conll2000":
                data = load_conll2000(data_home, subset=name)
                template = crfsuite_chunking_attributes
            elif dataset == "conll2000_pos":
                data = load_conll2000(data_home, subset=name)
                data.target = [list(tags) for tags in data.pos]
                template = word_window_attributes
            else:
                data = load_conll2002(data_home, subset="train" if name == "train"
                                      else "testb", language="esp")
                template = crfsuite_tutorial_attributes
            sentences = [template(w, p) for w, p in zip(data.words, data.pos)]
            rows, columns, lengths, n_rows = _vectorize(sentences, vocabulary,
                                                        grow=name == "train")
            attributes[name] = sentences
            parts[name] = (rows, columns, lengths, n_rows, data.target)
        n_features = len(vocabulary)
        for name, (rows, columns, lengths, n_rows, target) in parts.items():
            X = sp.csr_matrix((np.ones(len(rows)), (rows, columns)), shape=(n_rows, n_features))
            splits = np.cumsum(lengths)[:-1]
            parts[name] = ([X[a:b] for a, b in zip(np.r_[0, splits], np.r_[splits, n_rows])],
                           list(target))
        parts = {name: (sp.vstack(xs, format="csr"), ys) for name, (xs, ys) in parts.items()}
    for name, (X, y) in parts.items():
        sp.save_npz(os.path.join(folder, f"X_{name}.npz"), X)
        with open(os.path.join(folder, f"y_{name}.pkl"), "wb") as f:
            pickle.dump(y, f)
        with open(os.path.join(folder, f"attributes_{name}.pkl"), "wb") as f:
            pickle.dump(attributes[name], f)
    open(os.path.join(folder, "done"), "w").close()
    return folder


def _load(folder, name):
    X = sp.load_npz(os.path.join(folder, f"X_{name}.npz")).tocsr()
    with open(os.path.join(folder, f"y_{name}.pkl"), "rb") as f:
        y = pickle.load(f)
    lengths = [len(labels) for labels in y]
    splits = np.cumsum(lengths)[:-1]
    bounds = zip(np.r_[0, splits], np.r_[splits, X.shape[0]])
    return [X[a:b] for a, b in bounds], y


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _quality(dataset, y_true, y_pred):
    from sklstruct.metrics import chunk_f1_score, token_accuracy

    if dataset not in ("ocr", "conll2000_pos"):
        return "chunk_F1", float(chunk_f1_score(y_true, y_pred))
    name = "letter_accuracy" if dataset == "ocr" else "token_accuracy"
    return name, float(token_accuracy(y_true, y_pred))


def worker(system, dataset, folder, C, params, curve):
    """Fit one system on prepared data in this process; print one JSON row."""
    row = {"system": system, "dataset": dataset}
    if system.startswith("crfsuite"):
        import sklearn_crfsuite

        with open(os.path.join(folder, "attributes_train.pkl"), "rb") as f:
            X = pickle.load(f)
        with open(os.path.join(folder, "attributes_test.pkl"), "rb") as f:
            X_test = pickle.load(f)
        with open(os.path.join(folder, "y_train.pkl"), "rb") as f:
            y = [list(map(str, labels)) for labels in pickle.load(f)]
        with open(os.path.join(folder, "y_test.pkl"), "rb") as f:
            y_test = pickle.load(f)
        model = sklearn_crfsuite.CRF(algorithm="pa", max_iterations=20) \
            if system == "crfsuite-pa" else sklearn_crfsuite.CRF(algorithm="lbfgs", c2=1.0)
        row["rss_before_MB"] = _rss_mb()
        start = time.perf_counter()
        model.fit(X, y)
        row["fit_s"] = time.perf_counter() - start
        predicted = [np.array(p) for p in model.predict(X_test)]
        y_test = [np.array(list(map(str, labels))) for labels in y_test]
    else:
        X, y = _load(folder, "train")
        X_test, y_test = _load(folder, "test")
        if system == "linear-svc":
            from sklearn.svm import LinearSVC

            model = LinearSVC(C=C)
            row["rss_before_MB"] = _rss_mb()
            start = time.perf_counter()
            model.fit(sp.vstack(X), np.concatenate(y))
            row["fit_s"] = time.perf_counter() - start
            flat = model.predict(sp.vstack(X_test))
            predicted = np.split(flat, np.cumsum([len(t) for t in y_test])[:-1])
        else:
            import sklstruct

            model = getattr(sklstruct, system)(C=C, **params)
            records, scoring = [], [0.0]
            if curve:
                model.set_params(callback=_curve_callback(dataset, X_test, y_test, records,
                                                          scoring))
            row["rss_before_MB"] = _rss_mb()
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.fit(X, y)
            row["fit_s"] = time.perf_counter() - start - scoring[0]
            row["warning"] = "; ".join(str(w.message) for w in caught)[:200]
            predicted = model.predict(X_test)
            h = model.history_
            row.update(n_iter=int(model.n_iter_), objective=float(h["primal"][-1]),
                       rel_gap=float(h["gap"][-1] / abs(h["primal"][-1])))
            if curve:
                row["curve"] = records
    row["peak_RSS_MB"] = peak_rss_mb()
    name, value = _quality(dataset, y_test, predicted)
    row[name] = value
    print(json.dumps(row))


def _curve_callback(dataset, X_test, y_test, records, scoring):
    """At every check, the test quality of the current weights (its time is subtracted)."""
    from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

    batch = SequenceBatch(sp.vstack(X_test, format="csr"),
                          offsets_from_lengths([x.shape[0] for x in X_test]))

    def callback(estimator, info):
        start = time.perf_counter()
        structure = estimator.structure_
        if info["w"] is not None and getattr(estimator, "token_map_", None) is None:
            labels = structure.decode(batch, *structure.potentials(batch, info["w"]))
            predicted = np.split(estimator.classes_[labels], batch.offsets[1:-1])
            name, value = _quality(dataset, y_test, predicted)
            records.append({"time": info["time"] - scoring[0], "iteration": info["iteration"],
                            "rel_gap": info["gap"] / abs(info["primal"]),
                            "primal": info["primal"], name: value})
            print("CURVE " + json.dumps(records[-1]), file=sys.stderr, flush=True)
        scoring[0] += time.perf_counter() - start
        return False

    return callback


def run(system, dataset, folder, C, params, curve, timeout):
    missing = system.startswith("crfsuite") and not_installed("sklearn_crfsuite",
                                                              "sklearn-crfsuite")
    if missing:
        return {"system": system, "dataset": dataset, "error": missing}
    command = [sys.executable, os.path.abspath(__file__), "--worker", system, "--dataset",
               dataset, "--folder", folder, "--C", str(C), "--params", json.dumps(params)]
    try:
        out = subprocess.run(command + (["--curve"] if curve else []), capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired as stopped:
        # the fit did not end in time: report its last check (with --curve)
        lines = (stopped.stderr or b"").decode().splitlines()
        curve_rows = [json.loads(line[6:]) for line in lines if line.startswith("CURVE ")]
        row = {"system": system, "dataset": dataset, "error": f"not done in {timeout:g} s"}
        if curve_rows:
            row["last_check"] = curve_rows[-1]
        return row
    if out.returncode:
        return {"system": system, "dataset": dataset, "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = parser(__doc__)
    p.add_argument("--dataset", choices=["conll2000", "conll2002_esp", "conll2000_pos", "ocr"],
                   default="conll2000")
    p.add_argument("--systems", nargs="*", default=PEERS[:2] + ESTIMATORS)
    p.add_argument("--C", type=float, default=0.1)
    p.add_argument("--params", default="{}", help="JSON dict of estimator parameters")
    p.add_argument("--curve", action="store_true")
    p.add_argument("--cache", default=os.path.join(ROOT, "benchmarks", ".cache"))
    p.add_argument("--timeout", type=float, default=None,
                   help="stop a system's process after this many seconds (its row then holds "
                        "its last check with --curve)")
    p.add_argument("--worker", default=None)
    p.add_argument("--folder", default=None)
    args = p.parse_args()
    params = json.loads(args.params)
    if args.worker:
        return worker(args.worker, args.dataset, args.folder, args.C, params, args.curve)
    folder = prepare(args.dataset, args.data_home, args.cache)
    rows = []
    for entry in args.systems:
        # "NAME" or "NAME{JSON}": that system's own parameters on top of --params
        system, brace, own = entry.partition("{")
        system_params = dict(params, **json.loads(brace + own)) if brace else params
        rows.append(run(system, args.dataset, folder, args.C,
                        system_params if system in ESTIMATORS else {}, args.curve,
                        args.timeout))
        if brace:
            rows[-1]["params"] = system_params
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "curve"}), flush=True)
    quality = {"ocr": "letter_accuracy", "conll2000_pos": "token_accuracy"}.get(args.dataset,
                                                                                "chunk_F1")
    print_table(rows, ["system", "fit_s", "rss_before_MB", "peak_RSS_MB", quality, "rel_gap",
                       "objective", "n_iter", "error"])
    write_json(args.json, rows, args.run or args.dataset)


if __name__ == "__main__":
    main()
