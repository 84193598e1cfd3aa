"""Intervals and verdicts never narrower than their evidence: the common α across targets, the trend
of an exponent along a key, and the planner's assurance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.fits.cross import common_exponent, reported_replicates
from analysis.fits.fit import FitResult
from analysis.fits.trend import EXPONENT_BOUND, MIN_VERDICT_RESAMPLES, holm, trend_series
from rlvr_study.plan import Truth, design_width, plan_design, simulate_widths


def _fit(exponent, reps, low=None, high=None) -> FitResult:
    reps = np.asarray(reps, float)
    q = np.quantile(reps, [0.025, 0.975], method="inverted_cdf")
    return FitResult(
        exponent=exponent,
        ci_low=q[0] if low is None else low,
        ci_high=q[1] if high is None else high,
        boot_slopes=reps,
    )


def test_a_target_without_an_identified_exponent_in_many_resamples_cannot_make_the_common_alpha_narrow():
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.05, 1000)
    good = _fit(0.30, 0.30 + shared + rng.normal(0, 0.01, 1000))
    wild = 0.32 + shared + rng.normal(0, 0.01, 1000)
    wild[rng.random(1000) < 0.25] = np.inf  # a quarter of resamples: events at < 2 sizes
    bad = _fit(0.32, wild)
    assert math.isinf(bad.ci_high)
    out = common_exponent([good, bad])
    # the well-behaved resamples alone would give a common interval about 0.2 wide; the unidentified
    # ones are kept, so the upper end is unbounded
    assert math.isinf(out["ci_high"]) and out["ci_low"] < 0.25
    assert "not identified" in out["note"]


def test_a_profile_widened_target_widens_the_common_alpha():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 0.02, 2000)
    a = _fit(0.30, 0.30 + shared + rng.normal(0, 0.005, 2000))
    narrow_b = 0.31 + shared + rng.normal(0, 0.005, 2000)
    b_boot = _fit(0.31, narrow_b)
    b_wide = _fit(0.31, narrow_b, low=0.0, high=0.7)  # degenerate bootstrap, profile interval reported
    stretched = reported_replicates(b_wide)
    lo, hi = np.quantile(stretched, [0.025, 0.975], method="inverted_cdf")
    assert lo == pytest.approx(0.0, abs=0.005) and hi == pytest.approx(0.7, abs=0.005)
    narrow = common_exponent([a, b_boot])
    wide = common_exponent([a, b_wide])
    # the widened target's weight falls with its reported half-width (it has no Wald error here): the
    # common interval is no narrower than the best-measured target's, and wider than the one the
    # degenerate replicates alone would give
    width = wide["ci_high"] - wide["ci_low"]
    assert width >= 0.95 * (a.ci_high - a.ci_low) and width > narrow["ci_high"] - narrow["ci_low"]
    assert float(wide["weights"].split()[1]) < 0.1


def test_trend_keeps_unidentified_replicates_bounded_and_needs_enough_resamples():
    rng = np.random.default_rng(2)
    values = [1e-6, 1e-5, 1e-4]
    reps = [m + rng.normal(0, 0.02, 4000) for m in (0.1, 0.2, 0.3)]
    clean = trend_series(values, [0.1, 0.2, 0.3], reps)
    assert clean["trend"] == "rise" and clean["frac_unidentified"] == 0 and clean["p_value"] < 0.01
    few = trend_series(values, [0.1, 0.2, 0.3], [r[: MIN_VERDICT_RESAMPLES // 2] for r in reps])
    assert few["trend"] == "unresolved" and str(MIN_VERDICT_RESAMPLES) in few["note"]
    # a third of one condition's resamples unidentified: kept at the bound (all 4,000 resamples
    # enter, the share is reported), so that condition's variance is large and its weight small,
    # instead of a slope computed on the selected two thirds where it looks precise
    holey = [r.copy() for r in reps]
    holey[2][:1400] = -np.inf
    kept = trend_series(values, [0.1, 0.2, 0.3], holey)
    assert kept["frac_unidentified"] == pytest.approx(0.35) and kept["n_boot_used"] == 4000
    assert f"±{EXPONENT_BOUND:g}" in kept["note"]
    # the slope then rests on the two well-measured conditions: 0.1 per decade, as their difference
    assert kept["slope"] == pytest.approx(0.1, abs=0.01)


def test_holm():
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    out = holm([0.2, np.nan, 0.001])
    assert np.isnan(out[1]) and out[2] == pytest.approx(0.002) and out[0] == pytest.approx(0.2)


def test_the_planner_with_assurance_plans_a_width_met_in_that_share_of_repetitions():
    truth = Truth(alpha=0.3, intercept=math.log(1500.0), sigma=0.25)  # exact times: only sigma-hat varies
    sizes = [32, 64, 128, 256, 512]
    median = plan_design(sizes, [truth], 0.2, assurance=0.5)
    sure = plan_design(sizes, [truth], 0.2, assurance=0.8)
    assert sure.n_runs > median.n_runs and sure.width <= 0.2
    assert design_width(sure.sizes, sure.seeds, truth, 0.8) == pytest.approx(sure.width)
    achieved = simulate_widths(sure.sizes, sure.seeds, truth, n_sweeps=60, n_boot=200, seed=4)
    planned = design_width(sure.sizes, sure.seeds, truth, 0.8)
    assert (achieved <= planned).mean() >= 0.65  # 0.8 planned; 60 sweeps and a bootstrap interval
    at_median = simulate_widths(median.sizes, median.seeds, truth, n_sweeps=60, n_boot=200, seed=4)
    assert (at_median <= design_width(median.sizes, median.seeds, truth, 0.5)).mean() < (
        achieved <= planned
    ).mean()
