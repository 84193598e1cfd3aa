"""The widths after a round: the study folder fitted as ``rlvr-analyze`` fits it, and the width of every
requested 95 % interval of α (per condition the common α where its test does not reject, with each
target's α reported beside it; else every target's α), the runs per condition, size
and seed, the responses spent, and each condition's horizon (docs/study.md, "A round").

- :func:`measure` fits the study folder as ``rlvr-analyze`` does (``analysis.data.clock_tables.build_tables``,
  ``analysis.fits.exponents.fit_conditions``, the same bootstrap seed);
- :func:`measurement` is the same without the reading and fitting (``benchmarks/study/study_vs_uniform.py``
  feeds it simulated sweeps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rlvr_scaling.run_names import override_value
from rlvr_study.study_file import Horizons, Study


@dataclass
class Measurement:
    widths: pd.DataFrame  # condition (index into Study.conditions), label, target, width, exponent
    runs: pd.DataFrame  # cond, P, B, seed, state, responses (every run directory read)
    responses: float  # responses spent by every run of the folder
    group_size: dict[int, int]  # P -> G
    message: str = ""
    labels: dict[int, str] = field(default_factory=dict)  # condition index -> the analysis' label
    horizons: dict[int, float] = field(default_factory=dict)  # condition index -> horizon read to
    # from these runs (horizon_factor): a number, or P -> responses with horizon_per_size
    proposed_horizons: dict[int, float | dict[int, float]] = field(default_factory=dict)
    tables: object = None  # the analysis.data.clock_tables.Tables fitted
    exps: pd.DataFrame | None = None  # the exponents table


def _matches(value, wanted) -> bool:
    try:
        return math.isclose(float(value), float(wanted), rel_tol=1e-9)
    except (TypeError, ValueError):
        return str(value) == str(wanted)


def _override_items(name) -> dict[str, str]:
    """``key=value`` items of a run directory's name (Hydra's override_dirname: ``k=v,k=v``, a ``/``
    in a value written ``%2F`` and ``%`` as ``%25``, decoded by ``override_value``)."""
    out = {}
    for item in str(name).split(","):
        key, eq, value = item.partition("=")
        if eq:
            out[key] = override_value(value)
    return out


def condition_index(row: pd.Series, study: Study) -> int | None:
    """Which of the study's conditions a run row (a ``build_tables`` row) belongs to: each condition
    key is compared with the row's column of that name, or, for a key that is not a column (a config
    group choice such as ``loss=clipped``, which the tables show as its values, ``loss.clip``), with the
    override in the run directory's name."""
    items = _override_items(row.get("run", ""))

    def value(k):
        if k in row.index and not (isinstance(row[k], float) and math.isnan(row[k])):
            return row[k]
        return items.get(k)

    for i in range(len(study.conditions)):
        if all(value(k) is not None and _matches(value(k), v) for k, v in study.condition_keys(i).items()):
            return i
    return None


def measure(study: Study, horizons: Horizons | None = None) -> Measurement:
    """Fit the study's folder (same tables and bootstrap as ``rlvr-analyze`` with ``--bootstrap``
    ``study.bootstrap``, ``--targets`` ``study.targets`` and ``--horizon`` the study's
    ``horizons.json``) and return the requested widths. ``horizons``: condition index -> the horizon
    the study fixed for it, a number or P -> responses (the others: the runs' own,
    ``analysis.data.clock_tables``)."""
    from analysis.data.clock_tables import build_tables
    from analysis.data.load import load_source
    from analysis.fits.exponents import fit_conditions

    empty_runs = pd.DataFrame(columns=["cond", "P", "B", "seed", "state", "responses"])
    folder = Path(study.folder)
    if not folder.is_dir():
        return Measurement(pd.DataFrame(), empty_runs, 0.0, {}, "no run yet")
    loaded = load_source(str(folder))
    tables = build_tables(loaded.runs, clock_options(study))
    if tables.runs.empty:
        return Measurement(pd.DataFrame(), empty_runs, 0.0, {}, "no readable run yet")
    if horizons:
        group = {int(p): int(g) for p, g in zip(tables.runs["P"], tables.runs["G"])}
        fixed = analysis_horizons(horizons, condition_labels(study, tables), group)
        tables = build_tables(loaded.runs, clock_options(study, fixed))
    exps, fits = fit_conditions(tables, n_boot=study.bootstrap, joint_model=False)
    return measurement(study, tables, exps, fits)


