"""``rlvr-plan``: seeds per rollout size for a requested interval width of the exponent, with the cost.

Examples::

    rlvr-plan runs/pilot --width 0.12 --responses-per-second 40    # from pilot runs (fits and clocks)
    rlvr-plan --sigma 0.21 --alpha 0.2 --prefactor 2000 --sizes 32 64 128 256 512 \\
        --budget 30000 --eval-every 256 --width 0.12                # from stated numbers
    rlvr-plan ... --throughput-from runs/single/RUN                 # priced at a measured run's rate

Prints, per condition and target, the seeds per size (``B:runs``), the planned median width of the 95 %
interval, the cost (responses, serial wall hours, GPU-hours), the probability that a run at each size
ends censored and the evaluation bracket near the median crossing; then the same for the difference of
every pair of conditions. ``--throughput-from RUN_DIR`` prices the designs at a measured run's
responses/s and FLOPs per response, and on one H100 at a stated MFU (:mod:`rlvr_study.price`).
``--out DIR`` writes ``plan.csv`` and ``plan_difference.csv``. The model and the allocation are in
:mod:`rlvr_study.plan`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from rlvr_study.plan import Design, PilotCondition, Schedule, Truth, pilot_conditions, plan_design
from rlvr_study.price import ASSUMED_MFU, H100_PEAK_FLOPS, MeasuredPrice, describe, price_columns, read_price


def design_row(label: str, target: str, design: Design, rps: float | None, have=None) -> dict:
    row = {
        "condition": label,
        "target": target,
        "seeds_per_size": design.allocation(),
        "n_runs": design.n_runs,
        "planned_width": design.width,
        "se": design.se,
        "reached": design.reached,
        "responses": design.responses,
        "wall_hours_serial": design.wall_seconds / 3600 if math.isfinite(design.wall_seconds) else math.nan,
        "gpu_hours": design.responses / rps / 3600 if rps and math.isfinite(design.responses) else math.nan,
        "p_censored": " ".join(f"{p:.2f}" for p in design.p_censored),
        "resolution": " ".join("–" if not np.isfinite(r) else f"{r:.2f}" for r in design.resolution),
        "notes": "; ".join(
            design.dropped + ([] if design.reached else ["width not reached within --max-runs"])
        ),
    }
    if have is not None:
        row["pilot_runs"] = " ".join(f"{b:g}:{have.get(float(b), 0)}" for b in design.sizes)
    return row


def _print_table(df: pd.DataFrame, columns: list[str]) -> None:
    from analysis.reporting.text import plain_table

    def cell(v):
        if isinstance(v, float):
            return "–" if not math.isfinite(v) else f"{v:.3g}"
        return str(v)

    print(plain_table(columns, [[cell(v) for v in row] for row in df[columns].itertuples(index=False)]))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvr-plan",
        description="Seeds per rollout size (and which sizes) for a requested 95 % interval width of the "
        "exponent, from pilot runs or a stated scatter and exponent, with the cost.",
    )
    p.add_argument(
        "source", nargs="?", default=None, help="pilot runs: a folder of run directories or wandb:"
    )
    p.add_argument("--width", type=float, default=0.12, help="requested 95 %% interval width of alpha")
    p.add_argument(
        "--diff-width",
        type=float,
        default=None,
        help="requested width of alpha_1 - alpha_2 (default --width)",
    )
    p.add_argument(
        "--assurance",
        type=float,
        default=0.5,
        help="plan for the width to be met with this probability (0.5: the median width; rlvr-study: 0.8)",
    )
    p.add_argument("--rho", type=float, default=0.0, help="correlation of two conditions' exponents (paired)")
    p.add_argument("--targets", type=float, nargs="+", default=None, help="targets to plan (default: all)")
    p.add_argument("--sizes", type=float, nargs="+", default=None, help="candidate rollout sizes B")
    p.add_argument("--min-seeds", type=int, default=2, help="runs at every kept size (>= 2)")
    p.add_argument("--max-runs", type=int, default=2000, help="give up above this many runs per condition")
    p.add_argument(
        "--max-censored", type=float, default=0.9, help="drop sizes censored with a higher probability"
    )
    p.add_argument("--responses-per-second", type=float, default=None, help="one GPU's rate: GPU-hours")
    p.add_argument(
        "--throughput", nargs="+", default=None, metavar="B:RPS", help="responses/s at B (your hardware)"
    )
    p.add_argument(
        "--throughput-from", default=None, metavar="RUN_DIR",
        help="price the designs at this run's measured responses/s and FLOPs per response",
    )  # fmt: skip
    p.add_argument("--peak-flops", type=float, default=H100_PEAK_FLOPS, help="H100 peak FLOP/s (dense BF16)")
    p.add_argument("--mfu", type=float, default=ASSUMED_MFU, help="assumed model-FLOPs utilisation on it")
    p.add_argument(
        "--b-factor",
        type=float,
        default=None,
        help="also plan for the wall-time optimal B known within this factor (analysis.fits.which_b)",
    )
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples of the pilot fits")
    p.add_argument(
        "--ignore-keys", nargs="+", default=[], metavar="KEY", help="keys left out of the condition"
    )
    p.add_argument("--out", type=Path, default=None, help="write plan.csv (and plan_difference.csv) here")
    stated = p.add_argument_group("stated inputs (without pilot runs, or overriding them)")
    stated.add_argument("--sigma", type=float, default=None, help="scatter of log R at a size")
    stated.add_argument("--alpha", type=float, default=None, help="guessed exponent")
    stated.add_argument("--prefactor", type=float, default=None, help="c in R = c B^alpha (censoring)")
    stated.add_argument("--budget", type=float, default=None, help="train.max_responses")
    stated.add_argument("--eval-every", type=float, default=None, help="eval.every_responses")
    stated.add_argument("--schedule", choices=("linear", "geometric"), default="linear", help="eval.schedule")
    stated.add_argument("--first-responses", type=float, default=64, help="eval.first_responses (geometric)")
    stated.add_argument("--points-per-doubling", type=int, default=4, help="eval.points_per_doubling")
    stated.add_argument(
        "--seconds-per-rollout", type=float, nargs=2, default=None, metavar=("S0", "S1"),
        help="wall seconds per rollout = S0 + S1*B (without pilot runs)",
    )  # fmt: skip
    return p


def _check(args: argparse.Namespace) -> str | None:
    if args.width <= 0 or (args.diff_width is not None and args.diff_width <= 0):
        return "--width and --diff-width must be > 0"
    if not -1 < args.rho < 1:
        return "--rho must lie in (-1, 1)"
    if not 0.5 <= args.assurance < 1:
        return "--assurance must lie in [0.5, 1)"
    if args.min_seeds < 2:
        return "--min-seeds must be >= 2 (the bootstrap needs two runs at a size)"
    if args.sigma is not None and args.sigma <= 0:
        return "--sigma must be > 0"
    if args.b_factor is not None and args.b_factor <= 1:
        return "--b-factor must be > 1"
    if args.throughput_from is not None and (args.throughput or args.seconds_per_rollout):
        return "--throughput-from gives the rate: leave out --throughput and --seconds-per-rollout"
    if not 0 < args.mfu <= 1 or args.peak_flops <= 0:
        return "--mfu must lie in (0, 1] and --peak-flops be > 0"
    if args.source is None:
        if args.sigma is None or args.alpha is None or not args.sizes:
            return "without pilot runs, --sigma, --alpha and --sizes are required"
        if args.budget is not None and args.prefactor is None:
            return "--budget needs --prefactor (where the crossings fall against the budget)"
    if args.sizes and (len(args.sizes) < 2 or min(args.sizes) <= 0):
        return "--sizes needs at least two positive sizes"
    return None


def _with_stated(c: PilotCondition, args: argparse.Namespace) -> PilotCondition:
    """A pilot's condition with the stated values in place of the pilot's (stated values override)."""
    c.truth = Truth(
        alpha=c.truth.alpha if args.alpha is None else args.alpha,
        intercept=c.truth.intercept if args.prefactor is None else math.log(args.prefactor),
        sigma=c.truth.sigma if args.sigma is None else args.sigma,
        budget=c.truth.budget if args.budget is None else args.budget,
        budgets=c.truth.budgets if args.budget is None else (),  # a stated budget holds at every size
        schedule=c.truth.schedule
        if args.eval_every is None
        else Schedule(args.schedule, args.eval_every, args.first_responses, args.points_per_doubling),
    )
    return c


def _pilot(args: argparse.Namespace, throughput) -> list[PilotCondition]:
    """The conditions and targets of the pilot runs at ``args.source``, with the stated values applied;
    ValueError where none can be planned."""
    conds = pilot_conditions(args.source, args.targets, args.bootstrap, throughput, args.ignore_keys)
    if not conds:
        raise ValueError(f"no condition of {args.source} has a fitted exponent")
    out = []
    for c in (_with_stated(c, args) for c in conds):
        if c.truth.sigma > 0:
            out.append(c)
        else:
            print(
                f"note: {c.condition} {c.target}: the pilot gives no scatter (sigma {c.truth.sigma:g}); pass --sigma"
            )
    if not out:
        raise ValueError(f"no condition of {args.source} has a scatter; pass --sigma")
    return out


def _stated(args: argparse.Namespace, throughput) -> PilotCondition:
    """The one condition the stated numbers describe (no pilot runs)."""
    from analysis.fits.which_b import seconds_per_response_fixed

    censoring = args.budget is not None
    schedule = (
        Schedule(args.schedule, args.eval_every, args.first_responses, args.points_per_doubling)
        if args.eval_every is not None
        else None
    )
    truth = Truth(
        alpha=args.alpha,
        intercept=math.log(args.prefactor) if args.prefactor else 0.0,
        sigma=args.sigma,
        budget=args.budget if censoring else math.inf,
        schedule=schedule,
    )
    spr = None
    if throughput is not None:
        spr = seconds_per_response_fixed(throughput)
    elif args.seconds_per_rollout:
        s0, s1 = args.seconds_per_rollout
        spr = lambda b, s0=s0, s1=s1: (s0 + s1 * b) / b  # noqa: E731
    if not censoring:
        print("note: no --budget: crossings assumed exact and never censored (no resolution, no censoring)")
    return PilotCondition("stated", "alpha", truth, np.asarray(args.sizes), {}, spr)


def _condition_rows(args: argparse.Namespace, conds: list[PilotCondition]) -> list[dict]:
    """One row per condition and target: the design for ``--width`` (narrower where ``--b-factor`` needs it)."""
    from analysis.fits.which_b import b_width_to_alpha_width

    rows = []
    for c in conds:
        sizes = args.sizes if args.sizes else c.sizes
        width = args.width
        if args.b_factor is not None:
            need = b_width_to_alpha_width(args.b_factor, c.truth.alpha, c.seconds_per_response, sizes)
            if math.isfinite(need):
                width = min(width, need)
                print(
                    f"note: {c.condition} {c.target}: the wall-time optimal B within a factor "
                    f"{args.b_factor:g} needs an alpha interval of width {need:.3f}"
                )
            else:
                print(f"note: {c.condition} {c.target}: the wall-time optimum is not inside the sizes")
        d = plan_design(
            sizes,
            [c.truth],
            width,
            min_seeds=args.min_seeds,
            max_runs=args.max_runs,
            max_censored=args.max_censored,
            seconds_per_response=c.seconds_per_response,
            assurance=args.assurance,
        )
        row = design_row(c.condition, c.target, d, args.responses_per_second, c.have if c.have else None)
        row.update(alpha=c.truth.alpha, sigma=c.truth.sigma, requested_width=width)
        rows.append(row)
    return rows


def _difference_rows(args: argparse.Namespace, conds: list[PilotCondition]) -> list[dict]:
    """One row per target and pair of conditions: the design for the difference of their exponents
    (stated numbers: two conditions like the stated one)."""
    by_target: dict[str, list[PilotCondition]] = {}
    for c in conds:
        by_target.setdefault(c.target, []).append(c)
    diff_width = args.diff_width or args.width
    rows = []
    for target, group in by_target.items():
        pairs = [(a, b) for i, a in enumerate(group) for b in group[i + 1 :]]
        if args.source is None:  # stated: the difference of two conditions like this one
            pairs = [(group[0], group[0])]
        for a, b in pairs:
            sizes = args.sizes if args.sizes else np.intersect1d(a.sizes, b.sizes)
            d = plan_design(
                sizes,
                [a.truth, b.truth],
                diff_width,
                rho=args.rho,
                min_seeds=args.min_seeds,
                max_runs=args.max_runs,
                max_censored=args.max_censored,
                seconds_per_response=a.seconds_per_response,
                assurance=args.assurance,
            )
            row = design_row(f"{a.condition} vs {b.condition}", target, d, args.responses_per_second)
            row.update(n_runs=2 * d.n_runs, rho=args.rho, requested_width=diff_width)  # both conditions
            rows.append(row)
    return rows


def _priced(args: argparse.Namespace, price: MeasuredPrice | None, rows: list[dict]) -> list[dict]:
    """``--throughput-from``: the rows with the measured price's cost columns (:mod:`rlvr_study.price`)."""
    if price is not None:
        for row in rows:
            row.update(price_columns(row["responses"], price, args.peak_flops, args.mfu))
    return rows


