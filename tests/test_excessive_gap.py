"""M3NExcessiveGap (Zhang et al. 2011) against its theory, the explicit Algorithm 1 and other
learners."""

import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.exceptions import ConvergenceWarning

from sklstruct import (ChainStructure, M3NExcessiveGap, M3NExpGrad, MultiClass,
                       StructSVMCuttingPlane)
from sklstruct.utils._sequences import SequenceBatch, offsets_from_lengths

from ._enumeration import all_labelings, exact_optimum, primal_objective
from ._helpers import make_chain_data


def _fit_quietly(model, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, **params)


def _explicit(structure, batch, Y):
    """psi^i_y = Psi(x_i, y_i) - Psi(x_i, y) and the losses of every labeling, per example."""
    psi, loss = [], []
    for i in range(batch.n_sequences):
        lo, hi = batch.offsets[i], batch.offsets[i + 1]
        sub = SequenceBatch(batch.X[lo:hi], np.array([0, hi - lo], dtype=np.int64))
        labelings = all_labelings(structure.n_states_, hi - lo)
        truth = structure.joint_feature(sub, Y[lo:hi])
        psi.append(np.array([truth - structure.joint_feature(sub, yb) for yb in labelings]))
        loss.append(np.array([structure.loss(sub, Y[lo:hi], yb)[0] for yb in labelings]))
    return psi, loss


def _batch(X, y, model):
    batch = SequenceBatch(np.vstack(X), offsets_from_lengths([len(s) for s in y]))
    return batch, model._encode_known(np.concatenate(y))


@pytest.mark.parametrize("init_bias", [0.0, 2.0])
@pytest.mark.parametrize("seed", range(4))
def test_theorem_4_bound_and_condition_11_hold_at_every_iteration(seed, init_bias):
    rng = np.random.default_rng(seed)
    structure = [ChainStructure(), ChainStructure(start_end=False)][seed % 2]
    X, y = make_chain_data(n_sequences=int(rng.integers(3, 7)), n_states=2 + seed % 2,
                           n_features=3, max_length=4, seed=50 + seed)
    C = float(rng.uniform(0.2, 2.0))
    model = _fit_quietly(M3NExcessiveGap(structure, C=C, smoothing="worst_case", tol=1e-12,
                                         max_iter=300, init_bias=init_bias), X, y)
    batch, Y = _batch(X, y, model)
    n = batch.n_sequences
    # the estimator's mu_1 is at least the seed's L / sigma = max ||psi||^2 / lambda
    psi, _ = _explicit(model.structure_, batch, Y)
    exact = n * C * max(float(np.max(np.sum(p * p, axis=1))) for p in psi)
    assert model.mu_init_ >= exact * (1 - 1e-12)
    h = model.history_
    k = np.arange(1, len(h["gap"]) + 1)
    bound = n * C * 6 * model.mu_init_ * model.prox_diameter_ / ((k + 1) * (k + 2))
    assert np.all(h["gap"] <= bound * (1 + 1e-9) + 1e-12)
    assert np.all(h["smoothed_primal"] <= h["dual"] + 1e-9 * np.abs(h["dual"]).max())
    assert np.all(h["gap"] >= -1e-9)


@pytest.mark.parametrize("init_bias", [0.0, 3.0])
def test_adaptive_smoothing_keeps_condition_11_and_equation_12(init_bias):
    X, y = make_chain_data(n_sequences=30, seed=2)
    model = _fit_quietly(M3NExcessiveGap(C=1.0, tol=1e-12, max_iter=400, init_bias=init_bias),
                         X, y)
    h = model.history_
    scale = np.abs(h["dual"]).max()
    assert np.all(h["smoothed_primal"] <= h["dual"] + 1e-9 * scale)
    n = len(y)
    assert np.all(h["gap"] <= n * model.C * h["mu"] * model.prox_diameter_ * (1 + 1e-9))
    assert model.n_mu_increases_ > 0  # it starts below the worst case and had to correct


