"""``rlvr-study STUDY.yaml``: a study in adaptive rounds, until every requested width is met.

Round 0 (the pilot) runs ``pilot_seeds`` seeds at every size of every condition (with ``budget.hours``,
its first 2: the others follow as whole seeds in the next rounds while the hours allow). After each round the
folder is fitted (:mod:`rlvr_study.measure`: the widths of the requested 95 % intervals of α), the next
round is planned within what the budget leaves it (:mod:`rlvr_study.rounds`: the planner's runs to add,
:func:`rlvr_study.rounds.round_budget`), and launched. A round is one ``rlvr-train -m`` command,
whatever its conditions, seeds and sizes: its runs are listed in ``<folder>/study_round_<k>.yaml`` (one
override list per run) and launched by the ``rlvr_list`` sweeper (``hydra_plugins/rlvr_list_sweeper``)
in one launcher call, through the launcher the study file names: one joblib batch locally (the
default), one job array with ``slurm=<preset>``. Each run gets the directory a cartesian
``rlvr-train -m`` of the same overrides would give it. The study stops
(:class:`rlvr_study.rounds.StopReason`) when every width is at most the goal, the budget (responses,
hours) is spent, or ``max_rounds`` rounds have run, prints every condition's status with its reason
(met, open, moved to gain targets, not identifiable within its horizon: :mod:`rlvr_study.triage`, which
also decides which intervals the rounds chase; not attainable within the budget: :mod:`rlvr_study.afford`),
and writes the report with ``rlvr-analyze`` into
``<folder>/analysis``.

State: ``<folder>/study_state.json`` records each round's command and job list before it launches, and
when it ended. Re-running the command resumes: an unfinished round is launched again with the same
command and jobs (the trainer skips ended runs and resumes the others from their checkpoints), ended
rounds are not. A state file from before rounds were one command with a job list is refused with a
message (its runs were named without the settings every run of a study now carries).

Whatever stops the study short of its end (a wrong study file, key or override, a state file of another
study, a round whose ``rlvr-train`` failed) is a :class:`rlvr_study.study_file.StudyError`; :func:`main`
prints its message after ``rlvr-study:`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlvr_study import afford, two_stage
from rlvr_study.measure import Measurement, analysis_horizons, format_widths, measure, plateau_lines
from rlvr_study.plan import pilots_from_fits
from rlvr_study.rounds import (
    Launch,
    RoundPlan,
    StopReason,
    cost_model,
    first_round_seeds,
    pilot_complete,
    pilot_plan,
    plan_round,
    round_budget,
    runs_held,
    stop_before_round,
)
from rlvr_study.study_file import Horizons, Study, StudyError, horizon_at, load_study, override
from rlvr_study.triage import Triage, status_lines, triage

STATE = "study_state.json"


def _state_path(study) -> Path:
    return Path(study.folder) / STATE


def load_state(study: Study) -> dict:
    """The study's state (a new one where the folder has none); :class:`StudyError` where the file
    belongs to another study or was written before a round was one command with a job list."""
    path = _state_path(study)
    if not path.is_file():
        return {"name": study.name, "rounds": [], "finished": None}
    state = json.loads(path.read_text())
    if state.get("name") != study.name:
        raise StudyError(f"{path} belongs to study {state.get('name')!r}, not {study.name!r}")
    for entry in state["rounds"]:
        if "jobs" not in entry or len(entry["commands"]) != 1:
            raise StudyError(
                f"{path}: round {entry['round']} was written by an earlier rlvr-study (one rlvr-train "
                "command per multirun, no job list); finish the study with that version or start it in a new folder"
            )
    return state


def save_state(study, state: dict) -> None:
    path = _state_path(study)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(path)


def base_overrides(study, condition: int | None = None) -> list[str]:
    """The overrides every run of the study shares (sweep file, ``overrides``), then a condition's."""
    return [
        *([f"sweeps={study.sweep}"] if study.sweep else []),
        *study.overrides,
        *(study.condition_overrides(condition) if condition is not None else []),
    ]


