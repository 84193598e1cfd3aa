"""The two clocks' statistics where a referee would look: degenerate intervals, the failure clock's
interval, competing-risk bookkeeping, isotonic crossings before a collapse, incomplete runs, figures
on mixed condition values. Each test fails on the code before these fixes (docs/analysis.md, "Fixed")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.cli import main as analyze
from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.data.load import RunRecord
from analysis.fits.competing import competing_events
from analysis.fits.fit import fit_power_law, profile_interval
from analysis.synthetic import SyntheticSpec, records, write_sweep


def _record(accuracies, every=512, b=64, state="completed", failure=None, name="r", train=()):
    """One run: an evaluation every ``every`` responses (first at 0); ``train``: extra training rows
    ``(responses, reward)`` (a failed run's last row is its detection)."""
    rows = [
        {
            "rollout": i * every // b,
            "responses": i * every,
            "tokens": 0,
            "optimizer_steps": 0,
            "wall_seconds": 0.0,
            "eval/accuracy": a,
        }
        for i, a in enumerate(accuracies)
    ]
    for responses, reward in train:
        rows.append(
            {
                "rollout": responses // b,
                "responses": responses,
                "tokens": 0,
                "optimizer_steps": 0,
                "wall_seconds": 0.0,
                "train/reward_mean": reward,
            }
        )
    rows.sort(key=lambda r: (r["responses"], "eval/accuracy" in r))
    config = {
        "seed": 0,
        "rollout": {"prompts_per_rollout": b // 8, "group_size": 8},
        "eval": {"targets": [0.3, 0.5]},
        "train": {"max_responses": 100000},
        "failure": {"reward_collapse": {"window_responses": 256}},
    }
    return RunRecord(
        run=name,
        name=name,
        source="dir",
        path=name,
        group="g",
        config=config,
        rows=rows,
        summary={"derived": {"responses_per_rollout": b}},
        status={"state": state, "failure": failure},
        notes=[],
    )


# ---- 1. zero-width intervals -------------------------------------------------------------------


def _quantised(sigma=0.05, seed=1):
    """Seeds of each size cross inside one evaluation interval (every 4,096 responses), alpha 0.44."""
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512),
        seeds=4,
        alpha=0.44,
        prefactor=500,
        sigma=sigma,
        gamma=None,
        targets=(0.3,),
        budget=200000,
        eval_every=4096,
        seed=seed,
    )
    # the generator's crossing time is continuous: read with the continuous brackets it was drawn with
    return build_tables(records(spec), ClockOptions(discrete=False)).runs


def test_quantised_crossings_do_not_give_a_zero_width_interval():
    runs = _quantised()
    fit = fit_power_law(
        runs["B"],
        runs["target:0.3"],
        runs["target:0.3:censored"],
        lower=runs["target:0.3:lower"],
        n_boot=400,
        rng=0,
    )
    # before: the bootstrap [0.3169, 0.3304] around 0.3175 (truth 0.44), sigma 0.03, Wald +-7251, no warning
    assert fit.degenerate and any("bootstrap degenerate" in w for w in fit.warnings)
    assert fit.ci_low <= 0.44 <= fit.ci_high
    assert fit.ci_high - fit.ci_low > 0.3
    assert np.isnan(fit.wald_low)  # a near-singular information gives no Wald interval, not +-7251
    assert fit.ci_method == "bootstrap+profile"


def test_no_within_size_spread_is_detected():
    # every seed of a size in one interval, the intervals NOT on one line: sigma stays identified, the
    # resamples cannot vary; the profile interval replaces [a, a]
    x = np.log(np.repeat([32.0, 64, 128, 256, 512], 4))
    lo = np.repeat(np.log([2048.0, 2048, 4096, 4096, 8192]), 4)
    hi = np.repeat(np.log([4096.0, 4096, 8192, 8192, 16384]), 4)
    fit = fit_power_law(np.exp(x), np.exp(hi), np.zeros(20, bool), lower=np.exp(lo), n_boot=300, rng=0)
    assert "no within-size spread" in fit.degenerate
    assert fit.ci_high - fit.ci_low > 0.1
    plow, phigh = profile_interval(x, lo, hi, fit.exponent, fit.loglik)
    assert fit.ci_low <= plow and fit.ci_high >= phigh


