"""Held-out coverage on a pool of real runs: designs drawn from some seeds, truth from seeds they did not draw.

    python benchmarks/calibration/pool_coverage.py --pool pool.tar.xz --draws 200 --design-seeds 5
    python benchmarks/calibration/pool_coverage.py --runs runs/reference runs/reference-r1 --truth-seeds 0-9

Synthetic generators lack what real runs have (plateaus, noise near a target, discrete rollouts, a
horizon that censors), so an interval is checked on real runs too. The pool (``--pool``, a file of
:mod:`analysis.data.pool`, or ``--runs`` folders) is split by seed, within every condition: the *truth*
seeds (``--truth-seeds``, default the larger half of each condition's seeds) give the reference estimate
— each target's α and the common α across targets (``analysis.fits.cross``) of every condition, and
the slope of each against log10 of every numeric key with three or more values (``analysis.fits.trend``:
the η_ref trend) — from all their runs; the *design* seeds are the rest. Each draw picks
``--design-seeds`` of a condition's design seeds without replacement (the same seeds at every size: whole
seed blocks, as a study runs them; C(n, k) distinct designs from n design seeds, printed: fewer than the
draws and the coverage rests on that many), fits them exactly as ``rlvr-analyze`` and ``rlvr-study`` do
(``--bootstrap`` resamples, seed blocks), and records whether each interval holds the truth estimate.

``--truth complement`` draws the designs from every seed instead and takes each draw's truth from the
seeds that design did not draw: every draw is a fresh split, so the coverage is not one comparison of
two fixed halves repeated (designs drawn from a few seeds share them), and the truth has every seed the
design leaves (sharper than a half).

Because the truth is an estimate itself, a 95 % interval holds it less often than 95 % even when it is
exact: with truth variance ``r`` times the design's, about ``P(|Z| < 1.96 / sqrt(1 + r))`` (89 % at
r = 1/2, 92 % at r = 1/4). The table prints the truth's own interval width beside the designs' so the
reader can judge; more truth seeds make the check sharper.

Thinner evaluations (``--eval-problems K``, ``--eval-samples S``, ``--eval-every E``, with
``--eval-margin M`` the sparse schedule ``eval.sparse_every`` E, ``eval.dense_margin`` M): every design run's
evaluation rows are replaced by those the thinner evaluation would have logged, from its per-problem
record (:func:`analysis.data.pool.thinned`; the same K problems in every run: common random numbers),
while the truth keeps full evaluations. Runs without a record are left out of such designs (counted).

Output: one row per condition and clock (``target:<a>``, ``common``, ``slope:<key>:<clock>``): the truth
(point, interval width), the draws' coverage of the truth with its binomial 95 % interval, the designs'
median width, the share of draws where the interval was not identified (counted as not covering), and
the draws' mean point minus the truth, ``expected``: the coverage an exact interval would show against a
truth this noisy (from the two widths), and ``coverage_joint``: how often the design's and the truth's
points differ by less than 1.96 standard errors of their difference (each read from its interval's
facing half; 95 % for exact intervals whatever the truth's noise); a clock the truth seeds did not
identify has no coverage (blank).
``--out`` writes the rows as CSV.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analysis.data.clock_tables import ClockOptions, build_tables  # noqa: E402
from analysis.data.eval_records import problem_subset, read_eval_records  # noqa: E402
from analysis.data.load import load_source  # noqa: E402
from analysis.data.pool import thinned, unpack  # noqa: E402
from analysis.fits.cross import common_exponent_table  # noqa: E402
from analysis.fits.exponents import fit_conditions  # noqa: E402
from analysis.fits.trend import trend_table  # noqa: E402

_STATE: dict = {}
SUMMARY_COLUMNS = [
    "condition", "clock", "truth", "truth_width", "draws", "coverage", "coverage_low", "coverage_high",
    "median_width", "unidentified", "bias", "expected", "coverage_joint",
]  # fmt: skip


def parse_seeds(text: str) -> set[int]:
    """``"0-9"``, ``"0,2,4"`` or ``"0-4,10-14"`` -> the seeds."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def estimates(
    records, options: ClockOptions, n_boot: int, seed: int = 0
) -> dict[str, tuple[float, float, float]]:
    """clock name -> (point, ci_low, ci_high) for every condition's target α, common α and trend slope;
    the names are ``<condition>|target:<a>``, ``<condition>|common``, ``<series>|slope:<key>:<clock>``."""
    tables = build_tables(records, options)
    if tables.runs.empty:
        return {}
    exps, fits = fit_conditions(tables, n_boot=n_boot, seed=seed, joint_model=False)
    common = common_exponent_table(tables, fits)
    out = {}
    for _, r in exps[exps["clock"].str.startswith("target:")].iterrows():
        out[f"{r['condition']}|{r['clock']}"] = (r["exponent"], r["ci_low"], r["ci_high"])
    for _, r in common.iterrows():
        out[f"{r['condition']}|common"] = (r["exponent_common"], r["ci_low"], r["ci_high"])
    trend = trend_table(exps, fits, common, tables.varying_keys, tables=tables, n_boot=n_boot, seed=seed)
    for _, r in trend.iterrows():
        if r["clock"] == "failure":
            continue
        out[f"{r['series']}|slope:{r['key']}:{r['clock']}"] = (r["slope"], r["slope_low"], r["slope_high"])
    return out


