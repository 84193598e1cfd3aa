"""Per-run clocks and condition grouping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clock_rows import clocks

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.data.load import load_source
from analysis.synthetic import SyntheticSpec, make_config, simulate, write_sweep

B = 64


def _write(root: Path, name: str, accuracies: list[float], state="completed", failure=None, summary=None):
    """A run with evaluations every 512 responses (first at 0) and a train row before each."""
    path = root / name
    path.mkdir(parents=True)
    config = make_config(SyntheticSpec(targets=(0.3, 0.5)), B, 0)
    config["run"]["name"] = name
    import yaml

    (path / "config.yaml").write_text(yaml.safe_dump(config))
    rows = []
    for i, acc in enumerate(accuracies):
        if i:
            rows.append({**clocks(512 * i), "train/reward_mean": acc})
        rows.append({**clocks(512 * i), "eval/accuracy": acc})
    if failure is not None:
        rows.append({**clocks(failure), "train/reward_mean": 0.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fail = (
        None
        if failure is None
        else {"detector": "reward_collapse", "reason": "x", "responses": failure, "rollout": 1}
    )
    status = {"state": state, "failure": fail, "clocks": rows[-1], "git": None, "versions": {}, "host": "h"}
    (path / "status.json").write_text(json.dumps(status))
    if summary is not None:
        (path / "summary.json").write_text(json.dumps(summary))
    return path


def _table(root: Path, **opts):
    return build_tables(load_source(str(root)).runs, ClockOptions(**opts))


def test_target_is_first_evaluation_at_or_above(tmp_path: Path):
    _write(tmp_path, "r", [0.1, 0.2, 0.3, 0.45, 0.4, 0.6])
    run = _table(tmp_path).runs.iloc[0]
    assert run["target:0.3"] == 1024 and not run["target:0.3:censored"]  # equality counts
    assert run["target:0.5"] == 2560 and not run["target:0.5:censored"]
    assert run["failure"] == 2560 and run["failure:censored"]  # completed: censored at the end
    assert run["B"] == B and run["seed"] == 0 and run["state"] == "completed"


def test_unreached_target_is_censored_at_last_evaluation(tmp_path: Path):
    _write(tmp_path, "r", [0.1, 0.2, 0.35, 0.4])
    run = _table(tmp_path).runs.iloc[0]
    assert run["target:0.5"] == 1536 and run["target:0.5:censored"]
    assert run["target:0.5:censored_by"] == "budget" and run["target:0.5:last_below"] == 1536


def test_failed_first_target_is_censored_at_the_failure_time(tmp_path: Path):
    # the run stops being at risk of reaching the target when it fails (the competing event): censored
    # there, as the cumulative incidence counts it, not at its last evaluation
    _write(tmp_path, "r", [0.1, 0.2, 0.35, 0.4], state="failed", failure=1600)
    run = _table(tmp_path).runs.iloc[0]
    assert run["target:0.5"] == 1600 and run["target:0.5:censored"]
    assert run["target:0.5:censored_by"] == "failure" and run["target:0.5:last_below"] == 1536
    assert run["failure"] == 1600 and not run["failure:censored"]
    assert run["failure:detector"] == "reward_collapse"


def test_interpolation_is_optional_and_flagged(tmp_path: Path):
    _write(tmp_path, "r", [0.1, 0.2, 0.4, 0.6])
    plain = _table(tmp_path).runs.iloc[0]
    interp = _table(tmp_path, crossing="interpolate").runs.iloc[0]
    assert plain["target:0.3"] == 1024 and not plain["target:0.3:interpolated"]
    assert interp["target:0.3"] == pytest.approx(512 + 0.5 * 512) and interp["target:0.3:interpolated"]


def test_resolution_limited_points_are_flagged(tmp_path: Path):
    _write(tmp_path, "coarse", [0.1, 0.35, 0.4, 0.6])  # 0.3 reached at the first eval after step 0
    _write(tmp_path, "fine", [0.1] * 9 + [0.35, 0.4, 0.6])  # at 4608 with spacing 512 < 4608 / 8
    runs = _table(tmp_path).runs.set_index("run")
    assert runs.loc["coarse", "target:0.3:resolution_limited"]
    assert not runs.loc["fine", "target:0.3:resolution_limited"]
    assert runs.loc["fine", "target:0.5:resolution_limited"] == (512 > 0.25 * 5632)
    # a bracket of 512 at 2560 (0.2 of R_T: the default geometric schedule's brackets are 0.16) is
    # resolved at the default 1/4, flagged at a stricter 1/8
    _write(tmp_path, "medium", [0.1] * 5 + [0.35, 0.4, 0.6])
    assert not _table(tmp_path).runs.set_index("run").loc["medium", "target:0.3:resolution_limited"]
    strict = _table(tmp_path, resolution_frac=0.125).runs.set_index("run")
    assert strict.loc["medium", "target:0.3:resolution_limited"]


def test_target_met_at_step_zero_is_noted_and_not_fitted(tmp_path: Path):
    _write(tmp_path, "r", [0.35, 0.4, 0.6])
    run = _table(tmp_path).runs.iloc[0]
    assert run["target:0.3"] == 0 and "already met at step 0" in run["notes"]


def test_other_clocks_use_the_same_row(tmp_path: Path):
    _write(tmp_path, "r", [0.1, 0.2, 0.3, 0.6], state="failed", failure=1600)
    run = _table(tmp_path, clock="tokens").runs.iloc[0]
    assert run["target:0.3"] == 10240 and run["failure"] == 16000 and run["clock_unit"] == "tokens"


def test_disagreement_with_summary_json_is_flagged(tmp_path: Path):
    summary = {
        "derived": {"responses_per_rollout": B},
        "targets": {"0.3": {"responses": 512, "reached": True}, "0.5": {"responses": None, "reached": False}},
        "failure": {"responses": 1600, "failed": True},
    }
    _write(tmp_path, "r", [0.1, 0.2, 0.3, 0.6], state="failed", failure=1664, summary=summary)
    run = _table(tmp_path).runs.iloc[0]
    assert run["summary_mismatch"]
    assert "summary.json target:0.3" in run["notes"] and "summary.json target:0.5" in run["notes"]
    assert "summary.json failure" in run["notes"]
    assert run["target:0.3"] == 1024 and run["failure"] == 1664  # recomputed values win


def test_failure_clock_cross_checked_against_metrics(tmp_path: Path):
    path = _write(tmp_path, "r", [0.1, 0.2, 0.3], state="failed", failure=1600)
    status = json.loads((path / "status.json").read_text())
    status["failure"]["responses"] = 2000
    (path / "status.json").write_text(json.dumps(status))
    run = _table(tmp_path).runs.iloc[0]
    assert run["failure"] == 2000 and "metrics end at 1600" in run["notes"]


def test_loaded_clocks_equal_simulation(tmp_path: Path):
    """The files the generator writes give back exactly the clocks it simulated (the coverage benchmark
    relies on this to fit simulated clocks without writing files)."""
    spec = SyntheticSpec(sizes=(32, 128, 512), seeds=3, alpha=0.4, budget=20000, seed=3)
    runs = write_sweep(tmp_path, spec)
    table = _table(tmp_path).runs.set_index("name")
    assert len(table) == len(runs)
    censored = 0
    for run in runs:
        row = table.loc[run.config["run"]["name"]]
        for clock in ("target:0.3", "target:0.5", "failure"):
            assert (row[clock], row[f"{clock}:censored"]) == tuple(run.truth[clock])
            censored += run.truth[clock][1]
        assert not row["summary_mismatch"] and row["notes"] == ""
    assert censored > 0


def test_conditions_group_everything_but_size_seed_and_bookkeeping(tmp_path: Path):
    write_sweep(
        tmp_path,
        [SyntheticSpec(seeds=2, seed=1), SyntheticSpec(seeds=2, seed=2, overrides=(("lr.ref_lr", 1e-5),))],
    )
    tables = _table(tmp_path)
    runs = tables.runs
    assert tables.varying_keys == ["lr.ref_lr"]
    assert sorted(runs["condition"].unique()) == ["lr.ref_lr=1e-05", "lr.ref_lr=1e-06"]
    assert "seed" not in tables.condition_keys and "rollout.prompts_per_rollout" not in tables.condition_keys
    assert not any(k.startswith(("run.", "logger.")) for k in tables.condition_keys)
    assert "lr.ref_lr" in runs.columns and runs.groupby("condition")["B"].nunique().eq(4).all()
    merged = _table(tmp_path, ignore_keys=("lr.ref_lr",))
    assert list(merged.runs["condition"].unique()) == ["all"]
    only = _table(tmp_path, condition_keys=("lr",))
    assert all(k.startswith("lr.") for k in only.condition_keys) and only.runs["condition"].nunique() == 2


def test_key_that_changes_with_size_is_pointed_out(tmp_path: Path):
    for size in (32, 64):
        runs = simulate(
            SyntheticSpec(sizes=(size,), seeds=2, seed=size, overrides=(("eval.samples", size // 8),))
        )
        from analysis.synthetic import write_run_dirs

        write_run_dirs(runs, tmp_path)
    tables = _table(tmp_path)
    assert tables.runs["condition"].nunique() == 2
    assert any("eval.samples" in m for m in tables.messages)