def clock_options(study: Study, horizons: dict | None = None):
    """The analysis options of a study: its targets and crossing rule, and the horizons it fixed
    (:func:`analysis_horizons`: condition label -> responses or {B: responses}; "auto" for the others)."""
    from analysis.data.clock_tables import ClockOptions

    def value(h):
        return tuple(sorted(h.items())) if isinstance(h, dict) else h

    return ClockOptions(
        targets=tuple(study.targets) if study.targets else None,
        crossing=study.crossing,
        horizon=tuple(sorted((k, value(h)) for k, h in horizons.items())) if horizons else "auto",
    )


def condition_labels(study: Study, tables) -> dict[int, str]:
    """Condition index -> the analysis' condition label (one label per study condition; "" when the
    runs of a condition carry several labels, i.e. a key outside the study's varies between them)."""
    out = {}
    cond = [condition_index(r, study) for _, r in tables.runs.iterrows()]
    for i in range(len(study.conditions)):
        labels = sorted({label for c, label in zip(cond, tables.runs["condition"]) if c == i})
        out[i] = labels[0] if len(labels) == 1 else ""
    return out


def _pilot_horizon(study: Study, at: pd.DataFrame, top: str, step: float, cap: float) -> float:
    """``horizon_factor`` times the slowest crossing of ``top`` among the runs ``at``, rounded up to a
    whole rollout of ``step`` responses and capped at ``cap``; ``cap`` itself where a run there never
    crossed within it (or there is none): the pilot has not seen the time scale there."""
    if at.empty or at[f"{top}:censored"].astype(bool).any():
        return cap
    slowest = float(at[top].max())
    return float(min(cap, math.ceil(study.horizon_factor * slowest / step) * step))


def _read_to(runs: pd.DataFrame, run_budget: float) -> float:
    """What runs were read to: the smallest horizon among them, at most the run budget."""
    h = runs["horizon"].to_numpy(float) if "horizon" in runs and len(runs) else np.array([np.nan])
    return min(float(np.nanmin(h)), run_budget) if np.isfinite(h).any() else run_budget


def proposed_horizon(study: Study, tables, label: str, run_budget: float) -> float:
    """The horizon of a targets condition from its pilot runs: ``horizon_factor`` times the slowest
    crossing of the top target at the reference size (the size nearest ``lr.ref_responses``, else the
    geometric middle of the sizes), rounded up to a whole rollout of the largest size and capped at
    what the runs observed (the horizon they were read to). A pilot run at that size that never
    crossed within it keeps the horizon where it is: the pilot has not seen the condition's time
    scale. Chosen before any later run starts, so no later run can move it."""
    from analysis.data.clock_tables import target_label

    runs = tables.runs[tables.runs["condition"] == label]
    if runs.empty or not tables.targets:
        return math.inf
    now = float(np.nanmin(runs["horizon"])) if "horizon" in runs else run_budget
    now = min(now, run_budget)
    top = target_label(max(tables.targets))
    if top not in runs:
        return now
    sizes = np.unique(runs["B"].to_numpy(float))
    ref = runs["lr.ref_responses"].dropna() if "lr.ref_responses" in runs else pd.Series(dtype=float)
    ref_b = float(ref.iloc[0]) if len(ref) else float(np.exp(np.log(sizes).mean()))
    at = runs[runs["B"] == sizes[np.argmin(np.abs(np.log(sizes) - np.log(ref_b)))]]
    return _pilot_horizon(study, at, top, float(sizes.max()), now)


