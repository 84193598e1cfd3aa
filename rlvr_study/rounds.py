"""Adaptive rounds of a study: the study file, the widths after a round, and the runs of the next.

``rlvr-study STUDY.yaml`` (``rlvr_study/cli.py``, the side that launches runs) alternates
between launching a round of runs and the functions here, which only read run directories:

- :func:`load_study` reads and validates the study file (a wrong key fails before any compute, with a
  message naming it);
- :func:`measure` fits the study folder as ``rlvr-analyze`` does (``analysis.clocks.build_tables``,
  ``analysis.report.fit_conditions``, the same bootstrap seed) and returns the width of every requested
  95 % interval of α (per condition and target), the runs per condition, size and seed, and the
  responses spent;
- :func:`plan_round` asks the planner (:func:`rlvr_study.plan.plan_design`, fed by
  :func:`rlvr_study.plan.pilot_conditions`) for the design that meets the width of every interval still
  too wide, and takes the runs it lacks, at most the remaining budget, choosing one run at a time the
  (condition, size) whose run narrows the planned width of that condition's widest interval the most
  per response. Sizes the planner drops (runs there end censored at the budget) get no more runs. A
  condition without an exponent yet (no crossings at two sizes) gets one more seed at every size.

The study never calls the trainer from here: this module is the analysis side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rlvr_study.plan import design_width, plan_design, run_responses

KEYS = {
    "name",
    "sweep",
    "overrides",
    "conditions",
    "sizes",
    "targets",
    "width",
    "budget",
    "pilot_seeds",
    "max_rounds",
    "launcher",
    "folder",
    "bootstrap",
    "max_runs_per_round",
    "common",
    "crossing",
    "failure_width",
    "horizon_factor",
    "assurance",
}
# Keys of a condition mapping that direct the study instead of overriding the config: ``clock``
# (``targets``, the default, or ``failure``: the condition's requested interval is gamma's).
CONDITION_DIRECTIVES = {"clock"}
# Keys a study sets itself on every launch: a condition or an override may not set them.
# A study never stops a run at its targets (a run's length would move its crossings) and fixes each
# condition's horizon itself (eval.horizon, after the pilot).
RESERVED = {
    "seed",
    "rollout.prompts_per_rollout",
    "run.sweep",
    "hydra.sweep.dir",
    "sweeps",
    "train.stop_at_targets",
    "eval.horizon",
}


class StudyError(ValueError):
    """A study file that cannot run; the message names the key."""


@dataclass
class Study:
    name: str
    sizes: list[int]  # rollout.prompts_per_rollout values
    width: float = 0.12
    budget_responses: float = math.inf
    budget_hours: float = math.inf
    sweep: str | None = None
    overrides: list[str] = field(default_factory=list)
    conditions: list[dict] = field(default_factory=lambda: [{}])
    targets: list[float] | None = None
    pilot_seeds: int = 2
    max_rounds: int = 5
    launcher: list[str] = field(default_factory=list)
    folder: Path = Path("runs")
    bootstrap: int = 1000
    max_runs_per_round: int | None = None
    common: bool = True  # one common alpha per condition where the common-alpha test does not reject
    crossing: str = "interval"  # analysis.clocks crossing mode: interval | isotonic
    failure_width: float = 0.6  # the requested width of gamma's interval (conditions with clock: failure)
    # each targets condition's horizon, fixed after the pilot: this many times the slowest pilot crossing
    # of the top target at the reference size (capped at the run budget; docs/study.md)
    horizon_factor: float = 4.0
    # the planner plans for the width to be met with this probability (0.5: the median width)
    assurance: float = 0.8

    def condition_overrides(self, i: int) -> list[str]:
        return [
            f"{k}={_hydra_value(v)}" for k, v in self.conditions[i].items() if k not in CONDITION_DIRECTIVES
        ]

    def condition_keys(self, i: int) -> dict:
        return {k: v for k, v in self.conditions[i].items() if k not in CONDITION_DIRECTIVES}

    def clock_of(self, i: int) -> str:
        return str(self.conditions[i].get("clock", "targets"))


def _hydra_value(v) -> str:
    if isinstance(v, list):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def _positive(raw: dict, key: str, kind=float):
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise StudyError(f"{key}: must be a positive number, got {value!r}")
    if kind is int and int(value) != value:
        raise StudyError(f"{key}: must be an integer, got {value!r}")
    return kind(value)


def _override_list(raw: dict, key: str) -> list[str]:
    value = raw.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and "=" in v for v in value):
        raise StudyError(f"{key}: must be a list of key=value overrides, got {value!r}")
    for v in value:
        k = v.split("=", 1)[0].lstrip("+~")
        if k in RESERVED:
            raise StudyError(f"{key}: {k} is set by the study (sizes, seeds, name, folder), not here")
        if "," in v.split("=", 1)[1] and not v.split("=", 1)[1].startswith("["):
            raise StudyError(f"{key}: {v!r} is a sweep; give the values as conditions")
    return value


def parse_study(raw: dict, base: Path = Path(".")) -> Study:
    """A :class:`Study` from the parsed YAML mapping; :class:`StudyError` names the first wrong key."""
    if not isinstance(raw, dict):
        raise StudyError("study file: must be a mapping of keys (name, sizes, budget, ...)")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise StudyError(f"{unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    for key in ("name", "sizes", "budget"):
        if key not in raw:
            raise StudyError(f"{key}: required")
    name = raw["name"]
    if not isinstance(name, str) or not name or any(c in name for c in "/ ,="):
        raise StudyError(f"name: must be a plain word (no '/', ',', '=' or spaces), got {name!r}")
    sizes = raw["sizes"]
    if not isinstance(sizes, list) or len(sizes) < 2:
        raise StudyError(f"sizes: at least two rollout.prompts_per_rollout values, got {sizes!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise StudyError(f"sizes: positive integers (prompts per rollout), got {sizes!r}")
    if len(set(sizes)) != len(sizes):
        raise StudyError(f"sizes: repeated values in {sizes!r}")
    study = Study(name=name, sizes=sorted(sizes), folder=base / "runs" / name)
    budget = raw["budget"]
    if not isinstance(budget, dict) or not budget or set(budget) - {"responses", "hours"}:
        raise StudyError(f"budget: a mapping with responses and/or hours, got {budget!r}")
    if "responses" in budget:
        study.budget_responses = (
            _positive(budget, "responses") if budget["responses"] is not None else math.inf
        )
    if "hours" in budget:
        study.budget_hours = _positive(budget, "hours") if budget["hours"] is not None else math.inf
    if math.isinf(study.budget_responses) and math.isinf(study.budget_hours):
        raise StudyError("budget: give responses or hours")
    if "width" in raw:
        study.width = _positive(raw, "width")
    if "failure_width" in raw:
        study.failure_width = _positive(raw, "failure_width")
    if "horizon_factor" in raw:
        study.horizon_factor = _positive(raw, "horizon_factor")
        if study.horizon_factor < 1:
            raise StudyError(f"horizon_factor: at least 1, got {study.horizon_factor!r}")
    if "assurance" in raw:
        value = raw["assurance"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value < 1:
            raise StudyError(f"assurance: a probability in [0.5, 1), got {value!r}")
        study.assurance = float(value)
    if "common" in raw:
        if not isinstance(raw["common"], bool):
            raise StudyError(f"common: true or false, got {raw['common']!r}")
        study.common = raw["common"]
    if "crossing" in raw:
        if raw["crossing"] not in ("interval", "isotonic"):
            raise StudyError(f"crossing: interval or isotonic, got {raw['crossing']!r}")
        study.crossing = raw["crossing"]
    for key, kind in (
        ("pilot_seeds", int),
        ("max_rounds", int),
        ("bootstrap", int),
        ("max_runs_per_round", int),
    ):
        if key in raw and raw[key] is not None:
            setattr(study, key, _positive(raw, key, kind))
    if study.pilot_seeds < 2:
        raise StudyError("pilot_seeds: at least 2 (the least the bootstrap can resample)")
    if "sweep" in raw and raw["sweep"] is not None:
        if not isinstance(raw["sweep"], str):
            raise StudyError(f"sweep: the name of a sweeps/ file, got {raw['sweep']!r}")
        study.sweep = raw["sweep"]
    study.overrides = _override_list(raw, "overrides")
    study.launcher = _override_list(raw, "launcher")
    if "conditions" in raw and raw["conditions"] is not None:
        conds = raw["conditions"]
        if not isinstance(conds, list) or not conds or not all(isinstance(c, dict) for c in conds):
            raise StudyError(f"conditions: a list of mappings of overrides, got {conds!r}")
        for c in conds:
            if str(c.get("clock", "targets")) not in ("targets", "failure"):
                raise StudyError(f"conditions: clock must be targets or failure, got {c['clock']!r}")
        keys = {tuple(sorted(k for k in c if k not in CONDITION_DIRECTIVES)) for c in conds}
        if len(keys) != 1:
            raise StudyError("conditions: every condition must set the same keys")
        for k in keys.pop():
            if k in RESERVED:
                raise StudyError(f"conditions: {k} is set by the study, not by a condition")
        if len({tuple(sorted((k, str(v)) for k, v in c.items())) for c in conds}) != len(conds):
            raise StudyError("conditions: two conditions are the same")
        study.conditions = conds
    if "targets" in raw and raw["targets"] is not None:
        t = raw["targets"]
        if not isinstance(t, list) or not t or not all(isinstance(x, (int, float)) and 0 < x < 1 for x in t):
            raise StudyError(f"targets: accuracies in (0, 1), got {t!r}")
        study.targets = [float(x) for x in t]
    if "folder" in raw and raw["folder"] is not None:
        study.folder = base / str(raw["folder"])
    return study


def load_study(path: str | Path, base: Path | None = None) -> Study:
    """Read and validate a study file; ``base``: where relative folders live (default: the cwd)."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"study file: {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise StudyError(f"study file: {path} is not YAML ({err})") from err
    return parse_study(raw, base if base is not None else Path("."))


# ------------------------------------------------------------------------------------ measurement
@dataclass
class Measurement:
    widths: pd.DataFrame  # condition (index into Study.conditions), label, target, width, exponent
    runs: pd.DataFrame  # cond, P, B, seed, state, responses (every run directory read)
    responses: float  # responses spent by every run of the folder
    group_size: dict[int, int]  # P -> G
    message: str = ""
    labels: dict[int, str] = field(default_factory=dict)  # condition index -> the analysis' label
    horizons: dict[int, float] = field(default_factory=dict)  # condition index -> horizon read to
    proposed_horizons: dict[int, float] = field(default_factory=dict)  # from these runs (horizon_factor)
    tables: object = None  # the analysis.clocks.Tables fitted
    exps: pd.DataFrame | None = None  # the exponents table


def _matches(value, wanted) -> bool:
    try:
        return math.isclose(float(value), float(wanted), rel_tol=1e-9)
    except (TypeError, ValueError):
        return str(value) == str(wanted)


def _override_items(name) -> dict[str, str]:
    """``key=value`` items of a run directory's name (Hydra's override_dirname: ``k=v,k=v``)."""
    out = {}
    for item in str(name).split(","):
        key, eq, value = item.partition("=")
        if eq:
            out[key] = value
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


def measure(study: Study, horizons: dict[int, float] | None = None) -> Measurement:
    """Fit the study's folder (same tables and bootstrap as ``rlvr-analyze`` with ``--bootstrap``
    ``study.bootstrap``, ``--targets`` ``study.targets`` and ``--horizon`` the study's
    ``horizons.json``) and return the requested widths. ``horizons``: condition index -> the horizon
    the study fixed for it (the others: the runs' own, ``analysis.clocks``)."""
    from analysis.clocks import build_tables
    from analysis.load import load_source
    from analysis.report import fit_conditions

    empty_runs = pd.DataFrame(columns=["cond", "P", "B", "seed", "state", "responses"])
    folder = Path(study.folder)
    if not folder.is_dir():
        return Measurement(pd.DataFrame(), empty_runs, 0.0, {}, "no run yet")
    loaded = load_source(str(folder))
    tables = build_tables(loaded.runs, clock_options(study))
    if tables.runs.empty:
        return Measurement(pd.DataFrame(), empty_runs, 0.0, {}, "no readable run yet")
    if horizons:
        labels = condition_labels(study, tables)
        fixed = {labels[i]: h for i, h in horizons.items() if labels.get(i)}
        tables = build_tables(loaded.runs, clock_options(study, fixed))
    exps, fits = fit_conditions(tables, n_boot=study.bootstrap, joint_model=False)
    return measurement(study, tables, exps, fits)


def clock_options(study: Study, horizons: dict[str, float] | None = None):
    """The analysis options of a study: its targets and crossing rule, and the horizons it fixed
    (condition label -> responses; "auto" for the others)."""
    from analysis.clocks import ClockOptions

    return ClockOptions(
        targets=tuple(study.targets) if study.targets else None,
        crossing=study.crossing,
        horizon=tuple(sorted(horizons.items())) if horizons else "auto",
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


def proposed_horizon(study: Study, tables, label: str, run_budget: float) -> float:
    """The horizon of a targets condition from its pilot runs: ``horizon_factor`` times the slowest
    crossing of the top target at the reference size (the size nearest ``lr.ref_responses``, else the
    geometric middle of the sizes), rounded up to a whole rollout of the largest size and capped at
    what the runs observed (the horizon they were read to). A pilot run at that size that never
    crossed within it keeps the horizon where it is: the pilot has not seen the condition's time
    scale. Chosen before any later run starts, so no later run can move it."""
    from analysis.clocks import target_label

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
    if at[f"{top}:censored"].astype(bool).any():
        return now
    slowest = float(at[top].max())
    step = float(sizes.max())
    return float(min(now, math.ceil(study.horizon_factor * slowest / step) * step))


def measurement(study: Study, tables, exps: pd.DataFrame, fits: dict | None = None) -> Measurement:
    """The :class:`Measurement` of fitted tables: ``tables`` from ``analysis.clocks.build_tables``
    (at least one run), ``exps`` the exponents table and ``fits`` the fits ``analysis.report.fit_conditions``
    gives for them (without ``fits`` no common alpha is formed: every target's alpha is requested).
    :func:`measure` without the reading and fitting (``benchmarks/study_vs_uniform.py`` feeds it
    simulated sweeps)."""
    from analysis.clocks import target_label
    from analysis.cross import common_exponent_table

    t = tables.runs.copy()
    t["cond"] = [condition_index(r, study) for _, r in t.iterrows()]
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
    for target in tables.targets:  # crossings known only to a coarse bracket (analysis.clocks)
        label = target_label(target)
        col = f"{label}:resolution_limited"
        if col in t and f"{label}:censored" in t:
            reached = ~t[f"{label}:censored"].fillna(True).astype(bool)
            runs[f"limited:{label}"] = t[col].fillna(False).astype(bool) & reached
    group_size = {int(p): int(g) for p, g in zip(t["P"], t["G"])}
    common = common_exponent_table(tables, fits) if study.common and fits is not None else pd.DataFrame()
    labels = {i: sorted(set(t.loc[t["cond"] == i, "condition"])) for i in range(len(study.conditions))}
    wanted_targets = " ".join(f"{a:g}" for a in tables.targets)

    def interval(lo, hi) -> float:
        lo, hi = float(lo), float(hi)
        return hi - lo if math.isfinite(lo) and math.isfinite(hi) else math.inf

    rows = []
    for i in range(len(study.conditions)):
        label = labels[i][0] if len(labels[i]) == 1 else ""
        mine = exps[exps["condition"].isin(labels[i])]
        if study.clock_of(i) == "failure":
            hit = mine[mine["clock"] == "failure"]
            one = len(hit) == 1
            rows.append(
                {
                    "condition": i,
                    "label": label,
                    "clock": "failure",
                    "target": math.nan,
                    "width": interval(hit["ci_low"].iloc[0], hit["ci_high"].iloc[0]) if one else math.inf,
                    "exponent": float(hit["exponent"].iloc[0]) if one else math.nan,
                    "goal": study.failure_width,
                    "targets_width": math.nan,
                }
            )
            continue
        per_target = []
        for target in tables.targets:
            clock = target_label(target)
            hit = mine[mine["clock"] == clock]
            one = len(hit) == 1
            per_target.append(
                {
                    "condition": i,
                    "label": label,
                    "clock": clock,
                    "target": float(target),
                    "width": interval(hit["ci_low"].iloc[0], hit["ci_high"].iloc[0]) if one else math.inf,
                    "exponent": float(hit["exponent"].iloc[0]) if one else math.nan,
                    "goal": study.width,
                    "targets_width": math.nan,
                }
            )
        row = common[common["condition"] == label] if label and not common.empty else common.iloc[0:0]
        p_common = float(row["p_common"].iloc[0]) if len(row) == 1 and "p_common" in row else math.nan
        # the common alpha answers for the study only where it combines every target (one left out
        # for want of an exponent leaves that target's interval unbounded, not the common one narrow)
        every = len(row) == 1 and str(row["targets"].iloc[0]) == wanted_targets
        if every and math.isfinite(p_common) and p_common >= 0.05:
            # the common-alpha test does not reject: the common alpha is the reported exponent, and its
            # interval is the one that must be narrow; the per-target widths say how far each target's
            # plan must go (plan_round scales the goal by their ratio to the common width)
            widths = [r["width"] for r in per_target if math.isfinite(r["width"])]
            rows.append(
                {
                    "condition": i,
                    "label": label,
                    "clock": "common",
                    "target": math.nan,
                    "width": interval(row["ci_low"].iloc[0], row["ci_high"].iloc[0]),
                    "exponent": float(row["exponent_common"].iloc[0]),
                    "goal": study.width,
                    "targets_width": float(np.median(widths)) if widths else math.inf,
                }
            )
        else:
            rows += per_target
    out = Measurement(pd.DataFrame(rows), runs, float(runs["responses"].sum()), group_size)
    out.labels = {i: (v[0] if len(v) == 1 else "") for i, v in labels.items()}
    out.tables, out.exps = tables, exps
    if "horizon" in t:
        for i, label in out.labels.items():
            mine = t.loc[t["cond"] == i, "horizon"]
            if label and len(mine):
                out.horizons[i] = float(mine.min())
                budget = float(np.nanmax(t.loc[t["cond"] == i, "budget"])) if "budget" in t else math.inf
                if study.clock_of(i) == "targets":
                    out.proposed_horizons[i] = proposed_horizon(study, tables, label, budget)
    return out


# ---------------------------------------------------------------------------------------- planning
@dataclass
class Launch:
    """One multirun of a round: a condition, its new seeds, the sizes that get them."""

    condition: int
    seeds: list[int]
    sizes: list[int]  # prompts per rollout

    @property
    def n_runs(self) -> int:
        return len(self.seeds) * len(self.sizes)


@dataclass
class RoundPlan:
    launches: list[Launch]
    responses: float  # planned responses (each run at the median of its ended runs, else its budget)
    notes: list[str] = field(default_factory=list)

    @property
    def n_runs(self) -> int:
        return sum(launch.n_runs for launch in self.launches)


def pilot_plan(study: Study, run_budget: float, group_size: int) -> RoundPlan:
    """The first round: ``pilot_seeds`` seeds at every size, for every condition."""
    seeds = list(range(study.pilot_seeds))
    launches = [Launch(i, seeds, list(study.sizes)) for i in range(len(study.conditions))]
    cost = sum(run_responses(p * group_size, run_budget) for p in study.sizes) * len(seeds)
    return RoundPlan(launches, cost * len(study.conditions))


def group_launches(
    additions: dict[tuple[int, int], int], used: dict[tuple[int, int], set[int]]
) -> list[Launch]:
    """Runs to add per (condition, P) as multiruns: each (condition, P) takes the next unused seeds.
    Sizes of a condition whose new seeds start at the same number share multiruns in layers: with 10
    new runs at P = 4 and 11 at P = 32, seeds 2..11 at both sizes, then seed 12 at P = 32."""
    by_start: dict[tuple[int, int], dict[int, int]] = {}
    for (cond, p), k in sorted(additions.items()):
        if k <= 0:
            continue
        have = used.get((cond, p), set())
        start = max(have) + 1 if have else 0
        by_start.setdefault((cond, start), {})[p] = k
    out = []
    for (cond, start), counts in sorted(by_start.items()):
        done = 0
        for level in sorted(set(counts.values())):
            sizes = sorted(p for p, k in counts.items() if k >= level)
            out.append(Launch(cond, list(range(start + done, start + level)), sizes))
            done = level
    return out


def kept_sizes(study: Study, m: Measurement, cond: int, clock: str, notes: list[str]) -> list[int]:
    """The sizes that may get more runs for one condition and target: a size the fit leaves out as
    *early* (most crossings within the first rollouts, all but one such size:
    ``analysis.report.early_sizes``), and a size where every run crossed the target within a
    resolution-limited bracket (the first evaluation, or a spacing or B above 1/4 of the crossing:
    ``analysis.clocks``), is dropped, as long as two sizes remain; more seeds there add runs that no
    reported exponent uses, or whose crossing is known only to that bracket."""
    col = f"limited:{clock}"
    early: set[float] = set()
    if m.exps is not None and len(m.exps) and "sizes_early" in m.exps and m.labels.get(cond):
        row = m.exps[(m.exps["condition"] == m.labels[cond]) & (m.exps["clock"] == clock)]
        if len(row):
            early = {float(b) for b in str(row["sizes_early"].iloc[0]).split() if b != "nan"}
    limited = []
    for p in study.sizes:
        at = m.runs[(m.runs["cond"] == cond) & (m.runs["P"] == p)]
        if len(at) and (set(at["B"].astype(float)) & early or (col in m.runs and at[col].astype(bool).all())):
            limited.append(p)
    if len(study.sizes) - len(limited) < 2:
        return list(study.sizes)
    for p in limited:
        notes.append(f"condition {cond} {clock}: P={p} dropped: its crossings are resolution-limited")
    return [p for p in study.sizes if p not in limited]


def plan_round(
    study: Study,
    m: Measurement,
    pilots: list,
    run_budget: float,
    remaining: float,
    remaining_seconds: float = math.inf,
    parallel: float = 1.0,
    horizons: dict[int, float] | None = None,
) -> RoundPlan:
    """The next round (module docstring). ``pilots``: :class:`rlvr_study.plan.PilotCondition` list of
    the folder (with the analysis' condition labels), ``run_budget``: ``train.max_responses``,
    ``remaining``: responses left in the study's budget, ``remaining_seconds``: wall seconds left
    (``budget.hours``), ``parallel``: runs that run at once (the round's wall time is the sum of its
    runs' expected wall times over ``parallel``), ``horizons``: condition -> the horizon the study
    fixed (a new run of that condition trains to it, and costs that much)."""
    horizons = horizons or {}
    notes: list[str] = []
    open_rows = m.widths[m.widths["width"] > m.widths["goal"]]
    used: dict[tuple[int, int], set[int]] = {}
    for r in m.runs.itertuples():
        if r.cond is not None and not pd.isna(r.cond):
            used.setdefault((int(r.cond), int(r.P)), set()).add(int(r.seed))
    g_of = m.group_size
    default_g = next(iter(g_of.values())) if g_of else 1

    def b_of(p: int) -> float:
        return float(p * g_of.get(p, default_g))

    def full(cond: int, p: int) -> float:
        return run_responses(b_of(p), min(run_budget, horizons.get(cond, math.inf)))

    # a run's expected cost: the median responses of the ended runs of its condition and size (runs
    # that fail cost less than the budget), the full budget (its horizon) where none ended
    ended = m.runs[m.runs["state"].isin(["completed", "failed"])] if "state" in m.runs else m.runs.iloc[0:0]
    spent_at = ended.groupby(["cond", "P"])["responses"].median().to_dict() if len(ended) else {}

    def cost_of(cond: int, p: int) -> float:
        seen = spent_at.get((cond, p))
        return min(full(cond, p), float(seen)) if seen is not None and seen > 0 else full(cond, p)

    # a run's expected wall time: the median of the ended runs of its condition and size; elsewhere its
    # responses at the seconds per response of every ended run (evaluations and start-up included)
    walls = ended["wall_seconds"] if "wall_seconds" in ended else pd.Series(dtype=float)
    wall_at = walls.groupby([ended["cond"], ended["P"]]).median().to_dict() if walls.notna().any() else {}
    ok = walls.notna() & (ended["responses"] > 0) if len(ended) else pd.Series(dtype=bool)
    per_response = float(walls[ok].sum() / ended["responses"][ok].sum()) if ok.any() else 0.0

    def seconds_of(cond: int, p: int) -> float:
        seen = wall_at.get((cond, p))
        if seen is None or not math.isfinite(seen):
            return cost_of(cond, p) * per_response
        # runs that ended at the budget ran longer than a run to the horizon will
        budget_then = spent_at.get((cond, p))
        scale = cost_of(cond, p) / budget_then if budget_then else 1.0
        return float(seen) * min(scale, 1.0)

    spent_seconds = 0.0

    # per condition: runs wanted per P (max over its open targets) and the truths to score them with
    wanted: dict[tuple[int, int], int] = {}
    scoring: dict[int, list[tuple]] = {}

    def plan_target(cond: int, clock: str, truth, goal: float, ratio: float) -> None:
        """The planner's runs per kept size for one target's interval to reach ``goal``."""
        sizes = kept_sizes(study, m, cond, clock, notes)
        design = plan_design(
            [b_of(p) for p in sizes],
            [truth],
            goal,
            min_seeds=study.pilot_seeds,
            max_runs=400,
            assurance=study.assurance,
        )
        notes.extend(f"condition {cond} {clock}: {d}" for d in design.dropped)
        for b, n in zip(design.sizes, design.seeds):
            p = next(p for p in study.sizes if b_of(p) == b)
            wanted[(cond, p)] = max(wanted.get((cond, p), 0), int(n))
        scoring.setdefault(cond, []).append((truth, ratio))

    def grown(n: int, ratio: float) -> int:
        """Runs after scaling ``n`` by (width / goal)^2 = ``ratio``^2, at most doubling them (an
        unbounded interval doubles them)."""
        factor = min(ratio**2, 4.0) if math.isfinite(ratio) else 4.0
        return min(math.ceil(n * factor), 2 * max(n, 1))

    fixed: dict[int, float] = {}  # conditions planned without the planner (failure clock): width / goal
    for cond in sorted(set(open_rows["condition"])):
        rows = open_rows[open_rows["condition"] == cond]
        for r in rows.itertuples():
            if r.clock == "failure":
                # gamma's interval narrows as 1 / sqrt(runs) (the onsets' scatter does not depend on
                # the design the way evaluation brackets do): (width / goal)^2 times the runs at every
                # size, at most doubling them in one round; an unbounded interval doubles them
                factor = (r.width / r.goal) ** 2 if math.isfinite(r.width) else 4.0
                for p in study.sizes:
                    n = len(used.get((cond, p), ()))
                    wanted[(cond, p)] = max(wanted.get((cond, p), 0), grown(n, r.width / r.goal))
                fixed[cond] = r.width / r.goal if math.isfinite(r.width) else math.inf
                notes.append(
                    f"condition {cond} failure: width {r.width:.3f} > {r.goal:g}: runs scaled by "
                    f"{min(factor, 4.0):.2f} (at most doubled)"
                )
                continue
            if r.clock == "common":
                # plan every target of the condition so that the common interval meets the goal: each
                # target's goal is the common goal times the current ratio of the targets' (median)
                # width to the common width
                scale = r.targets_width / r.width if math.isfinite(r.targets_width) and r.width > 0 else 1.0
                for q in pilots:
                    if q.condition == r.label:
                        plan_target(cond, q.target, q.truth, r.goal * scale, r.width / r.goal)
                continue
            pilot = next((q for q in pilots if q.condition == r.label and q.target == r.clock), None)
            if pilot is None:
                notes.append(f"condition {cond} {r.clock}: no exponent yet, one more seed at every size")
                for p in study.sizes:
                    wanted[(cond, p)] = max(wanted.get((cond, p), 0), len(used.get((cond, p), ())) + 1)
                continue
            plan_target(cond, r.clock, pilot.truth, r.goal, r.width / r.goal)
    for cond in sorted(set(open_rows["condition"])):
        # the plan comes from the pilot's point estimates: where it says the runs present already meet a
        # width the measured interval does not, add runs anyway at the condition's extreme sizes (the
        # slope's lever arm), scaled by (width / goal)^2 and at most doubled, rather than stop unmet
        sizes = [p for p in study.sizes if (cond, p) in wanted] or list(study.sizes)
        if any(wanted[(cond, p)] > len(used.get((cond, p), ())) for p in sizes if (cond, p) in wanted):
            continue
        rows = open_rows[open_rows["condition"] == cond]
        ratio = float((rows["width"] / rows["goal"]).max())
        factor = min(ratio**2, 4.0) if math.isfinite(ratio) else 4.0
        for p in {sizes[0], sizes[-1]}:
            n = len(used.get((cond, p), ()))
            wanted[(cond, p)] = max(n + 1, grown(n, ratio))
        notes.append(
            f"condition {cond}: the plan from the pilot's estimates is met but the measured width is not: "
            f"runs at P={sizes[0]} and P={sizes[-1]} scaled by {factor:.2f} (at most doubled)"
        )
    deficit = {k: n - len(used.get(k, ())) for k, n in wanted.items() if n > len(used.get(k, ()))}
    counts = {k: len(v) for k, v in used.items()}
    added: dict[tuple[int, int], int] = {}
    spent = 0.0
    cap = study.max_runs_per_round or 10**9

    def gain(key: tuple[int, int]) -> float:
        cond, p = key
        if cond not in scoring:
            return 1.0 / cost_of(cond, p)  # no exponent yet, or the failure clock: the cheapest sizes first
        truth, _ = max(scoring[cond], key=lambda x: x[1])  # the condition's widest interval
        sizes = [b_of(q) for q in study.sizes]
        now = [counts.get((cond, q), 0) + added.get((cond, q), 0) for q in study.sizes]
        after = list(now)
        after[study.sizes.index(p)] += 1
        before_w = design_width(sizes, now, truth, study.assurance)
        return (before_w - design_width(sizes, after, truth, study.assurance)) / cost_of(cond, p) + 1e-12

    while deficit and sum(added.values()) < cap:
        affordable = [
            k
            for k in deficit
            if spent + cost_of(*k) <= remaining
            and spent_seconds + seconds_of(*k) / parallel <= remaining_seconds
        ]
        if not affordable:
            by_responses = any(spent + cost_of(*k) <= remaining for k in deficit)
            left = "hours left (at the runs' measured wall times)" if by_responses else "responses left"
            notes.append(f"budget: the rest of the planned runs do not fit in the {left}")
            break
        # the widest condition's runs first, then the most narrowing per response
        ratio = {c: max(w for _, w in v) for c, v in scoring.items()}
        for c, w in fixed.items():
            ratio[c] = max(ratio.get(c, 0.0), w)
        key = max(affordable, key=lambda k: (ratio.get(k[0], math.inf), gain(k)))
        added[key] = added.get(key, 0) + 1
        spent += cost_of(*key)
        spent_seconds += seconds_of(*key) / parallel
        deficit[key] -= 1
        if deficit[key] == 0:
            del deficit[key]
    return RoundPlan(group_launches(added, used), spent, notes)


def format_widths(study: Study, m: Measurement) -> str:
    """One line per condition and target: width against the goal."""
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
        lines.append(
            f"  {name:<44} {what:>12} {a:>8} {w:>8} {r.goal:>6g}  {'met' if r.width <= r.goal else 'open'}"
        )
    return "\n".join(lines)