@pytest.mark.parametrize("init_bias", [0.0, 1.5])
def test_factored_iterates_equal_algorithm_1_on_the_explicit_dual(init_bias):
    """Algorithm 2 (marginals) reproduces Algorithm 1 (all labelings): same w_k and D(alpha_k),
    from the uniform prox centre or one biased towards the true labels (alpha_0 proportional to
    exp(init_bias * matches) = exp(-init_bias * Hamming loss) up to normalisation)."""
    X, y = make_chain_data(n_sequences=4, n_states=2, n_features=2, max_length=3, seed=3)
    C, steps = 0.7, 30
    model = _fit_quietly(M3NExcessiveGap(ChainStructure(), C=C, smoothing="worst_case",
                                         tol=1e-12, max_iter=steps, init_bias=init_bias), X, y)
    batch, Y = _batch(X, y, model)
    psi, loss = _explicit(model.structure_, batch, Y)
    n, lam, mu = batch.n_sequences, 1.0 / (batch.n_sequences * C), model.mu_init_

    def w_of(alpha):
        return sum(a @ p for a, p in zip(alpha, psi)) / lam

    def grad(alpha):
        w = w_of(alpha)
        return [c - p @ w for c, p in zip(loss, psi)]

    def dual(alpha):
        w = w_of(alpha)
        return sum(a @ c for a, c in zip(alpha, loss)) - 0.5 * lam * w @ w

    def primal(w):
        return 0.5 * lam * w @ w + sum(np.max(c - p @ w) for c, p in zip(loss, psi)) / n

    centre = [softmax(-init_bias * c) for c in loss]

    def best_response(w, mu):  # eq. (38), with the prox centre's log-probabilities
        return [softmax((c - p @ w) / mu + np.log(a0)) / n
                for c, p, a0 in zip(loss, psi, centre)]

    def bregman(alpha, g):  # eq. (39)
        return [a * np.exp(-gi - np.max(-gi)) / np.sum(a * np.exp(-gi - np.max(-gi))) / n
                for a, gi in zip(alpha, g)]

    alpha0 = [a0 / n for a0 in centre]
    w = w_of(alpha0)
    alpha = bregman(alpha0, [-g / mu for g in grad(alpha0)])
    primals, duals = [], []
    for k in range(1, steps + 1):
        primals.append(primal(w))
        duals.append(dual(alpha))
        tau = 2.0 / (k + 3)
        smooth = best_response(w, mu)
        hat = [(1 - tau) * a + tau * s for a, s in zip(alpha, smooth)]
        w = (1 - tau) * w + tau * w_of(hat)
        tilde = bregman(smooth, [-tau / ((1 - tau) * mu) * g for g in grad(hat)])
        alpha = [(1 - tau) * a + tau * t for a, t in zip(alpha, tilde)]
        mu *= 1 - tau
    scale = n * C  # the learner reports n C J and n C D
    np.testing.assert_allclose(model.history_["primal"], scale * np.array(primals), rtol=1e-9)
    np.testing.assert_allclose(model.history_["dual"], scale * np.array(duals), rtol=1e-9,
                               atol=1e-9)


@pytest.mark.parametrize("structure", [ChainStructure(start_end=False),
                                       ChainStructure(class_weight=[1.0, 2.0, 0.5])])
def test_reaches_exact_optimum_on_tiny_chains(structure):
    X, y = make_chain_data(n_sequences=6, n_states=3, n_features=3, max_length=4, seed=7)
    model = M3NExcessiveGap(structure, C=0.5, tol=1e-5, max_iter=20000).fit(X, y)
    batch, Y = _batch(X, y, model)
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, 0.5)
    ours = primal_objective(model.structure_, batch, Y, model.w_, 0.5)
    gap = model.history_["gap"][-1]
    assert lower - 1e-9 <= ours <= upper + gap + 1e-9
    assert gap <= 1e-5 * ours


