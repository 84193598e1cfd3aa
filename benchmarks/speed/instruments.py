"""The cost of the measuring instruments per cycle, as ratios to a plain cycle, and B_noise two ways.

    python benchmarks/speed/instruments.py [--prompts 32] [--group 8] [--steps 8] [--reps 6] [--threads 2]
    python benchmarks/speed/instruments.py --model smollm2_135m --adam --reps 2 --threads 1 --warmup plain --hvp finite_difference

One trainer on the embedded default (B = P*G = 256, K = 8; warm-started model from the cache), or on a
model preset (``--model NAME`` composes ``model=NAME``; its own P, G and K unless given), runs whole
cycles (``Trainer._rollout``) in an interleaved order, plain / noise / noise+curvature, plain, ...
so that load on a shared machine hits every variant alike:

- ``plain``: noise at theta_old off, curvature off (the end-of-rollout drift pass and the K-gradient
  trajectory estimator, both always on, are part of it; the drift pass's share is reported from
  ``perf/drift_s``);
- ``noise``: the noise estimates at theta_old (``noise.at_theta_old``, one extra backward over
  about B/K responses);
- ``curvature``: noise plus the curvature instruments on this rollout (what a measuring rollout costs);
- with ``--adam``, also ``adam``: noise plus Adam's noise scale (``noise.adam_noise``, cells over all the
  rollout's prompts), and ``all``: noise, Adam noise and curvature (Adam's preconditioned sharpness
  ``curv/adam_*`` runs only there).

Besides seconds, each cycle's peak resident memory (Linux: ``VmHWM`` of this process, reset at the
start of the cycle through ``/proc/self/clear_refs``): the peak above the RSS at the cycle's start is
what the variant's passes hold at once (with curvature by double backward, the kept graph of the
gradient at theta_old; the allocator keeps what an earlier cycle freed, so read the peaks of a variant
that follows a dearer one as upper bounds, its rise as a lower one). An instrument whose subsample
has no learning signal (every advantage 0) skips its passes: such cycles are cheap. With ``--model``,
a per-instrument table: seconds per call (in-cycle timers),
share of the rest of its cycle, peak memory, and the cadence the budget rule
(``rlvr_scaling/instrument_budget.py``: ``noise.budget`` of the wall time, shared among the null
cadences) gives at steady state, evaluations left out.

Reported: median cycle seconds, each variant's ratio to plain (median of per-repetition ratios), the
amortised cost of curvature at a cadence c, (curvature - noise) / c, the cadence that keeps all
instruments within 10 % of a cycle, and all instruments' share at the configured default cadences.
Then the gradient-noise scale over every measured rollout, as a ratio of means tr Sigma / |G|^2: from the K minibatch gradients at successive parameters
(``noise/multistep_*``, the estimator before the one-point fix) and at theta_old (``noise/*``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
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
    measured = [r for name in ("noise", "adam", "curvature", "all") for r in rows.get(name, [])]

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


def _rss_kib(field: str) -> float:
    """This process's ``VmRSS`` / ``VmHWM`` in KiB (NaN where /proc is not Linux's)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return math.nan
    m = re.search(rf"{field}:\s+(\d+)", text)
    return float(m.group(1)) if m else math.nan


