"""The cost of the embedded family per size: warm start, starting accuracy, responses/s and evaluation share.

    python benchmarks/speed/model_sizes.py [--models embedded,embedded_4m,embedded_16m] [--P 16]
        [--responses 1024] [--threads 1] [--cache-dir DIR] [--out DIR] [--full-responses 16384]
        [--override KEY=VALUE ...]

For each ``model=<name>`` one short ``rlvr-train`` run with the model-size study's settings
(studies/model_size.yaml: clipped loss, square-root rule at eta_ref = 1e-5, K = 8, G = 8, the default
evaluation: mean pass@1 over 8 samples on the 256 held-out problems at geometric points) at
``P = --P`` prompts per rollout, to ``--responses`` responses, seed 0, on ``--threads`` torch threads.
The warm start is trained on first use and cached under ``--cache-dir`` (run.cache_dir), so the first
call of a size times it (``[warm start] done in ... s`` in the run's log; a cached one is read, not
trained: run with an empty cache dir to time it). Printed per size: N (parameters), warm-start seconds
(or "cached"), the step-0 accuracy (the warm start's, as every run of the study starts), responses/s
over the run and without evaluation, seconds per evaluation, and the estimated wall time of one study
run of ``--full-responses`` responses at this B: its training responses at the rate without evaluation
plus its evaluations (the default schedule's points, as the trainer places them at rollout boundaries)
at the measured seconds each. The machine's load is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

STUDY_OVERRIDES = [
    "lr=sqrt",
    "loss=clipped",
    "lr.ref_lr=1.0e-5",
    "optim.steps_per_rollout=8",
    "rollout.group_size=8",
    "train.stop_at_targets=false",
    "seed=0",
]


def eval_count(responses: int, size: int, e) -> int:
    """Evaluations of a run of ``responses`` at rollout size ``size`` under the eval config ``e``: step 0
    and the first rollout boundary at or past each scheduled point (rlvr_scaling.eval_schedule)."""
    from rlvr_scaling.eval_schedule import next_eval_point

    count, due, done = 1, next_eval_point(e, 0), 0
    while done + size <= responses:
        done += size
        if done >= due:
            count += 1
            due = next_eval_point(e, done)
    return count


def load_text() -> str:
    return (
        " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    )


def run_one(model: str, args, env: dict) -> dict:
    from rlvr_study.price import read_price

    run_dir = args.out / model
    cmd = [
        str(Path(sys.executable).parent / "rlvr-train"),
        f"model={model}",
        *STUDY_OVERRIDES,
        f"rollout.prompts_per_rollout={args.P}",
        f"train.max_responses={args.responses}",
        f"run.cache_dir={args.cache_dir}",
        f"run.threads={args.threads}",
        "run.force=true",
        "run.progress=false",
        f"hydra.run.dir={run_dir}",
        *args.override,
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.exit(f"model={model}: rlvr-train exited {proc.returncode}:\n{log[-3000:]}")
    warm = re.search(r"\[warm start\] done in ([0-9.]+) s", log)
    price = read_price(run_dir)
    import json

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/accuracy" in r]
    return {
        "model": model,
        "parameters": price.parameters,
        "warm_s": float(warm.group(1)) if warm else None,
        "warm_from": "shipped" if "shipped warm start" in log else "cached",
        "start_accuracy": evals[0]["eval/accuracy"] if evals else float("nan"),
        "rate": price.rate,
        "rate_no_eval": price.rate_no_eval,
        "eval_s": price.eval_seconds / max(len(evals), 1),
        "n_evals": len(evals),
        "process_s": seconds,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="embedded,embedded_4m,embedded_16m")
    ap.add_argument("--P", type=int, default=16, help="prompts per rollout (B = 8 P)")
    ap.add_argument("--responses", type=int, default=1024, help="train.max_responses of each short run")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache-dir", type=Path, default=Path(os.path.expanduser("~/.cache/rlvr_scaling")))
    ap.add_argument("--out", type=Path, default=Path("/tmp/rlvr_model_sizes"))
    ap.add_argument("--full-responses", type=int, default=16384, help="responses of one study run")
    ap.add_argument("--override", action="append", default=[], help="extra Hydra override (repeatable)")
    args = ap.parse_args(argv)
    from rlvr_scaling.cli.compose import compose

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(args.threads)}
    size = 8 * args.P
    e = compose([]).eval
    n_full = eval_count(args.full_responses, size, e)
    print(
        f"model_sizes: B = {size}, {args.responses} responses per short run, {args.threads} thread(s), {os.cpu_count()} CPUs"
    )
    print(f"load before: {load_text()}", flush=True)
    results = [run_one(m, args, env) for m in args.models.split(",")]
    predicted = eval_count(args.responses, size, e)
    print(f"load after: {load_text()}")
    print(f"evaluations per short run: {[r['n_evals'] for r in results]} (schedule predicts {predicted})")
    print(
        f"one study run: {args.full_responses} responses at B = {size}, {n_full} evaluations (default schedule)"
    )
    head = f"{'model':<14} {'N':>11} {'warm start':>11} {'acc@0':>6} {'resp/s':>7} {'no eval':>8} {'s/eval':>7} {'evals':>5} {'study run':>10} {'eval share':>10}"
    print(head)
    for r in results:
        train_s = args.full_responses / r["rate_no_eval"]
        eval_s = n_full * r["eval_s"]
        warm = f"{r['warm_s']:.0f} s" if r["warm_s"] is not None else r["warm_from"]
        print(
            f"{r['model']:<14} {r['parameters'] or 0:>11,} {warm:>11} {r['start_accuracy']:>6.3f} {r['rate']:>7.1f} "
            f"{r['rate_no_eval']:>8.1f} {r['eval_s']:>7.1f} {r['n_evals']:>5} {(train_s + eval_s) / 60:>8.1f} m "
            f"{eval_s / (train_s + eval_s):>10.0%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
