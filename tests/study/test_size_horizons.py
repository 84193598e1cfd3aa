"""Horizons per (condition, size) (``horizon_per_size: true``, docs/study.md "Targets beyond the
horizon"): proposed from the pilot's crossings at each size in whole rollouts of that size and capped at
what the runs were read to, recorded in the state (keyed by P) and ``horizons.json`` (keyed by B), read
back by ``rlvr-analyze --horizon``, given to each run of a round and priced by the cost model."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analysis.data.clock_tables import build_tables, target_label
from analysis.synthetic import SyntheticSpec, records, write_sweep
from rlvr_study.cli import fix_horizons, round_jobs, study_horizons
from rlvr_study.measure import condition_labels, measure, proposed_horizon, proposed_size_horizons
from rlvr_study.plan import Truth, plan_design, run_responses, size_information
from rlvr_study.rounds import Launch, cost_model
from rlvr_study.study_file import horizon_at, parse_study

G = 8
BUDGET = 60000
SPEC = dict(sizes=(32, 64, 128), alpha=0.3, gamma=None, targets=(0.3, 0.5), budget=BUDGET, eval_every=128,
            b_noise=None, group_size=G)  # fmt: skip
STUDY = {"name": "s", "sizes": [4, 8, 16], "budget": {"responses": 1e7}, "targets": [0.3, 0.5],
         "horizon_factor": 2, "horizon_per_size": True, "bootstrap": 50}  # fmt: skip


def _expected(tables, label: str, factor: float = 2.0) -> dict[int, float]:
    """The per-size horizons by hand: factor times the slowest crossing of the top target at each size,
    rounded up to whole rollouts of it, at most the budget."""
    runs = tables.runs[tables.runs["condition"] == label]
    top = target_label(0.5)
    return {
        int(b // G): float(min(BUDGET, b * math.ceil(factor * at[top].max() / b)))
        for b, at in runs.groupby("B")
    }


def test_the_key_defaults_to_one_horizon_per_condition():
    assert parse_study({**STUDY, "horizon_per_size": False}).horizon_per_size is False
    assert parse_study({k: v for k, v in STUDY.items() if k != "horizon_per_size"}).horizon_per_size is False
    assert parse_study(STUDY).horizon_per_size is True


def test_per_size_horizons_are_whole_rollouts_of_each_size_and_capped_where_a_size_did_not_cross():
    tables = build_tables(records(SyntheticSpec(**SPEC, seeds=3, seed=5)))
    study = parse_study({**STUDY, "sizes": [4, 8, 16, 32]})  # P = 32 (B = 256): no pilot run
    label = condition_labels(study, tables)[0]
    got = proposed_size_horizons(study, tables, label, BUDGET, {4: G, 8: G, 16: G})
    want = _expected(tables, label)
    assert {p: got[p] for p in (4, 8, 16)} == want and got[32] == BUDGET
    for p, h in want.items():
        assert h % (p * G) == 0 and h < BUDGET  # whole rollouts of its own size, below the cap here
    assert want[4] < want[16]  # the small size crosses first: its horizon is the shorter
    # one horizon per condition: the reference (middle) size's, in whole rollouts of the largest size
    one = proposed_horizon(study, tables, label, BUDGET)
    assert one >= want[8] and one % 128 == 0
    # a run at B = 64 that never crossed: that size stays at what its runs were read to, the others move not
    at = tables.runs[tables.runs["B"] == 64]
    tables.runs.loc[at.index[0], f"{target_label(0.5)}:censored"] = True
    censored = proposed_size_horizons(study, tables, label, BUDGET, {4: G, 8: G, 16: G})
    assert censored[8] == BUDGET and censored[4] == want[4] and censored[16] == want[16]
    # a large factor: capped at what the runs were read to (the run budget)
    capped = proposed_size_horizons(parse_study({**STUDY, "horizon_factor": 1e4}), tables, label, BUDGET, {})
    assert set(capped.values()) == {BUDGET}


def test_round_jobs_give_each_run_its_sizes_horizon():
    study = parse_study({**STUDY, "conditions": [{"lr.ref_lr": 3e-6}, {"lr.ref_lr": 3e-5}]})
    horizons = {0: {4: 1024.0, 8: 30000.0}, 1: 2048.0}
    jobs = round_jobs(study, [Launch(0, [0], [4, 8, 16]), Launch(1, [1], [4])], horizons, run_budget=30000)
    head = ["lr.ref_lr=3e-06", "train.stop_at_targets=false"]
    assert jobs[0] == [
        *head,
        "eval.horizon=1024",
        "train.stop_at_responses=1024",
        "seed=0",
        "rollout.prompts_per_rollout=4",
    ]
    # at the run budget: read to it, trained to the budget it has anyway
    assert jobs[1] == [*head, "eval.horizon=30000", "seed=0", "rollout.prompts_per_rollout=8"]
    assert jobs[2] == [*head, "seed=0", "rollout.prompts_per_rollout=16"]  # no horizon at that size
    assert jobs[3][2:4] == [
        "eval.horizon=2048",
        "train.stop_at_responses=2048",
    ]  # one per condition: as before
    assert horizon_at(horizons, 0, 16) == math.inf and horizon_at(horizons, 1, 8) == 2048.0
    assert horizon_at(None, 0, 4) == math.inf


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    """A pilot's folder (3 seeds at B = 32, 64, 128) with its per-size horizons fixed."""
    folder = tmp_path_factory.mktemp("study") / "runs" / "s"
    write_sweep(folder, [SyntheticSpec(**SPEC, seeds=3, seed=7)])
    study = parse_study(STUDY)
    study.folder = folder
    m = measure(study)
    return study, m


