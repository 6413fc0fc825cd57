"""A linear programme whose rows arrive over time, solved by HiGHS.

``min cost . x`` subject to ``A x <= b`` and ``x >= 0``. With the optional ``highspy`` package
the LP lives in one HiGHS instance: appended rows keep the previous optimal basis, so the dual
simplex restarts from it. Without it every solve starts from scratch through
:func:`scipy.optimize.linprog` (HiGHS too, but it takes no starting basis).
"""

import os
import sys
import threading

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog


def highspy_available():
    """Whether the optional ``highspy`` package can be imported."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


_banner_lock = threading.Lock()
_banner_printed = False


def _quiet_highs():
    """A ``highspy.Highs`` instance without HiGHS's start-up banner.

    The first instance of a process prints the banner to fd 1, from compiled code: fd 1
    points to ``/dev/null`` while it is built, once per process and under a lock (a
    redirection of the process's fd 1 by concurrent fits would interleave and leave it on
    ``/dev/null``; other threads' output meanwhile is lost, for that moment only). The
    later instances print nothing.
    """
    global _banner_printed
    import highspy

    with _banner_lock:
        if _banner_printed:
            highs = highspy.Highs()
        else:
            highs = _without_stdout(highspy.Highs)
            _banner_printed = True
    highs.setOptionValue("output_flag", False)
    # Without presolve: the working-set LPs are wide (two columns per weight) and mostly
    # re-solved from the previous basis. On CoNLL-2000's L1M3N (18M columns, 8,936 rows)
    # presolve took 18 of the first solve's 20 s (2.2 s without it), without checking for
    # a cancelled solve; on 200 OCR words the fit's LP time was the same either way.
    highs.setOptionValue("presolve", "off")
    return highs


def _without_stdout(make):
    """``make()`` with fd 1 on ``/dev/null`` (as it is, if fd 1 is closed)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # (fd 1 closed, as in some daemons: nothing to silence)
        return make()
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
            return make()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _cancel_flag(highs):
    """A one-element list whose True cancels ``highs``'s simplex at its next iteration
    (through its simplex-interrupt callback), or None if this ``highspy`` has none."""
    if not hasattr(highs, "cbSimplexInterrupt"):
        return None
    cancel = [False]

    def interrupt(event):
        if cancel[0]:
            event.interrupt()

    highs.cbSimplexInterrupt += interrupt
    return cancel


class IncrementalLP:
    """``min cost . x`` s.t. ``A x <= b``, ``x >= 0``, with rows of ``A`` appended over time.

    Parameters
    ----------
    cost : ndarray of shape (n_columns,)
    backend : {"auto", "highspy", "scipy"}, default="auto"
        "auto" takes ``highspy`` when it is installed.
    """

    def __init__(self, cost, backend="auto"):
        if backend == "auto":
            backend = "highspy" if highspy_available() else "scipy"
        if backend not in ("highspy", "scipy"):
            raise ValueError(f"backend must be 'auto', 'highspy' or 'scipy', got {backend!r}.")
        self.backend = backend
        self.cost = np.asarray(cost, dtype=np.float64)
        self.n_rows = 0
        self._rows, self._rhs = [], []
        self._cancel = None
        if backend == "highspy":
            import highspy

            self._highs = _quiet_highs()
            self._cancel = _cancel_flag(self._highs)
            n = self.cost.shape[0]
            self._highs.addVars(n, np.zeros(n), np.full(n, highspy.kHighsInf))
            self._highs.changeColsCost(n, np.arange(n, dtype=np.int32), self.cost)

    def add_rows(self, rows, rhs):
        """Append the constraints ``rows x <= rhs`` (``rows`` a sparse matrix)."""
        rows = sp.csr_matrix(rows)
        rhs = np.asarray(rhs, dtype=np.float64)
        if self.backend == "highspy":
            import highspy

            m = rows.shape[0]
            self._highs.addRows(m, np.full(m, -highspy.kHighsInf), rhs, rows.nnz,
                                rows.indptr[:-1].astype(np.int32),
                                rows.indices.astype(np.int32), rows.data)
        else:
            self._rows.append(rows)
            self._rhs.append(rhs)
        self.n_rows += rows.shape[0]

    def solve(self, time_limit=None):
        """Return ``(x, optimal value)``, or None when ``time_limit`` seconds (None: no limit)
        run out first; raises ``RuntimeError`` if HiGHS finds no optimum.

        With ``highspy`` the solve runs in a thread of its own while this one waits: Ctrl-C
        (or another signal handler's exception) cancels it, and is raised here once the
        solve has stopped, at its next simplex iteration (HiGHS's set-up of a wide LP, before
        its first iteration, is not interrupted). This LP must not be solved again.
        """
        if time_limit is not None and time_limit <= 0:
            return None
        limit = np.inf if time_limit is None else float(time_limit)
        if self.backend == "highspy":
            # (HiGHS's clock runs on over the solves of one instance)
            self._highs.setOptionValue("time_limit", self._highs.getRunTime() + limit)
            self._run_highs()
            status = self._highs.modelStatusToString(self._highs.getModelStatus())
            if status == "Time limit reached":
                return None
            if status != "Optimal":
                raise RuntimeError(f"the working-set LP failed: {status}")
            x = np.asarray(self._highs.getSolution().col_value)
            return x, float(self._highs.getInfo().objective_function_value)
        options = {} if time_limit is None else {"time_limit": limit}
        result = linprog(self.cost, A_ub=sp.vstack(self._rows, format="csr"),
                         b_ub=np.concatenate(self._rhs), bounds=(0, None), method="highs",
                         options=options)
        if result.status == 1 and time_limit is not None:
            return None
        if result.status != 0:
            raise RuntimeError(f"the working-set LP failed: {result.message}")
        return result.x, float(result.fun)

    def _run_highs(self):
        """Run HiGHS (which releases the GIL) in a thread of its own while this one waits;
        on an exception here, cancel the solve at its next simplex iteration. (Not through
        highspy's ``startSolve`` and ``cancelSolve``: their locks are shared by every
        ``Highs`` of the process, so that concurrent fits would refuse or queue solves.)"""
        highs = self._highs
        if self._cancel is None:  # a highspy without simplex callbacks (< 1.8): no cancel
            highs.run()
            return
        self._cancel[0] = False
        errors, began, done = [], threading.Event(), threading.Event()

        def run():
            began.set()
            try:
                if not self._cancel[0]:  # (cancelled while the thread was starting)
                    highs.run()
            except BaseException as exc:  # (raised in the calling thread below)
                errors.append(exc)
            finally:
                done.set()

        # (an Event, not Thread.join: a signal's exception in join marks the thread as
        # stopped while it runs on (CPython 3.11); the interpreter then aborts if it exits
        # while HiGHS still runs. Thread.start waits too, so an exception can come from it,
        # the thread started or not: the cancel flag is set before ``began`` is read, and
        # the thread sets ``began`` before it reads the flag, so a thread that began is
        # waited for and one that had not yet begun skips the solve.)
        thread = threading.Thread(target=run, daemon=True)
        try:
            thread.start()
            while not done.wait(0.05):
                pass
        except BaseException:
            self._cancel[0] = True
            if began.is_set():
                done.wait()  # the solve stops at its next simplex iteration
            raise
        if errors:
            raise errors[0]