def _hours(args: argparse.Namespace) -> list[str]:
    """The cost columns printed: the measured price's (``--throughput-from``) or the planner's."""
    if args.throughput_from is None:
        return ["wall_hours_serial", "gpu_hours"]
    gpu = ["gpu_hours"] if args.responses_per_second else []
    return ["wall_hours_serial", "hours_no_eval", "h100_hours", *gpu]


def _report(args: argparse.Namespace, rows: list[dict], diff_rows: list[dict]) -> None:
    """Print the two tables and the notes; ``--out``: write them as CSV."""
    plan = pd.DataFrame(rows)
    diff = pd.DataFrame(diff_rows)
    cols = ["condition", "target", "alpha", "sigma", "seeds_per_size", "n_runs", "planned_width"]
    cols += ["responses", *_hours(args), "p_censored", "resolution"]
    print(f"Seeds per size (B:runs) for a 95 % interval of alpha of width {args.width:g}:")
    _print_table(plan, cols + (["pilot_runs"] if "pilot_runs" in plan else []))
    if len(diff):
        print(
            f"\nSeeds per size in each of the two conditions for alpha_1 - alpha_2 to width "
            f"{args.diff_width or args.width:g} (rho = {args.rho:g}; n_runs, responses and hours count both "
            "conditions):"
        )
        _print_table(diff, ["condition", "target", "seeds_per_size", "n_runs", "planned_width", "responses",
                            *_hours(args)])  # fmt: skip
    for r in rows + diff_rows:
        if r["notes"]:
            print(f"note: {r['condition']} {r['target']}: {r['notes']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        plan.to_csv(args.out / "plan.csv", index=False)
        diff.to_csv(args.out / "plan_difference.csv", index=False)
        print(f"wrote {args.out / 'plan.csv'}")


def main(argv: list[str] | None = None) -> int:
    """``rlvr-plan`` (module docstring): a wrong input is named on stderr with exit status 2."""
    from analysis.fits.which_b import parse_throughput

    args = build_parser().parse_args(argv)
    try:
        problem = _check(args)
        if problem:
            raise ValueError(problem)
        throughput = parse_throughput(args.throughput) if args.throughput else None
        price = read_price(args.throughput_from) if args.throughput_from is not None else None
        conds = _pilot(args, throughput) if args.source is not None else [_stated(args, throughput)]
    except ValueError as err:
        print(f"rlvr-plan: {err}", file=sys.stderr)
        return 2
    if price is not None:
        print("\n".join(describe(price, args.peak_flops, args.mfu)) + "\n")
        for c in conds:
            c.seconds_per_response = price.seconds_per_response
    rows = _priced(args, price, _condition_rows(args, conds))
    _report(args, rows, _priced(args, price, _difference_rows(args, conds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