def test_the_fixed_per_size_horizons_round_trip_through_the_state_and_rlvr_analyze(pilot, tmp_path, capsys):
    from analysis.cli import main as analyze

    study, m = pilot
    label = m.labels[0]
    want = _expected(m.tables, label)
    assert m.proposed_horizons == {0: want}
    state: dict = {}
    fixed = fix_horizons(study, state, m)
    assert fixed == {0: want} and study_horizons(json.loads(json.dumps(state))) == fixed
    assert state["horizons"] == {"0": {str(p): h for p, h in want.items()}}  # keyed by P
    by_b = json.loads((study.folder / "horizons.json").read_text())
    assert by_b == {label: {f"{p * G}": h for p, h in want.items()}}  # keyed by B
    printed = capsys.readouterr().out
    assert (
        f"condition 0: horizons B=32 {want[4]:g}, B=64 {want[8]:g}, B=128 {want[16]:g} responses" in printed
    )
    # the study's measurement reads every run to its size's horizon
    read = measure(study, fixed)
    assert dict(zip(read.tables.runs["B"], read.tables.runs["horizon"])) == {
        p * G: h for p, h in want.items()
    }
    # and rlvr-analyze --horizon horizons.json reads the folder the same way: same horizons and widths
    args = [str(study.folder), "--out", str(tmp_path), "--bootstrap", "50", "--targets", "0.3", "0.5"]
    assert analyze([*args, "--horizon", str(study.folder / "horizons.json"), "--no-plots", "--quiet"]) == 0
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert dict(zip(runs["B"], runs["horizon"])) == {p * G: h for p, h in want.items()}
    exps = pd.read_csv(tmp_path / "exponents.csv")
    for r in read.widths[read.widths["clock"].str.startswith("target:")].itertuples():
        row = exps[(exps["condition"] == r.label) & (exps["clock"] == r.clock)].iloc[0]
        assert row["ci_high"] - row["ci_low"] == pytest.approx(r.width, rel=1e-9)


def test_a_new_run_is_priced_at_its_sizes_horizon(pilot):
    study, m = pilot
    horizons = {0: {4: 1024.0, 8: 2048.0, 16: 4096.0}}
    costs = cost_model(study, m, BUDGET, horizons)
    for p, h in horizons[0].items():
        assert costs.responses[(0, p)] == run_responses(p * G, h) < BUDGET
    assert cost_model(study, m, BUDGET).responses[(0, 4)] == run_responses(32, BUDGET)


def test_the_planner_censors_each_size_at_its_own_horizon():
    """A plan's truth with a budget per size censors a run at each size as a truth with that size's
    budget alone would, and prices it at that size's budget."""
    base = dict(alpha=0.3, intercept=math.log(400.0), sigma=0.3)
    per_size = Truth(**base, budget=2000.0, budgets=((32.0, 2000.0), (256.0, 8000.0)))
    for b, h in ((32.0, 2000.0), (256.0, 8000.0), (64.0, 2000.0)):
        assert size_information(b, per_size)[1] == size_information(b, Truth(**base, budget=h))[1]
    assert size_information(256.0, per_size)[1] < size_information(256.0, Truth(**base, budget=2000.0))[1]
    design = plan_design([32.0, 256.0], [per_size], 0.5, min_seeds=2, max_runs=4)
    assert design.responses == 2 * run_responses(32, 2000) + 2 * run_responses(256, 8000)


