"""Goals the budget cannot buy, not chased (``budget_triage``; docs/study.md, "Goals beyond the budget").

:mod:`rlvr_study.triage` stops chasing an interval that the horizon keeps open however many seeds it
gets. The budget can do the same: a condition whose goal needs more seeds than the hours (or responses)
left can pay for stays open at the end, and every run it got in the meantime is time the other
conditions did not get. With ``budget_triage: true``, before each round, each condition still chased is
priced:

- the seeds it will hold: under the two-stage rule, once fixed, its plan (:mod:`rlvr_study.two_stage`;
  also where its width is met short of the plan, which claims nothing there), unless the intervals it
  is asked for are no longer those the plan was fixed on (its common-α test rejects since: each
  target's α is asked for, and the plan's seeds were counted for the common one), where the seeds its
  widest open interval wants (below) are priced if they are more; before a plan, the seeds at which
  its widest open interval is predicted to meet its goal (``r``: width over goal at ``n0`` seeds), at
  the median (:func:`seeds_wanted`: ``ceil(n0 r^2)`` below :data:`MIN_SEEDS`, the within-size
  bootstrap, whose width shrinks as one over the root of the runs per size; the seed-cluster t
  interval's narrowing, :func:`rlvr_study.two_stage.planned_ratio` at assurance 0.5, from there on;
  never fewer than the pilot's seeds) **of the optimistic ratio** (:func:`optimistic_ratio`): ``r``
  scaled as if the scatter were at the lower end of its 95 % interval given the ``n0`` seeds it rests
  on, ``r sqrt((n0 - 1) / chi2_0.95(n0 - 1))``, so that the scatter's own noise does not drop a goal
  the budget could buy (at 2 seeds ``r`` is halved: replicate 1 of the reference study priced 3.16e-6,
  3.03 times its goal at 2 seeds, at 19 seeds and dropped it, where the previous release's replicate 1
  met 0.12 at its 5 pilot seeds); one seed is not priced;
- what the missing runs cost: each at its condition and size's measured wall time, over the runs that
  run at once (:func:`rlvr_study.rounds.cost_model`, the rounds' own prices), and their responses.

Where that alone is more than all the hours left (not only the share a round may plan into) or the
responses left, the condition is **not attainable within the budget**: it gets no more runs, the
reason says what it wants and what is left, and its interval is reported where it stands. An
unbounded interval is not priced (its seeds cannot be predicted; the pilot is there to bound it).
This is our rule, not a paper's: it drops only what the budget could not buy at the predicted seeds
even if every other condition got nothing and the scatter were as small as its seeds allow at 95 %
(a scale estimate from n0 - 1 degrees of freedom, the t interval's; the within-size bootstrap below
five seeds has no better-founded count). A still luckier scatter can meet a width with fewer seeds,
so a dropped goal is one the budget was not expected to buy, not one it could never have met; under
a plan, the plan's seeds are what a claim needs, so those are priced.
"""

from __future__ import annotations

import dataclasses
import math

from scipy.stats import chi2

from analysis.fits.seed_blocks import MIN_SEEDS
from rlvr_study.launches import runs_held
from rlvr_study.measure import Measurement
from rlvr_study.rounds import HOURS_MARGIN, CostModel, RoundBudget, seed_cost
from rlvr_study.study_file import Study
from rlvr_study.triage import BEYOND_BUDGET, MET, NOT_IDENTIFIABLE, ConditionStatus, Triage
from rlvr_study.two_stage import condition_seeds, planned_ratio

# the most seeds a prediction is carried to (a goal further off is beyond any budget these studies hold)
MAX_FACTOR = 100


def seeds_wanted(ratio: float, n0: int, pilot_seeds: int) -> int | None:
    """The seeds at which an interval ``ratio`` times its goal at ``n0`` seeds meets it at the median
    (module docstring); None where ``ratio`` is not finite."""
    if not math.isfinite(ratio) or n0 < 1:
        return None
    floor = max(n0, pilot_seeds)
    if ratio <= 1:
        return floor
    if n0 < MIN_SEEDS:
        return max(math.ceil(n0 * ratio**2 - 1e-9), floor)
    n = n0 + 1
    while n < MAX_FACTOR * n0 and planned_ratio(ratio, n0, n, 0.5) > 1:
        n += 1
    return max(n, floor)


def optimistic_ratio(ratio: float, n0: int) -> float:
    """``ratio`` (width over goal at ``n0`` seeds) as if the scatter were at the lower end of its 95 %
    interval from ``n0`` seeds (module docstring); NaN below 2 seeds."""
    if n0 < 2:
        return math.nan
    return ratio * math.sqrt((n0 - 1) / chi2.ppf(0.95, n0 - 1))


