"""Tests of the batched chain inference kernels against exhaustive enumeration."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
import scipy.sparse as sp
from joblib import parallel_config

from sklstruct._inference.chain import (forward_backward, loss_augmented_viterbi, topk_viterbi,
                                        viterbi, viterbi_sparse)

from . import _chain_reference as ref
from ._chain_reference import sequence_scores

ATOL = 1e-9
SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def chain_batches(draw, integer_scores=False):
    """A batch of 1-4 sequences of 1-6 tokens over 1-4 states, with random potentials."""
    n_states = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    n_tokens = sum(lengths)
    if integer_scores:
        elements = st.integers(-2, 2).map(float)
    else:
        elements = st.floats(-5, 5, allow_nan=False, allow_infinity=False)

    def array(shape):
        return draw(hnp.arrays(np.float64, shape, elements=elements))

    unary = array((n_tokens, n_states))
    transition = array((n_states, n_states))
    start = draw(st.one_of(st.none(), st.just(array((n_states,)))))
    end = draw(st.one_of(st.none(), st.just(array((n_states,)))))
    y = draw(hnp.arrays(np.int64, n_tokens, elements=st.integers(0, n_states - 1)))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return unary, offsets, transition, start, end, y


any_batch = st.one_of(chain_batches(), chain_batches(integer_scores=True))


def _sequences(unary, offsets, start, end, *per_token):
    """Yield each sequence's unary block, zero-filled start/end and per-token slices."""
    n_states = unary.shape[1]
    start = np.zeros(n_states) if start is None else start
    end = np.zeros(n_states) if end is None else end
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        yield (unary[lo:hi], start, end) + tuple(array[lo:hi] for array in per_token)


def _random_batch(rng, n_sequences, n_states, max_length=30, scale=1.0):
    lengths = rng.integers(1, max_length + 1, size=n_sequences)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    unary = scale * rng.normal(size=(offsets[-1], n_states))
    transition = scale * rng.normal(size=(n_states, n_states))
    start = scale * rng.normal(size=n_states)
    end = scale * rng.normal(size=n_states)
    y = rng.integers(0, n_states, size=offsets[-1])
    return unary, offsets, transition, start, end, y


@SETTINGS
@given(batch=any_batch)
def test_viterbi_matches_brute_force(batch):
    unary, offsets, transition, start, end, _ = batch
    labels, scores = viterbi(unary, offsets, transition, start, end)
    assert labels.dtype == np.int64 and labels.shape == (unary.shape[0],)
    assert scores.shape == (offsets.shape[0] - 1,)
    achieved = sequence_scores(unary, offsets, transition, start, end, labels)
    np.testing.assert_allclose(achieved, scores, rtol=0, atol=ATOL)
    for i, (u, s, e, lab) in enumerate(_sequences(unary, offsets, start, end, labels)):
        _, best = ref.brute_force_viterbi(u, transition, s, e)
        assert scores[i] == pytest.approx(best, abs=ATOL)
        assert ref.labeling_scores(u, transition, s, e, lab[None])[0] == pytest.approx(
            best, abs=ATOL
        )


@SETTINGS
@given(
    batch=any_batch,
    rescale=st.sampled_from(["margin", "slack"]),
    weight_choice=st.sampled_from(["none", "ones", "mixed"]),
    data=st.data(),
)
def test_loss_augmented_matches_brute_force(batch, rescale, weight_choice, data):
    unary, offsets, transition, start, end, y = batch
    n_states = unary.shape[1]
    if weight_choice == "none":
        loss_weights, weights = None, np.ones(n_states)
    elif weight_choice == "ones":
        loss_weights = weights = np.ones(n_states)
    else:
        values = st.sampled_from([0.0, 0.5, 1.0, 1.25, 2.0])
        loss_weights = weights = np.array(
            data.draw(st.lists(values, min_size=n_states, max_size=n_states))
        )
    labels, losses, scores = loss_augmented_viterbi(
        unary, offsets, transition, start, end, y, loss_weights, rescale=rescale
    )
    np.testing.assert_allclose(
        scores,
        sequence_scores(unary, offsets, transition, start, end, labels),
        rtol=0,
        atol=ATOL,
    )
    pieces = _sequences(unary, offsets, start, end, y, labels)
    for i, (u, s, e, y_seq, lab) in enumerate(pieces):
        best = ref.brute_force_loss_augmented(u, transition, s, e, y_seq, weights, rescale)
        loss = ref.hamming_losses(y_seq, lab[None], weights)[0]
        assert losses[i] == pytest.approx(loss, abs=ATOL)
        score_y = ref.labeling_scores(u, transition, s, e, y_seq[None])[0]
        value = ref.loss_augmented_objective(scores[i], losses[i], score_y, rescale)
        assert value == pytest.approx(best, abs=ATOL)
        if rescale == "slack" and best <= ATOL:
            np.testing.assert_array_equal(lab, y_seq)


