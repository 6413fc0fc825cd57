"""Constituency parsing with max-margin grammars on the Penn Treebank sample.

Data: the WSJ sample of ``--data-home``/ptb_sample (3,914 sentences of files wsj_0001-0199;
``files.tsv`` gives the file boundaries), files wsj_0001-0159 for training and wsj_0160-0199
for testing, gold part-of-speech tags as input, as in the papers. Sections (``--sections``):

- ``enumeration``: CKY, loss-augmented CKY (bracket and 0/1 loss), k-best CKY and
  inside-outside of ConstituencyTree against enumeration of every tree of tiny random
  grammars (the test suite's references): cases checked and largest deviations.
- ``f1``: sentences of at most 15 words. Labelled-bracket F1 (evalb, COLLINS.prm) of the
  relative-frequency PCFG read from the training trees and parsed by the same CKY (the
  paper's comparison), of nltk's ViterbiParser on that PCFG (when nltk is installed; the
  first ``--nltk-sentences`` test sentences), and of the max-margin grammar without span
  features (Psi_CFG: rules, labels, preterminals from word features) and with them.
- ``long``: the span-feature model of ``f1`` (trained on sentences of at most 15 words) and
  the PCFG on every test sentence of at most 40 words: F1 and parsing speed (sentences/s).
- ``paper``: Joachims, Finley and Yu (2009), Table 1 and Figures 1, 4, 5 on this fragment:
  1-slack with the label cache (10 per example) against n-slack, the paper's
  Delta = 100 [y != ybar] (through 2-best CKY) and Psi_CFG features, for training sets of
  ``--sizes`` sentences: fit time, calls of the separation oracle (single sentences),
  support vectors (dual variables > 0), iterations, test F1. ``C`` is the sum convention's,
  ``C = C_J / n`` with the paper's ``C_J``, fixed at ``--paper-C`` (a loss of 1 with
  ``C / 100`` is the same problem); the tolerance is ``--tol`` (relative duality gap).
- ``learners``: every learner on the bracket loss and Psi_CFG features (the first
  ``--learner-size`` training sentences, ``C = --learner-C``): time to a relative duality
  gap of ``--tol``, iterations, oracle calls, objective and test F1. ``L1M3N`` minimises its
  own (l1) objective: its LP cutting planes certify ``--tol``; its EM stops when the l1
  objective stalls, with a looser certified gap (both rows are kept).

``C`` of the ``f1`` models (``--C``, ``--span-C``) was chosen on files wsj_0140-0159 as a
development set (training on wsj_0001-0139) among 0.1, 0.3, 1, 3, 10.

    python benchmarks/bench_cfg.py [--sections enumeration f1 long paper learners]
        [--quick] [--json PATH] [--run NAME]

``--quick`` shrinks every section (smaller training sets, fewer sizes) to a few minutes.
With ``--json PATH`` the rows of every section are stored as a run (``default``, or ``quick``
with ``--quick``, or ``--run``) of PATH, beside the script's arguments (the committed run:
``--json benchmarks/results/cfg.json``); without it nothing is written.
"""

import csv
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir))

from _common import DEFAULT_RUN, parser, print_table, write_json  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from sklstruct import (  # noqa: E402
    L1M3N,
    M3NExcessiveGap,
    M3NExpGrad,
    M3NSimplicialDecomposition,
    StructSVMCuttingPlane,
)
from sklstruct.parsing import (  # noqa: E402
    ConstituencyParser,
    PCFGParser,
    SpanFeatures,
    bracket_scores,
    read_ptb_trees,
    tree_tags,
    tree_words,
)


