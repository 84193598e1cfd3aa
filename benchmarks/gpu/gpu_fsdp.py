"""One real-model preset as a data-parallel run (FSDP2) on every GPU of a machine: a few multi-step
GRPO rollouts, reporting per-rank peak memory and throughput. Run by scripts/gpu_fsdp_check.sh
(<= 10 minutes), under torchrun with one process per GPU:

    torchrun --standalone --nproc_per_node=8 benchmarks/gpu/gpu_fsdp.py --preset qwen2.5_7b --out fsdp.json
    torchrun --standalone --nproc_per_node=2 benchmarks/gpu/gpu_fsdp.py --cpu-smoke   # the script itself, on CPU

The run composes ``model=<preset> run.parallel=fsdp`` as ``rlvr-train`` would and trains through
:func:`~rlvr_scaling.run.train`: every rank generates its prompts with its own HF engine (a full copy of
the weights), the K optimizer steps run on FSDP2 shards, the full weights are gathered into every
engine after them. With one GPU it is a process group of one (FSDP code path, nothing to shard across).
As in benchmarks/gpu/gpu_real_model.py, a preset whose weights are not on the machine is built with random
weights in its architecture (same shapes, memory and compute), responses then run to the token limit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.gpu._presets import ARCH, check_overrides, model_or_stand_in, rollout_rows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen2.5_1.5b")
    ap.add_argument("--rollouts", type=int, default=3)
    ap.add_argument("--prompts-per-rank", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--work", default=os.environ.get("OUT", "gpu_fsdp_work"), help="shared work directory")
    ap.add_argument("--cpu-smoke", action="store_true", help="check this script on CPUs (tiny stand-in)")
    ap.add_argument("--out", default=None, help="write the report (JSON) here (rank 0)")
    ap.add_argument("overrides", nargs="*", help="extra rlvr-train overrides")
    args = ap.parse_args()

    import torch

    from rlvr_scaling import distributed
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.run import train

    device = "cpu" if args.cpu_smoke else "cuda"
    if args.preset not in ARCH:
        sys.exit(f"gpu_fsdp: unknown preset {args.preset!r}; one of {sorted(ARCH)}")
    env = distributed.init(device, force=True)
    world, rank = env.world_size, env.rank
    work = Path(args.work) / f"fsdp_{args.preset}_{world}"
    prompts = args.prompts_per_rank * world
    b = prompts * args.group
    overrides = [
        *check_overrides(args.preset, prompts, args.group, args.max_new_tokens, args.rollouts, work),
        "rollout.engine=hf",
        "run.parallel=fsdp",
        "run.force=true",
    ]
    if device == "cpu":
        overrides += ["run.device=cpu", "model.dtype=float32"]
    overrides += args.overrides
    cfg = compose(overrides)
    stand_in = model_or_stand_in(
        cfg,
        args.preset,
        work,
        device,
        share=lambda make: env.broadcast_object(make() if env.is_main else None),
    )
    cuda = torch.cuda if device == "cuda" else None
    if cuda:
        cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    log = (lambda *a: print(*a, flush=True)) if env.is_main else (lambda *a: None)
    # train() uses (and at the end destroys) the process group initialised above
    state = train(cfg, work / "run", log=log)
    wall = time.perf_counter() - start
    mine = {
        "rank": rank,
        "peak_allocated_gib": round(cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "peak_reserved_gib": round(cuda.max_memory_reserved() / 2**30, 2) if cuda else None,
    }
    (work / f"rank{rank}.json").write_text(json.dumps(mine))
    if not env.is_main:
        return
    deadline = time.time() + 60
    while time.time() < deadline and not all((work / f"rank{r}.json").is_file() for r in range(world)):
        time.sleep(0.5)
    ranks = [
        json.loads((work / f"rank{r}.json").read_text())
        for r in range(world)
        if (work / f"rank{r}.json").is_file()
    ]
    train_rows, timed = rollout_rows(work / "run")

    def cycle(r: dict) -> float:  # the rollout's timed phases (generate, reward, log-probs, train, sync)
        return sum(
            v
            for k, v in r.items()
            if k.startswith("perf/")
            and k.endswith("_s")
            and k != "perf/eval_s"
            and k != "perf/responses_per_s"
        )

    cycle_s = sum(cycle(r) for r in timed)
    phases = ("perf/generate_s", "perf/old_logprob_s", "perf/train_s", "perf/sync_s")
    report = {
        "preset": args.preset,
        "stand_in_random_weights": stand_in,
        "world_size": world,
        "device": cuda.get_device_name() if cuda else "cpu (smoke test)",
        "state": state,
        "wall_s": round(wall, 1),
        "responses_per_rollout": b,
        "responses_per_s": round(sum(r["rollout/responses"] for r in timed) / max(cycle_s, 1e-9), 2),
        "tokens_per_s": round(sum(r["rollout/tokens"] for r in timed) / max(cycle_s, 1e-9), 1),
        "phases_s": {p: [r.get(p) for r in train_rows] for p in phases},
        "ranks": ranks,
        "overrides": overrides,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "overrides"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