def test_profile_interval_matches_the_t_interval_of_an_uncensored_line():
    # exact data: the profile-likelihood interval with the F(1, N-2) reference is the classical t interval
    rng = np.random.default_rng(3)
    x = np.log(np.repeat([32.0, 64, 128, 256], 5))
    y = 1.0 + 0.3 * x + 0.2 * rng.standard_normal(x.size)
    fit = fit_power_law(np.exp(x), np.exp(y), np.zeros(x.size, bool), n_boot=0)
    from scipy import stats

    res = stats.linregress(x, y)
    t = stats.t.ppf(0.975, x.size - 2)
    # the ML profile uses sigma_ML (divisor N), the t interval s (divisor N - 2): ratio sqrt(N / (N - 2))
    # of the statistic's scale; with the exact LR <-> F relation they agree to the grid's resolution
    lr_half = (fit.profile_high - fit.profile_low) / 2 if np.isfinite(fit.profile_low) else None
    plow, phigh = profile_interval(x, y, y, fit.exponent, fit.loglik)
    n = x.size
    exact_half = res.stderr * np.sqrt((n - 2) * (np.exp(t * t / n) - 1))  # LR interval in closed form
    assert (phigh - plow) / 2 == pytest.approx(exact_half, rel=0.02)
    assert lr_half is None or lr_half == pytest.approx(exact_half, rel=0.02)


