"""The OBLR-PO and VIGOR options on the embedded default: what they do here (an experiment, not a test).

    python experiments/methods.py                       # every part, seeds 0 1 2, 2 jobs of 1 thread
    python experiments/methods.py --parts train noise   # a subset: overhead | train | noise
    python experiments/methods.py --ref-lr 1e-5 --snr-ref-lr 1e-3 --responses 4096

Parts (results under experiments/results/, run directories under --work):

- ``overhead``: the cost of the gradient-noise instruments on the default rollout (B = 128, K = 8):
  the minibatch two-batch-size estimator (``noise/*``, always on) and the exact per-sample estimator
  (``noise/per_sample_*``), and the optimal baseline's weights (exact and proxy), as fractions of a
  rollout cycle. -> methods_overhead.csv
- ``train``: training runs on the default (uniform allocator, grpo, square-root LR) against VIGOR at the
  same B, and against the SNR-adaptive LR rule, per seed. Responses-to-target are read from the
  evaluation rows for targets relative to the step-0 accuracy (+0.05 ... +0.30), so they stay
  meaningful while the default's warm start is being tuned. -> methods_curves.csv, methods_targets.csv
- ``noise``: the gradient noise-to-signal of the baselines on the *same* rollouts: for R independent
  rollouts of B = 128 responses at a fixed policy (the warm start, and the end of the seed's uniform
  run), the rollout gradient g_r of the first step (ratio 1, token-mean loss) under each baseline;
  across rollouts tr Cov(g_r) and |E g_r|^2 (unbiased), so NSR = tr Cov / |E g|^2 is the noise-to-signal
  of the rollout gradient the optimizer sees, coupling within groups included. The per-sample estimate
  inside each rollout (noise_from_norms) is reported beside it. -> methods_noise.csv

methods_summary.txt collects the numbers quoted in the issue note.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
sys.path.insert(0, str(REPO))


# ----------------------------------------------------------------------------------------------- train

CONDITIONS = {
    "uniform_sqrt": ["allocator=uniform", "lr=sqrt"],
    "vigor_sqrt": ["allocator=vigor", "lr=sqrt"],
    "uniform_snr": ["allocator=uniform", "lr=snr"],
}


def run_dir(work: Path, condition: str, seed: int) -> Path:
    return work / f"{condition}_seed{seed}"


def launch(args, condition: str, seed: int) -> subprocess.Popen:
    lr = args.snr_ref_lr if condition.endswith("snr") else args.ref_lr
    overrides = [
        *CONDITIONS[condition],
        f"lr.ref_lr={lr}",
        f"seed={seed}",
        f"train.max_responses={args.responses}",
        "run.threads=1",
        "run.progress=false",
        f"hydra.run.dir={run_dir(args.work, condition, seed)}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    log = open(run_dir(args.work, condition, seed).with_suffix(".log"), "w")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "rlvr_scaling.cli.train", *overrides],
        env=env,
        stdout=log,
        stderr=log,
        cwd=REPO,
    )


def part_train(args) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    todo = [(c, s) for s in args.seeds for c in CONDITIONS]
    running: list[subprocess.Popen] = []
    t0 = time.time()
    while todo or running:
        while todo and len(running) < args.jobs:
            running.append(launch(args, *todo.pop(0)))
        time.sleep(2)
        for p in [p for p in running if p.poll() is not None]:
            running.remove(p)
            if p.returncode:
                print(f"[train] a run exited with {p.returncode}; see its .log in {args.work}")
    print(f"[train] {len(args.seeds) * len(CONDITIONS)} runs in {time.time() - t0:.0f} s")
    curves, targets = [], []
    for seed in args.seeds:
        for condition in CONDITIONS:
            rows = [json.loads(x) for x in (run_dir(args.work, condition, seed) / "metrics.jsonl").open()]
            evals = [r for r in rows if "eval/accuracy" in r]
            train = {r["rollout"]: r for r in rows if "train/reward_mean" in r}
            for r in evals:
                t = train.get(r["rollout"], {})
                curves.append(
                    {
                        "condition": condition,
                        "seed": seed,
                        "responses": r["responses"],
                        "accuracy": r["eval/accuracy"],
                        "lr": t.get("opt/lr", ""),
                        "reward_mean": t.get("train/reward_mean", ""),
                        "responses_in_gradient": t.get("rollout/responses_in_gradient", ""),
                    }
                )
            a0 = evals[0]["eval/accuracy"]
            for delta in args.deltas:
                hit = next((r["responses"] for r in evals if r["eval/accuracy"] >= a0 + delta - 1e-9), None)
                targets.append(
                    {
                        "condition": condition,
                        "seed": seed,
                        "start_accuracy": a0,
                        "delta": delta,
                        "responses": hit if hit is not None else "",
                        "censored_at": "" if hit is not None else evals[-1]["responses"],
                        "final_accuracy": evals[-1]["eval/accuracy"],
                        "best_accuracy": max(r["eval/accuracy"] for r in evals),
                    }
                )
    _write_csv(RESULTS / "methods_curves.csv", curves)
    _write_csv(RESULTS / "methods_targets.csv", targets)


# ----------------------------------------------------------------------------------------------- noise

BASELINES = {
    "grpo": ("grpo", {}),
    "grpo_mean": ("grpo", {"scale": "none"}),
    "rloo": ("rloo", {}),
    "remax": ("remax", {}),
    "optimal_exact_loo": ("optimal", {"weights": "exact", "leave_one_out": True}),
    "optimal_exact": ("optimal", {"weights": "exact", "leave_one_out": False}),
    "optimal_proxy_loo": ("optimal", {"weights": "proxy", "leave_one_out": True}),
}


def part_noise(args) -> None:
    import torch
    from safetensors.torch import load_model

    from rlvr_scaling.algorithms import baselines as bl
    from rlvr_scaling.algorithms.loss import token_weights
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.engines.base import SamplingParams
    from rlvr_scaling.per_sample import PerSampleGradients, logit_grad_norms, noise_from_norms
    from rlvr_scaling.run import build_components

    torch.set_num_threads(args.threads)
    cfg = compose([f"lr.ref_lr={args.ref_lr}"])
    comps = build_components(cfg, log=lambda *_: None)
    model, engine, task = comps.model, comps.engine, comps.task
    warm = {k: v.detach().clone() for k, v in model.state_dict().items()}
    p, g = cfg.rollout.prompts_per_rollout, cfg.rollout.group_size
    k = cfg.optim.steps_per_rollout
    exact = PerSampleGradients(model)
    sampling = SamplingParams(cfg.rollout.max_new_tokens, cfg.rollout.temperature, cfg.rollout.top_p)
    greedy_params = SamplingParams(cfg.rollout.max_new_tokens, greedy=True)
    out = []
    for seed in args.seeds:
        states = {"warm_start": None}
        ckpt = run_dir(args.work, "uniform_sqrt", seed) / "checkpoints"
        if (ckpt / "latest.json").is_file():
            states["after_uniform_run"] = ckpt / json.loads((ckpt / "latest.json").read_text())["tag"]
        for state, path in states.items():
            model.load_state_dict(warm)
            if path is not None:
                load_model(model, str(path / "model.safetensors"))
            engine.sync_weights(model)
            sums = {name: None for name in BASELINES}
            sq = {name: 0.0 for name in BASELINES}
            within = {name: [] for name in BASELINES}
            t0 = time.time()
            gen_rng = torch.Generator().manual_seed(1000 + seed)
            for _ in range(args.noise_rollouts):
                idx = torch.randint(task.num_train(), (p,), generator=gen_rng).tolist()
                examples = [task.train_example(i) for i in idx]
                prompts = [e.prompt for e in examples]
                gen = engine.generate(prompts, [g] * p, sampling, gen_rng)
                rewards = torch.tensor(
                    [
                        math.nan if x is None else float(x)
                        for x in task.score(gen.texts, [examples[i] for i in gen.prompt_index.tolist()])
                    ],
                    dtype=torch.float64,
                )
                greedy = engine.generate(prompts, [1] * p, greedy_params, gen_rng)
                greedy_r = torch.tensor(
                    [math.nan if x is None else float(x) for x in task.score(greedy.texts, examples)],
                    dtype=torch.float64,
                )
                comp = gen.completion_mask[:, gen.prompt_width :]
                w_exact = exact.compute(
                    gen.input_ids, gen.attention_mask, gen.prompt_width, comp.float(), 1.0, comps.device, 64
                ).norms_sq
                w_proxy = logit_grad_norms(
                    model, gen.input_ids, gen.attention_mask, comp, gen.prompt_width, 1.0, comps.device, 64
                )
                n = len(gen)
                tw = token_weights(comp, "token_mean", cfg.rollout.max_new_tokens) * n
                for name, (kind, kw) in BASELINES.items():
                    params = bl.PARAMS[kind](**kw)
                    weights = w_proxy if kw.get("weights") == "proxy" else w_exact
                    inputs = bl.AdvantageInputs(
                        rewards=rewards,
                        group=gen.prompt_index,
                        n_groups=p,
                        greedy_rewards=greedy_r,
                        grad_weights=weights,
                    )
                    adv = bl.compute_advantages(params, inputs).float()
                    coef = torch.where(comp, -adv[:, None] * tw, torch.zeros_like(tw))
                    res = exact.compute(
                        gen.input_ids, gen.attention_mask, gen.prompt_width, coef, 1.0, comps.device, 64
                    )
                    gr = [x / n for x in res.grad_sum]  # the rollout gradient
                    sq[name] += float(sum(x.double().pow(2).sum() for x in gr))
                    sums[name] = gr if sums[name] is None else [a + b for a, b in zip(sums[name], gr)]
                    within[name].append(noise_from_norms(res.norms_sq, res.sum_norm_sq, n / k))
            rr = args.noise_rollouts
            for name in BASELINES:
                mean_sq = float(sum((x / rr).double().pow(2).sum() for x in sums[name]))
                trace = (sq[name] - rr * mean_sq) / (rr - 1)  # tr Cov of one rollout gradient
                signal = mean_sq - trace / rr
                ws = within[name]
                out.append(
                    {
                        "seed": seed,
                        "state": state,
                        "baseline": name,
                        "rollouts": rr,
                        "signal": signal,
                        "trace_cov": trace,
                        "nsr": trace / signal if signal > 0 else math.inf,
                        "per_sample_trace_cov": statistics.mean(w["trace_cov"] for w in ws),
                        "per_sample_signal": statistics.mean(w["grad_norm_sq"] for w in ws),
                        "per_sample_nsr": statistics.mean(w["trace_cov"] for w in ws)
                        / max(statistics.mean(w["grad_norm_sq"] for w in ws), 1e-300)
                        / n,
                    }
                )
            print(f"[noise] seed {seed} {state}: {rr} rollouts in {time.time() - t0:.0f} s")
    _write_csv(RESULTS / "methods_noise.csv", out)


# -------------------------------------------------------------------------------------------- overhead


def part_overhead(args) -> None:
    import tempfile

    import torch

    from rlvr_scaling.algorithms.baselines import GRPOParams, OptimalParams
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import derive
    from rlvr_scaling.noise import NoiseParams
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    torch.set_num_threads(args.threads)
    base = compose([f"lr.ref_lr={args.ref_lr}", "eval.every_responses=100000000", "run.progress=false"])
    comps = build_components(base, log=lambda *_: None)
    variants = {
        "grpo, per-sample noise off": (GRPOParams(), "off"),
        "grpo, per-sample noise on": (GRPOParams(), "on"),
        "optimal exact, per-sample noise off": (OptimalParams(weights="exact"), "off"),
        "optimal proxy, per-sample noise off": (OptimalParams(weights="proxy"), "off"),
    }
    rows = []
    for rep in range(args.overhead_reps):
        for name, (baseline, noise) in variants.items():
            cfg = copy.deepcopy(base)
            cfg.baseline = baseline
            # not a config field yet: set directly; every rollout, to time one pass
            cfg.noise = NoiseParams(per_sample=noise, every_rollouts=1)
            c = copy.copy(comps)
            c.model = copy.deepcopy(comps.model)
            c.engine = copy.copy(comps.engine)
            c.engine.model = c.model
            trainer = Trainer(
                cfg, derive(cfg), Path(tempfile.mkdtemp(prefix="rlvr_overhead_")), c, log=lambda *_: None
            )
            trainer.state.next_eval_at = 1 << 60
            timed = {"minibatch_noise_s": 0.0}
            for fn in ("observe", "finish_rollout", "start_rollout"):
                orig = getattr(trainer.optim.noise, fn)

                def wrapped(*a, _orig=orig, _timed=timed, **kw):
                    t = time.perf_counter()
                    try:
                        return _orig(*a, **kw)
                    finally:
                        _timed["minibatch_noise_s"] += time.perf_counter() - t

                setattr(trainer.optim.noise, fn, wrapped)
            for cycle in range(args.overhead_cycles + 1):
                timed["minibatch_noise_s"] = 0.0
                t = time.perf_counter()
                trainer._rollout()
                total = time.perf_counter() - t
                if cycle == 0:
                    continue  # warm-up
                last = json.loads((trainer.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
                rows.append(
                    {
                        "variant": name,
                        "rep": rep,
                        "cycle_s": total,
                        "minibatch_noise_s": timed["minibatch_noise_s"],
                        "per_sample_noise_s": last.get("perf/per_sample_noise_s", 0.0),
                        "baseline_weights_s": last.get("perf/baseline_weights_s", 0.0),
                        "train_s": last["perf/train_s"],
                        "generate_s": last["perf/generate_s"],
                        "noise/snr": last.get("noise/snr"),
                        "noise/per_sample_snr": last.get("noise/per_sample_snr", ""),
                        "noise/per_sample_trace_cov": last.get("noise/per_sample_trace_cov", ""),
                        "noise/per_sample_grad_norm_sq": last.get("noise/per_sample_grad_norm_sq", ""),
                    }
                )
            trainer.metrics.close()
    _write_csv(RESULTS / "methods_overhead.csv", rows)


# ---------------------------------------------------------------------------------------------- report


def _write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def _read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _f(x) -> float:
    return float(x) if x not in ("", None) else math.nan


def summary(args) -> str:
    from rlvr_scaling.noise import NoiseParams

    lines = [
        f"# experiments/methods.py  (seeds {args.seeds}, ref_lr {args.ref_lr}, snr ref_lr {args.snr_ref_lr})",
        "",
    ]
    med = statistics.median
    ov = _read_csv(RESULTS / "methods_overhead.csv")
    if ov:
        lines.append("## overhead (median over cycles; fraction of the rollout cycle without the instrument)")
        by = {}
        for r in ov:
            by.setdefault(r["variant"], []).append(r)
        off = med(_f(r["cycle_s"]) for r in by["grpo, per-sample noise off"])
        every = NoiseParams().every_rollouts
        for name, rs in by.items():
            cyc = med(_f(r["cycle_s"]) for r in rs)
            mb = med(_f(r["minibatch_noise_s"]) for r in rs)
            ps = med(_f(r["per_sample_noise_s"]) for r in rs)
            bw = med(_f(r["baseline_weights_s"]) for r in rs)
            base_cycle = cyc - ps - bw
            lines.append(
                f"{name:<38} cycle {cyc:6.3f} s (x{cyc / off:4.2f} of grpo/off)  minibatch estimator {mb:6.4f} s "
                f"({mb / (base_cycle - mb):6.2%})  per-sample noise {ps:6.3f} s ({ps / base_cycle:6.1%} per pass, "
                f"{ps / every / base_cycle:5.1%} at the default every_rollouts={every})  baseline weights {bw:6.3f} s "
                f"({bw / base_cycle:6.1%})"
            )
        lines.append("")
    tg = _read_csv(RESULTS / "methods_targets.csv")
    if tg:
        lines.append("## responses to target (start accuracy + delta); '>N' = not reached by N (censored)")
        for delta in sorted({r["delta"] for r in tg}, key=float):
            parts = []
            for cond in CONDITIONS:
                rs = [r for r in tg if r["delta"] == delta and r["condition"] == cond]
                vals = [r["responses"] or f">{r['censored_at']}" for r in rs]
                got = [_f(r["responses"]) for r in rs if r["responses"]]
                m = f"median {med(got):.0f}" if len(got) == len(rs) else f"{len(got)}/{len(rs)} reached"
                parts.append(f"{cond}: {','.join(vals)} ({m})")
            lines.append(f"+{float(delta):.2f}: " + "; ".join(parts))
        for cond in CONDITIONS:
            rs = [r for r in tg if r["condition"] == cond and r["delta"] == tg[0]["delta"]]
            lines.append(
                f"{cond}: start {rs[0]['start_accuracy']}, final "
                + ",".join(f"{_f(r['final_accuracy']):.3f}" for r in rs)
                + ", best "
                + ",".join(f"{_f(r['best_accuracy']):.3f}" for r in rs)
            )
        cv = _read_csv(RESULTS / "methods_curves.csv")
        lr = [_f(r["lr"]) for r in cv if r["condition"] == "uniform_snr" and r["lr"]]
        if lr:
            lines.append(f"uniform_snr: opt/lr median {med(lr):.3g}, range {min(lr):.3g}..{max(lr):.3g}")
        lines.append("")
    nz = _read_csv(RESULTS / "methods_noise.csv")
    if nz:
        lines.append(
            "## gradient noise-to-signal on the same rollouts (NSR = tr Cov(g_rollout) / |E g_rollout|^2)"
        )
        for state in dict.fromkeys(r["state"] for r in nz):
            lines.append(f"{state}:")
            for name in BASELINES:
                rs = [r for r in nz if r["state"] == state and r["baseline"] == name]
                lines.append(
                    f"  {name:<18} NSR per seed "
                    + ", ".join(f"{_f(r['nsr']):8.3g}" for r in rs)
                    + "   per-sample tr Sigma "
                    + ", ".join(f"{_f(r['per_sample_trace_cov']):8.3g}" for r in rs)
                )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", nargs="+", default=["train", "noise", "overhead"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--ref-lr", type=float, default=3e-6, help="lr.ref_lr of the sqrt-rule runs")
    ap.add_argument("--snr-ref-lr", type=float, default=4e-5, help="lr.ref_lr (eta_max) of the snr-rule runs")
    ap.add_argument("--responses", type=int, default=4096, help="train.max_responses per run")
    ap.add_argument("--deltas", nargs="+", type=float, default=[0.05, 0.10, 0.15, 0.20, 0.25, 0.30])
    ap.add_argument("--jobs", type=int, default=2, help="training runs at once (1 thread each)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the in-process parts")
    ap.add_argument("--noise-rollouts", type=int, default=12)
    ap.add_argument("--overhead-cycles", type=int, default=4)
    ap.add_argument("--overhead-reps", type=int, default=2)
    ap.add_argument("--work", type=Path, default=REPO / "runs" / "methods_experiment")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for part in args.parts:
        t = time.time()
        {"overhead": part_overhead, "train": part_train, "noise": part_noise}[part](args)
        print(f"[{part}] done in {time.time() - t:.0f} s")
    text = summary(args)
    (RESULTS / "methods_summary.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
