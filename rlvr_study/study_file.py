"""The study file of ``rlvr-study`` (docs/study.md, "Adaptive rounds"): its keys, their validation (a
wrong key fails before any compute, with a message naming it) and the :class:`Study` it describes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

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
    "horizon_per_size",
    "extend_pilot",
    "assurance",
    "gain_targets",
    "balanced",
    "first_seed",
    "stop_rule",
    "budget_triage",
}
# Keys of a condition mapping that direct the study instead of overriding the config: ``clock``
# (``targets``, the default, or ``failure``: the condition's requested interval is gamma's) and
# ``horizon`` (a targets condition's horizon fixed in the study file instead of after the pilot:
# responses, or {P: responses} for every size; every targets condition sets one or none does).
CONDITION_DIRECTIVES = {"clock", "horizon"}
# Keys a study sets itself on every launch: a condition or an override may not set them.
# A study never reads a run stopped at its targets (a run's length would move its crossings) and fixes
# each condition's horizon itself (eval.horizon, after the pilot), with where each run stops.
RESERVED = {
    "seed",
    "rollout.prompts_per_rollout",
    "run.sweep",
    "hydra.sweep.dir",
    "sweeps",
    "train.stop_at_targets",
    "train.stop_at_responses",
    "train.stop_at_accuracy",
    "eval.horizon",
}


class StudyError(ValueError):
    """A study that cannot go on: a wrong study file (the message names the key), a wrong override or
    condition, a state file it cannot resume, a round whose ``rlvr-train`` failed. ``rlvr-study`` prints
    the message and exits with status 2."""


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
    crossing: str = "interval"  # a bracketing rule of analysis.data.crossings: interval, isotonic, ...
    failure_width: float = 0.6  # the requested width of gamma's interval (conditions with clock: failure)
    # each targets condition's horizon, fixed after the pilot: this many times the slowest pilot crossing
    # of the top target at the reference size (capped at the run budget; docs/study.md)
    horizon_factor: float = 4.0
    # true: one horizon per (targets condition, size) instead, from the pilot runs at that size
    # (rlvr_study.measure.proposed_size_horizons; docs/study.md)
    horizon_per_size: bool = False
    # true: the pilot's first-round runs of targets conditions stop once an evaluation reaches the top
    # target (train.stop_at_accuracy), and once the horizons are fixed they are extended to them (each
    # goes on from its checkpoint: the run a launch to that horizon would have been); they cost what
    # the horizon needs instead of the run budget (docs/study.md, "The pilot's first seeds")
    extend_pilot: bool = False
    # the planner plans for the width to be met with this probability (0.5: the median width)
    assurance: float = 0.8
    # the study's analysis also fits α at these fractions of each condition's achievable gain,
    # R0 + f (A - R0) (rlvr-analyze --gain-targets; A beside α in the report); [] for none
    gain_targets: tuple[float, ...] = (0.5, 0.75)
    # true (the default): a round adds whole seeds at every size the fit uses (the design's largest count
    # everywhere) instead of collecting them at the extreme sizes, so seeds stay complete blocks and the
    # plan and the fit have one estimand (docs/study.md, "Calibration on real runs")
    balanced: bool = True
    # the pilot's seeds are first_seed, first_seed + 1, ...; later rounds take the next unused ones (a
    # replicate of a study with independent seeds sets another first_seed)
    first_seed: int = 0
    # sequential: the rounds add seeds until every requested width is met (the stopped interval is
    # selected for its width); two_stage: each condition's seeds are fixed from the pilot's widths and
    # its interval is reported there, met or not (rlvr_study.two_stage; docs/study.md)
    stop_rule: str = "sequential"
    # true: a condition whose goal the budget left cannot buy (the seeds its widths want, or its plan, at
    # its runs' measured wall times) is not chased, and the rounds spend elsewhere (rlvr_study.afford)
    budget_triage: bool = False

    def condition_overrides(self, i: int) -> list[str]:
        return [
            f"{k}={_hydra_value(v)}" for k, v in self.conditions[i].items() if k not in CONDITION_DIRECTIVES
        ]

    def condition_keys(self, i: int) -> dict:
        return {k: v for k, v in self.conditions[i].items() if k not in CONDITION_DIRECTIVES}

    def clock_of(self, i: int) -> str:
        return str(self.conditions[i].get("clock", "targets"))

    def preset_horizons(self) -> Horizons:
        """The horizons the study file fixes (conditions' ``horizon``), {} where it fixes none: then the
        study fixes them after the pilot."""
        out: Horizons = {}
        for i, c in enumerate(self.conditions):
            h = c.get("horizon")
            if h is not None:
                out[i] = {int(p): float(v) for p, v in h.items()} if isinstance(h, dict) else float(h)
        return out


#: The horizons a study fixed after its pilot: condition index -> responses, or, for a study with
#: ``horizon_per_size``, condition index -> {P (prompts per rollout): responses}.
Horizons = dict[int, "float | dict[int, float]"]


def horizon_at(horizons: Horizons | None, condition: int, p: int) -> float:
    """The horizon a run of ``condition`` at ``p`` prompts per rollout trains to (infinite where the
    study fixed none: the run budget)."""
    h = (horizons or {}).get(condition)
    if isinstance(h, dict):
        h = h.get(p)
    return float(h) if h is not None else math.inf


def _hydra_value(v) -> str:
    if isinstance(v, list):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def _positive(raw: dict, key: str, kind=float):
    value = raw[key]
    # NaN compares false with everything and inf is no limit (a budget says that with null)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise StudyError(f"{key}: must be a positive, finite number, got {value!r}")
    if kind is int and int(value) != value:
        raise StudyError(f"{key}: must be an integer, got {value!r}")
    return kind(value)


def _flag(raw: dict, key: str) -> bool:
    if not isinstance(raw[key], bool):
        raise StudyError(f"{key}: true or false, got {raw[key]!r}")
    return raw[key]


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
    for key in ("horizon_per_size", "extend_pilot", "balanced", "common", "budget_triage"):
        if key in raw:
            setattr(study, key, _flag(raw, key))
    if "assurance" in raw:
        value = raw["assurance"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= value < 1:
            raise StudyError(f"assurance: a probability in [0.5, 1), got {value!r}")
        study.assurance = float(value)
    if "first_seed" in raw:
        value = raw["first_seed"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise StudyError(f"first_seed: a non-negative integer, got {value!r}")
        study.first_seed = value
    if "stop_rule" in raw:
        if raw["stop_rule"] not in ("sequential", "two_stage"):
            raise StudyError(f"stop_rule: sequential or two_stage, got {raw['stop_rule']!r}")
        study.stop_rule = raw["stop_rule"]
    if "gain_targets" in raw:
        value = raw["gain_targets"] if raw["gain_targets"] is not None else []
        if not isinstance(value, list) or not all(
            isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f < 1 for f in value
        ):
            raise StudyError(f"gain_targets: a list of fractions in (0, 1), got {raw['gain_targets']!r}")
        study.gain_targets = tuple(float(f) for f in value)
    if "crossing" in raw:
        from analysis.data.crossings import crossing_names

        names = crossing_names(brackets_only=True)  # the study plans on interval-censored crossings
        if raw["crossing"] not in names:
            raise StudyError(
                f"crossing: one of the bracketing rules {', '.join(names)}, got {raw['crossing']!r}"
            )
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
        _check_preset_horizons(conds, study.sizes)
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


def _check_preset_horizons(conds: list[dict], sizes: list[int]) -> None:
    """Conditions' ``horizon``: responses, or a mapping of every size (P) to responses, on targets
    conditions only, and on every one of them or none."""
    targets = [c for c in conds if str(c.get("clock", "targets")) == "targets"]
    for c in conds:
        if "horizon" not in c:
            continue
        h = c["horizon"]
        if c not in targets:
            raise StudyError(
                "conditions: horizon is for targets conditions (a failure clock reads whole runs)"
            )
        values = list(h.values()) if isinstance(h, dict) else [h]
        if isinstance(h, dict) and set(h) != set(sizes):
            raise StudyError(
                f"conditions: horizon: one per size {sorted(sizes)} (P: responses), got keys {list(h)}"
            )
        if not values or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values
        ):
            raise StudyError(f"conditions: horizon: positive responses, or {{P: responses}}, got {h!r}")
    if 0 < sum("horizon" in c for c in targets) < len(targets):
        raise StudyError("conditions: horizon: set on every targets condition or on none")


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


def override(study: Study, *, max_rounds: int | None = None, budget_hours: float | None = None) -> Study:
    """The command line's ``--max-rounds`` and ``--budget-hours`` over the study file's values."""
    if max_rounds is not None:
        study.max_rounds = max_rounds
    if budget_hours is not None:
        if not (math.isfinite(budget_hours) and budget_hours > 0):
            raise StudyError(f"--budget-hours: a positive number of hours, got {budget_hours:g}")
        study.budget_hours = budget_hours
    return study
