"""Sampled completions: ``samples.jsonl`` content, schedule, bounds, resume, and the wandb table."""

from __future__ import annotations

import json

import pytest

from rlvr_scaling.config import validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.run import train
from rlvr_scaling.samples import COLUMNS
from tests.conftest import tiny_config


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _cfg(cache_dir, **over):
    base = {
        "train.max_responses": 80,  # 5 rollouts of 16
        "logger.samples.every_rollouts": 2,
        "logger.samples.prompts": 2,
        "logger.samples.max_chars": 3,
    }
    cfg = tiny_config(cache_dir, **{**base, **over})
    for name in ("accuracy_collapse", "reward_collapse", "kl_blowup", "entropy_collapse", "length_blowup"):
        setattr(cfg.failure, name, None)  # runs end at their budget
    return cfg


def test_samples_jsonl_rows_join_the_metrics(cache_dir, tmp_path, varied_rewards):
    cfg = _cfg(cache_dir)
    assert train(cfg, tmp_path, log=lambda *_: None) == "completed"
    samples = _lines(tmp_path / "samples.jsonl")
    metrics = {r["rollout"]: r for r in _lines(tmp_path / "metrics.jsonl") if "train/reward_mean" in r}
    g = cfg.rollout.group_size
    # rollouts 1, 3, 5; the first two prompts with all G responses each
    assert sorted({s["rollout"] for s in samples}) == [1, 3, 5]
    assert len(samples) == 3 * 2 * g
    for s in samples:
        assert tuple(s) == COLUMNS
        assert s["responses"] == metrics[s["rollout"]]["responses"]  # the training row's clocks
        assert s["prompt_index"] in (0, 1)
        assert len(s["prompt"]) <= 3 and len(s["response"]) <= 3  # max_chars, cut with an ellipsis
        assert s["reward"] in (0.0, 1.0)  # varied_rewards: even number of characters scores 1
        assert 1 <= s["length"] <= cfg.rollout.max_new_tokens
    for r in (1, 3, 5):  # advantages are GRPO's: zero-mean within each logged group
        for j in (0, 1):
            adv = [s["advantage"] for s in samples if s["rollout"] == r and s["prompt_index"] == j]
            assert len(adv) == g and abs(sum(adv)) < 1e-4


def test_samples_off_bounded_and_resumed(cache_dir, tmp_path, varied_rewards):
    assert train(_cfg(cache_dir, **{"logger.samples.every_rollouts": 0}), tmp_path / "off") == "completed"
    assert not (tmp_path / "off" / "samples.jsonl").exists()
    # bounded: the file stops after the write that passes max_mb
    lines = []
    cfg = _cfg(cache_dir, **{"logger.samples.max_mb": 1e-6, "logger.samples.every_rollouts": 1})
    assert train(cfg, tmp_path / "small", log=lines.append) == "completed"
    assert {s["rollout"] for s in _lines(tmp_path / "small" / "samples.jsonl")} == {1}
    assert any("max_mb" in str(x) for x in lines)
    # resumed: a run stopped after 2 rollouts, continued to the end, has each rollout's samples once
    cfg = _cfg(cache_dir, **{"logger.samples.every_rollouts": 1, "run.checkpoint_every_rollouts": 1})
    cfg.run.stop_after_rollouts = 2
    assert train(cfg, tmp_path / "resumed", log=lambda *_: None) == "preempted"
    with open(tmp_path / "resumed" / "samples.jsonl", "a") as fh:  # written after the checkpoint
        fh.write(json.dumps({"rollout": 3, "response": "stale"}) + "\n")
    cfg.run.stop_after_rollouts = None
    assert train(cfg, tmp_path / "resumed", log=lambda *_: None) == "completed"
    rollouts = [s["rollout"] for s in _lines(tmp_path / "resumed" / "samples.jsonl")]
    assert sorted(set(rollouts)) == [1, 2, 3, 4, 5]
    assert all(rollouts.count(r) == 2 * cfg.rollout.group_size for r in set(rollouts))


def test_samples_config_errors(cache_dir):
    for key, value in (("every_rollouts", -1), ("prompts", 0), ("max_mb", 0.0)):
        with pytest.raises(ConfigError, match=f"logger.samples.{key}"):
            validate(_cfg(cache_dir, **{f"logger.samples.{key}": value}))


def test_wandb_offline_table(cache_dir, tmp_path, varied_rewards, monkeypatch):
    """logger=wandb (offline): the samples reach wandb as an incremental table (its JSON parts in the
    offline run folder hold the rows of samples.jsonl)."""
    from rlvr_scaling.config import LoggerConfig

    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = _cfg(cache_dir, **{"logger.samples.max_chars": 2000})
    cfg.logger = LoggerConfig(name="wandb", mode="offline", samples=cfg.logger.samples)
    assert train(cfg, tmp_path, log=lambda *_: None) == "completed"
    parts = sorted(tmp_path.glob("wandb/offline-run-*/files/media/table/samples_*.table.json"))
    assert parts, sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.json"))
    rows = [row for p in parts for row in json.loads(p.read_text())["data"]]
    columns = json.loads(parts[0].read_text())["columns"]
    assert columns == list(COLUMNS)
    expected = [[s[c] for c in COLUMNS] for s in _lines(tmp_path / "samples.jsonl")]
    assert len(rows) == len(expected) == 3 * 2 * cfg.rollout.group_size
    assert sorted(map(json.dumps, rows)) == sorted(map(json.dumps, expected))
