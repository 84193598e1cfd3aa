"""Benchmark: ``rlvr-grid`` listing a 1,000-job grid (``sweeps=two_clock`` with 100 seeds: 5 rollout
sizes x 2 reference learning rates x 100 seeds) and the 50-job ``sweeps=two_clock`` itself.

Target: <= 15 s for the 1,000 jobs on 2 cores, process start to last row. ``rlvr-grid`` composes once
per set of config-group choices and derives the jobs from that tree (``JobComposer``); before, it
composed every job with Hydra (~0.8 s each, 38 s for the 50 jobs). That per-job composition is timed
here too, on a sample of jobs (``compose_one``, the same composition a job got before, plus validation),
and extrapolated to the grid. Each measurement runs in its own process (imports included), fast and slow
interleaved round by round; the medians are printed with the load average, since the machine is shared.

    python benchmarks/speed/grid_listing.py                  # 1,000 jobs and 50 jobs, 3 rounds
    python benchmarks/speed/grid_listing.py --rounds 1 --sample 5
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def grid_args(seeds: int | None) -> list[str]:
    return ["sweeps=two_clock"] + ([f"seed={','.join(map(str, range(seeds)))}"] if seeds else [])


def child(mode: str, seeds: int | None, sample: int) -> None:
    """One measurement in this process: ``fast`` = rlvr-grid's main; ``slow`` = per-job composition."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(REPO))
    import rlvr_scaling.config  # noqa: F401 - imported by rlvr-grid too (torch): counted as imports
    from rlvr_scaling.cli import grid

    t1 = time.perf_counter()
    if mode == "fast":
        out = io.StringIO()
        with redirect_stdout(out):
            rc = grid.main(["--json", *grid_args(seeds)])
        assert rc == 0
        n = len(out.getvalue().splitlines())
        report = {"jobs": n, "import_s": t1 - t0, "list_s": time.perf_counter() - t1}
    else:
        from rlvr_scaling.config import derive, validate

        jobs = grid.sweep_jobs(grid_args(seeds))
        t2 = time.perf_counter()
        picks = [jobs[round(i * (len(jobs) - 1) / max(1, sample - 1))] for i in range(sample)]
        for job in picks:
            typed = grid.compose_one(job).config
            validate(typed)
            derive(typed)
        per_job = (time.perf_counter() - t2) / len(picks)
        report = {
            "jobs": len(jobs),
            "import_s": t1 - t0,
            "list_s": (t2 - t1) + per_job * len(jobs),  # extrapolated from the sample
            "per_job_s": per_job,
        }
    print(json.dumps(report))


def run_child(mode: str, seeds: int | None, sample: int, cwd: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, __file__, "--child", mode, "--sample", str(sample)]
    cmd += ["--seeds", str(seeds)] if seeds else []
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=3600, check=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["wall_s"] = time.perf_counter() - t
    if mode == "slow":  # the whole process as the per-job listing would have taken it
        report["wall_s"] += report["per_job_s"] * (report["jobs"] - sample)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=10, help="jobs composed one by one per slow round")
    ap.add_argument("--seeds", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=["fast", "slow"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.seeds, args.sample)
        return

    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    cases = [("1,000 jobs (sweeps=two_clock, 100 seeds)", 100), ("50 jobs (sweeps=two_clock)", None)]
    results: dict = {(name, mode): [] for name, _ in cases for mode in ("fast", "slow")}
    with tempfile.TemporaryDirectory() as cwd:  # no runs/ here: every job is new
        for r in range(args.rounds):
            for name, seeds in cases:
                for mode in ("fast", "slow"):
                    rep = run_child(mode, seeds, args.sample, cwd)
                    results[(name, mode)].append(rep)
                    print(
                        f"round {r + 1} {name} {mode}: {rep['wall_s']:.1f} s "
                        f"(imports {rep['import_s']:.1f} s, listing {rep['list_s']:.1f} s)",
                        flush=True,
                    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    for name, _ in cases:
        fast, slow = results[(name, "fast")], results[(name, "slow")]
        med = {k: statistics.median(x[k] for x in fast) for k in ("wall_s", "import_s", "list_s")}
        slow_wall = statistics.median(x["wall_s"] for x in slow)
        per_job = statistics.median(x["per_job_s"] for x in slow)
        ratio = statistics.median(s["wall_s"] / f["wall_s"] for f, s in zip(fast, slow))
        print(
            f"{name}: rlvr-grid {med['wall_s']:.1f} s process start to last row (imports "
            f"{med['import_s']:.1f} s, listing {med['list_s']:.1f} s, {fast[0]['jobs']} rows); one Hydra "
            f"composition per job: {per_job:.2f} s/job, ~{slow_wall:.0f} s for the grid; {ratio:.1f}x"
        )


if __name__ == "__main__":
    main()
