"""Optional metric sinks besides the run directory (which stays the source of truth).

``logger=wandb``: online when credentials exist (``WANDB_API_KEY`` or a netrc entry), offline
otherwise; run name, group (= sweep name) and tags derived from the config; the config is logged; each
metrics row goes to ``wandb.log`` unchanged; at the end ``summary`` gets ``state``, ``failure`` and
``derived``. The run is always finished, also when training raises. Sampled completions
(:mod:`rlvr_scaling.samples`) go to the incremental table ``samples``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr_scaling_base import wandb_credentials


class WandbSink:
    def __init__(
        self,
        logger_cfg,
        config_dict: dict[str, Any],
        run_dir: Path,
        name: str,
        group: str,
        tags: list[str],
        run_id: str,
    ):
        import wandb

        mode = logger_cfg.mode
        if mode == "auto":
            mode = "online" if wandb_credentials() else "offline"
        self.run = wandb.init(
            project=logger_cfg.project,
            entity=logger_cfg.entity,
            name=name,
            group=group,
            tags=list(tags) + list(logger_cfg.tags),
            config=config_dict,
            dir=str(run_dir),
            mode=mode,
            id=run_id,
            resume="allow",
            reinit="finish_previous",
        )
        self.samples_table = None

    def log(self, row: dict[str, Any]) -> None:
        self.run.log(row)

    def log_samples(self, rows: list[dict[str, Any]]) -> None:
        """Sampled completions (samples.py) as the wandb table ``samples``: one incremental table, each
        call uploads only its new rows; attached to the step of the next metrics row."""
        import wandb

        from .samples import COLUMNS

        if not rows:
            return
        if self.samples_table is None:
            self.samples_table = wandb.Table(columns=list(COLUMNS), log_mode="INCREMENTAL")
        for r in rows:
            self.samples_table.add_data(*(r[c] for c in COLUMNS))
        self.run.log({"samples": self.samples_table}, commit=False)

    def close(self, state: str, failure: dict | None, derived: dict[str, Any]) -> None:
        self.run.summary["state"] = state
        self.run.summary["failure"] = failure
        self.run.summary["derived"] = derived
        self.run.finish(exit_code=0 if state in ("completed", "failed", "preempted") else 1)
