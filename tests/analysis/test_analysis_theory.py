"""The predicted exponent of the local theory (analysis/fits/theory.py): limits, exactness and inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.fits.theory import local_alpha, paired_difference, predicted_alpha, run_scales

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


# ---- the prediction beside the fit: theory.csv and the report section ------------------------------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

from analysis.cli import main  # noqa: E402
from analysis.data.clock_tables import build_tables  # noqa: E402
from analysis.fits.exponents import condition_resamples, fit_conditions  # noqa: E402
from analysis.fits.fit import fit_power_law  # noqa: E402
from analysis.fits.noise_scale import noise_table  # noqa: E402
from analysis.fits.seed_blocks import resample_weights  # noqa: E402
from analysis.fits.theory import THEORY_COLUMNS, compare_to_fit, theory_table  # noqa: E402
from analysis.reporting.sections import theory_lines  # noqa: E402
from analysis.synthetic import SyntheticSpec, records, write_sweep  # noqa: E402

B_CRIT = 20.0  # per response, the unit of curv/b_crit


def _add_curvature(rows: list[dict], b_crit: float = B_CRIT) -> list[dict]:
    """Curvature rows on every other noise row (sparser, as the trainer's cadence), with GᵀHG varying
    between rollouts and tr(HΣ) = B_crit · GᵀHG, so the ratio of means is B_crit exactly."""
    noisy = [r for r in rows if "noise/grad_norm_sq" in r]
    for i, r in enumerate(noisy[::2]):
        r["curv/gHg_abs"] = 1e-3 * (1.0 + 0.5 * i)
        r["curv/trace_hsigma"] = b_crit * r["curv/gHg_abs"]
        r["curv/b_crit"] = b_crit
    return rows


def test_predicted_alpha_from_curvature_rows_is_the_closed_form_slope_on_the_fits_resamples():
    spec = SyntheticSpec(sizes=(32, 64, 128, 256), seeds=5, gamma=None, seed=11)
    recs = records(spec)
    for rec in recs:
        _add_curvature(rec.rows)
    tables = build_tables(recs)
    exponents, fits = fit_conditions(tables, n_boot=200, seed=3, jobs=1)
    table = theory_table(tables, exponents, fits, n_boot=200, seed=3)
    assert list(table.columns) == THEORY_COLUMNS
    assert list(table["clock"]) == ["target:0.3", "target:0.5"]
    K, B = spec.steps_per_rollout, np.array(spec.sizes, float)
    closed_form = np.polyfit(np.log(B), 0.5 * np.log(B / K + B_CRIT), 1)[0]
    row = table.iloc[0]
    assert row["K"] == K and row["b_crit_runs"] == 20 and row["measured"] == "b_crit+b_noise"
    assert row["b_crit"] == pytest.approx(B_CRIT, rel=1e-12)
    assert row["predicted_b_crit"] == pytest.approx(closed_form, rel=1e-12)
    # every resample gives B_crit exactly: the prediction has no spread, the difference is the fit's
    assert row["predicted_b_crit_low"] == pytest.approx(closed_form) == row["predicted_b_crit_high"]
    # B_noise is noise_scale.csv's, and its prediction the same slope with B_noise in place of B_crit
    noise = noise_table(tables, n_boot=0).set_index("level").loc["condition"]
    assert row["b_noise"] == pytest.approx(noise["b_noise"], rel=1e-12)
    want = np.polyfit(np.log(B), 0.5 * np.log(B / K + row["b_noise"]), 1)[0]
    assert row["predicted_b_noise"] == pytest.approx(want, rel=1e-12)
    assert row["predicted_b_noise_low"] < row["predicted_b_noise"] < row["predicted_b_noise_high"]
    # the resamples are the fit's: refitting with them reproduces its replicates exactly
    condition = row["condition"]
    fitted, W, used, clusters, _ = condition_resamples(tables, condition, 200, 3)
    assert used == "seeds" and row["resampling"] == "seeds" and W.shape == (200, 20)
    fit = fits[(condition, "target:0.3")]
    again = fit_power_law(
        fitted["B"],
        fitted["target:0.3"],
        fitted["target:0.3:censored"],
        lower=fitted["target:0.3:lower"],
        n_boot=200,
        weights=W,
        n_clusters=clusters,
    )
    np.testing.assert_array_equal(again.boot_slopes, fit.boot_slopes)
    if not fit.degenerate:  # the paired difference is then the fit's replicates minus the constant
        q = np.quantile(fit.boot_slopes - closed_form, [0.025, 0.975], method="inverted_cdf")
        assert (row["diff_b_crit_low"], row["diff_b_crit_high"]) == pytest.approx(tuple(q))
    assert row["agrees_b_crit"] == (row["diff_b_crit_low"] <= 0 <= row["diff_b_crit_high"])


def test_the_paired_difference_is_narrower_when_fit_and_prediction_share_seed_variation():
    """Seeds with a small B_crit are curvature-limited (steep in B), seeds with a large one noise-limited:
    a resample that draws more of the former raises the fitted and the predicted α together."""
    rng = np.random.default_rng(5)
    sizes, S, K = np.array([32, 64, 128, 256, 512], float), 8, 8.0
    b_crit_seed = 16.0 * np.exp(1.0 * rng.standard_normal(S))
    runs = pd.DataFrame(
        [{"B": b, "seed": s} for s in range(S) for b in sizes]
    )  # every seed at every size: seeds are blocks
    B = runs["B"].to_numpy(float)
    bc = b_crit_seed[runs["seed"].to_numpy()]
    R = 1000.0 * np.sqrt(B / K + bc) * np.exp(0.01 * rng.standard_normal(B.size))
    num, den = bc * 1e-3, np.full(B.size, 1e-3)  # each run's mean tr(HΣ) and GᵀHG
    W, used, clusters, _ = resample_weights(runs, 1000, 0, "seeds", "c")
    assert used == "seeds" and clusters == S
    fit = fit_power_law(B, R, np.zeros(B.size, bool), n_boot=1000, weights=W, n_clusters=S)
    paired = compare_to_fit(fit, B, K, num, den, W)
    # unpaired: the prediction's replicates from an independent resample of the seeds
    W_other, *_ = resample_weights(runs, 1000, 1, "seeds", "c")
    unpaired = compare_to_fit(fit, B, K, num, den, W_other)
    assert (
        paired["predicted"]
        == unpaired["predicted"]
        == pytest.approx(np.polyfit(np.log(B), 0.5 * np.log(B / K + bc.mean()), 1)[0], rel=1e-12)
    )
    width = paired["diff_high"] - paired["diff_low"]
    width_unpaired = unpaired["diff_high"] - unpaired["diff_low"]
    spread_fit = fit.ci_high - fit.ci_low
    spread_pred = paired["predicted_high"] - paired["predicted_low"]
    assert spread_fit > 0.1 and spread_pred > 0.1  # both vary a lot with the seeds drawn ...
    # ... together: pairing cancels most of it (0.057 vs 0.208 here; under half for rng seeds 0-5)
    assert width < 0.5 * width_unpaired
    # the times follow the interpolation seed by seed; the mixture's slope is close to that of the pooled
    # B_crit here (with other draws the narrow paired interval can resolve the small gap between them)
    assert paired["agrees"] is True


def test_without_curvature_rows_the_prediction_is_not_measured():
    B = np.repeat([32.0, 64.0, 128.0], 3)
    fit = fit_power_law(B, 100 * B**0.3, np.zeros(B.size, bool), n_boot=50, rng=0)
    nan = np.full(B.size, np.nan)
    W = np.ones((50, B.size))
    out = compare_to_fit(fit, B, 8.0, nan, nan, W)
    assert math.isnan(out["scale"]) and math.isnan(out["predicted"]) and math.isnan(out["diff"])
    assert out["agrees"] is None and out["runs"] == 0
    # GᵀHG not positive on average: no B_crit either, and no crash
    out = compare_to_fit(fit, B, 8.0, np.ones(B.size), -np.ones(B.size), W)
    assert math.isnan(out["predicted"]) and out["runs"] == B.size
    row = {c: math.nan for c in THEORY_COLUMNS}
    row.update(condition="c", clock="target:0.5", eta_ref=1e-6, fitted=0.3, fitted_low=0.1, fitted_high=0.5)
    row.update(measured="none", agrees_b_crit=None, agrees_b_noise=None)
    lines = "\n".join(theory_lines(pd.DataFrame([row], columns=THEORY_COLUMNS)))
    assert "| c | target:0.5 | not measured | not measured | not measured | not measured |" in lines
    assert (
        "- η_ref = 1e-06: the α predicted from B_crit is not measured at target 0.5; the α predicted "
        "from B_noise is not measured at target 0.5." in lines
    )
    # a prediction without a fitted exponent (every run censored): said so, not "agree"
    row.update(fitted=math.nan, predicted_b_noise=0.1, measured="b_noise")
    lines = "\n".join(theory_lines(pd.DataFrame([row], columns=THEORY_COLUMNS)))
    assert "the α predicted from B_noise has no fitted α to compare with" in lines


def test_rlvr_analyze_writes_theory_csv_the_report_section_and_the_figure(tmp_path: Path):
    common = {"sizes": (32, 64, 128, 256), "seeds": 5, "gamma": None, "budget": 30000}
    specs = [
        SyntheticSpec(seed=1, overrides=(("lr.ref_lr", 1e-6),), **common),  # curvature and noise
        SyntheticSpec(seed=2, overrides=(("lr.ref_lr", 1e-5),), **common),  # noise only
        SyntheticSpec(seed=3, b_noise=None, overrides=(("lr.ref_lr", 1e-4),), **common),  # neither
    ]
    root = tmp_path / "sweep"
    write_sweep(root, specs)
    short = None
    for path in sorted(p for p in root.iterdir() if p.is_dir() and "ref_lr1e-06" in p.name):
        rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        if short is None:
            short = path.name  # one run too short to reach the curvature cadence: no curv/ rows
        else:
            _add_curvature(rows)
        (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    argv = [str(root), "--out", str(out), "--bootstrap", "100", "--jobs", "1", "--formats", "png"]
    assert main(argv + ["--no-sigmoid", "--no-joint", "--quiet"]) == 0
    table = pd.read_csv(out / "theory.csv")
    assert list(table.columns) == THEORY_COLUMNS
    table = table.set_index(["condition", "clock"])
    documented = (Path(__file__).parents[2] / "docs" / "theory.md").read_text()
    assert all(f"`{c}`" in documented for c in THEORY_COLUMNS)  # every column documented
    a = table.loc[("lr.ref_lr=1e-06", "target:0.3")]
    K, B = 8.0, np.array(common["sizes"], float)
    assert a["measured"] == "b_crit+b_noise" and a["b_crit_runs"] == 19 and a["b_noise_runs"] == 20
    assert a["predicted_b_crit"] == pytest.approx(np.polyfit(np.log(B), 0.5 * np.log(B / K + B_CRIT), 1)[0])
    assert a["agrees_b_crit"] in (True, False) and np.isfinite(a["diff_b_crit_low"])
    b = table.loc[("lr.ref_lr=1e-05", "target:0.3")]
    assert b["measured"] == "b_noise" and math.isnan(b["predicted_b_crit"]) and b["b_crit_runs"] == 0
    assert np.isfinite(b["predicted_b_noise"]) and np.isfinite(b["diff_b_noise"])
    c = table.loc[("lr.ref_lr=0.0001", "target:0.5")]
    assert (
        c["measured"] == "none" and math.isnan(c["predicted_b_crit"]) and math.isnan(c["predicted_b_noise"])
    )
    noise = pd.read_csv(out / "noise_scale.csv").set_index(["condition", "level"])
    assert a["b_noise"] == pytest.approx(noise.loc[("lr.ref_lr=1e-06", "condition"), "b_noise"], rel=1e-12)
    report = (out / "report.md").read_text()
    section = report.split("## Predicted vs fitted α", 1)[1].split("\n## ", 1)[0]
    assert len([ln for ln in section.splitlines() if ln.startswith("| lr.ref_lr=")]) == 6
    assert "- η_ref = 0.0001: the α predicted from B_crit is not measured at targets 0.3, 0.5;" in section
    verdict = "agrees with the fit" if a["agrees_b_crit"] else "**disagrees** with the fit"
    assert f"- η_ref = 1e-06: the α predicted from B_crit {verdict} at target" in section
    assert (out / "alpha_predicted_vs_fitted.png").exists()
    assert "![alpha_predicted_vs_fitted.png](alpha_predicted_vs_fitted.png)" in report
    assert "Predicted vs fitted α" in (out / "report.html").read_text()
