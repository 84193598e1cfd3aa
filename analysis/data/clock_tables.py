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
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.data.crossings import Bracket, Curve, crossing_rule, rollout_after
from analysis.data.load import (
    CLOCKS,
    DEFAULT_IGNORED_KEYS,
    STATES,
    RunReadError,
    RunRecord,
    SkippedRun,
    as_float,
    flatten_config,
    get_path,
    is_number,
    key_matches,
)

CLOCK_CHOICES = ("responses", "tokens", "flops", "flops_nominal", "wall_seconds", "optimizer_steps")
FAILURE_TIMES = ("onset", "detection")


@dataclass(frozen=True)
class ClockOptions:
    clock: str = "responses"  # which clock the events are measured on
    targets: tuple[float, ...] | None = None  # None: union of every run's eval.targets
    crossing: str = "interval"  # a crossing rule's name (analysis.data.crossings: interval, isotonic, ...)
    failure_time: str = "onset"  # onset | detection: which failure time the failure clock uses
    resolution_frac: float = 0.25  # spacing or B above this fraction of R_T flags the point
    include_incomplete: bool = True  # fit running/preempted/unknown runs as censored at last clock
    condition_keys: tuple[str, ...] | None = None  # None: every key but DEFAULT_IGNORED_KEYS
    ignore_keys: tuple[str, ...] = ()  # extra keys (or parents, or globs) left out of the condition
    # responses up to which crossings and failures are read: "auto" = the horizon the runs record (per
    # condition the ``eval.horizon`` its runs set, else each run's ``train.max_responses``); a number = that
    # horizon for every run; ((condition label, responses), ...) = those conditions' horizons fixed (a
    # study's), "auto" for the others; None = every evaluation (no horizon)
    horizon: float | str | tuple | None = "auto"
    discrete: bool = True  # brackets in whole rollouts: [previous evaluation + B, evaluation]
    # a size where most runs cross a target within its first ``early_rollouts`` rollouts is *early*: its
    # crossings sit near the R >= B floor; each target's fit keeps at most ``max_early_sizes`` of them
    # (the smallest), None keeps every size (analysis.fits.exponents.fit_conditions)
    early_rollouts: int = 4
    max_early_sizes: int | None = 1


@dataclass
class Tables:
    runs: pd.DataFrame  # one row per run
    evals: pd.DataFrame  # one row per evaluation
    targets: list[float]
    condition_keys: list[str]
    varying_keys: list[str]  # condition keys that differ between conditions
    skipped: list[SkippedRun]
    messages: list[str] = field(default_factory=list)
    options: ClockOptions | None = None


def target_label(a: float) -> str:
    return f"target:{a:g}"


_NUMBER_TYPES = (int, float)


def _num(value: Any) -> float:
    number = as_float(value)
    return math.nan if number is None else number


def _column_of(rows: list[dict[str, Any]], key: str) -> list[float]:
    """``[_num(row.get(key)) for row in rows]``, fast for the common case of plain numbers."""
    nan = math.nan
    return [
        float(v) if type(v) in _NUMBER_TYPES else _num(v) if v is not None else nan
        for v in (r.get(key) for r in rows)
    ]


def _config_targets(config: dict[str, Any]) -> list[float]:
    targets = get_path(config, "eval.targets", [])
    return [float(t) for t in targets if is_number(t)] if isinstance(targets, list) else []


def _clock_at(rows: list[dict[str, Any]], responses: float, clock: str) -> float:
    """``clock`` in the last metrics row with ``responses <= responses`` (the first row if none)."""
    row_at = rows[0]
    for row in reversed(rows):
        if float(row["responses"]) <= responses:
            row_at = row
            break
    return _num(row_at.get(clock))


NOISE_KEYS = ("noise/trace_cov", "noise/grad_norm_sq", "noise/b_noise")


