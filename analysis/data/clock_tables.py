"""Per-run clocks: responses-to-target and responses-to-failure, recomputed from the metrics rows.

For each run (docs/design.md §3):

* **Responses-to-target** ``R_T(a)``: read by the **crossing rule** named in ``ClockOptions.crossing``
  (:mod:`analysis.data.crossings`: one registered function per rule, handed only the evaluations the
  run is read at). The default, ``interval``, brackets the crossing between the last evaluation below
  ``a`` and the first with ``eval/accuracy >= a``: the run enters the fit as **interval-censored** in
  ``[target:<a>:lower, target:<a>]``, ``target:<a>`` being the clock at the first evaluation at or
  above ``a`` (what the trainer's ``summary.json`` reports); ``isotonic`` does the same on the
  isotonic fit of the curve up to its peak; ``exact`` and ``interpolate`` give a time taken as exact
  (``target:<a>:lower`` empty).
* **A horizon fixed before the runs.** Crossings and failures are read only from the metrics rows at
  or before the run's **horizon** ``H`` (responses), which the run records before it starts
  (:func:`condition_horizons`): by default (``horizon="auto"``) the ``eval.horizon`` its condition's
  runs set (a study's, after its pilot: the pilot's runs are read to it too), else the
  ``train.max_responses`` it was launched with; never a minimum over the runs present. One horizon for
  everything a run contributes: a run not crossed by ``H`` is right-censored at its last evaluation
  within ``H`` (``censored_by = budget``, whether its own budget or the horizon ended it), a failure
  counts only if its detector decided at or before ``H`` (a run trained to ``H`` stops there before a
  later detection, whatever the onset) and is censored at ``H`` otherwise, and an incomplete run
  observed past ``H`` is complete for the analysis (``past_horizon``). So a run trained to ``H`` and the
  same run continued past it give the same failure and crossings. Without a horizon
  (``horizon=None``) the isotonic rule pools evaluations up to the run's peak however long the run
  went on, so a run's length — its budget, or ``train.stop_at_targets`` — would move its crossings;
  the tables say when runs of one condition stopped at different points before the horizon.
* **Discrete in rollouts.** The policy changes only at rollout boundaries, so with ``discrete=True``
  (the default) a crossing first seen at an evaluation at ``r`` with the evaluation before it at
  ``r_prev`` happened with one of the rollouts ending at ``r_prev + B, ..., r``: ``target:<a>:lower`` is
  ``r_prev + B`` (the first rollout, ``B``, after the step-0 evaluation) and the fit reads the interval
  ``[lower, r]``; where ``lower == r`` (an evaluation after every rollout) the time is exact. Nothing
  happens before the first update (``R >= B``), so no crossing is left-censored at 0. The fitted time is
  the discrete ``R``: the responses consumed by the end of the rollout whose update first puts the
  accuracy at or above the target. ``discrete=False`` keeps the continuous brackets ``(r_prev, r]``.
* **Competing risks, one rule.** A run is at risk of reaching a target until it fails: for a failed run
  only evaluations at or before its failure time (the onset by default) can time a crossing, and a run
  that has not crossed by then is right-censored **at the failure time** with ``censored_by =
  failure`` — the same rule :mod:`analysis.fits.competing` uses for the cumulative incidence. A run that
  never reaches ``a`` otherwise is right-censored at its last evaluation, and ``target:<a>:censored_by``
  says why: ``budget`` (it ended without failing) or ``incomplete``. ``target:<a>:last_below`` is the
  clock of the last evaluation seen while at risk (the lower end of the "reached at failure" bound).
  A target already met at the step-0 evaluation (``R_T = 0``) cannot enter a log-space fit: it is
  kept in the table, noted, and left out of that target's fit.
* **Resolution-limited** points: reached at the first evaluation after step 0, or with an evaluation
  spacing (or the rollout size B) larger than ``resolution_frac`` (default 1/4) of ``R_T``; they are
  flagged and counted in the report. 1/4: a bracket of relative width f has a log-width
  -log(1 - f) <= 0.29 whose uniform spread (sd 0.083) adds under a sixth to a within-size scatter
  sigma ~ 0.21 (``make study``); the default geometric schedule (4 evaluations per doubling) has
  brackets of 0.16, so a tighter threshold would flag every crossing of every run.
* **Responses-to-failure** ``R_F``: for a ``failed`` run, the failure **onset** by default
  (``status.json["failure"]["onset_responses"]``, the first rollout or evaluation of the sustained
  condition) or the detection (``failure.responses``, when the detector decided) with
  ``failure_time="detection"``; both are kept (``failure:onset``, ``failure:detection``). The onset is
  **interval-censored** in ``(failure:lower, failure]``: the onset row's statistic is smoothed over the
  detector's window, so the condition can have begun up to a rollout and a window earlier
  (:func:`failure_lower`; the trainer's ``onset_lower_responses`` when written). A failure within the
  first rollouts is left-censored, and ``failure:resolution_limited`` flags intervals wider than
  ``resolution_frac`` of the onset. The detection time is exact. A run written before onsets were
  recorded falls back to detection with a note. Otherwise right-censored at the final ``responses``.
  Incomplete runs (running, preempted, unknown) are right-censored at their last row and enter the
  fits by default (``include_incomplete=False`` drops them: when incompleteness depends on B,
  dropping biases the exponent). On clocks other than ``responses`` the value is that clock in the last
  metrics row with ``responses <=`` the chosen responses.
* **Noise scale** (McCandlish et al. 2018): from the training rows up to the failure time (or the end),
  ``noise:b_noise`` = mean ``noise/trace_cov`` / mean ``noise/grad_norm_sq`` (a ratio of means: the
  per-rollout estimates are unbiased but very noisy and their ratio is not), next to the median of the
  per-rollout ``noise/b_noise`` and the number of finite rows used (K = 1 logs NaN: no estimate);
  likewise ``curv:b_crit`` = mean ``curv/trace_hsigma`` / mean ``curv/gHg_abs`` from the curvature rows
  (``docs/theory.md``).

The values are recomputed from ``metrics.jsonl``; ``summary.json`` is only used to cross-check, and a
disagreement sets ``summary_mismatch`` with a note. ``clock="tokens"|"flops"|"wall_seconds"|
"optimizer_steps"`` reports the same events on another clock: the value of that clock in the same row.
Unknown metric keys in rows (new instruments) are carried along and never break reading.

This module builds the tables (:func:`build_tables`: one row per run, one per evaluation) and each run's
row (:func:`run_clocks`); the parts it reads with live beside it, one concern each:
:mod:`analysis.data.clock_options` (the options, the :class:`Tables` type, the target labels),
:mod:`analysis.data.conditions` (condition keys and labels), :mod:`analysis.data.horizon` (the horizon a
run is read to), :mod:`analysis.data.target_clock` (responses-to-target),
:mod:`analysis.data.failure_clock` (responses-to-failure), :mod:`analysis.data.noise_columns` (noise
scale and curvature) and :mod:`analysis.data.row_values` (values of the metrics rows). Their public
names are importable from here too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.data.clock_options import (
    CLOCK_CHOICES,
    FAILURE_TIMES,
    ClockOptions,
    Tables,
    check_options,
    target_label,
)
from analysis.data.conditions import condition_labels, condition_slug, config_column
from analysis.data.crossings import rollout_after
from analysis.data.failure_clock import check_reported_failure, failure_clock, failure_columns, failure_lower
from analysis.data.horizon import (
    condition_horizons,
    horizon_end,
    horizon_messages,
    planned_horizon,
    rollout_size,
    run_stop_point,
)
from analysis.data.load import (
    STATES,
    RunReadError,
    RunRecord,
    SkippedRun,
    flatten_config,
    get_path,
    is_number,
)
from analysis.data.model_size import PARAMETERS_KEY, run_parameters
from analysis.data.noise_columns import NOISE_KEYS, curvature_summary, noise_summary
from analysis.data.row_values import config_targets, num
from analysis.data.target_clock import Evaluations, eval_columns, read_evaluations, target_columns

__all__ = [
    "CLOCK_CHOICES",
    "FAILURE_TIMES",
    "NOISE_KEYS",
    "ClockOptions",
    "Tables",
    "build_tables",
    "condition_horizons",
    "condition_slug",
    "curvature_summary",
    "failure_lower",
    "horizon_end",
    "noise_summary",
    "planned_horizon",
    "rollout_after",
    "run_clocks",
    "target_label",
]


def run_clocks(
    record: RunRecord, targets: list[float], opts: ClockOptions, horizon: float = math.inf
) -> tuple[dict, dict]:
    """Compute one run's row of the runs table and its evaluation columns; ``horizon``: the responses
    up to which its crossings and failure are read (:func:`condition_horizons`).

    Raises :class:`RunReadError` for a run that cannot give any clock (no B, no evaluation).
    """
    notes = list(record.notes)
    summary = record.summary or {}
    size, sizes = rollout_size(record.config, summary, notes)
    status = record.status if isinstance(record.status, dict) else None
    state = _state(status, notes)
    incomplete = state not in ("completed", "failed")
    if incomplete:
        notes.append(f"incomplete run (state {state})")
    ev = read_evaluations(record.rows, opts.clock, notes)
    out = _run_row(record, state, incomplete, size, sizes, ev, opts)
    out["horizon"] = horizon
    # the run is read to the end of the rollout that reaches the horizon (where a run trained to it stops)
    horizon = float(horizon_end(horizon, size))
    past = float(record.rows[-1]["responses"]) >= horizon  # observed over the whole horizon
    out["past_horizon"] = past
    out["in_fit"] = out["in_fit"] or past
    fail = failure_clock(record, status, state, size, ev.resp, opts, notes, horizon)
    mismatch = target_columns(out, targets, ev, fail, state, incomplete, size, summary, opts, notes)
    _check_truncated(status, record.rows, notes)
    mismatch = check_reported_failure(summary, fail, notes) or mismatch
    out.update(failure_columns(fail, state, record.rows, opts))
    out.update(noise_summary(record.rows, fail.at if not fail.censored else horizon))
    out["summary_mismatch"] = mismatch
    out["notes"] = "; ".join(notes)
    return out, eval_columns(ev)


def _state(status: dict | None, notes: list[str]) -> str:
    """The run's state from status.json; ``unknown`` when missing or not understood."""
    state = status.get("state") if status else None
    if state not in STATES:
        if status is not None:
            notes.append(f"status state {state!r} not understood")
        state = "unknown"
    return state