def _init(state: dict) -> None:
    _STATE.update(state)


def _one_draw(draw: int) -> dict[str, tuple[float, float, float]]:
    s = _STATE
    rng = np.random.default_rng([s["seed"], draw])
    chosen, pilot = set(), set()
    for condition, seeds in s["design_seeds"].items():
        drawn = rng.choice(sorted(seeds), size=min(s["k"], len(seeds)), replace=False)
        chosen |= {(condition, int(seed)) for seed in drawn}
        pilot |= {(condition, int(seed)) for seed in drawn[: s["pilot"]]}
    records = [s["records"][i] for i, key in enumerate(s["keys"]) if key in chosen]
    hours = math.nan
    if s["size_factor"]:
        records, hours = size_horizons(records, s["top"], pilot, s["key_of"], s["size_factor"], s["skipped"])
    out = estimates(records, s["options"], s["n_boot"], seed=draw)
    out[COST] = (hours, math.nan, math.nan)
    if s.get("complement"):  # the truth of this draw: every seed the design did not draw, full evaluations
        held_out = [r for r, key in zip(s["truth_pool"], s["truth_keys"]) if key and key not in chosen]
        out[TRUTH] = estimates(held_out, s["truth_options"], s["n_boot"], seed=10_000 + draw)
    return out


COST = "__cost__|hours"
TRUTH = "__truth__"


def skipped_seconds(original, thin) -> list[tuple[float, float]]:
    """(responses, seconds) of the evaluations ``original`` ran that its thinner replay ``thin`` skips:
    the wall time a run with the thinner evaluation would not have spent (``perf/eval_s``)."""
    kept = {float(row["responses"]) for row in thin.rows if "eval/accuracy" in row}
    return [
        (float(row["responses"]), float(row.get("perf/eval_s", 0.0) or 0.0))
        for row in original.rows
        if "eval/accuracy" in row and float(row["responses"]) not in kept
    ]


def run_seconds(record, skipped: dict, upto: float = math.inf) -> float:
    """The wall seconds of ``record`` up to ``upto`` responses, less its skipped evaluations' (``skipped``:
    run -> :func:`skipped_seconds`)."""
    rows = [row for row in record.rows if float(row.get("responses", 0)) <= upto]
    wall = float(rows[-1].get("wall_seconds", 0.0)) if rows else 0.0
    return wall - sum(sec for at, sec in skipped.get(record.run, []) if at <= upto)


