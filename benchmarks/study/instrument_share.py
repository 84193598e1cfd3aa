"""The instruments' share of the wall time in a study's runs: ``noise.budget`` says what it may be.

    python benchmarks/study/instrument_share.py runs/reference [runs/reference-r1 ...] [--budget 0.03]

The instruments are what ``noise.budget`` governs: the noise at theta_old (``perf/noise_theta_old_s``),
Adam's noise scale with the preconditioned sharpness (``perf/noise_adam_s``) and the curvature
(``perf/curvature_s``). A run's share is their seconds over its ``wall_seconds`` (the trainer's clock:
generation, training, evaluation, checkpoints and the instruments). Printed per condition and rollout
size (runs, median and largest share, how many runs exceed ``--budget``), and over every run (seconds
over seconds). The drift pass (``perf/drift_s``) is a training statistic the failure detectors read, not
an instrument, and is shown beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.study.study_instruments import condition_of  # noqa: E402

INSTRUMENTS = ("perf/noise_theta_old_s", "perf/noise_adam_s", "perf/curvature_s")


def run_shares(run: Path) -> tuple[float, float, float] | None:
    """(instrument seconds, drift seconds, wall seconds) of one run directory; None if unreadable."""
    try:
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return None
    if not rows or not rows[-1].get("wall_seconds"):
        return None
    inst = sum(float(r.get(k) or 0.0) for r in rows for k in INSTRUMENTS)
    drift = sum(float(r.get("perf/drift_s") or 0.0) for r in rows)
    return inst, drift, float(rows[-1]["wall_seconds"])


def group_of(name: str) -> tuple[str, int]:
    """(condition, P) from a run directory's name: the overrides without seed and rollout size."""
    size = [int(p.split("=")[1]) for p in name.split(",") if p.startswith("rollout.prompts_per_rollout=")]
    return condition_of(name), size[0] if size else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--budget", type=float, default=0.03, help="the share to compare with (noise.budget)")
    args = ap.parse_args(argv)
    for folder in args.folders:
        groups: dict[tuple[str, int], list[tuple[float, float, float]]] = defaultdict(list)
        skipped = 0
        for run in sorted(p.parent for p in folder.glob("*/metrics.jsonl")):
            got = run_shares(run)
            if got is None:
                skipped += 1
                continue
            groups[group_of(run.name)].append(got)
        print(
            f"\n{folder}: {sum(map(len, groups.values()))} runs"
            + (f" ({skipped} unreadable)" if skipped else "")
        )
        print("| condition | P | runs | instruments: median | largest | runs over the budget | drift pass |")
        print("|---|---|---|---|---|---|---|")
        for (cond, size), runs in sorted(groups.items()):
            shares = [i / w for i, _, w in runs]
            over = sum(s > args.budget for s in shares)
            drift = statistics.median(d / w for _, d, w in runs)
            print(
                f"| {cond} | {size} | {len(runs)} | {statistics.median(shares):.1%} | {max(shares):.1%} | "
                f"{over} | {drift:.1%} |"
            )
        every = [x for runs in groups.values() for x in runs]
        if every:
            inst, drift, wall = (sum(x[k] for x in every) for k in range(3))
            over = sum(i / w > args.budget for i, _, w in every)
            print(
                f"all runs: instruments {inst / wall:.2%} of the wall time ({inst:.0f} of {wall:.0f} s), "
                f"drift pass {drift / wall:.2%}; {over} of {len(every)} runs over {args.budget:.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