def noise_summary(rows: list[dict[str, Any]], until: float = math.inf) -> dict[str, float]:
    """Gradient-noise scale of one run from its training rows with ``responses <= until``.

    ``noise:b_noise`` = mean tr Sigma / mean |G|^2 over the rows where both are finite (McCandlish et
    al. 2018, eq. 2.7 with the appendix-A estimators the trainer logs: a ratio of means, since the
    per-rollout |G|^2 estimate can be near 0 or negative and a mean of per-rollout ratios is dominated
    by those rollouts); ``noise:b_noise_median`` = median of the finite per-rollout ``noise/b_noise``;
    NaN when the run logs no usable estimate (K = 1, or a mean |G|^2 that is not positive).
    """
    train = [r for r in rows if "eval/accuracy" not in r and float(r["responses"]) <= until]
    trace = np.array(_column_of(train, "noise/trace_cov"))
    grad = np.array(_column_of(train, "noise/grad_norm_sq"))
    ratio = np.array(_column_of(train, "noise/b_noise"))
    both = np.isfinite(trace) & np.isfinite(grad)
    mean_t = float(trace[both].mean()) if both.any() else math.nan
    mean_g = float(grad[both].mean()) if both.any() else math.nan
    finite = ratio[np.isfinite(ratio)]
    return {
        "noise:b_noise": mean_t / mean_g if both.any() and mean_g > 0 else math.nan,
        "noise:b_noise_median": float(np.median(finite)) if finite.size else math.nan,
        "noise:trace_cov_mean": mean_t,
        "noise:grad_norm_sq_mean": mean_g,
        "noise:n_rows": int(both.sum()),
        **curvature_summary(train),
    }


def curvature_summary(train: list[dict[str, Any]]) -> dict[str, float]:
    """B_crit of one run from its training rows (the trainer's ``curv/`` rows, every
    ``noise.curvature_every_rollouts``): ``curv:b_crit`` = mean ``curv/trace_hsigma`` / mean
    ``curv/gHg_abs`` over the rows where both are finite (a ratio of means, as for ``noise:b_noise``);
    NaN when the run logged none (curvature off, or too short to reach the cadence)."""
    trace = np.array(_column_of(train, "curv/trace_hsigma"))
    ghg = np.array(_column_of(train, "curv/gHg_abs"))
    both = np.isfinite(trace) & np.isfinite(ghg)
    mean_t = float(trace[both].mean()) if both.any() else math.nan
    mean_g = float(ghg[both].mean()) if both.any() else math.nan
    return {
        "curv:b_crit": mean_t / mean_g if both.any() and mean_g > 0 else math.nan,
        "curv:trace_hsigma_mean": mean_t,
        "curv:gHg_abs_mean": mean_g,
        "curv:n_rows": int(both.sum()),
    }


@dataclass(frozen=True)
class _Evaluations:
    """One run's evaluation rows (in clock order) as arrays."""

    rows: list[dict[str, Any]]
    acc: np.ndarray  # eval/accuracy; NaN never reaches a target
    resp: np.ndarray  # responses clock
    clk: np.ndarray  # the chosen clock
    all_rows: list[dict[str, Any]]  # every metrics row (the training rows carry the clocks too)


@dataclass(frozen=True)
class _Failure:
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


def run_clocks(
    record: RunRecord, targets: list[float], opts: ClockOptions, horizon: float = math.inf
) -> tuple[dict, dict]:
    """Compute one run's row of the runs table and its evaluation columns; ``horizon``: the responses
    up to which its crossings and failure are read (:func:`condition_horizons`).

    Raises :class:`RunReadError` for a run that cannot give any clock (no B, no evaluation).
    """
    notes = list(record.notes)
    summary = record.summary or {}
    size, sizes = _rollout_size(record.config, summary, notes)
    status = record.status if isinstance(record.status, dict) else None
    state = _state(status, notes)
    incomplete = state not in ("completed", "failed")
    if incomplete:
        notes.append(f"incomplete run (state {state})")
    ev = _evaluations(record.rows, opts.clock, notes)
    out = _run_row(record, state, incomplete, size, sizes, ev, opts)
    out["horizon"] = horizon
    # the run is read to the end of the rollout that reaches the horizon (where a run trained to it stops)
    horizon = float(horizon_end(horizon, size))
    past = float(record.rows[-1]["responses"]) >= horizon  # observed over the whole horizon
    out["past_horizon"] = past
    out["in_fit"] = out["in_fit"] or past
    fail = _failure(record, status, state, size, ev.resp, opts, notes, horizon)
    mismatch = _target_columns(out, targets, ev, fail, state, incomplete, size, summary, opts, notes)
    _check_truncated(status, record.rows, notes)
    mismatch = _check_reported_failure(summary, fail, notes) or mismatch
    out.update(_failure_columns(fail, state, record.rows, opts))
    out.update(noise_summary(record.rows, fail.at if not fail.censored else horizon))
    out["summary_mismatch"] = mismatch
    out["notes"] = "; ".join(notes)
    return out, _eval_columns(ev)


