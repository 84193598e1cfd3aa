"""The slope of an exponent along a numeric condition key (``analysis/fits/trend.py``)."""

from __future__ import annotations

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