def beyond_budget(
    study: Study,
    m: Measurement,
    chased: Triage,
    budget: RoundBudget,
    costs: CostModel,
    plan: dict[int, int] | None = None,
    planned_for: dict[int, frozenset[str]] | None = None,
) -> Triage:
    """``chased`` with every condition whose goal the budget left cannot buy marked
    :data:`~rlvr_study.triage.BEYOND_BUDGET` and its intervals no longer chased (module docstring);
    ``chased`` itself where ``study.budget_triage`` is off. ``plan``: the two-stage rule's seeds per
    condition, where fixed; ``planned_for``: the intervals (clocks) each plan was fixed on
    (:func:`plan_of`). Prints a line for each condition it marks."""
    if not study.budget_triage or chased.widths.empty:
        return chased
    have = runs_held(m)
    seconds_left = budget.seconds / HOURS_MARGIN  # all the hours left, not a round's share
    plan = plan or {}
    statuses = dict(chased.statuses)
    dropped = []
    for cond, status in chased.statuses.items():
        if status.status in (NOT_IDENTIFIABLE, BEYOND_BUDGET):
            continue
        rows = chased.widths[chased.widths["condition"] == cond]
        open_ = rows[rows["width"] > rows["goal"]]
        n0 = condition_seeds(study, have, cond)
        ratio = float((open_["width"] / open_["goal"]).max()) if len(open_) else math.nan
        low = optimistic_ratio(ratio, n0)
        seeds = seeds_wanted(low, n0, study.pilot_seeds)
        since = ""
        if cond in plan:  # a width met short of the plan is not claimed: the plan is what it wants
            fixed_on = (planned_for or {}).get(cond)
            asked = set(rows.loc[rows["goal"].map(math.isfinite), "clock"])
            if fixed_on and not asked <= fixed_on and seeds is not None and seeds > plan[cond]:
                since = f"; its plan of {plan[cond]} seeds was fixed on {', '.join(sorted(fixed_on))}"
        elif status.status == MET or open_.empty:
            continue
        what = f"its widest interval ({ratio:.2f} times its goal at {n0} seeds, {low:.2f} at the scatter's 95 % low{since})"
        if cond in plan and not since:
            seeds, what = plan[cond], "its plan"
        if seeds is None:
            continue
        price = seed_cost(study, costs, have, cond, seeds, budget.parallel)
        seconds, responses = price.seconds, price.responses
        if seconds <= seconds_left and responses <= budget.responses:
            continue
        left = [f"{seconds_left / 3600:.2f} h"] if math.isfinite(seconds_left) else []
        left += [f"{budget.responses:,.0f} responses"] if math.isfinite(budget.responses) else []
        why = (
            f"{what} wants {seeds} seeds: {seconds / 3600:.2f} h of rounds and {responses:,.0f} responses "
            f"at its runs' measured cost; {' and '.join(left)} left; no more runs"
        )
        reason = f"{status.reason}; {why}" if status.reason else why
        statuses[cond] = dataclasses.replace(status, status=BEYOND_BUDGET, reason=reason)
        dropped.append(cond)
        print(f"  condition {cond}: {BEYOND_BUDGET}: {why}")
    if not dropped:
        return chased
    widths = chased.widths[~chased.widths["condition"].isin(dropped)]
    return Triage(widths if len(widths) else chased.widths.iloc[0:0], statuses, list(chased.notes))


def planned_seeds(state: dict) -> dict[int, int] | None:
    """The two-stage plan recorded in ``study_state.json``, where fixed."""
    plan = state.get("plan")
    return {int(c): int(n) for c, n in plan["seeds"].items()} if plan else None


def plan_of(state: dict) -> tuple[dict[int, int] | None, dict[int, frozenset[str]] | None]:
    """The two-stage plan in ``study_state.json`` (:func:`planned_seeds`) and the intervals each
    condition's plan was fixed on (its pilot's rows with a goal), where fixed."""
    plan = state.get("plan")
    if not plan:
        return None, None
    clocks: dict[int, set[str]] = {}
    for r in plan.get("widths", []):
        goal = r.get("goal")
        if goal is not None and math.isfinite(float(goal)):
            clocks.setdefault(int(r["condition"]), set()).add(str(r["clock"]))
    return planned_seeds(state), {c: frozenset(x) for c, x in clocks.items()}


def finished(line: str, statuses: dict[int, ConditionStatus]) -> str:
    """The study's closing line with the conditions the budget triage stopped chasing named."""
    dropped = sorted(c for c, s in statuses.items() if s.status == BEYOND_BUDGET)
    if not dropped:
        return line
    line = line.replace("every condition", "every condition still chased", 1)
    return f"{line}; {BEYOND_BUDGET} (no more runs): condition {', '.join(map(str, dropped))}"