def _rollout_size(config: dict, summary: dict, notes: list[str]) -> tuple[float, dict]:
    """The rollout size B (the summary's derived B, else config P x G) and the derived values the
    runs table reads (``derived``, ``P``, ``G`` from the config)."""
    derived = summary.get("derived") if isinstance(summary.get("derived"), dict) else {}
    p_cfg, g_cfg = get_path(config, "rollout.prompts_per_rollout"), get_path(config, "rollout.group_size")
    b_cfg = p_cfg * g_cfg if is_number(p_cfg) and is_number(g_cfg) else None
    size = derived.get("responses_per_rollout")
    if not (is_number(size) and size > 0):
        if b_cfg is None:
            raise RunReadError("rollout size B unknown (no summary derived B, no P and G in config)")
        size = b_cfg
        notes.append("B taken from config P x G (no derived B in summary)")
    elif b_cfg is not None and b_cfg != size:
        notes.append(f"derived B={size} differs from config P x G={b_cfg}")
    return size, {"derived": derived, "P": p_cfg, "G": g_cfg}


def _state(status: dict | None, notes: list[str]) -> str:
    """The run's state from status.json; ``unknown`` when missing or not understood."""
    state = status.get("state") if status else None
    if state not in STATES:
        if status is not None:
            notes.append(f"status state {state!r} not understood")
        state = "unknown"
    return state


def _evaluations(rows: list[dict[str, Any]], clock: str, notes: list[str]) -> _Evaluations:
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
    clk = resp if clock == "responses" else np.array(_column_of(evals, clock))
    if not np.isfinite(clk).all():
        notes.append(f"clock '{clock}' missing or non-numeric in some evaluation rows")
    return _Evaluations(evals, acc, resp, clk, rows)


def _run_row(record, state, incomplete, size, sizes, ev: _Evaluations, opts: ClockOptions) -> dict[str, Any]:
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
        "P": _num(derived.get("prompts_per_rollout", sizes["P"])),
        "G": _num(derived.get("group_size", sizes["G"])),
        "K": _num(derived.get("steps_per_rollout", get_path(config, "optim.steps_per_rollout"))),
        "lr": _num(derived.get("lr")),
        "seed": config.get("seed") if is_number(config.get("seed")) else None,
        "budget": _num(get_path(config, "train.max_responses")),
        "lr_rule": get_path(config, "lr.rule"),
        "lr_power": _num(get_path(config, "lr.power")),
        "clock_unit": opts.clock,
        "final_responses": float(record.rows[-1]["responses"]),
        "n_evals": len(ev.rows),
        "best_accuracy": float(np.nanmax(acc)) if np.isfinite(acc).any() else math.nan,
        "final_accuracy": float(acc[-1]),
        # the targets the run's own config times (eval.targets); a condition is fitted at a target only
        # if its runs declare it, unless --targets names targets explicitly
        "declared_targets": " ".join(f"{t:g}" for t in _config_targets(config)),
    }


def _failure(
    record, status, state, size, resp, opts: ClockOptions, notes: list[str], horizon: float = math.inf
) -> _Failure:
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

    def survived(until: float) -> _Failure:
        value = until if opts.clock == "responses" else _clock_at(rows, until, opts.clock)
        return _Failure(True, until, value, math.nan, False, None, math.nan, math.nan)

    if state != "failed":
        return survived(_last_within(rows, horizon) if last > horizon else last)
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
        end = _last_within(rows, horizon)
        value = end if opts.clock == "responses" else _clock_at(rows, end, opts.clock)
        return _Failure(True, end, value, math.nan, False, None, math.nan, math.nan, after_horizon=True)
    value = at if opts.clock == "responses" else _clock_at(rows, at, opts.clock)
    lower, limited = math.nan, False
    if opts.failure_time == "onset" and math.isfinite(onset):
        lower = failure_lower(failure, detector, onset, float(size), record.config, resp)
        if opts.discrete:
            lower = min(onset, rollout_after(lower, float(size)))
            limited = (onset - lower) > opts.resolution_frac * onset or size > opts.resolution_frac * onset
        else:
            limited = lower <= 0 or (onset - lower) > opts.resolution_frac * onset
        if opts.clock != "responses":
            lower = _clock_at(rows, lower, opts.clock) if lower > 0 else 0.0
    return _Failure(False, at, value, lower, limited, detector, detection, onset)


