"""Writing simulated runs: run directories in the trainer's format (docs/design.md §6), wandb offline runs
logged as the trainer logs them, and a whole sweep with its truth in ``synthetic_truth.json``."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from analysis.synthetic.simulate import simulate
from analysis.synthetic.spec import SyntheticRun, SyntheticSpec


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """Non-finite floats as the trainer writes them (``"nan"``, ``"inf"``, ``"-inf"``: JSON has none)."""
    return {
        k: (
            ("nan" if math.isnan(v) else "inf" if v > 0 else "-inf")
            if isinstance(v, float) and not math.isfinite(v)
            else v
        )
        for k, v in row.items()
    }


def write_run_dirs(runs: list[SyntheticRun], out: Path) -> list[Path]:
    """Write each run as a run directory ``out/<run.name>/``."""
    paths = []
    for run in runs:
        path = Path(out) / run.config["run"]["name"]
        (path / ".hydra").mkdir(parents=True, exist_ok=True)
        (path / "checkpoints").mkdir(exist_ok=True)
        text = yaml.safe_dump(run.config, sort_keys=False)
        (path / "config.yaml").write_text(text)
        (path / ".hydra" / "config.yaml").write_text(text)
        (path / "metrics.jsonl").write_text("".join(json.dumps(_json_row(r)) + "\n" for r in run.rows))
        (path / "status.json").write_text(json.dumps(run.status, indent=1))
        (path / "summary.json").write_text(json.dumps(run.summary, indent=1))
        paths.append(path)
    return paths


def write_wandb_offline(runs: list[SyntheticRun], wandb_dir: Path, project: str = "rlvr-scaling") -> None:
    """Log each run to wandb offline under ``wandb_dir/wandb/offline-run-*``, as the trainer does."""
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    settings = wandb.Settings(
        silent=True, console="off", x_disable_stats=True, disable_git=True, save_code=False
    )
    Path(wandb_dir).mkdir(parents=True, exist_ok=True)
    for run in runs:
        wb = wandb.init(
            project=project,
            dir=str(wandb_dir),
            mode="offline",
            config=run.config,
            group=run.config["run"]["sweep"],
            name=run.config["run"]["name"],
            tags=["synthetic"],
            settings=settings,
        )
        for row in run.rows:
            wb.log(row)
        wb.summary["state"] = run.status["state"]
        wb.summary["failure"] = run.status["failure"]
        wb.summary["derived"] = run.summary["derived"]
        wb.finish()


def write_sweep(
    out: Path, specs: list[SyntheticSpec] | SyntheticSpec, wandb: bool = False
) -> list[SyntheticRun]:
    """Write the runs of one or more conditions under ``out`` and their truth to ``synthetic_truth.json``."""
    specs = [specs] if isinstance(specs, SyntheticSpec) else specs
    out = Path(out)
    runs: list[SyntheticRun] = []
    truth = []
    for spec in specs:
        spec_runs = simulate(spec)
        write_run_dirs(spec_runs, out)
        if wandb:
            write_wandb_offline(spec_runs, out / "_wandb")
        runs.extend(spec_runs)
        truth.append({"spec": asdict(spec), "runs": [r.truth for r in spec_runs]})
    (out / "synthetic_truth.json").write_text(json.dumps(truth, indent=1, default=str))
    return runs
