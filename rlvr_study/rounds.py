"""The next round of a study, and why a study stops (docs/study.md, "A round").

``rlvr-study`` (:mod:`rlvr_study.cli`) calls :func:`plan_round` after each round, on the widths
:func:`rlvr_study.measure.measure` measured. The round is planned in three steps, each a function that
returns its result:

1. :func:`cost_model`: the expected responses and wall seconds of one more run of each (condition, P):
   the median of the ended runs of that condition and size, else the run budget (the condition's
   horizon at that size where the study fixed one);
2. :func:`wanted_runs`: the runs each (condition, P) should have for every interval still wider than its
   goal. A target's α (or the common α, through its targets): the planner's design
   (:func:`rlvr_study.plan.plan_design`, fed by :func:`rlvr_study.plan.pilots_from_fits`) at the sizes
   :func:`kept_sizes` keeps (sizes the planner drops, runs there censored at the budget, get no more
   runs); γ of a ``clock: failure`` condition: the runs scaled by (width / goal)², at most doubled; a
   condition without an exponent yet (no crossings at two sizes): one more seed at every size; where the
   planner says the runs present suffice but the measured width is open: the extreme sizes scaled;
3. :func:`allocate`: what the round's :class:`RoundBudget` (:func:`round_budget`, the one place that
   decides what a round may spend) pays for. A balanced study (the default): whole seeds at every size,
   the same seed set for every condition that gets seeds, the pilot everywhere first, then by value per
   second of wall time across conditions (:mod:`rlvr_study.paired`). Unbalanced: the runs one at a
   time, the widest interval's condition first and within it the (condition, size) whose run narrows
   the planned width of that interval the most per response.

:class:`StopReason` names why a study stops: before a round (:func:`stop_before_round`) or because the
round's plan is empty (:attr:`RoundPlan.stop`). Nothing here launches a run.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum

import pandas as pd

from rlvr_study.launches import Launch, group_launches, runs_held, seeds_used
from rlvr_study.measure import Measurement
from rlvr_study.paired import OpenInterval, SeedCost, paired_round, seeds_to_goal
from rlvr_study.plan import Truth, design_width, plan_design, run_responses
from rlvr_study.study_file import Horizons, Study, horizon_at

# a round is planned into this share of the hours left: the predicted wall times of its runs (measured
# on the rounds before) missed by up to 28 % under a changing machine load
HOURS_MARGIN = 0.85


class StopReason(Enum):
    """Why a study stops; the value is what the output and ``study_state.json`` (``finished``) say."""

    NO_READABLE_RUN = "no readable run"
    WIDTHS_MET = "every requested width is met"
    WIDTHS_MET_OR_BEYOND = "every requested width is met or not identifiable within its horizon"
    MAX_ROUNDS = "max_rounds reached"
    BUDGET_HOURS = "budget.hours spent"
    BUDGET_RESPONSES = "budget.responses spent"
    NOTHING_TO_ADD = "nothing to add"
    PLANNED = "every condition holds the seeds its pilot planned"  # stop_rule: two_stage
    PLANNED_OR_BEYOND = (
        "every condition holds the seeds its pilot planned or is not identifiable within its horizon"
    )

    def describe(self, study: Study, m: Measurement | None = None) -> str:
        """The line that says it, with the numbers and where to look where they help."""
        if self is StopReason.MAX_ROUNDS:
            return f"max_rounds ({study.max_rounds}) reached"
        if self is StopReason.NO_READABLE_RUN:
            why = f" ({m.message})" if m is not None and m.message else ""
            return f"no readable run in {study.folder}{why}; see the runs' train.log"
        return self.value


# ------------------------------------------------------------------------------------------ budget
@dataclass(frozen=True)
class RoundBudget:
    """What the next round may spend (:func:`round_budget`)."""

    responses: float = math.inf  # responses the round's runs may spend
    seconds: float = math.inf  # the round's wall seconds
    parallel: float = 1.0  # runs that run at once: the round's wall time is its runs' summed, over this

    def fits(self, responses: float, seconds: float) -> bool:
        """Whether a round of ``responses`` and ``seconds`` of wall time (already over ``parallel``) fits."""
        return responses <= self.responses and seconds <= self.seconds


def round_budget(
    study: Study, responses_spent: float, hours_spent: float, parallel: float = 1.0
) -> RoundBudget:
    """The one place that decides what a round may spend: the responses ``budget.responses`` leaves, and
    as the round's wall time ``HOURS_MARGIN`` of the hours ``budget.hours`` leaves (each run at its
    predicted wall time, :func:`cost_model`). ``hours_spent``: the wall time of the study's rounds so
    far; ``parallel``: the runs the launcher ran at once (measured: ``rlvr_study.cli.parallel_runs``)."""
    return RoundBudget(
        responses=max(study.budget_responses - responses_spent, 0.0),
        seconds=HOURS_MARGIN * (study.budget_hours - hours_spent) * 3600,
        parallel=parallel,
    )


def stop_before_round(
    study: Study,
    m: Measurement,
    rounds_done: int,
    budget: RoundBudget,
    done: Collection[int] = (),
    widths_end: bool = True,
) -> StopReason | None:
    """Why the study stops before planning another round (no readable run, every width met,
    ``max_rounds`` rounds run, no time left in ``budget.hours``), or None. ``done``: conditions that get
    no more runs (:attr:`rlvr_study.triage.Triage.done`), whose pilot need not be complete.
    ``widths_end`` false (the two-stage rule, :mod:`rlvr_study.two_stage`): met widths end nothing."""
    if m.widths.empty:
        return StopReason.NO_READABLE_RUN
    if widths_end and (m.widths["width"] <= m.widths["goal"]).all() and pilot_complete(study, m, done):
        return StopReason.WIDTHS_MET
    if rounds_done >= study.max_rounds:
        return StopReason.MAX_ROUNDS
    if budget.seconds <= 0:
        return StopReason.BUDGET_HOURS
    return None


# ---------------------------------------------------------------------------------------- planning
@dataclass
class RoundPlan:
    launches: list[Launch]
    responses: float  # planned responses (each run at the median of its ended runs, else its budget)
    notes: list[str] = field(default_factory=list)
    # the budget ended the allocation with runs still wanted (BUDGET_RESPONSES or BUDGET_HOURS)
    stop: StopReason | None = None

    @property
    def n_runs(self) -> int:
        return sum(launch.n_runs for launch in self.launches)


FIRST_PILOT_SEEDS = 2  # a pilot's first round under an hours budget: the least an interval needs


def pilot_plan(study: Study, run_budget: float, group_size: int, seeds: int | None = None) -> RoundPlan:
    """The first round: ``seeds`` (default ``pilot_seeds``) seeds at every size, for every condition,
    from ``first_seed``."""
    seeds = list(range(study.first_seed, study.first_seed + (study.pilot_seeds if seeds is None else seeds)))
    launches = [Launch(i, seeds, list(study.sizes)) for i in range(len(study.conditions))]
    cost = sum(run_responses(p * group_size, run_budget) for p in study.sizes) * len(seeds)
    return RoundPlan(launches, cost * len(study.conditions))


def first_round_seeds(study: Study) -> int:
    """The pilot's seeds in the first round: all ``pilot_seeds`` without an hours budget; with one, at
    most :data:`FIRST_PILOT_SEEDS`, so that the rest of the pilot comes in rounds the budget can cut
    (whole seeds, at each round's predicted wall time: :func:`pilot_floor`)."""
    return (
        study.pilot_seeds
        if not math.isfinite(study.budget_hours)
        else min(study.pilot_seeds, FIRST_PILOT_SEEDS)
    )


def pilot_floor(study: Study, have: dict[tuple[int, int], int], done: Collection[int] = ()) -> WantedRuns:
    """The pilot's seeds still missing: ``pilot_seeds`` runs at every size of every condition (a pilot
    whose first round ran fewer, :func:`first_round_seeds`), except the conditions in ``done``: not
    identifiable within their horizon, they get no more runs (:mod:`rlvr_study.triage`)."""
    runs = {
        (c, p): study.pilot_seeds
        for c in range(len(study.conditions))
        for p in study.sizes
        if have.get((c, p), 0) < study.pilot_seeds and c not in done
    }
    notes = [f"the pilot's {study.pilot_seeds} seeds at every size are not complete"] if runs else []
    return WantedRuns(runs, notes, ratios={c: math.inf for c, _ in runs})


def _distinct_notes(notes: list[str]) -> list[str]:
    """``notes`` without those another note repeats and extends (the pilot floor's line, which the paired
    allocation's says again with the seeds it gives)."""
    return [
        n
        for i, n in enumerate(notes)
        if n not in notes[:i] and not any(o != n and o.startswith(n) for o in notes)
    ]


def pilot_complete(study: Study, m: Measurement, done: Collection[int] = ()) -> bool:
    """Whether every condition (but those in ``done``) holds ``pilot_seeds`` runs at every size."""
    return not pilot_floor(study, runs_held(m), done).runs


def _early_sizes(study: Study, m: Measurement, cond: int, clock: str) -> list[int]:
    """The sizes the fit of one condition and target leaves out as *early* (most crossings within the
    first rollouts, all but one such size: ``analysis.fits.exponents.early_sizes``)."""
    early: set[float] = set()
    if m.exps is not None and len(m.exps) and "sizes_early" in m.exps and m.labels.get(cond):
        row = m.exps[(m.exps["condition"] == m.labels[cond]) & (m.exps["clock"] == clock)]
        if len(row):
            early = {float(b) for b in str(row["sizes_early"].iloc[0]).split() if b != "nan"}
    out = []
    for p in study.sizes:
        at = m.runs[(m.runs["cond"] == cond) & (m.runs["P"] == p)]
        if len(at) and set(at["B"].astype(float)) & early:
            out.append(p)
    return out


def kept_sizes(study: Study, m: Measurement, cond: int, clock: str) -> tuple[list[int], list[str]]:
    """The sizes the planner's design may use for one condition and target: a size the fit leaves out
    as early (:func:`_early_sizes`), and a size where every run crossed the target within a
    resolution-limited bracket (the first evaluation, or a spacing or B above 1/4 of the crossing:
    ``analysis.data.clock_tables``), is dropped, as long as two sizes remain; more seeds there add runs whose
    crossing is known only to that bracket. Returns the sizes kept and a note per size dropped. (A
    balanced round still gives every size its seeds: the design only says how many.)"""
    col = f"limited:{clock}"
    early = set(_early_sizes(study, m, cond, clock))
    limited = []
    for p in study.sizes:
        at = m.runs[(m.runs["cond"] == cond) & (m.runs["P"] == p)]
        if p in early or (len(at) and col in m.runs and at[col].astype(bool).all()):
            limited.append(p)
    if len(study.sizes) - len(limited) < 2:
        return list(study.sizes), []
    notes = [
        f"condition {cond} {clock}: P={p} dropped: its crossings are resolution-limited" for p in limited
    ]
    return [p for p in study.sizes if p not in limited], notes


# ------------------------------------------------------------------------------- step 1: cost model
@dataclass(frozen=True)
class CostModel:
    """What one more run of a (condition, P) is expected to cost (:func:`cost_model`)."""

    size: dict[int, float]  # P -> B (P times the group size)
    responses: dict[tuple[int, int], float]  # (condition, P) -> responses
    seconds: dict[tuple[int, int], float]  # (condition, P) -> wall seconds of the run alone


def cost_model(
    study: Study, m: Measurement, run_budget: float, horizons: Horizons | None = None
) -> CostModel:
    """The expected cost of one more run of every (condition, P) of the study. Responses: the median of
    the ended runs of that condition and size (runs that fail cost less than the budget), the run budget
    rounded up to whole rollouts where none ended, and never more than the horizon the study fixed for
    the condition's size (``horizons``: condition -> responses or {P: responses}; a new run trains to
    it). Wall seconds: the median of the ended runs of that condition and size (evaluations and start-up
    included; scaled down where those runs ran past the horizon a new one stops at), elsewhere the
    responses at the seconds per response of every ended run (0 where no run recorded its wall time)."""
    default_g = next(iter(m.group_size.values())) if m.group_size else 1
    size = {p: float(p * m.group_size.get(p, default_g)) for p in study.sizes}
    ended = m.runs[m.runs["state"].isin(["completed", "failed"])] if "state" in m.runs else m.runs.iloc[0:0]
    spent_at = ended.groupby(["cond", "P"])["responses"].median().to_dict() if len(ended) else {}
    walls = ended["wall_seconds"] if "wall_seconds" in ended else pd.Series(dtype=float)
    wall_at = walls.groupby([ended["cond"], ended["P"]]).median().to_dict() if walls.notna().any() else {}
    ok = walls.notna() & (ended["responses"] > 0) if len(ended) else pd.Series(dtype=bool)
    per_response = float(walls[ok].sum() / ended["responses"][ok].sum()) if ok.any() else 0.0
    responses: dict[tuple[int, int], float] = {}
    seconds: dict[tuple[int, int], float] = {}
    for cond in range(len(study.conditions)):
        for p in study.sizes:
            full = run_responses(size[p], min(run_budget, horizon_at(horizons, cond, p)))
            seen = spent_at.get((cond, p))
            cost = min(full, float(seen)) if seen is not None and seen > 0 else full
            wall = wall_at.get((cond, p))
            if wall is None or not math.isfinite(wall):
                seconds[(cond, p)] = cost * per_response
            else:  # runs that ended at the budget ran longer than a run to the horizon will
                seconds[(cond, p)] = float(wall) * min(cost / seen if seen else 1.0, 1.0)
            responses[(cond, p)] = cost
    return CostModel(size, responses, seconds)


# ------------------------------------------------------------------------------ step 2: wanted runs
@dataclass
class WantedRuns:
    """What the open intervals of a round want (:func:`wanted_runs`)."""

    runs: dict[tuple[int, int], int] = field(default_factory=dict)  # (condition, P) -> runs to have
    notes: list[str] = field(default_factory=list)
    # condition -> (truth, width / goal) of each interval the planner planned (scores a run's narrowing)
    truths: dict[int, list[tuple[Truth, float]]] = field(default_factory=dict)
    # condition -> width / goal of its widest planned interval (the planner's or γ's): served first
    ratios: dict[int, float] = field(default_factory=dict)


def _union(parts: list[WantedRuns]) -> WantedRuns:
    """One :class:`WantedRuns` of several: the most runs any part wants per (condition, P), the notes in
    order, every planned truth, the widest ratio per condition."""
    out = WantedRuns()
    for part in parts:
        for key, n in part.runs.items():
            out.runs[key] = max(out.runs.get(key, 0), n)
        out.notes += part.notes
        for cond, truths in part.truths.items():
            out.truths[cond] = out.truths.get(cond, []) + truths
        for cond, ratio in part.ratios.items():
            out.ratios[cond] = max(out.ratios.get(cond, 0.0), ratio)
    return out


def _grown(n: int, ratio: float) -> int:
    """Runs after scaling ``n`` by (width / goal)^2 = ``ratio``^2, at most doubling them (an unbounded
    interval doubles them)."""
    factor = min(ratio**2, 4.0) if math.isfinite(ratio) else 4.0
    return min(math.ceil(n * factor), 2 * max(n, 1))


def _target_runs(
    study: Study,
    m: Measurement,
    costs: CostModel,
    cond: int,
    clock: str,
    truth: Truth,
    goal: float,
    ratio: float,
) -> WantedRuns:
    """The planner's runs per kept size for one target's interval to reach ``goal``."""
    sizes, notes = kept_sizes(study, m, cond, clock)
    design = plan_design(
        [costs.size[p] for p in sizes],
        [truth],
        goal,
        min_seeds=study.pilot_seeds,
        max_runs=400,
        assurance=study.assurance,
    )
    runs = {}
    for b, n in zip(design.sizes, design.seeds):
        p = next(p for p in study.sizes if costs.size[p] == b)
        runs[(cond, p)] = int(n)
    if study.balanced and len(design.seeds):
        # whole seeds (as many as the design's busiest size) at every size of the study, the ones the
        # design dropped included: seeds are complete blocks, and whether a size is early or resolution-
        # limited is decided on equal seeds everywhere, as on any larger design, so the plan and the fit
        # have one estimand (an end size left at the pilot's 3 seeds while the others grew gave intervals
        # that held a pool's α in 56-66 % of draws: docs/study.md, "Calibration on real runs")
        most = int(max(design.seeds))
        for p in study.sizes:
            runs[(cond, p)] = max(runs.get((cond, p), 0), most)
    notes += [f"condition {cond} {clock}: {d}" for d in design.dropped]
    return WantedRuns(runs, notes, {cond: [(truth, ratio)]}, {cond: ratio})


def _failure_runs(study: Study, cond: int, r, have: dict[tuple[int, int], int]) -> WantedRuns:
    """γ's interval narrows as 1 / sqrt(runs) (the onsets' scatter does not depend on the design the way
    evaluation brackets do): (width / goal)^2 times the runs at every size, at most doubling them in one
    round; an unbounded interval doubles them."""
    factor = (r.width / r.goal) ** 2 if math.isfinite(r.width) else 4.0
    runs = {(cond, p): _grown(have.get((cond, p), 0), r.width / r.goal) for p in study.sizes}
    note = (
        f"condition {cond} failure: width {r.width:.3f} > {r.goal:g}: runs scaled by "
        f"{min(factor, 4.0):.2f} (at most doubled)"
    )
    return WantedRuns(runs, [note], ratios={cond: r.width / r.goal if math.isfinite(r.width) else math.inf})


def _interval_runs(
    study: Study,
    m: Measurement,
    pilots: list,
    costs: CostModel,
    cond: int,
    r,
    have: dict[tuple[int, int], int],
) -> WantedRuns:
    """What one open interval (a row of ``m.widths``) wants."""
    if r.clock == "failure":
        return _failure_runs(study, cond, r, have)
    if r.clock.startswith("gain:"):  # a gain target (rlvr_study.triage): seeds as the width scales with them
        n = seeds_to_goal(r.width, r.goal, min(have.get((cond, p), 0) for p in study.sizes))
        note = f"condition {cond} {r.clock}: width {r.width:.3f} > {r.goal:g}: {n} seeds at every size"
        return WantedRuns({(cond, p): n for p in study.sizes}, [note], ratios={cond: r.width / r.goal})
    if r.clock == "common":
        # plan every target of the condition so that the common interval meets the goal: each target's
        # goal is the common goal times the current ratio of the targets' (median) width to the common
        # width
        scale = r.targets_width / r.width if math.isfinite(r.targets_width) and r.width > 0 else 1.0
        return _union(
            [
                _target_runs(study, m, costs, cond, q.target, q.truth, r.goal * scale, r.width / r.goal)
                for q in pilots
                if q.condition == r.label
            ]
        )
    pilot = next((q for q in pilots if q.condition == r.label and q.target == r.clock), None)
    if pilot is None:
        runs = {(cond, p): have.get((cond, p), 0) + 1 for p in study.sizes}
        return WantedRuns(runs, [f"condition {cond} {r.clock}: no exponent yet, one more seed at every size"])
    return _target_runs(study, m, costs, cond, r.clock, pilot.truth, r.goal, r.width / r.goal)


def _extreme_sizes(
    study: Study,
    cond: int,
    rows: pd.DataFrame,
    wanted: dict[tuple[int, int], int],
    have: dict[tuple[int, int], int],
) -> WantedRuns:
    """The plan comes from the pilot's point estimates: where it says the runs present already meet a
    width the measured interval does not, add runs anyway at the condition's extreme sizes (the slope's
    lever arm), scaled by (width / goal)^2 and at most doubled, rather than stop unmet."""
    sizes = [p for p in study.sizes if (cond, p) in wanted] or list(study.sizes)
    if any(wanted[(cond, p)] > have.get((cond, p), 0) for p in sizes if (cond, p) in wanted):
        return WantedRuns()
    ratio = float((rows["width"] / rows["goal"]).max())
    factor = min(ratio**2, 4.0) if math.isfinite(ratio) else 4.0
    runs = {}
    scaled = list(study.sizes) if study.balanced else sorted({sizes[0], sizes[-1]})
    most = max(max(have.get((cond, p), 0) + 1, _grown(have.get((cond, p), 0), ratio)) for p in scaled)
    for p in scaled:
        n = have.get((cond, p), 0)
        runs[(cond, p)] = most if study.balanced else max(n + 1, _grown(n, ratio))
    where = "every size" if study.balanced else f"P={sizes[0]} and P={sizes[-1]}"
    note = (
        f"condition {cond}: the plan from the pilot's estimates is met but the measured width is not: "
        f"runs at {where} scaled by {factor:.2f} (at most doubled)"
    )
    return WantedRuns(runs, [note])


def wanted_runs(
    study: Study,
    m: Measurement,
    pilots: list,
    costs: CostModel,
    have: dict[tuple[int, int], int],
    done: Collection[int] = (),
) -> WantedRuns:
    """The runs each (condition, P) should have for every interval of ``m`` wider than its goal (module
    docstring, step 2). ``have``: (condition, P) -> the runs the folder holds; ``done``: conditions that
    get no more runs, not even the pilot's."""
    open_rows = m.widths[m.widths["width"] > m.widths["goal"]]
    conds = sorted(set(open_rows["condition"]))
    wanted = _union(
        [
            _interval_runs(study, m, pilots, costs, cond, r, have)
            for cond in conds
            for r in open_rows[open_rows["condition"] == cond].itertuples()
        ]
    )
    extra = [
        _extreme_sizes(study, c, open_rows[open_rows["condition"] == c], wanted.runs, have) for c in conds
    ]
    return _union([wanted, *extra, pilot_floor(study, have, done)])


# ---------------------------------------------------------------------------------- step 3: budget
@dataclass
class Allocation:
    """The runs a round takes (:func:`allocate`)."""

    added: dict[tuple[int, int], int]  # (condition, P) -> new runs
    responses: float  # their expected responses
    seconds: float  # their expected wall time (over the budget's ``parallel``)
    stop: StopReason | None = None  # the budget ended it with runs still wanted
    notes: list[str] = field(default_factory=list)


def _narrowing(study: Study, costs: CostModel, truth: Truth, now: list[int], key: tuple[int, int]) -> float:
    """How much one more run at ``key`` narrows the planned width of ``truth``'s interval, per response,
    from ``now`` runs per size of the study."""
    sizes = [costs.size[q] for q in study.sizes]
    after = list(now)
    after[study.sizes.index(key[1])] += 1
    before = design_width(sizes, now, truth, study.assurance)
    return (before - design_width(sizes, after, truth, study.assurance)) / costs.responses[key] + 1e-12


def allocate(
    study: Study,
    costs: CostModel,
    wanted: WantedRuns,
    have: dict[tuple[int, int], int],
    budget: RoundBudget,
    widths: pd.DataFrame | None = None,
    done: Collection[int] = (),
) -> Allocation:
    """The runs missing from ``wanted``, one at a time while the round fits in ``budget`` (and
    ``max_runs_per_round``): the widest interval's condition first, then the run that narrows that
    condition's widest planned interval the most per response (conditions without a planned interval,
    a missing exponent or γ: the cheapest sizes first)."""
    if study.balanced:
        return _allocate_seeds(study, costs, wanted, have, budget, widths, done)
    deficit = {k: n - have.get(k, 0) for k, n in wanted.runs.items() if n > have.get(k, 0)}
    widest = {c: max(v, key=lambda x: x[1])[0] for c, v in wanted.truths.items()}
    cap = study.max_runs_per_round or 10**9
    out = Allocation({}, 0.0, 0.0)

    def score(key: tuple[int, int]) -> tuple[float, float]:
        cond = key[0]
        if cond not in widest:
            return wanted.ratios.get(cond, math.inf), 1.0 / costs.responses[key]
        now = [have.get((cond, q), 0) + out.added.get((cond, q), 0) for q in study.sizes]
        return wanted.ratios.get(cond, math.inf), _narrowing(study, costs, widest[cond], now, key)

    wall = {k: costs.seconds[k] / budget.parallel for k in deficit}  # a run's share of the round's time
    while deficit and sum(out.added.values()) < cap:
        affordable = [
            k for k in deficit if budget.fits(out.responses + costs.responses[k], out.seconds + wall[k])
        ]
        if not affordable:
            _out_of_budget(out, any(out.responses + costs.responses[k] <= budget.responses for k in deficit))
            break
        key = max(affordable, key=score)
        out.added[key] = out.added.get(key, 0) + 1
        out.responses += costs.responses[key]
        out.seconds += wall[key]
        deficit[key] -= 1
        if deficit[key] == 0:
            del deficit[key]
    return out


def _out_of_budget(out: Allocation, by_responses: bool) -> None:
    """End an allocation the budget cut: by its hours where the next unit (a run, or a whole seed)
    would still fit in its responses, else by its responses."""
    out.stop = StopReason.BUDGET_HOURS if by_responses else StopReason.BUDGET_RESPONSES
    left = "hours left (at the runs' measured wall times)" if by_responses else "responses left"
    out.notes.append(f"budget: the rest of the planned runs do not fit in the {left}")


def seed_cost(
    study: Study, costs: CostModel, have: dict[tuple[int, int], int], cond: int, level: int, parallel: float
) -> SeedCost:
    """What raising ``cond`` to ``level`` whole seeds costs: its missing runs, their responses and wall
    seconds over the ``parallel`` runs at once; priced in seconds where every wall time is known."""
    missing = {p: max(level - have.get((cond, p), 0), 0) for p in study.sizes}
    responses = sum(n * costs.responses[(cond, p)] for p, n in missing.items())
    wall = sum(n * costs.seconds[(cond, p)] for p, n in missing.items()) / parallel
    timed = all(v > 0 for v in costs.seconds.values())
    return SeedCost(sum(missing.values()), responses, wall, wall if timed else responses)


def _allocate_seeds(
    study: Study,
    costs: CostModel,
    wanted: WantedRuns,
    have: dict[tuple[int, int], int],
    budget: RoundBudget,
    widths: pd.DataFrame | None,
    done: Collection[int] = (),
) -> Allocation:
    """:func:`allocate` for a balanced study: whole seeds at every size, the same seed set for every
    condition that gets seeds, the pilot first, then by value per second (:func:`rlvr_study.paired.paired_round`).
    The conditions in ``done`` take no part (they keep their seeds, a prefix of the others')."""
    conds = [c for c in range(len(study.conditions)) if c not in done]
    seeds = {c: min(have.get((c, p), 0) for p in study.sizes) for c in conds}
    want = {c: max([n for (k, _), n in wanted.runs.items() if k == c], default=0) for c in conds}
    cost = lambda c, level: seed_cost(study, costs, have, c, level, budget.parallel)  # noqa: E731

    rows = widths[widths["width"] > widths["goal"]] if widths is not None and len(widths) else pd.DataFrame()
    intervals = [OpenInterval(int(r.condition), float(r.width), float(r.goal)) for r in rows.itertuples()]
    cap = study.max_runs_per_round or 10**9
    fits = lambda x, s, n: budget.fits(x, s) and n <= cap  # noqa: E731
    r = paired_round(seeds, want, intervals, cost, fits, study.pilot_seeds, study.stop_rule == "two_stage")
    level = {c: r.levels.get(c, r.level) for c in r.conditions}
    added = {
        (c, p): n for c in r.conditions for p in study.sizes if (n := level[c] - have.get((c, p), 0)) > 0
    }
    out = Allocation(added, r.responses, r.seconds, notes=list(r.notes))
    after = {c: level.get(c, seeds[c]) for c in conds}
    more = [cost(c, after[c] + 1) for c in conds if want[c] > after[c]]
    if r.cut and more and not any(r.runs + x.runs > cap for x in more):
        out.stop = StopReason.BUDGET_RESPONSES
        if any(out.responses + x.responses <= budget.responses for x in more):
            out.stop = StopReason.BUDGET_HOURS
    return out


def plan_round(
    study: Study,
    m: Measurement,
    pilots: list,
    run_budget: float,
    budget: RoundBudget,
    horizons: Horizons | None = None,
    done: Collection[int] = (),
    planned: WantedRuns | None = None,
    scored_on: pd.DataFrame | None = None,
) -> RoundPlan:
    """The next round (module docstring): :func:`cost_model`, :func:`wanted_runs`, :func:`allocate`.
    ``pilots``: :class:`rlvr_study.plan.PilotCondition` list of the folder (with the analysis' condition
    labels), ``run_budget``: ``train.max_responses``, ``budget``: what the round may spend
    (:func:`round_budget`), ``horizons``: condition -> the horizon(s) the study fixed (a new run of that
    condition trains to it, and costs that much), ``done``: conditions that get no more runs
    (:attr:`rlvr_study.triage.Triage.done`). ``planned`` (the two-stage rule, :mod:`rlvr_study.two_stage`):
    the runs wanted, in place of step 2, and ``scored_on``: the widths the allocation scores on (the
    pilot's) in place of ``m``'s."""
    used = seeds_used(m)
    have = {k: len(v) for k, v in used.items()}  # runs_held, from the seeds already read
    costs = cost_model(study, m, run_budget, horizons)
    wanted = planned if planned is not None else wanted_runs(study, m, pilots, costs, have, done)
    taken = allocate(study, costs, wanted, have, budget, m.widths if scored_on is None else scored_on, done)
    return RoundPlan(
        group_launches(taken.added, used, study.first_seed),
        taken.responses,
        _distinct_notes(wanted.notes + taken.notes),
        taken.stop,
    )