def test_matches_the_other_learners():
    X, y = make_chain_data(n_sequences=25, seed=4)
    eg = M3NExcessiveGap(C=0.5, tol=1e-4, max_iter=20000).fit(X, y)
    others = [StructSVMCuttingPlane(C=0.5, tol=1e-7).fit(X, y),
              M3NExpGrad(C=0.5, algorithm="batch", tol=1e-5, max_iter=20000).fit(X, y)]
    for other in others:
        tolerance = eg.history_["gap"][-1] + other.history_["gap"][-1]
        assert abs(eg.objective(X, y) - other.objective(X, y)) <= tolerance + 1e-9


class _OwnUnaryFeatures(ChainStructure):
    """A chain whose unary feature map is its own method (the same ``X^T A``): the learner
    then takes scipy's products."""

    def unary_features(self, batch, token_state_weights):
        return super().unary_features(batch, token_state_weights)


@pytest.mark.parametrize("smoothing", ["adaptive", "worst_case"])
def test_compiled_sparse_products_give_the_iterates_of_scipys_on_any_threads(smoothing):
    """Sparse token features with the plain unary map take the compiled products (X W and
    X^T A through X^T's rows, into reused arrays): the doubles of scipy's, so the same
    weights and certificates, bit for bit, on one thread or three."""
    import scipy.sparse as sp

    X, y = make_chain_data(n_sequences=40, n_features=6, seed=9)
    X = [sp.csr_matrix(np.where(np.abs(x) < 0.7, 0.0, x)) for x in X]
    kwargs = {"C": 0.5, "tol": 1e-6, "max_iter": 150, "smoothing": smoothing}
    scipys = _fit_quietly(M3NExcessiveGap(_OwnUnaryFeatures(), **kwargs), X, y)
    for n_jobs in (1, 3):
        compiled = _fit_quietly(M3NExcessiveGap(n_jobs=n_jobs, **kwargs), X, y)
        np.testing.assert_array_equal(compiled.w_, scipys.w_)
        for name in ("primal", "dual", "mu", "drift"):
            np.testing.assert_array_equal(compiled.history_[name], scipys.history_[name])


def test_multiclass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4))
    y = rng.integers(0, 3, size=50)
    model = M3NExcessiveGap(C=0.3, tol=1e-4, max_iter=20000).fit(X, y)
    assert isinstance(model.structure_, MultiClass)
    reference = StructSVMCuttingPlane(C=0.3, tol=1e-8).fit(X, y)
    assert abs(model.objective(X, y) - reference.objective(X, y)) <= \
        model.history_["gap"][-1] + reference.history_["gap"][-1] + 1e-9


def test_marginals_do_not_drift_over_thousands_of_iterations():
    X, y = make_chain_data(n_sequences=20, n_states=4, seed=5)
    model = _fit_quietly(M3NExcessiveGap(ChainStructure(), C=2.0, tol=1e-15,
                                         max_iter=3000, smoothing="worst_case"), X, y)
    assert model.n_iter_ == 3000
    # deviation of each token's (and each chain's transition / start / end) marginals from
    # their totals before renormalisation: rounding only
    drift = model.history_["drift"]
    assert np.max(drift) <= 1e-11
    assert np.max(drift[-1000:]) <= 1e-13  # no accumulation
    assert np.all(np.isfinite(model.history_["dual"]))


def test_linear_kernel_callable_matches_the_linear_model():
    # (the worst-case schedule: the adaptive one's accept/reject decisions may differ by
    # rounding between the two representations of w)
    X, y = make_chain_data(n_sequences=15, seed=6)
    linear = _fit_quietly(M3NExcessiveGap(C=1.0, tol=1e-9, max_iter=200,
                                          smoothing="worst_case"), X, y)
    kernel = _fit_quietly(M3NExcessiveGap(C=1.0, kernel=lambda A, B: A @ B.T, tol=1e-9,
                                          max_iter=200, smoothing="worst_case"), X, y)
    np.testing.assert_allclose(kernel.history_["primal"], linear.history_["primal"],
                               rtol=1e-9)
    np.testing.assert_allclose(kernel.history_["dual"], linear.history_["dual"], rtol=1e-9,
                               atol=1e-9)
    assert kernel.objective(X, y) == pytest.approx(linear.objective(X, y), rel=1e-9)
    np.testing.assert_allclose(np.vstack(kernel.decision_function(X)),
                               np.vstack(linear.decision_function(X)), atol=1e-8)
    with pytest.raises(AttributeError):
        kernel.coef_