def test_cli_warns_about_a_degenerate_interval(tmp_path: Path, capsys):
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512), seeds=4, alpha=0.44, prefactor=500, sigma=0.05, gamma=None,
        targets=(0.3,), budget=200000, eval_every=4096, seed=1,
    )  # fmt: skip
    write_sweep(tmp_path / "s", spec)
    out = tmp_path / "out"
    assert (
        analyze(
            [
                str(tmp_path / "s"),
                "--out",
                str(out),
                "--no-plots",
                "--no-sigmoid",
                "--quiet",
                "--continuous-brackets",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "bootstrap degenerate" in err or "σ collapsed" in err
    report = (out / "report.md").read_text()
    assert "Intervals the bootstrap alone could not give" in report
    row = pd.read_csv(out / "exponents.csv").query("clock == 'target:0.3'").iloc[0]
    assert row["ci_low"] <= 0.44 <= row["ci_high"] and row["ci_high"] - row["ci_low"] > 0.3


# ---- 5. isotonic crossings before a collapse -----------------------------------------------------


def test_isotonic_crossing_is_not_hidden_by_a_later_collapse():
    rec = _record([0.05, 0.2, 0.35, 0.5, 0.6, 0.2, 0.15])
    run = build_tables([rec], ClockOptions(crossing="isotonic")).runs.iloc[0]
    # before: the decline was pooled into the peak (smoothed max 0.36): 0.5 "not reached"
    assert not run["target:0.5:censored"] and run["target:0.5"] == 3 * 512
    assert run["target:0.5:lower"] == 2 * 512 + 64  # the first rollout (B = 64) after the evaluation below


def test_isotonic_smoothing_stops_at_the_failure_onset():
    # onset at 2,048 (rollout 32): the evaluations after it do not count towards a crossing
    failure = {"detector": "reward_collapse", "responses": 3072, "onset_responses": 2048, "rollout": 48}
    rec = _record([0.05, 0.2, 0.35, 0.45, 0.4, 0.55, 0.6], state="failed", failure=failure)
    rec.rows = [r for r in rec.rows if r["responses"] <= 3072]
    run = build_tables([rec], ClockOptions(crossing="isotonic")).runs.iloc[0]
    assert run["target:0.3"] == 1024 and not run["target:0.3:censored"]
    assert run["target:0.5:censored"] and run["target:0.5:censored_by"] == "failure"
    assert run["target:0.5"] == 2048


# ---- 6. failure times are interval-censored ------------------------------------------------------


def test_failure_onset_is_an_interval_from_the_detector_window():
    failure = {"detector": "reward_collapse", "responses": 3072, "onset_responses": 2048, "rollout": 48}
    rec = _record([0.05, 0.2, 0.3], state="failed", failure=failure, train=[(2048, 0.0), (3072, 0.0)])
    run = build_tables([rec]).runs.iloc[0]
    assert run["failure"] == 2048 and not run["failure:censored"]
    # onset - B - the detector's window: the condition began after 1,728, i.e. with rollout 28 (B = 64)
    assert run["failure:lower"] == 64 * 28
    loose = build_tables([rec], ClockOptions(discrete=False)).runs.iloc[0]
    assert loose["failure:lower"] == 2048 - 64 - 256
    # the trainer's own bound wins when it wrote one (then in whole rollouts: 1,900 -> rollout 30)
    rec.status["failure"]["onset_lower_responses"] = 1900
    assert build_tables([rec]).runs.iloc[0]["failure:lower"] == 64 * 30
    # a failure in the first rollout: exactly R_F = B (nothing fails before the first update), flagged
    first = {"detector": "reward_collapse", "responses": 64, "onset_responses": 64, "rollout": 1}
    early = _record([0.05], state="failed", failure=first, train=[(64, 0.0)])
    row = build_tables([early]).runs.iloc[0]
    assert row["failure:lower"] == row["failure"] == 64 and row["failure:resolution_limited"]
    assert build_tables([early], ClockOptions(discrete=False)).runs.iloc[0]["failure:lower"] == 0


def test_gamma_is_not_pulled_towards_one_by_first_rollout_failures():
    # true gamma 0 with failures around 200 responses: at B >= 256 every run fails in its first rollout
    # (onset = B). Fitted as exact times the onsets rise with B (over 60 draws: mean gamma +0.29, coverage
    # 0 %); as intervals of the continuous latent time they do not (mean +0.0005, coverage 97 %;
    # docs/analysis.md). In whole rollouts such a failure is exactly R_F = B: the first-update outcome
    # that analysis/fits/hazard.py reports apart from gamma.
    spec = SyntheticSpec(
        sizes=(32, 64, 128, 256, 512), seeds=4, alpha=0.3, gamma=0.0, failure_prefactor=200.0,
        failure_sigma=0.3, targets=(0.3,), budget=4096, seed=5,
    )  # fmt: skip
    discrete = build_tables(records(spec)).runs
    big = discrete[discrete["B"] >= 256]
    assert (big["failure"] == big["B"]).all() and (big["failure:lower"] == big["B"]).all()
    runs = build_tables(records(spec), ClockOptions(discrete=False)).runs
    fit = fit_power_law(
        runs["B"], runs["failure"], runs["failure:censored"], lower=runs["failure:lower"], n_boot=300, rng=0
    )
    exact = fit_power_law(runs["B"], runs["failure"], runs["failure:censored"], n_boot=300, rng=0)
    assert exact.ci_low > 0.1  # the old, exact-time fit excludes the truth
    assert fit.ci_low <= 0.0 <= fit.ci_high
    assert runs["failure:resolution_limited"][runs["B"] >= 256].all()


# ---- 7. incomplete runs --------------------------------------------------------------------------


def test_incomplete_runs_are_censored_in_fits_by_default_and_counted(tmp_path: Path):
    spec = SyntheticSpec(sizes=(32, 64, 128, 256), seeds=3, gamma=None, seed=2)
    write_sweep(tmp_path / "s", spec)
    import json

    run_dir = sorted(p for p in (tmp_path / "s").iterdir() if p.name.startswith("B256"))[0]
    status = json.loads((run_dir / "status.json").read_text())
    status["state"] = "preempted"
    (run_dir / "status.json").write_text(json.dumps(status))
    # preempted half-way (a run observed past its horizon would count as complete)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    (run_dir / "metrics.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    out = tmp_path / "out"
    assert analyze([str(tmp_path / "s"), "--out", str(out), "--no-plots", "--no-sigmoid", "--quiet"]) == 0
    exp = pd.read_csv(out / "exponents.csv")
    assert (exp["n_runs"] == 12).all() and (exp["n_incomplete"] == 1).all()
    assert "of which in fits as right-censored: 1" in (out / "report.md").read_text()
    dropped = tmp_path / "dropped"
    assert analyze([str(tmp_path / "s"), "--out", str(dropped), "--no-plots", "--no-sigmoid", "--quiet",
                    "--drop-incomplete"]) == 0  # fmt: skip
    assert (pd.read_csv(dropped / "exponents.csv")["n_runs"] == 11).all()


# ---- 8. competing risks: one rule ----------------------------------------------------------------


def test_a_crossing_between_onset_and_detection_is_failed_first_in_both_views():
    # onset at 1,024; the evaluation at 1,536 crosses 0.5; the detector fires at 2,048
    failure = {"detector": "reward_collapse", "responses": 2048, "onset_responses": 1024, "rollout": 32}
    rec = _record([0.05, 0.2, 0.35, 0.55], state="failed", failure=failure, train=[(2048, 0.0)])
    runs = build_tables([rec]).runs
    row = runs.iloc[0]
    # the fit: censored at the onset (before: reached at 1,536)
    assert row["target:0.5:censored"] and row["target:0.5:censored_by"] == "failure"
    assert row["target:0.5"] == 1024 and row["target:0.5:last_below"] == 1024
    # the cumulative incidence: failed first at the onset
    times, causes = competing_events(runs, 0.5)
    assert causes[0] == 2 and times[0] == 1024
    # with the detection as the failure time the same crossing is before the failure in both
    det = build_tables([rec], ClockOptions(failure_time="detection")).runs
    assert not det.iloc[0]["target:0.5:censored"] and competing_events(det, 0.5)[1][0] == 1


# ---- 0. figures on mixed condition values --------------------------------------------------------


@pytest.mark.parametrize("with_text", [False, True])
def test_analysis_survives_mixed_numeric_null_and_text_condition_values(tmp_path: Path, capsys, with_text):
    # clipped at 1e-6 and 1e-5, unclipped (null) at 1e-5 and 3e-5: the paper's own comparison (before:
    # a TypeError from matplotlib in the exponent-against-loss.clip figure, no report.md)
    specs = []
    for i, (clip, lr, name) in enumerate(
        [(0.2, 1e-6, "clipped"), (0.2, 1e-5, "clipped"), (None, 1e-5, "unclipped"), (None, 3e-5, "unclipped")]
    ):
        overrides = (("loss.clip", clip), ("lr.ref_lr", lr)) + ((("loss.name", name),) if with_text else ())
        specs.append(SyntheticSpec(sizes=(32, 64, 128), seeds=2, gamma=None, seed=i, overrides=overrides))
    write_sweep(tmp_path / "s", specs)
    out = tmp_path / "out"
    code = analyze([str(tmp_path / "s"), "--out", str(out), "--no-sigmoid", "--bootstrap", "50",
                    "--formats", "png", "--dpi", "60", "--jobs", "1"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and (out / "report.md").exists()
    assert "skipped" not in err, err  # every figure drawn
    names = {p.name for p in out.glob("*.png")}
    assert "alpha_gamma_vs_eta_ref.png" in names and "exponents_vs_loss.clip.png" in names
    assert any(n.startswith("rt_vs_B_all_") for n in names)
    assert not with_text or "exponents_vs_loss.name.png" in names


def test_a_figure_that_fails_is_skipped_and_the_report_still_written(tmp_path: Path, capsys, monkeypatch):
    import analysis.figures.plots as plots

    def broken(*args, **kwargs):
        raise TypeError("'value' must be an instance of str or bytes, not a float")

    monkeypatch.setattr(plots, "plot_condition", broken)
    write_sweep(tmp_path / "s", SyntheticSpec(sizes=(32, 64, 128), seeds=2, gamma=None))
    out = tmp_path / "out"
    code = analyze([str(tmp_path / "s"), "--out", str(out), "--no-sigmoid", "--bootstrap", "50",
                    "--formats", "png", "--dpi", "60", "--jobs", "1"])  # fmt: skip
    assert code == 0
    assert "figure 'condition" in capsys.readouterr().err
    report = (out / "report.md").read_text()
    assert "figure 'condition" in report and (out / "exponents.csv").exists()


# ---- 10. the theory sentence ---------------------------------------------------------------------


def test_the_curvature_limit_is_stated_with_its_assumption(tmp_path: Path):
    write_sweep(tmp_path / "s", SyntheticSpec(sizes=(32, 64, 128), seeds=2, gamma=None))
    out = tmp_path / "out"
    assert analyze([str(tmp_path / "s"), "--out", str(out), "--no-plots", "--no-sigmoid", "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "η ∝ √B" in report and "noise is negligible" in report
    import analysis.fits.exponents as rep

    assert "cannot grow" not in (rep.__doc__ or "")
