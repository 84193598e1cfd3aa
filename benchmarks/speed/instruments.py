"""The cost of the measuring instruments per cycle, as ratios to a plain cycle, and B_noise two ways.

    python benchmarks/speed/instruments.py [--prompts 32] [--group 8] [--steps 8] [--reps 6] [--threads 2]

One trainer on the embedded default (B = P*G = 256, K = 8; warm-started model from the cache) runs
whole cycles (``Trainer._rollout``) in an interleaved order, plain / noise / noise+curvature, plain, ...
so that load on a shared machine hits every variant alike:

- ``plain``: noise at theta_old off, curvature off (the end-of-rollout drift pass and the K-gradient
  trajectory estimator, both always on, are part of it; the drift pass's share is reported from
  ``perf/drift_s``);
- ``noise``: the noise estimates at theta_old (``noise.at_theta_old``, one extra backward over
  about B/K responses);
- ``curvature``: noise plus the curvature instruments on this rollout (what a measuring rollout costs).

Reported: median cycle seconds, each variant's ratio to plain (median of per-repetition ratios), the
amortised cost of curvature at a cadence c, (curvature - noise) / c, the cadence that keeps all
instruments within 10 % of a cycle, and all instruments' share at the configured default cadences.
Then the gradient-noise scale over every measured rollout, as a ratio of means tr Sigma / |G|^2: from the K minibatch gradients at successive parameters
(``noise/multistep_*``, the estimator before the one-point fix) and at theta_old (``noise/*``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch


def _num(v) -> float:
    """A metrics value as a float (non-finite values are written as strings)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def print_measurements(rows: dict[str, list[dict]]) -> None:
    """B_noise two ways, the within/between-prompt split and the curvature medians of the measured cycles."""
    med = statistics.median
    measured = [r for name in ("noise", "curvature") for r in rows[name]]

    def scale(prefix: str) -> str:
        tr = [_num(r.get(f"noise/{prefix}trace_cov")) for r in measured]
        tr = [x for x in tr if math.isfinite(x)]
        gs = [_num(r.get(f"noise/{prefix}grad_norm_sq")) for r in measured]
        gs = [x for x in gs if math.isfinite(x)]
        if not tr or not gs or not statistics.fmean(gs) > 0:
            return "n/a"  # no measurement, or no learning signal in the measured rollouts
        return (
            f"mean tr Sigma {statistics.fmean(tr):.4g}, mean |G|^2 {statistics.fmean(gs):.4g}, "
            f"B_noise {statistics.fmean(tr) / statistics.fmean(gs):.4g}"
        )

    print(f"  B_noise, K gradients at successive parameters (before): {scale('multistep_')}")
    print(f"  B_noise, at theta_old (after):                          {scale('')}")
    within = statistics.fmean(r["noise/trace_cov_within"] for r in measured)
    between = statistics.fmean(r["noise/trace_cov_between"] for r in measured)
    print(f"  tr Sigma within prompts {within:.4g}, between prompts {between:.4g}")
    curv = rows["curvature"]
    for key in ("curv/gHg", "curv/uHu", "curv/trace_hsigma", "curv/b_crit", "curv/top_eig"):
        vals = [_num(r.get(key)) for r in curv if math.isfinite(_num(r.get(key)))]
        print(f"  {key:<18} median {med(vals):.4g} over {len(vals)} rollouts" if vals else f"  {key}: n/a")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=None, help="lr.ref_lr (default: the config's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from rlvr_scaling.compose import compose
    from rlvr_scaling.config import derive
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    overrides = [
        f"rollout.prompts_per_rollout={args.prompts}",
        f"rollout.group_size={args.group}",
        f"optim.steps_per_rollout={args.steps}",
        "eval.every_responses=100000000",
        "run.progress=false",
        "noise.curvature_every_rollouts=1",
    ]
    if args.lr is not None:
        overrides.append(f"lr.ref_lr={args.lr}")
    defaults = compose(overrides[:-1]).noise  # the cadences a default run uses
    cfg = compose(overrides)
    d = derive(cfg)
    comps = build_components(cfg, log=lambda *_: None)
    run_dir = Path(tempfile.mkdtemp(prefix="rlvr_bench_"))
    trainer = Trainer(cfg, d, run_dir, comps, log=lambda *_: None)
    trainer.state.next_eval_at = 1 << 60
    inst = trainer.theta_old

    variants = {"plain": (False, 0), "noise": (True, 0), "curvature": (True, 1)}
    times: dict[str, list[float]] = {k: [] for k in variants}
    rows: dict[str, list[dict]] = {k: [] for k in variants}
    for rep in range(args.reps + 1):
        for name, (on, every) in variants.items():
            inst.on, inst.curvature_every, inst.every = on, every, 1
            t = time.perf_counter()
            trainer._rollout()
            elapsed = time.perf_counter() - t
            if rep == 0:
                continue  # warm-up
            times[name].append(elapsed)
            rows[name].append(json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1]))

    med = statistics.median
    plain = times["plain"]
    print(
        f"cycle B={d.responses_per_rollout} (P={args.prompts}, G={args.group}), K={args.steps}, "
        f"{trainer.n_params:,} params, {args.threads} threads, {args.reps} interleaved repetitions "
        f"(hvp: {inst.hvp_kind}, {inst.prompts} prompts at theta_old, {inst.iterations} power iterations)"
    )
    ratios = {}
    for name in variants:
        ratios[name] = med([a / b for a, b in zip(times[name], plain)])
        print(f"  {name:<10} {med(times[name]):7.3f} s   ratio to plain {ratios[name]:.3f}")
    drift = med([r["perf/drift_s"] for r in rows["plain"]])
    print(f"  drift pass (in plain)     {drift:7.3f} s   = {drift / (med(plain) - drift):.3f} of the rest")
    noise_cost = ratios["noise"] - 1.0
    curv_cost = ratios["curvature"] - ratios["noise"]
    for c in (1, 4, 8, 16, 32):
        print(
            f"  curvature every {c:>2}: instruments at theta_old cost {noise_cost + curv_cost / c:+.3f} of a cycle"
        )
    budget = 0.10 - noise_cost
    need = math.ceil(curv_cost / budget) if budget > 0 else math.inf
    print(f"  cadence within 10 % (noise + curvature): every >= {need} rollouts")

    # the same costs from each cycle's own phase timers (perf/...), robust to load that changes between
    # cycles: the instrument's seconds over the rest of the same cycle
    def share(name: str, key: str) -> float:
        vals = []
        for r, whole in zip(rows[name], times[name]):
            inst = _num(r.get(key))
            if math.isfinite(inst):
                vals.append(inst / (whole - inst))
        return med(vals) if vals else math.nan

    noise_share = share("noise", "perf/noise_theta_old_s")
    curv_share = share("curvature", "perf/curvature_s")
    print(
        f"  in-cycle timers: noise at theta_old {noise_share:.3f} of a cycle, a curvature measurement {curv_share:.3f}"
    )
    drift_share = drift / (med(plain) - drift)
    for c in (16, 32, 64):
        total = noise_share + curv_share / c + drift_share
        print(f"    with the drift pass and curvature every {c:>2}: all instruments {total:.3f} of a cycle")
    # at the configured default cadences (conf/noise/default.yaml): what a default run pays per cycle
    nd, cd = defaults.at_theta_old_every_rollouts, defaults.curvature_every_rollouts
    if nd is None or cd is None:  # a budgeted cadence: the budget is the instruments' share
        print(
            f"  at the defaults (noise and curvature within noise.budget = {defaults.budget:.0%} of the wall "
            f"time, drift every rollout): all instruments ~{defaults.budget + drift_share:.3f} of a cycle"
        )
    else:
        by_ratio = noise_cost / nd + (curv_cost / cd if cd else 0.0) + drift_share
        by_timer = noise_share / nd + (curv_share / cd if cd else 0.0) + drift_share
        print(
            f"  at the defaults (noise every {nd}, curvature every {cd}, drift every rollout): all instruments "
            f"{by_ratio:.3f} (whole-cycle ratios) / {by_timer:.3f} (in-cycle timers) of a cycle"
        )
    print_measurements(rows)
    print(f"ratio_noise={ratios['noise']:.3f} ratio_curvature={ratios['curvature']:.3f}")


if __name__ == "__main__":
    main()
