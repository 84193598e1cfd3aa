"""Targets as fractions of the achievable gain (analysis/fits/gain.py) on synthetic sigmoid curves whose
asymptote and exponent are known."""

import math

import numpy as np
import pytest

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.fits.gain import achievable_gain, gain_table
from analysis.reporting.sections import gain_lines
from analysis.synthetic import SyntheticSpec, records

ALPHA = 0.3


def spec(acc_max: float, lr: float, seed: int) -> SyntheticSpec:
    return SyntheticSpec(
        sizes=(32, 64, 128, 256),
        seeds=6,
        alpha=ALPHA,
        prefactor=300.0,
        sigma=0.15,
        gamma=None,
        b_noise=None,
        targets=(0.25,),
        budget=60000,
        eval_every=128,
        eval_growth=1.15,
        acc_start=0.18,
        acc_max=acc_max,
        acc_noise=0.01,
        curve="sigmoid",
        curve_b=1.5,
        seed=seed,
        overrides=(("lr.ref_lr", lr),),
    )


@pytest.fixture(scope="module")
def two_plateaus():
    recs = records(spec(0.60, 1e-5, 1), spec(0.32, 3e-5, 2))
    opts = ClockOptions(targets=(0.25,), discrete=False, horizon=None)
    return recs, build_tables(recs, opts)


def test_the_shared_asymptote_is_each_condition_s_plateau(two_plateaus):
    _, tables = two_plateaus
    found = {}
    for _, runs in tables.runs.groupby("condition"):
        g = achievable_gain(runs, tables.evals, n_boot=60, seed=0)
        found[float(runs["lr.ref_lr"].iloc[0])] = g
        assert g["R0"] == pytest.approx(0.18, abs=0.005)  # the mean of the noisy first evaluations
        assert g["A_low"] <= g["A"] <= g["A_high"]
        assert g["n_boot"] >= 50
    assert found[1e-5]["A"] == pytest.approx(0.60, abs=0.02)
    assert found[3e-5]["A"] == pytest.approx(0.32, abs=0.01)
    for truth, g in ((0.60, found[1e-5]), (0.32, found[3e-5])):
        assert g["A_low"] - 0.01 <= truth <= g["A_high"] + 0.01
        assert g["A_high"] - g["A_low"] < 0.1


def test_a_gain_target_has_the_generator_s_exponent_in_both_conditions(two_plateaus):
    recs, tables = two_plateaus
    gain = gain_table(recs, tables, [0.5], n_boot=300, seed=0, gain_boot=60)
    assert len(gain) == 2
    for r in gain.itertuples():
        # the level is R0 + 0.5 (A - R0), and the interval with A's error is never narrower
        assert r.level == pytest.approx(r.R0 + 0.5 * (r.A - r.R0), abs=1e-4)
        assert r.level_low <= r.level <= r.level_high
        assert r.ci_low_gain <= r.ci_low <= r.exponent <= r.ci_high <= r.ci_high_gain
        assert r.ci_low_gain <= ALPHA <= r.ci_high_gain
        assert abs(r.exponent - ALPHA) < 0.1
    # the two conditions are read at different absolute levels: 0.39 and 0.25
    levels = sorted(gain["level"])
    assert levels[0] == pytest.approx(0.25, abs=0.01) and levels[1] == pytest.approx(0.39, abs=0.015)
    text = "\n".join(gain_lines(gain))
    assert "## Targets as fractions of the achievable gain" in text and "0.5" in text


def test_no_fraction_no_table(two_plateaus):
    recs, tables = two_plateaus
    assert gain_table(recs, tables, []).empty
    assert gain_lines(gain_table(recs, tables, [])) == []


def test_evaluations_past_the_horizon_do_not_move_the_asymptote():
    """A is fitted on what the clocks read: the same runs read to a horizon give the same A whether or
    not they went on past it."""
    short = records(spec(0.45, 1e-5, 3))
    recs = records(SyntheticSpec(**{**spec(0.45, 1e-5, 3).__dict__, "budget": 200000}))
    opts = ClockOptions(targets=(0.25,), discrete=False, horizon=40000.0)
    a = achievable_gain(*(lambda t: (t.runs, t.evals))(build_tables(short, opts)), n_boot=0)
    b = achievable_gain(*(lambda t: (t.runs, t.evals))(build_tables(recs, opts)), n_boot=0)
    assert math.isfinite(a["A"]) and np.isclose(a["A"], b["A"], atol=1e-9)


def test_rlvr_analyze_writes_the_gain_table_and_section(tmp_path):
    import pandas as pd

    from analysis.cli import main
    from analysis.synthetic import write_sweep

    small = {"sizes": (32, 128), "seeds": 4, "budget": 20000}
    write_sweep(
        tmp_path / "sweep",
        [
            SyntheticSpec(**{**spec(a, lr, s).__dict__, **small})
            for a, lr, s in ((0.6, 1e-5, 4), (0.32, 3e-5, 5))
        ],
    )
    out = tmp_path / "out"
    args = [
        str(tmp_path / "sweep"),
        "--out",
        str(out),
        "--bootstrap",
        "100",
        "--no-plots",
        "--quiet",
        "--no-joint",
    ]
    assert main([*args, "--gain-targets", "0.5", "0.75", "--sigmoid-bootstrap", "40"]) == 0
    gain = pd.read_csv(out / "gain.csv")
    assert sorted(gain["fraction"].unique()) == [0.5, 0.75] and gain["condition"].nunique() == 2
    assert (gain["level_low"] <= gain["level_high"]).all()
    report = (out / "report.md").read_text()
    assert "## Targets as fractions of the achievable gain" in report
    # without the option: no table, no section
    assert main([*args, "--out", str(tmp_path / "plain"), "--no-sigmoid"]) == 0
    assert not (tmp_path / "plain" / "gain.csv").exists()
    assert "fractions of the achievable gain" not in (tmp_path / "plain" / "report.md").read_text()


def test_a_condition_without_gain_or_an_unreached_level_gets_no_interval():
    """A collapsing condition (A <= R0) has no gain target; a level no run reaches has no exponent, and
    neither reports a finite interval."""
    from analysis.fits.gain import _level

    assert math.isnan(_level(0.18, 0.14, 0.5)) and math.isnan(_level(0.18, math.nan, 0.5))
    recs = records(SyntheticSpec(**{**spec(0.60, 1e-5, 6).__dict__, "budget": 1500, "seeds": 4}))
    tables = build_tables(recs, ClockOptions(targets=(0.25,), discrete=False, horizon=None))
    gain = gain_table(recs, tables, [0.9], n_boot=50, gain_boot=20)
    row = gain.iloc[0]
    # runs stopped at 1,500 responses never reach 90 % of a 0.18 -> 0.60 gain
    assert row["n_censored"] == row["n_runs"] == 16 and math.isnan(row["exponent"])
    assert row["ci_low_gain"] == -math.inf and row["ci_high_gain"] == math.inf
    assert row["message"] == "no exponent at the level (16 of 16 runs censored)"