def size_horizons(
    records, top: dict, pilot: set, key_of: dict, factor: float, skipped: dict | None = None
) -> tuple[list, float]:
    """The drawn runs as a study with per-size horizons would have run them: at every (condition, B),
    ``factor`` times the slowest crossing of the top target among the design's first seeds (its
    *pilot*: ``pilot``, (condition, seed) pairs), rounded up to a whole rollout of B and capped at the
    pool's horizon (the pool's horizon where a pilot run did not cross). Each run keeps its rows up to
    its horizon and records it (``eval.horizon``), so the tables read each run to its own. ``top``: run
    -> (B, crossing of the top target, or NaN where censored, the pool's horizon). Returns the runs and
    their serial wall hours to those horizons."""
    cells: dict = {}
    for r in records:
        b, t, h = top[r.run]
        if key_of[r.run] in pilot:
            cells.setdefault((key_of[r.run][0], b), []).append((t, h))
    out, seconds = [], 0.0
    for r in records:
        b, _, h = top[r.run]
        seen = cells.get((key_of[r.run][0], b), [])
        if seen and all(np.isfinite(t) for t, _ in seen):
            h = min(h, math.ceil(factor * max(t for t, _ in seen) / b) * b)
        rows = [row for row in r.rows if float(row.get("responses", 0)) <= h]
        config = {**r.config, "eval": {**r.config.get("eval", {}), "horizon": int(h)}}
        out.append(dataclasses.replace(r, rows=rows, config=config))
        seconds += run_seconds(r, skipped or {}, h)
    return out, seconds / 3600


def _thin(records, args) -> tuple[list, int]:
    if not (args.eval_problems or args.eval_samples or args.eval_every > 1):
        return records, 0
    targets = args.targets or sorted(
        {float(a) for r in records for a in r.config.get("eval", {}).get("targets", [])}
    )
    kept, dropped = [], 0
    for r in records:
        rec = read_eval_records(r.path)
        problems = problem_subset(rec.problems, args.eval_problems) if rec and args.eval_problems else None
        t = (
            thinned(
                r,
                problems,
                args.eval_samples,
                args.eval_every,
                records=rec,
                margin=args.eval_margin,
                targets=targets,
            )
            if rec
            else None
        )
        kept += [t] if t is not None else []
        dropped += t is None
    return kept, dropped