def round_jobs(
    study,
    launches,
    horizons: Horizons | None = None,
    run_budget: float = math.inf,
    stop_at_top_target: bool = False,
) -> list[list[str]]:
    """A round's jobs, one override list per run: its condition's overrides, seed and size; never
    stopped at its targets; where the study fixed the condition's horizon (one, or one per size), read
    to its size's (``eval.horizon``) and, when it is below the run budget, stopped there
    (``train.stop_at_responses``). ``stop_at_top_target`` (the first pilot seeds of a study with
    ``extend_pilot``): the runs of targets conditions stop once an evaluation reaches the top target
    (``train.stop_at_accuracy``), to be extended once the horizons are fixed. None of these keys names
    a run directory or changes how a run trains (conf/config.yaml), so a run stopped early and extended
    later is the run launched to the later stop."""

    def horizon(cond: int, p: int) -> list[str]:
        h = horizon_at(horizons, cond, p)
        if not math.isfinite(h):
            return []
        return [f"eval.horizon={int(h)}", *([f"train.stop_at_responses={int(h)}"] if h < run_budget else [])]

    def early(cond: int) -> list[str]:
        if not (stop_at_top_target and study.targets and study.clock_of(cond) != "failure"):
            return []
        return [f"train.stop_at_accuracy={max(study.targets):g}"]

    return [
        [
            *study.condition_overrides(x.condition),
            "train.stop_at_targets=false",
            *early(x.condition),
            *horizon(x.condition, p),
            f"seed={s}",
            f"rollout.prompts_per_rollout={p}",
        ]
        for x in launches
        for s in x.seeds
        for p in x.sizes
    ]


def study_horizons(state: dict, study: Study | None = None) -> Horizons:
    """The horizons the study fixed after its pilot: condition index -> responses, or, with
    ``horizon_per_size``, condition index -> {P: responses} (the state's JSON keys P as strings); before
    they are fixed, those the study file fixes (conditions' ``horizon``), if ``study`` is given."""
    if "horizons" not in state and study is not None:
        return study.preset_horizons()
    out: Horizons = {}
    for k, v in (state.get("horizons") or {}).items():
        out[int(k)] = {int(p): float(h) for p, h in v.items()} if isinstance(v, dict) else float(v)
    return out


HORIZONS = "horizons.json"


def _finite(h):
    """A proposed horizon without its infinite parts (None where nothing finite is left)."""
    if isinstance(h, dict):
        h = {p: v for p, v in h.items() if math.isfinite(v)}
        return h or None
    return h if math.isfinite(h) else None


def fix_horizons(study, state: dict, m) -> Horizons:
    """After the pilot: fix each targets condition's horizon from its pilot runs (``horizon_factor``
    times the slowest crossing of the top target at the reference size:
    :func:`rlvr_study.measure.proposed_horizon`; with ``horizon_per_size``, one per size from the
    crossings at that size: :func:`rlvr_study.measure.proposed_size_horizons`), record it in the state
    (a per-size one keyed by P), and write ``<folder>/horizons.json`` (condition label -> responses, a
    per-size one as {B: responses}) for ``rlvr-analyze --horizon``. Done once: later runs cannot move it."""
    if "horizons" in state:
        return study_horizons(state)
    preset = study.preset_horizons()
    if preset:
        print("  the horizons the study file fixes:")
    proposed = preset or m.proposed_horizons
    fixed = {i: _finite(h) for i, h in proposed.items() if _finite(h) is not None}
    state["horizons"] = {
        str(i): ({str(p): v for p, v in h.items()} if isinstance(h, dict) else h) for i, h in fixed.items()
    }
    labels = analysis_horizons(fixed, m.labels, m.group_size)
    path = Path(study.folder) / HORIZONS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: _json_keys(h) for k, h in labels.items()}, indent=1, sort_keys=True))
    for i, h in sorted(fixed.items()):
        if isinstance(h, dict):
            g = next(iter(m.group_size.values()), 1)
            sizes = ", ".join(f"B={p * m.group_size.get(p, g)} {v:g}" for p, v in sorted(h.items()))
            print(
                f"  condition {i}: horizons {sizes} responses (read up to each; later runs train to their size's)"
            )
        else:
            print(
                f"  condition {i}: horizon {h:g} responses (crossings read up to it; later runs train to it)"
            )
    return fixed


def _json_keys(h):
    """A per-size horizon with its sizes as JSON keys (``{"256": responses}``); a number as it is."""
    return {f"{b:g}": v for b, v in h.items()} if isinstance(h, dict) else h


