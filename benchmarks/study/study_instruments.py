"""The noise and curvature instruments over a study folder, per condition: B_noise from gradients at
theta_old (``noise/*``) against the previous trajectory estimate (``noise/multistep_*``), the critical
batch B_crit = tr(H Sigma) / G'HG, the curvature along the gradient and along the update, and the top
Hessian eigenvalue (``curv/*``).

    python benchmarks/study/study_instruments.py runs/reference

Scales are ratios of means pooled over every measured rollout of the condition's runs (a single
rollout's |G|^2 estimate is unbiased but often <= 0 on the embedded model's few signal prompts), with a
95 % interval from resampling runs; curvatures and eigenvalues are medians over measurements.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

PAIRS = {
    "B_noise (theta_old)": ("noise/trace_cov", "noise/grad_norm_sq"),
    "B_noise (multistep)": ("noise/multistep_trace_cov", "noise/multistep_grad_norm_sq"),
    "B_crit": ("curv/trace_hsigma", "curv/gHg_abs"),
}
MEDIANS = ("curv/gHg", "curv/uHu", "curv/top_eig")


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def condition_of(name: str) -> str:
    """The run directory's overrides without the seed and the rollout size."""
    keep = [i for i in name.split(",") if not i.startswith(("seed=", "rollout.prompts_per_rollout="))]
    return ",".join(keep)


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    runs: dict[str, list[dict]] = defaultdict(list)
    for metrics in sorted(folder.glob("*/metrics.jsonl")):
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        sums = {}
        for label, (num, den) in PAIRS.items():
            pairs = [(_num(r.get(num)), _num(r.get(den))) for r in rows if num in r and den in r]
            pairs = [(a, d) for a, d in pairs if math.isfinite(a) and math.isfinite(d)]
            sums[label] = (sum(a for a, _ in pairs), sum(d for _, d in pairs), len(pairs))
        med = {k: [_num(r[k]) for r in rows if k in r and math.isfinite(_num(r[k]))] for k in MEDIANS}
        zero = sum(1 for r in rows if "noise/grad_norm_sq" in r and _num(r["noise/grad_norm_sq"]) == 0.0)
        total = sum(1 for r in rows if "noise/grad_norm_sq" in r)
        runs[condition_of(metrics.parent.name)].append(
            {"sums": sums, "med": med, "zero": zero, "total": total}
        )
    rng = np.random.default_rng(0)
    print(f"| condition | runs | {' | '.join(PAIRS)} | {' | '.join(MEDIANS)} | |G|² = 0 exactly |")
    print("|---" * (3 + len(PAIRS) + len(MEDIANS)) + "|")
    for cond, items in runs.items():
        cells = []
        for label in PAIRS:
            num = np.array([x["sums"][label][0] for x in items])
            den = np.array([x["sums"][label][1] for x in items])
            n = sum(x["sums"][label][2] for x in items)
            if n == 0 or den.sum() <= 0:
                cells.append("–")
                continue
            boot = []
            for _ in range(2000):
                i = rng.integers(0, len(items), len(items))
                boot.append(num[i].sum() / den[i].sum() if den[i].sum() > 0 else math.inf)
            lo, hi = np.quantile(boot, [0.025, 0.975])
            cells.append(f"{num.sum() / den.sum():.0f} [{lo:.0f}, {hi:.0f}] (n = {n})")
        for k in MEDIANS:
            vals = [v for x in items for v in x["med"][k]]
            cells.append(f"{np.median(vals):.3g}" if vals else "–")
        zero = sum(x["zero"] for x in items)
        total = sum(x["total"] for x in items)
        print(f"| {cond} | {len(items)} | {' | '.join(cells)} | {zero}/{total} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
