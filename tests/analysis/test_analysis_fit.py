"""Fits: the censored MLE against a reference optimiser, recovery, censoring bias, warnings, KM."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from analysis.fits.fit import difference_interval, fit_power_law, interval_mle, kaplan_meier
from analysis.synthetic import SyntheticSpec, simulate


def _censored_sample(rng, alpha=0.3, sigma=0.3, seeds=4, cap=None):
    sizes = np.repeat([32.0, 64.0, 128.0, 256.0, 512.0], seeds)
    values = 1000 * sizes**alpha * np.exp(sigma * rng.standard_normal(sizes.size))
    cap = 1000 * 128**alpha if cap is None else cap
    censored = values > cap
    return sizes, np.minimum(values, cap), censored


def tobit_mle(x, y, censored, weights=None, want_cov=False):
    """The right-censored case of :func:`interval_mle` for ``y = b0 + b1 x + sigma eps``: ``(b0, b1,
    sigma, ok, cov, theta, y_scale)`` over replicates (``x`` centred, as the power-law fit does)."""
    x, y, censored = np.asarray(x, float), np.asarray(y, float), np.asarray(censored, bool)
    xm = x.mean()
    design = np.column_stack([np.ones_like(x), x - xm])
    res = interval_mle(design, y, np.where(censored, np.inf, y), weights, want_cov=want_cov)
    b1 = res["beta"][:, 1]
    b0 = res["beta"][:, 0] - b1 * xm
    return b0, b1, res["sigma"], res["ok"], res["cov"], res["theta"], res["y_scale"]


def _reference_nll(params, x, y, c):
    b0, b1, log_s = params
    z = (y - b0 - b1 * x) / np.exp(log_s)
    return -np.where(c, stats.norm.logsf(z), stats.norm.logpdf(z) - log_s).sum()


def test_tobit_mle_matches_a_generic_optimiser():
    sizes, values, censored = _censored_sample(np.random.default_rng(3))
    assert 0 < censored.sum() < censored.size
    x, y = np.log(sizes), np.log(values)
    b0, b1, sigma, ok, cov, theta, ys = tobit_mle(x, y, censored, want_cov=True)
    ref = optimize.minimize(
        _reference_nll, [7.0, 0.2, np.log(0.3)], args=(x, y, censored), method="BFGS", tol=1e-10
    )
    assert ok[0]
    np.testing.assert_allclose([b0[0], b1[0], np.log(sigma[0])], ref.x, atol=1e-5)
    # Wald standard error: observed information by finite differences in (b0, b1, log sigma)
    hess = np.zeros((3, 3))
    h = 1e-4
    for i in range(3):
        for j in range(3):
            e_i, e_j = np.eye(3)[i] * h, np.eye(3)[j] * h
            hess[i, j] = (
                _reference_nll(ref.x + e_i + e_j, x, y, censored)
                - _reference_nll(ref.x + e_i - e_j, x, y, censored)
                - _reference_nll(ref.x - e_i + e_j, x, y, censored)
                + _reference_nll(ref.x - e_i - e_j, x, y, censored)
            ) / (4 * h * h)
    se_ref = np.sqrt(np.linalg.inv(hess)[1, 1])
    fit = fit_power_law(sizes, values, censored, n_boot=0)
    assert fit.se == pytest.approx(se_ref, rel=1e-3)


def test_vectorised_replicates_equal_one_fit_each():
    """Loop reference = vectorised: a weight row is the same fit as the data with rows repeated."""
    rng = np.random.default_rng(5)
    sizes, values, censored = _censored_sample(rng)
    x, y = np.log(sizes), np.log(values)
    W = rng.integers(0, 3, size=(6, x.size)).astype(float)
    _, b1, sigma, ok, *_ = tobit_mle(x, y, censored, W)
    for r in range(W.shape[0]):
        reps = W[r].astype(int)
        _, b1_r, sigma_r, ok_r, *_ = tobit_mle(
            np.repeat(x, reps), np.repeat(y, reps), np.repeat(censored, reps)
        )
        assert ok[r] == ok_r[0]
        if ok[r]:
            assert b1[r] == pytest.approx(b1_r[0], abs=1e-7)
            assert sigma[r] == pytest.approx(sigma_r[0], abs=1e-7)


@pytest.mark.parametrize("alpha, gamma, budget", [(0.3, 0.0, 30000), (0.44, 0.2, 60000)])
def test_exponents_recovered_inside_their_intervals(alpha, gamma, budget):
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512), seeds=6, alpha=alpha, gamma=gamma, budget=budget, seed=11
    )
    runs = simulate(spec)
    sizes = np.array([r.truth["B"] for r in runs], float)
    for clock, truth in [("target:0.3", alpha), ("target:0.5", alpha), ("failure", gamma)]:
        values = np.array([r.truth[clock][0] for r in runs], float)
        censored = np.array([r.truth[clock][1] for r in runs], bool)
        fit = fit_power_law(sizes, values, censored, n_boot=400, rng=0)
        assert fit.ci_low <= truth <= fit.ci_high, (clock, fit)
        assert fit.wald_low <= truth <= fit.wald_high, (clock, fit)
        assert fit.ci_low < fit.exponent < fit.ci_high
        assert fit.n_runs == len(runs) and fit.n_censored == censored.sum()


def test_dropping_censored_runs_is_biased_and_tobit_is_not():
    """Heavy censoring at large B: dropping (or taking the budget as the value) flattens the slope."""
    rng = np.random.default_rng(0)
    alpha, cap = 0.4, 3000 * 128**0.4
    sizes = np.repeat([32.0, 64.0, 128.0, 256.0, 512.0], 12)
    tobit, dropped, as_observed, frac_at_512 = [], [], [], []
    for _ in range(40):
        values = 3000 * sizes**alpha * np.exp(0.4 * rng.standard_normal(sizes.size))
        censored = values > cap
        values = np.minimum(values, cap)
        frac_at_512.append(censored[sizes == 512].mean())
        tobit.append(fit_power_law(sizes, values, censored, n_boot=0).exponent)
        keep = ~censored
        dropped.append(fit_power_law(sizes[keep], values[keep], censored[keep], n_boot=0).exponent)
        as_observed.append(fit_power_law(sizes, values, np.zeros_like(censored), n_boot=0).exponent)
    assert np.mean(frac_at_512) > 0.8  # heavy censoring at the largest size
    assert abs(np.mean(tobit) - alpha) < 0.05  # ours: unbiased within Monte-Carlo error (~0.012)
    assert np.mean(dropped) < alpha - 0.15  # dropping censored runs: biased down (~0.20)
    assert np.mean(as_observed) < alpha - 0.15  # budget as if observed: biased down too


def test_warnings_instead_of_crashes():
    rng = np.random.default_rng(1)
    two_sizes = fit_power_law([32, 32, 64, 64], [100, 120, 150, 170], [False] * 4, n_boot=100, rng=rng)
    assert np.isfinite(two_sizes.exponent)
    assert any("distinct B" in w for w in two_sizes.warnings)

    single_seed = fit_power_law([32, 64, 128, 256], [100, 130, 160, 230], [False] * 4, n_boot=100)
    assert single_seed.ci_method == "wald" and np.isfinite(single_seed.ci_low)
    assert any("single seed" in w for w in single_seed.warnings)

    all_censored = fit_power_law([32, 64, 128], [100, 100, 100], [True] * 3, n_boot=100)
    assert np.isnan(all_censored.exponent)
    assert any("all runs censored" in w for w in all_censored.warnings)

    one_event_size = fit_power_law([32, 32, 64, 64], [100, 110, 100, 100], [False, False, True, True])
    assert np.isnan(one_event_size.exponent)
    assert any("not identified" in w for w in one_event_size.warnings)

    empty = fit_power_law([], [], [])
    assert np.isnan(empty.exponent) and empty.n_runs == 0


def test_weak_resamples_make_the_interval_unbounded_not_narrow():
    # events only at the two smallest sizes: many resamples keep events at a single size
    sizes = np.repeat([32.0, 64.0, 128.0, 256.0], 3)
    values = np.array([100, 140, 900, 160, 180, 900, 900, 900, 900, 900, 900, 900], float)
    censored = values >= 900
    fit = fit_power_law(sizes, values, censored, n_boot=500, rng=0)
    assert np.isfinite(fit.exponent)
    assert fit.ci_high == np.inf
    assert any("unbounded" in w for w in fit.warnings)


def test_difference_between_conditions():
    fits = {}
    for alpha, seed in [(0.15, 1), (0.44, 2)]:
        runs = simulate(
            SyntheticSpec(sizes=(32, 64, 128, 256, 512), seeds=8, alpha=alpha, seed=seed, budget=60000)
        )
        sizes = np.array([r.truth["B"] for r in runs], float)
        values = np.array([r.truth["target:0.3"][0] for r in runs], float)
        censored = np.array([r.truth["target:0.3"][1] for r in runs], bool)
        fits[alpha] = fit_power_law(sizes, values, censored, n_boot=400, rng=seed)
    low, high, p, se = difference_interval(fits[0.15], fits[0.44])
    assert low < 0.44 - 0.15 < high
    assert low > 0 and p < 0.05 and se > 0


def test_kaplan_meier_by_hand():
    t, s = kaplan_meier([1, 2, 2, 3, 4, 5], [True, True, False, True, False, True])
    np.testing.assert_allclose(t, [0, 1, 2, 3, 5])
    np.testing.assert_allclose(s, [1, 5 / 6, 5 / 6 * 4 / 5, 5 / 6 * 4 / 5 * 2 / 3, 0])
    # without censoring it is one minus the empirical CDF
    times = np.random.default_rng(0).exponential(size=50)
    t, s = kaplan_meier(times, np.ones(50, bool))
    np.testing.assert_allclose(s[1:], 1 - np.arange(1, 51) / 50)
    # nobody fails: the curve stays at one
    t, s = kaplan_meier([3, 4], [False, False])
    np.testing.assert_allclose(s, [1.0])


@pytest.mark.slow
def test_interval_coverage_over_many_draws():
    """95 % bootstrap intervals of the interval-censored fit cover the truth in >= 90 % of draws
    (benchmarks/calibration/analysis_coverage.py runs more draws and scenarios)."""
    spec = SyntheticSpec()
    hits = total = 0
    for draw in range(200):
        runs = simulate(SyntheticSpec(**{**spec.__dict__, "seed": 5000 + draw}))
        sizes = np.array([r.truth["B"] for r in runs], float)
        values = np.array([r.truth["target:0.3"][0] for r in runs], float)
        censored = np.array([r.truth["target:0.3"][1] for r in runs], bool)
        lower = np.array([r.truth["target:0.3:lower"] for r in runs], float)
        fit = fit_power_law(sizes, values, censored, lower=lower, n_boot=300, rng=draw)
        total += 1
        hits += fit.ci_low <= spec.alpha <= fit.ci_high
    assert hits / total >= 0.88  # 200 draws: binomial sd ~1.6 % around the ~93 % measured
