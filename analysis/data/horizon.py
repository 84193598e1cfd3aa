"""The horizon a run is read to (docs/design.md §3): the responses up to which its crossings and failure
count, fixed before the runs (:func:`condition_horizons`: the ``eval.horizon`` its condition's runs set,
one per condition or one per rollout size, else the ``train.max_responses`` it was launched with), read
to the end of the rollout that reaches it (:func:`horizon_end`), and the messages about conditions whose
runs record or stop at different points. A run's rollout size: :func:`rollout_size`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analysis.data.clock_options import ClockOptions
from analysis.data.conditions import condition_labels
from analysis.data.load import RunReadError, RunRecord, flatten_config, get_path, is_number


def horizon_end(horizon, size):
    """The responses up to which a run is read: the end of the rollout that reaches ``horizon`` (a
    multiple of the rollout size ``size``; an infinite horizon stays infinite). Scalars or arrays."""
    h, b = np.asarray(horizon, float), np.asarray(size, float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(h), b * np.ceil(h / b - 1e-9), h)


def last_within(rows: list[dict[str, Any]], horizon: float) -> float:
    """The responses of the last metrics row at or before ``horizon`` (the first row's if none)."""
    within = [float(r["responses"]) for r in rows if float(r["responses"]) <= horizon]
    return max(within) if within else float(rows[0]["responses"])


def planned_horizon(config: dict[str, Any]) -> float:
    """A run's recorded horizon from its config: ``eval.horizon``, else where it was launched to stop
    (``train.max_responses``, the budget, or ``train.stop_at_responses`` below it), else infinite."""
    value = get_path(config, "eval.horizon")
    if is_number(value) and value > 0:
        return float(value)
    return run_stop_point(config)


def run_stop_point(config: dict[str, Any]) -> float:
    """Where a run's config stops it on the responses clock unless its targets or a failure stop it
    first: ``train.max_responses``, or ``train.stop_at_responses`` where that is below it (infinite
    where neither is recorded)."""
    stops = [get_path(config, k) for k in ("train.max_responses", "train.stop_at_responses")]
    stops = [float(v) for v in stops if is_number(v) and v > 0]
    return min(stops) if stops else math.inf


def _set_horizon(config: dict[str, Any]) -> float | None:
    """``eval.horizon`` where the run's config sets one (a study's, or the user's), else None."""
    value = get_path(config, "eval.horizon")
    return float(value) if is_number(value) and value > 0 else None


def rollout_size(config: dict, summary: dict, notes: list[str]) -> tuple[float, dict]:
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


def _size(record: RunRecord) -> float:
    """A run's rollout size B (:func:`rollout_size`; NaN where it has none: the run is skipped later)."""
    try:
        return float(rollout_size(record.config, record.summary or {}, [])[0])
    except RunReadError:
        return math.nan


def size_horizons(value) -> dict[float, float] | None:
    """A horizon given per rollout size, ``{B: responses}`` or ``((B, responses), ...)``, as a mapping;
    None for one horizon (a number)."""
    if isinstance(value, dict):
        return {float(b): float(h) for b, h in value.items()}
    if isinstance(value, tuple):
        return {float(b): float(h) for b, h in value}
    return None


def condition_horizons(records: list[RunRecord], opts: ClockOptions) -> tuple[list[float], list[str]]:
    """The horizon of each record (the responses up to which its crossings and failure are read), and
    the messages about conditions whose runs record different horizons.

    ``opts.horizon="auto"``: the horizon the runs **record** before they start, never a minimum over the
    runs present (adding a run never re-reads another). Per condition: the ``eval.horizon`` its runs set
    (a study sets it on every run after its pilot; the runs of the condition that set none, such as the
    pilot's, launched before it was fixed, are read to it too), else the ``train.max_responses`` they
    were launched with. Where its runs set different ``eval.horizon`` values at different rollout sizes
    B but one per size (a study with ``horizon_per_size``), the same per size: each size's runs, those
    that set none included, are read to that size's value. Where the runs of a condition record
    different horizons otherwise each run is read to its own (:func:`planned_horizon`) and a message
    names them. A number: that horizon for every run; ``((condition, responses), ...)``: those
    conditions fixed, ``auto`` for the others, where ``responses`` may be a mapping ``{B: responses}``
    or ``((B, responses), ...)`` (each run read to its size's; a run at a size it lacks to its own, with
    a message); None: no horizon."""
    if opts.horizon is None:
        return [math.inf] * len(records), []
    if isinstance(opts.horizon, (int, float)):
        return [float(opts.horizon)] * len(records), []
    _, _, labels = condition_labels([flatten_config(r.config) for r in records], opts)
    fixed = dict(opts.horizon) if isinstance(opts.horizon, (dict, tuple)) else {}
    own = [planned_horizon(r.config) for r in records]
    chosen = list(own)
    messages = []
    for label in sorted(set(labels)):
        mine = [i for i, x in enumerate(labels) if x == label]
        if label in fixed:
            messages += _read_fixed(label, fixed[label], [records[i] for i in mine], mine, chosen)
            continue
        set_by = {_set_horizon(records[i].config) for i in mine} - {None}
        if len(set_by) == 1:  # the condition's eval.horizon, for the runs launched before it too
            for i in mine:
                chosen[i] = next(iter(set_by))
            continue
        if len(set_by) > 1:  # one eval.horizon per size: each size's, for its runs launched before it too
            mine = _read_per_size([records[i] for i in mine], mine, chosen)
        recorded = {own[i] for i in mine}
        if len(recorded) > 1:
            messages.append(_disagreement(label, [(records[i].run, own[i]) for i in mine]))
    return chosen, messages


def _read_fixed(
    label: str, value, records: list[RunRecord], index: list[int], chosen: list[float]
) -> list[str]:
    """Set ``chosen[index[k]]`` to the fixed horizon of ``records[k]``'s condition: ``value`` itself, or
    its run's size's where ``value`` is per size; the message for runs at a size it lacks (their own)."""
    per_size = size_horizons(value)
    if per_size is None:
        for i in index:
            chosen[i] = float(value)
        return []
    missing = []
    for record, i in zip(records, index):
        b = _size(record)
        if b in per_size:
            chosen[i] = per_size[b]
        elif math.isfinite(b):
            missing.append(f"{record.run} (B={b:g})")
    if not missing:
        return []
    return [
        f"condition {label}: its fixed horizons name no horizon at the size of {len(missing)} run(s): "
        f"{', '.join(sorted(missing)[:4])}{', ...' if len(missing) > 4 else ''}; each is read to its own "
        "(eval.horizon, else train.max_responses)"
    ]


def _read_per_size(records: list[RunRecord], index: list[int], chosen: list[float]) -> list[int]:
    """Where every rollout size of a condition's runs sets at most one ``eval.horizon``, read each
    size's runs (those that set none included) to it, and return the indices of the runs still read to
    their own (at a size where none set one); else change nothing and return ``index``."""
    sizes = [_size(r) for r in records]
    by_size: dict[float, set[float]] = {}
    for b, r in zip(sizes, records):
        h = _set_horizon(r.config)
        if h is not None:
            by_size.setdefault(b, set()).add(h)
    if any(len(v) > 1 for v in by_size.values()) or any(not math.isfinite(b) for b in by_size):
        return index
    rest = []
    for b, i in zip(sizes, index):
        if b in by_size:
            chosen[i] = next(iter(by_size[b]))
        else:
            rest.append(i)
    return rest


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


def horizon_messages(runs: pd.DataFrame) -> list[str]:
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
