"""Competing risks: reaching a target before failing, per condition and rollout size.

A run can reach the target, fail first, or end (budget, or still running) with neither. The
Kaplan–Meier view of one clock treats the other event as independent censoring; the **cumulative
incidence** (Aalen–Johansen, :func:`analysis.fits.survival.aalen_johansen`) does not need that assumption: it
estimates ``P(target reached by t, before failing)`` and ``P(failed by t, before reaching the target)``
with only budget endings as censoring.

Event of each run and target (on the analysis clock):

* **reached** at ``target:<a>`` (the evaluation at which the crossing was seen) when the target was
  reached and the run had not failed before that evaluation (failure time = the chosen failure clock);
* **failed** at ``failure`` when the run failed before reaching the target;
* **censored** at its last evaluation otherwise (``target:<a>:censored_by`` = ``budget`` or
  ``incomplete``).

A run that reached the target after its failure onset but before the detector fired counts as failed
first (the onset defines the failure).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.data.clock_tables import Tables, target_label
from analysis.fits.survival import aalen_johansen

INCIDENCE_COLUMNS = [
    "condition",
    "B",
    "target",
    "time",
    "at_risk",
    "reached",
    "failed",
    "censored",
    "cif_reached",
    "cif_failed",
    "survival",
]
SUMMARY_COLUMNS = [
    "condition",
    "B",
    "target",
    "n_runs",
    "n_reached",
    "n_failed_first",
    "n_censored_budget",
    "n_censored_incomplete",
    "cif_reached_end",
    "cif_failed_end",
    "end",
]


def competing_events(runs: pd.DataFrame, a: float) -> tuple[np.ndarray, np.ndarray]:
    """``(times, causes)`` for target ``a``: cause 1 reached, 2 failed first, 0 censored."""
    label = target_label(a)
    reached = ~runs[f"{label}:censored"].to_numpy(bool)
    t_reach = runs[label].to_numpy(float)
    failed = ~runs["failure:censored"].to_numpy(bool)
    t_fail = runs["failure"].to_numpy(float)
    first_reach = reached & (~failed | (t_reach <= t_fail))
    first_fail = failed & ~first_reach
    times = np.where(first_reach, t_reach, np.where(first_fail, t_fail, t_reach))
    causes = np.where(first_reach, 1, np.where(first_fail, 2, 0))
    return times, causes


def incidence_tables(tables: Tables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aalen–Johansen curves (one row per condition, B, target and event time) and their summary."""
    rows, summary = [], []
    runs = tables.runs[tables.runs["in_fit"]]
    for (condition, size), group in runs.groupby(["condition", "B"], sort=True):
        for a in tables.targets:
            times, causes = competing_events(group, a)
            aj = aalen_johansen(times, causes)
            for j, t in enumerate(aj["time"]):
                rows.append(
                    {
                        "condition": condition,
                        "B": size,
                        "target": a,
                        "time": t,
                        "at_risk": int(aj["at_risk"][j]),
                        "reached": int(aj["events"][j, 0]),
                        "failed": int(aj["events"][j, 1]),
                        "censored": int(aj["censored"][j]),
                        "cif_reached": float(aj["cif"][j, 0]),
                        "cif_failed": float(aj["cif"][j, 1]),
                        "survival": float(aj["survival"][j]),
                    }
                )
            cause_by = group[f"{target_label(a)}:censored_by"]
            summary.append(
                {
                    "condition": condition,
                    "B": size,
                    "target": a,
                    "n_runs": len(group),
                    "n_reached": int((causes == 1).sum()),
                    "n_failed_first": int((causes == 2).sum()),
                    "n_censored_budget": int(((causes == 0) & (cause_by == "budget").to_numpy()).sum()),
                    "n_censored_incomplete": int(
                        ((causes == 0) & (cause_by == "incomplete").to_numpy()).sum()
                    ),
                    "cif_reached_end": float(aj["cif"][-1, 0]),
                    "cif_failed_end": float(aj["cif"][-1, 1]),
                    "end": float(np.nanmax(times)) if np.isfinite(times).any() else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=INCIDENCE_COLUMNS), pd.DataFrame(summary, columns=SUMMARY_COLUMNS)
