"""B_crit read from the clocks (analysis/fits/bcrit.py): McCandlish's R_min (1 + B / B_crit) with the power law's
censoring and resamples, its unbounded intervals, the model comparison, and rlvr-analyze's outputs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

from analysis.cli import main
from analysis.fits.bcrit import BCRIT_COLUMNS, aicc, at_floor, fit_mccandlish, local_alpha
from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import resample_weights
from analysis.reporting.sections import bcrit_lines
from analysis.synthetic import SyntheticSpec, simulate, write_sweep

SIZES = (32, 64, 128, 256, 512)


def _measured(spec: SyntheticSpec, target: float = 0.3):
    """The runs' measured clocks (interval-censored on the evaluation grid, right-censored at the
    budget), as the analysis reads them."""
    runs = simulate(spec)
    label = f"target:{target:g}"
    B = np.array([r.truth["B"] for r in runs], float)
    value = np.array([r.truth[label][0] for r in runs], float)
    censored = np.array([r.truth[label][1] for r in runs], bool)
    lower = np.array([r.truth[f"{label}:lower"] for r in runs], float)
    seeds = np.array([r.truth["seed"] for r in runs])
    return B, value, censored, lower, seeds


def test_exact_times_on_the_curve_give_b_crit_r_min_and_the_local_exponent():
    rng = np.random.default_rng(0)
    B = np.repeat(np.array(SIZES, float), 3)
    R = 1500.0 * (1 + B / 100.0) * np.exp(0.01 * rng.standard_normal(B.size))
    fit = fit_mccandlish(B, R, np.zeros(B.size, bool))
    # exact times: the maximum-likelihood curve is the least-squares one in log R
    ls = least_squares(lambda p: np.log(R) - p[0] - np.log1p(B / np.exp(p[1])), [7.0, 4.0], xtol=1e-12)
    assert fit.r_min == pytest.approx(math.exp(ls.x[0]), rel=1e-4)
    assert fit.b_crit == pytest.approx(math.exp(ls.x[1]), rel=1e-4)
    assert fit.b_crit == pytest.approx(100.0, rel=0.05) and fit.r_min == pytest.approx(1500.0, rel=0.03)
    assert 0.9 * fit.b_crit < fit.profile_low < fit.b_crit < fit.profile_high < 1.1 * fit.b_crit
    np.testing.assert_allclose(local_alpha([32, 100, 512], 100.0), [32 / 132, 0.5, 512 / 612])
    assert list(local_alpha([32, 64], math.inf)) == [0.0, 0.0]
    # the power law on the same rows: the curve is preferred by far
    power = fit_power_law(B, R, np.zeros(B.size, bool), n_boot=0, profile=False)
    assert aicc(fit.loglik, B.size) - aicc(power.loglik, B.size) < -10


def test_a_flat_curve_has_an_interval_unbounded_above_and_a_linear_one_reaches_zero():
    rng = np.random.default_rng(1)
    B = np.repeat(np.array(SIZES, float), 4)
    flat = 2000.0 * np.exp(0.2 * rng.standard_normal(B.size))  # no cost of larger B over these sizes
    W = np.stack([np.bincount(rng.integers(0, B.size, B.size), minlength=B.size) for _ in range(50)]).astype(
        float
    )
    fit = fit_mccandlish(B, flat, np.zeros(B.size, bool), weights=W)
    assert fit.ci_high == math.inf and fit.n_boot == 50
    linear = 20.0 * B * np.exp(0.2 * rng.standard_normal(B.size))  # every doubling doubles the responses
    fit = fit_mccandlish(B, linear, np.zeros(B.size, bool), weights=W)
    assert fit.ci_low == 0.0 and fit.b_crit < 32
    row = {c: "" for c in BCRIT_COLUMNS} | {
        "condition": "c",
        "clock": "target:0.3",
        "b_crit": fit.b_crit,
        "ci_low": 0.0,
        "ci_high": math.inf,
        "alpha_local": "",
        "alpha_local_min": math.nan,
        "alpha_local_max": math.nan,
        "alpha_power": 1.0,
        "delta_aicc": 0.5,
        "preferred": "either",
        "r_min": 0.0,
    }
    text = "\n".join(bcrit_lines(pd.DataFrame([row])))
    assert "[0, ∞]" in text and "Unbounded intervals: 1 of 1" in text


def test_censored_rows_follow_the_power_laws_likelihood():
    """With right-censored and interval-censored rows the fit uses log_bounds as the power law does: a run
    censored far above the curve costs nothing, and the power law's loglik is comparable (same rows)."""
    B = np.repeat(np.array(SIZES, float), 2)
    R = 1000.0 * (1 + B / 200.0) * np.exp(0.1 * np.tile([-1.0, 1.0], len(SIZES)))
    lower = R * 0.8
    censored = np.zeros(B.size, bool)
    censored[-1] = True  # at B = 512: censored at its value (a lower bound)
    fit = fit_mccandlish(B, R, censored, lower=lower)
    assert 100 < fit.b_crit < 400
    R2 = R.copy()
    R2[-1] *= 3  # a later censoring time is a weaker constraint... still consistent with the curve
    again = fit_mccandlish(B, R2, censored, lower=lower)
    assert math.isfinite(again.loglik) and again.loglik <= fit.loglik + 1e-9 or again.b_crit > 0