def test_adaptive_smoothing_stays_exact_at_small_mu():
    """Down to tiny mu (large potentials) the marginals stay consistent to rounding of the
    potentials' magnitude, and the linear-kernel callable reaches the linear model's optimum."""
    X, y = make_chain_data(n_sequences=20, n_states=4, seed=5)
    model = _fit_quietly(M3NExcessiveGap(ChainStructure(), C=2.0, tol=1e-15, max_iter=3000),
                         X, y)
    h = model.history_
    assert h["mu"][-1] < 1e-4 * h["mu"][0]
    assert np.max(h["drift"]) <= 1e-11
    assert np.all(np.isfinite(h["dual"])) and np.all(h["gap"] >= -1e-9)
    X, y = make_chain_data(n_sequences=15, seed=6)
    linear = _fit_quietly(M3NExcessiveGap(C=1.0, tol=1e-6, max_iter=2000), X, y)
    kernel = _fit_quietly(M3NExcessiveGap(C=1.0, kernel=lambda A, B: A @ B.T, tol=1e-6,
                                          max_iter=2000), X, y)
    assert abs(kernel.objective(X, y) - linear.objective(X, y)) <= \
        kernel.history_["gap"][-1] + linear.history_["gap"][-1] + 1e-9


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_a_linear_kernel_keeps_the_multiclass_intercepts(fit_intercept):
    """With a kernel, fit_intercept adds the constant feature in the kernel's space: a
    linear-kernel callable fits the linear model, intercepts included or not, as the cutting
    plane's kernel maps do."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3)) + 2.0  # (off-centre: the intercepts matter)
    y = rng.integers(0, 3, size=60)
    params = dict(C=1.0, tol=1e-6, max_iter=20000, fit_intercept=fit_intercept)
    linear = _fit_quietly(M3NExcessiveGap(**params), X, y)
    kernel = _fit_quietly(M3NExcessiveGap(kernel=lambda A, B: A @ B.T, **params), X, y)
    assert abs(kernel.objective(X, y) - linear.objective(X, y)) <= \
        kernel.history_["gap"][-1] + linear.history_["gap"][-1] + 1e-9
    other = _fit_quietly(M3NExcessiveGap(**{**params, "fit_intercept": not fit_intercept}),
                         X, y)
    assert abs(kernel.objective(X, y) - other.objective(X, y)) > \
        kernel.history_["gap"][-1] + other.history_["gap"][-1]


def test_rbf_kernel_fits_a_problem_a_linear_model_cannot():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(40)]
    y = [(np.abs(x[:, 0]) > 0.8).astype(int) for x in X]  # not linearly separable per token
    rbf = _fit_quietly(M3NExcessiveGap(C=10.0, kernel="rbf", gamma=1.0, max_iter=2000), X, y)
    linear = _fit_quietly(M3NExcessiveGap(C=10.0, max_iter=2000), X, y)
    assert rbf.score(X, y) > linear.score(X, y) + 0.1
    assert rbf.objective(X, y) == pytest.approx(rbf.history_["primal"][-1], rel=1e-9)
    assert np.all(rbf.history_["gap"] >= 0)


def test_kernel_parameters_set_after_fit_change_nothing_until_the_next_fit():
    """The fitted model read kernel, gamma, degree and coef0 from the parameters at predict:
    set_params(gamma=...) after fit changed its predictions, kernel="linear" gave the rbf
    model's coef_, and a linear model set to "rbf" had no dual_coef_ to predict with."""
    X, y = make_chain_data(n_sequences=20, seed=3)
    rbf = _fit_quietly(M3NExcessiveGap(kernel="rbf", gamma=0.5, max_iter=30), X, y)
    scores, labels = rbf.decision_function(X), rbf.predict(X)
    rbf.set_params(gamma=50.0, degree=2, coef0=3.0, kernel="linear", fit_intercept=False)
    for a, b in zip(rbf.decision_function(X), scores):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(rbf.predict(X), labels):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(AttributeError, match="kernel='linear'"):
        rbf.coef_
    linear = _fit_quietly(M3NExcessiveGap(max_iter=30), X, y)
    labels = linear.predict(X)
    linear.set_params(kernel="rbf")
    for a, b in zip(linear.predict(X), labels):
        np.testing.assert_array_equal(a, b)
    assert linear.coef_.shape[0] == len(linear.classes_)


