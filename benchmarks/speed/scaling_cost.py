"""How the cost of our rollout cycle grows with the work: responses/s for B x K.

    python benchmarks/speed/scaling_cost.py [--cycles 4] [--warmup 1] [--threads 2] [--B 64,256,1024] [--K 1,8]

Same set-up as benchmarks/speed/vs_trl.py (the default config as ``rlvr-train`` composes it, the embedded
warm-started model, G = 8, at most 16 new tokens, completions stop at EOS), for B = P x 8 responses in
{64, 256, 1024} and K in {1, 8} optimizer steps per rollout (minibatches of B/K). Each (B, K) gets a
fresh trainer on a fresh copy of the model; the cycle is ``Trainer._rollout()`` (no evaluation, no
checkpoint). Reports min/median/max and pooled responses/s over ``--cycles`` cycles after
``--warmup`` (default 4 cycles: one whole period of the work the trainer does on every 4th rollout
only, the per-sample gradient-noise instrument), the median cycle time and our mean phase breakdown.
The grid is walked round-robin (one cycle of every configuration per round), so slow drifts of the
machine load spread over all of them.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_trl import OursCycle, compose_config, load_text, phases, source_text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--cycles", type=int, default=4, help=">= 3; 4 spans one period of every-4th-rollout work"
    )
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--B", default="64,256,1024", help="responses per rollout (multiples of 8)")
    ap.add_argument("--K", default="1,8", help="optimizer steps per rollout")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--override", action="append", default=[], help="extra Hydra override (repeatable)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    log = functools.partial(print, flush=True)
    grid = [(int(b), int(k)) for b in args.B.split(",") for k in args.K.split(",")]
    log(
        f"scaling_cost: torch {torch.__version__}, {torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, G={args.group}, "
        f"max {args.max_new_tokens} new tokens, stop at EOS, {args.cycles} cycles after {args.warmup} warm-up"
    )
    log(f"code: {source_text()}")
    log(f"load: {load_text()}")
    sides = {}
    for b, k in grid:
        if b % args.group or b % k:
            sys.exit(f"B={b} must be a multiple of G={args.group} and of K={k}")
        cfg, d = compose_config(b // args.group, args.group, k, args.max_new_tokens, args.override)
        sides[(b, k)] = OursCycle(cfg, d, forced=False)
    results = {key: [] for key in grid}
    for c in range(args.warmup + args.cycles):
        for key in grid:
            r = sides[key].cycle()
            if c >= args.warmup:
                results[key].append(r)
    for side in sides.values():
        side.close()
    log(f"load at end: {load_text()}")
    phase_keys = list(dict.fromkeys(k for rs in results.values() for r in rs for k in phases(r.row)))
    header = (
        f"{'B':>5} {'K':>2} {'mb':>5} {'resp/s min':>10} {'median':>7} {'max':>7} {'pooled':>7} {'cycle s':>8} "
        f"{'us/resp':>8} {'len':>5} {'zero-adv':>8} " + " ".join(f"{p[:12]:>12}" for p in phase_keys)
    )
    log(header)
    for b, k in grid:
        rs = results[(b, k)]
        rps = [r.rps for r in rs]
        wall = statistics.median(r.wall_s for r in rs)
        ph = {p: statistics.fmean(phases(r.row).get(p, 0.0) for r in rs) for p in phase_keys}
        log(
            f"{b:>5} {k:>2} {b // k:>5} {min(rps):>10.0f} {statistics.median(rps):>7.0f} {max(rps):>7.0f} "
            f"{sum(r.responses for r in rs) / sum(r.wall_s for r in rs):>7.0f} "
            f"{wall:>8.3f} {1e6 * wall / b:>8.0f} "
            f"{statistics.fmean(r.row['train/completion_length'] for r in rs):>5.2f} "
            f"{statistics.fmean(r.row['train/zero_adv_frac'] for r in rs):>8.2f} "
            + " ".join(f"{ph[p]:>12.3f}" for p in phase_keys)
        )
    log(
        "(mb = minibatch B/K; pooled = all responses / all time; us/resp = median cycle s / B; len = mean completion length; phase columns: mean "
        "seconds per cycle from our metrics rows, a phase that runs on some rollouts only counting 0 on the others)"
    )


if __name__ == "__main__":
    main()