# ----------------------------------------------------------------------------- data
def load(data_home):
    """``(trees, file_numbers)`` of the Penn Treebank sample."""
    folder = os.path.join(data_home, "ptb_sample")
    trees = read_ptb_trees(os.path.join(folder, "treebank.mrg.gz"))
    files = []
    with open(os.path.join(folder, "files.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            files += [int(row["file"][4:8])] * int(row["n_sentences"])
    assert len(files) == len(trees)
    return trees, np.array(files)


def split(trees, files, first, last, max_words):
    """Tagged sentences and trees of the files ``first..last`` of at most ``max_words``."""
    kept = [t for t, f in zip(trees, files) if first <= f <= last
            and len(tree_words(t)) <= max_words]
    return [list(zip(tree_words(t), tree_tags(t))) for t in kept], kept


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def evaluate(parser, X, y):
    """Bracket scores of the parser's trees and its parsing speed."""
    predicted, seconds = timed(parser.predict, X)
    scores = bracket_scores(y, predicted)
    return {"f1": scores["f1"], "precision": scores["precision"],
            "recall": scores["recall"], "exact": scores["exact_match"],
            "sentences_per_s": len(X) / seconds}


def learner_row(learner):
    history = learner.history_
    row = {"iterations": int(learner.n_iter_), "primal": float(history["primal"][-1]),
           "gap": float(history["gap"][-1]),
           "oracle_calls": int(history["oracle_calls"][-1])}
    if hasattr(learner, "dual_coef_"):
        row["support_vectors"] = int(np.count_nonzero(np.asarray(learner.dual_coef_) > 0))
    return row


# ----------------------------------------------------------------------------- sections
def section_enumeration(args):
    """Oracles of ConstituencyTree and the CKY kernels against enumeration."""
    from scipy.special import logsumexp

    from sklstruct._inference.cfg import cky_kbest
    from sklstruct.structures import ConstituencyTree, Grammar
    from sklstruct.utils._sequences import SequenceBatch
    from tests._cfg_reference import enumerate_trees, random_cfg_problem

    cases = 30 if args.quick else 200
    worst = {"decode": 0.0, "loss_augmented": 0.0, "zero_one": 0.0, "kbest": 0.0,
             "log_partition": 0.0, "marginals": 0.0}
    n_trees = 0
    for seed in range(cases):
        spec, X, Y, lengths, n_words = random_cfg_problem(seed, n_sentences=3, max_length=4)
        grammar = Grammar(**spec)
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        batch = SequenceBatch(X, offsets)
        rng = np.random.default_rng(seed)
        for loss_type in ("brackets", "zero_one"):
            structure = ConstituencyTree(grammar, loss_type=loss_type).bind(
                X.shape[1], grammar.n_labels + 1)
            w = rng.normal(size=structure.size_joint_feature_)
            unary, pairwise = structure.potentials(batch, w)
            if loss_type == "brackets":
                labels = structure.decode(batch, unary, pairwise)
                _augmented, losses, scores = structure.loss_augmented_decode(
                    batch, unary, pairwise, Y)
                node, _pair, log_z = structure.marginals(batch, unary, pairwise)
                _kbest, kscores, counts = cky_kbest(unary[:, 1:] - unary[:, :1], n_words,
                                                   grammar, pairwise, k=5)
            else:
                _, zo_losses, zo_scores = structure.loss_augmented_decode(
                    batch, unary, pairwise, Y)
                true_scores = structure.score(batch, unary, pairwise, Y)
            for i, n in enumerate(n_words):
                rows = slice(offsets[i], offsets[i + 1])
                sub = batch.take([i])
                trees, _, _ = enumerate_trees(int(n), **spec)
                trees = trees + 1
                values = np.array([w @ structure.joint_feature(sub, t) for t in trees])
                if loss_type == "zero_one":
                    loss = (np.any(trees != Y[rows], axis=1)).astype(float)
                    best = max((loss + values - true_scores[i]).max(), 0.0)
                    worst["zero_one"] = max(worst["zero_one"], abs(
                        zo_losses[i] + zo_scores[i] - true_scores[i] - best))
                    continue
                n_trees += len(trees)
                loss = np.array([structure.loss(sub, Y[rows], t)[0] for t in trees])
                got = w @ structure.joint_feature(sub, labels[rows])
                worst["decode"] = max(worst["decode"], abs(got - values.max()))
                worst["loss_augmented"] = max(worst["loss_augmented"], abs(
                    losses[i] + scores[i] - (values + loss).max()))
                constant = unary[rows, 0].sum()
                ranked = np.sort(values)[::-1][:5] - constant
                worst["kbest"] = max(worst["kbest"], float(np.max(np.abs(
                    kscores[i, :counts[i]] - ranked))) if counts[i] == min(5, len(trees))
                    else np.inf)
                expected = logsumexp(values)
                worst["log_partition"] = max(worst["log_partition"],
                                             abs(log_z[i] - expected))
                p = np.exp(values - expected)
                onehot = np.zeros((len(trees),) + node[rows].shape)
                for t, tree in enumerate(trees):
                    onehot[t, np.arange(tree.shape[0]), tree] = 1.0
                worst["marginals"] = max(worst["marginals"], float(np.max(np.abs(
                    node[rows] - np.einsum("t,tsk->sk", p, onehot)))))
    row = {"cases": cases, "trees_enumerated": n_trees,
           **{f"max_error_{k}": float(v) for k, v in worst.items()}}
    print_table([row], list(row))
    return [row]


def section_f1(args, data):
    X_train, y_train, X_test, y_test = data["short"]
    rows = []
    pcfg, seconds = timed(PCFGParser(horizontal=args.horizontal,
                                     vertical=args.vertical).fit, X_train, y_train)
    rows.append({"model": "relative-frequency PCFG (CKY)", "fit_s": seconds,
                 **evaluate(pcfg, X_test, y_test)})
    print_table(rows[-1:], list(rows[-1]))
    rows += nltk_check(args, pcfg, X_test, y_test)
    for name, span_features in (("max-margin, Psi_CFG features", False),
                                ("max-margin, span features", True)):
        learner = M3NSimplicialDecomposition(tol=args.tol, random_state=0)
        model, seconds = timed(ConstituencyParser(
            args.span_C if span_features else args.C, learner=learner,
            features=SpanFeatures(span_features=span_features), horizontal=args.horizontal,
            vertical=args.vertical).fit, X_train, y_train)
        rows.append({"model": name, "fit_s": seconds, **evaluate(model, X_test, y_test),
                     **learner_row(model.learner_)})
        print_table(rows[-1:], list(rows[-1]))
        data["span_model" if span_features else "basic_model"] = model
    data["pcfg"] = pcfg
    return rows


def nltk_check(args, pcfg, X_test, y_test):
    """nltk's ViterbiParser on the PCFG, on the first ``--nltk-sentences`` test sentences."""
    try:
        from nltk.parse import ViterbiParser
    except ImportError:
        print("nltk is not installed: no outside check of the PCFG")
        return []
    count = min(args.nltk_sentences, len(X_test))
    X, y = X_test[:count], y_test[:count]
    try:
        viterbi = ViterbiParser(pcfg.to_nltk_grammar(), max_time=None)
    except TypeError:  # nltk < 3.10 has no time limit
        viterbi = ViterbiParser(pcfg.to_nltk_grammar())
    start = time.perf_counter()
    trees, log_probs = [], []
    for sentence in X:
        words, tags = [w for w, _ in sentence], [t for _, t in sentence]
        parses = list(viterbi.parse(tags))
        if parses:
            trees.append(pcfg.from_nltk_parse(parses[0], words))
            log_probs.append(np.log(parses[0].prob()))
        else:  # the flat tree of PCFGParser's fallback
            trees.append((pcfg.grammar_.root_label, *[(t, w) for w, t in sentence]))
            log_probs.append(-np.inf)
    seconds = time.perf_counter() - start
    ours, _ = timed(pcfg.predict, X)
    _, ours_log_probs = pcfg._decode([([w for w, _ in s], [t for _, t in s]) for s in X])
    scores = bracket_scores(y, trees)
    parsed = np.isfinite(log_probs)
    row = {"model": "nltk ViterbiParser on the PCFG", "f1": scores["f1"],
           "precision": scores["precision"], "recall": scores["recall"],
           "exact": scores["exact_match"], "sentences_per_s": count / seconds,
           "test_sentences": count, "nltk_parsed": int(parsed.sum()),
           "same_tree_as_cky": int(sum(a == b for a, b in zip(trees, ours))),
           # a different tree of the same probability is a tie
           "same_log_prob_as_cky": int(np.sum(np.isclose(np.asarray(log_probs)[parsed],
                                                         ours_log_probs[parsed],
                                                         rtol=1e-12, atol=0))),
           "cky_f1_same_sentences": bracket_scores(y, ours)["f1"]}
    print_table([row], list(row))
    return [row]


def section_long(args, data):
    X_test, y_test = data["long"]
    rows = []
    for name, model in (("max-margin, span features", data.get("span_model")),
                        ("relative-frequency PCFG (CKY)", data.get("pcfg"))):
        if model is None:
            continue
        rows.append({"model": name, "test_sentences": len(X_test),
                     **evaluate(model, X_test, y_test)})
        print_table(rows[-1:], list(rows[-1]))
    return rows


def section_paper(args, data):
    X_train, y_train, X_test, y_test = data["short"]
    sizes = [s for s in args.sizes if s <= len(X_train)] or [len(X_train)]
    rows = []
    for n in sizes:
        for variant in ("1-slack", "n-slack"):
            learner = StructSVMCuttingPlane(tol=args.tol, variant=variant, cache_size=10)
            model, seconds = timed(ConstituencyParser(
                args.paper_C / 100.0, learner=learner,
                features=SpanFeatures(span_features=False), horizontal=args.horizontal,
                vertical=args.vertical, loss="zero_one").fit, X_train[:n], y_train[:n])
            rows.append({"n": n, "variant": variant, "fit_s": seconds,
                         "grammar_rules": model.grammar_.grammar.n_rules,
                         **learner_row(model.learner_),
                         "f1": evaluate(model, X_test, y_test)["f1"]})
            print_table(rows[-1:], list(rows[-1]))
    return rows


LEARNERS = {
    "StructSVMCuttingPlane 1-slack": lambda C, tol: StructSVMCuttingPlane(
        C=C, tol=tol, variant="1-slack"),
    "StructSVMCuttingPlane n-slack": lambda C, tol: StructSVMCuttingPlane(
        C=C, tol=tol, variant="n-slack"),
    "M3NSimplicialDecomposition (RSD)": lambda C, tol: M3NSimplicialDecomposition(
        C=C, tol=tol, random_state=0),
    "M3NSimplicialDecomposition (BCFW)": lambda C, tol: M3NSimplicialDecomposition(
        C=C, tol=tol, max_points=1, random_state=0),
    "M3NExpGrad (online)": lambda C, tol: M3NExpGrad(C=C, tol=tol, max_iter=1000,
                                                     random_state=0),
    "M3NExcessiveGap": lambda C, tol: M3NExcessiveGap(C=C, tol=tol, max_iter=2000),
    "L1M3N (cutting plane, l1 objective)": lambda C, tol: L1M3N(C=C, tol=tol,
                                                                solver="cutting_plane"),
    "L1M3N (EM, l1 objective)": lambda C, tol: L1M3N(C=C, tol=tol, solver="em"),
}


def section_learners(args, data):
    X_train, y_train, X_test, y_test = data["short"]
    n = min(args.learner_size, len(X_train))
    rows = []
    for name, make in LEARNERS.items():
        if args.learners and not any(part in name for part in args.learners):
            continue
        model, seconds = timed(ConstituencyParser(
            args.learner_C, learner=make(args.learner_C, args.tol),
            features=SpanFeatures(span_features=False),
            horizontal=args.horizontal, vertical=args.vertical).fit, X_train[:n], y_train[:n])
        history = model.learner_.history_
        reached = np.flatnonzero(np.asarray(history["gap"])
                                 <= args.tol * np.abs(np.asarray(history["primal"])))
        rows.append({"learner": name, "n": n, "fit_s": seconds,
                     "converged": bool(reached.size),
                     "time_to_tol_s": float(history["time"][reached[0]]) if reached.size
                     else None, **learner_row(model.learner_),
                     "f1": evaluate(model, X_test, y_test)["f1"]})
        print_table(rows[-1:], list(rows[-1]))
    return rows


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sections", nargs="+",
                   default=["enumeration", "f1", "long", "paper", "learners"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--horizontal", type=int, default=1)
    p.add_argument("--vertical", type=int, default=1)
    p.add_argument("--C", type=float, default=3.0,
                   help="C of the Psi_CFG model of 'f1' (bracket loss)")
    p.add_argument("--span-C", type=float, default=1.0, help="C of the span-feature model")
    p.add_argument("--learner-C", type=float, default=1.0, help="C of 'learners'")
    p.add_argument("--paper-C", type=float, default=2.0,
                   help="C with the paper's loss of 100 (C_J / n in its terms)")
    p.add_argument("--tol", type=float, default=0.01)
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400, 812])
    p.add_argument("--learner-size", type=int, default=200)
    p.add_argument("--learners", nargs="*", default=None,
                   help="substrings of the learners to run in 'learners' (default: all)")
    p.add_argument("--nltk-sentences", type=int, default=110)
    args = p.parse_args()
    if args.quick:
        args.sizes = [s for s in args.sizes if s <= 200]
        args.learner_size = min(args.learner_size, 100)
        args.nltk_sentences = min(args.nltk_sentences, 20)
    trees, files = load(args.data_home)
    data = {}
    X_train, y_train = split(trees, files, 1, 159, 15)
    if args.quick:
        X_train, y_train = X_train[:300], y_train[:300]
    data["short"] = (X_train, y_train) + split(trees, files, 160, 199, 15)
    data["long"] = split(trees, files, 160, 199, 40)
    print(f"training sentences (<= 15 words): {len(X_train)}; test: "
          f"{len(data['short'][2])} (<= 15 words), {len(data['long'][0])} (<= 40 words)")
    results = {}
    for section in args.sections:
        print(f"\n== {section}")
        if section == "enumeration":
            results[section] = section_enumeration(args)
        elif section == "long" and "span_model" not in data:
            results["f1"] = results.get("f1") or section_f1(args, data)
            results[section] = section_long(args, data)
        else:
            results[section] = globals()[f"section_{section}"](args, data)
    write_json(args.json, {"arguments": vars(args), **results},
               args.run or ("quick" if args.quick else DEFAULT_RUN))


if __name__ == "__main__":
    main()