def jobs_file(study, round_index: int) -> Path:
    """Where a round's job list lives: the study folder, next to ``study_state.json``."""
    return Path(study.folder).resolve() / f"study_round_{round_index}.yaml"


def write_jobs(path: Path, jobs: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(jobs, default_flow_style=None, width=10**6, sort_keys=False))
    tmp.replace(path)


def launch_command(study, jobs_path: Path) -> list[str]:
    """The one ``rlvr-train -m`` command of a round: the shared overrides and the launcher on the
    command line, the runs in the job list that ``hydra/sweeper=rlvr_list`` reads
    (``hydra_plugins/rlvr_list_sweeper``: one launcher call, one job array on SLURM)."""
    return [
        "-m",
        *base_overrides(study),
        *study.launcher,
        f"run.sweep={study.name}",
        "hydra/sweeper=rlvr_list",
        f"hydra.sweeper.jobs={jobs_path}",
        f"hydra.sweep.dir={Path(study.folder).resolve()}",
    ]


def check_config(study) -> tuple[float, int]:
    """Compose and validate the first and last job of every condition before any compute; returns the
    run budget (``train.max_responses``) and the group size G."""
    from omegaconf import OmegaConf

    from rlvr_scaling.compose import REPO_ROOT, compose
    from rlvr_scaling.config import validate
    from rlvr_scaling.errors import ConfigError

    budgets, groups = set(), set()
    if study.sweep and not (REPO_ROOT / "sweeps" / f"{study.sweep}.yaml").is_file():
        raise StudyError(f"sweep: no sweeps/{study.sweep}.yaml")
    for i in range(len(study.conditions)):
        for p in (study.sizes[0], study.sizes[-1]):
            overrides = [
                *base_overrides(study, i),
                *study.launcher,
                "hydra/sweeper=rlvr_list",
                "seed=0",
                f"rollout.prompts_per_rollout={p}",
            ]
            try:
                cfg = compose(overrides, hydra=True)
            except Exception as err:  # Hydra's composition errors name the override
                raise StudyError(f"condition {i}: {err}") from err
            params = cfg.hydra.sweeper.params or {}
            fixed = {"seed", "rollout.prompts_per_rollout", *study.conditions[i]}
            extra = sorted(k for k, v in params.items() if "," in str(v) and k not in fixed)
            if extra:
                raise StudyError(
                    f"conditions: sweeps/{study.sweep}.yaml sweeps {extra[0]}; give its values as conditions"
                )
            OmegaConf.set_struct(cfg, False)
            del cfg["hydra"]
            typed = OmegaConf.to_object(cfg)
            try:
                validate(typed)
            except ConfigError as err:
                raise StudyError(str(err)) from err
            budgets.add(float(typed.train.max_responses))
            groups.add(int(typed.rollout.group_size))
    if len(budgets) != 1 or len(groups) != 1:
        raise StudyError("conditions: train.max_responses and rollout.group_size must be the same in all")
    return budgets.pop(), groups.pop()


def _run_round(entry: dict) -> None:
    """Run a round's one ``rlvr-train -m`` command, its job list written again as launched (the file may
    have been removed since)."""
    path = Path(entry["jobs_file"])
    if not path.is_file() or yaml.safe_load(path.read_text()) != entry["jobs"]:
        write_jobs(path, entry["jobs"])
    (argv,) = entry["commands"]
    print("  rlvr-train " + " ".join(argv), flush=True)
    proc = subprocess.run([sys.executable, "-m", "rlvr_scaling.cli.train", *argv], env=os.environ.copy())
    if proc.returncode != 0:
        raise StudyError(f"round {entry['round']}: rlvr-train exited {proc.returncode}")


def _hours(state: dict) -> float:
    return sum(r.get("seconds", 0.0) for r in state["rounds"]) / 3600


def parallel_runs(state: dict, m) -> float:
    """Runs the launcher ran at once, measured: the summed wall time of the folder's runs over the
    seconds of the rounds that ran them (at least 1)."""
    seconds = sum(r.get("seconds", 0.0) for r in state["rounds"])
    walls = m.runs["wall_seconds"].sum() if "wall_seconds" in m.runs else 0.0
    return max(1.0, float(walls) / seconds) if seconds > 0 and walls > 0 else 1.0


