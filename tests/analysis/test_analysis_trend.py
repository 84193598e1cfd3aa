"""The slope of an exponent along a numeric condition key (``analysis/fits/trend.py``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.fits.trend import trend_series
from analysis.synthetic import SyntheticSpec, write_sweep

VALUES = [1e-6, 1e-5, 1e-4]


def _reps(means, sd, n=2000, shared=0.0, seed=0):
    """Replicates of three exponents: independent noise of sd ``sd`` plus a shared (seed) part."""
    rng = np.random.default_rng(seed)
    common = rng.normal(0, shared, n)
    return [m + rng.normal(0, sd, n) + common for m in means]


def test_a_rise_a_flat_line_and_an_unresolved_series():
    rise = trend_series(VALUES, [0.1, 0.2, 0.3], _reps([0.1, 0.2, 0.3], 0.02))
    assert rise["trend"] == "rise" and rise["slope"] == pytest.approx(0.1)
    assert rise["slope_low"] > 0.05 and rise["slope_high"] < 0.15
    fall = trend_series(VALUES, [0.3, 0.2, 0.1], _reps([0.3, 0.2, 0.1], 0.02))
    assert fall["trend"] == "fall" and fall["slope"] == pytest.approx(-0.1)
    flat = trend_series(VALUES, [0.2, 0.2, 0.2], _reps([0.2, 0.2, 0.2], 0.015))
    assert flat["trend"] == "flat" and flat["diff_low_min"] > -0.1 and flat["diff_high_max"] < 0.1
    wide = trend_series(VALUES, [0.2, 0.2, 0.2], _reps([0.2, 0.2, 0.2], 0.2))
    assert wide["trend"] == "unresolved" and wide["slope_low"] < 0 < wide["slope_high"]
    missing = trend_series(VALUES, [0.2, np.nan, 0.2], _reps([0.2, 0.2, 0.2], 0.02))
    assert missing["trend"] == "unresolved" and "missing" in missing["note"]


def test_a_seed_effect_shared_by_the_conditions_cancels_in_the_slope():
    paired = trend_series(VALUES, [0.1, 0.2, 0.3], _reps([0.1, 0.2, 0.3], 0.02, shared=0.1))
    apart = [
        trend_series(VALUES, [0.1, 0.2, 0.3], _reps([0.1, 0.2, 0.3], np.hypot(0.02, 0.1), seed=s))
        for s in (1,)
    ]
    assert paired["slope_high"] - paired["slope_low"] < 0.3 * (apart[0]["slope_high"] - apart[0]["slope_low"])


def test_rlvr_analyze_writes_the_trend_of_alpha_along_eta_ref(tmp_path):
    from analysis.cli import main as analyze

    specs = [
        SyntheticSpec(
            sizes=(32, 64, 128, 256, 512),
            seeds=4,
            alpha=a,
            sigma=0.1,
            gamma=None,
            targets=(0.3, 0.4),
            budget=200000,
            overrides=(("lr.ref_lr", lr),),
            seed=k,
            b_noise=None,
        )
        for k, (a, lr) in enumerate(zip([0.1, 0.25, 0.4], VALUES))
    ]
    write_sweep(tmp_path / "sweep", specs)
    out = tmp_path / "out"
    assert (
        analyze([str(tmp_path / "sweep"), "--out", str(out), "--bootstrap", "2000", "--no-plots", "--quiet"])
        == 0
    )
    trend = pd.read_csv(out / "trend.csv")
    assert set(trend["key"]) == {"lr.ref_lr"} and set(trend["clock"]) >= {
        "target:0.3",
        "target:0.4",
        "common",
    }
    for r in trend[trend["clock"].str.startswith("target") | (trend["clock"] == "common")].itertuples():
        assert r.trend == "rise" and r.slope_low < 0.15 < r.slope_high, r  # truth: +0.15 per decade
    text = (out / "report.md").read_text()
    assert "## Exponents along a numeric key" in text and "**rise**" in text
    trend = trend.set_index("clock")
    assert not trend.loc["common", "reference_inside"] and trend.loc["common", "reference"] == 0.29
    assert "the reference +0.290 is **outside** the interval (excluded)" in text


# ---- the replicates behind the printed intervals (analysis/fits/trend_replicates.py) ------------------------


def _fit(exponent, reps, low=None, high=None):
    from analysis.fits.fit import FitResult

    q = np.quantile(reps, [0.025, 0.975])
    return FitResult(
        exponent=exponent,
        ci_low=q[0] if low is None else low,
        ci_high=q[1] if high is None else high,
        boot_slopes=np.asarray(reps, float),
    )


def _table(fits, **kw):
    from analysis.fits.trend import trend_table

    exponents = pd.DataFrame(
        [{"condition": f"c{i}", "lr.ref_lr": v, "clock": "target:0.3"} for i, v in enumerate(VALUES)]
    )
    return trend_table(exponents, fits, None, ["lr.ref_lr"], **kw).set_index("clock").loc["target:0.3"]


def test_a_degenerate_fit_enters_the_trend_with_its_reported_interval():
    """A fit whose raw replicates span 0.01 but whose reported (profile-widened) interval is 0.5 wide
    enters the slope with the printed width, not with a weight hundreds of times the others'."""
    rng = np.random.default_rng(3)
    reps = [m + rng.normal(0, 0.02, 2000) for m in (0.1, 0.2)] + [0.5 + rng.normal(0, 0.003, 2000)]
    raw = trend_series(VALUES, [0.1, 0.2, 0.5], reps)
    fits = {(f"c{i}", "target:0.3"): _fit(m, r) for i, (m, r) in enumerate(zip((0.1, 0.2), reps))}
    fits[("c2", "target:0.3")] = _fit(0.5, reps[2], low=0.25, high=0.75)
    row = _table(fits)
    assert row["slope_high"] - row["slope_low"] > 2 * (raw["slope_high"] - raw["slope_low"])
    # the degenerate end has a small weight now: the slope follows the two measured conditions (0.1/decade)
    assert row["slope"] == pytest.approx(0.1, abs=0.02) and raw["slope"] > 0.15
    assert row["frac_reselected"] == 0 and row["interval_method"] == "percentile"
    # the reference slope is a parameter: tested against the printed interval either way
    assert _table(fits, references={"lr.ref_lr": 0.1})["reference_inside"]
    assert not _table(fits, references={"lr.ref_lr": 0.29})["reference_inside"]
    assert math.isnan(_table(fits, references={})["reference"])


