"""Shrinking in M3NSimplicialDecomposition's compiled passes: certificates that give every
example's gap, sweeps over the examples whose gap exceeds a threshold."""

import threading
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from sklstruct import ChainStructure, M3NSimplicialDecomposition, MultiClass
from sklstruct.learners._frank_wolfe import (BlockFrankWolfeState,
                                                       MultiPointFrankWolfeState)
from sklstruct.learners import _multi_point_fast
from sklstruct.learners._factored_dual_fast import structured_hinge_pass
from sklstruct.structures._base import primal_objective as viterbi_primal
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import exact_optimum, primal_objective
from ._helpers import make_chain_data


def _bound(structure, X, y):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    Y = np.concatenate(y).astype(np.intp)
    n_states = int(Y.max()) + 1
    return structure.bind(batch.X.shape[1], n_states, np.arange(n_states), Y), batch, Y


def _states(bound, batch, Y, C):
    return [BlockFrankWolfeState(bound, batch, Y, C),
            MultiPointFrankWolfeState(bound, batch, Y, C, 2, cached=False),
            MultiPointFrankWolfeState(bound, batch, Y, C, 3, cached=True)]


@pytest.mark.parametrize("structure", [ChainStructure(),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5])])
def test_certificate_gaps_sum_to_the_duality_gap(structure):
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=7)
    bound, batch, Y = _bound(structure, X, y)
    for state in _states(bound, batch, Y, 0.5):
        for passes in range(6):
            w, dual = state.certificate()
            primal, gaps = state.primal_and_gaps()
            np.testing.assert_allclose(gaps.sum(), primal - dual, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(primal, primal_objective(bound, batch, Y, w, 0.5),
                                       rtol=1e-12)
            assert gaps.min() >= -1e-12
            assert passes == 0 or gaps.max() > 0  # (not at the optimum after a few passes)
            state.run_pass()


@pytest.mark.parametrize("n_jobs", [2, 3, -1])
def test_certificates_on_threads_give_the_same_arrays(n_jobs):
    # the examples are split among the threads, each pass with its own oracle workspace:
    # every example's hinge and gap the same bits as on one thread (130 examples: up to
    # two threads for primal_and_gaps, one per 64 examples)
    X, y = make_chain_data(n_sequences=130, n_states=4, n_features=5, max_length=9, seed=11)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    for state in _states(bound, batch, Y, 0.5):
        for _ in range(3):
            state.run_pass()
            hinge, gaps = state._passes.certificate_pass(state, 1)
            primal, _ = state.primal_and_gaps()
            threaded_primal, threaded_gaps = state.primal_and_gaps(n_jobs)
            assert threaded_primal == primal
            assert np.array_equal(threaded_gaps, gaps)
            threaded_hinge, _ = state._passes.certificate_pass(state, abs(n_jobs))
            assert np.array_equal(threaded_hinge, hinge)


def test_sweeps_visit_only_the_active_examples_within_the_budget():
    X, y = make_chain_data(n_sequences=12, n_states=3, n_features=3, max_length=5, seed=3)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    for state in _states(bound, batch, Y, 0.5):
        state.run_pass()
        w, dual = state.certificate()
        _, gaps = state.primal_and_gaps()
        active = np.flatnonzero(gaps > 0)[:5]
        others = np.setdiff1d(np.arange(12), active)
        state.block_gap[:] = -1.0  # (a visit sets its example's gap)
        visits = state.run_active(active, 0.0, 0.0, 7, seed=1)
        assert visits == 7  # the second sweep is cut short
        assert np.all(state.block_gap[others] == -1.0)
        assert np.all(state.block_gap[active] >= 0.0)
        w_new, new_dual = state.certificate()
        assert new_dual >= dual - 1e-12
        # the estimated gap (every example's last gap) is below the target after 3 visits
        assert state.run_active(active, 0.0, 0.0, 7, seed=1, target_gap=np.inf,
                                min_visits=3) == 3
        assert state.run_active([], 0.0, 0.0, 10, seed=1) == 0
        assert state.run_active(active, 0.0, 0.0, 0, seed=1) == 0
        with pytest.raises(ValueError, match="outside"):
            state.run_active([12], 0.0, 0.0, 10, seed=1)
        with pytest.raises(ValueError, match="max_visits"):
            state.run_active(active, 0.0, 0.0, -1, seed=1)
        with pytest.raises(ValueError, match="min_visits"):
            state.run_active(active, 0.0, 0.0, 5, seed=1, min_visits=-1)


@pytest.mark.parametrize("max_points", [1, 4])
@pytest.mark.parametrize("shrinking", [True, False])
def test_within_reported_gap_of_the_exact_optimum(max_points, shrinking):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=11)
    model = M3NSimplicialDecomposition(C=0.7, max_points=max_points, shrinking=shrinking,
                                       tol=1e-3, max_iter=5000, random_state=0).fit(X, y)
    bound, batch, Y = _bound(model.structure_, X, y)
    lower, upper, _ = exact_optimum(bound, batch, Y, 0.7)
    h = model.history_
    assert h["gap"][-1] <= 1e-3 * h["primal"][-1]
    assert h["dual"][-1] <= upper + 1e-9
    assert model.objective(X, y) == pytest.approx(h["primal"][-1], rel=1e-9)
    assert model.objective(X, y) - lower <= h["gap"][-1] + 1e-9
    assert np.all(np.diff(h["dual"]) >= -1e-9)
    assert h["passes"][-1] == model.n_iter_
    assert np.all(np.diff(h["passes"]) >= 0)