def horizon_end(horizon, size):
    """The responses up to which a run is read: the end of the rollout that reaches ``horizon`` (a
    multiple of the rollout size ``size``; an infinite horizon stays infinite). Scalars or arrays."""
    h, b = np.asarray(horizon, float), np.asarray(size, float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(h), b * np.ceil(h / b - 1e-9), h)


def _last_within(rows: list[dict[str, Any]], horizon: float) -> float:
    """The responses of the last metrics row at or before ``horizon`` (the first row's if none)."""
    within = [float(r["responses"]) for r in rows if float(r["responses"]) <= horizon]
    return max(within) if within else float(rows[0]["responses"])


def _target_columns(out, targets, ev, fail, state, incomplete, size, summary, opts, notes) -> bool:
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
    ev: _Evaluations, seen: np.ndarray, bracket: Bracket, label: str, size, opts, notes
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
                lower = _clock_at(ev.all_rows, lower, opts.clock)
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


def _check_reported_failure(summary: dict, fail: _Failure, notes: list[str]) -> bool:
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


def _failure_columns(fail: _Failure, state: str, rows, opts: ClockOptions) -> dict[str, Any]:
    """The failure clock's columns of the runs table (times on the chosen clock)."""

    def on_clock(responses: float) -> float:
        if opts.clock == "responses" or not math.isfinite(responses):
            return responses
        return _clock_at(rows, responses, opts.clock)

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


def _eval_columns(ev: _Evaluations) -> dict[str, list]:
    """The run's evaluation columns: every clock, the accuracy and the other ``eval/`` metrics."""
    eval_cols: dict[str, list] = {"responses": list(ev.resp), "eval/accuracy": list(ev.acc)}
    for name in CLOCKS:
        if name != "responses":
            eval_cols[name] = _column_of(ev.rows, name)
    extra = sorted(k for k in set().union(*ev.rows) if k.startswith("eval/") and k != "eval/accuracy")
    for name in extra:
        eval_cols[name] = _column_of(ev.rows, name)
    return eval_cols


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


