"""Cost of each algorithm axis per rollout cycle, as a ratio to the default cycle; and the check that the
defaults reproduce another checkout's runs bit for bit.

    python benchmarks/speed/algorithm_axes.py [--prompts 16] [--group 8] [--cycles 16] [--threads 1]
    python benchmarks/speed/algorithm_axes.py --compare-with /path/to/other/checkout [--responses 1024]

Cost: one trainer per option (loss=gspo, gspo_token, cispo, dual_clip, rollout.staleness=1 and 4,
rollout.dynamic_sampling) and one on the default (GRPO with the PPO-clipped loss), all built from the
same warm-started embedded model, each on its own copy of the weights. Their rollout cycles (generate,
score, advantages, log-probs, K steps, sync, clocks) are timed round-robin, one cycle of each option
per round in a rotating order, so that a change in machine load hits every option alike and none
always runs first; the first round is warm-up. The report gives the median seconds per cycle, the
median over rounds of the ratio to the default's cycle of the same round, and the 25th-75th
percentiles of those per-round ratios. Dynamic sampling must generate more: its line adds the
responses drawn per B and the cost per drawn response relative to the default's.

Compare: the embedded default (``--responses`` training responses, 1 thread) run by this checkout and by
the one given, in child processes with the same warm-start cache; prints the first differing metric
(wall-clock and ``perf/`` fields excluded) or "identical".
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPTIONS = {
    "default": [],
    "loss=gspo": ["loss=gspo"],
    "loss=gspo_token": ["loss=gspo_token"],
    "loss=cispo": ["loss=cispo"],
    "loss=dual_clip": ["loss=dual_clip"],
    "staleness=1": ["rollout.staleness=1"],
    "staleness=4": ["rollout.staleness=4"],
    "dynamic_sampling": ["rollout.dynamic_sampling=true"],
}


def cost(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import derive
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    common = [
        f"rollout.prompts_per_rollout={args.prompts}",
        f"rollout.group_size={args.group}",
        "eval.every_responses=100000000",
        "run.progress=false",
        "failure=none",
    ]
    base_cfg = compose(common)
    comps = build_components(base_cfg, log=lambda *_: None)
    trainers = {}
    for name, extra in OPTIONS.items():
        cfg = compose(common + extra)
        c = copy.copy(comps)
        c.model = copy.deepcopy(comps.model)
        c.engine = copy.copy(comps.engine)
        c.engine.model = c.model
        c.parallel = None
        run_dir = Path(tempfile.mkdtemp(prefix=f"rlvr_axes_{name.replace('=', '_')}_"))
        trainer = Trainer(cfg, derive(cfg), run_dir, c, log=lambda *_: None)
        trainer.state.next_eval_at = 1 << 60
        trainers[name] = trainer
    seconds = {name: [] for name in trainers}
    drawn = {name: [] for name in trainers}
    names = list(trainers)
    for rnd in range(args.cycles + 1):
        for name in names[rnd % len(names) :] + names[: rnd % len(names)]:  # rotate who goes first
            trainer = trainers[name]
            before = trainer.clocks.responses
            t = time.perf_counter()
            trainer._rollout()
            seconds[name].append(time.perf_counter() - t)
            drawn[name].append(trainer.clocks.responses - before)
    seconds = {k: v[1:] for k, v in seconds.items()}  # the first round is warm-up
    drawn = {k: v[1:] for k, v in drawn.items()}
    med = statistics.median
    b = args.prompts * args.group
    base = seconds["default"]
    print(
        f"cycle B={b} (P={args.prompts}, G={args.group}), K={trainers['default'].derived.steps_per_rollout}, "
        f"{trainers['default'].n_params:,} params, {args.threads} thread(s), {args.cycles} rounds "
        f"(load average at the end: {os.getloadavg()[0]:.2f})"
    )
    print(f"{'option':<18} {'s/cycle':>8} {'ratio':>6}  {'ratio IQR':>13}  responses drawn per B")
    for name, secs in seconds.items():
        per_round = sorted(s / d for s, d in zip(secs, base))
        q1, q3 = per_round[len(per_round) // 4], per_round[(3 * len(per_round)) // 4]
        ratio = med(per_round)
        per_b = sum(drawn[name]) / (len(drawn[name]) * b)
        line = f"{name:<18} {med(secs):8.3f} {ratio:6.3f}  [{q1:5.3f}, {q3:5.3f}]  {per_b:.3f}"
        if name == "dynamic_sampling":
            line += f"  (cost per drawn response: {ratio / per_b:.3f} x default)"
        print(line)
    comps.task.close()
    for trainer in trainers.values():
        trainer.metrics.close()
        shutil.rmtree(trainer.run_dir, ignore_errors=True)


def compare(args) -> None:
    """The default run in this checkout and in ``args.compare_with``: identical metrics rows?"""
    out = Path(tempfile.mkdtemp(prefix="rlvr_axes_compare_"))
    overrides = [
        f"train.max_responses={args.responses}",
        "run.threads=1",
        "run.progress=false",
        *args.overrides,
    ]
    results = {}
    for label, checkout in (("this", REPO), ("other", Path(args.compare_with).resolve())):
        run_dir = out / label
        env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "rlvr_scaling.cli.train", *overrides, f"hydra.run.dir={run_dir}"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{label} ({checkout}) failed:\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        results[label] = [
            {k: v for k, v in r.items() if k != "wall_seconds" and not k.startswith("perf/")} for r in rows
        ]
        print(f"{label}: {checkout} ({len(rows)} rows, {time.perf_counter() - t:.0f} s)")
    a, b = results["this"], results["other"]
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            print(f"row {i} differs: {', '.join(keys[:8])}")
            sys.exit(1)
    if len(a) != len(b):
        sys.exit(f"different row counts: {len(a)} vs {len(b)}")
    print(f"identical: {len(a)} rows, overrides {overrides}")
    shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--compare-with", help="another checkout of the project: check the default is bit-identical"
    )
    ap.add_argument("--responses", type=int, default=1024, help="budget of the compared runs")
    ap.add_argument("overrides", nargs="*", help="extra rlvr-train overrides for --compare-with")
    args = ap.parse_args()
    if args.compare_with:
        compare(args)
    else:
        cost(args)


if __name__ == "__main__":
    main()