def test_max_iter_bounds_the_visits():
    X, y = load_digits(return_X_y=True)
    with pytest.warns(ConvergenceWarning):
        model = M3NSimplicialDecomposition(max_iter=5, random_state=0).fit(X, y)
    h = model.history_
    assert model.n_iter_ == 5 and h["passes"][-1] == 5
    # the sweeps' visits plus one decoding of the data per certificate
    assert h["oracle_calls"][-1] == 5 * X.shape[0] + len(h["gap"]) * X.shape[0]


@pytest.mark.parametrize("max_points", [5, 10])
def test_digits_certified_within_max_iter(max_points):
    """Dense multiclass data whose features are large (pixels 0..16, so ``C ||x||^2`` is
    about 2,000-6,000 at ``C=1``): without shrinking the per-example passes reach a relative gap
    of about 0.7 in the default ``max_iter=1000`` passes (they need about 5,600); with it the
    default learner certifies ``tol=1e-2`` within that budget."""
    X, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = M3NSimplicialDecomposition(max_points=max_points, random_state=0).fit(X, y)
    h = model.history_
    assert h["gap"][-1] <= 1e-2 * h["primal"][-1]
    assert model.n_iter_ <= 1000
    # (LinearSVC's Crammer-Singer solution at tol=1e-6 has P = 0.92132, as bound the dual)
    assert h["dual"][-1] <= 0.92133 <= h["primal"][-1]
    assert model.score(X, y) > 0.99
    assert isinstance(model.structure_, MultiClass)


def test_without_shrinking_every_pass_visits_every_example():
    X, y = make_chain_data(n_sequences=20, seed=6)
    model = M3NSimplicialDecomposition(C=0.2, shrinking=False, check_every=1, max_iter=4,
                                       tol=1e-12, random_state=0)
    with pytest.warns(ConvergenceWarning):
        model.fit(X, y)
    h = model.history_
    np.testing.assert_array_equal(h["passes"], np.arange(5))
    # a pass and a certificate per pass (none at w = 0)
    np.testing.assert_array_equal(h["oracle_calls"], 40 * np.arange(5))


def test_certificate_pass_matches_the_hinge_pass_on_multiclass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)) * 10
    y = rng.integers(0, 4, size=40)
    bound = MultiClass().bind(5, 4, np.arange(4), y)
    batch = SequenceBatch(X, np.arange(41, dtype=np.int64))
    state = MultiPointFrankWolfeState(bound, batch, y.astype(np.intp), 1.0, 3)
    for _ in range(3):
        state.run_pass()
    w, dual = state.certificate()
    primal, gaps = state.primal_and_gaps()
    hinge = structured_hinge_pass(state, state.Y)
    assert primal == pytest.approx(0.5 * w @ w + hinge.sum(), rel=1e-12)
    assert gaps.sum() == pytest.approx(primal - dual, rel=1e-10)


