"""``IncrementalLP``, the working-set LP of the l1 learner: after every ``add_rows`` its optimum
equals that of ``scipy.optimize.linprog`` solving the whole LP from scratch, with either
backend, and the warm-started HiGHS instance restarts from its previous basis."""

import os
import signal
import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from sklstruct._solvers.lp import IncrementalLP, highspy_available

BACKENDS = [
    "scipy",
    pytest.param("highspy", marks=pytest.mark.skipif(not highspy_available(),
                                                     reason="highspy is not installed")),
]


def _random_rows(rng, m, n, sparse):
    """``m`` rows with mixed signs; about half of the entries are zero."""
    rows = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.5)
    return sp.csr_matrix(rows) if sparse else rows


def _check_against_linprog(lp, cost, rows, rhs):
    x, value = lp.solve()
    A, b = np.vstack(rows), np.concatenate(rhs)
    reference = linprog(cost, A_ub=A, b_ub=b, bounds=(0, None), method="highs")
    assert reference.status == 0
    scale = 1.0 + abs(reference.fun)
    assert value == pytest.approx(reference.fun, abs=1e-9 * scale)
    assert cost @ x == pytest.approx(value, abs=1e-9 * scale)
    assert np.all(x >= -1e-9)
    assert np.all(A @ x <= b + 1e-9 * (1.0 + np.abs(b)))
    return x, value


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(6))
def test_every_solve_matches_linprog_from_scratch(backend, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 15))
    cost = rng.normal(size=n)
    lp = IncrementalLP(cost, backend=backend)
    assert lp.backend == backend
    # a capacity row keeps the LP bounded; every later row has b >= 0, so x = 0 is feasible
    rows, rhs = [np.ones((1, n))], [np.array([3.0])]
    lp.add_rows(rows[0], rhs[0])
    _check_against_linprog(lp, cost, rows, rhs)
    for step in range(8):
        m = int(rng.integers(1, 4))
        new_rows = _random_rows(rng, m, n, sparse=bool(step % 2))
        new_rhs = rng.uniform(0.0, 2.0, size=m)
        lp.add_rows(new_rows, new_rhs)
        rows.append(new_rows.toarray() if sp.issparse(new_rows) else new_rows)
        rhs.append(new_rhs)
        assert lp.n_rows == sum(len(b) for b in rhs)
        _check_against_linprog(lp, cost, rows, rhs)


@pytest.mark.parametrize("seed", range(4))
def test_backends_agree_and_warm_start_equals_cold_start(seed):
    if not highspy_available():
        pytest.skip("highspy is not installed")
    rng = np.random.default_rng(10 + seed)
    n = 10
    cost = rng.normal(size=n)
    warm = IncrementalLP(cost, backend="highspy")
    scipy_lp = IncrementalLP(cost, backend="scipy")
    rows, rhs = [np.ones((1, n))], [np.array([2.0])]
    for lp in (warm, scipy_lp):
        lp.add_rows(rows[0], rhs[0])
    for _ in range(6):
        new_rows, new_rhs = _random_rows(rng, 2, n, sparse=True), rng.uniform(0, 1, size=2)
        rows.append(new_rows.toarray())
        rhs.append(new_rhs)
        for lp in (warm, scipy_lp):
            lp.add_rows(new_rows, new_rhs)
        _, warm_value = warm.solve()
        cold = IncrementalLP(cost, backend="highspy")
        cold.add_rows(np.vstack(rows), np.concatenate(rhs))
        _, cold_value = cold.solve()
        _, scipy_value = scipy_lp.solve()
        assert warm_value == pytest.approx(cold_value, abs=1e-10)
        assert warm_value == pytest.approx(scipy_value, abs=1e-10)


