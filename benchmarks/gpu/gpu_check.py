"""The one-GPU check: real model shapes, a short multi-step GRPO cycle in bf16 with fp32 master weights,
our trainer (HF engine; vLLM colocated where importable) beside TRL's GRPOTrainer on the same model and
cycle. Run by scripts/gpu_check.sh, which installs the dependencies first; within 8 minutes on one
H100/H200, every part under its own time limit, the report rewritten after each part.

    python benchmarks/gpu/gpu_check.py run --out gpu_check.json               # on a GPU node
    python benchmarks/gpu/gpu_check.py run --cpu-smoke --out smoke.json       # the same path on a CPU, tiny

Shapes: random-initialised ``Qwen2ForCausalLM`` of Qwen2.5-0.5B and -1.5B shape (public config.json
values; rlvr_scaling/stand_in.py) with a byte-level BPE tokenizer trained here on the GSM8K-style
fixture; ``--cpu-smoke`` uses the ``tiny`` shape. Nothing is downloaded. With random weights every
response runs to the token limit and every reward is 0, so both sides do the same, full work: ours with
``optim.skip_zero_advantage=false`` (TRL trains on every row anyway) and pi_old recomputed (TRL computes
its old log-probs when a generation serves several steps, as here).

The cycle (both sides): B = P x G = 8 x 8 responses to the fixture's questions (``model=qwen2.5_*``
presets: bf16 compute, fp32 master weights and AdamW states), at most 256 new tokens, K = 4 optimizer
steps on minibatches of B/K, learning rate 1e-6, rewards by math-verify; 3 rollouts, the first a
warm-up (CUDA kernels, allocator). TRL: ``GRPOConfig(bf16=True)`` (autocast over fp32 parameters, the
same recipe), ``num_generations=G``, ``steps_per_generation=K``, ``per_device_train_batch_size=B/K``,
``beta=0``, its own HF ``generate``; one block of K steps per rollout, timed by a callback.

Each part runs in its own process (``python benchmarks/gpu/gpu_check.py part ...``) under a time limit, so
a part that fails or hangs costs only its own budget and frees the GPU; the report says why a part is
missing. Reported per part: responses/s and generated tokens/s per timed rollout, the phase split
(``perf/*``), the weight push (vLLM), peak GPU memory, the engine/trainer mismatch
(``rollout/mismatch_*``), both FLOPs clocks; and the ratios ours/TRL.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks._common import REPO, trl_grpo_arguments  # noqa: E402

FIXTURE = REPO / "tests/fixtures/math/gsm8k_tiny.jsonl"

GPU = dict(
    shapes=["qwen2.5_0.5b", "qwen2.5_1.5b"], prompts=8, group=8, steps=4, max_new_tokens=256, rollouts=3
)
SMOKE = dict(shapes=["tiny"], prompts=4, group=4, steps=2, max_new_tokens=16, rollouts=2)
PRESET = {"qwen2.5_0.5b": "qwen2.5_0.5b", "qwen2.5_1.5b": "qwen2.5_1.5b", "tiny": "qwen2.5_0.5b"}
# seconds per part (GPU / smoke); a part starts only if the whole budget still holds its minimum
LIMITS = {"build": (90, 40), "hf": (150, 60), "vllm": (180, 60), "trl": (150, 60)}
MINIMUM = {"build": 20, "hf": 40, "vllm": 60, "trl": 40}


def log(*args) -> None:
    print(*args, flush=True)


# --------------------------------------------------------------------------------------------- driver


def run(args) -> int:
    """Run every part under the budget, rewriting the report after each; exit 0 when our HF part ran
    for every shape (the rest is reported, present or not)."""
    cycle = SMOKE if args.cpu_smoke else GPU
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rlvr_gpu_check_"))
    deadline = time.monotonic() + args.budget
    report: dict = {
        "cpu_smoke": args.cpu_smoke,
        "cycle": {k: v for k, v in cycle.items() if k != "shapes"},
        "budget_s": args.budget,
        "environment": environment(),
        "parts": {},
    }
    write(out, report)
    device = "cpu" if args.cpu_smoke else "cuda"
    for shape in cycle["shapes"]:
        model_dir = work / shape
        for kind in ("build", "hf", "vllm", "trl"):
            key = f"{shape}/{kind}"
            if kind == "vllm" and not report["environment"]["vllm"]:
                report["parts"][key] = {"skipped": "vLLM is not importable here"}
                continue
            if kind == "trl" and not report["environment"]["trl"]:
                report["parts"][key] = {"skipped": "TRL is not importable here"}
                continue
            if kind != "build" and "error" in report["parts"].get(f"{shape}/build", {}):
                report["parts"][key] = {"skipped": "no model (build failed)"}
                continue
            left = deadline - time.monotonic()
            limit = min(LIMITS[kind][args.cpu_smoke], left - 5)
            if limit < MINIMUM[kind] * (0.5 if args.cpu_smoke else 1):
                report["parts"][key] = {"skipped": f"budget: {left:.0f} s left"}
                write(out, report)
                continue
            log(f"== {key} (limit {limit:.0f} s)")
            report["parts"][key] = part_process(kind, shape, model_dir, device, cycle, work, limit)
            log(json.dumps(report["parts"][key])[:2000])
            write(out, report)
    report["ratios"] = ratios(report["parts"], cycle["shapes"])
    report["wall_s"] = round(args.budget - (deadline - time.monotonic()), 1)
    write(out, report)
    log(json.dumps({"ratios": report["ratios"], "wall_s": report["wall_s"]}, indent=1))
    # failed: our HF part missing for a shape, or any part that ran and broke (skips are reported only)
    ok = all("responses_per_s" in report["parts"].get(f"{s}/hf", {}) for s in cycle["shapes"])
    broken = [k for k, v in report["parts"].items() if "error" in v]
    return 0 if ok and not broken else 1


def part_process(kind, shape, model_dir, device, cycle, work, limit) -> dict:
    part_out = work / f"{shape}-{kind}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "part",
        kind,
        "--shape",
        shape,
        "--model-dir",
        str(model_dir),
        "--device",
        device,
        "--cycle",
        json.dumps(cycle),
        "--out",
        str(part_out),
    ]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        tail, code = (proc.stdout + proc.stderr)[-3000:], proc.returncode
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(errors="replace")
        tail, code = out[-3000:], None
    wall = round(time.monotonic() - start, 1)
    if part_out.is_file():
        result = json.loads(part_out.read_text())
        result["part_wall_s"] = wall
        return result
    if code is None:  # ran out of its time: reported, not a failure of the code
        return {"timeout": f"stopped at its limit of {limit:.0f} s", "log_tail": tail}
    return {"error": f"exit {code} after {wall} s", "log_tail": tail}


def write(path: Path, report: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(path)


def environment() -> dict:
    """Versions and devices, without initialising CUDA in this (driver) process."""
    import importlib.metadata as md
    import importlib.util

    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    env = {
        "python": sys.version.split()[0],
        **{n: version(n) for n in ("torch", "transformers", "trl", "vllm", "accelerate", "datasets")},
        "vllm": False,
        "trl": False,
    }
    for name in ("vllm", "trl"):  # installed; whether it imports, its part finds out (imports are slow)
        env[name] = importlib.util.find_spec(name) is not None
    try:
        env["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["nvidia_smi"] = None
    return env


def ratios(parts: dict, shapes: list[str]) -> dict:
    out = {}
    for s in shapes:
        trl = parts.get(f"{s}/trl", {}).get("responses_per_s")
        for ours in ("hf", "vllm"):
            rps = parts.get(f"{s}/{ours}", {}).get("responses_per_s")
            if rps and trl:
                out[f"{s}: ours-{ours} / trl (responses/s)"] = round(rps / trl, 3)
    return out


# --------------------------------------------------------------------------------------------- parts


def part(args) -> None:
    import torch

    cycle = json.loads(args.cycle)
    result: dict = {"device": args.device}
    if args.device == "cuda":
        result["device_name"] = torch.cuda.get_device_name()
        result["device_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        torch.cuda.reset_peak_memory_stats()
    else:
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    start = time.perf_counter()
    if args.kind in ("vllm", "trl"):
        try:
            __import__(args.kind)
        except Exception as err:  # installed but broken here (e.g. a CUDA build on a CPU machine)
            result["skipped"] = f"{args.kind} does not import: {type(err).__name__}: {err}"[:500]
            Path(args.out).write_text(json.dumps(result, indent=2))
            return
    if args.kind == "build":
        result.update(build(args.shape, Path(args.model_dir), args.device))
    elif args.kind in ("hf", "vllm"):
        result.update(ours(args.kind, args.shape, args.model_dir, args.device, cycle))
    else:
        result.update(trl_cycle(args.model_dir, args.device, cycle))
    result["wall_s"] = round(time.perf_counter() - start, 1)
    if args.device == "cuda":
        result["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        result["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
    Path(args.out).write_text(json.dumps(result, indent=2))


def build(shape: str, model_dir: Path, device: str) -> dict:
    """The stand-in model directory: BPE tokenizer from the fixture, random weights (saved in bf16:
    half the bytes; the trainer loads fp32 master weights from them, vLLM bf16)."""
    import torch

    from rlvr_scaling.models import count_parameters
    from rlvr_scaling.stand_in import build_model, build_tokenizer

    rows = [json.loads(x) for x in FIXTURE.read_text().splitlines()]
    tok = build_tokenizer([f"Question: {r['question']}\nAnswer: {r['answer']}" for r in rows] * 4, 400)
    t = time.perf_counter()
    build_model(shape, tok, model_dir, dtype=torch.bfloat16, device=device)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM

        n = count_parameters(AutoModelForCausalLM.from_config(config))
    return {"parameters": n, "tokenizer_vocab": len(tok), "build_s": round(time.perf_counter() - t, 1)}


def overrides(kind: str, shape: str, model_dir: str, device: str, cycle: dict, run_dir: Path) -> list[str]:
    b = cycle["prompts"] * cycle["group"]
    out = [
        f"model={PRESET[shape]}",
        f"model.path={model_dir}",
        "model.prompt_format=plain",
        "task=math_file",
        f"task.path={FIXTURE}",
        "task.val_size=4",
        f"rollout.prompts_per_rollout={cycle['prompts']}",
        f"rollout.group_size={cycle['group']}",
        f"rollout.max_new_tokens={cycle['max_new_tokens']}",
        f"eval.max_new_tokens={cycle['max_new_tokens']}",
        f"optim.steps_per_rollout={cycle['steps']}",
        "optim.skip_zero_advantage=false",
        "optim.old_logprobs=recompute",
        "lr.ref_lr=1e-6",
        f"lr.ref_responses={b}",
        f"train.max_responses={b * cycle['rollouts']}",
        f"eval.every_responses={100 * b * cycle['rollouts']}",
        "failure=none",
        "logger.samples.every_rollouts=0",
        f"run.device={device}",
        "run.progress=false",
        f"run.cache_dir={run_dir / 'cache'}",
        f"rollout.engine={kind}",
    ]
    if kind == "vllm" and device == "cuda":  # colocated, in-process, weights pushed in place
        out += [
            "rollout.vllm.dtype=bfloat16",
            "rollout.vllm.gpu_memory_utilization=0.3",
            f"rollout.vllm.max_model_len={cycle['max_new_tokens'] + 256}",
            "rollout.vllm.enforce_eager=false",
            "rollout.vllm.seeding=call",
        ]
    return out


def ours(kind: str, shape: str, model_dir: str, device: str, cycle: dict) -> dict:
    """A few rollouts of our trainer (``rlvr-train``'s composition and :func:`train`)."""
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.run import train

    run_dir = Path(tempfile.mkdtemp(prefix=f"rlvr_{kind}_"))
    ov = overrides(kind, shape, model_dir, device, cycle, run_dir)
    cfg = compose(ov)
    lines: list[str] = []
    state = train(cfg, run_dir / "run", log=lambda *a: lines.append(" ".join(map(str, a))))
    rows = [json.loads(x) for x in (run_dir / "run/metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "train/reward_mean" in r]
    timed = train_rows[1:] or train_rows  # the first rollout includes the warm-up
    per = []
    flops_before = {id(r): (train_rows[i - 1]["flops"] if i else 0.0) for i, r in enumerate(train_rows)}
    for r in timed:
        phases = {
            k[5:-2]: r[k]
            for k in r
            if k.startswith("perf/") and k.endswith("_s") and not k.endswith("_per_s")
        }
        cycle_s = sum(phases.values())
        per.append(
            {
                "responses_per_s": round(r["rollout/responses"] / cycle_s, 2),
                "generated_tokens_per_s": round(
                    r["rollout/tokens"] / max(phases.get("generate", 0), 1e-9), 1
                ),
                "cycle_s": round(cycle_s, 3),
                "phases_s": {k: round(v, 4) for k, v in phases.items()},
                "completion_length": r["train/completion_length"],
                **{k: r[k] for k in r if k.startswith("rollout/mismatch_")},
                "flops": r["flops"] - flops_before[id(r)],
            }
        )
    cycle_total = sum(p["cycle_s"] for p in per)
    phases_total: dict[str, float] = {}
    for p in per:
        for k, v in p["phases_s"].items():
            phases_total[k] = phases_total.get(k, 0.0) + v
    last = train_rows[-1]
    return {
        "state": state,
        "overrides": ov,
        "log": [x for x in lines if x.startswith(("[precision]", "[engine]", "[model]", "[old log-probs]"))],
        "responses_per_s": round(statistics.median(p["responses_per_s"] for p in per), 2),
        "generated_tokens_per_s": round(statistics.median(p["generated_tokens_per_s"] for p in per), 1),
        "phase_share": {k: round(v / cycle_total, 3) for k, v in phases_total.items()},
        "weight_sync_ms": [round(1e3 * r.get("perf/sync_s", 0.0), 1) for r in train_rows],
        "rollouts": per,
        "clocks": {k: last[k] for k in ("responses", "tokens", "flops", "flops_nominal", "optimizer_steps")},
    }


def trl_cycle(model_dir: str, device: str, cycle: dict) -> dict:
    """TRL's GRPOTrainer on the same model, prompts, rewards and cycle; one block of K steps per rollout."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr_scaling.tasks import MathFileTaskParams, build_task

    b, k = cycle["prompts"] * cycle["group"], cycle["steps"]
    task = build_task(MathFileTaskParams(path=str(FIXTURE), val_size=4))
    examples = [task.train_example(i) for i in range(task.num_train())]
    by_prompt = {e.prompt: e for e in examples}
    n = max(len(examples), cycle["prompts"] * cycle["rollouts"])
    dataset = Dataset.from_dict({"prompt": [examples[i % len(examples)].prompt for i in range(n)]})
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)  # fp32 master weights
    calls: list[int] = []

    def reward(prompts, completions, **_):
        calls.append(len(completions))
        return task.score(completions, [by_prompt[p] for p in prompts])

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl_"),
        **trl_grpo_arguments(
            group=cycle["group"],
            minibatch=b // k,
            steps=k,
            max_new_tokens=cycle["max_new_tokens"],
            max_steps=cycle["rollouts"] * k,
            seed=0,
        ),
        bf16=True,
        use_cpu=device == "cpu",
        temperature=1.0,
        epsilon=0.2,
        max_grad_norm=1.0,
        learning_rate=1e-6,
        lr_scheduler_type="constant",
    )
    blocks: list[float] = []

    class Blocks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % k == 0:
                if device == "cuda":
                    torch.cuda.synchronize()
                blocks.append(time.perf_counter() - self.t0)
                self.t0 = time.perf_counter()

    trainer = GRPOTrainer(
        model=model, reward_funcs=reward, args=config, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.add_callback(Blocks())
    trainer.train()
    task.close()
    timed = blocks[1:] or blocks
    return {
        "responses_per_s": round(statistics.median(b / s for s in timed), 2),
        "blocks_s": [round(s, 3) for s in blocks],
        "generations": calls,
        "trl_config": {"bf16": True, "steps_per_generation": k, "per_device_train_batch_size": b // k},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every part, under the budget")
    r.add_argument("--cpu-smoke", action="store_true", help="the same path on a CPU with the tiny shape")
    r.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_check.json"))
    r.add_argument("--budget", type=float, default=None, help="seconds for all parts (470; smoke 110)")
    p = sub.add_parser("part", help="one part (run by `run` in its own process)")
    p.add_argument("kind", choices=sorted(LIMITS))
    p.add_argument("--shape", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--cycle", required=True)
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "part":
        part(args)
        return
    if args.budget is None:
        args.budget = 110.0 if args.cpu_smoke else 470.0
    sys.exit(run(args))


if __name__ == "__main__":
    main()