def _canonical(value: Any) -> tuple:
    """Grouping identity of a flattened config value: 8 and 8.0 are one setting, True and 1 are not."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", float(value)) if value == value else ("n", "nan")
    return ("s", str(value))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "null" if value is None else str(value)


def condition_slug(label: str) -> str:
    """A file-name-safe form of a condition label (long labels end in a short hash)."""
    slug = re.sub(r"[^A-Za-z0-9._=+-]+", "_", label).strip("_") or "all"
    if len(slug) > 80:
        slug = slug[:64] + "_" + hashlib.sha1(label.encode()).hexdigest()[:8]
    return slug


def _column(values: list[Any]) -> list[Any] | pd.Series:
    """Numbers stay numeric, booleans boolean, anything mixed becomes text (Parquet needs one type)."""
    present = [v for v in values if v is not None]
    if (
        present
        and len(present) == len(values)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    ):
        return pd.Series(values, dtype="int64")
    if present and all(is_number(v) for v in present):
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64")
    if present and all(isinstance(v, bool) for v in present) and len(present) == len(values):
        return pd.Series(values, dtype="bool")
    return pd.Series([None if v is None else _fmt(v) for v in values], dtype="object")


def build_tables(records: list[RunRecord], opts: ClockOptions | None = None) -> Tables:
    """Runs table (one row per run) and evaluations table (one row per evaluation) with conditions.

    The condition of a run is the tuple of its condition-key values (default: every flattened config
    key except ``seed``, ``rollout.prompts_per_rollout`` and everything under ``logger.``/``run.``);
    runs that differ only in B and seed share a condition and one fit.
    """
    opts = opts or ClockOptions()
    _check_options(opts)
    # results must not depend on the order in which runs were found: work in run-id order
    records = sorted(records, key=lambda r: (r.run, r.path))
    targets = sorted(set(opts.targets or [t for r in records for t in _config_targets(r.config)]))
    horizons, horizon_messages = condition_horizons(records, opts)
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
    keys, varying, conditions = _conditions(flats, opts)

    runs = pd.DataFrame(rows)
    messages: list[str] = list(horizon_messages)
    if not rows:
        return Tables(runs, pd.DataFrame(), targets, keys, varying, skipped, messages, opts)
    runs.insert(1, "condition", conditions)
    reserved = set(runs.columns)
    # one frame of config columns joined at once (column-by-column inserts fragment the frame)
    config_columns = pd.DataFrame(
        {f"config.{k}" if k in reserved else k: _column([flat.get(k) for flat in flats]) for k in keys},
        index=runs.index,
    )
    runs = pd.concat([runs, config_columns], axis=1)
    sizes = runs.groupby("condition")["B"].nunique()
    if len(sizes) > 1 and (sizes == 1).all():
        messages.append(
            "every condition has a single rollout size: a key that changes with B splits the sweep; "
            f"keys differing between conditions: {', '.join(varying)} (pass --ignore-keys KEY)"
        )

    messages += _horizon_messages(runs)
    evals = _evals_table(runs, eval_parts)
    order = runs.sort_values(["condition", "B", "seed", "run"], key=_sort_key).index
    runs = runs.loc[order].reset_index(drop=True)
    rank = pd.Series(np.arange(len(runs)), index=runs["run"].to_numpy())
    evals = evals.iloc[np.argsort(rank.loc[evals["run"]].to_numpy(), kind="stable")].reset_index(drop=True)
    return Tables(runs, evals, targets, keys, varying, skipped, messages, opts)


def planned_horizon(config: dict[str, Any]) -> float:
    """A run's recorded horizon from its config: ``eval.horizon``, else ``train.max_responses`` (the
    budget it was launched with), else infinite."""
    for key in ("eval.horizon", "train.max_responses"):
        value = get_path(config, key)
        if is_number(value) and value > 0:
            return float(value)
    return math.inf


def _set_horizon(config: dict[str, Any]) -> float | None:
    """``eval.horizon`` where the run's config sets one (a study's, or the user's), else None."""
    value = get_path(config, "eval.horizon")
    return float(value) if is_number(value) and value > 0 else None


def condition_horizons(records: list[RunRecord], opts: ClockOptions) -> tuple[list[float], list[str]]:
    """The horizon of each record (the responses up to which its crossings and failure are read), and
    the messages about conditions whose runs record different horizons.

    ``opts.horizon="auto"``: the horizon the runs **record** before they start, never a minimum over the
    runs present (adding a run never re-reads another). Per condition: the ``eval.horizon`` its runs set
    (a study sets it on every run after its pilot; the runs of the condition that set none, such as the
    pilot's, launched before it was fixed, are read to it too), else the ``train.max_responses`` they
    were launched with. Where the runs of a condition record different horizons each run is read to its
    own (:func:`planned_horizon`) and a message names them. A number: that horizon for every run;
    ``((condition, responses), ...)``: those conditions fixed, ``auto`` for the others; None: no
    horizon."""
    if opts.horizon is None:
        return [math.inf] * len(records), []
    if isinstance(opts.horizon, (int, float)):
        return [float(opts.horizon)] * len(records), []
    _, _, labels = _conditions([flatten_config(r.config) for r in records], opts)
    fixed = dict(opts.horizon) if isinstance(opts.horizon, (dict, tuple)) else {}
    own = [planned_horizon(r.config) for r in records]
    chosen = list(own)
    messages = []
    for label in sorted(set(labels)):
        mine = [i for i, x in enumerate(labels) if x == label]
        if label in fixed:
            for i in mine:
                chosen[i] = float(fixed[label])
            continue
        set_by = {_set_horizon(records[i].config) for i in mine} - {None}
        if len(set_by) == 1:  # the condition's eval.horizon, for the runs launched before it too
            for i in mine:
                chosen[i] = next(iter(set_by))
            continue
        recorded = {own[i] for i in mine}
        if len(recorded) > 1:
            messages.append(_disagreement(label, [(records[i].run, own[i]) for i in mine]))
    return chosen, messages


