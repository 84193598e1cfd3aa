"""Benchmark: coverage of the failure clock per rollout (analysis/fits/hazard.py) over synthetic sweeps.

Each draw is a runs table (the columns ``rlvr-analyze`` gives the hazard module) of sizes 32…512 with
failures drawn **in rollouts**, censored at a budget of 8,192 responses; half of the failed runs have
their onset known only to a 7-rollout range, as a windowed detector records it (the failure in rollout
T, the onset row 0–6 rollouts later, the interval (onset − 7 rollouts, onset]). Printed per scenario:
the mean slope b̂ and its bias, the coverage and median width of the profile-likelihood and bootstrap
intervals of the cloglog slope b, the coverage of the per-size hazard's likelihood-ratio interval, and
for the log-normal scenario the γ left-truncated at 2B (``truncated_gamma``).

Scenarios:

* ``cloglog``: a constant hazard with cloglog(h(B)) = log μ0 + b log(B / 128), exactly the model;
* ``power``: a constant hazard h(B) = h0·(B / 128)^b (a power law in h itself; cloglog ≈ log for small h);
* ``lognormal``: R_F = d·B^γ·e^{σε} in responses (the power law of analysis/fits/fit.py, σ = 1.1 as measured
  on the unclipped grid), failing at rollout ⌈R_F / B⌉ — a hazard that is not constant in time; what
  1 − b̂ reads there against the true γ.

    python benchmarks/calibration/hazard_coverage.py --draws 200
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from analysis.fits import hazard as hz

SIZES = (32, 64, 128, 256, 512)
BUDGET = 8192


def _row(B, failure, lower, censored):
    return {
        "condition": "c",
        "B": float(B),
        "failure": float(failure),
        "failure:lower": lower,
        "failure:censored": censored,
        "failure:detector": None if censored else "x",
        "lr": 1e-4 * math.sqrt(B / 32),
        "in_fit": True,
        "clock_unit": "responses",
    }


def draw(rng, scenario: str, seeds: int, slope: float, level: float, gamma: float) -> pd.DataFrame:
    rows = []
    for B in SIZES:
        n = BUDGET // B
        for s in range(seeds):
            if scenario == "cloglog":
                k = int(rng.geometric(-math.expm1(-level * (B / 128) ** slope)))
            elif scenario == "power":
                k = int(rng.geometric(min(level * (B / 128) ** slope, 1.0)))
            else:
                k = max(1, math.ceil(level * B**gamma * math.exp(1.1 * rng.standard_normal()) / B))
            shift = int(rng.integers(0, 7)) if s % 2 else 0
            onset = k + shift
            if onset > n:
                rows.append(_row(B, n * B, math.nan, True))
            elif s % 2:
                rows.append(_row(B, onset * B, max(onset - 7, 0) * B, False))
            else:
                rows.append(_row(B, onset * B, math.nan, False))
    return pd.DataFrame(rows)


def true_hazards(scenario, slope, level) -> dict[int, float]:
    if scenario == "cloglog":
        return {B: -math.expm1(-level * (B / 128) ** slope) for B in SIZES}
    if scenario == "power":
        return {B: min(level * (B / 128) ** slope, 1.0) for B in SIZES}
    return {}


def run(scenario, draws, seeds, slope, level, gamma, n_boot, seed) -> dict:
    rng = np.random.default_rng(seed)
    truth_h = true_hazards(scenario, slope, level)
    est, prof_cov, boot_cov, prof_w, boot_w, size_cov, size_n, g_est, g_cov = ([] for _ in range(9))
    for i in range(draws):
        runs = draw(rng, scenario, seeds, slope, level, gamma)
        times = hz.rollout_times(runs)
        fit = hz.cloglog_fit(times, runs["B"], n_boot=n_boot, seed=i)
        target = slope if scenario != "lognormal" else 1 - gamma
        est.append(fit["slope"])
        prof_cov.append(fit["slope_low"] <= target <= fit["slope_high"])
        boot_cov.append(fit["boot_low"] <= target <= fit["boot_high"])
        prof_w.append(fit["slope_high"] - fit["slope_low"])
        boot_w.append(fit["boot_high"] - fit["boot_low"])
        for B, h_true in truth_h.items():
            part = runs["B"] == B
            _, lo, hi = hz.size_hazard(times[part.to_numpy()])
            size_cov.append(lo <= h_true <= hi)
            size_n.append(B)
        if scenario == "lognormal":
            g = hz.truncated_gamma(runs)
            g_est.append(g["gamma"])
            g_cov.append(g["gamma_low"] <= gamma <= g["gamma_high"])
    est = np.asarray(est, float)
    out = {
        "scenario": scenario,
        "seeds per size": seeds,
        "truth b": slope if scenario != "lognormal" else f"(1 − γ = {1 - gamma:g})",
        "mean b̂": np.nanmean(est),
        "profile coverage": np.mean(prof_cov),
        "profile median width": np.nanmedian(prof_w),
        "bootstrap coverage": np.mean(boot_cov),
        "bootstrap median width": np.nanmedian(boot_w),
        "per-size h coverage": np.mean(size_cov) if size_cov else math.nan,
    }
    if g_est:
        out["γ left-truncated: mean"] = np.nanmean(g_est)
        out["γ left-truncated: coverage"] = np.mean(g_cov)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    start = time.perf_counter()
    scenarios = [
        ("cloglog", 3, 0.6, 0.03, 0.0),
        ("cloglog", 6, 0.6, 0.03, 0.0),
        ("cloglog", 3, 1.0, 0.01, 0.0),
        ("power", 3, 0.6, 0.03, 0.0),
        ("lognormal", 3, math.nan, 2000.0, 0.2),
    ]
    rows = []
    for k, (name, seeds, slope, level, gamma) in enumerate(scenarios):
        rows.append(run(name, args.draws, seeds, slope, level, gamma, args.bootstrap, args.seed + k))
    table = pd.DataFrame(rows)
    print(
        f"{args.draws} draws per scenario, {args.bootstrap} bootstrap resamples; sizes {SIZES}, budget {BUDGET}"
    )
    print(table.to_markdown(index=False, floatfmt=".3f"))
    print(f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