def proposed_size_horizons(
    study: Study, tables, label: str, run_budget: float, group: dict[int, int]
) -> dict[int, float]:
    """The horizons of a targets condition per size (``horizon_per_size``), P (prompts per rollout) ->
    responses: at every size of the study, ``horizon_factor`` times the slowest pilot crossing of the
    top target there, rounded up to a whole rollout of that size (B = P G, ``group``: P -> G) and
    capped at what the runs there were read to (at most the run budget); that cap where a pilot run
    at the size did not cross within it, or no run of the size was read. :func:`proposed_horizon` per
    size: a small rollout size crosses early and is the expensive run, so a horizon of its own spares
    the responses a run there would spend past its time scale. Empty where the condition has no run."""
    from analysis.data.clock_tables import target_label

    runs = tables.runs[tables.runs["condition"] == label]
    if runs.empty or not tables.targets:
        return {}
    now = _read_to(runs, run_budget)
    top = target_label(max(tables.targets))
    default_g = next(iter(group.values()), 1)
    out = {}
    for p in study.sizes:
        at = runs[runs["P"].astype(int) == p] if top in runs else runs.iloc[0:0]
        step = float(at["B"].iloc[0]) if len(at) else float(p * group.get(p, default_g))
        out[p] = _pilot_horizon(study, at, top, step, _read_to(at, run_budget) if len(at) else now)
    return out


def analysis_horizons(horizons, labels: dict[int, str], group: dict[int, int]) -> dict:
    """The study's fixed horizons as the analysis takes them: condition label -> responses, or, for a
    per-size horizon, label -> {B: responses} (the study keys its sizes by P, the analysis by the
    rollout size B = P G, ``group``: P -> G); conditions without a label are left out."""
    default_g = next(iter(group.values()), 1)
    out = {}
    for i, h in horizons.items():
        if not labels.get(i):
            continue
        if isinstance(h, dict):
            h = {float(p * group.get(p, default_g)): float(v) for p, v in h.items()}
        out[labels[i]] = h
    return out


def _runs_table(tables, t: pd.DataFrame) -> pd.DataFrame:
    """One row per run: condition index, P, B, seed, state, responses, wall seconds, and per target
    whether its crossing is known only to a coarse bracket (``limited:<target>``)."""
    from analysis.data.clock_tables import target_label

    runs = pd.DataFrame(
        {
            "cond": t["cond"],
            "P": t["P"].astype(int),
            "B": t["B"].astype(float),
            "seed": t["seed"].astype(int),
            "state": t["state"],
            "responses": pd.to_numeric(t["final_responses"], errors="coerce").fillna(0.0),
        }
    )
    # each run's wall time: the wall clock at its last evaluation (training and evaluation included)
    if "wall_seconds" in tables.evals and len(tables.evals):
        wall = pd.to_numeric(tables.evals["wall_seconds"], errors="coerce").groupby(tables.evals["run"]).max()
        runs["wall_seconds"] = t["run"].map(wall).astype(float).to_numpy()
    else:
        runs["wall_seconds"] = math.nan
    for target in tables.targets:  # crossings known only to a coarse bracket (analysis.data.clock_tables)
        label = target_label(target)
        col = f"{label}:resolution_limited"
        if col in t and f"{label}:censored" in t:
            reached = ~t[f"{label}:censored"].fillna(True).astype(bool)
            runs[f"limited:{label}"] = t[col].fillna(False).astype(bool) & reached
    return runs


def _interval(lo, hi) -> float:
    lo, hi = float(lo), float(hi)
    return hi - lo if math.isfinite(lo) and math.isfinite(hi) else math.inf


