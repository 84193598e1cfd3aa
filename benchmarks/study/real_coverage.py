"""Coverage of α's 95 % interval on designs drawn from a pool of real runs (docs/study.md, "Calibration
on real runs").

A pool is a folder of run directories with many seeds at every size of one or more conditions (e.g. 24
seeds x 5 sizes of the embedded default at two η_ref, every run to one horizon, none stopped at its
targets). Its own estimate of α at each target — the fit of every run — stands in for the truth. Each
draw takes a random order of the pool's seeds (the same order at every size: a seed stays a block) and
builds a study-sized design from it:

- **uniform**: the first ``--seeds`` seeds of the order at every size;
- **adaptive**: ``rlvr-study``'s rounds (``benchmarks/study/study_vs_uniform.py``'s ``adaptive``: a pilot of
  ``--pilot-seeds`` seeds, then the planner's runs, ``--max-rounds`` rounds at most, the width goal
  ``--goal``), drawing the runs it asks for from the order.

Each design is fitted as ``rlvr-analyze`` fits it, and the table gives per condition, target and design:
the runs used, the share of draws whose interval holds the pool's estimate (``coverage``; the draws share
runs with the pool, so this is the coverage of the pool's estimate, not of an independent truth), the
mean and median width, and the share of unbounded intervals. ``--rules old`` reads the crossings as before
the horizon and whole-rollout brackets (no horizon, continuous brackets, every size in every fit), for the
before/after comparison::

    python benchmarks/study/real_coverage.py runs/pool --targets 0.22 0.25 0.28 --isotonic --draws 100
    python benchmarks/study/real_coverage.py runs/pool --targets 0.22 0.25 0.28 --isotonic --draws 100 --rules old
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from study_vs_uniform import PoolSource, adaptive, make_study  # noqa: E402

from analysis.data.clock_tables import ClockOptions, build_tables  # noqa: E402
from analysis.data.load import load_source  # noqa: E402
from analysis.fits.exponents import fit_conditions  # noqa: E402


def options(targets, isotonic: bool, rules: str) -> ClockOptions:
    crossing = "isotonic" if isotonic else "interval"
    if rules == "old":
        return ClockOptions(
            targets=tuple(targets), crossing=crossing, horizon=None, discrete=False, max_early_sizes=None
        )
    return ClockOptions(targets=tuple(targets), crossing=crossing)


def interval(exps: pd.DataFrame, clock: str) -> tuple[float, float, float]:
    row = exps[exps["clock"] == clock]
    if row.empty:
        return math.nan, -math.inf, math.inf
    r = row.iloc[0]
    return float(r["exponent"]), float(r["ci_low"]), float(r["ci_high"])


def one_condition(tables, label: str, targets, args) -> list[dict]:
    runs = tables.runs[tables.runs["condition"] == label].reset_index(drop=True)
    sub = dataclasses.replace(tables, runs=runs)
    exps, _ = fit_conditions(sub, n_boot=args.bootstrap, joint_model=False)
    sizes_p = sorted(int(p) for p in runs["P"].unique())
    budget = float(np.nanmax(runs["budget"])) if runs["budget"].notna().any() else math.inf
    rows = []
    for target in targets:
        clock = f"target:{target:g}"
        truth, lo, hi = interval(exps, clock)
        out = {"uniform": [], "adaptive": []}
        for draw in range(args.draws):
            source = PoolSource(sub, draw)
            have = {p: set(range(min(args.seeds, source.capacity(p)))) for p in sizes_p}
            design = source.tables(have)
            d_exps, _ = fit_conditions(design, n_boot=args.bootstrap, joint_model=False, seed=draw)
            e, low, high = interval(d_exps, clock)
            out["uniform"].append((low <= truth <= high, high - low, len(design.runs)))
            if args.adaptive:
                study = make_study(sizes_p, args.goal, 1e12, args.bootstrap, args.max_rounds, target)
                study.pilot_seeds = args.pilot_seeds
                study.common = False
                study.balanced = not args.unbalanced
                # the study plans and stops on this target alone: its tables time only it
                result = adaptive(study, PoolSource(dataclasses.replace(sub, targets=[target]), draw), budget)
                out["adaptive"].append((result.covers(truth), result.high - result.low, result.runs))
        for design, res in out.items():
            if not res:
                continue
            covered = np.array([r[0] for r in res], bool)
            widths = np.array([r[1] for r in res], float)
            rows.append(
                {
                    "condition": label,
                    "target": target,
                    "design": design,
                    "pool_alpha": truth,
                    "pool_interval": f"[{lo:.3f}, {hi:.3f}]",
                    "pool_runs": len(runs),
                    "runs": float(np.mean([r[2] for r in res])),
                    "coverage": float(covered.mean()),
                    "mean_width": float(np.mean(widths[np.isfinite(widths)]))
                    if np.isfinite(widths).any()
                    else math.inf,
                    "median_width": float(np.median(widths)),
                    "unbounded": float((~np.isfinite(widths)).mean()),
                    "draws": len(res),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pool", help="folder of the pool's run directories")
    ap.add_argument("--targets", type=float, nargs="+", required=True)
    ap.add_argument("--isotonic", action="store_true", help="isotonic crossings (the study's rule)")
    ap.add_argument("--rules", choices=("new", "old"), default="new")
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=5, help="uniform design: seeds at every size")
    ap.add_argument("--adaptive", action="store_true", help="also the adaptive study's designs (slow)")
    ap.add_argument("--pilot-seeds", type=int, default=3)
    ap.add_argument(
        "--unbalanced",
        action="store_true",
        help="adaptive rounds add seeds where the design wants them, not whole seeds at every fitted size",
    )
    ap.add_argument("--goal", type=float, default=0.12)
    ap.add_argument("--max-rounds", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    ap.add_argument("--condition", default=None, help="only conditions whose label contains this text")
    args = ap.parse_args(argv)
    t0 = time.time()
    tables = build_tables(load_source(args.pool).runs, options(args.targets, args.isotonic, args.rules))
    rows = []
    for label in sorted(tables.runs["condition"].unique()):
        if args.condition is None or args.condition in label:
            rows += one_condition(tables, label, args.targets, args)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    print(f"({args.rules} rules, {args.draws} draws, {args.bootstrap} resamples, {time.time() - t0:.0f} s)")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
