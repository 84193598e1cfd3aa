"""Noise-scale prediction, goodness of fit, sigmoid fits, common exponent, order invariance, messages."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from analysis.data.clock_tables import build_tables
from analysis.fits.cross import common_exponent, common_exponent_table
from analysis.fits.exponents import fit_conditions
from analysis.fits.fit import fit_power_law
from analysis.fits.gof import goodness_of_fit, residuals
from analysis.fits.noise_scale import agreement, implied_exponent, noise_table
from analysis.fits.sigmoid import _bounds, fit_batched, fit_point, sigmoid, sigmoid_table
from analysis.reporting.markdown import source_messages
from analysis.synthetic import SyntheticSpec
from analysis.synthetic import records as _records


def test_noise_scale_recovered_and_implied_exponent():
    spec = SyntheticSpec(
        sizes=(32, 128, 512), seeds=4, b_noise=150.0, train_rows="all", budget=8000, seed=4, gamma=None
    )
    tables = build_tables(_records(spec))
    table = noise_table(tables, n_boot=400)
    cond = table[table["level"] == "condition"].iloc[0]
    assert cond["b_noise_low"] <= 150.0 <= cond["b_noise_high"]
    assert cond["b_crit_rollout"] == pytest.approx(8 * cond["b_noise"])
    sizes = tables.runs["B"].to_numpy(float)
    x = np.log(sizes)
    y = np.log1p(sizes / (8 * cond["b_noise"]))
    assert cond["implied_exponent"] == pytest.approx(np.polyfit(x, y, 1)[0])
    assert cond["implied_low"] <= cond["implied_exponent"] <= cond["implied_high"]
    # limits of the prediction: far below B_noise the slope is 0, far above it is 1
    assert implied_exponent([1, 2, 4], [1e9], 1)[0] == pytest.approx(0, abs=1e-6)
    assert implied_exponent([1e6, 2e6, 4e6], [1.0], 1)[0] == pytest.approx(1, abs=1e-4)
    per_size = table[table["level"] == "B"]
    assert len(per_size) == 3 and (per_size["n_runs_with_noise"] == 4).all()
    exps, _ = fit_conditions(tables, n_boot=200)
    merged = agreement(exps, table)
    target = merged[merged["clock"] == "target:0.3"]
    assert target["noise_exponent"].notna().all() and target["noise_agrees"].notna().all()


def test_lack_of_fit_and_broken_power_law():
    rng = np.random.default_rng(0)
    sizes = np.repeat([16.0, 32.0, 64.0, 128.0, 256.0, 512.0], 6)
    x = np.log(sizes)
    knee = np.log(64.0)
    curved = 8 + 0.05 * x + 0.9 * np.maximum(0, x - knee) + 0.1 * rng.standard_normal(x.size)
    gof = goodness_of_fit(sizes, np.exp(curved), np.zeros(sizes.size, bool))
    assert gof.lof_p < 0.001 and gof.lof_df == 4
    assert gof.delta_aic < -10 and 40 < gof.knee < 100
    assert gof.slope_below == pytest.approx(0.05, abs=0.15) and gof.slope_above == pytest.approx(
        0.95, abs=0.15
    )
    straight = 8 + 0.3 * x + 0.1 * rng.standard_normal(x.size)
    gof = goodness_of_fit(sizes, np.exp(straight), np.zeros(sizes.size, bool))
    assert gof.lof_p > 0.05 and gof.delta_aic > -2
    # with interval-censored times the same test runs; residuals have mean ~0 per kind of data
    lower = np.exp(straight) * 0.8
    fit = fit_power_law(sizes, np.exp(straight), np.zeros(sizes.size, bool), lower=lower, n_boot=0)
    gof = goodness_of_fit(sizes, np.exp(straight), np.zeros(sizes.size, bool), lower=lower)
    assert np.isfinite(gof.lof_stat) and gof.lof_p > 0.01
    Bs, r, kind = residuals(fit, sizes, np.exp(straight), np.zeros(sizes.size, bool), lower)
    assert set(kind) == {"interval"} and abs(r.mean()) < 0.2 and np.all(np.abs(r) < 3)
    # too few sizes: a note, not an exception
    assert "needs" in goodness_of_fit([32, 64, 32, 64], [1, 2, 1.1, 2.1], [False] * 4).note


def test_sigmoid_batched_equals_least_squares_and_recovers_parameters():
    rng = np.random.default_rng(1)
    C = np.geomspace(100, 50000, 40)
    L = np.log(C)
    truths, Y = [], []
    for _ in range(6):
        p = (0.5 + 0.2 * rng.random(), 0.7 + rng.random(), 1000 * (1 + 4 * rng.random()))
        truths.append(p)
        Y.append(sigmoid(C, 0.1, *p) + 0.005 * rng.standard_normal(C.size))
    Y = np.array(Y)
    ref = np.array([fit_point(C, y, 0.1)[0] for y in Y])
    batched, conv = fit_batched(L, Y, np.ones_like(Y), 0.1, np.array([0.5, 0.0, np.log(2000)]), _bounds(L))
    assert conv.all()
    np.testing.assert_allclose(batched, ref, rtol=1e-4)
    np.testing.assert_allclose(ref, truths, rtol=0.1)
    params, ok, message = fit_point([100, 200], [0.1, 0.2], 0.05)
    assert not ok and "too few" in message and np.isnan(params).all()


def test_sigmoid_table_per_size_and_run():
    spec = SyntheticSpec(
        sizes=(32, 256), seeds=3, gamma=None, budget=40000, seed=2, curve="sigmoid", sigma=0.1
    )
    tables = build_tables(_records(spec))
    table = sigmoid_table(tables, n_boot=200)
    pooled = table[table["level"] == "B"]
    assert len(pooled) == 2 and pooled["converged"].all()
    assert ((pooled["A_low"] <= pooled["A"]) & (pooled["A"] <= pooled["A_high"])).all()
    assert ((pooled["C_mid_low"] <= pooled["C_mid"]) & (pooled["C_mid"] <= pooled["C_mid_high"])).all()
    assert np.allclose(pooled["R0"], spec.acc_start)
    assert np.allclose(pooled["A"], spec.acc_max, atol=0.02) and np.allclose(
        pooled["b"], spec.curve_b, rtol=0.1
    )
    runs = table[table["level"] == "run"]
    assert len(runs) == 6 and runs["converged"].all()
    np.testing.assert_allclose(runs["A"], spec.acc_max, atol=1e-3)  # noise-free curves: exact
    np.testing.assert_allclose(runs["b"], spec.curve_b, rtol=1e-3)


def test_common_exponent_gls_and_test():
    rng = np.random.default_rng(3)
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512),
        seeds=5,
        alpha=0.3,
        gamma=None,
        budget=200000,
        targets=(0.3, 0.5),
        seed=9,
    )
    tables = build_tables(_records(spec))
    _, fits = fit_conditions(tables, n_boot=400)
    common = common_exponent_table(tables, fits).iloc[0]
    assert common["n_targets"] == 2 and common["df"] == 1
    assert common["ci_low"] <= 0.3 <= common["ci_high"]
    assert common["p_common"] > 0.01  # the generator gives every target the same exponent
    # two unrelated estimates with a known covariance: inverse-variance weights from the fits' standard
    # errors, the interval from the weighted replicates and the chi-square by hand
    from analysis.fits.fit import FitResult

    a, b = FitResult(exponent=0.2, se=0.1), FitResult(exponent=0.5, se=0.2)
    reps = rng.multivariate_normal([0.2, 0.5], [[0.01, 0.0], [0.0, 0.04]], size=4000)
    a.boot_slopes, b.boot_slopes = reps[:, 0], reps[:, 1]
    res = common_exponent([a, b])
    assert res["weights"] == "0.800 0.200"
    assert res["exponent_common"] == pytest.approx(0.8 * 0.2 + 0.2 * 0.5, abs=1e-12)
    half = 1.96 * math.sqrt(0.8**2 * 0.01 + 0.2**2 * 0.04)
    assert res["ci_low"] == pytest.approx(0.26 - half, abs=0.01)
    assert res["ci_high"] == pytest.approx(0.26 + half, abs=0.01)
    assert res["chi2"] == pytest.approx(0.3**2 / 0.05, rel=0.1)
    equal = common_exponent([a, b], weighting="equal")
    assert equal["exponent_common"] == pytest.approx(0.35) and equal["chi2"] == res["chi2"]


def test_results_do_not_depend_on_the_order_runs_are_found():
    specs = [
        SyntheticSpec(sizes=(32, 64, 128), seeds=3, alpha=a, seed=s, overrides=(("lr.ref_lr", lr),))
        for a, s, lr in [(0.2, 1, 1e-6), (0.4, 2, 1e-5), (0.3, 3, 3e-6)]
    ]
    records = _records(*specs)
    first = fit_conditions(build_tables(records), n_boot=200)[0]
    shuffled = records[:]
    random.Random(0).shuffle(shuffled)
    second = fit_conditions(build_tables(shuffled), n_boot=200)[0]
    pd.testing.assert_frame_equal(first, second)


def test_one_condition_and_one_size_messages():
    one = build_tables(_records(SyntheticSpec(sizes=(64,), seeds=3, seed=1)))
    msgs = source_messages(one)
    assert any("single rollout size (B = 64)" in m for m in msgs)
    assert any("single condition" in m for m in msgs)
    exps, _ = fit_conditions(one, n_boot=50)
    assert len(exps) == 3 and exps["exponent"].isna().all() and exps["warnings"].str.len().gt(0).all()
    two = build_tables(_records(SyntheticSpec(sizes=(32, 64), seeds=2, seed=1)))
    assert not any("single rollout size" in m for m in source_messages(two))
    # exponents.csv carries only the keys that vary between conditions
    exps2, _ = fit_conditions(
        build_tables(
            _records(
                *[
                    SyntheticSpec(
                        sizes=(32, 64), seeds=2, seed=s, overrides=(("optim.steps_per_rollout", k),)
                    )
                    for s, k in [(1, 4), (2, 8)]
                ]
            )
        ),
        n_boot=0,
    )
    key_cols = list(exps2.columns[1 : exps2.columns.get_loc("clock")])
    assert key_cols == ["optim.steps_per_rollout"]


def test_plot_jitter_stays_in_a_fixed_band():
    from analysis.figures.plot_style import jitter as _jitter

    B = np.repeat([32.0, 64.0], [100, 1])
    j = _jitter(B)
    assert np.all(np.abs(np.log(j)) <= 0.11 + 1e-12) and j[-1] == 1.0
    assert np.all(B * j < 45) or np.all((B * j)[:100] < 45)  # 100 seeds at 32 never reach the next size


def test_worker_processes_give_the_same_results():
    from analysis.fits.sigmoid import sigmoid_tables

    specs = [
        SyntheticSpec(sizes=(32, 64, 128), seeds=3, alpha=a, seed=s, overrides=(("lr.ref_lr", lr),))
        for a, s, lr in [(0.2, 1, 1e-6), (0.4, 2, 1e-5)]
    ]
    tables = build_tables(_records(*specs))
    one = fit_conditions(tables, n_boot=200, jobs=1)[0]
    two = fit_conditions(tables, n_boot=200, jobs=2)[0]
    pd.testing.assert_frame_equal(one, two)
    pd.testing.assert_frame_equal(
        sigmoid_tables(tables, n_boot=50, jobs=1), sigmoid_tables(tables, n_boot=50, jobs=2)
    )


def test_optimizer_steps_clock_is_the_responses_clock_shifted_by_one():
    """steps = responses * K / B in every row, so log steps = log responses + log K - log B: the MLE of
    every exponent moves by exactly -1 and the scatter does not change (the fit is equivariant)."""
    from analysis.data.clock_tables import ClockOptions

    spec = SyntheticSpec(sizes=(32, 64, 128, 256), seeds=3, seed=8, detection_delay=1, train_rows="all")
    records = _records(spec)  # a row at every rollout, so the onset row exists on every clock
    resp = fit_conditions(build_tables(records), n_boot=0)[0].set_index("clock")
    steps = fit_conditions(build_tables(records, ClockOptions(clock="optimizer_steps")), n_boot=0)[
        0
    ].set_index("clock")
    for clock in resp.index:
        assert steps.loc[clock, "exponent"] == pytest.approx(resp.loc[clock, "exponent"] - 1, abs=1e-6)
        assert steps.loc[clock, "sigma"] == pytest.approx(resp.loc[clock, "sigma"], rel=1e-5)
    assert steps["theory"].isna().all() and resp.loc["failure", "theory"] == 0.0