def _run_row(record, state, incomplete, size, sizes, ev: Evaluations, opts: ClockOptions) -> dict[str, Any]:
    """The run's identity, state, sizes, learning rate and accuracy summary (the runs table's first
    columns)."""
    config, derived, acc = record.config, sizes["derived"], ev.acc
    return {
        "run": record.run,
        "name": record.name,
        "source": record.source,
        "path": record.path,
        "group": record.group,
        "state": state,
        "incomplete": incomplete,
        "in_fit": (not incomplete) or opts.include_incomplete,
        "B": float(size),
        "P": num(derived.get("prompts_per_rollout", sizes["P"])),
        "G": num(derived.get("group_size", sizes["G"])),
        "K": num(derived.get("steps_per_rollout", get_path(config, "optim.steps_per_rollout"))),
        "lr": num(derived.get("lr")),
        "seed": config.get("seed") if is_number(config.get("seed")) else None,
        "budget": stop if math.isfinite(stop := run_stop_point(config)) else math.nan,
        "lr_rule": get_path(config, "lr.rule"),
        "lr_power": num(get_path(config, "lr.power")),
        "clock_unit": opts.clock,
        "final_responses": float(record.rows[-1]["responses"]),
        "n_evals": len(ev.rows),
        "best_accuracy": float(np.nanmax(acc)) if np.isfinite(acc).any() else math.nan,
        "final_accuracy": float(acc[-1]),
        # the targets the run's own config times (eval.targets); a condition is fitted at a target only
        # if its runs declare it, unless --targets names targets explicitly
        "declared_targets": " ".join(f"{t:g}" for t in config_targets(config)),
    }