def _disagreement(label: str, runs: list[tuple[str, float]]) -> str:
    """The message for a condition whose runs record different horizons (each run read to its own)."""
    by_h: dict[float, list[str]] = {}
    for run, h in runs:
        by_h.setdefault(h, []).append(run)
    parts = [
        f"{h:g} ({len(names)} run(s): {', '.join(sorted(names)[:4])}{', ...' if len(names) > 4 else ''})"
        for h, names in sorted(by_h.items())
    ]
    return (
        f"condition {label}: its runs record different horizons (eval.horizon, else train.max_responses): "
        f"{'; '.join(parts)}; each run is read to its own (--horizon N reads every run to one; a run "
        "continued past its horizon should record it in eval.horizon)"
    )


def _horizon_messages(runs: pd.DataFrame) -> list[str]:
    """Conditions whose runs ended at different points before the horizon (stopped at their targets, or
    a smaller budget): their crossings are read from fewer evaluations than the other runs'."""
    out = []
    ended = runs[(runs["state"] == "completed") & ~runs["past_horizon"]]
    for condition, group in ended.groupby("condition", sort=True):
        unbounded = not np.isfinite(runs.loc[runs["condition"] == condition, "horizon"]).all()
        if unbounded and group["final_responses"].nunique() > 1:
            out.append(
                f"condition {condition}: completed runs ended at different points "
                f"({', '.join(f'{v:g}' for v in sorted(set(group['final_responses'])))} responses) and no "
                "horizon is set: how far a crossing can look ahead differs between runs (--horizon)"
            )
        elif not unbounded and len(group):
            horizon = ", ".join(f"{h:g}" for h in sorted(set(group["horizon"])))
            out.append(
                f"condition {condition}: {len(group)} completed run(s) stopped before the horizon "
                f"{horizon} (at {', '.join(f'{v:g}' for v in sorted(set(group['final_responses'])))} "
                "responses: train.stop_at_targets or a smaller budget); their crossings are read from "
                "fewer evaluations than the other runs' (--horizon sets a common one)"
            )
    return out


def _check_options(opts: ClockOptions) -> None:
    if opts.clock not in CLOCK_CHOICES:
        raise ValueError(f"clock must be one of {CLOCK_CHOICES}, got {opts.clock!r}")
    crossing_rule(opts.crossing)  # ValueError naming the registered rules
    if opts.failure_time not in FAILURE_TIMES:
        raise ValueError(f"failure_time must be one of {FAILURE_TIMES}, got {opts.failure_time!r}")
    h = opts.horizon
    fixed = isinstance(h, tuple) and all(isinstance(x, tuple) and len(x) == 2 and x[1] > 0 for x in h)
    if not (h is None or h == "auto" or fixed or (is_number(h) and not isinstance(h, bool) and h > 0)):
        raise ValueError(
            "horizon must be 'auto', None, a positive number of responses or ((condition, responses), ...)"
            f", got {h!r}"
        )


def _conditions(flats: list[dict[str, Any]], opts: ClockOptions) -> tuple[list[str], list[str], list[str]]:
    """The condition keys, those that vary, and each run's condition label (``key=value`` for each
    varying key joined by ``__``, ``all`` when nothing varies)."""
    all_keys = sorted({k for flat in flats for k in flat})
    if opts.condition_keys is not None:
        keys = [k for k in all_keys if any(key_matches(k, p) for p in opts.condition_keys)]
    else:
        ignored = DEFAULT_IGNORED_KEYS + tuple(opts.ignore_keys)
        keys = [k for k in all_keys if not any(key_matches(k, p) for p in ignored)]
    canon = [tuple(_canonical(flat.get(k)) for k in keys) for flat in flats]
    varying = [k for i, k in enumerate(keys) if len({c[i] for c in canon}) > 1]
    labels: dict[tuple, str] = {}
    for flat, c in zip(flats, canon):
        if c not in labels:
            label = "__".join(f"{k}={_fmt(flat.get(k))}" for k in varying) or "all"
            while label in labels.values():
                label += "+"
            labels[c] = label
    return keys, varying, [labels[c] for c in canon]


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
