"""One real-model preset end to end on one GPU: a few multi-step GRPO rollouts with vLLM colocated,
reporting generation throughput, weight-push time and memory (any preset, 3B-8B included; the one-GPU
check with TRL beside it is benchmarks/gpu_check.py, run by scripts/gpu_check.sh).

    python benchmarks/gpu_real_model.py --preset qwen2.5_1.5b --out gpu_check.json
    python benchmarks/gpu_real_model.py --preset qwen2.5_7b --rollouts 2 --max-new-tokens 256

The run composes ``model=<preset> gpu=h100_single`` exactly as ``rlvr-train`` would and trains through
the library's :func:`~rlvr_scaling.run.train` (generate with vLLM -> reward -> K optimizer steps -> in-place
weight push), on ``task=gsm8k`` when its files exist under $RLVR_DATA_DIR, else on the project's GSM8K-style
fixture (tests/fixtures/math). When the preset's weights are not on this machine (no network), the
preset's architecture is built with random weights (same shapes, so the same memory and compute) and
the project's character tokenizer: responses then run to ``--max-new-tokens``, an upper bound on both.
``--compare-hf`` also times one HF-engine generation of the same batch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlvr_scaling.stand_in import SHAPES  # noqa: E402

# The presets' shapes (public config.json values) for a random-weight stand-in of the same size.
ARCH = {name: shape for name, shape in SHAPES.items() if name != "tiny"}
# --cpu-smoke checks this script on a CPU with vLLM's CPU build: the tiny shape with the character
# tokenizer's vocabulary, not a measurement.
SMOKE_ARCH = {**SHAPES["tiny"], "vocab_size": 512}


def stand_in_model(preset: str, dtype: str, out: Path, device: str) -> str:
    """Random weights in the preset's architecture, with the character tokenizer; a HF model directory."""
    import torch

    from rlvr_scaling.models import DTYPES, build_tokenizer, save_hf_dir
    from rlvr_scaling.stand_in import model_classes

    tok = build_tokenizer()
    cls_cfg, cls_model = model_classes(preset if device == "cuda" else "tiny")
    config = cls_cfg(
        **(ARCH[preset] if device == "cuda" else SMOKE_ARCH),
        max_position_embeddings=4096,
        rope_theta=1e6,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[dtype])  # initialise directly in the preset's dtype, on the device
    try:
        with torch.device(device):
            model = cls_model(config)
    finally:
        torch.set_default_dtype(default)
    save_hf_dir(model, tok, out)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return str(out)


def check_overrides(preset: str, prompts: int, group: int, max_new_tokens: int, rollouts: int, work: Path):
    """The rlvr-train overrides of a GPU check: the preset, GSM8K (its files under $RLVR_DATA_DIR, else
    the project's fixture), a few rollouts of P x G responses with K = 4, no evaluation in between."""
    data = Path(os.environ.get("RLVR_DATA_DIR", "data"))
    if (data / "gsm8k/train.parquet").is_file() and (data / "gsm8k/test.parquet").is_file():
        task = ["task=gsm8k", "task.val_size=64"]
    else:
        fixture = REPO / "tests/fixtures/math/gsm8k_tiny.jsonl"
        task = ["task=gsm8k", f"task.path={fixture}", "task.val_path=null", "task.val_size=4"]
    b = prompts * group
    return [
        f"model={preset}",
        *task,
        f"rollout.prompts_per_rollout={prompts}",
        f"rollout.group_size={group}",
        f"rollout.max_new_tokens={max_new_tokens}",
        f"eval.max_new_tokens={max_new_tokens}",
        f"train.max_responses={b * rollouts}",
        f"eval.every_responses={10 * b * rollouts}",
        "optim.steps_per_rollout=4",
        "lr.ref_lr=1e-6",
        f"lr.ref_responses={b}",
        "failure=none",
        "run.progress=false",
        f"run.cache_dir={work / 'cache'}",
    ]


