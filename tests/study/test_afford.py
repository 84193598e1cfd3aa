"""The budget triage of ``rlvr-study`` (``budget_triage: true``, ``rlvr_study/afford.py``) on synthetic
pilot run directories (``analysis.synthetic``), priced with a known cost model: no trainer, no launch."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rlvr_study.afford import beyond_budget, finished, optimistic_ratio, plan_of, planned_seeds, seeds_wanted
from rlvr_study.measure import measure
from rlvr_study.plan import pilot_conditions
from rlvr_study.rounds import HOURS_MARGIN, CostModel, RoundBudget, plan_round
from rlvr_study.study_file import StudyError, parse_study
from rlvr_study.triage import BEYOND_BUDGET, MET, triage
from rlvr_study.two_stage import planned_ratio
from tests.study.conftest import SIZES_B, G


@pytest.fixture(scope="module")
def pilot(two_rate_pilot):
    """Two conditions, 2 seeds at 4 sizes each, every interval wider than the goal."""
    folder = two_rate_pilot
    study = parse_study(
        {
            "name": "s",
            "sizes": [b // G for b in SIZES_B],
            "conditions": [{"lr.ref_lr": 1e-6}, {"lr.ref_lr": 3e-6}],
            "targets": [0.3],
            "budget": {"responses": 1e7, "hours": 1},
            "bootstrap": 100,
            "pilot_seeds": 2,
            "budget_triage": True,
        }  # fmt: skip
    )
    study.folder = folder
    return study, measure(study), pilot_conditions(str(folder), targets=[0.3], n_boot=100)


def _costs(study, seconds: dict[int, float], responses: float = 1000.0) -> CostModel:
    keys = [(c, p) for c in (0, 1) for p in study.sizes]
    return CostModel(
        {p: float(p * G) for p in study.sizes},
        {k: responses for k in keys},
        {k: seconds[k[0]] for k in keys},
    )


def test_seeds_wanted_is_the_median_prediction():
    assert seeds_wanted(math.inf, 2, 5) is None and seeds_wanted(1.5, 0, 5) is None
    assert seeds_wanted(0.8, 2, 5) == 5 and seeds_wanted(0.8, 7, 5) == 7  # met: the pilot's seeds
    assert seeds_wanted(0.377 / 0.12, 2, 5) == 20  # n0 r^2 below the seed-cluster interval
    for r in (1.1, 1.5, 2.0, 2.65):  # from 5 seeds on: the t interval's narrowing at the median scatter
        n = seeds_wanted(r, 5, 5)
        assert planned_ratio(r, 5, n, 0.5) <= 1 < planned_ratio(r, 5, n - 1, 0.5)
    assert seeds_wanted(40.0, 5, 5) == 500  # carried at most MAX_FACTOR times the seeds held


def test_a_goal_the_hours_left_cannot_buy_is_not_chased(pilot, capsys):
    study, m, pilots = pilot
    chased = triage(study, m)
    ratio = chased.widths.set_index("condition")["width"] / chased.widths.set_index("condition")["goal"]
    assert (ratio > 1).all() and ratio.map(math.isfinite).all()
    want = {c: seeds_wanted(optimistic_ratio(float(ratio[c]), 2), 2, 2) for c in (0, 1)}
    costs = _costs(study, {0: 1.0, 1: 50.0})
    # each missing seed is a run at each of the 4 sizes, two at once
    price = {c: (want[c] - 2) * len(study.sizes) * costs.seconds[(c, study.sizes[0])] / 2 for c in (0, 1)}
    left = (price[0] + price[1]) / 2
    assert price[0] < left < price[1]
    out = beyond_budget(study, m, chased, RoundBudget(1e12, HOURS_MARGIN * left, parallel=2), costs)
    assert out.statuses[1].status == BEYOND_BUDGET and out.done == {1}
    assert out.statuses[0] == chased.statuses[0]
    assert list(out.widths["condition"].unique()) == [0]
    assert f"wants {want[1]} seeds: {price[1] / 3600:.2f} h of rounds" in out.statuses[1].reason
    assert f"condition 1: {BEYOND_BUDGET}" in capsys.readouterr().out
    # the rounds spend elsewhere: the dropped condition gets no run
    todo = plan_round(study, out.measurement(m), pilots, 30000, RoundBudget(1e12), done=out.done)
    assert todo.launches and {x.condition for x in todo.launches} == {0}
    # the closing line names it
    line = finished("every condition holds the seeds its pilot planned", out.statuses)
    assert (
        line
        == f"every condition still chased holds the seeds its pilot planned; {BEYOND_BUDGET} (no more runs): condition 1"
    )
    assert finished("x", chased.statuses) == "x"


def test_the_responses_left_and_the_plan_are_priced_too(pilot):
    study, m, _ = pilot
    chased = triage(study, m)
    cheap = _costs(study, {0: 1.0, 1: 1.0}, responses=1000.0)
    # the responses: 4 sizes x 1000 per missing seed
    out = beyond_budget(study, m, chased, RoundBudget(4000 * 1.5, 1e9, parallel=2), cheap)
    assert all(out.statuses[c].status == BEYOND_BUDGET for c in (0, 1)) and out.widths.empty
    assert "responses left" in out.statuses[0].reason
    # a plan fixed at 3 seeds costs one seed (4000 responses): both fit
    plan = {0: 3, 1: 3}
    kept = beyond_budget(study, m, chased, RoundBudget(4000 * 1.5, 1e9, parallel=2), cheap, plan)
    assert kept is chased
    assert (
        "its plan wants"
        in beyond_budget(study, m, chased, RoundBudget(3000, 1e9), cheap, plan).statuses[0].reason
    )
    assert planned_seeds({"plan": {"seeds": {"0": 3, "1": 7}}}) == {0: 3, 1: 7} and planned_seeds({}) is None
    # a width met short of its plan claims nothing under the two-stage rule: the plan is still priced
    met = dataclasses.replace(
        chased,
        widths=chased.widths.assign(width=0.01),
        statuses={c: dataclasses.replace(s, status=MET) for c, s in chased.statuses.items()},
    )
    assert beyond_budget(study, m, met, RoundBudget(3000, 1e9), cheap) is met  # no plan: met is the end
    short = beyond_budget(study, m, met, RoundBudget(3000, 1e9), cheap, {0: 3, 1: 2})
    assert short.statuses[0].status == BEYOND_BUDGET and short.statuses[1].status == MET


def test_intervals_asked_for_since_the_plan_are_priced_from_their_widths(pilot):
    """A plan fixed on the common α, and since then the common-α test rejects, so each target's α is
    asked for: the plan's seeds were not counted for those, and where the widest of them wants more at
    the median, those are priced (replicate 0 on an Intel Xeon: 3.16e-5's per-target widths 0.224 /
    0.243 / 0.130 at 18 of its 20 planned seeds were priced as the plan's 2 more seeds)."""
    study, m, _ = pilot
    chased = triage(study, m)
    cheap = _costs(study, {0: 1.0, 1: 1.0}, responses=1000.0)
    budget = RoundBudget(1e12, HOURS_MARGIN * 3.0, parallel=2)  # 3 s; the plan's one more seed: 2 s
    plan = {0: 3, 1: 3}
    asked = set(chased.widths.loc[chased.widths["goal"].map(math.isfinite), "clock"])
    assert asked == {"target:0.3"}
    assert (
        beyond_budget(study, m, chased, budget, cheap, plan, {0: frozenset(asked), 1: frozenset(asked)})
        is chased
    )
    out = beyond_budget(study, m, chased, budget, cheap, plan, {0: frozenset({"common"})})
    assert out.statuses[0].status == BEYOND_BUDGET and out.statuses[1] == chased.statuses[1]
    ratio = float((chased.widths["width"] / chased.widths["goal"])[chased.widths["condition"] == 0].max())
    want = seeds_wanted(optimistic_ratio(ratio, 2), 2, 2)
    assert want > 3
    assert f"its plan of 3 seeds was fixed on common) wants {want} seeds" in out.statuses[0].reason
    # the plan's intervals, read back from study_state.json
    state = {"plan": {"seeds": {"0": 3, "1": 7}, "widths": [
        {"condition": 0, "clock": "common", "width": 0.3, "goal": 0.12},
        {"condition": 0, "clock": "target:0.22", "width": 0.5, "goal": None},
        {"condition": 1, "clock": "target:0.22", "width": math.inf, "goal": 0.12}]}}  # fmt: skip
    assert plan_of(state) == ({0: 3, 1: 7}, {0: frozenset({"common"}), 1: frozenset({"target:0.22"})})
    assert plan_of({}) == (None, None)


def test_a_goal_is_priced_at_the_scatter_its_seeds_allow_not_at_its_estimate():
    """The scatter behind a width from n0 seeds could be smaller by the chi-squared bound: a goal is
    dropped only where even that wants more than the budget left. Replicate 1 of the reference study:
    3.16e-6 at 2 seeds, 3.03 times its goal, was priced at 19 seeds (0.40 h, 0.32 h left) and dropped;
    at the bound it wants the pilot's 5."""
    assert optimistic_ratio(3.03, 2) == pytest.approx(3.03 / math.sqrt(3.841459), rel=1e-6)
    assert seeds_wanted(3.03, 2, 5) == 19 and seeds_wanted(optimistic_ratio(3.03, 2), 2, 5) == 5
    assert math.isnan(optimistic_ratio(2.0, 1))  # one seed: no scatter to bound, not priced
    assert seeds_wanted(optimistic_ratio(2.0, 1), 1, 5) is None
    # the bound tightens with seeds: at 20 seeds the ratio is scaled by about 0.8
    assert 0.78 < optimistic_ratio(1.0, 20) < 0.82 < optimistic_ratio(1.0, 5) / 0.7


def test_off_met_or_unbounded_conditions_are_left_alone(pilot):
    study, m, _ = pilot
    chased = triage(study, m)
    tiny = RoundBudget(1.0, 1.0, parallel=2)
    dear = _costs(study, {0: 1e6, 1: 1e6})
    assert beyond_budget(dataclasses.replace(study, budget_triage=False), m, chased, tiny, dear) is chased
    assert beyond_budget(study, m, chased, RoundBudget(), dear) is chased  # no budget: nothing priced
    unbounded = dataclasses.replace(chased, widths=chased.widths.assign(width=math.inf))
    assert beyond_budget(study, m, unbounded, tiny, dear) is unbounded
    met_widths = chased.widths.assign(width=0.01)
    met = dataclasses.replace(chased, widths=met_widths, statuses={c: dataclasses.replace(s, status=MET) for c, s in chased.statuses.items()})  # fmt: skip
    assert beyond_budget(study, m, met, tiny, dear) is met


def test_the_key_is_read_and_checked():
    good = {"name": "s", "sizes": [4, 8], "budget": {"hours": 1}}
    assert parse_study(good).budget_triage is False
    assert parse_study({**good, "budget_triage": True}).budget_triage is True
    with pytest.raises(StudyError, match="^budget_triage:"):
        parse_study({**good, "budget_triage": "yes"})