def test_kernel_memory_limit_is_a_clear_error():
    X, y = make_chain_data(n_sequences=30, seed=1)
    with pytest.raises(ValueError, match="kernel_memory_mb"):
        M3NExcessiveGap(kernel="rbf", kernel_memory_mb=1e-4).fit(X, y)


# ---------------------------------------------------------------- sample weights
WEIGHTS = np.array([2, 0, 1, 3, 1, 1, 0, 2])


def _repeated(X, y, weights):
    return ([x for x, k in zip(X, weights) for _ in range(int(k))],
            [s for s, k in zip(y, weights) for _ in range(int(k))])


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_integer_weights_follow_the_iterates_of_the_repeated_data(kernel):
    """With the paper's schedule a weighted fit is the fit of the repeated data, iterate by
    iterate: each example's marginals are the repeated copies' (its C s_i cancels in the
    smoothed best responses and projections), the sums weigh them by s_i, and the
    worst-case mu_1 is that of sum_i s_i examples."""
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=12)
    settings = dict(C=0.6, kernel=kernel, smoothing="worst_case", tol=1e-12, max_iter=120)
    weighted = _fit_quietly(M3NExcessiveGap(**settings), X, y, sample_weight=WEIGHTS)
    repeated = _fit_quietly(M3NExcessiveGap(**settings), *_repeated(X, y, WEIGHTS))
    np.testing.assert_array_equal(weighted.classes_, repeated.classes_)
    assert weighted.mu_init_ == repeated.mu_init_
    for name in ("primal", "dual", "smoothed_primal"):
        np.testing.assert_allclose(weighted.history_[name], repeated.history_[name],
                                   rtol=1e-11)
    np.testing.assert_allclose(np.vstack(weighted.decision_function(X)),
                               np.vstack(repeated.decision_function(X)), rtol=1e-9, atol=1e-12)
    assert weighted.prox_diameter_ == pytest.approx(repeated.prox_diameter_, rel=1e-12)


def test_integer_weights_reach_the_exact_optimum_of_the_repeated_data():
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=3, seed=4)
    C = 0.3
    model = M3NExcessiveGap(C=C, tol=1e-5, max_iter=20000).fit(X, y, sample_weight=WEIGHTS)
    X_rep, y_rep = _repeated(X, y, WEIGHTS)
    batch, Y = _batch(X_rep, y_rep, model)
    lower, upper, _ = exact_optimum(model.structure_, batch, Y, C)
    h = model.history_
    primal = model.objective(X, y, sample_weight=WEIGHTS)
    assert primal == pytest.approx(h["primal"][-1], rel=1e-9)
    assert primal == pytest.approx(model.objective(X_rep, y_rep), rel=1e-12)
    assert h["dual"][-1] <= upper + 1e-9 and primal >= lower - 1e-9
    assert h["gap"][-1] <= 1e-5 * primal
    assert np.all(h["smoothed_primal"] <= h["dual"] + 1e-9 * np.abs(h["dual"]).max())
    unweighted = M3NExcessiveGap(C=C, tol=1e-5, max_iter=20000).fit(X, y)
    assert unweighted.objective(X, y, sample_weight=WEIGHTS) - primal > 10 * h["gap"][-1]


