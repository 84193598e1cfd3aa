"""Throughput of the task pieces the trainer waits on (items per second, wall clock).

    python -m rlvr_scaling.tasks.bench [--workers 2] [--items 4000]

Measures: lazy generation of the chain_sum training pool; the in-process exact verifier; the
math-verify worker pool on integer and LaTeX (fraction) answers, against math-verify in-process on one
core; a math_file task on GSM8K-style answers (integer fast path); reasoning-gym's own scorer through
the pool. Workers are started and warmed
before timing. Numbers depend on the machine and its load; quote them with both.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time


def _rate(n: int, fn) -> float:
    t = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--items", type=int, default=4000)
    args = parser.parse_args()
    n = args.items
    from . import MathFileTaskParams, ReasoningGymTaskParams, VerifierPool, build_task
    from .verifiers import init_math_verify, math_verify_reward

    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} workers={args.workers} items={n}")
    task = build_task(ReasoningGymTaskParams(train_size=50_000))
    rate = _rate(50_000, lambda: [task.train_example(i) for i in range(50_000)])
    print(f"chain_sum train pool, lazy generation: {rate:,.0f} items/s (50k in {50_000 / rate:.2f} s)")
    rng = random.Random(0)
    examples = [task.train_example(i) for i in range(n)]
    completions = [
        e.answer if rng.random() < 0.5 else rng.choice(["#", "", "1"]) + e.answer for e in examples
    ]
    print(f"exact verifier, in-process: {_rate(n, lambda: task.score(completions, examples)):,.0f} items/s")

    integers = [(str(i), str(i if i % 2 else i + 1)) for i in range(n)]
    fractions = [
        (f"\\frac{{{i}}}{{{i + 1}}}", f"{i}/{i + 1}" if i % 2 else f"\\frac{{{i}}}{{{i + 2}}}")
        for i in range(n)
    ]
    init_math_verify()
    single = _rate(n // 4, lambda: [math_verify_reward(p) for p in integers[: n // 4]])
    print(f"math-verify in-process, 1 core (no time limit): {single:,.0f} items/s")
    with VerifierPool(
        math_verify_reward, num_workers=args.workers, timeout_s=2.0, initializer=init_math_verify
    ) as pool:
        t = time.perf_counter()
        pool.map([("1", "1")] * args.workers)
        print(f"math-verify pool start-up: {time.perf_counter() - t:.2f} s")
        print(f"math-verify pool, integers: {_rate(n, lambda: pool.map(integers)):,.0f} items/s")
        print(f"math-verify pool, fractions: {_rate(n, lambda: pool.map(fractions)):,.0f} items/s")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gsm8k_like.jsonl")
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps({"question": f"q{i}", "answer": f"... #### {i}"}) + "\n")
        math_task = build_task(MathFileTaskParams(path=path, val_size=8, num_workers=args.workers))
        gsm = [math_task.train_example(i) for i in range(n)]
        texts = [f"so #### {e.answer}" if i % 2 else "so #### -1" for i, e in enumerate(gsm)]
        rate = _rate(n, lambda: math_task.score(texts, gsm))
        print(f"math_file score, GSM8K-style integer answers (in-process fast path): {rate:,.0f} items/s")
        math_task.close()
    rg = build_task(ReasoningGymTaskParams(verifier="dataset", train_size=50_000, num_workers=args.workers))
    rg.score(completions[:8], examples[:8])  # start the workers
    print(
        f"reasoning-gym score_answer pool: {_rate(n, lambda: rg.score(completions, examples)):,.0f} items/s"
    )
    rg.close()


if __name__ == "__main__":
    main()