def gpu_memory_used_mib() -> int | None:
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return int(text.split()[0])
    except Exception:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen2.5_1.5b", choices=sorted(ARCH))
    ap.add_argument("--rollouts", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--compare-hf", action="store_true", help="also time one HF-engine generation")
    ap.add_argument("--cpu-smoke", action="store_true", help="check this script on a CPU (tiny stand-in)")
    ap.add_argument("--out", default=None, help="write the report (JSON) here")
    ap.add_argument("overrides", nargs="*", help="extra rlvr-train overrides")
    args = ap.parse_args()

    import torch

    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.models import check_model_path
    from rlvr_scaling.run import build_components, train

    device = "cpu" if args.cpu_smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_real_model: no CUDA device (use --cpu-smoke to check the script on a CPU)")
    work = Path(tempfile.mkdtemp(prefix="rlvr_gpu_check_"))
    overrides = [
        "gpu=h100_single",
        *check_overrides(args.preset, args.prompts, args.group, args.max_new_tokens, args.rollouts, work),
    ]
    if device == "cpu":
        overrides += ["run.device=cpu", "model.dtype=float32", "rollout.vllm.dtype=float32"]
        overrides += ["rollout.vllm.enforce_eager=null", "rollout.vllm.max_model_len=1024"]
    overrides += args.overrides
    cfg = compose(overrides)
    stand_in = False
    try:
        if device == "cpu":
            raise FileNotFoundError("CPU smoke test: always the tiny stand-in")
        check_model_path(cfg.model.path)
    except Exception:
        stand_in = True
        cfg.model.path = stand_in_model(args.preset, cfg.model.dtype, work / "model", device)
        cfg.model.prompt_format = "plain"
    cuda = torch.cuda if device == "cuda" else None
    report: dict = {
        "preset": args.preset,
        "stand_in_random_weights": stand_in,
        "device": cuda.get_device_name() if cuda else "cpu (smoke test)",
        "device_memory_gib": round(cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
        "overrides": overrides,
        "gpu_memory_used_mib_before": gpu_memory_used_mib(),
    }
    print(json.dumps(report, indent=2), flush=True)
    if cuda:
        cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    report["state"] = train(cfg, work / "run", log=lambda *a: print(*a, flush=True))
    report["wall_s"] = round(time.perf_counter() - start, 1)
    rows = [json.loads(x) for x in (work / "run/metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "train/reward_mean" in r]
    timed = train_rows[1:] or train_rows  # the first rollout includes warm-up
    gen_s = sum(r["perf/generate_s"] for r in timed) or 1e-9
    keys = ("rollout/tokens", "perf/generate_s", "perf/old_logprob_s", "perf/train_s", "perf/sync_s")
    report.update(
        rollouts=[{k: r.get(k) for k in (*keys, "train/completion_length")} for r in train_rows],
        generate_tokens_per_s=round(sum(r["rollout/tokens"] for r in timed) / gen_s, 1),
        weight_push_s=[r.get("perf/sync_s") for r in train_rows],
        peak_torch_allocated_gib=round(cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        peak_torch_reserved_gib=round(cuda.max_memory_reserved() / 2**30, 2) if cuda else None,
        gpu_memory_used_mib_after=gpu_memory_used_mib(),
    )
    if args.compare_hf:
        from rlvr_scaling.engines.base import SamplingParams

        cfg.rollout.engine = "hf"
        comps = build_components(cfg, log=lambda *_: None)
        prompts = [comps.task.train_example(i).prompt for i in range(args.prompts)]
        t = time.perf_counter()
        gen = comps.engine.generate(
            prompts,
            [args.group] * args.prompts,
            SamplingParams(args.max_new_tokens),
            torch.Generator(device=device).manual_seed(0),
        )
        report["hf_generate_tokens_per_s"] = round(gen.num_tokens / (time.perf_counter() - t), 1)
        comps.task.close()
    print(json.dumps({k: v for k, v in report.items() if k != "overrides"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
