"""The failure clock of one run (docs/design.md §3): the onset (default) or the detection, interval-
censored from the detector's window and the rollout (:func:`failure_lower`), censored at the horizon
when detected after it; its columns of the runs table and the cross-check against ``summary.json``.
The rules are described in :mod:`analysis.data.clock_tables`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.data.clock_options import ClockOptions
from analysis.data.crossings import rollout_after
from analysis.data.horizon import last_within
from analysis.data.load import get_path, is_number
from analysis.data.row_values import clock_at


@dataclass(frozen=True)
class FailureClock:
    """One run's failure clock (responses unless said otherwise)."""

    censored: bool  # the run did not fail
    at: float  # failure time (onset or detection) or the run's end, on the responses clock
    value: float  # ``at`` on the chosen clock
    lower: float  # the onset's interval lower end on the chosen clock (NaN: exact or censored)
    limited: bool  # resolution-limited onset
    detector: Any
    detection: float  # responses at the detector's decision (NaN when the run did not fail)
    onset: float  # responses at the onset (NaN when unknown)
    after_horizon: bool = False  # the run failed, detected after the horizon: censored there


def failure_clock(
    record, status, state, size, resp, opts: ClockOptions, notes: list[str], horizon: float = math.inf
) -> FailureClock:
    """The failure clock: the onset (default) or the detection, on the chosen clock; the onset is known
    only to an interval (the detector's smoothing window and the rollout). With ``opts.discrete`` the
    interval is in whole rollouts, ``[lower, onset]`` with ``lower`` the first rollout boundary after
    the responses at which the condition can have begun (at least B: nothing fails before the first
    update); ``lower == onset`` is an exact time. A failure **detected** after ``horizon`` is
    right-censored at the last metrics row within it, whatever its onset: a run trained to the horizon
    stops there before its detector decides, and the same trajectory read to the horizon must give the
    same failure clock (and the same crossings) whether or not the run went on."""
    rows = record.rows
    last = float(rows[-1]["responses"])
    failure = status.get("failure") if status else None
    detector = None
    detection = onset = math.nan

    def survived(until: float) -> FailureClock:
        value = until if opts.clock == "responses" else clock_at(rows, until, opts.clock)
        return FailureClock(True, until, value, math.nan, False, None, math.nan, math.nan)

    if state != "failed":
        return survived(last_within(rows, horizon) if last > horizon else last)
    detection = last
    if isinstance(failure, dict):
        detector = failure.get("detector")
        if is_number(failure.get("responses")):
            detection = float(failure["responses"])
            if detection != last:
                notes.append(f"failure.responses={detection:g} but metrics end at {last:g}")
        else:
            notes.append("failure.responses missing; last metrics row used")
        if is_number(failure.get("onset_responses")):
            onset = float(failure["onset_responses"])
            if onset > detection:
                notes.append(f"failure onset {onset:g} after detection {detection:g}; detection used")
                onset = detection
    else:
        notes.append("state failed without a failure record; last metrics row used")
    if not math.isfinite(onset) and opts.failure_time == "onset":
        notes.append("no failure onset recorded (run written before onsets): detection time used")
    at = onset if opts.failure_time == "onset" and math.isfinite(onset) else detection
    if detection > horizon:
        # what a run trained to the horizon records: it stops there before the detector decides, so
        # the failure is not an event of the horizon's run, whatever its onset (docs/analysis.md)
        notes.append(f"failure detected at {detection:g} after the horizon {horizon:g}: censored there")
        end = last_within(rows, horizon)
        value = end if opts.clock == "responses" else clock_at(rows, end, opts.clock)
        return FailureClock(True, end, value, math.nan, False, None, math.nan, math.nan, after_horizon=True)
    value = at if opts.clock == "responses" else clock_at(rows, at, opts.clock)
    lower, limited = math.nan, False
    if opts.failure_time == "onset" and math.isfinite(onset):
        lower = failure_lower(failure, detector, onset, float(size), record.config, resp)
        if opts.discrete:
            lower = min(onset, rollout_after(lower, float(size)))
            limited = (onset - lower) > opts.resolution_frac * onset or size > opts.resolution_frac * onset
        else:
            limited = lower <= 0 or (onset - lower) > opts.resolution_frac * onset
        if opts.clock != "responses":
            lower = clock_at(rows, lower, opts.clock) if lower > 0 else 0.0
    return FailureClock(False, at, value, lower, limited, detector, detection, onset)


def failure_lower(failure, detector, onset: float, size: float, config: dict, eval_responses) -> float:
    """The earliest ``responses`` at which a failure whose onset row is at ``onset`` can have begun.

    ``status.json["failure"]["onset_lower_responses"]`` when the trainer wrote it (the detector knows
    its own definition); otherwise from the detector's definition: for ``accuracy_collapse`` (an
    evaluation-based condition) the evaluation before the onset; for a windowed training detector the
    onset minus its rollout and its smoothing window (``failure.<detector>.window_responses``): the
    smoothed statistic of the onset row includes data from that far back. Floored at 0
    (left-censored: the failure began within the first rollouts).
    """
    reported = failure.get("onset_lower_responses") if isinstance(failure, dict) else None
    if is_number(reported):
        return float(min(max(float(reported), 0.0), onset))
    if detector == "accuracy_collapse":
        before = np.asarray(eval_responses, float)
        before = before[before < onset]
        return float(before[-1]) if before.size else 0.0
    window = get_path(config, f"failure.{detector}.window_responses") if detector else None
    window = float(window) if is_number(window) and window > 0 else 0.0
    return max(0.0, onset - size - window)


def check_reported_failure(summary: dict, fail: FailureClock, notes: list[str]) -> bool:
    """Whether summary.json's failure disagrees with status.json and the metrics (noted)."""
    rep_fail = summary.get("failure") if isinstance(summary.get("failure"), dict) else None
    if rep_fail is None or fail.after_horizon:  # the run's own record is read only up to the horizon
        return False
    mismatch = False
    rep_at, rep_failed = rep_fail.get("responses"), rep_fail.get("failed")
    if bool(rep_failed) != (not fail.censored) or (
        not fail.censored and (not is_number(rep_at) or float(rep_at) != fail.detection)
    ):
        mismatch = True
        notes.append(f"summary.json failure: {rep_at} (failed={rep_failed}), recomputed {fail.detection:g}")
    rep_onset = rep_fail.get("onset_responses")
    if (
        not fail.censored
        and is_number(rep_onset)
        and math.isfinite(fail.onset)
        and float(rep_onset) != fail.onset
    ):
        mismatch = True
        notes.append(f"summary.json failure onset: {rep_onset}, status.json {fail.onset:g}")
    return mismatch


def failure_columns(fail: FailureClock, state: str, rows, opts: ClockOptions) -> dict[str, Any]:
    """The failure clock's columns of the runs table (times on the chosen clock)."""

    def on_clock(responses: float) -> float:
        if opts.clock == "responses" or not math.isfinite(responses):
            return responses
        return clock_at(rows, responses, opts.clock)

    return {
        "failure": fail.value,
        "failure:lower": fail.lower,
        "failure:resolution_limited": fail.limited,
        # failure:lower is the end of the first rollout the failure can be in (whole-rollout brackets),
        # or the responses after which it began (continuous brackets)
        "failure:lower_inclusive": bool(opts.discrete),
        "failure:censored": fail.censored,
        "failure:detector": fail.detector,
        "failure:detection": on_clock(fail.detection),
        "failure:onset": on_clock(fail.onset),
        "failure:time": opts.failure_time if state == "failed" and math.isfinite(fail.onset) else "detection",
    }