def _width_row(i: int, label: str, clock: str, target: float, hit: pd.DataFrame, goal: float) -> dict:
    """The requested interval of one condition and clock from its exponents row (unbounded without one)."""
    one = len(hit) == 1
    return {
        "condition": i,
        "label": label,
        "clock": clock,
        "target": target,
        "width": _interval(hit["ci_low"].iloc[0], hit["ci_high"].iloc[0]) if one else math.inf,
        "exponent": float(hit["exponent"].iloc[0]) if one else math.nan,
        "goal": goal,
        "targets_width": math.nan,
    }


def _width_rows(
    study: Study, i: int, label: str, mine: pd.DataFrame, targets, common: pd.DataFrame
) -> list[dict]:
    """The requested intervals of condition ``i`` (``mine``: its exponents rows): γ's for a ``failure``
    condition; else each target's α, or, where the common-α test does not reject and the common α
    combines every target, the common α's.

    Where the common α answers, it is the condition's requested interval, and each target's α is
    reported beside it with an infinite goal (never open, never chased). The common α is a weighted
    mean of the targets' α, narrower than any of them by what averaging buys; a study that also held
    every target to the width (this module until this release) asked for a different, much dearer
    product: on the reference study the planner wanted 197 seeds for targets whose common α was met
    (docs/study.md, "A round")."""
    from analysis.data.clock_tables import target_label

    if study.clock_of(i) == "failure":
        return [
            _width_row(i, label, "failure", math.nan, mine[mine["clock"] == "failure"], study.failure_width)
        ]
    per_target = [
        _width_row(i, label, target_label(a), float(a), mine[mine["clock"] == target_label(a)], study.width)
        for a in targets
    ]
    row = common[common["condition"] == label] if label and not common.empty else common.iloc[0:0]
    p_common = float(row["p_common"].iloc[0]) if len(row) == 1 and "p_common" in row else math.nan
    # the common alpha answers for the study only where it combines every target (one left out
    # for want of an exponent leaves that target's interval unbounded, not the common one narrow)
    every = len(row) == 1 and str(row["targets"].iloc[0]) == " ".join(f"{a:g}" for a in targets)
    if not (every and math.isfinite(p_common) and p_common >= 0.05):
        return per_target
    # the common-alpha test does not reject: the common alpha is the reported exponent and the requested
    # interval; targets_width (the targets' median width) says how far the targets' plans must go for it
    # (plan_round scales the goal by its ratio to the common width)
    widths = [r["width"] for r in per_target if math.isfinite(r["width"])]
    reported = [{**r, "goal": math.inf} for r in per_target]
    common_row = {
        "condition": i,
        "label": label,
        "clock": "common",
        "target": math.nan,
        "width": _interval(row["ci_low"].iloc[0], row["ci_high"].iloc[0]),
        "exponent": float(row["exponent_common"].iloc[0]),
        "goal": study.width,
        "targets_width": float(np.median(widths)) if widths else math.inf,
    }
    return [common_row, *reported]


