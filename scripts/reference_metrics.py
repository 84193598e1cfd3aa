"""Reference runs for refactors that must not change behaviour: their metrics, minus wall-clock fields.

    python scripts/reference_metrics.py run OUT_DIR          # the code on PYTHONPATH writes OUT_DIR/*.jsonl
    python scripts/reference_metrics.py compare DIR_A DIR_B  # bit-for-bit comparison; exit 1 on a difference
    python scripts/reference_metrics.py compare DIR_A DIR_B --ignore noise/,curv/  # all but those keys

Four short runs of the tiny test configuration (tests/conftest.py, B = 16, K = 2, 4 rollouts), one per
path through the gradient instruments: the default (power rule, GRPO), ``lr=snr`` with
``lr.source=per_sample``, ``noise.per_sample=on`` (every 2nd rollout) and ``baseline=optimal`` (exact
weights). Rewards are made to vary (an even number of characters scores 1, as the ``varied_rewards`` test
fixture does) so that advantages, gradients and the noise estimates are not all zero. Every metrics row
is kept except the wall-clock fields (``wall_seconds``, ``perf/...``), whose values depend on the machine.

To compare a change with its parent: run this script with PYTHONPATH at a checkout of the parent
(``git worktree add --detach DIR HEAD~1``) and at the change, then ``compare`` the two folders.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = ("default", "snr_per_sample", "noise_per_sample", "optimal")
VOLATILE_PREFIXES = ("perf/",)
VOLATILE_KEYS = ("wall_seconds",)


def _config(name: str, cache_dir: str):
    from rlvr_scaling.algorithms.baselines import OptimalParams
    from rlvr_scaling.algorithms.lr_rules import SNRLRParams
    from tests.conftest import tiny_config

    overrides = {
        "default": {},
        "snr_per_sample": {
            "lr": SNRLRParams(ref_lr=1e-2, ref_responses=16, source="per_sample", warmup_rollouts=1)
        },
        "noise_per_sample": {},
        "optimal": {"baseline": OptimalParams()},
    }[name]
    cfg = tiny_config(cache_dir, **overrides)
    cfg.train.max_responses = 64  # 4 rollouts of 16
    if name in ("snr_per_sample", "noise_per_sample"):
        cfg.noise.per_sample = "on"
        cfg.noise.every_rollouts = 2
    return cfg


def _run_one(name: str, out: Path, cache_dir: str) -> None:
    import torch

    from rlvr_scaling.run import train
    from rlvr_scaling.tasks.reasoning_gym_task import ReasoningGymTask

    torch.set_num_threads(1)
    ReasoningGymTask.score = lambda self, texts, examples: [float(len(t) % 2 == 0) for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        train(_config(name, cache_dir), Path(tmp), log=lambda *_: None)
        rows = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    kept = [
        {k: v for k, v in r.items() if k not in VOLATILE_KEYS and not k.startswith(VOLATILE_PREFIXES)}
        for r in rows
    ]
    (out / f"{name}.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    for name in CONFIGS:  # one process per run: nothing carries over between them
        subprocess.run([sys.executable, __file__, "_one", name, str(out), str(cache)], check=True)
        print(f"{name}: {sum(1 for _ in (out / f'{name}.jsonl').open())} rows")


def _rows(path: Path, ignore: tuple[str, ...]) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        json.dumps({k: v for k, v in r.items() if not k.startswith(ignore)}, sort_keys=True) for r in rows
    ]


def compare(a: Path, b: Path, ignore: tuple[str, ...] = ()) -> int:
    bad = 0
    for name in CONFIGS:
        ra = _rows(a / f"{name}.jsonl", ignore)
        rb = _rows(b / f"{name}.jsonl", ignore)
        if ra == rb:
            print(f"{name}: {len(ra)} rows bit-identical")
            continue
        bad += 1
        print(f"{name}: DIFFERENT ({len(ra)} vs {len(rb)} rows)")
        for i, (x, y) in enumerate(zip(ra, rb)):
            dx, dy = json.loads(x), json.loads(y)
            diff = sorted(k for k in set(dx) | set(dy) if dx.get(k) != dy.get(k))
            if diff:
                print(f"  row {i}: {', '.join(diff[:8])}")
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "_one":
        _run_one(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
    elif cmd == "run":
        run(Path(sys.argv[2]))
    elif cmd == "compare":
        ignore = tuple(sys.argv[5].split(",")) if len(sys.argv) > 5 and sys.argv[4] == "--ignore" else ()
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3]), ignore))
    else:
        sys.exit(__doc__)