def test_floor_crossings_are_left_censored_and_both_forms_compared_on_the_same_bounds():
    """A crossing with the first rollout (bracket [B, r], or exact R = B) says only R <= r: it enters
    left-censored, and the power law the curve is compared with is fitted to the same rows and bounds."""
    B = np.repeat(np.array(SIZES, float), 3)
    R = np.array([256, 320, 384, 256, 320, 384, 256, 384, 384, 256, 512, 512, 512, 512, 512], float)
    lower = np.array([224, 288, 352, 192, 256, 320, 128, 256, 256, 256, 512, 512, 512, 512, 512], float)
    lower[:3] = [32, 288, 352]  # the first run at B = 32 crossed at the first evaluation: [32, 256]
    censored = np.zeros(B.size, bool)
    censored[-1] = True  # right-censored at 512: never at the floor
    floor = at_floor(B, R, censored, lower)
    # [32, 256], exact 128 and 256 (R = B), exact 512 at B = 512 twice; [512, 512] at B = 256 is two rollouts
    np.testing.assert_array_equal(np.flatnonzero(floor), [0, 6, 9, 12, 13])
    assert at_floor([64.0], [64.0], [False])[0] and not at_floor([64.0], [128.0], [False])[0]
    fit = fit_mccandlish(B, R, censored, lower=lower)
    assert fit.n_floor == 5
    as_given = fit_mccandlish(B, R, censored, lower=lower, floor=False)
    assert as_given.n_floor == 0 and as_given.loglik != pytest.approx(fit.loglik)
    # the comparison's power law: the same rows and bounds (floor rows left-censored: lower 0)
    censored_lower = np.where(floor, 0.0, lower)
    power = fit_power_law(B, R, censored, lower=censored_lower, n_boot=0, profile=False)
    assert fit.loglik_power == pytest.approx(power.loglik, rel=1e-6)
    assert fit.identified in ("yes", "open above", "open below", "no")


def _flat_condition(seed: int, n_boot: int = 100):
    """One flat-in-B condition (crossings ~300 responses, sigma 0.25, 5 seeds, B = 32..512, the trainer's
    geometric evaluation schedule) through the analysis: its bcrit.csv and exponents.csv rows."""
    from analysis.data.clock_tables import build_tables
    from analysis.fits.bcrit import bcrit_table
    from analysis.fits.exponents import fit_conditions
    from analysis.synthetic import records

    spec = SyntheticSpec(
        alpha=0.0,
        prefactor=300.0,
        sizes=SIZES,
        seeds=5,
        gamma=None,
        b_noise=None,
        targets=(0.3,),
        budget=40000,
        eval_every=64,
        eval_growth=2.0**0.25,
        seed=seed,
    )
    tables = build_tables(records(spec))
    exponents, fits = fit_conditions(tables, n_boot=n_boot, seed=seed, joint_model=False)
    return bcrit_table(tables, exponents, fits, n_boot, seed).iloc[0], exponents.iloc[0]


@pytest.mark.parametrize("seed", [201, 202, 203])
def test_crossings_flat_in_b_at_the_floor_leave_b_crit_open_above(seed):
    """Held-out draws (seeds disjoint from those quoted for benchmarks/calibration/bcrit_floor.py: 0-7, 100-139): the sizes where every run
    crosses with its first rollouts leave the fit with the power law's, so no critical batch is read from
    the R >= B floor: the interval is open above and the row says B_crit is not identified there."""
    row, power = _flat_condition(seed)
    assert row["ci_high"] == math.inf and row["identified"] in ("open above", "no")
    assert row["n_runs"] == power["n_runs"] and row["sizes_early"] == power["sizes_early"] != ""
    assert abs(row["delta_aicc"]) < 2  # the data cannot tell the two forms apart
    text = "\n".join(bcrit_lines(pd.DataFrame([row])))
    assert "not identified: ≥" in text


# Held-out synthetic sweeps (fixed seeds, disjoint from benchmarks/calibration/bcrit_coverage.py's 1000+): 4 seeds x 5
# sizes, evaluations every 256 responses, a 50-resample bootstrap
HELD_OUT = range(11, 19)
COMMON = dict(sizes=SIZES, seeds=4, gamma=None, b_noise=None, targets=(0.3,), eval_every=256, budget=120000)