# a replicate's seeds start this many seeds per replicate after the study's own (no study runs as many)
REPLICATE_SEEDS = 1000


def replicate(study, n: int):
    """Replicate ``n`` of ``study``: the same design and rounds on seeds no other replicate uses, in the
    folder ``<folder>-r<n>`` (run twice, a study shows whether its verdict holds on fresh seeds)."""
    folder = Path(study.folder)
    return dataclasses.replace(
        study,
        first_seed=study.first_seed + REPLICATE_SEEDS * n,
        folder=folder.with_name(f"{folder.name}-r{n}"),
    )


def _analyze(study) -> int:
    from analysis.cli import main as analyze

    args = [
        str(study.folder),
        "--out",
        str(Path(study.folder) / "analysis"),
        "--bootstrap",
        str(study.bootstrap),
    ]
    if study.targets:
        args += ["--targets", *[f"{t:g}" for t in study.targets]]
    if study.crossing != "interval":
        args += ["--crossing", study.crossing]
    if (Path(study.folder) / HORIZONS).is_file():
        args += ["--horizon", str(Path(study.folder) / HORIZONS)]
    if study.gain_targets:
        args += ["--gain-targets", *[f"{f:g}" for f in study.gain_targets]]
    print("rlvr-analyze " + " ".join(args), flush=True)
    return analyze([*args, "--quiet"])


def _launch(study, state: dict, plan, kind: str, dry_run: bool, run_budget: float = math.inf) -> None:
    index = len(state["rounds"])
    path = jobs_file(study, index)
    early = kind == "pilot" and study.extend_pilot and not study.preset_horizons()
    jobs = round_jobs(
        study, plan.launches, study_horizons(state, study), run_budget, stop_at_top_target=early
    )
    entry = {
        "round": index,
        "kind": kind,
        "launches": [{"condition": x.condition, "seeds": x.seeds, "sizes": x.sizes} for x in plan.launches],
        "jobs_file": str(path),
        "jobs": jobs,
        "commands": [launch_command(study, path)],
        "runs": plan.n_runs,
        "planned_responses": plan.responses,
        "started": time.time(),
        "ended": None,
    }
    print(
        f"round {entry['round']} ({kind}): launching {plan.n_runs} runs, at most {plan.responses:g} responses"
    )
    for x in plan.launches:
        print(f"  condition {x.condition}: seeds {x.seeds} at prompts_per_rollout {x.sizes}")
    if dry_run:
        for argv in entry["commands"]:
            print("  rlvr-train " + " ".join(argv))
        print(f"  {path.name} (not written in a dry run):")
        for job in jobs:
            print("    " + " ".join(job))
        return
    write_jobs(path, jobs)
    state["rounds"].append(entry)
    save_state(study, state)
    _finish_round(study, state, entry)


def _finish_round(study, state: dict, entry: dict) -> None:
    t0 = time.time()
    _run_round(entry)
    entry["seconds"] = entry.get("seconds", 0.0) + time.time() - t0
    entry["ended"] = time.time()
    save_state(study, state)


def _rounds_done(state: dict) -> int:
    """Rounds that count towards ``max_rounds``: the pilot and the adaptive ones (not an extension)."""
    return sum(1 for r in state["rounds"] if r.get("kind") != "extend")


def _extension(study: Study, state: dict) -> RoundPlan | None:
    """With ``extend_pilot``, once the horizons are fixed: the pilot round's runs of targets conditions
    again, now to their horizons (each run that stopped at the top target before its horizon goes on
    from its checkpoint; the others are skipped), once. None when there is nothing to extend."""
    if not study.extend_pilot or state.get("extended") or "horizons" not in state or study.preset_horizons():
        return None  # with horizons fixed in the study file, the pilot ran to them
    pilot = next((r for r in state["rounds"] if r.get("kind") == "pilot"), None)
    if pilot is None:
        return None
    launches = [
        Launch(x["condition"], list(x["seeds"]), list(x["sizes"]))
        for x in pilot["launches"]
        if study.clock_of(x["condition"]) != "failure"
    ]
    return RoundPlan(launches, 0.0) if launches else None


