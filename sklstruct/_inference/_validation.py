"""Validation helpers shared by the wrappers of the compiled inference kernels, and the
runner of their chunks on threads."""

import numbers
import threading

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from joblib.parallel import ThreadingBackend, get_active_backend


# the largest magnitude a labelling's score may reach: sums of finite potentials below it (and
# the loss-augmented and log-partition values built from them, which add little) stay finite
# in double precision (whose largest value is 1.8e308)
MAX_SCORE = 1e307


def as_float_array(value, name, ndim):
    """Convert ``value`` to a C-contiguous float64 array of ``ndim`` dimensions."""
    if value is None:
        raise TypeError(f"{name} must be an array of numbers, got None.")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}.")
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got an array of shape {array.shape}.")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite values.")
    return array


def as_int_array(value, name):
    """Convert ``value`` to a 1-D array of an integer dtype without changing its values."""
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an array of integers, got dtype {array.dtype}.")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {array.shape}.")
    return array


def shape_products(shapes, what="a shape"):
    """The product of every row of ``shapes`` (positive integers), in int64; a product
    beyond ``2**62``, which int64 arithmetic would wrap (to a small number that can pass
    for the data's size), is a ``ValueError``.

    Parameters
    ----------
    shapes : ndarray of int of shape (n, d)
    what : str, default="a shape"
        The name of a row in the error.

    Returns
    -------
    products : ndarray of int64 of shape (n,)
    """
    shapes = np.asarray(shapes, dtype=np.int64)
    approximate = shapes.astype(np.float64).prod(axis=1)
    if np.any(approximate > 2.0 ** 62):
        bad = int(np.flatnonzero(approximate > 2.0 ** 62)[0])
        raise ValueError(f"{what} {tuple(int(s) for s in shapes[bad])} holds more than "
                         "2**62 elements.")
    return shapes.prod(axis=1)


def check_sentence_lengths(lengths, unit="word"):
    """Validate sentence lengths (at least one ``unit`` each) and return them as a
    contiguous int64 array."""
    if lengths is None:
        raise TypeError("lengths must be an array of integers, got None.")
    array = as_int_array(lengths, "lengths")
    if array.shape[0] and array.min() < 1:
        first = int(np.flatnonzero(array < 1)[0])
        what = "is empty" if array[first] == 0 else f"has length {int(array[first])}"
        raise ValueError(f"sentence {first} {what}; every sentence needs at least one "
                         f"{unit}.")
    if array.shape[0] and array.max() > 2**31 - 1:
        # (a parse chart has n (n + 1) / 2 or n ** 2 rows, whose counts would wrap in int64)
        first = int(np.flatnonzero(array > 2**31 - 1)[0])
        raise ValueError(f"sentence {first} has {int(array[first])} {unit}s, more than "
                         "2**31 - 1.")
    return np.ascontiguousarray(array, dtype=np.int64)