@pytest.mark.parametrize("seed", range(3))
def test_theorem_4_and_condition_11_hold_with_real_weights(seed):
    """Weights that are not integers, with the paper's schedule: mu_1 is at least
    ``(sum_i s_i) C max ||psi||^2`` (the curvature in the norm of the weighted prox
    function), condition (11) holds at every iteration and the gap stays within Theorem 4's
    bound with the weighted prox diameter; the fit agrees with the cutting plane."""
    rng = np.random.default_rng(seed)
    X, y = make_chain_data(n_sequences=6, n_states=2 + seed % 2, n_features=3, max_length=4,
                           seed=70 + seed)
    weights = rng.uniform(0.05, 4.0, size=6)
    C = float(rng.uniform(0.2, 2.0))
    model = _fit_quietly(M3NExcessiveGap(C=C, smoothing="worst_case", tol=1e-12,
                                         max_iter=300), X, y, sample_weight=weights)
    batch, Y = _batch(X, y, model)
    psi, _ = _explicit(model.structure_, batch, Y)
    total = float(weights.sum())
    exact = total * C * max(float(np.max(np.sum(p * p, axis=1))) for p in psi)
    assert model.mu_init_ >= exact * (1 - 1e-12)
    h = model.history_
    k = np.arange(1, len(h["gap"]) + 1)
    bound = total * C * 6 * model.mu_init_ * model.prox_diameter_ / ((k + 1) * (k + 2))
    assert np.all(h["gap"] <= bound * (1 + 1e-9) + 1e-12)
    assert np.all(h["smoothed_primal"] <= h["dual"] + 1e-9 * np.abs(h["dual"]).max())
    adaptive = M3NExcessiveGap(C=C, tol=1e-6, max_iter=20000).fit(X, y, sample_weight=weights)
    reference = StructSVMCuttingPlane(C=C, tol=1e-8).fit(X, y, sample_weight=weights)
    p_model = adaptive.objective(X, y, sample_weight=weights)
    assert p_model == pytest.approx(adaptive.history_["primal"][-1], rel=1e-9)
    assert abs(p_model - reference.objective(X, y, sample_weight=weights)) \
        <= adaptive.history_["gap"][-1] + reference.history_["gap"][-1] + 1e-9


def test_weights_of_one_change_nothing():
    X, y = make_chain_data(n_sequences=12, seed=1)
    plain = _fit_quietly(M3NExcessiveGap(max_iter=60), X, y)
    ones = _fit_quietly(M3NExcessiveGap(max_iter=60), X, y, sample_weight=np.ones(12))
    np.testing.assert_array_equal(plain.w_, ones.w_)
    np.testing.assert_array_equal(plain.history_["dual"], ones.history_["dual"])


@pytest.mark.parametrize("C, weight", [(0.3, 1e-7), (3e-8, 1.0), (1e-4, 1.0)])
def test_condition_11_holds_for_small_objectives(C, weight):
    """The adaptive steps keep (11) relative to the objective's own size, also when it is
    far below 1 (a tiny C or tiny weights), and with it the bound (12) on the gap."""
    X, y = make_chain_data(n_sequences=8, n_states=3, n_features=3, max_length=4, seed=5)
    weights = np.full(8, weight)
    model = _fit_quietly(M3NExcessiveGap(C=C, tol=1e-6, max_iter=2000), X, y,
                         sample_weight=weights)
    h = model.history_
    scale = np.abs(h["dual"]).max()
    assert np.all(h["smoothed_primal"] <= h["dual"] + 1e-9 * scale)
    bound = weights.sum() * C * h["mu"] * model.prox_diameter_
    assert np.all(h["gap"] <= bound * (1 + 1e-9))