def _record_widths(study: Study, state: dict, m: Measurement, done: set[int]) -> None:
    """Print and record (in the last round's entry) what the folder measures after it (``done``: the
    conditions not identifiable within their horizon)."""
    print(
        f"after round {len(state['rounds']) - 1}: {len(m.runs)} runs, {m.responses:g} responses spent"
        f" of {study.budget_responses:g}, {_hours(state):.2f} h of {study.budget_hours:g}"
    )
    print(format_widths(study, m, done))
    for line in plateau_lines(study, m):
        print(line)
    state["rounds"][-1]["widths"] = m.widths.replace([math.inf], None).to_dict("records")
    state["rounds"][-1]["responses_spent"] = m.responses
    save_state(study, state)


def _pilot(study: Study, run_budget: float, group: int) -> RoundPlan:
    plan = pilot_plan(study, run_budget, group)
    if plan.responses > study.budget_responses:
        raise StudyError(
            f"budget.responses: the pilot alone needs {plan.responses:g} responses ({plan.n_runs} runs of "
            f"up to {run_budget:g}); raise it or lower pilot_seeds, sizes or train.max_responses"
        )
    first = first_round_seeds(study)
    if first < study.pilot_seeds:
        print(
            f"the pilot's first {first} seeds now; its other {study.pilot_seeds - first} follow as whole "
            "seeds while budget.hours allows"
        )
    return pilot_plan(study, run_budget, group, first)


def _stop(
    study: Study, m: Measurement, chased: Triage, rounds_done: int, budget, plan: dict | None = None
) -> StopReason | None:
    """:func:`rlvr_study.rounds.stop_before_round` on the intervals the study chases
    (:func:`rlvr_study.triage.triage`): met, or not identifiable within the horizon, is the end. Under a
    two-stage plan (``plan``: condition -> seeds) a met width ends nothing: every condition holding its
    planned seeds (or not identifiable) is the end."""
    if plan is not None:
        if two_stage.complete(study, plan, runs_held(m), chased.done):
            return StopReason.PLANNED_OR_BEYOND if chased.any_beyond else StopReason.PLANNED
        return stop_before_round(study, m, rounds_done, budget, chased.done, widths_end=False)
    reason = stop_before_round(
        study, chased.measurement(m) if not chased.widths.empty else m, rounds_done, budget, chased.done
    )
    beyond_all = chased.widths.empty and not m.widths.empty and pilot_complete(study, m, chased.done)
    if beyond_all or (reason is StopReason.WIDTHS_MET and chased.any_beyond):
        return StopReason.WIDTHS_MET_OR_BEYOND
    return reason


def _two_stage_plan(study: Study, state: dict, m: Measurement, chased: Triage) -> dict[int, int] | None:
    """Under ``stop_rule: two_stage``, once the pilot is complete: each chased condition's planned seeds
    (:func:`rlvr_study.two_stage.fix_plan`, fixed in ``state`` the first time and saved with the next
    round's entry or the study's end: the pilot's runs and their fit are deterministic, so a call
    interrupted before fixes the same plan again); else None."""
    if study.stop_rule != "two_stage" or not (
        "plan" in state or (not m.widths.empty and pilot_complete(study, m, chased.done))
    ):
        return None
    return two_stage.fix_plan(study, state, chased.measurement(m), runs_held(m), chased.done)


