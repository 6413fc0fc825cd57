"""The compiled batch loops of inference and feature extraction answer a pending signal.

A handler's exception (Ctrl-C's KeyboardInterrupt, or here an alarm's) must surface while a
large batch is being processed, not when the loop ends; on two threads, the other thread
stops after its task under way, not after its half of the batch. Each case sizes its batch so that
the whole call would take about a second and a half on this machine, sets an alarm after 0.1
s and requires the call to raise within a third of that time.
"""

import itertools
import signal
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from sklstruct._inference import cfg, chain, dependency, grid
from sklstruct.parsing import ArcFeatures

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer")
                                or not hasattr(signal, "pthread_kill"),
                                reason="needs signal.setitimer and signal.pthread_kill")

FULL_SECONDS = 1.5
ALARM_SECONDS = 0.1


class _Alarm(Exception):
    pass


def _raise_alarm(signum, frame):
    raise _Alarm


def _chain_batch(n_sequences, length, n_states, seed=0):
    rng = np.random.default_rng(seed)
    n_tokens = n_sequences * length
    return dict(
        unary=rng.normal(size=(n_tokens, n_states)),
        offsets=np.arange(0, n_tokens + 1, length),
        transition=rng.normal(size=(n_states, n_states)),
        y=rng.integers(0, n_states, n_tokens),
        X=sp.random(n_tokens, 50, density=0.1, format="csr", random_state=seed),
        weights=rng.normal(size=(50, n_states)),
    )


def _images(n_images, side=64, seed=0):
    rng = np.random.default_rng(seed)
    n_pixels = n_images * side * side
    return dict(unary=rng.normal(size=(n_pixels, 2)),
                offsets=np.arange(0, n_pixels + 1, side * side),
                costs=rng.uniform(0.5, 1.5, size=(2, n_pixels)), side=side)


def _arc_scores(n_sentences, length, seed=0):
    rng = np.random.default_rng(seed)
    return dict(scores=rng.normal(size=n_sentences * (length + 1) ** 2),
                lengths=np.full(n_sentences, length))


def _span_scores(n_sentences, length, n_symbols=4, seed=0):
    rng = np.random.default_rng(seed)
    every = np.ones(n_symbols, dtype=bool)
    grammar = cfg.Grammar(top=np.arange(n_symbols), bottom=np.arange(n_symbols), lexical=every,
                          phrasal=every, root=every,
                          rules=list(itertools.product(range(n_symbols), repeat=3)))
    lengths = np.full(n_sentences, length)
    return dict(span_scores=rng.normal(size=(cfg.span_offsets(lengths)[-1], n_symbols)),
                lengths=lengths, grammar=grammar,
                rule_scores=rng.normal(size=grammar.n_rules))


def _sentences(n_sentences, length):
    tags = ["DT", "NN", "VB", "JJ", "IN", "RB"]
    return [[{"form": f"w{(i * 7 + j) % 97}", "postag": tags[(i + j) % len(tags)]}
             for j in range(length)] for i in range(n_sentences)]


# each case: (make(n) -> call, units of n in the calibration batch)
CASES = {
    "viterbi": (lambda n: (lambda b: lambda: chain.viterbi(
        b["unary"], b["offsets"], b["transition"]))(_chain_batch(n, 20, 600)), 4),
    "viterbi_sparse": (lambda n: (lambda b: lambda: chain.viterbi_sparse(
        b["X"], b["weights"], b["offsets"], b["transition"]))(_chain_batch(n, 20, 600)), 4),
    "loss_augmented_viterbi_sparse": (lambda n: (lambda b: lambda:
                                      chain.loss_augmented_viterbi_sparse(
        b["X"], b["weights"], b["offsets"], b["transition"], y=b["y"]))(
            _chain_batch(n, 20, 600)), 4),
    "loss_augmented_margins_sparse": (lambda n: (lambda b: lambda:
                                      chain.loss_augmented_margins_sparse(
        b["X"], b["weights"], b["offsets"], b["transition"], y=b["y"]))(
            _chain_batch(n, 20, 600)), 4),
    "loss_augmented_viterbi": (lambda n: (lambda b: lambda: chain.loss_augmented_viterbi(
        b["unary"], b["offsets"], b["transition"], None, None, b["y"]))(
            _chain_batch(n, 20, 600)), 4),
    "slack_rescaled": (lambda n: (lambda b: lambda: chain.loss_augmented_viterbi(
        b["unary"], b["offsets"], b["transition"], None, None, b["y"], rescale="slack"))(
            _chain_batch(n, 200, 12)), 4),
    "forward_backward": (lambda n: (lambda b: lambda: chain.forward_backward(
        b["unary"], b["offsets"], b["transition"]))(_chain_batch(n, 20, 300)), 4),
    "viterbi_sparse on two threads": (lambda n: (lambda b: lambda: chain.viterbi_sparse(
        b["X"], b["weights"], b["offsets"], b["transition"], n_jobs=2))(
            _chain_batch(n, 20, 300)), 420),
    "forward_backward on two threads": (lambda n: (lambda b: lambda: chain.forward_backward(
        b["unary"], b["offsets"], b["transition"], n_jobs=2))(_chain_batch(n, 20, 300)), 4),
    "topk_viterbi": (lambda n: (lambda b: lambda: chain.topk_viterbi(
        b["unary"], b["offsets"], b["transition"], k=4))(_chain_batch(n, 20, 300)), 4),
    "log_partition": (lambda n: (lambda b: lambda: chain.log_partition(
        b["unary"], b["offsets"], b["transition"]))(_chain_batch(n, 20, 300)), 4),
    "grid_map": (lambda n: (lambda b: lambda: grid.grid_map(
        b["unary"], b["offsets"], b["side"], *b["costs"]))(_images(n)), 4),
    # (long sentences, so that the cubic charts take the call's time, not the validation of
    # the arc scores before the loop; the projective and non-projective decoders share the
    # loop and its check)
    "decode_trees": (lambda n: (lambda b: lambda: dependency.decode_trees(
        b["scores"], b["lengths"]))(_arc_scores(n, 200)), 8),
    "tree_marginals": (lambda n: (lambda b: lambda: dependency.tree_marginals(
        b["scores"], b["lengths"], projective=False))(_arc_scores(n, 200)), 8),
    "cky_decode": (lambda n: (lambda b: lambda: cfg.cky_decode(
        b["span_scores"], b["lengths"], b["grammar"], b["rule_scores"]))(
            _span_scores(n, 25)), 4),
    "inside_outside": (lambda n: (lambda b: lambda: cfg.inside_outside(
        b["span_scores"], b["lengths"], b["grammar"], b["rule_scores"]))(
            _span_scores(n, 25)), 4),
    "arc_features": (lambda n: (lambda f, s: lambda: f.transform_flat(s))(
        ArcFeatures(features_from="all").fit(_sentences(2, 150)), _sentences(n, 150)), 4),
}


