"""Which requested intervals a study chases, and each condition's status (docs/study.md, "A round").

A target that most runs at some size of a condition do not reach within the condition's horizon keeps
that condition's interval open however many seeds it gets: more runs add censored crossings, not
information about the slope (the planner drops sizes censored with probability above 0.9 for the same
reason, :func:`rlvr_study.plan.plan_design`). :func:`triage` does not chase such an interval:

- with ``gain_targets`` (the default ``[0.5, 0.75]``), the condition moves to them: its requested
  intervals become α at each fraction f of its own achievable gain, level R0 + f (A − R0)
  (:func:`analysis.fits.gain.gain_table`; the interval with A's uncertainty carried in, ``ci_low_gain``
  .. ``ci_high_gain``, against the study's ``width``), where the level itself is reached within the horizon
  by most runs at every size;
- otherwise (or where no gain target is reachable either) the condition is **not identifiable within its
  horizon** for those targets. Where the study asks for the common α (``common: true``), that is the
  condition's requested interval, and a common α over the study's targets cannot be read from runs
  that do not reach one of them: the condition gets no more runs, not even the rest of the pilot's
  seeds (:func:`rlvr_study.rounds.pilot_floor`), and the rounds spend elsewhere; the α of each target it
  does reach is printed in its reason and reported by the analysis, not chased. Where the study asks
  for per-target α, the targets the condition does reach stay requested (each on its own), and where
  none is left it gets no more runs. The reason names the target, the sizes and the runs that did not
  reach it.

Why the common case stops: in the reference study's earlier grid the lowest rate (η_ref = 1e-6) reached
only its lowest target at every size within 16,384 responses, at about 5 serial minutes a seed against 1
at 3.16e-5; chasing that one target's α cost a third of a 30-minute study and met nothing (docs/study.md;
the grid now has 5.62e-6 there, "A grid its horizons read").

The chased intervals replace the measurement's widths for the stop rule and the next round
(:func:`rlvr_study.rounds.plan_round`), so the rounds spend elsewhere; :func:`status_lines` prints every
condition's status with its reason at the end of a study.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rlvr_study.measure import Measurement
from rlvr_study.study_file import Study

#: a target is beyond a condition's horizon where more than this share of the runs at some size miss it
BEYOND_SHARE = 0.5

MET, OPEN, MOVED, NOT_IDENTIFIABLE = (
    "met",
    "open",
    "moved to gain targets",
    "not identifiable within its horizon",
)
# budget_triage: a goal the budget left cannot buy (rlvr_study.afford)
BEYOND_BUDGET = "not attainable within the budget"


@dataclass
class ConditionStatus:
    condition: int
    status: str  # MET, OPEN, MOVED, NOT_IDENTIFIABLE, BEYOND_BUDGET (a moved one is met or open: reason)
    reason: str
    beyond: str = ""  # the targets its horizon makes unattainable, and why ("" where none)


@dataclass
class Triage:
    widths: pd.DataFrame  # the intervals the study chases (measure's columns; gain rows: clock gain:<f>)
    statuses: dict[int, ConditionStatus] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def measurement(self, m: Measurement) -> Measurement:
        """``m`` with the chased intervals as its widths."""
        return dataclasses.replace(m, widths=self.widths)

    @property
    def any_beyond(self) -> bool:
        return any(s.beyond for s in self.statuses.values())

    @property
    def done(self) -> set[int]:
        """The conditions that get no more runs: not identifiable within their horizon, nothing chased,
        or (``budget_triage``) not attainable within the budget."""
        return {i for i, s in self.statuses.items() if s.status in (NOT_IDENTIFIABLE, BEYOND_BUDGET)}


def beyond_horizon(runs: pd.DataFrame, column: str) -> list[tuple[float, int, int]]:
    """``(B, missed, runs)`` of every size where more than :data:`BEYOND_SHARE` of ``runs`` (one
    condition's rows of the clock tables) did not reach the crossing ``column`` within the horizon."""
    if f"{column}:censored" not in runs or runs.empty:
        return []
    out = []
    for b, at in runs.groupby("B", sort=True):
        missed = int(at[f"{column}:censored"].fillna(True).astype(bool).sum())
        if missed > BEYOND_SHARE * len(at):
            out.append((float(b), missed, len(at)))
    return out


def size_horizons(runs: pd.DataFrame) -> dict[float, float]:
    """B -> the horizon the runs at that size were read to (their smallest; ``horizon`` column of the
    clock tables), for one condition's rows."""
    if "horizon" not in runs or runs.empty:
        return {}
    return {float(b): float(h.min()) for b, h in runs["horizon"].astype(float).groupby(runs["B"])}


def _why(what: str, sizes: list[tuple[float, int, int]], horizons: dict[float, float]) -> str:
    """Why a target is beyond the horizon: the sizes whose runs missed it, and the horizon (each size's
    where the condition has one per size)."""
    if len(set(horizons.values())) > 1:
        where = ", ".join(
            f"{m} of {n} runs at B={b:g} (horizon {horizons.get(b, math.inf):,.0f})" for b, m, n in sizes
        )
        return f"{what} not reached within the horizon at their size by {where}"
    horizon = next(iter(horizons.values()), math.inf)
    where = ", ".join(f"{m} of {n} runs at B={b:g}" for b, m, n in sizes)
    within = (
        f"within the horizon ({horizon:,.0f} responses)" if math.isfinite(horizon) else "within the budget"
    )
    return f"{what} not reached {within} by {where}"


def _target_row(i: int, label: str, clock: str, target: float, exps: pd.DataFrame, goal: float) -> dict:
    """A per-target interval row (measure's columns) from the exponents table."""
    hit = exps[(exps["condition"] == label) & (exps["clock"] == clock)] if exps is not None else exps
    one = hit is not None and len(hit) == 1
    lo, hi = (float(hit[k].iloc[0]) for k in ("ci_low", "ci_high")) if one else (math.nan, math.nan)
    width = hi - lo if math.isfinite(lo) and math.isfinite(hi) else math.inf
    exponent = float(hit["exponent"].iloc[0]) if one else math.nan
    return {"condition": i, "label": label, "clock": clock, "target": target, "width": width,
            "exponent": exponent, "goal": goal, "targets_width": math.nan}  # fmt: skip


def gain_rows(study: Study, m: Measurement, i: int, label: str, records) -> tuple[list[dict], list[str]]:
    """The gain-target intervals of condition ``i`` that its runs reach within the horizon (module
    docstring), and a reason per fraction that is not chased."""
    from analysis.data.clock_tables import build_tables, target_label
    from analysis.fits.gain import gain_table

    tables = m.tables
    mine = dataclasses.replace(
        tables, runs=tables.runs[tables.runs["condition"] == label].reset_index(drop=True)
    )
    gains = gain_table(records, mine, study.gain_targets, n_boot=study.bootstrap)
    levels = sorted({float(v) for v in gains["level"] if np.isfinite(v)})
    at_levels = (
        build_tables(records, dataclasses.replace(tables.options, targets=tuple(levels))) if levels else None
    )
    rows, why = [], []
    for g in gains.itertuples():
        what = f"{g.fraction:g} of the gain"
        if not np.isfinite(g.level):
            why.append(f"{what}: no level ({g.message or 'no gain'})")
            continue
        runs = at_levels.runs[(at_levels.runs["condition"] == label) & at_levels.runs["in_fit"]]
        missed = beyond_horizon(runs, target_label(g.level))
        if missed:
            why.append(_why(f"{what} (level {g.level:.3f})", missed, size_horizons(runs)))
            continue
        lo, hi = float(g.ci_low_gain), float(g.ci_high_gain)
        rows.append({"condition": i, "label": label, "clock": f"gain:{g.fraction:g}", "target": g.level,
                     "width": hi - lo if math.isfinite(lo) and math.isfinite(hi) else math.inf,
                     "exponent": float(g.exponent), "goal": study.width, "targets_width": math.nan})  # fmt: skip
    return rows, why


def _condition(
    study: Study, m: Measurement, i: int, rows: pd.DataFrame, records
) -> tuple[list[dict], ConditionStatus]:
    """The chased rows and the status of one targets condition."""
    from analysis.data.clock_tables import target_label

    label = m.labels.get(i, "")
    runs = m.tables.runs[m.tables.runs["condition"] == label] if label and m.tables is not None else None
    if runs is None or runs.empty or study.clock_of(i) != "targets":
        return rows.to_dict("records"), _status(i, rows, "")
    runs = runs[runs["in_fit"]] if "in_fit" in runs else runs
    horizon = size_horizons(runs)
    beyond = {}
    for a in m.tables.targets:
        missed = beyond_horizon(runs, target_label(a))
        if missed:
            beyond[target_label(a)] = _why(f"target {a:g}", missed, horizon)
    if not beyond:
        return rows.to_dict("records"), _status(i, rows, "")
    why = "; ".join(beyond.values())
    if study.gain_targets and records is not None:
        gains, unreached = gain_rows(study, m, i, label, records)
        if gains:
            extra = f"; not chased: {'; '.join(unreached)}" if unreached else ""
            status = _status(i, pd.DataFrame(gains), f"{why}{extra}")
            return gains, ConditionStatus(i, MOVED, f"now {status.status}: {status.reason}", why)
        why += f"; no gain target is reachable either ({'; '.join(unreached)})"
    kept = [
        _target_row(i, label, target_label(a), float(a), m.exps, study.width)
        for a in m.tables.targets
        if target_label(a) not in beyond
    ]
    if study.common and kept:
        reached = ", ".join(_describe(r) for r in pd.DataFrame(kept).itertuples())
        return [], ConditionStatus(
            i,
            NOT_IDENTIFIABLE,
            f"{why}: the common alpha needs every target within the horizon; no more runs "
            f"(not chased: {reached})",
            why,
        )
    if not kept:
        return [], ConditionStatus(i, NOT_IDENTIFIABLE, f"{why}; no more runs", why)
    status = _status(i, pd.DataFrame(kept), f"{why}: those targets are not identifiable within the horizon")
    return kept, dataclasses.replace(status, beyond=why)


def _describe(r) -> str:
    what = {"common": "common alpha", "failure": "gamma"}.get(
        r.clock, r.clock.replace("target:", "alpha at ")
    )
    what = what.replace("gain:", "alpha at gain ")
    w = f"{r.width:.3f}" if math.isfinite(r.width) else "unbounded"
    return f"{what} width {w} {'<=' if r.width <= r.goal else '>'} {r.goal:g}"


def _status(i: int, rows: pd.DataFrame, why: str) -> ConditionStatus:
    """Met where every chased interval is at most its goal, else open; the reason lists them."""
    met = bool(len(rows)) and bool((rows["width"] <= rows["goal"]).all())
    widths = ", ".join(_describe(r) for r in rows.itertuples() if math.isfinite(r.goal))
    return ConditionStatus(i, MET if met else OPEN, "; ".join(x for x in (widths, why) if x))


def triage(study: Study, m: Measurement, records=None) -> Triage:
    """The intervals the study chases after a round, and every condition's status (module docstring).
    ``records``: the folder's runs (``analysis.data.load.load_source(folder).runs``), read here from
    ``study.folder`` when a condition moves to its gain targets and none are given."""
    if m.widths.empty or m.tables is None:
        return Triage(m.widths)
    out_rows: list[dict] = []
    out = Triage(m.widths.iloc[0:0])
    for i in range(len(study.conditions)):
        rows = m.widths[m.widths["condition"] == i]
        if records is None and study.gain_targets and _needs_gain(study, m, i):
            from analysis.data.load import load_source

            records = load_source(str(study.folder)).runs
        chased, status = _condition(study, m, i, rows, records)
        out_rows += chased
        out.statuses[i] = status
        if status.beyond:
            out.notes.append(f"condition {i}: {status.status}: {status.reason}")
    out.widths = pd.DataFrame(out_rows, columns=m.widths.columns) if out_rows else m.widths.iloc[0:0]
    return out


def _needs_gain(study: Study, m: Measurement, i: int) -> bool:
    """Whether condition ``i`` has a target beyond its horizon (so its gain targets are read)."""
    from analysis.data.clock_tables import target_label

    label = m.labels.get(i, "")
    if not label or study.clock_of(i) != "targets":
        return False
    runs = m.tables.runs[m.tables.runs["condition"] == label]
    runs = runs[runs["in_fit"]] if "in_fit" in runs else runs
    return any(beyond_horizon(runs, target_label(a)) for a in m.tables.targets)


def status_lines(study: Study, statuses: dict[int, ConditionStatus]) -> list[str]:
    """One line per condition: its overrides, its status and the reason."""
    lines = []
    for i, s in sorted(statuses.items()):
        name = " ".join(study.condition_overrides(i)) or "all"
        lines.append(f"  condition {i} ({name}): {s.status}: {s.reason}")
    return lines
