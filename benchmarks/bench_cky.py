"""Speed of the CKY kernels on a random grammar, in sentences per second (one thread).

The grammar has ``--symbols`` symbols, ``--labels`` labels (a third of them collapsed unary
chains, a third lexical) and ``--rules`` distinct random binary rules; span and rule scores
are standard normal. For every sentence length, a batch of sentences is decoded
``--repeats`` times, interleaving the kernels, and the best time is kept:
``cky_decode`` (Viterbi), ``cky_kbest`` for ``--k``, ``cky_best_other`` (excluding the
Viterbi tree, so the 2-best lists run), ``log_partition`` and ``inside_outside``.

    python benchmarks/bench_cky.py [--lengths 10 15 25 40] [--repeats 3] [--json PATH]
"""

import itertools
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parser, print_table, write_json  # noqa: E402

from sklstruct._inference.cfg import (  # noqa: E402
    Grammar,
    cky_best_other,
    cky_decode,
    cky_kbest,
    inside_outside,
    log_partition,
    span_offsets,
)


def random_grammar(rng, n_symbols, n_labels, n_rules):
    top = rng.integers(n_symbols, size=n_labels)
    chain = rng.random(n_labels) < 1 / 3
    bottom = np.where(chain, rng.integers(n_symbols, size=n_labels), top)
    lexical = rng.random(n_labels) < 1 / 3
    every_rule = np.array(list(itertools.product(range(n_symbols), repeat=3)))
    rules = every_rule[rng.choice(len(every_rule), size=n_rules, replace=False)]
    root = np.zeros(n_symbols, dtype=bool)
    root[rng.choice(n_symbols, size=max(1, n_symbols // 6), replace=False)] = True
    return Grammar(top, bottom, lexical, ~lexical, root, rules)


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 15, 25, 40])
    p.add_argument("--symbols", type=int, default=30)
    p.add_argument("--labels", type=int, default=60)
    p.add_argument("--rules", type=int, default=500)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=float, default=0.5,
                   help="seconds of Viterbi per batch (sets the number of sentences)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    grammar = random_grammar(rng, args.symbols, args.labels, args.rules)
    rule_scores = rng.normal(size=args.rules)
    rows = []
    for n in args.lengths:
        probe = np.array([n])
        scores = rng.normal(size=(span_offsets(probe)[-1], args.labels))
        start = time.perf_counter()
        cky_decode(scores, probe, grammar, rule_scores)
        per_sentence = time.perf_counter() - start
        lengths = np.full(max(3, int(args.budget / per_sentence)), n)
        span_scores = rng.normal(size=(span_offsets(lengths)[-1], args.labels))
        best, viterbi_scores = cky_decode(span_scores, lengths, grammar, rule_scores)
        runs = {
            "cky_decode": lambda: cky_decode(span_scores, lengths, grammar, rule_scores),
            f"cky_kbest k={args.k}": lambda: cky_kbest(span_scores, lengths, grammar,
                                                       rule_scores, k=args.k),
            "cky_best_other": lambda: cky_best_other(span_scores, lengths, grammar, best,
                                                     rule_scores),
            "log_partition": lambda: log_partition(span_scores, lengths, grammar,
                                                   rule_scores),
            "inside_outside": lambda: inside_outside(span_scores, lengths, grammar,
                                                     rule_scores),
        }
        times = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        for name in runs:
            seconds = min(times[name])
            rows.append({"n": n, "kernel": name, "sentences": len(lengths),
                         "seconds": seconds, "sentences/s": len(lengths) / seconds,
                         "with tree": float(np.isfinite(viterbi_scores).mean())})
    print(f"grammar: {args.symbols} symbols, {args.labels} labels, {args.rules} rules; "
          f"best of {args.repeats}, one thread")
    print_table(rows, ["n", "kernel", "sentences", "seconds", "sentences/s", "with tree"])
    write_json(args.json, rows, args.run)


if __name__ == "__main__":
    main()