def run_study(
    study: Study, *, stop_after: int | None = None, dry_run: bool = False, analyze: bool = True
) -> int:
    """The study's rounds until it stops (module docstring); the exit status of its ``rlvr-analyze``, or
    0 when it stopped after ``stop_after`` rounds, ``dry_run`` printed the next round or ``analyze`` is
    false (the caller runs its own analysis)."""
    run_budget, group = check_config(study)
    state = load_state(study)
    launched = 0
    if state["rounds"] and state["rounds"][-1]["ended"] is None:
        entry = state["rounds"][-1]
        print(f"round {entry['round']}: resuming (its runs that ended are skipped)")
        if dry_run:
            return 0
        _finish_round(study, state, entry)
        launched += 1
    if not state["rounds"]:
        _launch(study, state, _pilot(study, run_budget, group), "pilot", dry_run, run_budget)
        if dry_run:
            return 0
        launched += 1
    while True:
        m = measure(study, study_horizons(state, study))
        if "horizons" not in state and not m.widths.empty:
            m = measure(study, fix_horizons(study, state, m))
        extension = _extension(study, state)
        if extension is not None:
            if stop_after is not None and launched >= stop_after:
                print(f"stopped after {launched} round(s) as asked; run the same command to continue")
                return 0
            print("the pilot's runs that stopped at the top target go on to their horizons")
            if not dry_run:
                state["extended"] = True  # saved with the round's entry: a resumed round is not repeated
            _launch(study, state, extension, "extend", dry_run, run_budget)
            if dry_run:
                return 0
            launched += 1
            continue
        chased = triage(study, m)
        _record_widths(study, state, m, chased.done)
        for note in chased.notes:
            print(f"  {note}")
        budget = round_budget(study, m.responses, _hours(state), parallel_runs(state, m))
        costs = cost_model(study, m, run_budget, study_horizons(state))
        chased = afford.beyond_budget(study, m, chased, budget, costs, *afford.plan_of(state))
        plan = _two_stage_plan(study, state, m, chased)
        reason = _stop(study, m, chased, _rounds_done(state), budget, plan)
        m = chased.measurement(m) if not chased.widths.empty else m
        if reason is None and stop_after is not None and launched >= stop_after:
            print(f"stopped after {launched} round(s) as asked; run the same command to continue")
            return 0
        if reason is None:
            pilots = pilots_from_fits(m.tables, m.exps[m.exps["clock"] != "failure"])
            planned = scored = None
            if plan is not None:
                planned = two_stage.wanted(study, plan, runs_held(m), chased.done)
                scored = two_stage.pilot_widths(state)
            todo = plan_round(
                study, m, pilots, run_budget, budget, study_horizons(state), chased.done, planned, scored
            )
            for note in todo.notes:
                print(f"  {note}")
            if todo.launches:
                _launch(study, state, todo, "adaptive", dry_run, run_budget)
                if dry_run:  # printed, not launched: the same plan would follow forever
                    return 0
                launched += 1
                continue
            reason = todo.stop or StopReason.NOTHING_TO_ADD
        statuses = chased.statuses
        if plan is not None:
            statuses = two_stage.annotate(statuses, plan, runs_held(m), study)
        state["finished"] = afford.finished(reason.describe(study, m), statuses)
        state["conditions"] = {str(i): dataclasses.asdict(x) for i, x in statuses.items()}
        save_state(study, state)
        print(f"study {study.name} finished: {state['finished']}")
        print("\n".join(status_lines(study, statuses)))
        return _analyze(study) if analyze else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rlvr-study", description=__doc__.split("\n\n")[0])
    ap.add_argument("study", help="the study file (YAML): docs/study.md, 'Adaptive rounds'")
    ap.add_argument("--max-rounds", type=int, default=None, help="override the study file's max_rounds")
    hours = "override the study file's budget.hours (a slower machine that is to hold the same plan)"
    ap.add_argument("--budget-hours", type=float, default=None, metavar="H", help=hours)
    stop = "launch at most N rounds in this call (resume later)"
    ap.add_argument("--stop-after", type=int, default=None, help=stop)
    ap.add_argument(
        "--dry-run", action="store_true", help="validate and print the pilot's commands; run nothing"
    )
    ap.add_argument(
        "--no-analysis",
        action="store_true",
        help="skip the final rlvr-analyze into <folder>/analysis (run your own, as make study does)",
    )
    ap.add_argument(
        "--replicate",
        type=int,
        default=0,
        metavar="N",
        help=f"replicate N of the study: the same design on independent seeds (first_seed + {REPLICATE_SEEDS}*N) "
        "in its own folder (<folder>-rN)",
    )
    args = ap.parse_args(argv)

    try:
        if args.replicate < 0:
            raise StudyError(f"--replicate: a non-negative integer, got {args.replicate}")
        study = override(load_study(args.study), max_rounds=args.max_rounds, budget_hours=args.budget_hours)
        if args.replicate:
            study = replicate(study, args.replicate)
        return run_study(
            study, stop_after=args.stop_after, dry_run=args.dry_run, analyze=not args.no_analysis
        )
    except StudyError as err:
        print(f"rlvr-study: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
