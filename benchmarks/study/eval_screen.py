"""Does the screened evaluation schedule keep the crossings' brackets, and what does it save?

    python benchmarks/study/eval_screen.py RECORDED_DIR [--screened SCREENED_DIR] [--margin 0.04 --ratio 2]

RECORDED_DIR holds run directories of the embedded default run with ``eval.screen_margin=1`` (the full
evaluation at every point, and the screen logged beside it). For each run the screened schedule is
replayed on its rows with the trainer's own rule (``rlvr_scaling.evaluation.full_needed``): a full
evaluation at a point gives the same numbers whether or not the schedule is screened (same seed per
point; ``tests/core/test_eval_screen.py``), so the replay runs the full evaluations the screened run
would run. Per target, a crossing's bracket is (clock of the last full evaluation below the target,
clock of the first at or above it), as ``analysis/data/clock_tables.py`` reads it; the table gives how many
crossings keep the full schedule's bracket and the evaluation responses and seconds saved.

With ``--screened``: run directories of the same conditions and seeds run with the default (screened)
schedule, matched to the recorded ones by ``rollout.prompts_per_rollout`` and ``seed``; their own
evaluation rows give the brackets (the real runs, not a replay), their clocks the cost.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr_scaling.config import EvalConfig
from rlvr_scaling.evaluation import full_needed
from rlvr_scaling.trainer import TrainerState


def points(rows: list[dict], step0_screen: float | None) -> list[tuple[int, float, float]]:
    """(responses, screen accuracy, full accuracy) at every evaluation point of a recorded run."""
    screens = {r["responses"]: r["eval/screen_accuracy"] for r in rows if "eval/screen_accuracy" in r}
    out = []
    for r in rows:
        if "eval/accuracy" in r:
            s = screens.get(r["responses"], step0_screen if r["responses"] == 0 else None)
            out.append((r["responses"], s, r["eval/accuracy"]))
    return out


def brackets(evals: list[tuple[int, float]], targets: list[float]) -> dict[float, tuple | None]:
    out = {}
    for a in targets:
        idx = next((i for i, (_, acc) in enumerate(evals) if acc >= a), None)
        out[a] = None if idx is None else (evals[idx - 1][0] if idx else None, evals[idx][0])
    return out


def replay(pts, e: EvalConfig, targets: list[float]) -> list[int]:
    """The points at which the screened schedule runs the full evaluation (the trainer's rule)."""
    state = TrainerState(targets={f"{a:g}": None for a in targets})
    ran = []
    for i, (resp, s, acc) in enumerate(pts):
        if i == 0 or full_needed(e, state, s, resp):
            ran.append(i)
            state.screen_offsets.append(acc - s)
            state.last_full_at = resp
            for a in targets:
                if state.targets[f"{a:g}"] is None and acc >= a:
                    state.targets[f"{a:g}"] = resp
            state.best_accuracy = max(acc, state.best_accuracy or -1.0)
        state.screen_last = s
    return ran


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recorded", type=Path)
    ap.add_argument("--screened", type=Path, default=None)
    ap.add_argument("--margin", type=float, default=EvalConfig.screen_margin)
    ap.add_argument("--ratio", type=float, default=EvalConfig.screen_full_ratio)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.22, 0.25, 0.28])
    args = ap.parse_args()
    e = EvalConfig(screen_margin=args.margin, screen_full_ratio=args.ratio)
    runs = sorted(p.parent for p in args.recorded.glob("*/metrics.jsonl"))
    loaded = {}
    step0: dict[int, float] = {}  # the step-0 screen depends on the seed alone (same model, same draws)
    for run in runs:
        hydra = run / ".hydra" / "config.yaml"
        import yaml

        cfg = yaml.safe_load(hydra.read_text()) if hydra.is_file() else {}
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        key = (cfg.get("rollout", {}).get("prompts_per_rollout"), cfg.get("seed"))
        loaded[run] = (key, rows)
        if "eval/screen_accuracy" in rows[0]:
            step0[key[1]] = rows[0]["eval/screen_accuracy"]
    print(
        f"replay: eval.screen_margin={args.margin} eval.screen_full_ratio={args.ratio}, targets {args.targets}"
    )
    print(
        "| B | seed | points | full evaluations (screened) | crossings | same bracket | eval responses saved | eval seconds saved |"
    )
    print("|---|---|---|---|---|---|---|---|")
    total = same = 0
    all_full = all_scr = 0.0
    for run, ((p, seed), rows) in loaded.items():
        pts = points(rows, step0.get(seed))
        if any(s is None for _, s, _ in pts):
            print(f"  {run.name}: no screen at some point (not a recorded run, or the step-0 screen unknown)")
            continue
        ran = replay(pts, e, args.targets)
        full_b = brackets([(r, a) for r, _, a in pts], args.targets)
        scr_b = brackets([(pts[i][0], pts[i][2]) for i in ran], args.targets)
        n_cross = sum(v is not None for v in full_b.values())
        n_same = sum(full_b[a] is not None and full_b[a] == scr_b[a] for a in args.targets)
        total, same = total + n_cross, same + n_same
        evals = [r for r in rows if "eval/accuracy" in r]
        full_n = evals[-1]["eval/responses"]
        screen_n = next(r["eval/screen_responses"] for r in rows if "eval/screen_responses" in r)
        cost_full = len(pts) * full_n
        cost_scr = len(ran) * full_n + len(pts) * screen_n
        all_full, all_scr = all_full + cost_full, all_scr + cost_scr
        eval_s = [r["perf/eval_s"] for r in evals]
        screen_s = [r["perf/eval_screen_s"] for r in rows if "perf/eval_screen_s" in r]
        mean_full, mean_screen = sum(eval_s) / len(eval_s), sum(screen_s) / max(len(screen_s), 1)
        secs_full = len(pts) * mean_full
        secs_scr = len(ran) * mean_full + len(pts) * mean_screen
        print(
            f"| {p * 8} | {seed} | {len(pts)} | {len(ran)} | {n_cross} | {n_same} | "
            f"{1 - cost_scr / cost_full:.0%} | {1 - secs_scr / secs_full:.0%} "
            f"({secs_full:.0f} -> {secs_scr:.0f} s) |"
        )
        if n_same < n_cross:
            for a in args.targets:
                if full_b[a] != scr_b[a]:
                    print(f"    target {a}: full {full_b[a]} screened {scr_b[a]}")
    print(
        f"same bracket in {same} of {total} crossings ({same / max(total, 1):.0%}); evaluation responses "
        f"saved over all runs: {1 - all_scr / max(all_full, 1):.0%}"
    )
    if args.screened is not None:
        compare(loaded, args.screened, args.targets)


