"""Calibration of the failure detectors: false alarms on healthy runs, delay on injected collapses.

Three measurements, printed as tables (the figures in docs/failure.md come from this script):

1. **Simulated healthy runs** (``--healthy N`` per rollout size, default 200): an accuracy curve that
   rises from ``a0`` to a plateau and stays there, observed through the project's evaluation schedule
   (``--problems`` fixed problems of heterogeneous difficulty, ``--samples`` samples each), per-rollout
   training rewards (B/8 fresh prompts of heterogeneous difficulty, 8 samples each: a group's
   responses are correlated, as in GRPO), a drift KL with log-normal scatter, a slowly falling entropy
   and a steady truncation rate. Every row goes through the real :class:`FailureMonitor` with the default
   config; a run that fires is a false alarm.
2. **Injected collapses**: the same runs, with the policy collapsing at ``R0`` (accuracy and reward fall
   to ``a_low`` within ``--collapse-width`` responses), once with the drift and entropy degrading too
   and once without (only the collapse detectors can see it). Reported per B: fraction detected,
   onset minus R0, detection minus R0 (median and 90th percentile), the width of the censoring
   interval (onset_lower_responses, onset_responses] and how often its lower end lies before R0, and
   which detector decided.
3. **Real runs** (``--runs DIR``, optional): replays the metrics.jsonl of real run directories through
   the detectors (offline) and lists which fired, where — e.g. the healthy clipped two_clock grid.

    python benchmarks/calibration/failure_calibration.py                     # simulated, 200 per size
    python benchmarks/calibration/failure_calibration.py --runs runs/two_clock --healthy 400
    python benchmarks/calibration/failure_calibration.py --start 0.15 0.2 --plateau 0.25 0.3   # the embedded default's
                                         # accuracy levels, where the standard-error condition decides
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rlvr_scaling.algorithms.failure import FailureConfig, FailureMonitor  # noqa: E402
from rlvr_scaling.config import EvalConfig  # noqa: E402
from rlvr_scaling.evaluation import next_eval_point  # noqa: E402

SIZES = (32, 64, 128, 256, 512)
LEVELS = ((0.2, 0.3), (0.45, 0.6))  # accuracy: start and plateau drawn uniformly from these ranges


def accuracy_curve(r: np.ndarray, a0: float, a_max: float, tau: float) -> np.ndarray:
    return a0 + (a_max - a0) * (1.0 - np.exp(-r / tau))


def simulate(
    b: int,
    rng: np.random.Generator,
    budget: int,
    n_problems: int,
    samples: int,
    collapse_at: float | None = None,
    quiet: bool = False,
    width: float = 512.0,
    a_low: float = 0.02,
    levels: tuple[tuple[float, float], tuple[float, float]] = ((0.2, 0.3), (0.45, 0.6)),
) -> list[dict]:
    """One run's metric rows (training and evaluation, with clocks), as the trainer writes them."""
    a0, a_max = rng.uniform(*levels[0]), rng.uniform(*levels[1])
    tau = rng.uniform(1000, 6000)
    kl_level = 10 ** rng.uniform(-3, -1.5)  # nats per token, healthy drift
    h0 = rng.uniform(0.5, 0.9)
    e = EvalConfig()
    rows, r, rollout = [], 0, 0
    # problems differ in difficulty (a group's responses are correlated): per-problem success
    # probabilities spread around the mean (Beta with concentration 2), shifted as the policy learns
    base = rng.beta(2 * a0, 2 * (1 - a0), size=n_problems)

    def per_problem(acc: float, size: int, fixed: bool) -> np.ndarray:
        q = base if fixed else rng.beta(2 * a0, 2 * (1 - a0), size=size)
        return np.clip(q + (acc - a0), 0.0, 1.0)

    def level(resp: float) -> tuple[float, float]:
        """(accuracy, collapse progress in [0, 1]) at ``resp`` responses."""
        acc = float(accuracy_curve(np.array([resp]), a0, a_max, tau)[0])
        if collapse_at is None or resp <= collapse_at:
            return acc, 0.0
        x = min(1.0, (resp - collapse_at) / width)
        return acc + (a_low - acc) * x, x

    def evaluate():
        acc, _ = level(r)
        hits = rng.binomial(samples, per_problem(acc, n_problems, fixed=True))
        rows.append(
            {
                "rollout": rollout,
                "responses": r,
                "eval/accuracy": float(hits.sum()) / (samples * n_problems),
                "eval/responses": samples * n_problems,
                "eval/problems": n_problems,
            }
        )

    evaluate()
    next_eval = next_eval_point(e, 0)
    while r < budget:
        r += b
        rollout += 1
        acc, x = level(r)
        rows.append(
            {
                "rollout": rollout,
                "responses": r,
                "rollout/responses": b,
                "rollout/prompts": b // 8,
                "train/reward_mean": float(rng.binomial(8, per_problem(acc, b // 8, fixed=False)).sum()) / b,
                "train/kl_old": kl_level * math.exp(rng.normal(0, 0.7)) * (1 + (0 if quiet else 300) * x),
                "train/entropy": h0
                * (1 - 0.4 * min(r / 16384, 1))
                * (1 - (0 if quiet else 0.99) * x)
                * math.exp(rng.normal(0, 0.05)),
                "train/finished_frac": 1.0 - rng.binomial(b, 0.02) / b,
                "loss/policy": 0.0,
                "opt/grad_norm": 0.3,
                "train/param_norm": 40.0,
            }
        )
        if r >= next_eval:
            evaluate()
            next_eval = next_eval_point(e, r)
    return rows


def first_fire(rows: list[dict], config: FailureConfig) -> tuple[str, int, int, int | None] | None:
    """(detector, responses at the decision, onset, lower onset bound) of the first detector that fires."""
    monitor = FailureMonitor(config)
    for row in rows:
        fired = monitor.observe(row)
        if fired is not None:
            name, event = fired
            lower = getattr(event, "onset_lower_responses", None)  # absent before it was recorded
            return name, int(row["responses"]), event.onset_responses, lower
    return None


def healthy_table(n: int, budget: int, n_problems: int, samples: int, seed: int, levels=LEVELS) -> list[dict]:
    out = []
    for b in SIZES:
        rng = np.random.default_rng([seed, b])
        fired = [
            first_fire(simulate(b, rng, budget, n_problems, samples, levels=levels), FailureConfig())
            for _ in range(n)
        ]
        alarms = [f for f in fired if f is not None]
        by = {}
        for name, *_ in alarms:
            by[name] = by.get(name, 0) + 1
        out.append(
            {"B": b, "runs": n, "false_alarms": len(alarms), "rate": len(alarms) / n, "by_detector": by}
        )
    return out


def collapse_table(
    n: int,
    budget: int,
    n_problems: int,
    samples: int,
    seed: int,
    r0: float,
    width: float,
    quiet: bool = False,
    levels=LEVELS,
) -> list[dict]:
    out = []
    for b in SIZES:
        rng = np.random.default_rng([seed, b, 1])
        got = [
            first_fire(
                simulate(
                    b,
                    rng,
                    budget,
                    n_problems,
                    samples,
                    collapse_at=r0,
                    width=width,
                    quiet=quiet,
                    levels=levels,
                ),
                FailureConfig(),
            )
            for _ in range(n)
        ]
        hits = [g for g in got if g is not None and g[1] > r0]
        early = [g for g in got if g is not None and g[1] <= r0]
        onset = np.array([g[2] - r0 for g in hits], float)
        detect = np.array([g[1] - r0 for g in hits], float)
        width_ = np.array([g[2] - g[3] for g in hits if g[3] is not None], float)  # (lower, onset]
        by = {}
        for name, *_ in hits:
            by[name] = by.get(name, 0) + 1
        out.append(
            {
                "B": b,
                "runs": n,
                "detected": len(hits) / n,
                "before_R0": len(early),
                "onset-R0 median": float(np.median(onset)) if onset.size else math.nan,
                "onset-R0 p90": float(np.quantile(onset, 0.9)) if onset.size else math.nan,
                "detect-R0 median": float(np.median(detect)) if detect.size else math.nan,
                "detect-R0 p90": float(np.quantile(detect, 0.9)) if detect.size else math.nan,
                # the censoring interval (onset_lower_responses, onset_responses]: its width, and how
                # often it reaches back to R0 (a ramp's condition begins after R0: it need not)
                "onset-lower median": float(np.median(width_)) if width_.size else math.nan,
                "onset-lower p90": float(np.quantile(width_, 0.9)) if width_.size else math.nan,
                "lower<R0": int(np.sum([g[3] is not None and g[3] < r0 for g in hits])),
                "by_detector": by,
            }
        )
    return out


def replay_runs(root: Path) -> list[dict]:
    """Replays real runs' metrics through the default detectors (offline)."""
    out = []
    for metrics in sorted(root.rglob("metrics.jsonl")):
        rows = []
        for line in metrics.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows.append({k: (float(v) if v in ("nan", "inf", "-inf") else v) for k, v in row.items()})
        if not rows:
            continue
        fired = first_fire(rows, FailureConfig())
        status = {}
        if (metrics.parent / "status.json").is_file():
            status = json.loads((metrics.parent / "status.json").read_text())
        out.append(
            {
                "run": str(metrics.parent.relative_to(root)),
                "state": status.get("state"),
                "logged_failure": (status.get("failure") or {}).get("detector"),
                "replayed": fired[0] if fired else None,
                "onset": fired[2] if fired else None,
                "onset_lower": fired[3] if fired else None,
                "at": fired[1] if fired else None,
                "responses": rows[-1].get("responses"),
            }
        )
    return out


def _print(rows: list[dict]) -> None:
    if not rows:
        print("(none)")
        return
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k in keys))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--healthy", type=int, default=200, help="simulated runs per rollout size")
    p.add_argument("--budget", type=int, default=16384)
    p.add_argument("--problems", type=int, default=256, help="validation problems")
    p.add_argument("--samples", type=int, default=8, help="samples per validation problem")
    p.add_argument("--collapse-at", type=float, default=6000.0)
    p.add_argument("--collapse-width", type=float, default=512.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--start",
        type=float,
        nargs=2,
        default=LEVELS[0],
        help="range of the starting accuracy (default 0.2 0.3)",
    )
    p.add_argument(
        "--plateau",
        type=float,
        nargs=2,
        default=LEVELS[1],
        help="range of the plateau accuracy (default 0.45 0.6)",
    )
    p.add_argument("--runs", type=Path, default=None, help="replay real run directories under this folder")
    args = p.parse_args(argv)
    levels = (tuple(args.start), tuple(args.plateau))
    print(
        f"## healthy simulated runs ({args.healthy} per B, evaluation: {args.problems} problems x {args.samples}, "
        f"accuracy from {args.start} to {args.plateau})"
    )
    _print(healthy_table(args.healthy, args.budget, args.problems, args.samples, args.seed, levels))
    for quiet, what in ((False, "drift up 300x, entropy to 1 %"), (True, "drift and entropy unchanged")):
        print(
            f"\n## injected collapse at R0 = {args.collapse_at:g} over {args.collapse_width:g} responses: "
            f"accuracy and reward to {0.02}, {what}"
        )
        _print(
            collapse_table(
                args.healthy,
                args.budget,
                args.problems,
                args.samples,
                args.seed,
                args.collapse_at,
                args.collapse_width,
                quiet=quiet,
                levels=levels,
            )
        )
    if args.runs is not None:
        print(f"\n## real runs under {args.runs} replayed through the default detectors")
        replayed = replay_runs(args.runs)
        _print(replayed)
        fired = [r for r in replayed if r["replayed"]]
        print(f"{len(fired)} of {len(replayed)} runs fire")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
