"""The progress of one fit: certificates, stopping rules, verbose lines and warnings.

Every learner's solver records its checks on a :class:`Certificate`, the one reader of the
stopping settings (``tol``, ``max_iter``, ``max_time``) and of ``verbose`` and ``callback``;
solvers that make passes over the data ask a :class:`CheckSchedule` when to certify.
:class:`BestCertified` keeps the weights of the lowest certified primal for the solvers that
return them (:class:`~sklstruct.M3NSimplicialDecomposition`, the cutting plane of
:class:`~sklstruct.L1M3N`); the others return their last iterate. Either way the last record
certifies the returned weights. None of them sees the estimator: the estimator builds the
certificate from its parameters, passes it to the solver and stores its history.
"""

import time

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .utils._warnings import warn_user

__all__ = ["BestCertified", "Certificate", "CheckSchedule"]


class Certificate:
    """The progress record of one fit: certificates, stopping, verbose lines, warnings.

    A learner records its checks through :meth:`check` (primal, dual, their gap, wall time
    from the start of the fit and oracle calls, plus learner-specific fields) and ends with
    :meth:`finish`, which warns when the fit stopped before converging; :meth:`history` gives
    the records. A check stops the fit when it converges (by default ``gap <= tol * |primal|``),
    when ``callback`` returns True, or when the fit has run ``max_time`` seconds.

    With ``verbose=1`` a check prints one line (the unit and its count, primal, dual, gap and
    relative gap, seconds since the start, oracle calls), at most about one a second plus
    the first and the last; ``verbose=2`` prints every check with the learner's extra fields.

    Parameters
    ----------
    name : str
        The estimator's name, for the lines and warnings.
    tol : float
        Relative duality gap at which a check converges.
    max_iter : int
        The budget of iterations (passes, rounds...).
    max_time : float or None, default=None
        The budget of seconds.
    verbose : int, default=0
    callback : callable or None, default=None
        Called at every check as ``callback(model, info)`` (see :meth:`check`).
    model_at : callable or None, default=None
        ``model_at(w, attributes)``: a fitted copy of the estimator with weights ``w`` and the
        fitted ``attributes`` (a dict), handed to the callback.
    unit : str, default="pass"
        What the iterations count ("pass", "iteration", "round").
    extra_fields : tuple of str, default=()
        Fields of the history beyond primal, dual, gap, time and oracle_calls.

    Attributes
    ----------
    stop_reason : {None, "converged", "callback", "max_time", "precision"}
    n_iter : int
        Set by :meth:`finish`.
    current_attributes : callable or None
        Set by a learner whose prediction needs fitted attributes besides ``w_`` (the dual
        coefficients of a kernel model): returns them at the current iterate, for the
        callback's model.
    """

    FIELDS = ("primal", "dual", "gap", "time", "oracle_calls")

    def __init__(self, name, *, tol, max_iter, max_time=None, verbose=0, callback=None,
                 model_at=None, unit="pass", extra_fields=(), warns=True):
        self.name, self.tol, self.max_iter, self.max_time = name, float(tol), max_iter, max_time
        # (False for an inner fit whose caller judges its outcome: no ConvergenceWarning,
        # without the process-wide warnings filters that catch_warnings changes)
        self.warns = warns
        self.verbose, self.callback, self.model_at = verbose, callback, model_at
        self.unit = unit
        self.fields = self.FIELDS + tuple(extra_fields)
        self.rows = {field: [] for field in self.fields}
        self.start = time.perf_counter()
        self.stop_reason = None
        self.last_print = None
        self._last_check, self._last_printed = None, False
        self.n_iter = 0
        self.current_attributes = None

    @property
    def converged(self):
        return self.stop_reason == "converged"

    def elapsed(self):
        """Seconds since the start of the fit."""
        return time.perf_counter() - self.start

    def out_of_time(self):
        """Whether the fit has run ``max_time`` seconds."""
        return self.max_time is not None and self.elapsed() >= self.max_time

    def last(self, field):
        """The last recorded value of ``field``."""
        return self.rows[field][-1]

    def relative_gap(self):
        """The last certified gap relative to the last primal (NaN without one)."""
        primal = self.last("primal")
        return self.last("gap") / abs(primal) if primal else np.nan

    def check(self, iteration, primal, dual, oracle_calls, converged=None, w=None, note="",
              **extra):
        """Record one check; return whether the fit stops here.

        ``converged`` overrides the relative-gap test (for learners with another stopping
        rule); a NaN primal (no certificate at this check) never converges by the gap. The
        callback gets a fitted copy of the estimator at a copy of ``w`` (the current weights,
        often an array the learner keeps updating) and ``info``: the check's row,
        ``iteration`` and ``w``. ``note`` ends the check's ``verbose`` line (e.g. to tell a
        second check of the same iteration from the first).
        """
        gap = primal - dual
        row = dict(primal=primal, dual=dual, gap=gap, time=self.elapsed(),
                   oracle_calls=oracle_calls, **extra)
        for field in self.fields:
            self.rows[field].append(float(row.get(field, np.nan)))
        if converged is None:
            converged = bool(gap <= self.tol * abs(primal))
        self.stop_reason = "converged" if converged else None
        if self.callback is not None:
            w = None if w is None else np.array(w, copy=True)
            attributes = {} if self.current_attributes is None else self.current_attributes()
            model = None if self.model_at is None else self.model_at(w, attributes)
            if self.callback(model, dict(row, iteration=iteration, w=w)):
                self.stop_reason = self.stop_reason or "callback"
        if self.stop_reason is None and self.max_time is not None and \
                row["time"] >= self.max_time:
            self.stop_reason = "max_time"
        stops = self.stop_reason is not None or iteration >= self.max_iter
        self._print(iteration, row, stops, extra, note)
        return self.stop_reason is not None

    def _print(self, iteration, row, stops, extra, note=""):
        """verbose=1: the first and last checks and at most one a second, skipping checks
        that certify nothing (no primal value); verbose=2: every check, with its extras."""
        primal, gap = row["primal"], row["gap"]
        self._last_check, self._last_printed = (iteration, row, extra, note), False
        if not (self.verbose >= 2 or (self.verbose and (stops or np.isfinite(primal) and (
                self.last_print is None or row["time"] - self.last_print >= 1.0)))):
            return
        self.last_print, self._last_printed = row["time"], True
        relative = gap / abs(primal) if primal else np.nan
        more = "".join(f"  {name} {value:.4g}" for name, value in extra.items()
                       if self.verbose >= 2)
        print(f"[{self.name}] {self.unit} {iteration:5d}  primal {primal:.6g}  "
              f"dual {row['dual']:.6g}  gap {gap:.3g} ({relative:.2e})  "
              f"time {row['time']:.2f}s  oracle calls {int(row['oracle_calls'])}{more}"
              f"{'  ' + note if note else ''}", flush=True)

    def amend_last(self, primal, dual, **fields):
        """Make the last record certify other weights than the last iterate's: ``primal``
        their objective, ``dual`` the best lower bound seen, and the learner's own ``fields``
        of those weights (e.g. ``n_nonzero``)."""
        self.rows["primal"][-1] = float(primal)
        self.rows["dual"][-1] = float(dual)
        self.rows["gap"][-1] = float(primal - dual)
        for field, value in fields.items():
            self.rows[field][-1] = value
        if self.stop_reason is None and primal - dual <= self.tol * abs(primal):
            self.stop_reason = "converged"
        if self._last_check is not None:  # (verbose: the line of the record as amended)
            iteration, row, extra, _ = self._last_check
            row = dict(row, primal=float(primal), dual=float(dual), gap=float(primal - dual))
            self._print(iteration, row, True, {**extra, **fields}, "amended: the weights "
                        "returned")

    def precision_lost(self, why):
        """Stop the fit with a warning: the learner cannot make progress in floating point."""
        self.stop_reason = "precision"
        if self.warns:
            warn_user(f"{self.name} stopped early: {why}.", ConvergenceWarning)
        if self._last_check is not None and not self._last_printed:
            self._print(*self._last_check[:1], self._last_check[1], True,
                        *self._last_check[2:])  # (verbose: the last line of the fit)

    def history(self):
        """The records as a dict of 1-D float arrays."""
        return {field: np.asarray(values) for field, values in self.rows.items()}

    def finish(self, n_iter, what=None, warn=True):
        """End the fit after ``n_iter`` iterations; warn if it stopped before converging.

        ``what`` names the stopping rule in the warning (default: the relative duality gap).
        A stop asked for by the callback is not a warning; nor is any stop with ``warn=False``
        (learners whose budget is their stopping rule).
        """
        self.n_iter = int(n_iter)
        if warn and self.warns and self.stop_reason in (None, "max_time"):
            what = what or f"a relative duality gap of {self.tol}"
            units = self.unit + ("es" if self.unit.endswith("s") else "s")
            if self.stop_reason == "max_time":
                budget, remedy = f"{self.max_time} s (max_time)", "raise max_time"
            else:
                budget, remedy = f"{n_iter} {units}", "raise max_iter"
            reached = ""
            gaps, primals = self.rows["gap"], self.rows["primal"]
            if gaps and np.isfinite(gaps[-1]) and primals[-1]:
                reached = f" (its last certified relative gap is {gaps[-1] / abs(primals[-1]):.3g})"
            warn_user(f"{self.name} did not reach {what} in {budget}{reached}; {remedy} or "
                      "loosen tol.", ConvergenceWarning)


