"""B_crit read from the clocks where the crossings sit at the R >= B floor: does ``bcrit.csv`` invent a
critical batch where there is none, and does it still find one that is there?

Each draw simulates one condition with ``analysis.synthetic`` as the trainer would measure it: the
latent crossing of every run is drawn (log-normal, ``--sigma``), the run's accuracy is evaluated on the
trainer's default geometric schedule (a point every quarter doubling from 64 responses, at the first
rollout boundary past each point, ``rlvr_scaling/evaluation.py``), so a crossing is seen in whole
rollouts and bracketed between two evaluations; then the analysis runs as ``rlvr-analyze`` does
(``build_tables`` -> ``fit_conditions`` -> ``bcrit_table``: the power law's rows, resamples and, with
5 seeds, seeds as clusters) and the B_crit row of the target is printed.

Two cases:

* **flat**: crossings flat in B (``--flat`` responses, true B_crit = inf): at B >= 256 nearly every run
  crosses with its first rollout, at R = B. Passing: the interval is open above (``ci_high`` = inf, or
  B_crit not identified) in at least 7 of 8 draws;
* **finite**: crossings following ``R_min (1 + B / B_crit)`` (``--r-min``, ``--b-crit``): how often the
  interval covers the true B_crit, and how often it is bounded above.

    python benchmarks/calibration/bcrit_floor.py --draws 8
"""

from __future__ import annotations

import argparse
import math
import time

from analysis.data.clock_tables import build_tables
from analysis.fits.bcrit import bcrit_table
from analysis.fits.exponents import fit_conditions
from analysis.synthetic import SyntheticSpec, records

SIZES = (32, 64, 128, 256, 512)
# the trainer's default schedule (conf/eval/default.yaml): first_responses 64, 4 points per doubling
SCHEDULE = dict(eval_every=64, eval_growth=2.0**0.25)


def draw(spec: SyntheticSpec, n_boot: int, seed: int) -> dict:
    """The ``bcrit.csv`` row of one simulated condition (its only target) beside its power-law row."""
    tables = build_tables(records(spec))
    exponents, fits = fit_conditions(tables, n_boot=n_boot, seed=seed, joint_model=False)
    table = bcrit_table(tables, exponents, fits, n_boot, seed)
    row = table.iloc[0].to_dict()
    power = exponents[exponents["clock"] == row["clock"]].iloc[0]
    row["n_runs_power"] = int(power["n_runs"])
    row["sizes_early"] = power["sizes_early"]
    return row


def text(v: float) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "–"
    return "∞" if v == math.inf else f"{v:,.0f}"


def run_case(name: str, specs: list[SyntheticSpec], n_boot: int, truth: float) -> None:
    open_above = covered = 0
    t0 = time.perf_counter()
    for spec in specs:
        r = draw(spec, n_boot, spec.seed)
        up = not (r["ci_high"] < math.inf)  # inf, or NaN: not identified
        open_above += up
        covered += bool(r["ci_low"] <= truth <= r["ci_high"]) or (math.isinf(truth) and up)
        early = r["sizes_early"] if isinstance(r["sizes_early"], str) and r["sizes_early"] else "none"
        print(
            f"  {name} seed {spec.seed}: B_crit {text(r['b_crit'])} [{text(r['ci_low'])}, {text(r['ci_high'])}]"
            f"  ΔAICc {r['delta_aicc']:+.2f} ({r['n_runs']} runs; power law {r['n_runs_power']}, "
            f"early sizes left out: {early})"
            + (f"  note: {r['note']}" if isinstance(r.get("note"), str) and r["note"] else "")
        )
    n = len(specs)
    print(
        f"{name}: open above (or not identified) in {open_above}/{n}; covers the truth "
        f"({text(truth)}) in {covered}/{n}  [{time.perf_counter() - t0:.0f} s]"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", type=int, default=8)
    p.add_argument("--seeds", type=int, default=5, help="runs per size (5: seeds as clusters)")
    p.add_argument("--boot", type=int, default=400)
    p.add_argument("--sigma", type=float, default=0.25, help="log-normal scatter of the crossings")
    p.add_argument("--flat", type=float, default=300.0, help="median crossing of the flat case (responses)")
    p.add_argument("--r-min", type=float, default=1000.0, help="R_min of the finite case")
    p.add_argument("--b-crit", type=float, default=200.0, help="B_crit of the finite case")
    p.add_argument("--first-seed", type=int, default=0, help="draws use seeds first-seed, first-seed+1, ...")
    p.add_argument("--case", choices=("flat", "finite", "both"), default="both")
    args = p.parse_args()
    common = dict(
        sizes=SIZES,
        seeds=args.seeds,
        sigma=args.sigma,
        gamma=None,
        b_noise=None,
        targets=(0.3,),
        budget=40000,
        **SCHEDULE,
    )
    seeds = range(args.first_seed, args.first_seed + args.draws)
    print(
        f"{args.seeds} seeds x B = {', '.join(map(str, SIZES))}, σ = {args.sigma:g}, {args.boot} resamples, "
        f"the trainer's geometric evaluation schedule"
    )
    if args.case in ("flat", "both"):
        flat = [SyntheticSpec(alpha=0.0, prefactor=args.flat, seed=s, **common) for s in seeds]
        run_case(f"flat {args.flat:g}", flat, args.boot, math.inf)
    if args.case in ("finite", "both"):
        finite = [SyntheticSpec(b_crit=args.b_crit, prefactor=args.r_min, seed=s, **common) for s in seeds]
        run_case(f"R_min {args.r_min:g}, B_crit {args.b_crit:g}", finite, args.boot, args.b_crit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
