"""How far a run goes is not how it trains: ``train.stop_at_responses`` and ``train.stop_at_accuracy``
stop a run early, and a completed run relaunched with a later stop goes on from its last checkpoint to
exactly the run that was launched with that stop (rows, per-problem records, summary), in the same
directory; a relaunch that would not go further skips it, a failed run is never extended
(rlvr_scaling/run.py, ``_goes_further``)."""

from __future__ import annotations

import json

import pytest

from analysis.data.eval_records import EVAL_PROBLEMS
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.run import train
from tests.conftest import tiny_config

TIMING = ("wall_seconds",)


def _cfg(cache_dir, **kw):
    cfg = tiny_config(cache_dir, **{"train.max_responses": 96, "eval.every_responses": 16, **kw})
    cfg.eval.samples = 2
    cfg.eval.targets = [0.3, 0.6]
    cfg.failure.accuracy_collapse = None
    return cfg


def _rows(path) -> list[dict]:
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("perf/")} for r in rows]


def _status(path) -> dict:
    return json.loads((path / "status.json").read_text())


@pytest.fixture(scope="module")
def reference(cache_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("extend") / "reference"
    train(_cfg(cache_dir), path, log=lambda *_: None)
    return path


def test_a_run_stopped_early_and_extended_is_the_run_launched_to_the_later_stop(
    cache_dir, reference, tmp_path
):
    path, log = tmp_path / "run", []
    assert train(_cfg(cache_dir, **{"train.stop_at_responses": 48}), path, log=log.append) == "completed"
    assert _status(path)["clocks"]["responses"] == 48
    assert _rows(path) == [r for r in _rows(reference) if r["responses"] <= 48]
    # the same stop again: nothing further to train, skipped
    log.clear()
    assert train(_cfg(cache_dir, **{"train.stop_at_responses": 48}), path, log=log.append) == "completed"
    assert any(line.startswith("[skip]") for line in log)
    # a later stop: it goes on from its checkpoint, to exactly the run launched without the early stop
    log.clear()
    assert train(_cfg(cache_dir), path, log=log.append) == "completed"
    assert any(line.startswith("[extend]") and "completed at 48 responses" in line for line in log)
    assert _status(path)["clocks"]["responses"] == 96
    assert _rows(path) == _rows(reference)
    assert (path / EVAL_PROBLEMS).read_text() == (reference / EVAL_PROBLEMS).read_text()
    got, want = (json.loads((p / "summary.json").read_text()) for p in (path, reference))
    assert got["targets"] == want["targets"] and got["best"] == want["best"]


def test_stop_at_accuracy_stops_at_the_first_evaluation_that_reaches_it(cache_dir, reference, tmp_path):
    evals = [r for r in _rows(reference) if "eval/accuracy" in r]
    accs = [r["eval/accuracy"] for r in evals]
    # the tiny model barely learns: the level is what its step-0 evaluation reaches (the run stops
    # before its first rollout); a level no evaluation reaches lets it train to its budget
    level = accs[0]
    assert level > 0, f"the check needs an evaluation above 0: {accs}"
    first = next(r["responses"] for r in evals if r["eval/accuracy"] >= level)
    never = tmp_path / "never"
    train(_cfg(cache_dir, **{"train.stop_at_accuracy": max(accs) + 0.01}), never, log=lambda *_: None)
    assert _rows(never) == _rows(reference)
    path = tmp_path / "run"
    assert (
        train(_cfg(cache_dir, **{"train.stop_at_accuracy": level}), path, log=lambda *_: None) == "completed"
    )
    assert _status(path)["clocks"]["responses"] == first < 96
    # relaunched with the same stop: reached, skipped; without it: extended to the reference
    log: list[str] = []
    train(_cfg(cache_dir, **{"train.stop_at_accuracy": level}), path, log=log.append)
    assert any(line.startswith("[skip]") for line in log) and _status(path)["clocks"]["responses"] == first
    train(_cfg(cache_dir), path, log=lambda *_: None)
    assert _rows(path) == _rows(reference)


def test_the_stop_keys_are_validated_and_name_no_run(cache_dir):
    from omegaconf import OmegaConf

    from rlvr_scaling.compose import REPO_ROOT, compose
    from rlvr_scaling.config import validate

    for key, bad in (("train.stop_at_responses", 0), ("train.stop_at_accuracy", 1.5)):
        with pytest.raises(ConfigError, match=key):
            validate(_cfg(cache_dir, **{key: bad}))
    cfg = compose(["train.stop_at_responses=64", "train.stop_at_accuracy=0.3"])
    assert cfg.train.stop_point == min(64, cfg.train.max_responses) and cfg.train.stop_at_accuracy == 0.3
    excluded = OmegaConf.load(
        REPO_ROOT / "conf" / "config.yaml"
    ).hydra.job.config.override_dirname.exclude_keys
    assert {"train.stop_at_responses", "train.stop_at_accuracy", "train.stop_at_targets"} <= set(excluded)
