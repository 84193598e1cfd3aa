"""The responses-to-target clock of one run (docs/design.md §3): its evaluations, each target's
bracket from the crossing rule (:mod:`analysis.data.crossings`) on the evaluations read while the run
is at risk and within its horizon, or its censoring and why; the cross-check against ``summary.json``
and the run's evaluation columns. The rules are described in :mod:`analysis.data.clock_tables`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.data.clock_options import target_label
from analysis.data.crossings import Bracket, Curve, crossing_rule
from analysis.data.horizon import horizon_end
from analysis.data.load import CLOCKS, RunReadError, as_float, is_number
from analysis.data.row_values import clock_at, column_of


@dataclass(frozen=True)
class Evaluations:
    """One run's evaluation rows (in clock order) as arrays."""

    rows: list[dict[str, Any]]
    acc: np.ndarray  # eval/accuracy; NaN never reaches a target
    resp: np.ndarray  # responses clock
    clk: np.ndarray  # the chosen clock
    all_rows: list[dict[str, Any]]  # every metrics row (the training rows carry the clocks too)


def read_evaluations(rows: list[dict[str, Any]], clock: str, notes: list[str]) -> Evaluations:
    """The evaluation rows, in clock order; a non-numeric accuracy drops the row, NaN keeps it (no
    crossing)."""
    evals, accuracies = [], []
    dropped = 0
    for row in rows:
        if "eval/accuracy" in row:
            value = as_float(row["eval/accuracy"])
            if value is None:
                dropped += 1
            else:
                evals.append(row)
                accuracies.append(value)
    if dropped:
        notes.append(f"{dropped} evaluation row(s) with non-numeric eval/accuracy dropped")
    if not evals:
        raise RunReadError("no evaluation rows")
    acc = np.array(accuracies)
    if not np.isfinite(acc).all():
        notes.append(f"{int((~np.isfinite(acc)).sum())} non-finite eval/accuracy value(s)")
    resp = np.array([float(r["responses"]) for r in evals])
    clk = resp if clock == "responses" else np.array(column_of(evals, clock))
    if not np.isfinite(clk).all():
        notes.append(f"clock '{clock}' missing or non-numeric in some evaluation rows")
    return Evaluations(evals, acc, resp, clk, rows)


def eval_columns(ev: Evaluations) -> dict[str, list]:
    """The run's evaluation columns: every clock, the accuracy and the other ``eval/`` metrics."""
    eval_cols: dict[str, list] = {"responses": list(ev.resp), "eval/accuracy": list(ev.acc)}
    for name in CLOCKS:
        if name != "responses":
            eval_cols[name] = column_of(ev.rows, name)
    extra = sorted(k for k in set().union(*ev.rows) if k.startswith("eval/") and k != "eval/accuracy")
    for name in extra:
        eval_cols[name] = column_of(ev.rows, name)
    return eval_cols


def target_columns(out, targets, ev, fail, state, incomplete, size, summary, opts, notes) -> bool:
    """Add every target's columns to ``out``: an interval (lower, upper], censored with a cause, or met
    at step 0; returns whether summary.json disagrees with a recomputed crossing.

    Targets are observed while the run is at risk of reaching them: up to its failure time (the
    competing event), so a crossing seen after the onset counts as failed first, as in the incidence.
    The crossing rule (:mod:`analysis.data.crossings`) reads only those evaluations.
    """
    # at risk until the failure (within the horizon) and read only up to the horizon (in whole rollouts)
    horizon = float(horizon_end(out["horizon"], size))
    observable = ev.resp <= (fail.at if not fail.censored else horizon)
    seen = np.flatnonzero(observable)
    curve = Curve(ev.resp[seen], ev.acc[seen], float(size), horizon, bool(opts.discrete))
    rule = crossing_rule(opts.crossing).read
    raw_hits = ev.acc[:, None] >= np.asarray(targets)[None, :]  # [n_evals, n_targets]; NaN never hits
    by_value = _reported_targets(summary)
    if not fail.censored:
        cause = "failure"
    else:  # observed to its budget or the horizon (whichever came first): "budget"
        cause = "incomplete" if incomplete and not out["past_horizon"] else "budget"
    mismatch = False
    for j, a in enumerate(targets):
        label = target_label(a)
        bracket = rule(curve, float(a)) if seen.size else None
        if bracket is not None:
            column = _target_reached(ev, seen, bracket, label, size, opts, notes)
        else:
            # censored at the failure, else at the last evaluation read (within the horizon)
            last_read = float(ev.clk[seen[-1]]) if seen.size else float(ev.clk[0])
            value = fail.value if not fail.censored else last_read
            last_below = float(ev.clk[seen[-1]]) if seen.size else math.nan
            column = (value, math.nan, last_below, True, cause, False, False)
        for suffix, v in zip(_TARGET_SUFFIXES, column):
            out[label + suffix] = v
        reported = by_value.get(a)
        if isinstance(reported, dict):
            mismatch = _check_reported_target(reported, raw_hits[:, j], ev.resp, label, notes) or mismatch
    return mismatch


