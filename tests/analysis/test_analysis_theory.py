"""The predicted exponent of the local theory (analysis/theory.py): limits, exactness and inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.theory import local_alpha, paired_difference, predicted_alpha, run_scales

SIZES = [32, 64, 128, 256, 512]  # the two-clock study's rollout sizes


def test_limits_noise_gives_zero_and_curvature_one_half():
    assert local_alpha(1.0, 1e6) == pytest.approx(0.0, abs=1e-6)
    assert local_alpha(1e6, 1.0) == pytest.approx(0.5, abs=1e-6)
    assert local_alpha(8.0, 8.0) == pytest.approx(0.25)
    K = 8
    assert predicted_alpha(SIZES, 1e7, K)[0] == pytest.approx(0.0, abs=1e-4)
    assert predicted_alpha(SIZES, 1e-4, K)[0] == pytest.approx(0.5, abs=1e-4)


def test_prediction_is_the_slope_of_the_interpolation_and_falls_with_b_crit():
    K, b_crit = 8, 20.0
    x = np.log(SIZES)
    y = 0.5 * np.log(np.array(SIZES) / K + b_crit)
    want = np.polyfit(x, y, 1)[0]
    got = predicted_alpha(SIZES, [b_crit, 2 * b_crit, 4 * b_crit, -1.0, math.nan], K)
    assert got[0] == pytest.approx(want, rel=1e-12)
    assert got[0] > got[1] > got[2] > 0  # more noise (larger B_crit): a smaller exponent
    assert np.isnan(got[3]) and np.isnan(got[4])
    # the slope lies between the local exponents at the smallest and largest size
    assert local_alpha(SIZES[0] / K, b_crit) < got[0] < local_alpha(SIZES[-1] / K, b_crit)
    assert np.isnan(predicted_alpha([64, 64], b_crit, K)[0])


def test_run_scales_are_ratios_of_means_over_finite_rollouts():
    rows = [
        {"curv/trace_hsigma": 10.0, "curv/gHg_abs": 1.0, "noise/trace_cov": 4.0, "noise/grad_norm_sq": -0.5},
        {"curv/trace_hsigma": 30.0, "curv/gHg_abs": 3.0, "noise/trace_cov": 8.0, "noise/grad_norm_sq": 1.5},
        {"curv/trace_hsigma": "inf", "curv/gHg_abs": 0.0, "noise/trace_cov": 6.0},
        {"train/reward_mean": 0.5},
    ]
    s = run_scales(rows)
    assert s["b_crit"] == pytest.approx(20.0 / 2.0) and s["b_crit_rollouts"] == 2
    assert s["b_noise"] == pytest.approx(6.0 / 0.5) and s["b_noise_rollouts"] == 2
    assert math.isnan(run_scales([{"curv/trace_hsigma": 1.0, "curv/gHg_abs": -1.0}])["b_crit"])


def test_paired_difference_cancels_shared_variation():
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.2, 2000)  # run-to-run variation both estimates see
    fitted = 0.30 + shared + rng.normal(0, 0.01, 2000)
    predicted = 0.25 + shared + rng.normal(0, 0.01, 2000)
    out = paired_difference(fitted, predicted)
    assert out["difference"] == pytest.approx(0.05, abs=0.005)
    assert out["low"] > 0 and out["agrees"] == 0.0  # paired: the 0.05 gap is resolved
    same = paired_difference(predicted + rng.normal(0, 0.01, 2000), predicted)
    assert same["agrees"] == 1.0
