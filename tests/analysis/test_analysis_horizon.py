"""Crossings read to a horizon fixed before the runs, and brackets in whole rollouts (analysis/data/clock_tables.py).

The acceptance of the horizon: continuing or extending any run past its condition's horizon changes no
crossing. Checked on noisy synthetic curves (half the runs of a sweep get evaluations after the horizon,
with accuracies that would move an isotonic crossing if they were read) and on real runs of the embedded
default (tests/study/test_horizon_real.py).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest

from analysis.data.clock_tables import ClockOptions, build_tables, rollout_after
from analysis.data.load import RunRecord
from analysis.synthetic import SyntheticSpec, records

TARGET_COLUMNS = ("", ":lower", ":censored", ":censored_by", ":resolution_limited")


def _spec(**kw) -> SyntheticSpec:
    base = dict(
        sizes=(32, 64, 128, 256),
        seeds=4,
        alpha=0.3,
        prefactor=1500.0,
        sigma=0.25,
        gamma=None,
        targets=(0.3, 0.5),
        budget=12000,
        eval_every=256,
        acc_noise=0.03,
        b_noise=None,
        seed=3,
    )
    base.update(kw)
    return SyntheticSpec(**base)


def _extend(
    record: RunRecord, until: float, rng: np.random.Generator, level: float, record_horizon: bool = True
) -> RunRecord:
    """The same run continued past its budget to ``until``: more rollouts and evaluations whose
    accuracy sits at ``level`` plus noise (a late rise or a fall), and a larger budget in its config;
    with ``record_horizon`` its old budget recorded as its horizon (``eval.horizon``)."""
    rec = copy.deepcopy(record)
    if record_horizon:
        rec.config.setdefault("eval", {})["horizon"] = rec.config["train"]["max_responses"]
    size = float(rec.config["rollout"]["prompts_per_rollout"] * rec.config["rollout"]["group_size"])
    last = dict(rec.rows[-1])
    responses = float(last["responses"])
    while responses < until:
        responses += size
        row = {k: v for k, v in last.items() if not k.startswith("eval/")}
        row["responses"] = responses
        row["rollout"] = int(responses // size)
        rec.rows.append(row)
        if int(responses // size) % 3 == 0:
            rec.rows.append({**row, "eval/accuracy": float(np.clip(level + rng.normal(0, 0.05), 0, 1))})
    rec.config["train"]["max_responses"] = int(until)
    if isinstance(rec.summary, dict):
        rec.summary = {k: v for k, v in rec.summary.items() if k != "targets"}
    return rec


def _target_frame(tables, targets) -> pd.DataFrame:
    cols = [f"target:{a:g}{s}" for a in targets for s in TARGET_COLUMNS]
    return tables.runs.set_index("run")[cols].sort_index()


@pytest.mark.parametrize("crossing", ["interval", "isotonic"])
@pytest.mark.parametrize("level", [0.95, 0.0])
def test_continuing_half_the_runs_past_the_horizon_changes_no_crossing(crossing, level):
    recs = records(_spec())
    rng = np.random.default_rng(0)
    extended = [_extend(r, 40000, rng, level) if i % 2 else r for i, r in enumerate(recs)]
    opts = ClockOptions(crossing=crossing)
    before, after = build_tables(recs, opts), build_tables(extended, opts)
    assert (after.runs["horizon"] == 12000).all()  # the horizon the continued runs record
    assert after.runs["past_horizon"].all()
    pd.testing.assert_frame_equal(_target_frame(before, (0.3, 0.5)), _target_frame(after, (0.3, 0.5)))
    # without a horizon the same continuation moves crossings (what the horizon prevents)
    loose = ClockOptions(crossing=crossing, horizon=None)
    moved = _target_frame(build_tables(recs, loose), (0.3, 0.5)).compare(
        _target_frame(build_tables(extended, loose), (0.3, 0.5))
    )
    if crossing == "isotonic" or level > 0.5:
        assert len(moved) > 0


def test_a_run_continued_past_the_horizon_is_censored_there_with_its_cause():
    recs = records(_spec(targets=(0.3, 0.78), budget=6000))
    base = build_tables(recs).runs.set_index("run")
    never = [r for r in recs if base.loc[r.run, "target:0.78:censored"]]
    assert len(never) >= 2
    rng = np.random.default_rng(1)
    grown = {r.run for r in never[:1]}
    extended = [_extend(r, 20000, rng, 0.79) if r.run in grown else r for r in recs]
    runs = build_tables(extended).runs.set_index("run")
    for run in grown:  # reached 0.78 after the horizon only: censored there, as at its budget before
        row, was = runs.loc[run], base.loc[run]
        assert row["target:0.78:censored"] and row["target:0.78:censored_by"] == "budget"
        assert row["target:0.78"] == was["target:0.78"] <= 6000 + row["B"]
        assert row["final_responses"] >= 20000


def test_a_failure_detected_after_the_horizon_is_censored_at_the_horizon():
    recs = records(
        _spec(gamma=0.0, failure_prefactor=3000.0, failure_sigma=0.2, detection_delay=4, budget=40000)
    )
    failed = [r for r in recs if r.status["state"] == "failed"]
    assert failed
    tables = build_tables(recs, ClockOptions(horizon=2500.0))
    runs = tables.runs.set_index("run")
    straddle = 0
    for rec in failed:
        onset, detection = rec.status["failure"]["onset_responses"], rec.status["failure"]["responses"]
        row = runs.loc[rec.run]
        end = row["B"] * math.ceil(2500 / row["B"])  # the rollout that reaches the horizon
        if detection > end:  # whatever the onset: a run trained to the horizon would not have failed
            straddle += onset <= end
            last_row = max(r["responses"] for r in rec.rows if r["responses"] <= end)
            assert row["failure:censored"] and row["failure"] == last_row
            assert not row["summary_mismatch"] and "detected at" in row["notes"]
        else:
            assert not row["failure:censored"] and row["failure"] == onset
    assert straddle  # some onsets fall within the horizon and their detection after it


def _trained_to(horizon: int, budget: int, **kw) -> list[RunRecord]:
    """Runs of one spec trained to ``budget``; past the horizon they record it (``eval.horizon``)."""
    extra = (("eval.horizon", horizon),) if budget > horizon else ()
    return records(_spec(budget=budget, overrides=extra, **kw))


@pytest.mark.parametrize("crossing", ["interval", "isotonic"])
def test_a_run_trained_to_the_horizon_and_continued_past_it_contribute_the_same(crossing):
    """The synthetic generator's runs of one seed are the same trajectory whatever the budget: a run
    trained to H = 6,144 and the same run trained to 12,288 give the same failure and crossings, also
    where the failure's onset is within H and its detection after it (failed in the continued run,
    completed in the one trained to H)."""
    kw = dict(gamma=0.0, failure_prefactor=6000.0, failure_sigma=0.3, detection_delay=6, seed=11)
    short, long = _trained_to(6144, 6144, **kw), _trained_to(6144, 12288, **kw)
    straddle = [
        b.run
        for a, b in zip(short, long)
        if a.status["state"] == "completed"
        and b.status["state"] == "failed"
        and b.status["failure"]["onset_responses"] <= 6144
    ]
    assert len(straddle) >= 2
    cols = [f"target:{a:g}{s}" for a in (0.3, 0.5) for s in (*TARGET_COLUMNS, ":last_below")]
    cols += ["failure", "failure:lower", "failure:censored", "failure:detector", "failure:onset", "horizon"]
    opts = ClockOptions(crossing=crossing)
    alone = [build_tables(recs, opts).runs.set_index(["B", "seed"])[cols] for recs in (short, long)]
    pd.testing.assert_frame_equal(alone[0], alone[1])
    mixed = build_tables([*short, *long], opts).runs  # one condition: read to the one horizon
    assert mixed["condition"].nunique() == 1 and (mixed["horizon"] == 6144).all()
    for part in (mixed[mixed["run"].isin({r.run for r in recs})] for recs in (short, long)):
        pd.testing.assert_frame_equal(part.set_index(["B", "seed"])[cols], alone[0])


def test_runs_recording_different_horizons_are_each_read_to_their_own():
    """No minimum over the runs present: a run with a smaller budget added to a condition re-reads no
    other run, and the tables name the runs whose horizons disagree."""
    recs = records(_spec())
    short = copy.deepcopy(recs[0])
    short.run = "short_budget"
    short.rows = [r for r in short.rows if r["responses"] <= 3000]
    short.config["train"]["max_responses"] = 3000
    before = build_tables(recs)
    after = build_tables([*recs, short])
    assert before.messages == [] or not any("record different horizons" in m for m in before.messages)
    pd.testing.assert_frame_equal(
        _target_frame(after, (0.3, 0.5)).drop("short_budget"), _target_frame(before, (0.3, 0.5))
    )
    runs = after.runs.set_index("run")
    assert (
        runs.loc["short_budget", "horizon"] == 3000 and (runs.drop("short_budget")["horizon"] == 12000).all()
    )
    (message,) = [m for m in after.messages if "record different horizons" in m]
    assert "3000 (1 run(s): short_budget)" in message and "12000 (16 run(s)" in message


def test_runs_stopped_at_their_targets_are_reported():
    recs = records(_spec())
    stopped = copy.deepcopy(recs[0])
    stopped.rows = [r for r in stopped.rows if r["responses"] <= 3000]
    stopped.config["train"]["stop_at_targets"] = True
    tables = build_tables([stopped, *recs[1:]])
    assert any("stopped before the horizon" in m for m in tables.messages)
    assert stopped.run in set(tables.runs["run"])  # one condition still: the stop rule is bookkeeping
    assert tables.runs["condition"].nunique() == 1


def _hand_run(size: int, evals: list[tuple[int, float]], budget: int) -> RunRecord:
    rows = []
    for responses, acc in evals:
        if responses:
            rows.append({"rollout": responses // size, "responses": responses, "tokens": 10 * responses})
        rows.append(
            {
                "rollout": responses // size,
                "responses": responses,
                "tokens": 10 * responses,
                "eval/accuracy": acc,
            }
        )
    config = {
        "seed": 0,
        "rollout": {"prompts_per_rollout": size // 8, "group_size": 8},
        "train": {"max_responses": budget},
        "eval": {"targets": [0.3]},
    }
    return RunRecord(
        run=f"b{size}", path="mem", source="dir", config=config, rows=rows, status={"state": "completed"}
    )


def test_brackets_are_whole_rollouts_and_the_first_rollout_is_the_floor():
    # B = 64: evaluations at 0, 64 (first rollout), 256, 320; the target is met at 64 and at 320
    first = _hand_run(64, [(0, 0.1), (64, 0.35), (256, 0.4)], 256)
    later = _hand_run(32, [(0, 0.1), (64, 0.2), (96, 0.25), (160, 0.31)], 160)
    every = _hand_run(16, [(0, 0.1), (16, 0.2), (32, 0.31)], 32)
    runs = build_tables([first, later, every], ClockOptions(horizon=None)).runs.set_index("run")
    assert runs.loc["b64", "target:0.3"] == 64 and runs.loc["b64", "target:0.3:lower"] == 64  # exact: R = B
    assert runs.loc["b32", "target:0.3"] == 160 and runs.loc["b32", "target:0.3:lower"] == 128  # 96 + B
    assert runs.loc["b16", "target:0.3:lower"] == runs.loc["b16", "target:0.3"] == 32  # every rollout: exact
    continuous = build_tables([first, later], ClockOptions(horizon=None, discrete=False)).runs.set_index(
        "run"
    )
    assert continuous.loc["b64", "target:0.3:lower"] == 0 and continuous.loc["b32", "target:0.3:lower"] == 96


def test_rollout_after():
    assert rollout_after(0, 64) == 64 and rollout_after(96, 32) == 128 and rollout_after(100, 32) == 128
    assert rollout_after(-5, 8) == 8 and math.isclose(rollout_after(128, 32), 160)


PER_SIZE = {32.0: 4096.0, 64.0: 5120.0, 128.0: 8192.0}  # a horizon per rollout size (a study's)


def _size(record: RunRecord) -> float:
    return float(record.config["rollout"]["prompts_per_rollout"] * record.config["rollout"]["group_size"])


def test_a_horizon_fixed_per_size_reads_each_run_to_its_sizes():
    """``((condition, ((B, responses), ...)),)``: each run is read to its size's horizon, as the runs of
    that size alone read to that horizon; a run at a size the mapping lacks, to its own, with a message."""
    recs = records(_spec())
    label = build_tables(recs).runs["condition"].iloc[0]
    tables = build_tables(recs, ClockOptions(horizon=((label, tuple(sorted(PER_SIZE.items()))),)))
    horizons = dict(zip(tables.runs["B"], tables.runs["horizon"]))
    assert horizons == {**PER_SIZE, 256.0: 12000.0}  # B = 256 is not in the mapping: its own budget
    (message,) = [m for m in tables.messages if "no horizon at the size" in m]
    assert "of 4 run(s)" in message and "(B=256)" in message
    frame = _target_frame(tables, (0.3, 0.5))
    for b, h in PER_SIZE.items():
        alone = build_tables([r for r in recs if _size(r) == b], ClockOptions(horizon=h))
        pd.testing.assert_frame_equal(
            frame.loc[_target_frame(alone, (0.3, 0.5)).index], _target_frame(alone, (0.3, 0.5))
        )
    censored = tables.runs["target:0.3:censored"].groupby(tables.runs["B"]).mean()
    assert 0 < censored[32.0] < 1 and censored[256.0] == 0  # read to 4,096 some B = 32 runs miss 0.3
    # the same given as a mapping {B: responses}
    as_dict = build_tables(recs, ClockOptions(horizon=((label, {int(b): h for b, h in PER_SIZE.items()}),)))
    pd.testing.assert_frame_equal(_target_frame(as_dict, (0.3, 0.5)), frame)


def _per_size_study(recs: list[RunRecord], pilot_seeds: int = 2) -> list[RunRecord]:
    """The runs of a study with a horizon per size: the first ``pilot_seeds`` seeds (the pilot) set no
    ``eval.horizon``, the later ones their size's."""
    out = copy.deepcopy(recs)
    for r in out:
        if r.config["seed"] >= pilot_seeds and _size(r) in PER_SIZE:
            r.config.setdefault("eval", {})["horizon"] = PER_SIZE[_size(r)]
    return out