def _train_rows(rows: list[dict]) -> list[dict]:
    """Training rows without the wall-clock and screen fields (what screening may change) and the noise
    and curvature instruments at theta_old (with budgeted cadences, which rollouts carry them depends on
    wall time)."""
    drop = ("wall_seconds", "eval_responses")

    def kept(k: str) -> bool:
        at_old = k.startswith("curv/") or (k.startswith("noise/") and not k.startswith("noise/multistep"))
        return k not in drop and not at_old and not k.startswith(("perf/", "eval/screen"))

    return [{k: v for k, v in r.items() if kept(k)} for r in rows if "train/reward_mean" in r]


def compare(recorded, screened_dir: Path, targets) -> None:
    """Real screened runs against the recorded ones of the same B and seed."""
    import yaml

    by_key = {key: rows for key, rows in recorded.values()}
    print("\nreal screened runs (default schedule) against the recorded ones, same B and seed:")
    print(
        "| B | seed | full evaluations | crossings | same bracket | training rows identical | eval share of wall: full / screened |"
    )
    print("|---|---|---|---|---|---|---|")
    total = same = 0
    for run in sorted(p.parent for p in screened_dir.glob("*/metrics.jsonl")):
        cfg = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
        key = (cfg["rollout"]["prompts_per_rollout"], cfg["seed"])
        if key not in by_key:
            continue
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        ref = by_key[key]
        ev = [(r["responses"], r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
        ev_ref = [(r["responses"], r["eval/accuracy"]) for r in ref if "eval/accuracy" in r]
        b, b_ref = brackets(ev, targets), brackets(ev_ref, targets)
        n_cross = sum(v is not None for v in b_ref.values())
        n_same = sum(b_ref[a] is not None and b_ref[a] == b[a] for a in targets)
        total, same = total + n_cross, same + n_same
        identical = _train_rows(rows) == _train_rows(ref)

        def share(rs):
            s = sum(r.get("perf/eval_s", 0.0) + r.get("perf/eval_screen_s", 0.0) for r in rs)
            return s / rs[-1]["wall_seconds"]

        print(
            f"| {key[0] * 8} | {key[1]} | {len(ev)} of {len(ev_ref)} | {n_cross} | {n_same} | {identical} | "
            f"{share(ref):.0%} / {share(rows):.0%} |"
        )
    print(f"real runs: same bracket in {same} of {total} crossings")


if __name__ == "__main__":
    main()
