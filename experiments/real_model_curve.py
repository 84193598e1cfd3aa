"""The learning curve of one run on a real model (docs/real_model.md) from its run directory.

    python experiments/real_model_curve.py RUN_DIR docs/figures/smollm2_learning.png

Held-out accuracy (``eval/accuracy``) at every evaluation with its Wilson 95 % interval over the
``eval/problems`` problems (one sample each), the training reward per rollout (mean over 8 rollouts) and
the share of responses that ended their turn (``train/finished_frac``), against the responses clock.
Prints the evaluations as a Markdown table, and the seconds per phase (means over the rollouts).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from analysis.figures.plot_style import plt


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` of ``n`` (95 % at z = 1.96)."""
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def main(run_dir: Path, out: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/accuracy" in r]
    train = [r for r in rows if "train/reward_mean" in r]
    print("| responses | accuracy | 95 % interval | mean length |\n|---|---|---|---|")
    for r in evals:
        lo, hi = wilson(r["eval/accuracy"], r["eval/problems"])
        print(
            f"| {r['responses']} | {r['eval/accuracy']:.3f} | [{lo:.3f}, {hi:.3f}] | {r['eval/length']:.1f} |"
        )
    for key in ("perf/generate_s", "perf/old_logprob_s", "perf/train_s", "perf/drift_s", "perf/eval_s"):
        values = [r[key] for r in rows if key in r and (key == "perf/eval_s" or "train/reward_mean" in r)]
        if values:
            print(f"{key}: mean {sum(values) / len(values):.2f} s over {len(values)}")
    if train:
        tokens = sum(r["rollout/tokens"] for r in train)
        seconds = sum(r["perf/generate_s"] for r in train)
        print(
            f"generation: {sum(r['rollout/responses'] for r in train) / seconds:.2f} responses/s, "
            f"{tokens / seconds:.1f} tokens/s; wall {rows[-1]['wall_seconds']:.0f} s"
        )
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = [r["responses"] for r in evals]
    acc = [r["eval/accuracy"] for r in evals]
    bounds = [wilson(r["eval/accuracy"], r["eval/problems"]) for r in evals]
    ax.errorbar(
        x,
        acc,
        yerr=[[a - lo for a, (lo, _) in zip(acc, bounds)], [hi - a for a, (_, hi) in zip(acc, bounds)]],
        fmt="o-",
        capsize=3,
        label="held-out accuracy (95 %)",
    )
    w = 8
    smooth = [
        (
            train[i]["responses"],
            sum(r["train/reward_mean"] for r in train[max(0, i - w + 1) : i + 1])
            / len(train[max(0, i - w + 1) : i + 1]),
        )
        for i in range(len(train))
    ]
    ax.plot(*zip(*smooth), alpha=0.6, label=f"training reward (mean of {w} rollouts)")
    ax.plot(
        [r["responses"] for r in train],
        [r["train/finished_frac"] for r in train],
        ".",
        ms=3,
        alpha=0.4,
        label="ended its turn (share)",
    )
    ax.set_xlabel("responses")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, loc="lower right")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