def _binomial_ci(hits: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    lo = beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    hi = beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return float(lo), float(hi)


def summarise(truth: dict | None, draws: list[dict]) -> pd.DataFrame:
    """The coverage table; ``truth`` None: each draw holds its own truth (``--truth complement``), and
    the table's truth and truth width are the draws' mean point and median width."""
    rows = []
    names = sorted(truth) if truth is not None else sorted({n for d in draws for n in d.get(TRUTH, {})})
    for name in names:
        where, clock = name.split("|", 1)
        pairs = [
            (d.get(name), truth[name] if truth is not None else d[TRUTH].get(name, (math.nan,) * 3))
            for d in draws
        ]  # fmt: skip
        pairs = [(g, t) for g, t in pairs if np.isfinite(t[0])]  # a truth that identified the clock
        if not pairs:  # nothing to cover: the truth seeds did not identify it
            rows.append({"condition": where, "clock": clock, "truth": math.nan, "draws": len(draws)})
            continue
        point = float(np.mean([t[0] for _, t in pairs]))
        truth_width = float(np.median([t[2] - t[1] for _, t in pairs]))
        finite = [(g, t) for g, t in pairs if g is not None and np.isfinite(g[1]) and np.isfinite(g[2])]
        hits = sum(g[1] <= t[0] <= g[2] for g, t in finite)
        joint = sum(_joint_hit(g, t) for g, t in finite)
        n = len(pairs)
        median_width = float(np.median([g[2] - g[1] for g, _ in finite])) if finite else math.inf
        cov_lo, cov_hi = _binomial_ci(hits, n) if n else (math.nan, math.nan)
        rows.append(
            {
                "condition": where,
                "clock": clock,
                "truth": point,
                "truth_width": truth_width,
                "draws": n,
                "coverage": hits / n if n else math.nan,
                "coverage_low": cov_lo,
                "coverage_high": cov_hi,
                "median_width": median_width,
                "unidentified": 1 - len(finite) / n if n else math.nan,
                "bias": float(np.mean([g[0] - t[0] for g, t in finite])) if finite else math.nan,
                "expected": _expected(truth_width, median_width),
                "coverage_joint": joint / n if n else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _expected(truth_width: float, design_width: float) -> float:
    """How often an exact 95 % design interval holds a truth *estimate* whose own exact interval is
    ``truth_width`` wide: P(|Z| < 1.96 / sqrt(1 + r)), r = (truth_width / design_width)²."""
    from scipy.stats import norm

    if not (np.isfinite(truth_width) and np.isfinite(design_width) and design_width > 0):
        return math.nan
    r = (truth_width / design_width) ** 2
    return float(2 * norm.cdf(1.96 / math.sqrt(1 + r)) - 1)


def _joint_hit(design: tuple[float, float, float], truth: tuple[float, float, float]) -> bool:
    """Whether the design's point and the truth's are within 1.96 standard errors of their difference,
    each standard error read from the side of its interval that faces the other point (half-width /
    1.96): the check of an interval against an estimate that is noisy too (an exact pair passes 95 %)."""
    d, t = design, truth
    if not (np.isfinite(t[1]) and np.isfinite(t[2])):
        return d[1] <= t[0] <= d[2]
    if d[0] >= t[0]:
        se_d, se_t = (d[0] - d[1]) / 1.96, (t[2] - t[0]) / 1.96
    else:
        se_d, se_t = (d[2] - d[0]) / 1.96, (t[0] - t[1]) / 1.96
    return abs(d[0] - t[0]) <= 1.96 * math.hypot(se_d, se_t)


def _design_cost(
    records, cell_of: dict, k: int, design_seeds: dict, skipped: dict | None = None
) -> dict[str, float]:
    """The cost of one design of every condition: ``k`` seeds times the mean run of each (condition, size)
    over the design half — runs, training responses, evaluation responses (those of the thinner evaluation
    where one is replayed) and serial wall hours (as the runs measured them, their full evaluations
    included). ``cell_of``: run -> (condition, B)."""
    from collections import defaultdict

    cells: dict = defaultdict(list)
    for r in records:
        last = r.rows[-1] if r.rows else {}
        evals = sum(float(row.get("eval/responses", 0) or 0) for row in r.rows if "eval/accuracy" in row)
        cells[cell_of[r.run]].append((float(last.get("responses", 0)), evals, run_seconds(r, skipped or {})))
    k_eff = min([k, *[len(v) for v in design_seeds.values()]]) if design_seeds else k
    out = {"runs": 0.0, "responses": 0.0, "eval_responses": 0.0, "hours": 0.0}
    for values in cells.values():
        mean = np.mean(values, axis=0)
        out["runs"] += k_eff
        out["responses"] += k_eff * mean[0]
        out["eval_responses"] += k_eff * mean[1]
        out["hours"] += k_eff * mean[2] / 3600
    return out


def split(tables_runs: pd.DataFrame, truth_seeds: set[int] | None) -> tuple[dict, dict]:
    """condition -> truth seeds, condition -> design seeds (seeds run at every size of the condition)."""
    truth, design = {}, {}
    for condition, g in tables_runs.groupby("condition"):
        sizes = g.groupby("seed")["B"].nunique()
        seeds = sorted(int(s) for s, n in sizes.items() if n == g["B"].nunique())
        chosen = [s for s in seeds if s in truth_seeds] if truth_seeds else seeds[: (len(seeds) + 1) // 2]
        truth[condition] = set(chosen)
        design[condition] = set(seeds) - set(chosen)
    return truth, design


def every_seed_drawn(truth_seeds: dict, design_seeds: dict) -> tuple[dict, dict]:
    """``--truth complement``: every complete seed of a condition can be drawn (no fixed truth seeds)."""
    return {c: set() for c in design_seeds}, {c: truth_seeds[c] | design_seeds[c] for c in design_seeds}


def top_crossings(tables) -> dict:
    """run -> (B, its crossing of the top target or NaN where censored, its horizon): what
    :func:`size_horizons` reads."""
    label = f"target:{max(tables.targets):g}" if tables.targets else None
    return {
        r["run"]: (
            float(r["B"]),
            math.nan if (label is None or bool(r[f"{label}:censored"])) else float(r[label]),
            float(r["horizon"]),
        )
        for _, r in tables.runs.iterrows()
    }


def write_table(table: pd.DataFrame, out: str | None, t0: float, width: int) -> None:
    """Print the table (and its wall time), and write it as CSV to ``out`` when given."""
    with pd.option_context("display.width", width, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if out:
        table.to_csv(out, index=False)
    print(f"wall_s={time.time() - t0:.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--pool", nargs="+", help="pool files (python -m analysis.data.pool pack ...), read together"
    )
    src.add_argument("--runs", nargs="+", help="folders of run directories")
    p.add_argument("--truth-seeds", default="", help="seeds of the truth, e.g. 0-9 (default: larger half)")
    p.add_argument(
        "--truth", choices=["seeds", "complement"], default="seeds",
        help="seeds: one truth from --truth-seeds, designs from the rest; complement: designs from every "
        "seed, each draw's truth from the seeds that design did not draw (a fresh split per draw)",
    )  # fmt: skip
    p.add_argument("--design-seeds", type=int, default=5, help="seeds per condition in each design")
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--targets", type=float, nargs="*", default=None)
    p.add_argument("--crossing", default="isotonic")
    p.add_argument("--horizon", default="auto", help="auto (the runs' own) or responses")
    p.add_argument("--eval-problems", type=int, default=0, help="thinner evaluation: problems (0: all)")
    p.add_argument("--eval-samples", type=int, default=None, help="thinner evaluation: samples per problem")
    p.add_argument("--eval-every", type=int, default=1, help="thinner evaluation: every E-th evaluation")
    p.add_argument(
        "--eval-margin", type=float, default=None,
        help="with --eval-every: the sparse schedule (eval.sparse_every, eval.dense_margin = this), dense near a target",
    )  # fmt: skip
    p.add_argument(
        "--design-sizes", type=float, nargs="*", default=None,
        help="rollout sizes B the designs run (default: every size; the truth keeps every size)",
    )  # fmt: skip
    p.add_argument(
        "--design-horizon", type=float, default=None,
        help="responses up to which the designs' runs are read and priced (a shorter horizon: runs trained "
        "less far; default: the truth's)",
    )  # fmt: skip
    p.add_argument(
        "--size-horizon-factor", type=float, default=0.0,
        help="per-size horizons: each (condition, B) read to this factor times the slowest crossing of "
        "the top target among the design's first --pilot-seeds seeds (0: off)",
    )  # fmt: skip
    p.add_argument("--pilot-seeds", type=int, default=2, help="the design's seeds that fix per-size horizons")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="CSV of the rows")
    args = p.parse_args(argv)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folders = [str(unpack(p, Path(tmp) / str(i))) for i, p in enumerate(args.pool or [])] or args.runs
        records = [r for f in folders for r in load_source(f).runs]
        horizon = args.horizon if args.horizon == "auto" else float(args.horizon)
        options = ClockOptions(
            targets=tuple(args.targets) if args.targets else None, crossing=args.crossing, horizon=horizon
        )
        tables = build_tables(records, options)
        truth_seeds, design_seeds = split(tables.runs, parse_seeds(args.truth_seeds))
        complement = args.truth == "complement"
        if complement:  # every complete seed can be drawn; the truth is each draw's complement
            truth_seeds, design_seeds = every_seed_drawn(truth_seeds, design_seeds)
        key_of = {r["run"]: (r["condition"], int(r["seed"])) for _, r in tables.runs.iterrows()}
        keys = [key_of.get(r.run) for r in records]
        truth_records = [r for r, k in zip(records, keys) if k and k[1] in truth_seeds[k[0]]]
        truth = None if complement else estimates(truth_records, options, args.bootstrap)
        size_of = {r["run"]: float(r["B"]) for _, r in tables.runs.iterrows()}
        sizes = set(args.design_sizes) if args.design_sizes else set(size_of.values())
        design = [
            (r, k) for r, k in zip(records, keys)
            if k and k[1] in design_seeds[k[0]] and size_of.get(r.run) in sizes
        ]  # fmt: skip
        thin, dropped = _thin([r for r, _ in design], args)
        original = {r.run: r for r, _ in design}
        skipped = {t.run: skipped_seconds(original[t.run], t) for t in thin}
        cell_of = {r["run"]: (r["condition"], float(r["B"])) for _, r in tables.runs.iterrows()}
        if args.design_horizon:  # the runs as trained to the shorter horizon: their rows up to it
            thin = [
                dataclasses.replace(r, rows=[row for row in r.rows if float(row.get("responses", 0)) <= args.design_horizon])
                for r in thin
            ]  # fmt: skip
        design_options = (
            dataclasses.replace(options, horizon=args.design_horizon) if args.design_horizon else options
        )
        cost = _design_cost(thin, cell_of, args.design_seeds, design_seeds, skipped)
        thin_keys = [key_of.get(r.run) for r in thin]
        top = top_crossings(tables)
        if args.size_horizon_factor:
            design_options = dataclasses.replace(design_options, horizon="auto")
        state = dict(
            records=thin, keys=thin_keys, design_seeds=design_seeds, k=args.design_seeds,
            options=design_options, n_boot=args.bootstrap, seed=args.seed, size_factor=args.size_horizon_factor,
            pilot=args.pilot_seeds, top=top, key_of=key_of, skipped=skipped,
            complement=complement, truth_pool=records, truth_options=options,
            truth_keys=[k if k and k[1] in design_seeds.get(k[0], ()) else None for k in keys],
        )  # fmt: skip
        for condition in sorted(truth_seeds):
            n, k = len(design_seeds[condition]), min(args.design_seeds, len(design_seeds[condition]))
            distinct = math.comb(n, k)
            held = f"the {n - k} seeds each design leaves" if complement else sorted(truth_seeds[condition])
            print(
                f"{condition}: truth seeds {held}, "
                f"design seeds {sorted(design_seeds[condition])} (draws take {k}: {distinct} distinct designs"
                + (
                    f"; {args.draws} draws repeat them, the coverage rests on {distinct})"
                    if distinct < args.draws
                    else ")"
                )
            )
        print(
            f"design: {args.design_seeds} seeds x B = {sorted(int(b) for b in sizes)} per condition"
            + (f", read to {args.design_horizon:,.0f} responses" if args.design_horizon else "")
            + "; one design "
            f"of every condition costs {cost['runs']:.0f} runs, {cost['responses']:,.0f} training and "
            f"{cost['eval_responses']:,.0f} evaluation responses, {cost['hours']:.2f} serial hours "
            "(the design half's mean run at each condition and size, times the seeds)"
        )
        if dropped:
            print(
                f"{dropped} design runs without a readable per-problem record left out of the thinner evaluation"
            )
        with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(state,)) as ex:
            draws = list(ex.map(_one_draw, range(args.draws)))
    if args.size_horizon_factor:
        hours = [d[COST][0] for d in draws if COST in d]
        print(
            f"per-size horizons ({args.size_horizon_factor:g} x the slowest crossing of the top target among "
            f"each design's first {args.pilot_seeds} seeds): one design of every condition costs "
            f"{np.median(hours):.2f} serial hours (median over draws; {cost['hours']:.2f} at the truth's horizon)"
        )
    write_table(summarise(truth, draws), args.out, t0, width=200)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
