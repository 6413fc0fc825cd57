"""A crfsuite user's path, token dicts to a model: memory and time beside sklearn-crfsuite.

CoNLL-2000 chunking, full training set (8,936 sentences), official test set. The token dicts
are the CRFsuite chunking template plus lowercased words (``bench_defaults.py``: about 420k
binary attributes), as a sklearn-crfsuite user has them: ``{"w[0]": "Confidence", ...,
"__BOS__": True}``. Each case runs in a fresh process that builds the same dicts, and
reports its resident memory before the fit and its peak (``VmHWM``, the fit included):

``baseline``
    the dicts only;
``crfsuite-pa``
    ``sklearn_crfsuite.CRF(algorithm="pa", max_iterations=20)`` fitted on the dicts;
``sklstruct``
    ``make_sequence_pipeline(M3NSimplicialDecomposition(C=0.1, random_state=0))`` (every
    other parameter at its default) fitted on the dicts; then the prediction throughput of
    the fitted model (unary product and Viterbi) on the vectorised test set with ``n_jobs``
    1 and 2 (best and median of repeated calls, and the best CPU time of a call over all
    threads; the labels must be identical);
``forms``
    the input handling of the same fit on the vectorised data in every input form: a list
    of 8,936 CSR matrices with str labels, the same with int labels, the flat CSR matrix
    with ``lengths``, and the vectoriser's ``PackedSequences``: the time of the validation,
    stacking and label encoding alone (best of 5) and of the whole fit.

All cases run in one invocation (the machine is shared: compare ratios). The JSON holds the
rows and the ratios.

    python benchmarks/bench_pipeline_memory.py [--cases baseline crfsuite-pa sklstruct forms]
                                               [--json benchmarks/results/pipeline_memory.json]
"""

import gc
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import not_installed, parser, peak_rss_mb, print_table, write_json  # noqa: E402

CASES = ["baseline", "crfsuite-pa", "sklstruct", "forms"]


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb():
    return peak_rss_mb()


def token_dicts(words, pos):
    """A sentence's token dicts: the CRFsuite chunking attributes, ``name=value`` as
    ``{name: value}``, ``__BOS__`` and ``__EOS__`` as True."""
    from bench_defaults import crfsuite_chunking_attributes

    sentence = []
    for attributes in crfsuite_chunking_attributes(words, pos):
        token = {}
        for attribute in attributes:
            name, separator, value = attribute.partition("=")
            token[name] = value if separator else True
        sentence.append(token)
    return sentence


def load_dicts(data_home):
    from sklstruct.datasets import load_conll2000

    parts = []
    for subset in ("train", "test"):
        data = load_conll2000(data_home, subset=subset)
        parts.append([token_dicts(w, p) for w, p in zip(data.words, data.pos)])
        parts.append([[str(tag) for tag in tags] for tags in data.target])
    return parts


def _best_and_median(function, repeats, clock=time.perf_counter):
    times = []
    for _ in range(repeats):
        start = clock()
        function()
        times.append(clock() - start)
    return min(times), float(np.median(times))


def _crfsuite(row, X, y, X_test, y_test, iterations):
    import sklearn_crfsuite
    from sklstruct.metrics import chunk_f1_score

    model = sklearn_crfsuite.CRF(algorithm="pa", max_iterations=iterations)
    start = time.perf_counter()
    model.fit(X, y)
    row["fit_s"] = time.perf_counter() - start
    row["peak_MB"] = _peak_mb()
    row["chunk_F1"] = float(chunk_f1_score(y_test, model.predict(X_test)))


def _sklstruct(row, X, y, X_test, y_test, repeats):
    from sklstruct import M3NSimplicialDecomposition
    from sklstruct.metrics import chunk_f1_score
    from sklstruct.pipeline import make_sequence_pipeline

    pipe = make_sequence_pipeline(M3NSimplicialDecomposition(C=0.1, random_state=0))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X, y)
    row["fit_s"] = time.perf_counter() - start
    row["peak_MB"] = _peak_mb()
    model = pipe[-1]
    row.update(n_iter=int(model.n_iter_), n_features=int(model.n_features_in_),
               rel_gap=float(model.history_["gap"][-1] / model.history_["primal"][-1]))
    start = time.perf_counter()
    predicted = pipe.predict(X_test)
    row["pipeline_predict_s"] = time.perf_counter() - start
    row["chunk_F1"] = float(chunk_f1_score(y_test, predicted))
    X_vec = pipe[0].transform(X_test)
    n_tokens = int(sum(len(tags) for tags in y_test))
    labels = {}
    for n_jobs in (1, 2):
        model.set_params(n_jobs=n_jobs)
        labels[n_jobs] = np.concatenate(model.predict(X_vec))
        best, median = _best_and_median(lambda: model.predict(X_vec), repeats)
        row[f"predict_tokens_per_s_jobs{n_jobs}"] = n_tokens / best
        row[f"predict_tokens_per_s_jobs{n_jobs}_median"] = n_tokens / median
        # the CPU time of a call, all threads (the load of other work changes it less)
        row[f"predict_cpu_ms_jobs{n_jobs}"] = 1e3 * _best_and_median(
            lambda: model.predict(X_vec), repeats, time.process_time)[0]
    row["predict_same_labels"] = bool(np.array_equal(labels[1], labels[2]))
    row["peak_after_predict_MB"] = _peak_mb()