class CheckSchedule:
    """When a learner that makes passes over the data certifies its iterate.

    ``check_every`` an integer: every that many passes. ``None`` (automatic): after a pass whose
    own estimate of the duality gap (when the learner has one, e.g. the summed block gaps of a
    Frank-Wolfe pass) is within the target, and otherwise after a number of passes that grows
    geometrically by ``growth`` (rounded up), so that certificates cost a small part of a long
    fit: 1, 2, 4, 8, ... for learners whose passes estimate their gap (the estimate usually
    triggers the last check); 1, 2, 3, 4, 5, 7, 9, 12, ... with ``growth=1.25`` for learners
    without an estimate, which then run at most about a quarter more passes than they need
    to reach the target. With ``predict`` (learners without an estimate), once a certified
    relative gap is within ten times ``tol``, the next check comes no later than the pass
    where a power law through it and an earlier certificate (at least 15% fewer passes
    before, with a larger gap) reaches ``tol``, and no sooner than 3% more passes (doubled
    after each prediction that missed, so that a gap stalling just above ``tol`` soon returns
    to the geometric checks). The last pass (``max_iter``) and a pass that ends after
    ``max_time`` are always certified.

    Parameters
    ----------
    certificate : Certificate
        The fit's record: its ``tol``, ``max_iter``, ``max_time`` and certified gaps.
    check_every : int or None, default=None
    growth : float, default=2.0
    predict : bool, default=False
    """

    def __init__(self, certificate, check_every=None, growth=2.0, predict=False):
        self.certificate, self.check_every = certificate, check_every
        self.growth, self.predict = growth, predict
        self.next = 1
        self._certified = []  # (passes, relative gap) of the checks so far
        self._predicted = False  # whether the next check is a prediction
        self._missed = 0  # predicted checks so far that did not reach tol

    def due(self, passes, estimate=None, primal=None):
        """Whether to certify after ``passes`` passes (``estimate``: the pass's own gap
        estimate; ``primal``: the last certified primal)."""
        certificate = self.certificate
        if passes >= certificate.max_iter or certificate.out_of_time():
            return True
        if self.check_every is not None:
            return passes % self.check_every == 0
        if estimate is not None and primal is not None and \
                estimate <= certificate.tol * abs(primal):
            return True
        return passes >= self.next

    def checked(self, passes):
        """Record a certificate after ``passes`` passes (the last row of the certificate)."""
        self.next = max(passes + 1, int(np.ceil(self.growth * passes)))
        if not self.predict:
            return
        tol = self.certificate.tol
        relative = self.certificate.relative_gap()
        if not np.isfinite(relative):
            return
        self._certified.append((passes, relative))
        if self._predicted and relative > tol:
            self._missed += 1
        self._predicted = False
        if not tol < relative <= 10.0 * tol:
            return
        earlier = [(p, g) for p, g in self._certified[:-1]
                   if 0 < p <= passes / 1.15 and g > relative]
        if earlier:
            p, g = earlier[-1]
            rate = np.log(g / relative) / np.log(passes / p)
            # log of the pass where the power law reaches tol (a flat stretch: far away)
            log_crossing = np.log(passes) + np.log(relative / tol) / rate
            if log_crossing < np.log(self.next):
                # at least 3% more passes, twice that after each missed prediction, so that
                # a gap stalling just above tol soon returns to the geometric checks
                least = passes + max(1, int(np.ceil(0.03 * 2.0**self._missed * passes)))
                crossing = max(least, int(np.ceil(np.exp(log_crossing) - 1e-9)))
                if crossing < self.next:
                    self.next, self._predicted = crossing, True