def measurement(study: Study, tables, exps: pd.DataFrame, fits: dict | None = None) -> Measurement:
    """The :class:`Measurement` of fitted tables: ``tables`` from ``analysis.data.clock_tables.build_tables``
    (at least one run), ``exps`` the exponents table and ``fits`` the fits ``analysis.fits.exponents.fit_conditions``
    gives for them (without ``fits`` no common alpha is formed: every target's alpha is requested).
    :func:`measure` without the reading and fitting (``benchmarks/study/study_vs_uniform.py`` feeds it
    simulated sweeps)."""
    from analysis.fits.cross import common_exponent_table

    t = tables.runs.copy()
    t["cond"] = [condition_index(r, study) for _, r in t.iterrows()]
    runs = _runs_table(tables, t)
    group_size = {int(p): int(g) for p, g in zip(t["P"], t["G"])}
    common = common_exponent_table(tables, fits) if study.common and fits is not None else pd.DataFrame()
    labels = {i: sorted(set(t.loc[t["cond"] == i, "condition"])) for i in range(len(study.conditions))}
    rows = []
    for i in range(len(study.conditions)):
        label = labels[i][0] if len(labels[i]) == 1 else ""
        rows += _width_rows(study, i, label, exps[exps["condition"].isin(labels[i])], tables.targets, common)
    out = Measurement(pd.DataFrame(rows), runs, float(runs["responses"].sum()), group_size)
    out.labels = {i: (v[0] if len(v) == 1 else "") for i, v in labels.items()}
    out.tables, out.exps = tables, exps
    if "horizon" in t:
        for i, label in out.labels.items():
            mine = t.loc[t["cond"] == i, "horizon"]
            if label and len(mine):
                out.horizons[i] = float(mine.min())
                budget = float(np.nanmax(t.loc[t["cond"] == i, "budget"])) if "budget" in t else math.inf
                if study.clock_of(i) == "targets" and study.horizon_per_size:
                    sizes = proposed_size_horizons(study, tables, label, budget, group_size)
                    out.proposed_horizons[i] = sizes or math.inf
                elif study.clock_of(i) == "targets":
                    out.proposed_horizons[i] = proposed_horizon(study, tables, label, budget)
    return out


def format_widths(study: Study, m: Measurement, done: set[int] | frozenset = frozenset()) -> str:
    """One line per condition and target: width against the goal (``done``: conditions that get no more
    runs, not identifiable within their horizon: their open rows say so)."""
    lines = [f"  {'condition':<44} {'interval':>12} {'exponent':>8} {'width':>8} {'goal':>6}"]
    for r in m.widths.itertuples():
        name = " ".join(study.condition_overrides(r.condition)) or "all"
        what = (
            f"alpha {r.target:g}"
            if r.clock.startswith("target:")
            else ("common alpha" if r.clock == "common" else "gamma")
        )
        w = f"{r.width:.3f}" if math.isfinite(r.width) else "inf"
        a = f"{r.exponent:.3f}" if np.isfinite(r.exponent) else "-"
        status = "met" if r.width <= r.goal else "open"
        if not math.isfinite(r.goal):  # a target's α beside the common α that answers: not chased
            status = "reported"
        elif status == "open" and r.condition in done:
            status = "beyond horizon"
        goal = f"{r.goal:>6g}" if math.isfinite(r.goal) else f"{'-':>6}"
        lines.append(f"  {name:<44} {what:>12} {a:>8} {w:>8} {goal}  {status}")
    return "\n".join(lines)


#: A targets condition whose top target lies above this fraction of its achievable gain is near its
#: plateau: its α there times the ceiling as much as the rate (docs/analysis.md, "Targets as fractions
#: of the gain").
NEAR_PLATEAU = 0.8


def plateau_lines(study: Study, m: Measurement) -> list[str]:
    """Per targets condition: R0, the shared asymptote A of its runs so far and where its top target
    sits in the gain R0 … A, flagged when above :data:`NEAR_PLATEAU` (``analysis.fits.gain``; no bootstrap)."""
    from analysis.fits.gain import achievable_gain

    if m.tables is None or not study.targets or m.tables.runs.empty:
        return []
    runs = m.tables.runs[m.tables.runs["in_fit"]]
    top = max(study.targets)
    lines = []
    for i, label in sorted(m.labels.items()):
        if study.clock_of(i) != "targets" or label not in set(runs["condition"]):
            continue
        g = achievable_gain(runs[runs["condition"] == label], m.tables.evals, n_boot=0)
        if not (math.isfinite(g["A"]) and g["A"] > g["R0"]):
            continue
        frac = (top - g["R0"]) / (g["A"] - g["R0"])
        flag = "  near its plateau: read its gain targets too" if frac >= NEAR_PLATEAU else ""
        lines.append(
            f"  condition {i}: R0 {g['R0']:.3f}, A {g['A']:.3f}; target {top:g} at {100 * frac:.0f} % of the gain{flag}"
        )
    return lines