def _interrupt_after(call, seconds):
    """Run ``call`` with an alarm set after ``seconds``; the time at which it raised."""
    previous = signal.signal(signal.SIGALRM, _raise_alarm)
    started = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        call()
        # the alarm has not fired, or fires only now, after the call
        time.sleep(seconds)
    except _Alarm:
        return time.perf_counter() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    pytest.fail("the alarm never fired")


@pytest.mark.parametrize("case", list(CASES))
def test_a_pending_signal_stops_the_batch_loop(case):
    make, units = CASES[case]
    small = make(units)
    started = time.perf_counter()
    small()
    per_unit = (time.perf_counter() - started) / units
    n_units = max(units, int(FULL_SECONDS / per_unit))
    call = make(n_units)
    raised_after = _interrupt_after(call, ALARM_SECONDS)
    # without the checks the alarm's exception surfaces when the loop ends, near FULL_SECONDS
    assert raised_after < ALARM_SECONDS + FULL_SECONDS / 3, raised_after


def test_an_interrupt_while_joining_the_threads_leaves_none_running():
    """The calling thread, done with its tasks, waits for the others: a signal's exception
    there left them running (and taking the remaining tasks) after the call had raised."""
    from sklstruct._inference._validation import run_chunks

    started = []

    def task(k):  # short in the calling thread, long in the worker
        started.append(k)
        # (sleeping releases the GIL, as the compiled kernels do)
        time.sleep(0.01 if threading.current_thread() is threading.main_thread() else 0.6)
        return k

    before = threading.active_count()
    previous = signal.signal(signal.SIGALRM, _raise_alarm)
    # (sent to the calling thread, as Ctrl-C usually is; a process-wide alarm may be taken
    # by the worker's thread, and then handled only when the join returns)
    alarm = threading.Timer(0.2, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGALRM))
    try:
        alarm.start()
        with pytest.raises(_Alarm):
            run_chunks(task, [(k,) for k in range(5)], 2)
            time.sleep(1.0)
    finally:
        alarm.cancel()
        alarm.join()
        signal.signal(signal.SIGALRM, previous)
    assert threading.active_count() == before
    assert len(started) == 5


def _interrupted_start(monkeypatch, started=True):
    """``Thread.start`` that raises KeyboardInterrupt once: after starting its thread (a
    Ctrl-C delivered while ``Thread.start`` waits for the new thread to run) or, with
    ``started=False``, before (one delivered before the thread exists)."""
    original = threading.Thread.start

    def start(self):
        if started:
            original(self)
        monkeypatch.setattr(threading.Thread, "start", original)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)


def test_an_interrupt_while_starting_a_thread_leaves_no_work_running(monkeypatch):
    """A Ctrl-C in Thread.start came before the run's try: its worker went on taking tasks
    (all ten) after the call had raised."""
    from sklstruct._inference._validation import run_chunks

    done = []

    def task(k):
        time.sleep(0.05)
        done.append(k)
        return k

    start = threading.Thread.start
    for started in (True, False):  # (before the thread exists: nothing to wait for)
        done.clear()
        outcome = []

        def call():
            try:
                run_chunks(task, [(k,) for k in range(10)], 2)
            except KeyboardInterrupt:
                outcome.append("interrupted")

        caller = threading.Thread(target=call, daemon=True)  # (a hang fails, not blocks)
        _interrupted_start(monkeypatch, started)
        start(caller)
        caller.join(10)
        assert not caller.is_alive() and outcome == ["interrupted"]
        count = len(done)
        time.sleep(0.3)
        assert len(done) == count <= 1


def test_an_interrupt_while_starting_the_lp_thread_cancels_the_solve(monkeypatch):
    """The solve's thread started outside the try that cancels it: HiGHS ran on after the
    interrupt, and the interpreter aborted at exit while it still ran."""
    pytest.importorskip("highspy")
    from sklstruct._solvers.lp import IncrementalLP

    rng = np.random.default_rng(0)
    A = sp.random(600, 1200, density=0.05, random_state=0, format="csr")
    lp = IncrementalLP(rng.uniform(1, 2, 1200), backend="highspy")
    lp.add_rows(-A, -np.ones(600))
    before = threading.active_count()
    _interrupted_start(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        lp.solve()
    assert threading.active_count() == before  # (the solve's thread has ended)
