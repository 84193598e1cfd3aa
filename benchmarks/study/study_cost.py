"""Throughput per rollout size, as a study pays it: whole runs of the embedded default, evaluation included.

    python benchmarks/study/study_cost.py [--B 32,64,128,256,512] [--responses 8192] [--reps 1] [--threads 1]
                                    [--code DIR ...] [--set KEY=VALUE ...]

Each run is ``rlvr-train`` (its own process, as ``rlvr-study`` launches it) on the default config with
``rollout.prompts_per_rollout = B / 8`` (G = 8, K = 8), ``train.max_responses``, ``run.threads`` (one
thread each, as the study's two parallel jobs get) and the default evaluation schedule and instruments.
From the run's own clocks: responses/s = responses / ``wall_seconds`` (the run's active time:
generation, training, instruments, every evaluation and checkpoint; process start-up excluded), the
evaluation's share of that time (``perf/eval_s`` and ``perf/eval_screen_s`` summed), the
instruments' (``perf/noise_theta_old_s``, ``perf/noise_adam_s``, ``perf/curvature_s``), the drift
pass's (``perf/drift_s``), and the ratio of the smallest B's throughput to the largest's.

``--code DIR`` (repeatable): run the trainer of another checkout (``PYTHONPATH=DIR``, e.g. the main
branch) beside this one; runs alternate code versions for each B (A, B, A, B ...), so that load on a
shared machine hits both alike. The 1-minute load average is printed with every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
# noise.budget's instruments (Adam's noise scale with the preconditioned sharpness among them: until this
# release it was left out here, and the share printed was that of the other two)
INSTRUMENTS = ("perf/noise_theta_old_s", "perf/noise_adam_s", "perf/curvature_s")


def run_one(code: Path, b: int, args, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": str(args.threads)}
    cmd = [
        sys.executable,
        "-m",
        "rlvr_scaling.cli.train",
        f"rollout.prompts_per_rollout={b // 8}",
        f"train.max_responses={args.responses}",
        f"run.threads={args.threads}",
        "run.progress=false",
        f"hydra.run.dir={out}",
        *args.set,
    ]
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=code, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process_s = time.perf_counter() - t
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    wall, responses = rows[-1]["wall_seconds"], rows[-1]["responses"]
    eval_s = sum(r.get("perf/eval_s", 0.0) + r.get("perf/eval_screen_s", 0.0) for r in rows)
    inst_s = sum(r.get(k, 0.0) or 0.0 for r in rows for k in INSTRUMENTS)
    drift_s = sum(r.get("perf/drift_s", 0.0) or 0.0 for r in rows)
    return {
        "B": b,
        "responses_per_s": responses / wall,
        "wall_s": wall,
        "process_s": process_s,
        "eval_share": eval_s / wall,
        "instrument_share": inst_s / wall,
        "drift_share": drift_s / wall,
        "full_evals": sum("eval/accuracy" in r for r in rows),
        "eval_responses": rows[-1]["eval_responses"],
        "load": (load0 + os.getloadavg()[0]) / 2,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", default="32,64,128,256,512")
    ap.add_argument("--responses", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--code", type=Path, action="append", default=[], help="another checkout to run beside")
    ap.add_argument("--set", action="append", default=[], help="an extra rlvr-train override (repeatable)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.B.split(",")]
    codes = [HERE, *[c.resolve() for c in args.code]]
    root = Path(tempfile.mkdtemp(prefix="rlvr_study_cost_"))
    print(f"run directories in {root}")
    results: dict[tuple[str, int], list[dict]] = {}
    for rep in range(args.reps):
        for b in sizes:
            for i, code in enumerate(codes):
                r = run_one(code, b, args, root / f"c{i}_B{b}_r{rep}")
                results.setdefault((str(code), b), []).append(r)
                print(
                    f"  {code.name:<10} B={b:<4} {r['responses_per_s']:7.1f} responses/s  wall {r['wall_s']:6.1f} s "
                    f"(process {r['process_s']:5.1f} s)  eval {r['eval_share']:5.1%} ({r['full_evals']} full)  "
                    f"instruments {r['instrument_share']:5.1%}  drift {r['drift_share']:5.1%}  load {r['load']:.1f}",
                    flush=True,
                )
    med = statistics.median
    for code in codes:
        print(
            f"\n{code} ({args.responses} responses per run, {args.threads} thread(s), {args.reps} run(s) per B, median)"
        )
        print(
            "| B | responses/s | wall s | evaluation | instruments | drift pass | full evaluations | load |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for b in sizes:
            rs = results[(str(code), b)]
            print(
                f"| {b} | {med(r['responses_per_s'] for r in rs):.1f} | {med(r['wall_s'] for r in rs):.1f} | "
                f"{med(r['eval_share'] for r in rs):.1%} | {med(r['instrument_share'] for r in rs):.1%} | "
                f"{med(r['drift_share'] for r in rs):.1%} | "
                f"{med(r['full_evals'] for r in rs):.0f} | {med(r['load'] for r in rs):.1f} |"
            )
        lo, hi = min(sizes), max(sizes)
        pairs = [
            a["responses_per_s"] / c["responses_per_s"]
            for a, c in zip(results[(str(code), lo)], results[(str(code), hi)])
        ]
        print(
            f"throughput ratio B={lo} / B={hi}: {med(pairs):.2f} (per repetition: {', '.join(f'{x:.2f}' for x in pairs)})"
        )


if __name__ == "__main__":
    main()
