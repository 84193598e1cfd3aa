"""``rlvr-analyze … --to-wandb [ENTITY/PROJECT]``: the analysis as a wandb run beside the training runs.

One run with ``job_type="analysis"`` in the sweep's group (the runs' wandb group / ``run.sweep``, or
``--group``), named ``analysis-<group>``, tagged ``analysis``, whose config is the provenance of
``report.html`` (source, run counts, the runs' git revisions and versions, every analysis option). It logs

* the tables ``exponents_table`` (``exponents.csv``) and ``comparisons_table`` (``comparisons.csv``)
  as ``wandb.Table``;
* every PNG figure as ``wandb.Image`` under ``figures/<file stem>``;
* ``report.html`` as an artifact ``analysis-<group>`` of type ``analysis-report``;
* in the run summary, per condition and clock: ``exponents/<condition>/<clock>/{exponent, ci_low,
  ci_high, n_runs, n_censored}``, and ``runs``/``conditions`` counts.

Where: ``ENTITY/PROJECT`` (or ``PROJECT``) when given; otherwise the source's ``wandb:ENTITY/PROJECT``,
else the runs' ``logger.entity``/``logger.project`` (the trainer's wandb settings, most common value),
else the project ``rlvr-scaling`` (the trainer's default). Mode: ``WANDB_MODE`` when set; otherwise
online when credentials exist (``WANDB_API_KEY`` or a netrc entry for the server: the trainer's rule,
``rlvr_scaling_base.wandb_credentials``), offline otherwise. The run's folder is ``WANDB_DIR`` when set, else the
analysis output folder (``<out>/wandb/offline-run-*`` offline: ``wandb sync`` uploads it later).

The loaders leave these runs out of a training analysis (:data:`analysis.data.wandb_io.ANALYSIS_JOB_TYPE`).
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.data.load import RunRecord, get_path
from analysis.data.wandb_io import ANALYSIS_JOB_TYPE
from analysis.fits.results import Results
from rlvr_scaling_base import wandb_credentials

DEFAULT_PROJECT = "rlvr-scaling"
ARTIFACT_TYPE = "analysis-report"
SUMMARY_COLUMNS = ("exponent", "ci_low", "ci_high", "n_runs", "n_censored")


@dataclass(frozen=True)
class Target:
    entity: str | None
    project: str
    group: str | None
    why: str  # where entity/project came from, for the message


def _most_common(values) -> Any:
    counts = Counter(v for v in values if v not in (None, ""))
    return counts.most_common(1)[0][0] if counts else None


def resolve_target(
    requested: str, source: str, records: list[RunRecord], group: str | None = None
) -> tuple[Target, list[str]]:
    """Entity, project and group of the analysis run (module docstring); returns notes to print."""
    notes: list[str] = []
    if requested:
        entity, _, project = requested.rpartition("/")
        where = (entity or None, project, "--to-wandb")
    elif source.startswith("wandb:"):
        entity, _, project = source[len("wandb:") :].rpartition("/")
        where = (entity or None, project, "the wandb source")
    elif project := _most_common(get_path(r.config, "logger.project") for r in records):
        entity = _most_common(get_path(r.config, "logger.entity") for r in records)
        where = (entity, project, "the runs' logger.project")
    else:
        where = (None, DEFAULT_PROJECT, "the default project")
    if group is None:
        groups = sorted({r.group for r in records if r.group})
        if len(groups) == 1:
            group = groups[0]
        elif groups:
            notes.append(
                f"the runs are in {len(groups)} wandb groups ({', '.join(groups)}): logged without a group"
            )
    return Target(where[0], where[1], group, where[2]), notes


def _table(df: pd.DataFrame):
    import wandb

    clean = df.astype(object).where(df.notna(), None)
    return wandb.Table(
        columns=[str(c) for c in df.columns], data=clean.values.tolist(), allow_mixed_types=True
    )


def _number(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(float(value)) else str(value)
    return value


def summary_values(exponents: pd.DataFrame) -> dict[str, Any]:
    """``exponents/<condition>/<clock>/<column>`` for the run summary (non-finite values as text)."""
    out: dict[str, Any] = {}
    for row in exponents.to_dict("records"):
        for column in SUMMARY_COLUMNS:
            value = row.get(column)
            out[f"exponents/{row['condition']}/{row['clock']}/{column}"] = _number(
                value.item() if hasattr(value, "item") else value
            )
    return out


def log_analysis(
    out: Path,
    target: Target,
    prov: Mapping[str, Any],
    exponents: pd.DataFrame,
    comparisons: pd.DataFrame,
    plots: list[str],
    n_conditions: int,
) -> str:
    """Log the analysis in ``out`` as one wandb run (module docstring); returns where it went."""
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    out = Path(out)
    mode = None if os.environ.get("WANDB_MODE") else ("online" if wandb_credentials() else "offline")
    label = target.group or Path(str(prov["source"]).split(":")[-1]).name or "source"
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, save_code=False)
    run = wandb.init(
        project=target.project,
        entity=target.entity,
        group=target.group,
        job_type=ANALYSIS_JOB_TYPE,
        name=f"analysis-{label}",
        tags=["analysis"],
        config=dict(prov),
        dir=None if os.environ.get("WANDB_DIR") else str(out),
        mode=mode,
        reinit="finish_previous",
        settings=settings,
    )
    try:
        row: dict[str, Any] = {"exponents_table": _table(exponents), "comparisons_table": _table(comparisons)}
        for name in plots:
            if name.endswith(".png") and (out / name).is_file():
                row[f"figures/{name[: -len('.png')]}"] = wandb.Image(str(out / name))
        run.log(row)
        artifact = wandb.Artifact(
            f"analysis-{label}".replace("/", "_").replace(":", "_"),
            type=ARTIFACT_TYPE,
            description=f"rlvr-analyze report of {prov['source']}",
        )
        artifact.add_file(str(out / "report.html"))
        run.log_artifact(artifact)
        run.summary.update(summary_values(exponents))
        run.summary["runs"] = int(prov["runs"])
        run.summary["conditions"] = int(n_conditions)
        where = run.url if run.settings.mode == "online" else str(Path(run.dir).parent)
    finally:
        run.finish()
        # wandb 0.31 returns from finish() before an offline run's transaction log is flushed (measured:
        # 4 of 6 runs read back empty right after finish); tearing the service down completes it
        wandb.teardown()
    return where


def cli_log(args, out: Path, loaded, results: Results, plots, prov) -> int:
    """The ``--to-wandb`` step of :func:`analysis.cli.run`: prints where the run went; 1 on failure."""
    target, notes = resolve_target(args.to_wandb, args.source, loaded.runs, args.group)
    for note in notes:
        print(f"note: {note}")
    n_conditions = results.tables.runs["condition"].nunique()
    try:
        where = log_analysis(out, target, prov, results.exponents, results.comparisons, plots, n_conditions)
    except Exception as err:  # the files are written; say why wandb got nothing
        print(f"rlvr-analyze: --to-wandb failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if args.quiet:
        return 0
    project = f"{target.entity}/{target.project}" if target.entity else target.project
    print(f"logged the analysis to wandb {project} (from {target.why}), group {target.group}: {where}")
    return 0