@SETTINGS
@given(batch=any_batch)
def test_forward_backward_matches_brute_force(batch):
    unary, offsets, transition, start, end, _ = batch
    node, edges, log_partition = forward_backward(unary, offsets, transition, start, end)
    n_states = unary.shape[1]
    assert node.shape == unary.shape
    assert edges.shape == (offsets.shape[0] - 1, n_states, n_states)
    for i, (u, s, e) in enumerate(_sequences(unary, offsets, start, end)):
        node_ref, edge_ref, log_partition_ref = ref.brute_force_marginals(u, transition, s, e)
        assert log_partition[i] == pytest.approx(log_partition_ref, abs=ATOL)
        np.testing.assert_allclose(
            node[offsets[i] : offsets[i + 1]], node_ref, rtol=0, atol=ATOL
        )
        np.testing.assert_allclose(edges[i], edge_ref, rtol=0, atol=ATOL)


def test_slack_returns_truth_when_nothing_violates():
    # y scores 10 per token above any other labeling: every ybar != y has a negative value
    n_states, length = 3, 5
    y = np.array([0, 2, 1, 1, 0])
    unary = np.zeros((length, n_states))
    unary[np.arange(length), y] = 10.0
    offsets = np.array([0, length])
    transition = np.zeros((n_states, n_states))
    labels, losses, scores = loss_augmented_viterbi(
        unary, offsets, transition, None, None, y, rescale="slack"
    )
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_array_equal(losses, [0.0])
    assert scores[0] == pytest.approx(10.0 * length)
    # the margin oracle, in contrast, is allowed to move away from y only if it pays
    labels, losses, _ = loss_augmented_viterbi(
        unary, offsets, transition, None, None, y, rescale="margin"
    )
    np.testing.assert_array_equal(labels, y)


def test_slack_with_zero_weights_returns_truth():
    rng = np.random.default_rng(0)
    unary, offsets, transition, start, end, y = _random_batch(rng, 5, 3)
    labels, losses, _ = loss_augmented_viterbi(
        unary, offsets, transition, start, end, y, np.zeros(3), rescale="slack"
    )
    np.testing.assert_array_equal(labels, y)
    np.testing.assert_array_equal(losses, np.zeros(5))


def test_ties_prefer_lower_states():
    offsets = np.array([0, 4, 5])
    unary = np.zeros((5, 3))
    labels, scores = viterbi(unary, offsets, np.zeros((3, 3)))
    np.testing.assert_array_equal(labels, np.zeros(5))
    np.testing.assert_array_equal(scores, [0.0, 0.0])
    y = np.full(5, 2)
    labels, _, _ = loss_augmented_viterbi(
        unary, offsets, np.zeros((3, 3)), None, None, y, rescale="slack"
    )
    np.testing.assert_array_equal(labels, np.zeros(5))


