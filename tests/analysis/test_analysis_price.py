"""``rlvr-plan --throughput-from RUN_DIR`` (rlvr_study/price.py): a design priced at a real run's measured
responses/s and FLOPs per response, and on one H100 at a stated peak and MFU."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rlvr_study.plan_cli import main
from rlvr_study.price import ASSUMED_MFU, H100_PEAK_FLOPS

STATED = ["--sigma", "0.21", "--alpha", "0.3", "--prefactor", "20", "--sizes", "16", "32", "64"]
STATED += ["--budget", "256", "--eval-every", "64", "--min-seeds", "3", "--width", "0.5"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, cache_dir):
    """A real run of the tiny configuration (the embedded model, 64 responses; a few seconds)."""
    from rlvr_scaling.run import train
    from tests.conftest import tiny_config

    root = tmp_path_factory.mktemp("price")
    run_dir = root / "run"
    train(tiny_config(cache_dir), run_dir, log=lambda *_: None)
    return run_dir


def _clocks(run_dir) -> tuple[float, float, float, float]:
    """responses, wall seconds, evaluation seconds and flops, read off metrics.jsonl directly."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    eval_s = sum(r.get("perf/eval_s", 0.0) + r.get("perf/eval_screen_s", 0.0) for r in rows)
    return last["responses"], last["wall_seconds"], eval_s, last["flops"]


@pytest.mark.parametrize("flags", [[], ["--mfu", "0.25", "--peak-flops", "1e15"]])
def test_the_cost_is_responses_over_the_measured_rate_and_flops_over_peak_times_mfu(
    real_run, tmp_path, capsys, flags
):
    responses, wall, eval_s, flops = _clocks(real_run)
    assert responses == 64 and wall > eval_s > 0 and flops > 0
    out = tmp_path / "plan"
    assert main([*STATED, "--throughput-from", str(real_run), "--out", str(out), *flags]) == 0
    printed = capsys.readouterr().out
    peak = float(flags[3]) if flags else H100_PEAK_FLOPS
    mfu = float(flags[1]) if flags else ASSUMED_MFU
    assert f"{responses / wall:.3g} responses/s over the whole run" in printed
    assert f"{responses / (wall - eval_s):.3g} without evaluation" in printed
    assert f"at an assumed {mfu * 100:g} % MFU" in printed
    for name in ("plan.csv", "plan_difference.csv"):
        table = pd.read_csv(out / name)
        assert len(table) == 1 and "h100_hours" in printed
        design = table["responses"].iloc[0]
        assert design >= 3 * (256 + 256 + 256)  # at least 3 runs of the budget at each of 3 sizes
        expect = {
            "wall_hours_serial": design / (responses / wall) / 3600,
            "hours_no_eval": design / (responses / (wall - eval_s)) / 3600,
            "h100_hours": design * (flops / responses) / (peak * mfu) / 3600,
        }
        for column, value in expect.items():
            assert math.isclose(table[column].iloc[0], value, rel_tol=1e-9), (name, column)


def test_an_unreadable_run_directory_fails_naming_the_flag(real_run, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([*STATED, "--throughput-from", str(empty)]) == 2
    assert "--throughput-from" in capsys.readouterr().err
    assert main([*STATED, "--throughput-from", str(tmp_path / "missing")]) == 2
    assert "--throughput-from" in capsys.readouterr().err
    # a run that never trained: its only row is the evaluation at 0 responses
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "config.yaml").write_text((real_run / "config.yaml").read_text())
    first = (real_run / "metrics.jsonl").read_text().splitlines()[0]
    (untrained / "metrics.jsonl").write_text(first + "\n")
    assert main([*STATED, "--throughput-from", str(untrained)]) == 2
    err = capsys.readouterr().err
    assert "--throughput-from" in err and "not a run that trained" in err


def test_the_measured_rate_replaces_a_stated_one(real_run, capsys):
    assert main([*STATED, "--throughput-from", str(real_run), "--throughput", "16:3"]) == 2
    assert "leave out --throughput" in capsys.readouterr().err
    assert main([*STATED, "--throughput-from", str(real_run), "--mfu", "0"]) == 2
    assert "--mfu" in capsys.readouterr().err


def test_the_measured_rate_replaces_a_pilots_wall_clock(real_run, tmp_path, capsys):
    """With pilot runs, the measured run's rate prices every condition in place of the pilot's own
    wall_seconds clock (0.5 + 0.01 B s per rollout in the synthetic runs)."""
    from analysis.synthetic import SyntheticSpec, write_sweep

    spec = SyntheticSpec(sizes=(32, 64, 128), seeds=3, gamma=None, b_noise=None, targets=(0.3,), seed=5)
    write_sweep(tmp_path / "pilot", spec)
    responses, wall, _, flops = _clocks(real_run)
    out = tmp_path / "plan"
    argv = [str(tmp_path / "pilot"), "--bootstrap", "20", "--width", "0.3", "--out", str(out)]
    assert main([*argv, "--throughput-from", str(real_run)]) == 0
    plan = pd.read_csv(out / "plan.csv")
    assert len(plan) == 1
    row = plan.iloc[0]
    assert math.isclose(row["wall_hours_serial"], row["responses"] * wall / responses / 3600, rel_tol=1e-9)
    assert math.isclose(
        row["h100_hours"], row["responses"] * flops / responses / (H100_PEAK_FLOPS * ASSUMED_MFU) / 3600
    )
    assert main([*argv, "--out", str(tmp_path / "own")]) == 0  # the pilot's own clock gives another cost
    own = pd.read_csv(tmp_path / "own" / "plan.csv").iloc[0]
    assert own["responses"] == row["responses"] and "h100_hours" not in own
    assert not math.isclose(own["wall_hours_serial"], row["wall_hours_serial"])