def _check_truncated(status: dict | None, rows: list[dict[str, Any]], notes: list[str]) -> None:
    """Note metrics that end before the clocks status.json reports."""
    clocks = status.get("clocks") if status else None
    last = float(rows[-1]["responses"])
    if isinstance(clocks, dict) and is_number(clocks.get("responses")):
        if float(clocks["responses"]) > last:
            notes.append(
                f"metrics end at responses={last:g} before status clocks "
                f"({float(clocks['responses']):g}): metrics truncated"
            )


def build_tables(records: list[RunRecord], opts: ClockOptions | None = None) -> Tables:
    """Runs table (one row per run) and evaluations table (one row per evaluation) with conditions.

    The condition of a run is the tuple of its condition-key values (default: every flattened config
    key except ``seed``, ``rollout.prompts_per_rollout`` and everything under ``logger.``/``run.``);
    runs that differ only in B and seed share a condition and one fit.
    """
    opts = opts or ClockOptions()
    check_options(opts)
    # results must not depend on the order in which runs were found: work in run-id order
    records = sorted(records, key=lambda r: (r.run, r.path))
    targets = sorted(set(opts.targets or [t for r in records for t in config_targets(r.config)]))
    horizons, disagreements = condition_horizons(records, opts)
    rows, eval_parts, kept, skipped = [], [], [], []
    for record, horizon in zip(records, horizons):
        try:
            row, ev = run_clocks(record, targets, opts, horizon)
        except RunReadError as err:
            skipped.append(SkippedRun(record.run, record.path, str(err)))
            continue
        rows.append(row)
        eval_parts.append(ev)
        kept.append(record)

    flats = [flatten_config(r.config) for r in kept]
    keys, varying, conditions = condition_labels(flats, opts)

    runs = pd.DataFrame(rows)
    messages: list[str] = list(disagreements)
    if not rows:
        return Tables(runs, pd.DataFrame(), targets, keys, varying, skipped, messages, opts)
    runs.insert(1, "condition", conditions)
    reserved = set(runs.columns)
    # one frame of config columns joined at once (column-by-column inserts fragment the frame)
    config_columns = pd.DataFrame(
        {f"config.{k}" if k in reserved else k: config_column([flat.get(k) for flat in flats]) for k in keys},
        index=runs.index,
    )
    runs = pd.concat([runs, config_columns], axis=1)
    if PARAMETERS_KEY not in runs.columns:  # the model size N (analysis.data.model_size)
        runs[PARAMETERS_KEY] = [run_parameters(r.config, r.summary) for r in kept]
    sizes = runs.groupby("condition")["B"].nunique()
    if len(sizes) > 1 and (sizes == 1).all():
        messages.append(
            "every condition has a single rollout size: a key that changes with B splits the sweep; "
            f"keys differing between conditions: {', '.join(varying)} (pass --ignore-keys KEY)"
        )

    messages += horizon_messages(runs)
    evals = _evals_table(runs, eval_parts)
    order = runs.sort_values(["condition", "B", "seed", "run"], key=_sort_key).index
    runs = runs.loc[order].reset_index(drop=True)
    rank = pd.Series(np.arange(len(runs)), index=runs["run"].to_numpy())
    evals = evals.iloc[np.argsort(rank.loc[evals["run"]].to_numpy(), kind="stable")].reset_index(drop=True)
    return Tables(runs, evals, targets, keys, varying, skipped, messages, opts)