@pytest.mark.parametrize("seed", [0, 1])
def test_lockstep_references_match_kernels(seed):
    rng = np.random.default_rng(seed)
    unary, offsets, transition, start, end, _ = _random_batch(rng, 40, 5, scale=3.0)
    labels, scores = viterbi(unary, offsets, transition, start, end)
    labels_ref, scores_ref = ref.viterbi_lockstep(unary, offsets, transition, start, end)
    np.testing.assert_array_equal(labels, labels_ref)
    np.testing.assert_allclose(scores, scores_ref, rtol=1e-12)
    result = forward_backward(unary, offsets, transition, start, end)
    expected = ref.forward_backward_lockstep(unary, offsets, transition, start, end)
    for got, want in zip(result, expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def _decoding_case(kind, n_states, rng):
    """Potentials under which decoding prunes most steps (one state stands out), prunes
    steps whose bound ties candidates (small integers), keeps every state (weak scores), or
    handles scores far from 1 in magnitude."""
    lengths = rng.integers(1, 25, size=60)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    n = int(offsets[-1])
    if kind == "one_stands_out":
        unary = rng.normal(size=(n, n_states))
        unary[np.arange(n), rng.integers(0, n_states, size=n)] += 12.0
        transition = rng.normal(size=(n_states, n_states))
    elif kind == "integer_ties":
        unary = rng.integers(0, 3, size=(n, n_states)).astype(float)
        unary[np.arange(n), rng.integers(0, n_states, size=n)] += 3.0
        transition = rng.integers(0, 2, size=(n_states, n_states)).astype(float)
    elif kind == "weak":
        unary = rng.normal(size=(n, n_states))
        transition = rng.normal(size=(n_states, n_states))
    else:  # "large", "small"
        scale = 1e150 if kind == "large" else 1e-150
        unary = scale * rng.normal(size=(n, n_states))
        unary[np.arange(n), rng.integers(0, n_states, size=n)] += 8 * scale
        transition = scale * rng.normal(size=(n_states, n_states))
    start = rng.integers(-1, 2, size=n_states) * transition.std()
    end = rng.integers(-1, 2, size=n_states) * transition.std()
    return unary, offsets, transition, start, end


@pytest.mark.parametrize("n_states", [16, 17, 44])
@pytest.mark.parametrize("kind", ["one_stands_out", "integer_ties", "weak", "large", "small"])
def test_pruned_decoding_gives_the_bits_of_the_full_recursion(kind, n_states):
    # decoding leaves out previous states that cannot reach a step's best; the lockstep
    # reference scans them all with the same sums, ties going to the lower state
    rng = np.random.default_rng(n_states)
    unary, offsets, transition, start, end = _decoding_case(kind, n_states, rng)
    labels_ref, scores_ref = ref.viterbi_lockstep(unary, offsets, transition, start, end)
    labels, scores = viterbi(unary, offsets, transition, start, end)
    np.testing.assert_array_equal(labels, labels_ref)
    np.testing.assert_array_equal(scores, scores_ref)
    top_labels, top_scores, _ = topk_viterbi(unary, offsets, transition, start, end, k=1)
    np.testing.assert_array_equal(top_labels[:, 0], labels_ref)
    np.testing.assert_array_equal(top_scores[:, 0], scores_ref)
    # the same unary scores formed from token features: identity features
    features = sp.identity(unary.shape[0], format="csr")
    labels, scores = viterbi_sparse(features, unary, offsets, transition, start, end, n_jobs=2)
    np.testing.assert_array_equal(labels, labels_ref)
    np.testing.assert_array_equal(scores, scores_ref)
    # the loss-augmented decoder (which does not prune) with zero losses agrees
    zero_loss = np.zeros_like(unary)
    augmented, _, _ = loss_augmented_viterbi(unary, offsets, transition, start, end,
                                             labels_ref, token_loss=zero_loss)
    np.testing.assert_array_equal(augmented, labels_ref)


@pytest.mark.parametrize("n_states", [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 20, 23, 44])
@pytest.mark.parametrize("kind", ["one_stands_out", "integer_ties", "weak"])
def test_loss_augmented_decoding_gives_the_labels_of_the_full_recursion(kind, n_states):
    # the step over all previous states runs 16, 8 or 4 states at a time in vectors, the
    # last n_states % 4 as the four states that end the row (fewer than four states one by
    # one): the same labels as the lockstep reference on the augmented scores
    rng = np.random.default_rng(100 + n_states)
    unary, offsets, transition, start, end = _decoding_case(kind, n_states, rng)
    y = rng.integers(0, n_states, size=unary.shape[0])
    token_loss = rng.integers(0, 2, size=unary.shape).astype(float)
    labels_ref, _ = ref.viterbi_lockstep(unary + token_loss, offsets, transition, start, end)
    labels, _, scores = loss_augmented_viterbi(unary, offsets, transition, start, end, y,
                                               token_loss=token_loss)
    np.testing.assert_array_equal(labels, labels_ref)
    np.testing.assert_allclose(
        scores, sequence_scores(unary, offsets, transition, start, end, labels), rtol=1e-12)


@pytest.mark.parametrize("n_states", [9, 23])
@pytest.mark.parametrize("has_transition, has_start_end",
                         [(True, True), (False, True), (True, False), (False, False)])
def test_example_kernels_oracle_and_marginals(n_states, has_transition, has_start_end):
    # the per-example kernels of the compiled passes: their workspace holds the augmented
    # scores, zeros for the missing parts, the Viterbi values and the forward-backward tables
    from sklstruct._inference._kernels import ChainKernels

    rng = np.random.default_rng(n_states)
    unary, offsets, transition, start, end = _decoding_case("integer_ties", n_states, rng)
    transition = transition if has_transition else np.zeros_like(transition)
    start = start if has_start_end else np.zeros(n_states)
    end = end if has_start_end else np.zeros(n_states)
    theta = np.concatenate([np.zeros(0)] + ([transition.ravel()] if has_transition else [])
                           + ([start, end] if has_start_end else []))
    token_loss = rng.integers(0, 2, size=unary.shape).astype(float)
    kernels = ChainKernels(offsets, n_states, has_transition, has_start_end)
    labels_ref, _ = ref.viterbi_lockstep(unary + token_loss, offsets, transition, start, end)
    node_ref, _, log_partition_ref = forward_backward(unary, offsets, transition, start, end)
    for i in range(0, offsets.shape[0] - 1, 7):
        lo, hi = offsets[i], offsets[i + 1]
        labels = kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], theta)
        np.testing.assert_array_equal(labels, labels_ref[lo:hi])
        node, _, log_partition = kernels.marginals_example(i, unary[lo:hi], theta)
        np.testing.assert_allclose(node, node_ref[lo:hi], atol=1e-12)
        assert log_partition == pytest.approx(log_partition_ref[i], rel=1e-12)