def test_with_few_distinct_replicates_the_seed_cluster_t_interval_joins_the_percentile_one():
    """5 seeds resampled as clusters and paired: 126 distinct multisets, so at most 126 distinct slope
    replicates however many are drawn (module docstring of analysis/fits/trend.py)."""
    from itertools import combinations_with_replacement

    from analysis.fits.trend import FEW_DISTINCT

    rng = np.random.default_rng(4)
    seed_effects = rng.normal(0, 0.05, (5, 3))  # each seed's offset of the three exponents
    multisets = np.array([np.bincount(c, minlength=5) for c in combinations_with_replacement(range(5), 5)])
    assert len(multisets) == 126
    draws = rng.integers(0, 5, (2000, 5))
    counts = np.stack([np.bincount(d, minlength=5) for d in draws])
    reps = [m + counts @ seed_effects[:, j] / 5 for j, m in enumerate((0.1, 0.2, 0.3))]
    out = trend_series(VALUES, [0.1, 0.2, 0.3], reps)
    assert out["n_distinct"] <= 126 < FEW_DISTINCT and out["interval_method"] == "percentile ∪ seed-cluster t"
    x = np.log10(VALUES)
    Y = np.stack(reps, 1)
    w = 1 / Y.var(0, ddof=1)
    boot = ((Y - (Y * w).sum(1, keepdims=True) / w.sum()) * w * (x - (w * x).sum() / w.sum())).sum(1) / (
        w * (x - (w * x).sum() / w.sum()) ** 2
    ).sum()
    q25, q75 = np.quantile(boot, [0.25, 0.75])
    half = 1.959963984540054 * (q75 - q25) / 1.3489795003921634
    low, high = np.quantile(boot, [0.025, 0.975])
    assert out["slope_low"] == pytest.approx(min(low, out["slope"] - half))
    assert out["slope_high"] == pytest.approx(max(high, out["slope"] + half))
    assert "distinct slope replicates" in out["note"]


def _condition(prefactor: float, seed: int, n_boot: int = 200):
    from analysis.data.clock_tables import build_tables
    from analysis.fits.exponents import fit_conditions
    from analysis.synthetic import records

    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256),
        seeds=5,
        alpha=0.0,
        prefactor=prefactor,
        gamma=None,
        b_noise=None,
        targets=(0.3,),
        budget=40000,
        eval_every=64,
        eval_growth=2.0**0.25,
        seed=seed,
    )
    tables = build_tables(records(spec))
    _, fits = fit_conditions(tables, n_boot=n_boot, seed=seed, joint_model=False)
    condition = tables.runs["condition"].iloc[0]
    return tables, condition, fits[(condition, "target:0.3")]


def test_early_sizes_are_chosen_again_in_every_resample():
    from analysis.fits.exponents import condition_resamples, early_sizes
    from analysis.fits.trend_replicates import condition_replicates, early_weights, reselected_slopes

    # crossings well above 4 B at every size: no size is early in any resample, and the rebuilt
    # replicates are the fit's own
    tables, condition, fit = _condition(4000.0, 1)
    fitted, W, used, _, _ = condition_resamples(tables, condition, 200, 1, "seeds")
    assert used == "seeds"
    slopes, share = reselected_slopes(fitted, "target:0.3", fit, W, tables.options)
    assert share == 0 and np.allclose(slopes, fit.boot_slopes, atol=1e-6)
    # median crossing 256 responses: on the full data B = 128 and 256 are early and 256 is left out; B = 64
    # is early in a share of the resamples, which then leave out 128 too (each keeps its smallest early size)
    tables, condition, fit = _condition(256.0, 2)
    fitted, W, _, _, _ = condition_resamples(tables, condition, 200, 2, "seeds")
    full = early_sizes(fitted, "target:0.3", tables.options)
    one, changed = early_weights(fitted, "target:0.3", tables.options, np.ones((1, len(fitted))))
    dropped = sorted(set(fitted["B"][one[0] == 0]))
    assert dropped == full == [256.0] and not changed[0]
    reps, share, note = condition_replicates(tables, condition, "target:0.3", fit, 200, 2, "seeds")
    assert 0 < share < 1 and note == "" and reps.size == fit.boot_slopes.size
    assert not np.allclose(reps, fit.boot_slopes)
    # the resamples that also drop B = 128 regress over 32 and 64 only: the interval widens
    assert np.quantile(reps, 0.975) - np.quantile(reps, 0.025) > fit.ci_high - fit.ci_low
