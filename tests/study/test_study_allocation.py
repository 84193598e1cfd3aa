"""A balanced round's seeds (``rlvr_study/paired.py``) and the intervals a study chases
(``rlvr_study/triage.py``): the pilot everywhere first, paired seed sets, value per second across
conditions, and no runs for an interval its horizon makes unattainable. Synthetic plan inputs and
synthetic runs (``analysis.synthetic``); nothing is launched."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from rlvr_study.paired import (
    OpenInterval,
    SeedCost,
    cluster_scale,
    paired_round,
    predicted_ratio,
    seed_value,
    seeds_to_goal,
)


def _costs(per_seed: dict[int, float], seeds: dict[int, int], sizes: int = 5):
    """cost(c, L): ``per_seed[c]`` seconds (and responses) per whole seed of ``sizes`` runs."""

    def cost(c: int, level: int) -> SeedCost:
        n = max(level - seeds[c], 0)
        return SeedCost(n * sizes, n * per_seed[c], n * per_seed[c], n * per_seed[c])

    return cost


def _fits(seconds: float, runs: int = 10**9):
    return lambda r, s, n: s <= seconds + 1e-9 and n <= runs


def test_the_seed_cluster_width_narrows_as_t_over_root_seeds():
    assert cluster_scale(5) == pytest.approx(2.7764451 / 2)
    assert predicted_ratio(0.24, 0.12, 5, 5) == pytest.approx(2.0)
    assert predicted_ratio(0.24, 0.12, 5, 10) == pytest.approx(2 * cluster_scale(10) / cluster_scale(5))
    assert predicted_ratio(math.inf, 0.12, 5, 5) > 1  # unbounded: counted at UNBOUNDED_RATIO
    n = seeds_to_goal(0.15, 0.12, 5)
    assert predicted_ratio(0.15, 0.12, 5, n) <= 1 < predicted_ratio(0.15, 0.12, 5, n - 1)
    assert seeds_to_goal(1.0, 0.12, 5) == 10  # never more than double in one round
    # value: the excess over the goal removed, never more than there is; wanted seeds past it are cheap
    i = [OpenInterval(0, 0.13, 0.12)]
    assert seed_value(i, 5, 20, 20) == pytest.approx(0.13 / 0.12 - 1 + 15e-3)
    assert seed_value(i, 5, 20, 5) == 0.0


def test_a_budget_that_cannot_pay_for_everything_completes_every_pilot_first():
    """The failure the rounds had: after a 2-seed pilot of 5 conditions, a short budget gave all its runs
    to condition 0 and the others never finished their pilot. Now every condition's pilot comes first,
    as many pilot seeds for every condition as fit, on the same seeds."""
    seeds = dict.fromkeys(range(5), 2)
    wanted = {0: 14, 1: 5, 2: 5, 3: 5, 4: 5}
    intervals = [OpenInterval(0, math.inf, 0.12), *[OpenInterval(c, 0.3, 0.12) for c in (1, 2, 3)]]
    cost = _costs(dict.fromkeys(range(5), 1.0), seeds)
    r = paired_round(seeds, wanted, intervals, cost, _fits(12.0), pilot_seeds=5)
    assert r.conditions == [0, 1, 2, 3, 4] and r.level == 4  # 2 more seeds each (10 s of 12), not 3
    assert r.cut and any("pilot" in n for n in r.notes)
    full = paired_round(seeds, wanted, intervals, cost, _fits(1e9), pilot_seeds=5)
    assert full.level == 5 and full.conditions == [0, 1, 2, 3, 4] and not full.cut  # the pilot only
    # not even one seed for each: the most narrowing per second gets it, and the round says who did not
    few = paired_round(seeds, wanted, intervals, cost, _fits(3.0), pilot_seeds=5)
    assert few.level == 3 and len(few.conditions) == 3 and 0 in few.conditions and 4 not in few.conditions
    assert few.cut and "not to" in few.notes[-1]


def test_every_condition_that_gets_seeds_ends_the_round_on_the_same_seeds():
    seeds = {0: 5, 1: 5, 2: 7, 3: 5}
    wanted = {0: 12, 1: 8, 2: 9, 3: 5}  # 3 is met: no seeds
    intervals = [OpenInterval(0, 0.3, 0.12), OpenInterval(1, 0.16, 0.12), OpenInterval(2, 0.14, 0.12)]
    r = paired_round(seeds, wanted, intervals, _costs(dict.fromkeys(range(4), 1.0), seeds), _fits(1e9), 5)
    assert r.level == 12 and r.conditions == [0, 1, 2] and not r.cut
    assert r.runs == 5 * (7 + 7 + 5)


def test_value_per_second_orders_the_conditions_under_a_short_budget():
    seeds = dict.fromkeys(range(3), 5)
    wanted = dict.fromkeys(range(3), 10)
    # 0 and 1 equally wide, 1 four times dearer per seed; 2 as cheap as 0 but nearly met
    intervals = [OpenInterval(0, 0.24, 0.12), OpenInterval(1, 0.24, 0.12), OpenInterval(2, 0.126, 0.12)]
    cost = _costs({0: 1.0, 1: 4.0, 2: 1.0}, seeds)
    one = paired_round(seeds, wanted, intervals, cost, _fits(1.0), 5)
    assert one.conditions == [0] and one.level == 6 and one.cut
    # each level's set is filled in the order of value per second: at the level chosen, every condition
    # left out buys less narrowing per second than every condition taken
    for budget in (2.0, 5.0, 8.0, 13.0):
        r = paired_round(seeds, wanted, intervals, cost, _fits(budget), 5)
        assert r.seconds <= budget and r.conditions
        rate = {c: seed_value([intervals[c]], 5, r.level, 10) / cost(c, r.level).price for c in range(3)}
        left = [c for c in range(3) if c not in r.conditions]
        fits_left = [c for c in left if r.seconds + cost(c, r.level).seconds <= budget]
        assert not fits_left  # nothing that still fits is left out
        assert r.value == pytest.approx(sum(seed_value([intervals[c]], 5, r.level, 10) for c in r.conditions))
        assert all(rate[c] >= rate[x] for c in r.conditions for x in left) or r.conditions == [0, 2]
    # the round buys at least as much value as any single level with any affordable set of conditions
    # filled greedily would, and never less than the best one-condition choice
    for budget in (3.0, 6.0, 11.0):
        r = paired_round(seeds, wanted, intervals, cost, _fits(budget), 5)
        for level, k in itertools.product(range(6, 11), range(3)):
            if cost(k, level).seconds <= budget:
                assert r.value >= seed_value([intervals[k]], 5, level, 10) - 1e-12


def test_max_runs_per_round_caps_a_paired_round():
    seeds = dict.fromkeys(range(2), 5)
    r = paired_round(
        seeds,
        {0: 8, 1: 8},
        [OpenInterval(0, 0.2, 0.12), OpenInterval(1, 0.2, 0.12)],
        _costs({0: 1.0, 1: 1.0}, seeds),
        _fits(1e9, runs=20),
        5,
    )
    assert r.runs <= 20 and r.cut and r.conditions


# ------------------------------------------------------------------------------------ triage
G = 8
SIZES_B = (32, 64, 128, 256)


@pytest.fixture(scope="module")
def beyond():
    """Two conditions, 3 seeds at 4 sizes, targets 0.3 and 0.6 within a 12,000-response horizon: the slow
    one (c = 1000, a sigmoid flattening at 0.65) reaches 0.6 in no run; the fast one (c = 300, towards 0.8)
    reaches both everywhere."""
    from analysis.data.clock_tables import ClockOptions, build_tables
    from analysis.fits.exponents import fit_conditions
    from analysis.synthetic import SyntheticSpec, records
    from rlvr_study.measure import measurement
    from rlvr_study.study_file import parse_study

    specs = [
        SyntheticSpec(
            sizes=SIZES_B,
            seeds=3,
            alpha=0.3,
            prefactor=c,
            sigma=0.2,
            gamma=None,
            b_noise=None,
            targets=(0.3, 0.6),
            budget=12000,
            eval_every=256,
            group_size=G,
            curve=curve,
            acc_max=top,
            overrides=(("lr.ref_lr", lr),),
            seed=k,
        )  # fmt: skip
        for k, (c, lr, curve, top) in enumerate(
            [(1000.0, 1e-6, "sigmoid", 0.65), (300.0, 1e-5, "exponential", 0.8)]
        )
    ]
    recs = [r for s in specs for r in records(s)]
    tables = build_tables(recs, ClockOptions(targets=(0.3, 0.6)))
    exps, fits = fit_conditions(tables, n_boot=100, joint_model=False)
    raw = {"name": "s", "sizes": [b // G for b in SIZES_B], "targets": [0.3, 0.6], "pilot_seeds": 3,
           "conditions": [{"lr.ref_lr": 1e-6}, {"lr.ref_lr": 1e-5}], "budget": {"responses": 1e7},
           "bootstrap": 100, "gain_targets": []}  # fmt: skip
    study = parse_study(raw)
    return study, measurement(study, tables, exps, fits), recs, raw


def test_a_target_is_beyond_the_horizon_at_a_size_where_most_runs_miss_it():
    import pandas as pd

    from rlvr_study.triage import beyond_horizon

    runs = pd.DataFrame(
        {"B": [32, 32, 32, 64, 64, 64, 128, 128], "t:censored": [0, 0, 1, 1, 1, 0, 1, 0]}
    ).astype({"t:censored": bool})
    assert beyond_horizon(runs, "t") == [(64.0, 2, 3)]  # 1 of 3 and 1 of 2 are not most
    assert beyond_horizon(runs, "other") == []


def test_a_target_beyond_the_horizon_is_not_chased_and_says_why(beyond):
    from rlvr_study.rounds import RoundBudget, plan_round
    from rlvr_study.triage import MET, NOT_IDENTIFIABLE, OPEN, triage

    study, m, _, _ = beyond
    t = triage(study, m)
    slow, fast = t.statuses[0], t.statuses[1]
    assert "target 0.6 not reached within the horizon (12,000 responses)" in slow.reason
    assert "3 of 3 runs at B=32" in slow.reason and "3 of 3 runs at B=256" in slow.reason
    assert fast.status in (MET, OPEN) and "not reached" not in fast.reason
    # the study asks for the common alpha (the default): it cannot be read without target 0.6, so the
    # condition gets no more runs, the reachable target's alpha named in the reason and not chased
    assert study.common and slow.status == NOT_IDENTIFIABLE and t.done == {0}
    assert "the common alpha needs every target within the horizon; no more runs" in slow.reason
    assert "not chased: alpha at 0.3 width" in slow.reason
    assert 0 not in set(t.widths["condition"]) and 1 in set(t.widths["condition"])
    assert t.notes and t.notes[0].startswith("condition 0:")
    # ... and not even the rest of the pilot's seeds: a 5-seed pilot on 3 seeds wants 2 more for
    # condition 1 only, and condition 0 keeps its 3 (they stay a prefix of condition 1's)
    five = dataclasses.replace(study, pilot_seeds=5, width=10.0)
    plan = plan_round(five, t.measurement(m), [], 12000, RoundBudget(1e12), done=t.done)
    assert plan.launches and {x.condition for x in plan.launches} == {1}
    assert all(x.seeds == [3, 4] for x in plan.launches)
    whole = plan_round(five, t.measurement(m), [], 12000, RoundBudget(1e12))
    assert 0 in {x.condition for x in whole.launches}  # without done, the pilot floor would fill it
    # per-target alphas asked for: the reachable target stays requested, on its own
    apart = dataclasses.replace(study, common=False)
    t = triage(apart, m)
    chased = t.widths[t.widths["condition"] == 0]
    assert list(chased["clock"]) == ["target:0.3"] and t.statuses[0].status != NOT_IDENTIFIABLE
    assert not t.done
    # every target beyond the horizon: not identifiable, nothing chased, no more runs
    only = dataclasses.replace(study, targets=[0.6])
    m6 = dataclasses.replace(m, widths=m.widths.assign(clock="target:0.6", target=0.6))
    m6.tables = dataclasses.replace(m.tables, targets=[0.6])
    t6 = triage(only, m6)
    assert t6.statuses[0].status == NOT_IDENTIFIABLE and "no more runs" in t6.statuses[0].reason
    assert 0 not in set(t6.widths["condition"])
    plan = plan_round(only, t6.measurement(m6), [], 12000, RoundBudget(1e12))
    assert all(x.condition != 0 for x in plan.launches)


def test_a_condition_beyond_its_horizon_moves_to_its_gain_targets(beyond):
    from rlvr_study.triage import MOVED, triage

    study, m, recs, _ = beyond
    study = dataclasses.replace(study, gain_targets=(0.5,))
    t = triage(study, m, records=recs)
    assert t.statuses[0].status == MOVED and "target 0.6 not reached" in t.statuses[0].reason
    rows = t.widths[t.widths["condition"] == 0]
    assert list(rows["clock"]) == ["gain:0.5"] and np.isfinite(rows["width"]).all()
    assert 0.05 < float(rows["target"].iloc[0]) < 0.6  # R0 + 0.5 (A - R0), reached within the horizon
    assert t.statuses[1].status != MOVED


def test_the_study_stops_when_what_is_left_is_met_or_beyond_its_horizon(beyond):
    from rlvr_study.cli import _stop
    from rlvr_study.rounds import RoundBudget, StopReason
    from rlvr_study.triage import triage

    study, m, _, _ = beyond
    met = dataclasses.replace(m, widths=m.widths.assign(goal=10.0))
    for common in (False, True):  # condition 0: its reachable target chased and met / not identifiable
        study = dataclasses.replace(study, width=10.0, common=common)
        t = triage(study, met)
        assert (t.widths["width"] <= t.widths["goal"]).all()
        assert list(t.widths["condition"]).count(0) == (0 if common else 1)
        assert t.any_beyond
        assert _stop(study, met, t, 1, RoundBudget(1e12)) is StopReason.WIDTHS_MET_OR_BEYOND
        # a pilot of more seeds than the runs hold: the stop waits for it, but not for condition 0's
        five = dataclasses.replace(study, pilot_seeds=5)
        assert _stop(five, met, t, 1, RoundBudget(1e12)) is None
    assert "not identifiable" in StopReason.WIDTHS_MET_OR_BEYOND.value