#: A target's columns, after its label: the time, the interval's lower end, the last evaluation below
#: it (censored runs), censored, the cause of censoring, resolution-limited, interpolated.
_TARGET_SUFFIXES = (
    "",
    ":lower",
    ":last_below",
    ":censored",
    ":censored_by",
    ":resolution_limited",
    ":interpolated",
)


def _target_reached(
    ev: Evaluations, seen: np.ndarray, bracket: Bracket, label: str, size, opts, notes
) -> tuple:
    """The columns of a target whose rule gave ``bracket`` on the evaluations ``seen`` (indices into the
    run's evaluations; see ``_TARGET_SUFFIXES``): the ends on the chosen clock, an end at an evaluation
    at that evaluation's clock, any other at the last metrics row at or before it."""
    idx = int(bracket.seen)
    resp, clk = ev.resp[seen], ev.clk[seen]
    value, lower, limited, interpolated = float(clk[idx]), math.nan, False, False
    if resp[idx] <= 0:
        notes.append(f"{label} already met at step 0; left out of its fit")
        return value, lower, math.nan, False, "", limited, interpolated
    spacing = resp[idx] - resp[idx - 1] if idx > 0 else resp[idx]
    limited = (
        idx == 0
        or (idx == 1 and resp[0] <= 0)
        or spacing > opts.resolution_frac * resp[idx]
        or size > opts.resolution_frac * resp[idx]
    )
    if math.isfinite(bracket.fraction) and idx > 0:
        value = float(clk[idx - 1] + bracket.fraction * (clk[idx] - clk[idx - 1]))
        interpolated = True
    if math.isfinite(bracket.lower):
        lower = float(bracket.lower)
        if opts.clock != "responses":
            at = np.flatnonzero(resp == lower)
            if lower <= 0:
                lower = 0.0
            elif at.size:
                lower = float(clk[at[-1]])
            else:
                lower = clock_at(ev.all_rows, lower, opts.clock)
        if not math.isfinite(lower):
            lower = 0.0
    return value, lower, math.nan, False, "", limited, interpolated


def _reported_targets(summary: dict) -> dict[float, Any]:
    """summary.json's ``targets`` keyed by the target as a number."""
    summary_targets = summary.get("targets") if isinstance(summary.get("targets"), dict) else {}
    by_value = {}
    for key, value in summary_targets.items():
        try:
            by_value[float(key)] = value
        except ValueError:
            continue
    return by_value


def _check_reported_target(reported: dict, raw_hits: np.ndarray, resp, label: str, notes: list[str]) -> bool:
    """Whether summary.json's crossing disagrees with the recomputed one (noted). The trainer reports
    the first evaluation at or above the target, on any row."""
    rep_resp, rep_reached = reported.get("responses"), reported.get("reached")
    raw = int(np.argmax(raw_hits)) if raw_hits.any() else -1
    ours = None if raw < 0 else float(resp[raw])
    if bool(rep_reached) != (raw >= 0) or (
        ours is not None and (not is_number(rep_resp) or float(rep_resp) != ours)
    ):
        notes.append(f"summary.json {label}: {rep_resp} (reached={rep_reached}), recomputed {ours}")
        return True
    return False