@pytest.mark.parametrize(
    "content",
    [{"a": {"32": 0}}, {"a": {"x": 100}}, {"a": {}}, {"a": {"32": True}}, {"a": -1}, [100]],
    ids=["zero", "size_not_a_number", "empty", "bool", "negative", "not_a_mapping"],
)
def test_a_wrong_horizons_file_names_itself(content, tmp_path):
    from analysis.cli import read_horizons

    path = tmp_path / "horizons.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=r"--horizon: .*horizons.json must map condition labels"):
        read_horizons(str(path))


def test_horizons_files_and_options_take_both_forms(tmp_path):
    from analysis.cli import read_horizons
    from analysis.data.clock_options import ClockOptions, check_options

    path = tmp_path / "horizons.json"
    path.write_text(json.dumps({"b": 2048, "a": {"256": 4096, "32": 1024.0}}))
    assert read_horizons(str(path)) == (("a", ((32.0, 1024.0), (256.0, 4096.0))), ("b", 2048.0))
    check_options(ClockOptions(horizon=read_horizons(str(path))))
    check_options(ClockOptions(horizon=(("a", {32: 1024.0}),)))
    for bad in ((("a", ((32.0, -1.0),)),), (("a", ()),), (("a", {0: 5.0}),)):
        with pytest.raises(ValueError, match="horizon must be"):
            check_options(ClockOptions(horizon=bad))


def test_a_target_beyond_per_size_horizons_names_each_sizes_horizon():
    from rlvr_study.triage import _why, beyond_horizon, size_horizons

    runs = pd.DataFrame(
        {
            "B": [32.0, 32.0, 512.0, 512.0],
            "horizon": [2048.0, 2048.0, 8192.0, 8192.0],
            "target:0.5:censored": [False, False, True, True],
        }
    )
    missed = beyond_horizon(runs, "target:0.5")
    assert missed == [(512.0, 2, 2)] and size_horizons(runs) == {32.0: 2048.0, 512.0: 8192.0}
    why = _why("target 0.5", missed, size_horizons(runs))
    assert (
        why
        == "target 0.5 not reached within the horizon at their size by 2 of 2 runs at B=512 (horizon 8,192)"
    )
    one = runs.assign(horizon=8192.0)
    assert _why("target 0.5", missed, size_horizons(one)) == (
        "target 0.5 not reached within the horizon (8,192 responses) by 2 of 2 runs at B=512"
    )


def test_an_extended_pilot_stops_its_first_seeds_at_the_top_target_and_extends_them_once():
    """``extend_pilot``: the pilot's jobs of targets conditions stop at the top target (a failure-clock
    condition's never); once the horizons are fixed, the extension round is the pilot's targets jobs
    again with each size's horizon (the later runs' form, so the directories are the pilot's), once,
    and it does not count towards ``max_rounds``."""
    from rlvr_study.cli import _extension, _rounds_done

    study = parse_study(
        {
            **STUDY,
            "extend_pilot": True,
            "conditions": [{"lr.ref_lr": 3e-6}, {"lr.ref_lr": 1e-4, "clock": "failure"}],
        }
    )
    launches = [Launch(0, [0, 1], [4, 8]), Launch(1, [0, 1], [4, 8])]
    pilot = round_jobs(study, launches, {}, run_budget=30000, stop_at_top_target=True)
    assert pilot[0] == [
        "lr.ref_lr=3e-06",
        "train.stop_at_targets=false",
        "train.stop_at_accuracy=0.5",
        "seed=0",
        "rollout.prompts_per_rollout=4",
    ]
    assert all("train.stop_at_accuracy=0.5" not in j for j in pilot if "lr.ref_lr=0.0001" in j)
    state = {"rounds": [{"kind": "pilot", "launches": [dataclass_dict(x) for x in launches]}]}
    assert _extension(study, state) is None  # no horizons yet
    state["horizons"] = {"0": {"4": 1024.0, "8": 30000.0}}
    plan = _extension(study, state)
    assert [(x.condition, x.seeds, x.sizes) for x in plan.launches] == [(0, [0, 1], [4, 8])]
    jobs = round_jobs(study, plan.launches, study_horizons(state), run_budget=30000)
    assert jobs[0] == [
        "lr.ref_lr=3e-06",
        "train.stop_at_targets=false",
        "eval.horizon=1024",
        "train.stop_at_responses=1024",
        "seed=0",
        "rollout.prompts_per_rollout=4",
    ]
    assert jobs[1][2:3] == ["eval.horizon=30000"]  # at the run budget: trained to it
    state["extended"] = True
    assert _extension(study, state) is None
    state["rounds"] += [{"kind": "extend"}, {"kind": "adaptive"}]
    assert _rounds_done(state) == 2
    assert _extension(parse_study(STUDY), {**state, "extended": False}) is None  # off by default
    with pytest.raises(ValueError, match="extend_pilot"):
        parse_study({**STUDY, "extend_pilot": "yes"})
    with pytest.raises(ValueError, match="train.stop_at_accuracy"):
        parse_study({**STUDY, "overrides": ["train.stop_at_accuracy=0.3"]})


