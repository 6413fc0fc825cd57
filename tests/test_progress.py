"""Progress reporting: verbose lines in one format for every learner, callback, max_time."""

import re
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (L1M3N, M3NExcessiveGap, M3NExpGrad, M3NSimplicialDecomposition,
                       StructSVMCuttingPlane)

from ._helpers import make_chain_data

LINE = re.compile(
    r"^\[(?P<name>\w+)\] (?P<unit>pass|iteration|round|step) +(?P<count>\d+)  "
    r"primal (?P<primal>\S+)  dual (?P<dual>\S+)  gap (?P<gap>\S+) \((?P<relative>\S+)\)  "
    r"time (?P<time>[\d.]+)s  oracle calls (?P<calls>\d+)(?P<more>.*)$"
)

MODELS = [
    StructSVMCuttingPlane(variant="1-slack", tol=1e-4),
    StructSVMCuttingPlane(variant="n-slack", tol=1e-4),
    M3NExpGrad(tol=1e-3, max_iter=50),
    M3NExpGrad(algorithm="batch", tol=1e-3, max_iter=50),
    M3NExcessiveGap(tol=1e-3, max_iter=100),
    L1M3N(max_iter=3),
    L1M3N(solver="subgradient", max_iter=20),
    L1M3N(solver="cutting_plane", tol=1e-3),
    M3NSimplicialDecomposition(tol=1e-4),
]