def test_held_out_mccandlish_sweeps_cover_the_true_b_crit():
    b_crit, covered = 128.0, 0
    for seed in HELD_OUT:
        B, value, censored, lower, seeds = _measured(
            SyntheticSpec(b_crit=b_crit, prefactor=2000.0, seed=seed, **COMMON)
        )
        W, _used, clusters, _ = resample_weights(
            pd.DataFrame({"B": B, "seed": seeds}), 50, seed, "runs", "held"
        )
        power = fit_power_law(B, value, censored, lower=lower, weights=W, n_clusters=clusters, profile=False)
        fit = fit_mccandlish(B, value, censored, lower=lower, weights=W, inflation=power.inflation)
        covered += fit.ci_low <= b_crit <= fit.ci_high
        assert fit.ci_low < fit.b_crit < fit.ci_high
    assert covered >= 7


def test_on_power_law_sweeps_mccandlish_is_not_preferred():
    preferred = 0
    for seed in HELD_OUT:
        B, value, censored, lower, _ = _measured(
            SyntheticSpec(alpha=0.3, prefactor=1000.0, seed=seed, **COMMON)
        )
        power = fit_power_law(B, value, censored, lower=lower, n_boot=0, profile=False)
        fit = fit_mccandlish(B, value, censored, lower=lower)
        preferred += aicc(fit.loglik, fit.n_runs) - aicc(power.loglik, power.n_runs) < -2
    assert preferred <= 2


def test_rlvr_analyze_writes_bcrit_csv_the_section_and_the_figure(tmp_path: Path):
    common = dict(COMMON, sizes=(32, 64, 128, 256), seeds=5, b_noise=200.0, targets=(0.3, 0.5))
    specs = [
        SyntheticSpec(b_crit=128.0, prefactor=2000.0, seed=5, overrides=(("lr.ref_lr", 1e-5),), **common),
        SyntheticSpec(alpha=0.0, prefactor=3000.0, seed=6, overrides=(("lr.ref_lr", 1e-4),), **common),
    ]
    root = tmp_path / "sweep"
    write_sweep(root, specs)
    out = tmp_path / "out"
    argv = [
        str(root),
        "--out",
        str(out),
        "--bootstrap",
        "60",
        "--jobs",
        "1",
        "--formats",
        "png",
        "--dpi",
        "60",
    ]
    assert main(argv + ["--no-sigmoid", "--no-joint", "--quiet"]) == 0
    table = pd.read_csv(out / "bcrit.csv")
    assert list(table.columns) == ["condition", "lr.ref_lr", *BCRIT_COLUMNS[1:]]
    documented = (Path(__file__).parents[2] / "docs" / "analysis.md").read_text()
    assert all(f"`{c}`" in documented for c in BCRIT_COLUMNS)  # every column documented
    table = table.set_index(["condition", "clock"])
    a = table.loc[("lr.ref_lr=1e-05", "target:0.3")]
    assert a["ci_low"] <= 128.0 <= a["ci_high"] and a["resampling"] == "seeds" and a["n_boot"] == 60
    assert a["b_crit_per_step"] == pytest.approx(a["b_crit"] / 8)
    assert a["target"] == 0.3 and a["n_runs"] == 20 and a["alpha_local"].startswith("32: ")
    exponents = pd.read_csv(out / "exponents.csv").set_index(["condition", "clock"])
    assert a["alpha_power"] == pytest.approx(exponents.loc[("lr.ref_lr=1e-05", "target:0.3"), "exponent"])
    assert a["delta_aicc"] == pytest.approx(a["aicc"] - a["aicc_power"])
    flat = table.loc[("lr.ref_lr=0.0001", "target:0.3")]
    assert flat["ci_high"] == math.inf  # alpha = 0: no evidence that larger B costs anything
    report = (out / "report.md").read_text()
    section = report.split("## Critical batch from the clocks (McCandlish)", 1)[1].split("\n## ", 1)[0]
    assert len([ln for ln in section.splitlines() if ln.startswith("| lr.ref_lr=")]) == 4
    assert "∞]" in section and "![b_crit_from_clocks.png](b_crit_from_clocks.png)" in section
    assert (out / "b_crit_from_clocks.png").exists()


# ---- the clocks' B_crit beside the gradients' B_noise (bcrit_theory.csv) -----------------------------------