def test_kernels_without_transitions_keep_no_state_pairs():
    """MultiClass's kernels (no transitions) kept and zeroed about 7 S^2 doubles and read
    S^2 zero transitions in every oracle and marginals call: 1.1 GB and 99 s for two passes
    of M3NSimplicialDecomposition at 5,000 classes. Now O(S) per token: a child process
    builds them for 4,000 states (the old workspace: 0.9 GB) and calls both oracles."""
    import subprocess
    import sys

    script = """
import resource, numpy as np
from sklstruct._inference._kernels import ChainKernels
S = 4000
kernels = ChainKernels(np.arange(3, dtype=np.int64), S, False, False)
rng = np.random.default_rng(0)
scores, loss = rng.normal(size=(1, S)), np.ones((1, S))
labels = kernels.max_oracle_example(1, scores, loss, np.zeros(0), candidate=True)
assert labels[0] == np.argmax(scores[0] + loss[0])
node, _, log_z = kernels.marginals_example(0, scores, np.zeros(0))
assert np.allclose(node[0], np.exp(scores[0] - log_z))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert int(out.stdout.split()[-1]) < 400  # peak MB of the child, imports included


@pytest.mark.parametrize("n_states", [3, 23, 31, 32, 33, 40, 44, 50, 64, 71])
@pytest.mark.parametrize("kind", ["one_stands_out", "weak", "large", "small"])
def test_candidate_oracle_is_within_float_rounding_of_the_best(kind, n_states):
    # the passes' candidate labellings: Viterbi in single precision from CANDIDATE_STATES
    # (32) states on (the exact decoder below, and where the magnitudes are far from 1), every
    # labelling's exact score within the rounding of float sums of the best; the same
    # labels where the best is ahead by more
    from sklstruct._inference._kernels import CANDIDATE_STATES, ChainKernels

    rng = np.random.default_rng(200 + n_states)
    unary, offsets, transition, start, end = _decoding_case(kind, n_states, rng)
    token_loss = rng.integers(0, 2, size=unary.shape).astype(float)
    theta = np.concatenate([transition.ravel(), start, end])
    kernels = ChainKernels(offsets, n_states, True, True)
    augmented = unary + token_loss
    labels_ref, best = ref.viterbi_lockstep(augmented, offsets, transition, start, end)
    same = 0
    for i in range(offsets.shape[0] - 1):
        lo, hi = offsets[i], offsets[i + 1]
        labels = kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], theta,
                                            candidate=True)
        assert labels.min() >= 0 and labels.max() < n_states
        exact = kernels.max_oracle_example(i, unary[lo:hi], token_loss[lo:hi], theta)
        np.testing.assert_array_equal(exact, labels_ref[lo:hi])
        if n_states < CANDIDATE_STATES or kind in ("large", "small"):
            np.testing.assert_array_equal(labels, exact)
        score = sequence_scores(augmented[lo:hi], np.array([0, hi - lo]), transition, start,
                                end, labels)[0]
        magnitude = (hi - lo) * (np.abs(augmented[lo:hi]).max() + np.abs(theta).max())
        assert best[i] - 1e-6 * magnitude <= score <= best[i] + 1e-12 * magnitude
        same += np.array_equal(labels, exact)
    assert same >= 0.9 * (offsets.shape[0] - 1)


def test_log_partition_gradient_is_marginals():
    rng = np.random.default_rng(42)
    unary, offsets, transition, start, end, _ = _random_batch(rng, 2, 3, max_length=4)
    node, edges, _ = forward_backward(unary, offsets, transition, start, end)
    eps = 1e-6

    def total_log_partition(u, tr):
        return forward_backward(u, offsets, tr, start, end)[2].sum()

    grad_unary = np.zeros_like(unary)
    for index in np.ndindex(*unary.shape):
        step = np.zeros_like(unary)
        step[index] = eps
        grad_unary[index] = (
            total_log_partition(unary + step, transition)
            - total_log_partition(unary - step, transition)
        ) / (2 * eps)
    np.testing.assert_allclose(grad_unary, node, atol=1e-7)

    grad_transition = np.zeros_like(transition)
    for index in np.ndindex(*transition.shape):
        step = np.zeros_like(transition)
        step[index] = eps
        grad_transition[index] = (
            total_log_partition(unary, transition + step)
            - total_log_partition(unary, transition - step)
        ) / (2 * eps)
    np.testing.assert_allclose(grad_transition, edges.sum(axis=0), atol=1e-7)


def test_two_jobs_are_bit_identical():
    rng = np.random.default_rng(3)
    unary, offsets, transition, start, end, y = _random_batch(rng, 301, 6)
    weights = np.array([0.5, 2.0, 1.25, 1.0, 0.0, 1.0])
    calls = [
        lambda n_jobs: viterbi(unary, offsets, transition, start, end, n_jobs=n_jobs),
        lambda n_jobs: forward_backward(
            unary, offsets, transition, start, end, n_jobs=n_jobs
        ),
    ]
    for rescale in ("margin", "slack"):
        calls.append(
            lambda n_jobs, rescale=rescale: loss_augmented_viterbi(
                unary, offsets, transition, start, end, y, weights, rescale, n_jobs=n_jobs
            )
        )
    for call in calls:
        serial = call(None)
        for n_jobs in (2, -1, 7):
            for got, want in zip(call(n_jobs), serial):
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n_states", [2, 7, 22])
def test_long_sequences_with_large_potentials_stay_finite(n_states):
    rng = np.random.default_rng(n_states)
    length = 2000
    offsets = np.array([0, 3, length + 3])
    unary = rng.uniform(-1e4, 1e4, size=(length + 3, n_states))
    transition = rng.uniform(-1e4, 1e4, size=(n_states, n_states))
    start = rng.uniform(-1e4, 1e4, size=n_states)
    end = rng.uniform(-1e4, 1e4, size=n_states)
    node, edges, log_partition = forward_backward(unary, offsets, transition, start, end)
    for array in (node, edges, log_partition):
        assert np.isfinite(array).all()
    assert node.min() >= 0 and node.max() <= 1 + 1e-12
    np.testing.assert_allclose(node.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(edges.sum(axis=(1, 2)), [2, length - 1], rtol=1e-9)
    # the log-partition is at least the Viterbi score and at most it plus L log S
    _, best = viterbi(unary, offsets, transition, start, end)
    assert np.all(log_partition >= best - 1e-6)
    assert np.all(log_partition <= best + np.diff(offsets) * np.log(n_states) + 1e-6)


def test_potentials_that_underflow_rescaled_sums():
    # all mass at state 0, whose transitions are 1e4 below those of state 1: the rescaled
    # forward and backward sums underflow and the exact log-sum-exp must take over
    unary = np.array([[0.0, -2e4], [0.0, 0.0], [0.0, 0.0]])
    transition = np.array([[-1e4, -1e4], [0.0, 0.0]])
    offsets = np.array([0, 3])
    node, edges, log_partition = forward_backward(unary, offsets, transition)
    node_ref, edges_ref, log_partition_ref = ref.brute_force_marginals(
        unary, transition, np.zeros(2), np.zeros(2)
    )
    assert log_partition[0] == pytest.approx(log_partition_ref, rel=1e-14)
    np.testing.assert_allclose(node, node_ref, atol=ATOL)
    np.testing.assert_allclose(edges[0], edges_ref, atol=ATOL)


def _spread_batch(rng, spreads, n_states=3, length=4):
    """One sequence per entry of ``spreads``: every token's potentials and the transitions
    each span about that many nats."""
    unary, offsets = [], [0]
    transition = rng.uniform(0.0, 1.0, size=(n_states, n_states)) * 100.0
    for spread in spreads:
        u = rng.uniform(0.0, 1.0, size=(length, n_states))
        u[:, 0], u[:, 1] = 0.0, 1.0  # every token spans exactly `spread` nats
        unary.append(spread * u)
        offsets.append(offsets[-1] + length)
    start = rng.normal(size=n_states)
    end = rng.normal(size=n_states)
    return np.vstack(unary), np.array(offsets), transition, start, end


def _check_marginals_against_enumeration(unary, offsets, transition, start, end):
    """forward_backward and the per-example kernels (online exponentiated gradient) against
    enumeration on every sequence of the batch."""
    from sklstruct._inference._kernels import ChainKernels

    n_states = transition.shape[0]
    node, edges, log_partition = forward_backward(unary, offsets, transition, start, end)
    kernels = ChainKernels(offsets, n_states, True, True)
    pairwise = np.concatenate([transition.ravel(), start, end])
    n_edges = n_states * n_states
    for i in range(offsets.shape[0] - 1):
        u = unary[offsets[i]:offsets[i + 1]]
        node_ref, edges_ref, log_partition_ref = ref.brute_force_marginals(
            u, transition, start, end
        )
        assert log_partition[i] == pytest.approx(log_partition_ref, rel=1e-13)
        np.testing.assert_allclose(node[offsets[i]:offsets[i + 1]], node_ref, atol=1e-12)
        np.testing.assert_allclose(edges[i], edges_ref, atol=1e-12)
        k_node, k_pairwise, k_log_partition = kernels.marginals_example(i, u, pairwise)
        assert k_log_partition == pytest.approx(log_partition_ref, rel=1e-13)
        np.testing.assert_allclose(k_node, node_ref, atol=1e-12)
        np.testing.assert_allclose(k_pairwise[:n_edges].reshape(n_states, n_states),
                                   edges_ref, atol=1e-12)
        np.testing.assert_allclose(k_pairwise[n_edges:n_edges + n_states], node_ref[0],
                                   atol=1e-12)
        np.testing.assert_allclose(k_pairwise[n_edges + n_states:], node_ref[-1], atol=1e-12)


# the scaled (probability-space) recursion runs while a token's potentials and the transitions
# span at most 600 nats together, the log-domain one beyond: both sides, and a batch of both
@pytest.mark.parametrize("spreads", [[1.0], [400.0], [495.0], [510.0], [3000.0],
                                     [1.0, 3000.0, 480.0, 520.0, 2.0]])
def test_forward_backward_on_both_sides_of_the_scaled_range(spreads):
    rng = np.random.default_rng(len(spreads) + int(spreads[0]))
    _check_marginals_against_enumeration(*_spread_batch(rng, spreads))


# transitions spanning at most 300 nats keep the scaled recursion exact whatever the tokens'
# potentials span (states far below a token's best underflow to zero): wide tokens, a state
# the forward mass avoids but the next tokens favour, transitions on either side of the limit
@pytest.mark.parametrize("transition_spread", [1.0, 150.0, 290.0, 310.0])
@pytest.mark.parametrize("token_spread", [700.0, 5e3, 1e6])
def test_forward_backward_with_wide_tokens_and_bounded_transitions(transition_spread,
                                                                  token_spread):
    rng = np.random.default_rng(int(transition_spread) + int(np.log(token_spread)))
    n_states, length = 4, 6
    transition = rng.uniform(0.0, transition_spread, size=(n_states, n_states))
    transition[0] = 0.0  # leaving state 0 costs the most ...
    transition[1:, 0] = transition_spread  # ... and entering it pays the most
    unary = rng.uniform(-1.0, 0.0, size=(3, length, n_states)) * token_spread
    unary[1, :3, 0] = 0.0  # the first tokens sure of state 0, the last ones far from it
    unary[1, 3:, 0] = -token_spread
    unary[2] = np.round(unary[2] / token_spread) * token_spread  # ties at both ends
    unary = unary.reshape(-1, n_states) + rng.normal(size=(1, n_states)) * token_spread
    offsets = np.arange(4) * length
    start = rng.normal(size=n_states) * token_spread
    end = rng.normal(size=n_states)
    _check_marginals_against_enumeration(unary, offsets, transition, start, end)


def test_sequence_scores_and_integer_dtypes():
    rng = np.random.default_rng(5)
    unary, offsets, transition, start, end, y = _random_batch(rng, 6, 3, max_length=5)
    scores = sequence_scores(
        unary, offsets.astype(np.int32), transition, start, end, y.astype(np.uint8)
    )
    for i, (u, s, e, y_seq) in enumerate(_sequences(unary, offsets, start, end, y)):
        expected = ref.labeling_scores(u, transition, s, e, y_seq[None])[0]
        assert scores[i] == pytest.approx(expected, abs=ATOL)
    labels, _ = viterbi(unary.astype(np.float32).tolist(), offsets.astype(np.int32), transition)
    assert labels.dtype == np.int64


def test_empty_batch():
    unary = np.zeros((0, 3))
    offsets = np.array([0])
    labels, scores = viterbi(unary, offsets, np.zeros((3, 3)), n_jobs=2)
    assert labels.shape == (0,) and scores.shape == (0,)
    node, edges, log_partition = forward_backward(unary, offsets, np.zeros((3, 3)))
    assert node.shape == (0, 3) and edges.shape == (0, 3, 3) and log_partition.shape == (0,)


def test_slack_unit_errors():
    offsets = np.array([0, 11])
    unary = np.zeros((11, 2))
    y = np.zeros(11, dtype=np.int64)
    args = (unary, offsets, np.zeros((2, 2)), None, None, y)
    with pytest.raises(ValueError, match="common unit"):
        loss_augmented_viterbi(*args, np.array([1.0, np.pi]), rescale="slack")
    with pytest.raises(ValueError, match="10000"):
        loss_augmented_viterbi(*args, np.array([1000.0, 1.0]), rescale="slack")
    # 1/1000 is a valid unit and 11 tokens of weight 0.9 stay under the limit
    labels, losses, _ = loss_augmented_viterbi(
        *args, np.array([0.9, 0.001]), rescale="slack"
    )
    assert losses[0] == pytest.approx(0.9 * np.count_nonzero(labels != y))
    # margin rescaling takes any finite non-negative weights
    loss_augmented_viterbi(*args, np.array([1000.0, np.pi]), rescale="margin")


def _valid_arguments():
    return dict(
        unary=np.zeros((5, 3)),
        offsets=np.array([0, 2, 5]),
        transition=np.zeros((3, 3)),
        start=np.zeros(3),
        end=np.zeros(3),
        y=np.array([0, 1, 2, 0, 1]),
        loss_weights=np.ones(3),
        rescale="margin",
    )


BAD_INPUTS = [
    ("unary", np.zeros(5), ValueError, "2-D"),
    ("unary", np.zeros((5, 0)), ValueError, "one state"),
    ("unary", np.full((5, 3), np.nan), ValueError, "NaN"),
    ("unary", np.array([["a"] * 3] * 5), TypeError, "real numbers"),
    ("unary", None, TypeError, "None"),
    ("offsets", np.array([1, 2, 5]), ValueError, "start at 0"),
    ("offsets", np.array([0, 3, 2, 5]), ValueError, "non-decreasing"),
    ("offsets", np.array([0, 2, 4]), ValueError, "end at"),
    ("offsets", np.array([0, 2, 2, 5]), ValueError, "empty"),
    ("offsets", np.array([0.0, 2.0, 5.0]), TypeError, "integers"),
    ("offsets", np.array([[0, 2, 5]]), ValueError, "1-D"),
    ("offsets", np.array([], dtype=np.int64), ValueError, "at least one"),
    ("transition", np.zeros((3, 2)), ValueError, "shape"),
    ("transition", np.zeros((2, 2)), ValueError, "shape"),
    ("transition", np.full((3, 3), np.inf), ValueError, "infinite"),
    ("start", np.zeros(2), ValueError, "one entry per state"),
    ("start", np.array([0.0, np.nan, 0.0]), ValueError, "NaN"),
    ("end", np.zeros((3, 1)), ValueError, "1-D"),
    ("end", np.array([0.0, -np.inf, 0.0]), ValueError, "infinite"),
    ("y", np.array([0, 1, 3, 0, 1]), ValueError, r"\[0, 3\)"),
    ("y", np.array([0, 1, -1, 0, 1]), ValueError, r"\[0, 3\)"),
    ("y", np.array([0, 1, 2, 0]), ValueError, "one entry per token"),
    ("y", np.array([0.0, 1, 2, 0, 1]), TypeError, "integers"),
    ("loss_weights", np.array([1.0, -1.0, 1.0]), ValueError, "non-negative"),
    ("loss_weights", np.array([1.0, np.nan, 1.0]), ValueError, "NaN"),
    ("loss_weights", np.ones(4), ValueError, "one entry per state"),
    ("rescale", "hinge", ValueError, "rescale"),
    ("rescale", None, ValueError, "rescale"),
]


@pytest.mark.parametrize("name, value, error, message", BAD_INPUTS)
def test_bad_inputs_raise(name, value, error, message):
    arguments = _valid_arguments()
    arguments[name] = value
    with pytest.raises(error, match=message):
        loss_augmented_viterbi(**arguments)
    if name in ("unary", "offsets", "transition", "start", "end"):
        potentials = {k: arguments[k] for k in ("unary", "offsets", "transition", "start", "end")}
        with pytest.raises(error, match=message):
            viterbi(**potentials)
        with pytest.raises(error, match=message):
            forward_backward(**potentials)
        with pytest.raises(error, match=message):
            sequence_scores(**potentials, labels=arguments["y"])


@pytest.mark.parametrize(
    "n_jobs, error", [(0, ValueError), (1.5, TypeError), ("2", TypeError), (True, TypeError)]
)
def test_bad_n_jobs(n_jobs, error):
    arguments = _valid_arguments()
    with pytest.raises(error, match="n_jobs"):
        viterbi(arguments["unary"], arguments["offsets"], arguments["transition"], n_jobs=n_jobs)


def test_bad_labels_for_sequence_scores():
    arguments = _valid_arguments()
    with pytest.raises(ValueError, match="labels"):
        sequence_scores(
            arguments["unary"], arguments["offsets"], arguments["transition"], None, None,
            np.array([0, 1, 5, 0, 1]),
        )


def test_process_backend_gives_the_same_result():
    rng = np.random.default_rng(8)
    unary, offsets, transition, start, end, y = _random_batch(rng, 50, 4)
    serial = forward_backward(unary, offsets, transition, start, end)
    for max_nbytes in ("1M", 1):  # arrays pickled, or memory-mapped as a large batch's
        with parallel_config(backend="loky", max_nbytes=max_nbytes):
            parallel = forward_backward(unary, offsets, transition, start, end, n_jobs=2)
        for got, want in zip(parallel, serial):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n_jobs", [1, 2, 3])
def test_csr_product_gives_scipy_doubles_both_ways(n_jobs):
    """X @ W and, through the rows of X^T in CSR form, X^T A: the doubles of scipy's
    products (each entry's terms in scipy's order), on any number of threads, in a worker
    process too, and rows without entries give zeros."""
    from sklstruct._inference.chain import csr_product

    rng = np.random.default_rng(11)
    X = sp.random(300, 80, density=0.05, format="csr", random_state=3,
                  data_rvs=lambda n: rng.normal(size=n) * 10.0 ** rng.integers(-3, 4, n))
    X = sp.csr_matrix(X.multiply((np.arange(300) != 5)[:, None]))  # token 5 without entries
    X.eliminate_zeros()
    assert X.indptr[6] == X.indptr[5]
    W = rng.normal(size=(80, 7)) * 10.0 ** rng.integers(-3, 4, (80, 7))
    A = rng.normal(size=(300, 7))
    csr = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data)
    X_t = X.T.tocsr()
    X_t.sort_indices()
    csr_t = (X_t.indptr.astype(np.int64), X_t.indices.astype(np.int32), X_t.data)
    out = np.full((300, 7), np.nan)
    assert csr_product(csr, W, out, n_jobs) is out
    np.testing.assert_array_equal(out, X @ W)
    out_t = np.full((80, 7), np.nan)
    csr_product(csr_t, A, out_t, n_jobs)
    np.testing.assert_array_equal(out_t, X.T @ A)
    for max_nbytes in ("1M", 1):  # arrays pickled, or memory-mapped as a large batch's
        with parallel_config(backend="loky", max_nbytes=max_nbytes):
            in_processes = csr_product(csr_t, A, np.full((80, 7), np.nan), n_jobs)
        np.testing.assert_array_equal(in_processes, out_t)


def test_csr_product_rows_rejects_bad_ranges_and_shapes():
    from sklstruct._inference import _chain

    X = sp.random(10, 4, density=0.5, format="csr", random_state=0)
    csr = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data)
    W, out = np.ones((4, 3)), np.zeros((10, 3))
    with pytest.raises(ValueError, match="rows of the CSR"):
        _chain.csr_product_rows(*csr, W, 0, 11, out)
    with pytest.raises(ValueError, match="rows of the CSR"):
        _chain.csr_product_rows(*csr, W, 5, 4, out)
    with pytest.raises(ValueError, match="out must have"):
        _chain.csr_product_rows(*csr, W, 0, 10, np.zeros((10, 2)))
    with pytest.raises(ValueError, match="run past"):
        _chain.csr_product_rows(X.indptr.astype(np.int64), X.indices[:3].astype(np.int32),
                                X.data, W, 0, 10, out)