def _forms(row, X, y, repeats):
    from sklstruct import M3NSimplicialDecomposition
    from sklstruct._input import encode_targets
    from sklstruct.preprocessing import SequenceVectorizer

    vectorized = SequenceVectorizer().fit_transform(X)
    X_flat, lengths = getattr(vectorized, "X", None), getattr(vectorized, "lengths", None)
    if X_flat is None:  # (a vectoriser that returns a list of matrices)
        import scipy.sparse as sp

        lengths = np.array([x.shape[0] for x in vectorized])
        X_flat = sp.vstack(vectorized, format="csr")
    bounds = np.r_[0, np.cumsum(lengths)]
    X_list = [X_flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    classes = sorted({tag for tags in y for tag in tags})
    y_int = [np.searchsorted(classes, tags) for tags in y]
    y_flat = np.concatenate(y_int)
    forms = {"list_str": (X_list, y, None), "list_int": (X_list, y_int, None),
             "flat_lengths": (X_flat, y_flat, lengths)}
    if X_flat is not vectorized and not isinstance(vectorized, list):
        forms["packed_str"] = (vectorized, y, None)

    def prepare(X_form, y_form, lengths_form):
        model = M3NSimplicialDecomposition(C=0.1)
        _, labels, _ = model._validate_input(X_form, y_form, lengths_form, reset=True)
        encode_targets(labels)

    weights = {}
    for name, (X_form, y_form, lengths_form) in forms.items():
        row[f"prepare_s_{name}"] = _best_and_median(
            lambda X_form=X_form, y_form=y_form, lengths_form=lengths_form: prepare(
                X_form, y_form, lengths_form), repeats)[0]
        model = M3NSimplicialDecomposition(C=0.1, random_state=0)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_form, y_form, lengths=lengths_form)
        row[f"fit_s_{name}"] = time.perf_counter() - start
        weights[name] = model.w_
    row["same_weights"] = all(np.array_equal(w, weights["flat_lengths"])
                              for w in weights.values())
    row["peak_MB"] = _peak_mb()


def worker(case, args):
    """Run one case in this process; print its row as JSON."""
    X, y, X_test, y_test = load_dicts(args.data_home)
    gc.collect()
    row = {"case": case, "rss_before_MB": _rss_mb()}
    if case == "crfsuite-pa":
        _crfsuite(row, X, y, X_test, y_test, args.crf_iterations)
    elif case == "sklstruct":
        _sklstruct(row, X, y, X_test, y_test, args.repeats)
    elif case == "forms":
        _forms(row, X, y, 5)
    else:
        row["peak_MB"] = _peak_mb()
    print(json.dumps(row))


def run(case, args):
    missing = case == "crfsuite-pa" and not_installed("sklearn_crfsuite", "sklearn-crfsuite")
    if missing:
        return {"case": case, "error": missing}
    command = [sys.executable, os.path.abspath(__file__), "--worker", case, "--data-home",
               args.data_home, "--repeats", str(args.repeats), "--crf-iterations",
               str(args.crf_iterations)]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        return {"case": case, "error": out.stderr.strip()[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def ratios(rows):
    """The comparisons of one invocation."""
    by_case = {row["case"]: row for row in rows if "error" not in row}
    out = {}
    base = by_case.get("baseline", {}).get("peak_MB")
    crf, sk = by_case.get("crfsuite-pa"), by_case.get("sklstruct")
    if crf and sk:
        out["peak_sklstruct_over_crfsuite"] = sk["peak_MB"] / crf["peak_MB"]
        if base:
            out["above_baseline_sklstruct_over_crfsuite"] = (
                (sk["peak_MB"] - base) / (crf["peak_MB"] - base))
        out["fit_time_sklstruct_over_crfsuite"] = sk["fit_s"] / crf["fit_s"]
    if sk:
        out["predict_speedup_2_jobs"] = (sk["predict_tokens_per_s_jobs2"]
                                         / sk["predict_tokens_per_s_jobs1"])
    forms = by_case.get("forms")
    if forms:
        for name in ("list_str", "list_int", "packed_str"):
            if f"fit_s_{name}" in forms:
                out[f"fit_time_{name}_over_flat"] = (forms[f"fit_s_{name}"]
                                                     / forms["fit_s_flat_lengths"])
    return out


def main():
    p = parser(__doc__)
    p.add_argument("--cases", nargs="*", default=CASES, choices=CASES)
    p.add_argument("--repeats", type=int, default=30, help="predict calls timed per n_jobs")
    p.add_argument("--crf-iterations", type=int, default=20)
    p.add_argument("--worker", default=None)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args)
    rows = []
    for case in args.cases:
        rows.append(run(case, args))
        print(json.dumps(rows[-1]), flush=True)
    print()
    print_table(rows, ["case", "rss_before_MB", "peak_MB", "fit_s", "chunk_F1",
                       "predict_tokens_per_s_jobs1", "predict_tokens_per_s_jobs2", "error"])
    summary = ratios(rows)
    for name, value in summary.items():
        print(f"{name}: {value:.3f}")
    write_json(args.json, [*rows, {"case": "ratios", **summary}], args.run)


if __name__ == "__main__":
    main()