def dataclass_dict(x: Launch) -> dict:
    return {"condition": x.condition, "seeds": x.seeds, "sizes": x.sizes}


def test_horizons_fixed_in_the_study_file_are_the_pilots_and_the_studys(pilot, tmp_path, capsys):
    """Conditions' ``horizon``: the pilot trains to them (no stop at the top target, no extension), and
    they are the horizons the study fixes, whatever the pilot proposes, so that replicates of one study
    read the same estimand."""
    import dataclasses

    from rlvr_study.cli import _extension, _launch
    from rlvr_study.rounds import RoundPlan

    _, m = pilot
    preset = {4: 1024, 8: 2048, 16: 4096}
    conditions = [{"lr.ref_lr": 3e-6, "horizon": preset}, {"lr.ref_lr": 1e-4, "clock": "failure"}]
    study = parse_study({**STUDY, "extend_pilot": True, "conditions": conditions})
    study = dataclasses.replace(study, folder=tmp_path / "s")
    assert study.preset_horizons() == {0: {4: 1024.0, 8: 2048.0, 16: 4096.0}}
    assert study.condition_overrides(0) == ["lr.ref_lr=3e-06"]  # a directive, not an override
    state: dict = {"rounds": []}
    assert study_horizons(state, study) == study.preset_horizons() and study_horizons(state) == {}
    launches = [Launch(0, [0, 1], [4, 8, 16]), Launch(1, [0, 1], [4, 8, 16])]
    _launch(study, state, RoundPlan(launches, 0.0), "pilot", dry_run=True, run_budget=30000)
    jobs = [line.split() for line in capsys.readouterr().out.splitlines() if "seed=" in line]
    targets = [j for j in jobs if "lr.ref_lr=3e-06" in j]
    assert len(targets) == 6 and not any("train.stop_at_accuracy" in " ".join(j) for j in jobs)
    assert {(j[-1], j[2], j[3]) for j in targets} == {
        (f"rollout.prompts_per_rollout={p}", f"eval.horizon={h}", f"train.stop_at_responses={h}")
        for p, h in preset.items()
    }
    assert all("eval.horizon" not in " ".join(j) for j in jobs if "lr.ref_lr=0.0001" in j)
    # after the pilot the study fixes the file's horizons, not the ones its runs propose, and nothing is
    # extended
    one = dataclasses.replace(study, conditions=conditions[:1])
    one.folder = tmp_path / "one"
    fixed = fix_horizons(one, state, m)
    assert fixed == {0: {4: 1024.0, 8: 2048.0, 16: 4096.0}} != m.proposed_horizons
    assert json.loads((one.folder / "horizons.json").read_text()) == {
        m.labels[0]: {f"{p * G}": float(h) for p, h in preset.items()}
    }
    state["rounds"] = [{"kind": "pilot", "launches": [dataclass_dict(x) for x in launches]}]
    assert _extension(study, state) is None
    # what the file may say
    for bad, match in (
        ({"lr.ref_lr": 3e-6, "horizon": {4: 1024, 8: 2048}}, "one per size"),
        ({"lr.ref_lr": 3e-6, "horizon": -5}, "positive responses"),
        ({"lr.ref_lr": 3e-6, "horizon": {4: 1, 8: 1, 16: "x"}}, "positive responses"),
    ):
        with pytest.raises(ValueError, match=match):
            parse_study({**STUDY, "conditions": [bad]})
    with pytest.raises(ValueError, match="every targets condition or on none"):
        parse_study({**STUDY, "conditions": [conditions[0], {"lr.ref_lr": 1e-5}]})
    with pytest.raises(ValueError, match="horizon is for targets conditions"):
        parse_study({**STUDY, "conditions": [conditions[0], {**conditions[1], "horizon": 5000}]})
    assert parse_study({**STUDY, "conditions": [{"lr.ref_lr": 3e-6, "horizon": 8192}]}).preset_horizons() == {
        0: 8192.0
    }
