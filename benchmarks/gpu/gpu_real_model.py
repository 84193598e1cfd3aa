"""One real-model preset end to end on one GPU: a few multi-step GRPO rollouts with vLLM colocated,
reporting generation throughput, weight-push time and memory (any preset, 3B-8B included; the one-GPU
check with TRL beside it is benchmarks/gpu/gpu_check.py, run by scripts/gpu_check.sh).

    python benchmarks/gpu/gpu_real_model.py --preset qwen2.5_1.5b --out gpu_check.json
    python benchmarks/gpu/gpu_real_model.py --preset qwen2.5_7b --rollouts 2 --max-new-tokens 256

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.gpu._presets import ARCH, check_overrides, model_or_stand_in, rollout_rows  # noqa: E402


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
    stand_in = model_or_stand_in(cfg, args.preset, work, device)
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
    train_rows, timed = rollout_rows(work / "run")
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