def _evals_table(runs: pd.DataFrame, eval_parts: list[dict[str, list]]) -> pd.DataFrame:
    """One row per evaluation, built at once from every run's evaluation columns (in ``runs`` order)."""
    n_evals = [len(ev["responses"]) for ev in eval_parts]
    columns: dict[str, Any] = {
        "run": np.repeat(runs["run"].to_numpy(dtype=object), n_evals),
        "condition": np.repeat(runs["condition"].to_numpy(dtype=object), n_evals),
        "B": np.repeat(runs["B"].to_numpy(), n_evals),
        "seed": np.repeat(runs["seed"].to_numpy(dtype=object), n_evals),
    }
    eval_keys = sorted({k for ev in eval_parts for k in ev}, key=lambda k: (k.startswith("eval/"), k))
    for k in eval_keys:
        columns[k] = np.concatenate(
            [np.asarray(ev.get(k, [math.nan] * n), float) for ev, n in zip(eval_parts, n_evals)]
        )
    evals = pd.DataFrame(columns)
    if "eval/responses" in evals.columns:
        # binomial standard error of a (mean pass@1) accuracy over eval/responses scored responses
        p, n = evals["eval/accuracy"].to_numpy(float), evals["eval/responses"].to_numpy(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            evals["eval/accuracy_se"] = np.where(n > 0, np.sqrt(p * (1 - p) / n), np.nan)
    return evals


def _sort_key(col: pd.Series) -> pd.Series:
    """Sort seeds numerically even when some are missing (None sorts last)."""
    if col.name == "seed":
        return pd.to_numeric(col, errors="coerce")
    return col