def check_n_jobs(n_jobs):
    """The number of joblib workers ``n_jobs`` asks for (None: 1; 0 is refused)."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an integer, got {n_jobs!r}.")
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, 1, 2, ... or -1.")
    return effective_n_jobs(int(n_jobs))


def split_into_chunks(offsets, n_chunks):
    """Split the sequences into contiguous chunks holding roughly equal numbers of tokens."""
    n_sequences = offsets.shape[0] - 1
    n_chunks = max(1, min(n_chunks, n_sequences))
    targets = np.linspace(0, offsets[-1], n_chunks + 1)[1:-1]
    bounds = np.searchsorted(offsets, targets)
    bounds = np.unique(np.concatenate(([0], bounds, [n_sequences])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


# The work of one task of the threads of run_chunks, in steps of a chain's dynamic programme
# (tokens x states^2): a fraction of a second. When the calling thread is interrupted (its
# compiled loop raises Ctrl-C's KeyboardInterrupt) or a task fails, the other threads take no
# new task, so the call returns after the tasks under way: one per thread, not a whole
# per-thread share of the batch (3-6 s on 31.7M tokens with one task per thread).
TASK_WORK = 2**27


def thread_chunks(offsets, n_threads, n_states, min_tokens=1):
    """The chunks of sequences (contiguous, of similar token counts) of a chain kernel run
    on ``n_threads`` threads: one for a single thread; otherwise at least one per thread,
    each of at least ``min_tokens`` tokens, and as many more as keep each task's work under
    about ``TASK_WORK`` steps. The tasks' outputs are per token or per sequence, so the
    result does not depend on the chunks."""
    n_tokens = int(offsets[-1])
    n_chunks = max(1, min(n_threads, n_tokens // max(1, min_tokens)))
    if n_chunks > 1:
        per_task = max(min_tokens, TASK_WORK // max(1, n_states * n_states))
        n_chunks = max(n_chunks, -(-n_tokens // per_task))
    return split_into_chunks(offsets, n_chunks)


def sentence_chunks(lengths, n_chunks):
    """Split sentences of ``lengths`` words into contiguous chunks of similar cubic cost
    (the chart algorithms of parsing), as ``(first, stop)`` pairs."""
    n_sentences = lengths.shape[0]
    n_chunks = max(1, min(n_chunks, n_sentences))
    cost = np.concatenate(([0.0], np.cumsum((lengths + 1.0) ** 3)))
    bounds = np.searchsorted(cost, np.linspace(0, cost[-1], n_chunks + 1)[1:-1])
    bounds = np.unique(np.concatenate(([0], bounds, [n_sentences])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def map_sentence_chunks(solve, scores, lengths, offsets, n_jobs, per_row=(), flags=()):
    """Run ``solve(scores, lengths, *per_row, *flags)`` on a batch of sentences, in chunks
    of :func:`sentence_chunks` on threads of this process (:func:`run_chunks`) when
    ``n_jobs`` asks for several.

    ``scores`` and every array of ``per_row`` (or None) have the rows ``offsets[i]:
    offsets[i + 1]`` for sentence ``i`` and are cut with the sentences; ``flags`` are
    passed whole. The outputs of the chunks are concatenated in order, so the result does
    not depend on ``n_jobs``.
    """
    n_threads = check_n_jobs(n_jobs)
    chunks = sentence_chunks(lengths, n_threads)
    if len(chunks) <= 1:
        return solve(scores, lengths, *per_row, *flags)

    def cut(array, lo, hi):
        return None if array is None else array[offsets[lo]:offsets[hi]]

    pieces = run_chunks(solve, [
        (cut(scores, lo, hi), lengths[lo:hi], *[cut(array, lo, hi) for array in per_row],
         *flags)
        for lo, hi in chunks], n_threads)
    return tuple(np.concatenate(outputs) for outputs in zip(*pieces))


def check_k(k):
    """Validate a number of labelings to return (a positive integer)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be a positive integer, got {k!r}.")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}.")
    return int(k)


def run_chunks(function, tasks, n_threads):
    """``[function(*task) for task in tasks]``, the tasks spread over ``n_threads``.

    On threads of this process (the calling thread among them): ``function`` should
    release the GIL (a compiled kernel's ``nogil`` loop). Through joblib when the
    active joblib backend is one the user chose that is not thread-based (``loky``, a
    ``dask`` cluster...), so that it runs the chunks; joblib's own thread pool is not
    used otherwise, since starting one costs milliseconds, more than decoding a test set.
    The results come in the order of ``tasks`` whatever the number of threads.
    """
    tasks = list(tasks)
    if n_threads <= 1 or len(tasks) <= 1:
        return [function(*task) for task in tasks]
    backend, _ = get_active_backend(prefer="threads")
    if not isinstance(backend, ThreadingBackend):
        # Large arrays reach worker processes memory-mapped; copy-on-write ("c"), not
        # read-only, since the kernels write their outputs into arrays of the task (a
        # worker's writes stay in its own copy, and it returns its pieces).
        return Parallel(n_jobs=n_threads, prefer="threads", mmap_mode="c")(
            delayed(function)(*task) for task in tasks)
    results, errors = [None] * len(tasks), []
    lock = threading.Lock()
    taken = [0]

    def work():  # takes the next task until none is left
        while not errors:
            with lock:
                k = taken[0]
                taken[0] += 1
            if k >= len(tasks):
                return
            try:
                results[k] = function(*tasks[k])
            except BaseException as exc:  # (raised in the calling thread below)
                errors.append(exc)

    # The calling thread waits on a semaphore that each worker releases at its end, not in
    # Thread.join: a signal's exception in join (CPython 3.11) marks the thread as stopped
    # while it runs on, so that later joins return at once. Thread.start waits too, so a
    # signal's exception can also come from it, before or after the thread began: each
    # worker counts itself in (``begun``) before it reads ``errors``, and the calling
    # thread sets ``errors`` before it reads the count, so every worker that began is
    # waited for, and one that begins later finds ``errors`` set and takes no task.
    finished = threading.Semaphore(0)
    begun = [0]

    def worker():
        try:
            with lock:
                begun[0] += 1
            work()
        finally:
            finished.release()

    threads, ended = [], 0
    try:
        for _ in range(min(n_threads, len(tasks)) - 1):
            threads.append(threading.Thread(target=worker))
            threads[-1].start()
        work()
        while ended < len(threads):
            finished.acquire()
            ended += 1
    except BaseException as exc:  # (Ctrl-C outside a task: while starting or waiting for
        errors.append(exc)  # the others) the other threads take no new task ...
        with lock:
            count = begun[0]
        while ended < count:  # ... and end with the task under way
            finished.acquire()
            ended += 1
        raise
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