def test_auto_reads_each_size_to_the_eval_horizon_its_runs_set_the_pilots_too():
    """``auto`` where a condition's runs set one ``eval.horizon`` per size: every run of a size, the
    pilot's (which set none) included, is read to that size's, and no disagreement is reported; where one
    size has two, each run is read to its own and the message names them (one horizon per condition)."""
    recs = _per_size_study(records(_spec(sizes=(32, 64, 128))))
    assert {r.config["seed"] for r in recs} == {0, 1, 2, 3}
    tables = build_tables(recs)
    assert dict(zip(tables.runs["B"], tables.runs["horizon"])) == PER_SIZE
    assert not any("record different horizons" in m for m in tables.messages)
    label = tables.runs["condition"].iloc[0]
    fixed = build_tables(recs, ClockOptions(horizon=((label, tuple(PER_SIZE.items())),)))
    pd.testing.assert_frame_equal(_target_frame(tables, (0.3, 0.5)), _target_frame(fixed, (0.3, 0.5)))
    # one size with two values: as before, each run to its own (the pilot's: its budget), with a message
    odd = next(r for r in recs if _size(r) == 32.0 and r.config["seed"] == 3)
    odd.config["eval"]["horizon"] = 5000.0
    mixed = build_tables(recs).runs.set_index("run")
    assert mixed.loc[odd.run, "horizon"] == 5000.0
    pilot = [r.run for r in recs if r.config["seed"] < 2]
    assert (mixed.loc[pilot, "horizon"] == 12000.0).all()
    assert any("record different horizons" in m for m in build_tables(recs).messages)


def test_a_run_stopped_before_its_budget_records_where_it_stopped():
    """``train.stop_at_responses`` below the budget is where a run's config stops it: its horizon
    when it sets no ``eval.horizon``, and its budget (the failure clock's "never reached" point);
    ``eval.horizon`` wins where set; at or above the budget the budget stays."""
    from analysis.data.horizon import planned_horizon, run_stop_point

    cfg = {"train": {"max_responses": 16384, "stop_at_responses": 3072}}
    assert planned_horizon(cfg) == run_stop_point(cfg) == 3072.0
    assert planned_horizon({**cfg, "eval": {"horizon": 2048}}) == 2048.0
    assert run_stop_point({"train": {"max_responses": 16384, "stop_at_responses": 20000}}) == 16384.0
    assert run_stop_point({"train": {"max_responses": 16384, "stop_at_responses": None}}) == 16384.0
    assert math.isinf(run_stop_point({}))
