"""The failure clock per rollout (analysis/fits/hazard.py): counting in rollouts, the discrete hazard and its
likelihood, the cloglog slope on geometric draws with a known slope, first-update failures, the
left-truncated γ, and the outputs of rlvr-analyze (with and without failures)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.cli import main
from analysis.fits import hazard as hz
from analysis.fits.fit import fit_power_law
from analysis.synthetic import SyntheticSpec, write_sweep


def _run(B, failure, lower=math.nan, censored=False, detector="kl_blowup", lr=1e-4, condition="c"):
    return {
        "condition": condition,
        "B": float(B),
        "failure": float(failure),
        "failure:lower": lower,
        "failure:censored": censored,
        "failure:detector": None if censored else detector,
        "lr": lr,
        "in_fit": True,
        "clock_unit": "responses",
    }


def _tables(rows) -> SimpleNamespace:
    return SimpleNamespace(runs=pd.DataFrame(rows), varying_keys=[])


def _geometric_runs(rng, sizes, mu0, slope, seeds, budget, b0=128.0, window=2):
    """Runs with a constant per-rollout hazard: cloglog(h(B)) = log mu0 + slope log(B / b0), failures
    drawn as geometric rollouts, censored at the budget; the onset of every other failure is known only
    to the ``window`` rollouts before it (interval-censored, as the training detectors record it)."""
    rows = []
    for B in sizes:
        h = -math.expm1(-mu0 * (B / b0) ** slope)
        n = budget // B
        for s in range(seeds):
            k = int(rng.geometric(h))
            if k <= n:
                lower = max(0.0, (k - 1 - window) * B) if s % 2 else math.nan
                rows.append(_run(B, k * B, lower=lower))
            else:
                rows.append(_run(B, n * B, censored=True))
    return pd.DataFrame(rows)


def test_rollout_counting_and_first_update_failures_on_a_hand_made_table():
    rows = [
        _run(32, 32, lower=0.0, detector="kl_blowup", lr=1e-4),  # rollout 1: first update
        _run(32, 64, lower=32.0, detector="accuracy_collapse", lr=1e-4),  # rollout 2: first update
        _run(32, 96, lower=0.0, detector="accuracy_collapse", lr=1e-4),  # rollout 3, interval reaches 1
        _run(32, 320, censored=True, lr=1e-4),  # 10 rollouts without failing
        _run(128, 256, lower=math.nan, detector="reward_collapse", lr=2e-4),  # rollout 2, exact
        _run(128, 384, lower=256.0, detector="reward_collapse", lr=2e-4),  # rollout 3 exactly
        _run(128, 1000, censored=True, lr=2e-4),  # 7 whole rollouts (incomplete last one)
    ]
    times = hz.rollout_times(pd.DataFrame(rows))
    assert times["k_hi"].tolist() == [1, 2, 3, 10, 2, 3, 7]
    assert times["k_lo"].tolist() == [1, 2, 1, 10, 2, 3, 7]
    assert times["first_update"].tolist() == [True, True, False, False, True, False, False]
    assert times["first_update_possible"].tolist() == [True, True, True, False, True, False, False]

    table, fit, notes = hz.hazard_tables(_tables(rows))
    assert not notes
    t32, t128 = table.iloc[0], table.iloc[1]
    assert (t32.B, t32.runs, t32.rollouts_at_risk, t32.failures) == (32, 4, 1 + 2 + 3 + 10, 3)
    assert (t32.first_update_failures, t32.first_update_possible) == (2, 3)
    assert t32.first_update_frac == pytest.approx(0.5)
    # Clopper-Pearson for 2 of 4: P(X >= 2 | p_low) = 0.025 = 1 - (1-p)^4 - 4p(1-p)^3, and symmetric
    assert (t32.first_update_low, t32.first_update_high) == pytest.approx((0.0675860, 0.9324140), abs=1e-6)
    assert t32.detectors == "accuracy_collapse:2 kl_blowup:1"
    assert t32.eta == pytest.approx(1e-4)
    assert (t128.rollouts_at_risk, t128.failures, t128.first_update_failures) == (2 + 3 + 7, 2, 1)
    assert t128.detectors == "reward_collapse:2"
    # B = 128 has exact onsets only: the MLE is failures / rollouts at risk
    assert t128.hazard == pytest.approx(2 / 12, rel=1e-6)
    # after the first updates B = 128 keeps the runs past rollout 2: 1 failure in 1 rollout, 5 censored
    assert t128.runs_after_first_updates == 2
    assert t128.hazard_after_first_updates == pytest.approx(1 / (1 + 5), rel=1e-6)
    assert set(fit["sample"]) == {"all", "after_first_updates"}


def test_the_likelihood_is_the_person_period_binomial_with_a_sum_over_interval_censored_onsets():
    rng = np.random.default_rng(3)
    runs = _geometric_runs(rng, [32, 64, 128, 256], mu0=0.05, slope=0.7, seeds=6, budget=4096)
    times = hz.rollout_times(runs)
    x = np.log(runs["B"].to_numpy(float))
    for a, b in [(-6.0, 0.8), (-3.0, 0.1), (-8.0, 1.5)]:
        h = -np.expm1(-np.exp(a + b * x))
        expected = 0.0
        for i, t in enumerate(times.itertuples()):
            if not t.failed:  # person-period: n Bernoulli trials without a failure
                expected += t.k_hi * math.log1p(-h[i])
                continue
            # P(k_lo <= T <= k_hi) = sum over the range of (1-h)^(k-1) h
            ks = np.arange(t.k_lo, t.k_hi + 1)
            expected += math.log(np.sum((1 - h[i]) ** (ks - 1) * h[i]))
        assert hz.loglik(times, runs["B"], a, b) == pytest.approx(expected, rel=1e-9)


def test_a_size_with_exact_onsets_gives_the_binomial_hazard_and_a_likelihood_ratio_interval():
    rows = [_run(64, 64 * k) for k in (3, 7, 12)] + [_run(64, 64 * 20, censored=True)]
    h, lo, hi = hz.size_hazard(hz.rollout_times(pd.DataFrame(rows)))
    n, f = 3 + 7 + 12 + 20, 3
    assert h == pytest.approx(f / n, rel=1e-6)

    def ll(p):
        return f * math.log(p) + (n - f) * math.log1p(-p)

    top = ll(f / n)
    for bound in (lo, hi):  # the 95 % likelihood-ratio bounds: 2 (l_max - l) = chi2_1(0.95)
        assert 2 * (top - ll(bound)) == pytest.approx(3.841459, abs=1e-4)
    # no failure: h = 0, upper bound from -n mu = -chi2/2
    h0, lo0, hi0 = hz.size_hazard(hz.rollout_times(pd.DataFrame([_run(64, 640, censored=True)])))
    assert (h0, lo0) == (0.0, 0.0) and hi0 == pytest.approx(-math.expm1(-3.841459 / 2 / 10), rel=1e-5)
    # every run fails in its first rollout: h = 1, a finite lower bound
    h1, lo1, hi1 = hz.size_hazard(hz.rollout_times(pd.DataFrame([_run(512, 512, lower=0.0)] * 3)))
    assert (h1, hi1) == (1.0, 1.0) and 0.3 < lo1 < 1.0


@pytest.mark.parametrize("seed", [0, 1])
def test_geometric_draws_recover_the_cloglog_slope(seed):
    slope = 0.6
    rng = np.random.default_rng(seed)
    runs = _geometric_runs(rng, [32, 64, 128, 256, 512], mu0=0.03, slope=slope, seeds=12, budget=8192)
    fit = hz.cloglog_fit(hz.rollout_times(runs), runs["B"], n_boot=200, seed=seed)
    assert fit["slope_low"] < slope < fit["slope_high"]
    assert fit["boot_low"] < slope < fit["boot_high"]
    assert fit["slope_high"] - fit["slope_low"] < 1.0  # informative, not an unbounded interval
    assert fit["intercept"] + fit["slope"] * math.log(128) == pytest.approx(math.log(0.03), abs=0.5)


def test_interval_censored_onsets_are_not_taken_at_their_upper_end():
    """A failure in rollout T recorded, as a windowed detector does, at an onset row up to 6 rollouts
    later with the interval (onset − 7 rollouts, onset]: the likelihood summed over the range recovers
    the hazard; taking the onset as exact puts every failure late and biases the hazard down."""
    rng = np.random.default_rng(11)
    mu, B, n = 0.2, 64.0, 400
    rows = []
    for _ in range(300):
        onset_k = int(rng.geometric(-math.expm1(-mu))) + int(rng.integers(0, 7))
        if onset_k > n:
            rows.append(_run(B, n * B, censored=True))
        else:
            rows.append(_run(B, onset_k * B, lower=max(onset_k - 7, 0) * B))
    runs = pd.DataFrame(rows)
    h_true = -math.expm1(-mu)
    h, lo, hi = hz.size_hazard(hz.rollout_times(runs))
    assert lo < h_true < hi
    exact = runs.assign(**{"failure:lower": np.nan})
    h_exact, _, hi_exact = hz.size_hazard(hz.rollout_times(exact))
    assert hi_exact < h_true  # the onset as exact: biased down, its interval misses the truth


def test_truncated_gamma_recovers_gamma_where_many_runs_fail_at_the_first_updates():
    """Log-normal failure times R_F = d B^γ e^{σε} with many onsets within 2B at large B: the fit
    conditioned on surviving 2 rollouts recovers γ; the same survivors fitted without truncation would
    keep only the slow runs at large B."""
    rng = np.random.default_rng(0)
    gamma, d, sigma = 0.3, 120.0, 0.8
    rows = []
    for B in (32, 64, 128, 256, 512):
        for _ in range(40):
            rf = d * B**gamma * math.exp(sigma * rng.standard_normal())
            k = max(1, math.ceil(rf / B))
            rows.append(_run(B, k * B, lower=(k - 1) * B))  # the onset's rollout: ((k-1)B, kB]
    runs = pd.DataFrame(rows)
    early = hz.rollout_times(runs)["first_update"].groupby(runs["B"]).mean()
    assert early[512] > 0.5 and early[32] < 0.1
    res = hz.truncated_gamma(runs)
    assert res["gamma_low"] < gamma < res["gamma_high"]
    assert abs(res["gamma"] - gamma) < 0.15
    survivors = runs[(hz.rollout_times(runs)["k_hi"] > 2).to_numpy()]
    naive = fit_power_law(
        survivors["B"].to_numpy(float),
        survivors["failure"],
        np.zeros(len(survivors), bool),
        lower=survivors["failure:lower"],
        n_boot=0,
    )
    assert naive.exponent > res["gamma_high"]  # survivors without truncation: the slow runs at large B


def test_the_slope_bootstrap_resamples_seed_blocks_where_seeds_apply():
    rng = np.random.default_rng(2)
    runs = _geometric_runs(rng, [32, 64, 128, 256], mu0=0.05, slope=0.6, seeds=6, budget=4096)
    runs["seed"] = runs.groupby("B").cumcount()
    fit = hz.hazard_tables(_tables(runs), n_boot=100, seed=0, resample="seeds")[1].set_index("sample")
    assert fit.loc["all", "resampling"] == "seeds" and fit.loc["all", "n_boot"] > 90
    assert fit.loc["all", "boot_low"] < fit.loc["all", "slope"] < fit.loc["all", "boot_high"]
    # seed 0 lacks B = 32: still blocks (each seed brings the runs it holds, analysis.fits.seed_blocks)
    lacking = runs.drop(index=runs.index[(runs["seed"] == 0) & (runs["B"] == 32)])
    again = hz.hazard_tables(_tables(lacking), n_boot=100, seed=0, resample="seeds")[1]
    assert again.set_index("sample").loc["all", "resampling"] == "seeds"
    # a size held by a single seed: the within-size bootstrap
    thin = runs.drop(index=runs.index[(runs["seed"] > 0) & (runs["B"] == 32)])
    last = hz.hazard_tables(_tables(thin), n_boot=100, seed=0, resample="seeds")[1]
    assert last.set_index("sample").loc["all", "resampling"] == "runs"


def test_a_sweep_without_failures_gives_empty_tables_with_a_note():
    rows = [_run(B, 4096, censored=True) for B in (32, 64, 128) for _ in range(2)]
    table, fit, notes = hz.hazard_tables(_tables(rows))
    assert table.empty and fit.empty
    assert "hazard" in table.columns and "slope" in fit.columns
    assert notes and "no run failed" in notes[0]
    # another clock: no rollouts; a single size: no slope but a hazard
    other = pd.DataFrame([_run(32, 64)]).assign(clock_unit="tokens")
    assert "tokens" in hz.hazard_tables(SimpleNamespace(runs=other, varying_keys=[]))[2][0]
    one = hz.hazard_tables(_tables([_run(32, 64), _run(32, 640, censored=True)]))
    assert len(one[0]) == 1 and one[1]["note"].iloc[0] == "fewer than two sizes"


def test_rlvr_analyze_writes_the_hazard_outputs(tmp_path: Path, capsys):
    spec = SyntheticSpec(sizes=(32, 64, 128), seeds=3, alpha=0.3, seed=4, failure_prefactor=3000.0)
    write_sweep(tmp_path / "fails", spec)
    out = tmp_path / "out"
    args = ["--bootstrap", "50", "--jobs", "1", "--no-sigmoid", "--no-joint"]
    assert main([str(tmp_path / "fails"), "--out", str(out), *args, "--formats", "png"]) == 0
    table = pd.read_csv(out / "hazard.csv")
    assert table["B"].tolist() == [32, 64, 128] and (table["runs"] == 3).all()
    assert table["failures"].sum() == (~pd.read_csv(out / "runs.csv")["failure:censored"]).sum()
    assert len(pd.read_csv(out / "hazard_fit.csv")) == 2
    assert (out / "hazard_per_rollout.png").exists()
    report = (out / "report.md").read_text()
    assert "## The failure clock per rollout" in report and "after first updates" in report
    assert "failure per rollout, all: cloglog slope b = " in capsys.readouterr().out

    quiet = SyntheticSpec(sizes=(32, 64), seeds=2, alpha=0.3, seed=4, gamma=None)
    write_sweep(tmp_path / "healthy", quiet)
    out2 = tmp_path / "out2"
    assert main([str(tmp_path / "healthy"), "--out", str(out2), *args, "--no-plots"]) == 0
    assert pd.read_csv(out2 / "hazard.csv").empty and pd.read_csv(out2 / "hazard_fit.csv").empty
    assert "no run failed" in (out2 / "report.md").read_text()
    assert "note: no run failed" in capsys.readouterr().out


def test_whole_rollout_lower_bounds_are_the_first_rollout_itself():
    import pandas as pd

    from analysis.fits.hazard import rollout_times

    runs = pd.DataFrame(
        {
            "B": [64.0, 64.0],
            "failure": [640.0, 640.0],
            "failure:lower": [512.0, 512.0],
            "failure:censored": [False, False],
            "failure:lower_inclusive": [True, False],
        }
    )
    k = rollout_times(runs)
    # inclusive (analysis.data.clock_tables' whole-rollout brackets): rollouts 8..10; exclusive (after 512): 9..10
    assert list(k["k_lo"]) == [8, 9] and list(k["k_hi"]) == [10, 10]
