"""Throughput of the chain inference oracles on the CoNLL-2000 chunking training set.

Random unary scores (one row per token, one column per chunk tag) and a random transition
matrix are laid over the real sentence lengths of CoNLL-2000, and every oracle is timed (best
of ``--repeat`` runs) in tokens per second: the compiled kernels on one and two threads, and
NumPy implementations of Viterbi and forward-backward that process all sentences in lock-step
by position.

Usage::

    python benchmarks/bench_oracles.py [--data-home DIR] [--json results.json]
"""

import argparse
import gzip
import json
import os
import platform
import sys
import time

import numpy as np

from sklstruct._inference.chain import forward_backward, loss_augmented_viterbi, viterbi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the lock-step NumPy dynamic programmes are the tests' references (tests/_chain_reference.py)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from _chain_reference import forward_backward_lockstep, viterbi_lockstep  # noqa: E402

DEFAULT_DATA_HOME = os.path.join(ROOT, "..", "shared", "data")


def read_conll_tags(path):
    """Read the chunk tag sequences of a gzipped CoNLL file (last column, blank-line separated).

    Returns
    -------
    tags : list of str
        The tag of every token, sentences concatenated.
    lengths : ndarray of int64
        Number of tokens in each sentence.
    """
    tags, lengths, current = [], [], 0
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if not fields:
                if current:
                    lengths.append(current)
                current = 0
            elif fields[0] != "-DOCSTART-":
                tags.append(fields[-1])
                current += 1
    if current:
        lengths.append(current)
    return tags, np.asarray(lengths, dtype=np.int64)


def best_time(function, repeat):
    """Best wall-clock time of ``repeat`` calls of ``function``."""
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        function()
        times.append(time.perf_counter() - tic)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-home", default=DEFAULT_DATA_HOME)
    parser.add_argument("--json", default=None, help="write the results to this file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    path = os.path.join(args.data_home, "conll2000", "train.txt.gz")
    if not os.path.exists(path):
        parser.error(f"CoNLL-2000 training data not found at {path}")
    tags, lengths = read_conll_tags(path)
    classes, y = np.unique(np.asarray(tags), return_inverse=True)
    y = y.astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    n_tokens, n_states = len(tags), len(classes)
    print(
        f"CoNLL-2000 train: {n_tokens} tokens, {len(lengths)} sentences, "
        f"{n_states} tags, longest sentence {lengths.max()}"
    )

    rng = np.random.default_rng(args.seed)
    unary = rng.normal(size=(n_tokens, n_states))
    transition = rng.normal(size=(n_states, n_states))
    start = rng.normal(size=n_states)
    end = rng.normal(size=n_states)
    potentials = (unary, offsets, transition, start, end)

    cases = [("viterbi", "numpy", lambda: viterbi_lockstep(*potentials))]
    cases += [("forward_backward", "numpy", lambda: forward_backward_lockstep(*potentials))]
    for n_jobs in (1, 2):
        name = f"cython n_jobs={n_jobs}"
        cases += [
            ("viterbi", name, lambda n_jobs=n_jobs: viterbi(*potentials, n_jobs=n_jobs)),
            (
                "loss_augmented margin",
                name,
                lambda n_jobs=n_jobs: loss_augmented_viterbi(
                    *potentials, y, rescale="margin", n_jobs=n_jobs
                ),
            ),
            (
                "loss_augmented slack",
                name,
                lambda n_jobs=n_jobs: loss_augmented_viterbi(
                    *potentials, y, rescale="slack", n_jobs=n_jobs
                ),
            ),
            (
                "forward_backward",
                name,
                lambda n_jobs=n_jobs: forward_backward(*potentials, n_jobs=n_jobs),
            ),
        ]

    results = []
    for oracle, implementation, function in cases:
        seconds = best_time(function, args.repeat)
        results.append(
            {
                "oracle": oracle,
                "implementation": implementation,
                "seconds": seconds,
                "tokens_per_second": n_tokens / seconds,
            }
        )
    numpy_speed = {
        r["oracle"]: r["tokens_per_second"] for r in results if r["implementation"] == "numpy"
    }
    for result in results:
        baseline = numpy_speed.get(result["oracle"])
        ratio = result["tokens_per_second"] / baseline if baseline else None
        result["ratio_to_numpy"] = ratio

    order = ["viterbi", "loss_augmented margin", "loss_augmented slack", "forward_backward"]
    results.sort(key=lambda r: (order.index(r["oracle"]), r["implementation"]))
    header = f"{'oracle':<24}{'implementation':<18}{'seconds':>10}{'tokens/s':>14}{'x numpy':>10}"
    print(header)
    print("-" * len(header))
    for r in results:
        ratio = "" if r["ratio_to_numpy"] is None else f"{r['ratio_to_numpy']:.1f}"
        print(
            f"{r['oracle']:<24}{r['implementation']:<18}{r['seconds']:>10.4f}"
            f"{r['tokens_per_second']:>14,.0f}{ratio:>10}"
        )

    if args.json:
        report = {
            "dataset": "conll2000/train",
            "n_tokens": n_tokens,
            "n_sequences": int(len(lengths)),
            "n_states": n_states,
            "repeat": args.repeat,
            "seed": args.seed,
            "machine": platform.platform(),
            "cpu_count": os.cpu_count(),
            "results": results,
        }
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
