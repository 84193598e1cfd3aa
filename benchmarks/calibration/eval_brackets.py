"""Thinner evaluations on a pool of real runs: do their crossing brackets agree with the full evaluation's, and
what do they save?

    python benchmarks/calibration/eval_brackets.py --pool pool.tar.xz --targets 0.22 0.25 0.28
    python benchmarks/calibration/eval_brackets.py --runs runs/pool --designs 256:8:1 256:4:1 256:4:2 128:4:2

Every run of the pool was evaluated in full (every problem of the held-out set, every sample, at every
point of its schedule) and kept the per-problem record of each evaluation (``eval_problems.jsonl``), so a
thinner evaluation — ``K`` problems (a fixed draw, the same in every run: common random numbers), the
first ``S`` samples of each, every ``E``-th evaluation point — is an exact subsample of it
(:func:`analysis.data.pool.thinned`). For each design ``K:S:E`` and each run and target, the crossing is
read with the study's rule (``--crossing``, default ``isotonic``, up to the runs' horizon) on the thinner
curve and on the full one, and compared:

* **agrees**: both censored within the horizon, or both crossed with the full evaluation's bracket
  ``[lower, upper]`` inside the thinner one's (a coarser cadence widens the bracket; it must still hold
  the crossing the full evaluation saw);
* **overlaps**: both crossed, the brackets overlap but the full one is not inside;
* **disjoint**: both crossed, brackets apart (the thinner evaluation's noise moved the crossing);
* **censoring differs**: one crossed within the horizon, the other not.

Cost: the evaluation responses of the design over the full evaluation's (exact), and the wall time of
the runs with the evaluation seconds scaled by that fraction run by run (an estimate: each run's
``perf/eval_s`` summed over its evaluations, taken as proportional to the responses evaluated; a smaller
generation batch is somewhat less efficient, so the saving is an upper bound). Precision is what
``benchmarks/calibration/pool_coverage.py`` measures with the same ``--eval-*`` flags.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analysis.data.clock_options import target_label  # noqa: E402
from analysis.data.clock_tables import ClockOptions, build_tables  # noqa: E402
from analysis.data.eval_records import problem_subset, read_eval_records  # noqa: E402
from analysis.data.load import load_source  # noqa: E402
from analysis.data.pool import thinned, unpack  # noqa: E402

OUTCOMES = ("agrees", "overlaps", "disjoint", "censoring differs")
COLUMNS = [
    "design",
    "problems",
    "samples",
    "every",
    "pairs",
    *OUTCOMES,
    "agreement",
    "eval_cost",
    "wall_cost",
]


def parse_design(text: str) -> tuple[int, int, int, float]:
    """``K:S:E`` or ``K:S:E:M`` -> (problems, samples, every, margin); K = 0 keeps every problem, no M
    (or M < 0): every E-th point, else the sparse schedule (``eval.sparse_every`` E, ``eval.dense_margin`` M:
    :func:`analysis.data.pool.sparse_points`)."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise argparse.ArgumentTypeError(f"a design is PROBLEMS:SAMPLES:EVERY[:MARGIN], got {text!r}")
    margin = float(parts[3]) if len(parts) == 4 else -1.0
    return int(parts[0]), int(parts[1]), int(parts[2]), margin


def compare(full: pd.DataFrame, thin: pd.DataFrame, targets) -> dict[str, int]:
    """Counts of the outcomes (``OUTCOMES``) over every run in both tables and every target."""
    counts = dict.fromkeys(OUTCOMES, 0)
    joined = full.set_index("run").join(thin.set_index("run").add_suffix("~"), how="inner")
    for a in targets:
        label = target_label(a)
        for _, r in joined.iterrows():
            cf, ct = bool(r[f"{label}:censored"]), bool(r[f"{label}:censored~"])
            if cf or ct:
                counts["agrees" if cf and ct else "censoring differs"] += 1
                continue
            lf, uf = _ends(r[f"{label}:lower"], r[label])
            lt, ut = _ends(r[f"{label}:lower~"], r[f"{label}~"])
            if lt <= lf and uf <= ut:
                counts["agrees"] += 1
            elif lf <= ut and lt <= uf:
                counts["overlaps"] += 1
            else:
                counts["disjoint"] += 1
    return counts


