"""The method options run inside the real trainer on the tiny config, compose, and keep the clocks."""

from __future__ import annotations

import json

import pytest

from rlvr_scaling.algorithms.allocators import VigorParams
from rlvr_scaling.algorithms.baselines import OptimalParams, ReMaxParams
from rlvr_scaling.algorithms.lr_rules import SNRLRParams
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "train/reward_mean" in r]


def test_remax_counts_its_greedy_responses(cache_dir, tmp_path):
    cfg = tiny_config(cache_dir, baseline=ReMaxParams())
    train(cfg, tmp_path, log=lambda *_: None)
    rows = _rows(tmp_path)
    p, b = cfg.rollout.prompts_per_rollout, cfg.rollout.prompts_per_rollout * cfg.rollout.group_size
    for i, r in enumerate(rows, start=1):
        assert r["rollout/greedy_responses"] == p and r["rollout/responses"] == b
        assert r["responses"] == i * (b + p)  # greedy responses are on the primary clock
    assert sum(r["rollout/tokens"] + r["rollout/greedy_tokens"] for r in rows) == rows[-1]["tokens"]


@pytest.mark.parametrize("weights", ["exact", "proxy"])
def test_optimal_baseline_runs_and_logs_its_weights(cache_dir, tmp_path, weights):
    cfg = tiny_config(cache_dir, baseline=OptimalParams(weights=weights))
    train(cfg, tmp_path, log=lambda *_: None)
    rows = _rows(tmp_path)
    assert rows and all(r["train/baseline_weights_exact"] == (weights == "exact") for r in rows)
    assert all("train/baseline_var_ratio" in r for r in rows)


def test_vigor_snr_optimal_compose_and_spend_exactly_b(cache_dir, tmp_path):
    cfg = tiny_config(
        cache_dir,
        baseline=OptimalParams(),
        allocator=VigorParams(),
        # each rollout's own estimate at theta_old reaches the rule before its steps: with a warm-up of
        # two estimates the first rollout runs at eta_max * min_factor
        lr=SNRLRParams(ref_lr=1e-2, ref_responses=16, warmup_rollouts=2),
    )
    cfg.rollout.group_size = 8  # m_0 = 2: 4x2, 2x4, 1x8, then the remainder
    cfg.train.max_responses = 96
    cfg.noise.per_sample = "on"  # off by default
    train(cfg, tmp_path, log=lambda *_: None)
    rows = _rows(tmp_path)
    assert len(rows) == 3
    for i, r in enumerate(rows, start=1):
        assert r["rollout/responses"] == 32 and r["responses"] == 32 * i
        assert r["rollout/rounds"] >= 2 and r["rollout/alloc_max"] > r["rollout/alloc_min"]
        assert 0 <= r["rollout/responses_in_gradient"] <= 32
        assert "opt/snr_factor" in r
        # the per-sample instrument, when on, runs every noise.every_rollouts (8) rollouts
        assert ("noise/per_sample_trace_cov" in r) == (i % 8 == 1)
    # warm-up: the first rollout runs at eta_max * min_factor, later ones follow the SNR
    assert rows[0]["opt/lr"] == pytest.approx(1e-2 * 0.02)  # power 0: eta_max = ref_lr


def test_per_sample_lr_source_needs_the_instrument(cache_dir, tmp_path):
    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.noise import NoiseParams

    cfg = tiny_config(cache_dir, lr=SNRLRParams(source="per_sample"))
    object.__setattr__(cfg, "noise", NoiseParams(per_sample="off"))
    with pytest.raises(ConfigError, match="per_sample"):
        train(cfg, tmp_path, log=lambda *_: None)


def test_stateful_methods_resume_exactly(cache_dir, tmp_path, monkeypatch):
    """A run preempted after 3 rollouts and resumed logs the same rows as an uninterrupted one."""
    from rlvr_scaling.trainer import Trainer

    def cfg():
        c = tiny_config(
            cache_dir,
            baseline=OptimalParams(),
            allocator=VigorParams(),
            lr=SNRLRParams(ref_lr=1e-2, ref_responses=16, warmup_rollouts=1),
        )
        c.train.max_responses = 96
        c.run.checkpoint_every_rollouts = 100
        return c

    def rows(d):
        out = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
        return [
            {k: v for k, v in r.items() if k != "wall_seconds" and not k.startswith("perf/")} for r in out
        ]

    train(cfg(), tmp_path / "reference", log=lambda *_: None)
    original = Trainer._rollout

    def stop_after_three(self):
        original(self)
        if self.clocks.rollout == 3:
            self.stop_signal = 15

    monkeypatch.setattr(Trainer, "_rollout", stop_after_three)
    assert train(cfg(), tmp_path / "resumed", log=lambda *_: None) == "preempted"
    monkeypatch.setattr(Trainer, "_rollout", original)
    train(cfg(), tmp_path / "resumed", log=lambda *_: None)
    assert rows(tmp_path / "resumed") == rows(tmp_path / "reference")
    assert len(_rows(tmp_path / "reference")) == 6
