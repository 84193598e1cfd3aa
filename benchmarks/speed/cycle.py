"""Time one rollout cycle of the trainer against its raw parts timed alone.

    python benchmarks/speed/cycle.py [--prompts 32] [--group 8] [--steps 8] [--cycles 5] [--threads 2]
    python benchmarks/speed/cycle.py --profile [--prompts 4] [--cycles 20] [--threads 1]

Cycle: B = P*G responses (default 32*8 = 256), K = 8 optimizer steps, on the embedded default model
and task (warm-started model from the cache; built on first use). The trainer's own rollout
(generate, reward, advantages, old log-probs, K steps, clocks, logging) plus a checkpoint is timed as a
whole, then each raw operation alone on the same kind of data: engine.generate, task.score, one no-grad
forward for log-probs, K plain forward/backward/AdamW steps on B/K-response minibatches, and a
checkpoint save. Reports medians over cycles and the ratio total / sum(raw parts); goal <= 1.1.

``--profile``: instead, where the trainer's own cycles spend their time (instruments off, no
evaluation): per phase (the cycle's ``perf/`` timers) and per optimizer step (the training forward,
the backward, the step itself: gradient norm, clip, noise bookkeeping and AdamW, and the rest of the
step's loop), then the torch profiler's top operators over the same cycles.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def quiet_trainer(args, extra: list[str]):
    """A trainer on the default config with the cycle's shape (``--prompts``, ``--group``, ``--steps``) and
    ``extra`` overrides, in a fresh run directory, that never evaluates: (cfg, derived, components,
    run directory, trainer)."""
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import derive
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    cfg = compose(
        [
            f"rollout.prompts_per_rollout={args.prompts}",
            f"rollout.group_size={args.group}",
            f"optim.steps_per_rollout={args.steps}",
            "eval.every_responses=100000000",
            "run.progress=false",
            *extra,
        ]
    )
    d = derive(cfg)
    comps = build_components(cfg, log=lambda *_: None)
    run_dir = Path(tempfile.mkdtemp(prefix="rlvr_bench_"))
    trainer = Trainer(cfg, d, run_dir, comps, log=lambda *_: None)
    trainer.state.next_eval_at = 1 << 60
    return cfg, d, comps, run_dir, trainer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--skip-zero",
        action="store_true",
        help="let the trainer skip zero-advantage rows (exact, faster); off by default so that the "
        "trainer does the same work as the raw parts and the ratio measures overhead",
    )
    ap.add_argument("--profile", action="store_true", help="per-phase and per-step profile (see above)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.profile:
        profile(args)
        return

    from rlvr_scaling.engines.base import SamplingParams
    from rlvr_scaling.policy import completion_logprobs, trim_padding
    from rlvr_scaling.rundir import save_checkpoint

    cfg, d, comps, run_dir, trainer = quiet_trainer(
        args, [f"optim.skip_zero_advantage={str(args.skip_zero).lower()}"]
    )

    model, engine, task = trainer.model, trainer.engine, trainer.task
    examples = [task.train_example(i) for i in range(args.prompts)]
    params = SamplingParams(cfg.rollout.max_new_tokens, cfg.rollout.temperature)
    opt = torch.optim.AdamW([p.detach().clone().requires_grad_() for p in model.parameters()], lr=0.0)
    whole, phases = [], {k: [] for k in ("generate_s", "reward_s", "old_logprob_s", "train_s", "log_ckpt_s")}
    raw = {k: [] for k in ("generate", "reward", "logprob", "train", "checkpoint")}
    # Alternate a trainer cycle and the raw parts, so that load changes on a shared machine hit both.
    for c in range(args.cycles + 1):
        t = time.perf_counter()
        trainer._rollout()
        trainer._checkpoint()
        whole.append(time.perf_counter() - t)
        last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
        inner = 0.0
        for k in ("generate_s", "reward_s", "old_logprob_s", "train_s"):
            phases[k].append(last[f"perf/{k}"])
            inner += last[f"perf/{k}"]
        phases["log_ckpt_s"].append(whole[-1] - inner)

        g = torch.Generator().manual_seed(c)
        t = time.perf_counter()
        gen = engine.generate([e.prompt for e in examples], [args.group] * args.prompts, params, g)
        raw["generate"].append(time.perf_counter() - t)
        t = time.perf_counter()
        task.score(gen.texts, [examples[i] for i in gen.prompt_index.tolist()])
        raw["reward"].append(time.perf_counter() - t)
        ids, mask, start = trim_padding(gen.input_ids, gen.attention_mask, gen.prompt_width)
        t = time.perf_counter()
        with torch.no_grad():
            completion_logprobs(model, ids, mask, start, 1.0)
        raw["logprob"].append(time.perf_counter() - t)
        # K plain steps (forward, backward, AdamW with lr 0 on a copy) over all B responses.
        t = time.perf_counter()
        mb = len(gen) // args.steps
        for k in range(args.steps):
            rows = slice(k * mb, (k + 1) * mb)
            i2, m2, s2 = trim_padding(gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width)
            logp, _ = completion_logprobs(model, i2, m2, s2, 1.0)
            loss = -(logp * gen.completion_mask[rows, gen.prompt_width :][:, : logp.shape[1]]).sum()
            model.zero_grad()
            loss.backward()
            opt.step()
        raw["train"].append(time.perf_counter() - t)
        t = time.perf_counter()
        save_checkpoint(run_dir, "raw", model, opt, {"x": 1})
        raw["checkpoint"].append(time.perf_counter() - t)
    whole, phases = whole[1:], {k: v[1:] for k, v in phases.items()}  # drop warm-up
    raw = {k: v[1:] for k, v in raw.items()}
    zero = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["train/zero_adv_frac"]

    med = statistics.median
    total = med(whole)
    raw_sum = sum(med(v) for v in raw.values())
    print(
        f"cycle B={d.responses_per_rollout} (P={args.prompts}, G={args.group}), K={args.steps}, "
        f"{trainer.n_params:,} params, {args.threads} threads, {args.cycles} cycles (median)"
    )
    print(f"  trainer cycle total      {total:7.3f} s   ({d.responses_per_rollout / total:6.0f} responses/s)")
    for k, v in phases.items():
        print(f"    {k:<22} {med(v):7.3f} s")
    print("  raw parts alone")
    for k, v in raw.items():
        print(f"    {k:<22} {med(v):7.3f} s")
    print(f"  sum of raw parts         {raw_sum:7.3f} s")
    if args.skip_zero:
        print(f"  (zero-advantage fraction of the last rollout: {zero:.2f}; the trainer skipped those rows,")
        print("   the raw parts train on all rows, so a ratio below 1 is the skipping's gain)")
    print(f"ratio={total / raw_sum:.3f}")


def profile(args) -> None:
    """Per-phase and per-optimizer-step time of the trainer's cycles (``--profile``)."""
    import collections
    import functools

    import rlvr_scaling.optimize as optimize

    spent: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()

    def timed(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                spent[label] += time.perf_counter() - t
                calls[label] += 1

        setattr(owner, name, wrapper)

    timed(optimize.PolicyOptimizer, "run", "K steps (all)")
    timed(optimize.PolicyOptimizer, "_forward", "forward")
    timed(torch.Tensor, "backward", "backward")
    timed(optimize.PolicyOptimizer, "_step", "step: norm, clip, noise, AdamW")
    timed(torch.optim.AdamW, "step", "  of which AdamW")
    timed(optimize.NoiseEstimator, "observe", "  of which noise bookkeeping")
    timed(optimize, "policy_loss", "loss")
    cfg, d, comps, run_dir, trainer = quiet_trainer(
        args, ["noise.at_theta_old=false", "noise.curvature_every_rollouts=0"]
    )
    for _ in range(3):  # warm-up
        trainer._rollout()
    spent.clear()
    calls.clear()
    t = time.perf_counter()
    for _ in range(args.cycles):
        trainer._rollout()
    whole = (time.perf_counter() - t) / args.cycles
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()[-args.cycles :]]
    steps = calls["step: norm, clip, noise, AdamW"]
    print(
        f"profile B={d.responses_per_rollout} (P={args.prompts}, G={args.group}), K={args.steps}, "
        f"{args.threads} thread(s), {args.cycles} cycles: {whole:.4f} s a cycle "
        f"({d.responses_per_rollout / whole:.0f} responses/s), {steps / args.cycles:.1f} steps a cycle"
    )
    print("  phases (mean s a cycle, share)")
    for key in sorted(k for k in rows[-1] if k.startswith("perf/") and k.endswith("_s") and "per_s" not in k):
        v = statistics.fmean(r.get(key, 0.0) for r in rows)
        print(f"    {key[5:]:<22} {v:8.4f}  {v / whole:6.1%}")
    per_step = {k: v / max(steps, 1) for k, v in spent.items()}
    other = per_step["K steps (all)"] - sum(
        per_step.get(k, 0.0) for k in ("forward", "backward", "step: norm, clip, noise, AdamW", "loss")
    )
    print("  per optimizer step (ms; forward/backward/loss run only on steps with non-zero-advantage rows)")
    for k in ("forward", "backward", "loss", "step: norm, clip, noise, AdamW", "  of which AdamW"):
        print(f"    {k:<34} {per_step.get(k, 0.0) * 1e3:7.2f}")
    print(
        f"    {'  of which noise bookkeeping':<34} {per_step.get('  of which noise bookkeeping', 0.0) * 1e3:7.2f}"
    )
    print(f"    {'rest of the loop':<34} {other * 1e3:7.2f}")
    print(f"    {'all':<34} {per_step['K steps (all)'] * 1e3:7.2f}")
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(max(2, args.cycles // 4)):
            trainer._rollout()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


if __name__ == "__main__":
    main()