def test_rows_the_optimum_satisfies_cost_no_simplex_iteration():
    # the previous optimal basis stays optimal after appending rows it satisfies strictly:
    # the restarted dual simplex has nothing to do
    if not highspy_available():
        pytest.skip("highspy is not installed")
    rng = np.random.default_rng(0)
    n = 8
    cost = rng.normal(size=n)
    lp = IncrementalLP(cost, backend="highspy")
    lp.add_rows(np.ones((1, n)), [4.0])
    lp.add_rows(_random_rows(rng, 5, n, sparse=False), rng.uniform(0.5, 1.0, size=5))
    x, value = lp.solve()
    assert lp._highs.getInfo().simplex_iteration_count > 0
    loose = _random_rows(rng, 3, n, sparse=True)
    lp.add_rows(loose, loose @ x + 1.0)
    x_again, value_again = lp.solve()
    assert lp._highs.getInfo().simplex_iteration_count == 0
    assert value_again == value
    np.testing.assert_array_equal(x_again, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_infeasible_or_unbounded_is_a_runtime_error(backend):
    lp = IncrementalLP(np.array([1.0, 1.0]), backend=backend)
    lp.add_rows(np.array([[-1.0, -1.0]]), [-1.0])  # x0 + x1 >= 1 is feasible
    _, value = lp.solve()
    assert value == pytest.approx(1.0)
    lp.add_rows(np.array([[1.0, 1.0]]), [0.5])  # ... and x0 + x1 <= 0.5 is not
    with pytest.raises(RuntimeError, match="working-set LP failed"):
        lp.solve()
    unbounded = IncrementalLP(np.array([-1.0, 0.0]), backend=backend)
    unbounded.add_rows(np.array([[0.0, 1.0]]), [1.0])
    with pytest.raises(RuntimeError, match="working-set LP failed"):
        unbounded.solve()


def test_backend_choice():
    assert IncrementalLP(np.ones(2)).backend == ("highspy" if highspy_available() else "scipy")
    with pytest.raises(ValueError, match="backend must be"):
        IncrementalLP(np.ones(2), backend="glpk")


def _slow_lp(backend, m=2000, seed=0):
    """An LP whose dual simplex takes thousands of iterations (about 4 s here with m=2000,
    1 s with m=1500)."""
    rng = np.random.default_rng(seed)
    A = sp.random(m, 2 * m, density=0.01, random_state=seed, format="csr")
    A.data = rng.normal(size=A.nnz)
    lp = IncrementalLP(rng.uniform(0.5, 1.5, 2 * m), backend=backend)
    lp.add_rows(-A, -(A @ rng.uniform(0, 1, 2 * m) - rng.uniform(0, 0.1, m)))
    return lp


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_solve_that_runs_out_of_time_returns_none(backend):
    lp = _slow_lp(backend)
    started = time.perf_counter()
    assert lp.solve(time_limit=0.2) is None
    assert time.perf_counter() - started < 1.5
    assert lp.solve(time_limit=0.0) is None


@pytest.mark.skipif(not highspy_available() or not hasattr(signal, "setitimer"),
                    reason="needs highspy and signal.setitimer")
def test_a_signal_interrupts_a_highspy_solve():
    """The handler's exception surfaces within a fraction of a second, not after the solve."""
    lp = _slow_lp("highspy")

    class Alarm(Exception):
        pass

    def handler(signum, frame):
        raise Alarm

    previous = signal.signal(signal.SIGALRM, handler)
    started = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(Alarm):
            lp.solve()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < 0.6


@pytest.mark.skipif(not highspy_available(), reason="highspy is not installed")
def test_the_time_limit_of_a_later_solve_counts_from_its_start():
    """HiGHS's clock runs on over the solves of an instance: a limit set as the time left
    stopped a warm-started solve at once after a long first one."""
    lp = _slow_lp("highspy", m=1500)
    started = time.perf_counter()
    x, _ = lp.solve()
    first = time.perf_counter() - started
    rng = np.random.default_rng(1)
    rows = sp.random(3, x.shape[0], density=0.5, random_state=1, format="csr")
    lp.add_rows(rows, rows @ x - rng.uniform(0.01, 0.1, 3))  # cuts off the optimum
    assert lp.solve(time_limit=max(0.5, 0.5 * first)) is not None


@pytest.mark.skipif(not highspy_available(), reason="highspy is not installed")
def test_concurrent_highspy_solves_overlap_and_agree():
    """Two fits' LPs solved on two threads at once (highspy's own start/wait locks are
    shared by the process: a solve started while another ran was refused)."""
    import threading

    problems = [_slow_lp("highspy", m=1200, seed=seed) for seed in (0, 1, 0, 1)]
    expected = [lp.solve()[1] for lp in problems[:2]]
    values, errors = [None, None], []

    def solve(k):
        try:
            values[k] = problems[2 + k].solve()[1]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=solve, args=(k,)) for k in (0, 1)]
    threads[0].start()
    time.sleep(0.1)  # the first solve is under way
    threads[1].start()
    for thread in threads:
        thread.join()
    assert not errors
    assert values == expected


@pytest.mark.skipif(not highspy_available() or not hasattr(signal, "setitimer"),
                    reason="needs highspy and signal.setitimer")
def test_an_uncaught_interrupt_of_a_solve_exits_cleanly(tmp_path):
    """The interpreter aborted ("terminate called without an active exception") when it
    exited while a cancelled HiGHS solve still ran in its thread."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "interrupted_solve.py"
    script.write_text(textwrap.dedent("""
        import signal
        from tests.test_lp import _slow_lp

        def interrupt(signum, frame):
            raise KeyboardInterrupt

        lp = _slow_lp("highspy")
        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        lp.solve()
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True,
                            text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": root})
    assert "KeyboardInterrupt" in result.stderr
    assert "terminate called" not in result.stderr
    # (an uncaught KeyboardInterrupt ends the process by SIGINT; the abort was SIGABRT)
    assert result.returncode == -signal.SIGINT, result.stderr[-500:]


def test_highs_instances_leave_the_process_stdout_alone():
    """The banner of HiGHS's first instance was silenced by pointing fd 1 at /dev/null
    around every construction: concurrent fits interleaved the redirections and left fd 1
    on /dev/null for good, and with fd 1 closed the fit failed (EBADF)."""
    import subprocess
    import sys
    import threading

    pytest.importorskip("highspy")

    def descriptor():
        status = os.fstat(1)
        return status.st_dev, status.st_ino

    before = descriptor()

    def build():
        for _ in range(30):
            IncrementalLP(np.ones(4), backend="highspy")

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert descriptor() == before
    code = ("import os, numpy as np\n"
            "from sklstruct._solvers.lp import IncrementalLP\n"
            "os.close(1)\n"
            "IncrementalLP(np.ones(4), backend='highspy')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr
