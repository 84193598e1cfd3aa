"""A run stopped after 3 rollouts and resumed from its checkpoint logs exactly the rows of the
uninterrupted run, with each algorithm axis on (and all of them at once)."""

from __future__ import annotations

import json

import pytest

from rlvr_scaling.algorithms.baselines import ReMaxParams
from rlvr_scaling.run import train
from rlvr_scaling.trainer import Trainer
from tests.algorithms.test_dynamic_sampling import no_detectors
from tests.conftest import tiny_config

OPTIONS = {
    "gspo": {
        "loss.name": "gspo",
        "loss.clip": 3e-4,
        "loss.clip_high": 4e-4,
        "loss.aggregation": "sequence_mean",
    },
    "cispo": {"loss.name": "cispo", "loss.clip": 1.0, "loss.clip_high": 0.28},
    "dual_clip": {"loss.dual_clip": 3.0},
    "dynamic_sampling": {
        "rollout.dynamic_sampling": True,
        "rollout.max_generation_batches": 3,
        "baseline": "remax",
    },
    "staleness": {"rollout.staleness": 2},
    "all": {
        "loss.name": "gspo",
        "loss.dual_clip": 2.0,
        "rollout.dynamic_sampling": True,
        "rollout.staleness": 1,
    },
}


def _config(cache_dir, options):
    options = dict(options)
    if options.pop("baseline", None) == "remax":
        options["baseline"] = ReMaxParams()
    cfg = tiny_config(cache_dir, **options)
    cfg.train.max_responses = 112
    cfg.run.checkpoint_every_rollouts = 100  # the only checkpoint is the one at the stop
    no_detectors(cfg)
    return cfg


def _rows(run_dir):
    out = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "wall_seconds" and not k.startswith("perf/")} for r in out]


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_resume_is_bit_identical(cache_dir, tmp_path, monkeypatch, varied_rewards, option):
    train(_config(cache_dir, OPTIONS[option]), tmp_path / "reference", log=lambda *_: None)
    original = Trainer._rollout

    def stop_after_three(self):
        original(self)
        if self.clocks.rollout == 3:
            self.stop_signal = 15

    monkeypatch.setattr(Trainer, "_rollout", stop_after_three)
    assert (
        train(_config(cache_dir, OPTIONS[option]), tmp_path / "resumed", log=lambda *_: None) == "preempted"
    )
    monkeypatch.setattr(Trainer, "_rollout", original)
    train(_config(cache_dir, OPTIONS[option]), tmp_path / "resumed", log=lambda *_: None)
    reference = _rows(tmp_path / "reference")
    assert _rows(tmp_path / "resumed") == reference
    train_rows = [r for r in reference if "train/reward_mean" in r]
    # it trains (a rollout whose groups all agree has no gradient, which the tiny model's can)
    assert len(train_rows) > 3 and sum(r["opt/grad_norm"] > 0 for r in train_rows) >= len(train_rows) - 1
    if "rollout.dynamic_sampling" in OPTIONS[option]:  # the data position was restored, not recomputed
        assert any(r["rollout/generation_batches"] > 1 for r in train_rows[:3])
    if "rollout.staleness" in OPTIONS[option]:  # the queue was restored: stale pi_old after the stop
        assert all(r["train/kl_old_first"] > 1e-8 for r in train_rows[3:])
