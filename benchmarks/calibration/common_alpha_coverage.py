"""Benchmark: coverage of the 95 % interval of the common α across targets (analysis/fits/cross.py) and
of each target's interval, on synthetic studies whose targets share one exponent.

Each draw is one condition: 5 sizes (B = 32 … 512) × 5 seeds, three targets crossed by every run,
log crossing ``log c_j + 0.3 log B + sigma_j eps_j`` with ``sigma = (0.20, 0.25, 0.35)``, prefactors
2000 × (0.6, 1, 1.6) and the targets' noises correlated by ``--corr`` (pairwise; the synthetic runs of
``analysis.synthetic`` cross their targets on one curve, correlation 1, so the draws are made here);
crossings measured on an evaluation grid (every 707 responses, 1/8 of the smallest median crossing; the
clock of the first evaluation at or past the crossing, the evaluation before it as the lower bound) up
to a budget of 200,000 responses. Each draw goes through the shipped path: the seed (cluster) bootstrap
of :func:`analysis.fits.seed_blocks.resample_weights` (5 seeds: seeds resampled as blocks), each
target's :func:`analysis.fits.fit.fit_power_law` on those resamples (``n_clusters``: the seed-cluster
t pivot), and :func:`analysis.fits.cross.common_exponent`. Printed per correlation: the coverage of
α = 0.3 by the common interval and by each target's, the median widths, and the share of draws where
the common-α test rejects at 5 %. ``--gls`` also prints the interval the GLS combination with weights
estimated from the same bootstrap covariance gave (the procedure before the fixed weights, kept here
for comparison only), ``--weights`` the fixed weights to ship::

    python benchmarks/calibration/common_alpha_coverage.py --draws 500 --bootstrap 1000 --gls
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from analysis.fits.cross import _bounded_quantiles, common_exponent, reported_replicates
from analysis.fits.fit import fit_power_law
from analysis.fits.seed_blocks import resample_weights
from rlvr_study.plan import Schedule, eval_grid

ALPHA = 0.3
SIZES = (32, 64, 128, 256, 512)
SIGMAS = (0.20, 0.25, 0.35)
PREFACTORS = tuple(2000.0 * f for f in (0.6, 1.0, 1.6))
BUDGET = 200000.0
SCHEDULE = Schedule("linear", 707)


def draw_crossings(rng: np.random.Generator, corr: float, seeds: int):
    """One condition's runs: ``(runs table, [(values, censored, lower)] per target)``."""
    k = len(SIGMAS)
    cov = np.full((k, k), corr) + (1 - corr) * np.eye(k)
    chol = np.linalg.cholesky(cov)
    B = np.repeat(np.asarray(SIZES, float), seeds)
    seed = np.tile(np.arange(seeds), len(SIZES))
    eps = rng.standard_normal((B.size, k)) @ chol.T  # [n, k]
    targets = []
    for j in range(k):
        r = PREFACTORS[j] * B**ALPHA * np.exp(SIGMAS[j] * eps[:, j])
        values, censored, lower = np.empty(B.size), np.zeros(B.size, bool), np.full(B.size, np.nan)
        for b in SIZES:
            at = B == b
            grid = eval_grid(b, BUDGET, SCHEDULE)
            i = np.searchsorted(grid, r[at], side="left")
            cens = i >= grid.size
            ii = np.minimum(i, grid.size - 1)
            values[at] = grid[ii]
            censored[at] = cens
            lower[at] = np.where(cens, np.nan, np.where(ii > 0, grid[np.maximum(ii - 1, 0)], 0.0))
        targets.append((values, censored, lower))
    return pd.DataFrame({"B": B, "seed": seed}), targets


def gls_interval(fits) -> tuple[float, float]:
    """The combination before fixed weights: GLS weights from the covariance of the same bootstrap
    replicates (inverse-variance where a weight came out negative), percentile interval of the weighted
    replicates."""
    m = min(f.boot_slopes.size for f in fits)
    reps = np.stack([reported_replicates(f)[:m] for f in fits], 1)
    finite = np.isfinite(reps).all(1)
    cov = np.cov(reps[finite], rowvar=False)
    inv = np.linalg.pinv(cov)
    w = inv @ np.ones(len(fits)) / float(np.ones(len(fits)) @ inv @ np.ones(len(fits)))
    if (w < 0).any():
        w = (1 / np.diag(cov)) / (1 / np.diag(cov)).sum()
    with np.errstate(invalid="ignore"):
        combined = np.where(w[None, :] != 0, reps * w[None, :], 0.0).sum(1)
    return _bounded_quantiles(combined)


def one_draw(corr: float, draw: int, n_boot: int, seeds: int, weights: str | None, gls: bool) -> list[float]:
    rng = np.random.default_rng([draw, int(round(corr * 1000))])
    runs, targets = draw_crossings(rng, corr, seeds)
    W, mode, clusters, _ = resample_weights(runs, n_boot, draw, "seeds", "synthetic")
    assert mode == "seeds" and clusters == seeds
    fits = [
        fit_power_law(runs["B"], v, c, lower=lo, n_boot=n_boot, weights=W, n_clusters=clusters)
        for v, c, lo in targets
    ]
    common = common_exponent(fits) if weights is None else common_exponent(fits, weighting=weights)
    out = [common.get("ci_low", math.nan), common.get("ci_high", math.nan), common.get("p_common", math.nan)]
    for f in fits:
        out += [f.ci_low, f.ci_high]
    out += list(gls_interval(fits)) if gls else [math.nan, math.nan]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=500, help="synthetic studies per correlation")
    p.add_argument("--bootstrap", type=int, default=1000, help="seed-bootstrap resamples per study")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument(
        "--corr", type=float, nargs="+", default=[0.3, 0.6, 0.9], help="correlation of the targets"
    )
    p.add_argument(
        "--weights",
        default=None,
        help="weighting of the common α (analysis.fits.cross.WEIGHTINGS; default the shipped)",
    )
    p.add_argument("--gls", action="store_true", help="also the GLS interval with estimated weights")
    args = p.parse_args(argv)
    print(
        f"alpha {ALPHA}, 5 sizes x {args.seeds} seeds, 3 targets (sigma {SIGMAS}), {args.draws} draws, "
        f"{args.bootstrap} resamples, weights {args.weights or 'shipped'}"
    )
    head = "corr  cover(common)  width(common)  reject(5%)  cover(targets)         width(targets)"
    print(head + ("      cover(GLS)  width(GLS)" if args.gls else ""))
    for corr in args.corr:
        start = time.perf_counter()
        v = np.array(
            [one_draw(corr, d, args.bootstrap, args.seeds, args.weights, args.gls) for d in range(args.draws)]
        )

        def cover(lo, hi, v=v):
            return np.mean((v[:, lo] <= ALPHA) & (ALPHA <= v[:, hi]))

        def width(lo, hi, v=v):
            return np.median(v[:, hi] - v[:, lo])

        targets = [3 + 2 * j for j in range(len(SIGMAS))]
        line = (
            f"{corr:4.1f}  {cover(0, 1):13.1%}  {width(0, 1):13.3f}  {np.mean(v[:, 2] < 0.05):10.1%}  "
            + " ".join(f"{cover(j, j + 1):6.1%}" for j in targets)
            + "  "
            + " ".join(f"{width(j, j + 1):6.3f}" for j in targets)
        )
        if args.gls:
            line += f"  {cover(9, 10):10.1%}  {width(9, 10):10.3f}"
        print(line + f"   ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