def fit_quietly(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_verbose_prints_the_same_columns_for_every_learner(model, capsys):
    X, y = make_chain_data(n_sequences=20, seed=2)
    fit_quietly(model.set_params(verbose=1), X, y)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines, "verbose=1 printed nothing"
    history = model.history_
    for line in lines:
        match = LINE.match(line)
        assert match, line
        assert match["name"] == type(model).__name__
        assert match["more"] == ""  # extra fields only with verbose=2
    last = LINE.match(lines[-1])
    # the last line is the last check, whose figures are the certificate in history_
    assert float(last["primal"]) == pytest.approx(history["primal"][-1], rel=1e-5)
    # (L1M3N's subgradient steps have no dual bound: NaN on both sides)
    assert float(last["dual"]) == pytest.approx(history["dual"][-1], rel=1e-5, abs=1e-12,
                                                nan_ok=True)
    assert int(last["calls"]) == int(history["oracle_calls"][-1])
    # at most about one line a second (plus the first and the last)
    assert len(lines) <= 2 + history["time"][-1] / 1.0 + 1


def test_a_second_check_of_the_same_iteration_says_what_it_certifies(capsys):
    """At max_iter the 1-slack cutting plane's QP moves the weights after the iteration's
    check, and a second check certifies the weights returned: its line says so."""
    X, y = make_chain_data(n_sequences=20, seed=2)
    model = fit_quietly(StructSVMCuttingPlane(variant="1-slack", tol=1e-9, max_iter=3,
                                              verbose=1), X, y)
    lines = capsys.readouterr().out.strip().splitlines()
    first, second = LINE.match(lines[-2]), LINE.match(lines[-1])
    assert first["count"] == second["count"] == "3"
    assert first["more"] == ""
    assert second["more"] == "  (the weights returned, after this iteration's QP)"
    assert float(second["primal"]) == pytest.approx(model.history_["primal"][-1], rel=1e-5)


def test_verbose_is_rate_limited_but_verbose_2_prints_every_check(capsys):
    X, y = make_chain_data(n_sequences=40, seed=3)
    quiet = fit_quietly(StructSVMCuttingPlane(variant="1-slack", tol=1e-6, verbose=1), X, y)
    n_quiet = len(capsys.readouterr().out.strip().splitlines())
    loud = fit_quietly(StructSVMCuttingPlane(variant="1-slack", tol=1e-6, verbose=2), X, y)
    n_loud = len(capsys.readouterr().out.strip().splitlines())
    assert quiet.history_["primal"].shape[0] > 10
    assert n_loud == loud.history_["primal"].shape[0]
    assert n_quiet <= 2 + quiet.history_["time"][-1] + 1 < n_loud


def test_verbose_1_prints_the_record_a_fit_ends_with(capsys):
    """The last line is the last record: after a stop on lost precision (decided after
    the check, which verbose=1 may have skipped) and after a record is amended to certify
    the weights returned (a line for the amended values)."""
    from sklstruct._progress import Certificate

    certificate = Certificate("Demo", tol=1e-9, max_iter=100, verbose=1)
    certificate.check(0, 4.0, 1.0, 10)
    certificate.check(1, 3.0, 1.5, 20)  # (within a second of the first: not printed)
    with pytest.warns(ConvergenceWarning, match="stopped early"):
        certificate.precision_lost("no step is representable")
    lines = capsys.readouterr().out.strip().splitlines()
    assert [LINE.match(line)["count"] for line in lines] == ["0", "1"]
    certificate.amend_last(2.5, 1.5)
    line = capsys.readouterr().out.strip()
    assert float(LINE.match(line)["primal"]) == 2.5 and line.endswith("amended: the "
                                                                       "weights returned")
    X, y = make_chain_data(n_sequences=30, seed=0)
    model = fit_quietly(M3NSimplicialDecomposition(C=1e10, tol=1e-12, verbose=1),
                        [x * 1e3 for x in X], y)
    last = LINE.match(capsys.readouterr().out.strip().splitlines()[-1])
    assert float(last["primal"]) == pytest.approx(model.history_["primal"][-1], rel=1e-5)
    assert int(last["count"]) == model.n_iter_


@pytest.mark.parametrize("model", MODELS, ids=repr)
def test_callback_stops_the_fit_with_a_certified_model(model):
    X, y = make_chain_data(n_sequences=20, seed=4)
    seen = []

    weights = []

    def stop_at_second_check(estimator, info):
        assert {"iteration", "primal", "dual", "gap", "time", "oracle_calls", "w"} <= set(info)
        seen.append(info["gap"])
        weights.append(info["w"])
        return len(seen) == 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a callback stop is no warning
        model.set_params(callback=stop_at_second_check, tol=1e-12).fit(X, y)
    assert len(seen) == 2
    assert model.history_["gap"].shape[0] == 2
    # each check hands over its own weights, not an array the learner goes on updating
    if weights[0] is not None:
        assert weights[0] is not weights[1]
        assert not np.shares_memory(weights[1], model.w_)
    np.testing.assert_equal(model.history_["gap"][-1], seen[-1])
    # the returned weights are those the last check certified (the subgradient solver records
    # the mean hinge of its own problem on an l1 ball, not this objective)
    if getattr(model, "solver", None) != "subgradient":
        assert model.objective(X, y) == pytest.approx(model.history_["primal"][-1], rel=1e-6)


def test_max_time_stops_with_a_warning():
    X, y = make_chain_data(n_sequences=200, seed=5, max_length=12)
    with pytest.warns(ConvergenceWarning, match="max_time"):
        model = M3NExpGrad(tol=1e-12, max_iter=100000, max_time=0.2).fit(X, y)
    assert model.history_["time"][-1] < 5.0
    assert np.isfinite(model.history_["gap"][-1])


def _schedule_run(relative_gap, tol, predict, growth=1.25, max_iter=1000):
    """Passes at which a CheckSchedule certifies a fit whose relative gap after k passes is
    ``relative_gap(k)``, until it reaches ``tol``."""
    from sklstruct._progress import Certificate, CheckSchedule

    certificate = Certificate("fit", tol=tol, max_iter=max_iter)
    schedule = CheckSchedule(certificate, growth=growth, predict=predict)
    checks = []
    for passes in range(1, max_iter + 1):
        if schedule.due(passes):
            checks.append(passes)
            if certificate.check(passes, 1.0, 1.0 - relative_gap(passes), 0):
                break
            schedule.checked(passes)
    return checks


def test_check_schedule_predicts_the_pass_that_reaches_tol():
    # a gap falling as 99.9 / k^2 reaches 1e-2 at pass 100; the geometric schedule certifies
    # at ..., 75, 94, 118, the power law through two certificates at 100
    def relative_gap(k):
        return 99.9 / k**2

    geometric = _schedule_run(relative_gap, 1e-2, predict=False)
    predicted = _schedule_run(relative_gap, 1e-2, predict=True)
    assert geometric[-3:] == [75, 94, 118]
    assert predicted[-1] == 100
    assert len(predicted) <= len(geometric)
    # a noisy gap: the prediction never certifies later than the geometric schedule would
    rng = np.random.default_rng(0)
    noise = np.exp(rng.normal(scale=0.1, size=1001))

    def noisy(k):
        return 100.0 / k**2 * noise[k]

    geometric = _schedule_run(noisy, 1e-2, predict=False)
    predicted = _schedule_run(noisy, 1e-2, predict=True)
    assert predicted[-1] <= geometric[-1]
    assert noisy(predicted[-1]) <= 1e-2 and all(noisy(k) > 1e-2 for k in predicted[:-1])


def test_check_schedule_on_a_flat_gap_falls_back_to_the_geometric_passes():
    # a gap that barely moves predicts a crossing too far away to compute: the geometric
    # schedule goes on (no overflow)
    def flat(k):
        return 0.05 if k < 200 else 0.05 - 1e-15 * k

    checks = _schedule_run(flat, 1e-2, predict=True, max_iter=300)
    assert checks == _schedule_run(flat, 1e-2, predict=False, max_iter=300)


def test_check_schedule_on_a_gap_stalling_above_tol_checks_sparingly():
    # the gap falls as 99.9 / k^2, then stalls just above tol from pass 60 to 200: after a few
    # missed predictions the checks are as sparse as the geometric ones
    def stalling(k):
        return 0.01002 if 60 <= k < 200 else 99.9 / max(k, 1) ** 2 if k < 60 else 0.0099

    predicted = _schedule_run(stalling, 1e-2, predict=True, max_iter=300)
    geometric = _schedule_run(stalling, 1e-2, predict=False, max_iter=300)
    assert 200 <= predicted[-1] <= geometric[-1] == 232
    assert len(predicted) <= len(geometric) + 3


KERNEL_MODELS = [M3NExcessiveGap(kernel="rbf", tol=1e-3, max_iter=100),
                 StructSVMCuttingPlane(kernel="rbf", n_basis=10, random_state=0, tol=1e-3)]


@pytest.mark.parametrize("model", MODELS + KERNEL_MODELS, ids=repr)
def test_callback_model_predicts_and_scores_at_the_current_weights(model):
    """The documented use: stop on a validation score. The callback's model is a fitted copy
    at the check's weights, so predict, score and objective work on it."""
    X, y = make_chain_data(n_sequences=20, seed=4)
    X_val, y_val = make_chain_data(n_sequences=10, seed=5)
    scores, objectives, primals = [], [], []

    def stop_on_validation(estimator, info):
        scores.append(estimator.score(X_val, y_val))
        objectives.append(estimator.objective(X, y))
        primals.append(info["primal"])
        assert len(estimator.predict(X_val)) == len(X_val)
        return len(scores) == 3

    fit_quietly(model.set_params(callback=stop_on_validation, tol=1e-12), X, y)
    assert 1 <= len(scores) <= 3 and all(0.0 <= score <= 1.0 for score in scores)
    # the fit returns the weights of one of its checks (the last, or the best certified)
    assert any(model.score(X_val, y_val) == pytest.approx(score) for score in scores)
    # the callback's model is the one each check certified (the subgradient solver records
    # its own problem's value, not this objective; a check without a primal certifies none)
    if getattr(model, "solver", None) != "subgradient":
        for objective, primal in zip(objectives, primals):
            assert np.isnan(primal) or objective == pytest.approx(primal, rel=1e-6)