def _ends(lower, upper) -> tuple[float, float]:
    upper = float(upper)
    lower = float(lower) if lower is not None and math.isfinite(float(lower)) else upper
    return lower, upper


def eval_seconds(record) -> float:
    return float(
        sum(float(row.get("perf/eval_s", 0.0) or 0.0) for row in record.rows if "eval/accuracy" in row)
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--pool", nargs="+", help="pool files (python -m analysis.data.pool pack ...), read together"
    )
    src.add_argument("--runs", nargs="+", help="folders of run directories")
    p.add_argument(
        "--designs", type=parse_design, nargs="+", metavar="K:S:E",
        default=[parse_design(d) for d in ("0:8:1", "0:4:1", "0:8:2", "0:4:2", "128:8:1", "0:8:2:0.03", "0:8:3:0.03", "0:4:2:0.03")],
        help="thinner evaluations: problems (0: all), samples, every E-th point",
    )  # fmt: skip
    p.add_argument("--targets", type=float, nargs="*", default=None)
    p.add_argument("--crossing", default="isotonic")
    p.add_argument("--horizon", default="auto", help="auto (the runs' own) or responses")
    p.add_argument("--out", default=None, help="CSV of the rows")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folders = [str(unpack(p, Path(tmp) / str(i))) for i, p in enumerate(args.pool or [])] or args.runs
        records = [r for f in folders for r in load_source(f).runs]
        evals = {r.run: read_eval_records(r.path) for r in records}
    records = [r for r in records if evals[r.run] is not None]
    if not records:
        print("eval_brackets: no run with a per-problem record", file=sys.stderr)
        return 2
    horizon = args.horizon if args.horizon == "auto" else float(args.horizon)
    options = ClockOptions(
        targets=tuple(args.targets) if args.targets else None, crossing=args.crossing, horizon=horizon
    )
    full = build_tables(records, options)
    targets = full.targets
    n_problems = {r.run: evals[r.run].problems for r in records}
    n_samples = {r.run: evals[r.run].samples for r in records}
    wall = {r.run: float(r.rows[-1].get("wall_seconds", math.nan)) for r in records}
    eval_s = {r.run: eval_seconds(r) for r in records}
    print(
        f"{len(records)} runs, targets {list(targets)}, crossing {args.crossing}; full evaluation: "
        f"{sorted(set(n_problems.values()))} problems x {sorted(set(n_samples.values()))} samples; "
        f"evaluation {sum(eval_s.values()) / np.nansum(list(wall.values())):.0%} of the runs' wall time"
    )
    rows = []
    for k, s, e, m in args.designs:
        thin, spent, full_spent, seconds = [], 0.0, 0.0, 0.0
        for r in records:
            rec = evals[r.run]
            problems = problem_subset(rec.problems, k) if 0 < k < rec.problems else None
            margin = m if m >= 0 else None
            t = thinned(r, problems, min(s, rec.samples), e, records=rec, margin=margin, targets=targets)
            if t is None:
                continue
            thin.append(t)
            n_full = sum("eval/accuracy" in row for row in r.rows)
            n_thin = sum("eval/accuracy" in row for row in t.rows)
            used = n_thin * (problems.size if problems is not None else rec.problems) * min(s, rec.samples)
            frac = used / (n_full * rec.problems * rec.samples)
            spent += used
            full_spent += n_full * rec.problems * rec.samples
            seconds += wall[r.run] - eval_s[r.run] * (1 - frac)
        counts = compare(full.runs, build_tables(thin, options).runs, targets)
        pairs = sum(counts.values())
        rows.append(
            {
                "design": f"{k or 'all'}:{s}:{e}" + (f":{m:g}" if m >= 0 else ""), "problems": k, "samples": s, "every": e, "pairs": pairs,
                **counts, "agreement": counts["agrees"] / pairs if pairs else math.nan,
                "eval_cost": spent / full_spent, "wall_cost": seconds / np.nansum(list(wall.values())),
            }
        )  # fmt: skip
    table = pd.DataFrame(rows, columns=COLUMNS)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
