"""Benchmark: how often the planned width at 80 % assurance (rlvr_study/plan.py) is met by the interval
the report prints, for α (a target clock) and γ (the failure clock), at 5 seeds × 5 sizes.

For each quantity the planner's width of the design (:func:`rlvr_study.plan.design_width`,
``assurance=0.8``); then ``--draws`` fresh synthetic studies at that design, each fitted as the report
fits it: the seed (cluster) bootstrap of :func:`analysis.fits.seed_blocks.resample_weights` (5 seeds:
seeds resampled as blocks, t on S − 1 degrees of freedom × sqrt(S / (S − 1))) and
:func:`analysis.fits.fit.fit_power_law`. Printed: the planned width, the median achieved width and the
share of studies whose interval is no wider than planned (the assurance met; 80 % is the promise).
``--seed-corr`` gives each seed an offset shared by its runs at every size (that share of the scatter's
variance), which the slope does not see: the plan, which assumes independent runs, is then conservative.

* α: crossings of ``2000 B^0.3`` with log-normal scatter 0.25, on an evaluation grid every 707 responses
  (the evaluation before the crossing as its lower bound), budget 200,000;
* γ: failure onsets of ``20000 B^0`` with scatter 0.4, each known to the rollout it falls in,
  right-censored at the horizon 60,000 (:func:`rlvr_study.plan.failure_truth`).

    python benchmarks/study/assurance_check.py --draws 500 --bootstrap 1000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import resample_weights
from rlvr_study.plan import Schedule, Truth, design_width, eval_grid

SIZES = (32, 64, 128, 256, 512)
TRUTHS = {
    "alpha": Truth(0.3, math.log(2000.0), 0.25, 200000.0, Schedule("linear", 707)),
    # failure onsets to a rollout: an evaluation after every rollout (rlvr_study.plan.failure_truth)
    "gamma": Truth(0.0, math.log(20000.0), 0.4, 60000.0, None),
}


def draw_study(truth: Truth, seeds: int, seed_corr: float, rng: np.random.Generator):
    """One study at the design: ``(runs table, values, censored, lower)`` measured on the grid."""
    B = np.repeat(np.asarray(SIZES, float), seeds)
    ids = np.tile(np.arange(seeds), len(SIZES))
    offset = rng.standard_normal(seeds)[ids]
    eps = math.sqrt(seed_corr) * offset + math.sqrt(1 - seed_corr) * rng.standard_normal(B.size)
    r = np.exp(truth.intercept + truth.alpha * np.log(B) + truth.sigma * eps)
    values, censored, lower = np.empty(B.size), np.zeros(B.size, bool), np.full(B.size, np.nan)
    for b in SIZES:
        at = B == b
        grid = eval_grid(b, truth.budget, truth.schedule)
        k = np.searchsorted(grid, r[at], side="left")
        cens = k >= grid.size
        kk = np.minimum(k, grid.size - 1)
        values[at] = grid[kk]
        censored[at] = cens
        lower[at] = np.where(cens, np.nan, np.where(kk > 0, grid[np.maximum(kk - 1, 0)], 0.0))
    return pd.DataFrame({"B": B, "seed": ids}), values, censored, lower


def achieved_widths(truth: Truth, seeds: int, seed_corr: float, draws: int, n_boot: int) -> np.ndarray:
    rng = np.random.default_rng([seeds, int(round(seed_corr * 100)), int(truth.budget)])
    out = np.empty(draws)
    for d in range(draws):
        runs, v, c, lo = draw_study(truth, seeds, seed_corr, rng)
        W, _, clusters, _ = resample_weights(runs, n_boot, d, "seeds", "assurance")
        fit = fit_power_law(runs["B"], v, c, lower=lo, n_boot=n_boot, weights=W, n_clusters=clusters)
        out[d] = fit.ci_high - fit.ci_low
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=500, help="fresh studies per quantity and seed correlation")
    p.add_argument("--bootstrap", type=int, default=1000, help="seed-bootstrap resamples per fit")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--seed-corr", type=float, nargs="+", default=[0.0, 0.2], help="seed offset's share")
    p.add_argument("--assurance", type=float, default=0.8)
    args = p.parse_args(argv)
    print(
        f"5 sizes x {args.seeds} seeds, {args.draws} draws, {args.bootstrap} resamples, "
        f"assurance {args.assurance:g}"
    )
    print("quantity  seed corr  planned  median achieved  met")
    seeds = [args.seeds] * len(SIZES)
    for name, truth in TRUTHS.items():
        planned = design_width(SIZES, seeds, truth, args.assurance)
        for corr in args.seed_corr:
            start = time.perf_counter()
            w = achieved_widths(truth, args.seeds, corr, args.draws, args.bootstrap)
            print(
                f"{name:8s}  {corr:9.1f}  {planned:7.3f}  {np.median(w):15.3f}  {np.mean(w <= planned):5.1%}"
                f"   ({time.perf_counter() - start:.0f} s)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
