"""Planned against achieved interval widths of ``rlvr-plan`` (rlvr_study/plan.py).

For each design: the planner's width (expected information of the interval-censored likelihood,
module docstring of rlvr_study/plan.py), then ``--sweeps`` sweeps simulated at that design with the
evaluation grid and the budget (resolution and censoring), each fitted with analysis.fits.fit's bootstrap;
the median achieved width should be within +-20 % of the planned one. ``--resample`` is the report's
bootstrap the plan and the fits assume (``seeds``, its default: seeds as clusters where a design has at
least 5 seeds and two at every size; ``runs``: within sizes, N - m degrees of freedom). ``exact-time plan``: the width
the same design would be planned at if crossings were known exactly and never censored (what resolution
and censoring add); ``unbounded``: sweeps whose interval the fit reports as unbounded. ``--full`` also runs one design
through the whole path (analysis.synthetic run records -> analysis.data.clock_tables -> analysis.fits.exponents fits)::

    python benchmarks/study/plan_check.py --sweeps 100 --full
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from analysis.fits.fit import difference_interval, fit_power_law
from rlvr_study.plan import Schedule, Truth, design_width, plan_design, simulate_crossings, simulate_widths

DESIGNS = {
    # name: (truth, candidate sizes, requested width); prefactor 2000 as in analysis.synthetic
    "dense evals, little censoring": (
        Truth(0.3, math.log(2000), 0.25, 30000, Schedule("linear", 256)),
        (32, 64, 128, 256, 512),
        0.12,
    ),
    "make-study-like sigma 0.21, geometric evals": (
        Truth(0.2, math.log(1500), 0.21, 16384, Schedule("geometric", 2048, 64, 4)),
        (32, 64, 128, 256, 512),
        0.12,
    ),
    "coarse resolution (evals every 4096, B up to 2048)": (
        Truth(0.3, math.log(3000), 0.2, 24000, Schedule("linear", 4096)),
        (128, 256, 512, 1024, 2048),
        0.25,
    ),
    "heavy censoring at the largest sizes": (
        Truth(0.45, math.log(2000), 0.3, 40000, Schedule("linear", 512)),
        (32, 64, 128, 256, 512, 1024),
        0.2,
    ),
}


def full_path(truth: Truth, sizes, seeds, sweeps: int, n_boot: int) -> float:
    """Median width through run records, the clocks and the report's fit (one condition)."""
    from analysis.data.clock_tables import build_tables
    from analysis.fits.exponents import fit_conditions
    from analysis.synthetic import SyntheticSpec, records

    widths = []
    for k in range(sweeps):
        specs = [
            SyntheticSpec(
                sizes=(int(b),),
                seeds=int(n),
                alpha=truth.alpha,
                prefactor=math.exp(truth.intercept),
                sigma=truth.sigma,
                gamma=None,
                b_noise=None,
                targets=(0.3,),
                budget=int(truth.budget),
                eval_every=int(truth.schedule.every),
                seed=1000 * k + j,
            )
            for j, (b, n) in enumerate(zip(sizes, seeds))
        ]
        tables = build_tables(records(*specs))
        exps, _ = fit_conditions(tables, n_boot=n_boot, seed=k, joint_model=False)
        row = exps[exps["clock"] == "target:0.3"].iloc[0]
        widths.append(row["ci_high"] - row["ci_low"])
    return float(np.median(widths))


def difference_widths(truths: list[Truth], sizes, seeds, sweeps: int, n_boot: int) -> np.ndarray:
    """Widths of the fit's interval of alpha_2 - alpha_1 (independent seeds, within-size bootstrap), per
    simulated pair."""
    rng = np.random.default_rng(4)
    out = np.empty(sweeps)
    for i in range(sweeps):
        fits = []
        for t in truths:
            B, v, c, lo = simulate_crossings(sizes, seeds, t, rng)
            fits.append(fit_power_law(B, v, c, lower=lo, n_boot=n_boot, rng=rng))
        low, high, _, _ = difference_interval(fits[0], fits[1])
        out[i] = high - low
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sweeps", type=int, default=100, help="simulated sweeps per design")
    p.add_argument("--bootstrap", type=int, default=400, help="bootstrap resamples per fit")
    p.add_argument("--full", action="store_true", help="also one design through run records and clocks")
    p.add_argument("--resample", choices=("seeds", "runs"), default="seeds", help="the report's bootstrap")
    args = p.parse_args()
    rs = args.resample
    print(
        f"{'design':52s} {'seeds per size':34s} {'runs':>4s} {'planned':>8s} {'achieved':>8s} {'ratio':>6s}"
    )
    for name, (truth, sizes, width) in DESIGNS.items():
        t0 = time.perf_counter()
        d = plan_design(sizes, [truth], width, resample=rs)
        widths = simulate_widths(d.sizes, d.seeds, truth, args.sweeps, args.bootstrap, seed=1, resample=rs)
        med = float(np.median(widths))
        naive = design_width(d.sizes, d.seeds, Truth(truth.alpha, truth.intercept, truth.sigma), resample=rs)
        print(
            f"{name:52s} {d.allocation():34s} {d.n_runs:4d} {d.width:8.3f} {med:8.3f} {med / d.width:6.2f}"
            f" {naive:15.3f} {int(np.isinf(widths).sum()):9d}   ({time.perf_counter() - t0:.1f} s)"
        )
    # an equal allocation for comparison, and the whole path
    truth, sizes, _ = DESIGNS["dense evals, little censoring"]
    seeds = [3] * len(sizes)
    planned = design_width(sizes, seeds, truth, resample=rs)
    med = float(
        np.median(simulate_widths(sizes, seeds, truth, args.sweeps, args.bootstrap, seed=2, resample=rs))
    )
    label = "equal 3 per size (dense evals)"
    alloc = " ".join(f"{b}:{n}" for b, n in zip(sizes, seeds))
    print(f"{label:52s} {alloc:34s} {sum(seeds):4d} {planned:8.3f} {med:8.3f} {med / planned:6.2f}")
    pair = [DESIGNS["make-study-like sigma 0.21, geometric evals"][0]] * 2
    pair[1] = Truth(0.4, pair[0].intercept, pair[0].sigma, pair[0].budget, pair[0].schedule)
    d = plan_design(DESIGNS["make-study-like sigma 0.21, geometric evals"][1], pair, 0.15, resample="runs")
    med = float(np.median(difference_widths(pair, d.sizes, d.seeds, args.sweeps, args.bootstrap)))
    label = "alpha 0.2 vs 0.4 (study-like), difference, each"
    print(f"{label:52s} {d.allocation():34s} {d.n_runs:4d} {d.width:8.3f} {med:8.3f} {med / d.width:6.2f}")
    if args.full:
        t0 = time.perf_counter()
        med = full_path(truth, sizes, seeds, args.sweeps, args.bootstrap)
        label = "  same, through run records -> clocks -> fits"
        print(f"{label:52s} {alloc:34s} {sum(seeds):4d} {planned:8.3f} {med:8.3f} {med / planned:6.2f}"
              f"   ({time.perf_counter() - t0:.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