# the message of a dual learner whose ascent has run out of double precision
PRECISION_LOST = ("the dual decreased or exceeded the primal: its ascent is below double "
                  "precision at this scale of C * ||x||^2 (and of the sample weights); "
                  "standardise the features or lower C (or the weights)")
PRECISION_STALLED = ("its passes no longer change the weights or the dual: their steps are "
                     "below double precision at this scale of C * ||x||^2 (and of the "
                     "sample weights); standardise the features or lower C")


# entries of the weights scanned at a time for their non-zero ones (BestCertified)
_KEEP_CHUNK = 2**20


class BestCertified:
    """The weights a dual learner returns: those of its lowest certified primal.

    In exact arithmetic the last iterate's, but not when the dual's ascent runs out of double
    precision (features of huge norm, or a huge C): then the dual decreases, which
    :meth:`record` reports, and the primal may have risen since its best check. The learners'
    arrays change in place, so the best weights are copied: as their non-zero entries (int32
    positions while the size allows, and values) when at most half of them are non-zero, as
    the weights of a large vocabulary are, else into one dense buffer.
    """

    def __init__(self):
        self.primal, self.dual = np.inf, -np.inf
        self.w = None
        self._kept = None  # (positions, values, size) of the sparse copy

    def record(self, w, primal, dual):
        """Track a certified check at ``w``; return whether its dual decreased (beyond a
        relative 1e-8 of the best dual so far)."""
        if primal < self.primal:
            self.primal = primal
            self._keep(np.asarray(w))
        decreased = dual < self.dual - 1e-8 * abs(self.dual)
        self.dual = max(self.dual, dual)
        return decreased

    def _keep(self, w):
        if self._kept is not None:  # (dropped before the new copy is made)
            self._kept = None
        flat = w.ravel()
        dtype = np.int32 if flat.shape[0] <= np.iinfo(np.int32).max else np.int64
        # the non-zero entries, found a chunk at a time (no mask of all of w; the nonzero of
        # a chunk's boolean mask is about four times faster than that of its doubles)
        parts = [(np.flatnonzero(flat[lo:lo + _KEEP_CHUNK] != 0) + lo).astype(dtype)
                 for lo in range(0, flat.shape[0], _KEEP_CHUNK)]
        count = sum(part.shape[0] for part in parts)
        if 2 * count <= flat.shape[0]:
            positions = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
            self._kept, self.w = (positions, flat[positions], w.shape), None
        elif self.w is None or self.w.shape != w.shape:
            self._kept, self.w = None, np.array(w, copy=True)
        else:
            np.copyto(self.w, w)

    def _best(self):
        """The best weights, dense."""
        if self._kept is None:
            return self.w
        positions, values, shape = self._kept
        w = np.zeros(shape)
        w.ravel()[positions] = values
        return w

    def result(self, certificate, w, copy=True):
        """The weights to return, the last iterate ``w`` or the best certified one; in the
        latter case the certificate's last record is amended to certify them. Without
        ``copy`` the last iterate is returned as the array ``w`` itself (its owner must then
        leave it unchanged)."""
        if certificate.last("primal") > self.primal:
            certificate.amend_last(self.primal, self.dual)
            return self._best()
        if not copy:
            return w
        if self.w is None or self.w.shape != np.shape(w):
            return np.array(w, copy=True)
        np.copyto(self.w, w)
        return self.w
