"""Which B reaches a target soonest (analysis/fits/which_b.py): the cost model from the runs' clocks, the
optimum against its closed form, edges, a user throughput curve, and the rlvr-analyze outputs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.fits.exponents import fit_conditions
from analysis.fits.which_b import (
    b_width_to_alpha_width,
    parse_throughput,
    rollout_clock_fit,
    which_b_table,
)
from analysis.reporting.sections import which_b_lines
from analysis.synthetic import SyntheticSpec, records, write_sweep

# synthetic runs spend 0.5 + 0.01 B wall seconds per rollout: B* = 50 (1 - alpha) / alpha
S0, S1 = 0.5, 0.01


def _fitted(
    alpha: float, sizes=(32, 64, 128, 256, 512), seeds=6, seed=5, clock="responses", prefactor=2000.0
):
    spec = SyntheticSpec(
        sizes=sizes,
        seeds=seeds,
        alpha=alpha,
        prefactor=prefactor,
        sigma=0.2,
        seed=seed,
        gamma=None,
        b_noise=None,
        targets=(0.3,),
    )
    tables = build_tables(records(spec), ClockOptions(clock=clock))
    _, fits = fit_conditions(tables, n_boot=400, seed=0, joint_model=False)
    return tables, fits


def test_the_rollout_clock_model_is_recovered():
    tables, _ = _fitted(0.2)
    c0, c1 = rollout_clock_fit(tables, "all", "wall_seconds")
    assert c0 == pytest.approx(S0, abs=2e-3) and c1 == pytest.approx(S1, rel=1e-3)


def test_the_optimum_matches_its_closed_form():
    tables, fits = _fitted(0.2)
    table = which_b_table(tables, fits)
    row = table[table["objective"] == "wall_seconds"].iloc[0]
    fit = fits[("all", "target:0.3")]
    closed = (S0 / S1) * (1 - fit.exponent) / fit.exponent
    assert row["B_best"] == pytest.approx(closed, rel=0.02)  # grid of 200 sizes over 32..512
    assert row["at_edge"] == "" and row["B_low"] <= 200 <= row["B_high"]  # the true B* = 200
    expect = fit.prefactor * row["B_best"] ** fit.exponent * (S0 + S1 * row["B_best"]) / row["B_best"]
    assert row["value_best"] == pytest.approx(expect, rel=1e-3)
    assert row["value_low"] <= row["value_best"] <= row["value_high"]
    assert row["value_best"] <= min(row["value_at_min_B"], row["value_at_max_B"])
    assert set(table["objective"]) == {"wall_seconds", "flops"}


def test_an_optimum_below_the_measured_sizes_is_flagged():
    tables, fits = _fitted(
        0.7, sizes=(64, 128, 256, 512), seeds=3, prefactor=300.0
    )  # B* = 50 * 0.3 / 0.7 = 21
    row = which_b_table(tables, fits).query("objective == 'wall_seconds'").iloc[0]
    assert row["B_best"] == 64 and row["at_edge"] == "lower"
    assert "lower edge" in "\n".join(which_b_lines(which_b_table(tables, fits)))


def test_a_user_throughput_curve():
    """Constant responses per second: no gain from larger rollouts, so the smallest B wins for alpha > 0,
    and the time there is R_T / rps."""
    tables, fits = _fitted(0.2, seeds=3)
    table = which_b_table(tables, fits, parse_throughput(["16:50", "1024:50"]))
    row = table[table["objective"] == "wall_seconds"].iloc[0]
    fit = fits[("all", "target:0.3")]
    assert row["B_best"] == 32 and row["at_edge"] == "lower"
    assert row["value_best"] == pytest.approx(fit.prefactor * 32**fit.exponent / 50)
    assert row["cost_model"].startswith("user curve")


@pytest.mark.parametrize("item", ["64", "64:0", "x:1", "-1:5"])
def test_bad_throughput_points_name_the_flag(item):
    with pytest.raises(ValueError, match="--throughput"):
        parse_throughput([item])


def test_alpha_width_for_a_b_factor_is_the_delta_method():
    """With seconds per response s0/B + s1, log B* = log(s0/s1) + log(1 - alpha) - log(alpha), so
    d log B* / d alpha = -1 / (alpha (1 - alpha))."""
    per = lambda b: (S0 + S1 * b) / b  # noqa: E731
    for alpha in (0.2, 0.3):
        got = b_width_to_alpha_width(2.0, alpha, per, [16, 4096])
        assert got == pytest.approx(math.log(2.0) * alpha * (1 - alpha), rel=1e-3)
    assert b_width_to_alpha_width(2.0, 0.7, per, [64, 512]) == math.inf  # optimum at the lower edge
    assert b_width_to_alpha_width(2.0, 0.2, None, [64, 512]) == math.inf


def test_only_on_the_responses_clock():
    tables, fits = _fitted(0.2, seeds=3, clock="tokens")
    assert which_b_table(tables, fits).empty and which_b_lines(which_b_table(tables, fits)) == []


def test_rlvr_analyze_writes_which_b(tmp_path):
    from analysis.cli import main

    spec = SyntheticSpec(sizes=(32, 64, 128, 256), seeds=3, alpha=0.2, seed=3, gamma=None, b_noise=None)
    write_sweep(tmp_path / "sweep", spec)
    out = tmp_path / "out"
    argv = [str(tmp_path / "sweep"), "--out", str(out), "--no-plots", "--no-sigmoid", "--bootstrap", "100"]
    assert main([*argv, "--throughput", "32:40", "256:150", "--jobs", "1"]) == 0
    table = pd.read_csv(out / "which_b.csv")
    assert set(table["clock"]) == {"target:0.3", "target:0.5"} and len(table) == 4
    assert table.loc[table["objective"] == "wall_seconds", "cost_model"].str.startswith("user curve").all()
    report = (out / "report.md").read_text()
    assert "## Which B: time and FLOPs to each target" in report
    with pytest.raises(SystemExit):
        main([*argv, "--throughput", "32"])
    assert np.isfinite(table["B_best"]).all()