def _reset_peak() -> None:
    """Reset ``VmHWM`` to the current RSS (Linux >= 4.0; a no-op elsewhere)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _overrides(args) -> list[str]:
    out = [] if args.model is None else [f"model={args.model}"]
    sizes = {"prompts": args.prompts, "group": args.group, "steps": args.steps}
    if args.model is None:  # the embedded default's benchmark shape
        sizes = {k: v if v is not None else d for (k, v), d in zip(sizes.items(), (32, 8, 8))}
    keys = {
        "prompts": "rollout.prompts_per_rollout",
        "group": "rollout.group_size",
        "steps": "optim.steps_per_rollout",
    }
    out += [f"{keys[k]}={v}" for k, v in sizes.items() if v is not None]
    out += ["eval.every_responses=100000000", "run.progress=false", f"run.threads={args.threads}"]
    if args.lr is not None:
        out.append(f"lr.ref_lr={args.lr}")
    if args.hvp is not None:
        out.append(f"noise.hvp={args.hvp}")
    return out


def _measure(trainer, variants: dict, reps: int, run_dir: Path, warmup: str) -> tuple[dict, dict, dict]:
    """Seconds, metrics rows and memory (KiB: RSS at the start, peak) per variant, ``reps`` interleaved
    repetitions after one warm-up round (``warmup``: all variants, or one plain cycle)."""
    inst = trainer.theta_old
    times: dict[str, list[float]] = {k: [] for k in variants}
    rows: dict[str, list[dict]] = {k: [] for k in variants}
    mem: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
    for rep in range(reps + 1):
        for name, (on, every, adam) in variants.items():
            if rep == 0 and warmup == "plain" and name != "plain":
                continue
            inst.on, inst.curvature_every, inst.every = on, every, 1
            trainer.cfg.noise.adam_noise = adam
            start_rss = _rss_kib("VmRSS")
            _reset_peak()
            t = time.perf_counter()
            trainer._rollout()
            elapsed = time.perf_counter() - t
            if rep == 0:
                continue  # warm-up
            times[name].append(elapsed)
            mem[name].append((start_rss, _rss_kib("VmHWM")))
            rows[name].append(json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1]))
    return times, rows, mem


def _timer_share(rows: list[dict], times: list[float], keys: tuple[str, ...]) -> tuple[float, float]:
    """Median seconds of the ``perf/`` timers ``keys`` together, and of their share of the rest of the
    same cycle (robust to load that changes between cycles)."""
    secs, shares = [], []
    for r, whole in zip(rows, times):
        inst = sum(_num(r.get(k, 0.0)) for k in keys)
        if math.isfinite(inst) and inst > 0:
            secs.append(inst)
            shares.append(inst / (whole - inst))
    med = statistics.median
    return (med(secs), med(shares)) if secs else (math.nan, math.nan)


def print_table(times, rows, mem, budget: float, n_budgeted: int) -> None:
    """Per instrument: seconds per call, share of its cycle, peak memory, cadence within the budget."""
    med = statistics.median
    plain = med(times["plain"])
    share = budget / max(n_budgeted, 1)
    print(
        f"  per instrument (in-cycle timers; plain cycle {plain:.2f} s; budget rule: "
        f"{budget:.0%} of the wall time shared by {n_budgeted} null cadences = {share:.1%} each):"
    )
    print(
        f"    {'instrument':<34} {'s/call':>7} {'of a cycle':>10} {'peak MiB':>9} {'+MiB':>6}  budget cadence"
    )
    entries = [
        ("drift pass (every rollout)", "plain", ("perf/drift_s",)),
        ("noise at theta_old", "noise", ("perf/noise_theta_old_s",)),
        ("Adam noise (beside noise)", "adam", ("perf/noise_adam_s",)),
        ("noise + Adam noise (one budget)", "adam", ("perf/noise_theta_old_s", "perf/noise_adam_s")),
        ("curvature (beside noise)", "curvature", ("perf/curvature_s",)),
        ("curvature + Adam sharpness", "all", ("perf/curvature_s", "perf/noise_adam_s")),
    ]
    for label, name, keys in entries:
        if name not in times:
            continue
        secs, frac = _timer_share(rows[name], times[name], keys)
        peak = med(p for _, p in mem[name]) / 1024
        above = med(p - s for s, p in mem[name]) / 1024
        cadence = "every rollout" if name == "plain" else f"every {math.ceil(frac / share)}"
        print(f"    {label:<34} {secs:7.2f} {frac:10.3f} {peak:9.0f} {above:6.0f}  {cadence}")
    for c in (16, 32, 64):
        _, n = _timer_share(rows["noise"], times["noise"], ("perf/noise_theta_old_s",))
        _, cv = _timer_share(rows["curvature"], times["curvature"], ("perf/curvature_s",))
        print(f"    at cadence {c:>2}: noise {n / c:.3f}, curvature {cv / c:.3f} of a cycle")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="a model preset (model=NAME); default: the embedded model")
    ap.add_argument("--prompts", type=int, default=None, help="P (default 32, or the preset's)")
    ap.add_argument("--group", type=int, default=None, help="G (default 8, or the preset's)")
    ap.add_argument("--steps", type=int, default=None, help="K (default 8, or the preset's)")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--adam", action="store_true", help="also time Adam's noise scale (and with curvature)")
    ap.add_argument("--lr", type=float, default=None, help="lr.ref_lr (default: the config's)")
    ap.add_argument("--hvp", default=None, help="noise.hvp (default: the config's)")
    ap.add_argument("--warmup", choices=("all", "plain"), default="all", help="the warm-up round's cycles")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from rlvr_scaling.compose import compose
    from rlvr_scaling.config import derive
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    overrides = _overrides(args)
    defaults = compose(overrides).noise  # the cadences a run of this config uses
    # every instrument measurable (the variants switch them per cycle); a preset may turn them off
    cfg = compose(overrides + ["noise.at_theta_old=true", "noise.curvature_every_rollouts=1"])
    d = derive(cfg)
    comps = build_components(cfg, log=lambda *_: None)
    run_dir = Path(tempfile.mkdtemp(prefix="rlvr_bench_"))
    trainer = Trainer(cfg, d, run_dir, comps, log=lambda *_: None)
    trainer.state.next_eval_at = 1 << 60
    inst = trainer.theta_old

    variants = {"plain": (False, 0, False), "noise": (True, 0, False), "curvature": (True, 1, False)}
    if args.adam:
        variants.update({"adam": (True, 0, True), "all": (True, 1, True)})
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    times, rows, mem = _measure(trainer, variants, args.reps, run_dir, args.warmup)
    load_after = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]

    med = statistics.median
    plain = times["plain"]
    print(
        f"cycle B={d.responses_per_rollout} (P={cfg.rollout.prompts_per_rollout}, G={cfg.rollout.group_size}), "
        f"K={cfg.optim.steps_per_rollout}, {trainer.n_params:,} params, {args.threads} threads, {args.reps} "
        f"interleaved repetitions (hvp: {inst.hvp_kind}, {inst.prompts} prompts at theta_old, "
        f"{inst.iterations} power iterations); load average {' '.join(load)} before, {' '.join(load_after)} after"
    )
    ratios = {}
    for name in variants:
        ratios[name] = med([a / b for a, b in zip(times[name], plain)])
        peak = med(p for _, p in mem[name]) / 1024
        print(
            f"  {name:<10} {med(times[name]):7.3f} s   ratio to plain {ratios[name]:.3f}   peak RSS {peak:.0f} MiB"
        )
    print_costs(times, rows, ratios, defaults)
    if args.model is not None:
        n_budgeted = sum(
            x is None for x in (defaults.at_theta_old_every_rollouts, defaults.curvature_every_rollouts)
        )
        print_table(times, rows, mem, defaults.budget, n_budgeted or 2)
    print_measurements(rows)
    print(f"ratio_noise={ratios['noise']:.3f} ratio_curvature={ratios['curvature']:.3f}")


def print_costs(times, rows, ratios, defaults) -> None:
    """The amortised costs at several cadences, from whole-cycle ratios and from in-cycle timers."""
    med = statistics.median
    plain = times["plain"]
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
    _, noise_share = _timer_share(rows["noise"], times["noise"], ("perf/noise_theta_old_s",))
    _, curv_share = _timer_share(rows["curvature"], times["curvature"], ("perf/curvature_s",))
    print(
        f"  in-cycle timers: noise at theta_old {noise_share:.3f} of a cycle, a curvature measurement {curv_share:.3f}"
    )
    drift_share = drift / (med(plain) - drift)
    for c in (16, 32, 64):
        total = noise_share + curv_share / c + drift_share
        print(f"    with the drift pass and curvature every {c:>2}: all instruments {total:.3f} of a cycle")
    # at the configured cadences (conf/noise/default.yaml, or the preset's): what such a run pays per cycle
    nd, cd = defaults.at_theta_old_every_rollouts, defaults.curvature_every_rollouts
    if not defaults.at_theta_old:
        print(
            f"  at the config's cadences (noise at theta_old off): the drift pass alone, {drift_share:.3f} of a cycle"
        )
    elif nd is None or cd is None:  # a budgeted cadence: the budget is the instruments' share
        print(
            f"  at the config's cadences (noise and curvature within noise.budget = {defaults.budget:.0%} of the wall "
            f"time, drift every rollout): all instruments ~{defaults.budget + drift_share:.3f} of a cycle"
        )
    else:
        by_ratio = noise_cost / nd + (curv_cost / cd if cd else 0.0) + drift_share
        by_timer = noise_share / nd + (curv_share / cd if cd else 0.0) + drift_share
        print(
            f"  at the config's cadences (noise every {nd}, curvature every {cd}, drift every rollout): all "
            f"instruments {by_ratio:.3f} (whole-cycle ratios) / {by_timer:.3f} (in-cycle timers) of a cycle"
        )


if __name__ == "__main__":
    main()