def test_fieller_interval_of_a_ratio_of_means():
    from analysis.fits.bcrit_theory import fieller

    rng = np.random.default_rng(0)
    den = 1.0 + 0.1 * rng.standard_normal(40)
    num = 20.0 * den + 0.5 * rng.standard_normal(40)
    ratio, low, high = fieller(num, den)
    assert ratio == pytest.approx(num.mean() / den.mean()) and low < ratio < high and high - low < 1.0
    # a denominator that is not significantly positive: unbounded above, never a finite stand-in
    ratio, low, high = fieller(num, 0.05 + rng.standard_normal(40))
    assert high == math.inf
    covered = 0
    for i in range(200):  # coverage of the truth 20 over repeated draws
        r = np.random.default_rng(100 + i)
        d = 1.0 + 0.5 * r.standard_normal(10)
        _, lo, hi = fieller(20.0 * d + 3.0 * r.standard_normal(10), d)
        covered += lo <= 20.0 <= hi
    assert covered >= 180


def test_rlvr_analyze_sets_the_clocks_b_crit_beside_adams_and_sgds_b_noise(tmp_path: Path):
    from analysis.fits.bcrit_theory import THEORY_COLUMNS, implied_alpha

    common = dict(COMMON, sizes=(32, 64, 128, 256), seeds=5, targets=(0.3,), b_noise=200.0)
    # the clocks' B_crit is 128 per rollout = 16 per step (K = 8); Adam's B_noise 16 (agrees), SGD's 200
    spec = SyntheticSpec(b_crit=128.0, prefactor=2000.0, seed=5, adam_b_noise=16.0, **common)
    root = tmp_path / "sweep"
    write_sweep(root, spec)
    out = tmp_path / "out"
    argv = [str(root), "--out", str(out), "--bootstrap", "100", "--jobs", "1", "--no-plots"]
    assert main(argv + ["--no-sigmoid", "--no-joint", "--quiet"]) == 0
    table = pd.read_csv(out / "bcrit_theory.csv")
    assert list(table.columns) == THEORY_COLUMNS
    documented = (Path(__file__).parents[2] / "docs" / "theory.md").read_text()
    named = {c.replace("_adam", "_S").replace("_sgd", "_S") for c in THEORY_COLUMNS}  # per source S
    assert all(f"`{c}`" in documented for c in named)
    row = table.iloc[0]
    assert row["keys_adam"] == "noise/adam_*" and row["keys_sgd"] == "noise/*" and row["runs_adam"] == 20
    assert row["b_noise_low_adam"] < 16.0 < row["b_noise_high_adam"]
    # the one-point |G|^2 of a small minibatch is noisy: Fieller's interval covers 200 and is open above
    assert row["b_noise_low_sgd"] < 200.0 and row["b_noise_high_sgd"] == math.inf
    assert row["b_crit_per_step"] == pytest.approx(row["b_crit"] / 8)
    assert math.isnan(row["edge"]) and row["edge_rows"] == 0  # no curv/adam_edge rows in these runs
    assert bool(row["agrees_adam"]) and not bool(row["agrees_sgd"])
    assert row["ratio_low_sgd"] <= row["ratio_sgd"] < row["ratio_high_sgd"] < 1
    assert row["alpha_adam"] == pytest.approx(implied_alpha((32, 64, 128, 256), 8 * row["b_noise_adam"])[0])
    report = (out / "report.md").read_text()
    section = report.split("## The clocks' B_crit against the gradients' B_noise (Adam and SGD)", 1)[1]
    assert " agree" in section and "**disagree**" in section


def test_recommend_picks_the_cheapest_measured_pair_with_its_interval():
    from analysis.data.clock_tables import build_tables
    from analysis.fits.exponents import fit_conditions
    from analysis.fits.recommend import COLUMNS, recommend_table
    from analysis.synthetic import records

    common = dict(COMMON, sizes=(32, 64, 128, 256), seeds=5, targets=(0.3,))
    specs = [  # alpha 0.4 from a higher start vs flat: at B = 32 the first is cheaper in responses
        SyntheticSpec(alpha=0.4, prefactor=400.0, seed=7, overrides=(("lr.ref_lr", 1e-5),), **common),
        SyntheticSpec(alpha=0.0, prefactor=6000.0, seed=8, overrides=(("lr.ref_lr", 1e-4),), **common),
    ]
    tables = build_tables(records(*specs))
    _, fits = fit_conditions(tables, n_boot=100, seed=0, jobs=1)
    table = recommend_table(tables, fits)
    assert list(table.columns) == COLUMNS
    row = table[table["budget"] == "responses"].iloc[0]
    assert row["condition"] == "lr.ref_lr=1e-05" and row["B"] == 32 and row["eta_ref"] == 1e-5
    fit = fits[("lr.ref_lr=1e-05", "target:0.3")]
    assert row["value"] == pytest.approx(math.exp(fit.intercept + fit.exponent * math.log(32)))
    assert row["value_low"] < row["value"] < row["value_high"] and 0.5 < row["p_best"] <= 1
    assert row["n_candidates"] == 8 and row["runner_up"] != ""
    assert set(table["budget"]) >= {"responses", "wall_seconds"}
