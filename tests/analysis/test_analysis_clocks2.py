"""Clocks of the new contract: interval bounds, failure onset vs detection, optimizer_steps, noise
summaries, censoring causes, new metric keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from clock_rows import clocks

from analysis.data.clock_tables import ClockOptions, build_tables, noise_summary
from analysis.data.load import load_source
from analysis.synthetic import SyntheticSpec, make_config

B = 64


def _run(root: Path, name: str, accuracies, failure=None, onset=None, extra_train=None):
    path = root / name
    path.mkdir(parents=True)
    config = make_config(SyntheticSpec(targets=(0.3, 0.5)), B, 0)
    config["run"]["name"] = name
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    rows = []
    for i, acc in enumerate(accuracies):
        if i:
            rows.append({**clocks(512 * i), "train/reward_mean": acc, **(extra_train or {})})
        rows.append({**clocks(512 * i), "eval/accuracy": acc, "eval/responses": 256})
    if failure is not None:
        rows.append({**clocks(failure), "train/reward_mean": 0.0})
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fail = None
    if failure is not None:
        fail = {"detector": "accuracy_collapse", "reason": "x", "responses": failure, "rollout": failure // B}
        if onset is not None:
            fail.update(onset_responses=onset, onset_rollout=onset // B)
    status = {
        "state": "failed" if failure is not None else "completed",
        "failure": fail,
        "clocks": rows[-1],
        "git": None,
        "versions": {},
        "host": "h",
    }
    (path / "status.json").write_text(json.dumps(status))
    return path


def test_interval_bounds_and_left_censoring(tmp_path):
    _run(tmp_path, "a", [0.1, 0.2, 0.35, 0.6])  # evaluations at 0, 512, 1024, 1536
    _run(tmp_path, "b", [0.1, 0.4, 0.45, 0.55])  # 0.3 at the first evaluation after step 0: (0, 512]
    runs = build_tables(load_source(str(tmp_path)).runs).runs.set_index("run")
    # whole rollouts (B = 64): the crossing came with a rollout after the evaluation below it
    assert runs.loc["a", "target:0.3"] == 1024 and runs.loc["a", "target:0.3:lower"] == 512 + B
    assert runs.loc["a", "target:0.5"] == 1536 and runs.loc["a", "target:0.5:lower"] == 1024 + B
    assert runs.loc["b", "target:0.3"] == 512 and runs.loc["b", "target:0.3:lower"] == B  # R >= B
    loose = build_tables(load_source(str(tmp_path)).runs, ClockOptions(discrete=False)).runs.set_index("run")
    assert loose.loc["a", "target:0.3:lower"] == 512 and loose.loc["b", "target:0.3:lower"] == 0
    exact = build_tables(load_source(str(tmp_path)).runs, ClockOptions(crossing="exact")).runs
    assert exact["target:0.3:lower"].isna().all()


def test_failure_onset_default_detection_optional_and_fallback(tmp_path):
    _run(tmp_path, "new", [0.1, 0.35, 0.4], failure=1600, onset=1088)
    _run(tmp_path, "old", [0.1, 0.35, 0.4], failure=1600)  # written before onsets were recorded
    loaded = load_source(str(tmp_path)).runs
    runs = build_tables(loaded).runs.set_index("run")
    assert runs.loc["new", "failure"] == 1088 and runs.loc["new", "failure:detection"] == 1600
    assert runs.loc["new", "failure:onset"] == 1088 and runs.loc["new", "failure:time"] == "onset"
    assert runs.loc["old", "failure"] == 1600 and math.isnan(runs.loc["old", "failure:onset"])
    assert "detection time used" in runs.loc["old", "notes"]
    det = build_tables(loaded, ClockOptions(failure_time="detection")).runs.set_index("run")
    assert det.loc["new", "failure"] == 1600
    # other clocks: the clock of the last row with responses <= onset (the evaluation row at 1024)
    steps = build_tables(loaded, ClockOptions(clock="optimizer_steps")).runs.set_index("run")
    assert steps.loc["new", "failure"] == 1024 // B * 8
    assert steps.loc["new", "failure:detection"] == 1600 // B * 8
    assert steps.loc["new", "target:0.3"] == 512 // B * 8


def test_censored_by_failure_or_budget_and_unknown_keys(tmp_path):
    _run(
        tmp_path,
        "failed",
        [0.1, 0.2, 0.25],
        failure=1100,
        onset=1100,
        extra_train={"train/kl_old_seq": 0.01, "rollout/mismatch_kl": 1e-4, "rollout/drawn_prompts": 8},
    )
    _run(tmp_path, "budget", [0.1, 0.2, 0.25])
    runs = build_tables(load_source(str(tmp_path)).runs).runs.set_index("run")
    assert runs.loc["failed", "target:0.3:censored_by"] == "failure"
    assert runs.loc["budget", "target:0.3:censored_by"] == "budget"
    assert runs.loc["budget", "target:0.3:censored"] and runs.loc["budget", "failure:censored"]
    assert not runs.loc["failed", "failure:censored"] and runs.loc["failed", "failure"] == 1100


def test_binomial_standard_error_of_evaluations(tmp_path):
    _run(tmp_path, "a", [0.1, 0.5])
    evals = build_tables(load_source(str(tmp_path)).runs).evals
    np.testing.assert_allclose(evals["eval/accuracy_se"], np.sqrt([0.1 * 0.9 / 256, 0.25 / 256]))


def test_noise_summary_is_a_ratio_of_means():
    rows = [
        {"responses": 64, "noise/trace_cov": 2.0, "noise/grad_norm_sq": 0.01, "noise/b_noise": 200.0},
        {"responses": 128, "noise/trace_cov": 4.0, "noise/grad_norm_sq": -0.01, "noise/b_noise": -400.0},
        {"responses": 192, "noise/trace_cov": 3.0, "noise/grad_norm_sq": 0.03, "noise/b_noise": 100.0},
        {"responses": 192, "eval/accuracy": 0.5},
        {"responses": 256, "noise/trace_cov": "nan", "noise/grad_norm_sq": "nan", "noise/b_noise": "nan"},
        {"responses": 320, "noise/trace_cov": 100.0, "noise/grad_norm_sq": 0.001, "noise/b_noise": 1e5},
    ]
    s = noise_summary(rows, until=256)
    assert s["noise:b_noise"] == pytest.approx(3.0 / 0.01)  # (2+4+3)/3 over (0.01-0.01+0.03)/3
    assert s["noise:n_rows"] == 3 and s["noise:b_noise_median"] == pytest.approx(100.0)
    assert math.isnan(noise_summary(rows[4:5])["noise:b_noise"])  # K = 1: NaN, no estimate