def _sparse_chains(n_sequences, seed):
    """Chains whose tokens have a few features among many, some of them frequent: the
    features an example shares with the one visited before it vary."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_sequences):
        length = int(rng.integers(1, 30))
        labels = rng.integers(0, 5, size=length)
        rows = np.zeros((length, 408))
        for t in range(length):
            rows[t, rng.integers(0, 8)] = 1.0  # (frequent)
            rows[t, 8 + 80 * labels[t] + rng.integers(0, 80, size=3)] += rng.normal(1.0, 0.3)
        X.append(rows)
        y.append(labels)
    return X, y


def _state_arrays(state):
    return [np.array(a, copy=True) for a in (state.WT, state.pair_v, state.vertex_weight,
                                             state.vertex_labels, state.block_gap,
                                             state.expected_loss)]


def test_pipelined_visits_do_not_depend_on_the_threads():
    # the uncached multi-point visits run in two stages, on two threads when asked: every
    # array of the state the same bits as on one thread, after full passes and after
    # shrinking sweeps that stop mid-sweep at the target gap
    X, y = _sparse_chains(150, seed=5)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    states = [MultiPointFrankWolfeState(bound, batch, Y, 0.3, 3, cached=False)
              for _ in range(2)]
    assert states[0].two_stage
    order = np.random.default_rng(0).permutation(150)
    gaps = [state.run_pass(order, n_jobs=n_jobs) for state, n_jobs in zip(states, (1, 2))]
    assert gaps[0] == gaps[1] and gaps[0] > 0
    assert states[0].last_gain == states[1].last_gain > 0
    for _ in range(2):
        for state, n_jobs in zip(states, (1, -1)):
            state.run_pass(order[::-1], n_jobs=n_jobs)
    for one, two in zip(_state_arrays(states[0]), _state_arrays(states[1])):
        assert np.array_equal(one, two)
    _, gaps = states[0].primal_and_gaps()
    target = 0.5 * gaps.sum()
    visits = [state.run_active(np.arange(150), 0.0, 0.0, 1000, seed=3, target_gap=target,
                               min_visits=40, n_jobs=n_jobs)
              for state, n_jobs in zip(states, (1, 2))]
    assert visits[0] == visits[1] and 40 <= visits[0] < 1000
    for one, two in zip(_state_arrays(states[0]), _state_arrays(states[1])):
        assert np.array_equal(one, two)
    # the visits ascend the dual and keep its certificate consistent
    w, dual = states[1].certificate()
    primal, gaps = states[1].primal_and_gaps(2)
    np.testing.assert_allclose(gaps.sum(), primal - dual, rtol=1e-10)
    assert dual > 0
    np.testing.assert_allclose(primal, viterbi_primal(bound, batch, Y, w, 0.3, "margin")[0],
                               rtol=1e-12)


@pytest.mark.parametrize("slow_waits", [1, 10])
def test_pipelined_visits_that_go_on_one_thread_keep_the_iterates(monkeypatch, slow_waits):
    """A run of two-stage visits whose second thread is often off its core goes on one
    thread part-way (forced here: every wait counts as long): the same bits as on one
    thread from the start, the second thread stopped after the first stages it summed."""
    from sklstruct.learners import _multi_point_fast

    X, y = _sparse_chains(150, seed=5)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    states = [MultiPointFrankWolfeState(bound, batch, Y, 0.3, 3, cached=False)
              for _ in range(2)]
    order = np.random.default_rng(0).permutation(150)
    states[0].run_pass(order, n_jobs=1)
    monkeypatch.setattr(_multi_point_fast, "SLOW_WAIT_ROUNDS", 0)
    monkeypatch.setattr(_multi_point_fast, "PIPELINE_SLOW_WAITS", slow_waits)
    states[1].run_pass(order, n_jobs=2)
    assert states[1].pipeline_fallbacks == 1 and states[0].pipeline_fallbacks == 0
    for one, two in zip(_state_arrays(states[0]), _state_arrays(states[1])):
        assert np.array_equal(one, two)
    visits = [state.run_active(np.arange(150), 0.0, 0.0, 400, seed=3, n_jobs=n_jobs)
              for state, n_jobs in zip(states, (1, 2))]
    assert visits[0] == visits[1] and states[1].pipeline_fallbacks >= 2
    for one, two in zip(_state_arrays(states[0]), _state_arrays(states[1])):
        assert np.array_equal(one, two)


def test_two_stage_visits_where_examples_share_few_features():
    # the two stages pay where most of an example's stored entries have features the
    # example before lacks: not with a few dense features, which every example has
    X, y = _sparse_chains(40, seed=2)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    share = _multi_point_fast.shared_entry_fraction(batch, 408)
    # against a direct count over the same pairs of examples (k, k + 20)
    features = [set(np.flatnonzero(x.any(axis=0))) for x in X]
    expected = [np.isin(np.nonzero(X[k + 20])[1], list(features[k])).mean()
                for k in range(20)]
    counts = [np.count_nonzero(X[k + 20]) for k in range(20)]
    np.testing.assert_allclose(share, np.average(expected, weights=counts))
    assert MultiPointFrankWolfeState(bound, batch, Y, 0.3, 3, cached=False).two_stage
    X, y = make_chain_data(n_sequences=40, n_states=3, n_features=5, max_length=6, seed=1)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    assert _multi_point_fast.shared_entry_fraction(batch, 5) == 1.0
    assert not MultiPointFrankWolfeState(bound, batch, Y, 0.3, 3, cached=False).two_stage
    with pytest.raises(ValueError, match="outside"):
        _multi_point_fast.shared_entry_fraction(batch, 4)


def test_an_interrupt_while_starting_the_second_thread_stops_it(monkeypatch):
    """The pipelined pass queued its second thread's job before the try that stops it: a
    Ctrl-C in the pool's Thread.start left that job spinning for a go it never got, and
    the pass's close hung on it."""
    import concurrent.futures

    X, y = _sparse_chains(150, seed=5)
    bound, batch, Y = _bound(ChainStructure(), X, y)
    state = MultiPointFrankWolfeState(bound, batch, Y, 0.3, 3, cached=False)
    assert state.two_stage
    original = concurrent.futures.ThreadPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        original(self, fn, *args, **kwargs)  # (queued, its thread started)
        monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", original)
        raise KeyboardInterrupt

    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", submit)
    outcome = []
    runner = threading.Thread(target=lambda: outcome.append(_interrupted_pass(state)),
                              daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the interrupted pass hung"
    assert outcome == ["interrupted"]


def _interrupted_pass(state):
    try:
        state.run_pass(np.arange(150), n_jobs=2)
    except KeyboardInterrupt:
        return "interrupted"
    return "finished"
