"""Instruments at a budget: a null cadence follows from noise.budget and the phase timers."""

from __future__ import annotations

import json
import math

import pytest

from rlvr_scaling.curvature import InstrumentBudget
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.noise import NoiseParams
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def test_budget_measures_when_its_spending_stays_within_its_share():
    b = InstrumentBudget(0.05)
    assert b.due(0, 0.0)  # rollout 0 always (the first cost)
    b.charge(1.0)  # one measurement costs 1 s: the next one fits once 2 s <= 5 % of the wall time
    assert not b.due(1, 10.0) and not b.due(5, 39.9) and b.due(6, 40.0)
    b.charge(1.0)
    assert not b.due(7, 50.0) and b.due(9, 60.0)
    # over a long run the spending converges to the share: measure whenever due, 1 s each, 1 s a rollout
    b, wall = InstrumentBudget(0.03), 0.0
    for r in range(5000):
        wall += 1.0
        if b.due(r, wall):
            b.charge(1.0)
            wall += 1.0
    assert abs(b.spent / wall - 0.03) < 0.002
    restored = InstrumentBudget(0.03)
    restored.load_state_dict(json.loads(json.dumps(b.state_dict())))
    assert restored.state_dict() == b.state_dict()


@pytest.mark.parametrize("budget", [0.0, 1.0, -0.1])
def test_a_wrong_budget_is_named(budget):
    with pytest.raises(ConfigError, match="noise.budget"):
        NoiseParams(budget=budget).validate()


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_budgeted_cadence_changes_only_the_instrument_rows(cache_dir, tmp_path):
    """Null cadences: noise and curvature at rollout 0 and then within the budget; every other metric is
    the fixed-cadence run's, bit for bit; the spending is in the checkpoint."""
    fixed = tiny_config(cache_dir, **{"train.max_responses": 128})
    budgeted = tiny_config(cache_dir, **{"train.max_responses": 128})
    budgeted.noise.at_theta_old_every_rollouts = None
    budgeted.noise.curvature_every_rollouts = None
    budgeted.noise.budget = 0.02
    train(fixed, tmp_path / "fixed", log=lambda *_: None)
    train(budgeted, tmp_path / "budgeted", log=lambda *_: None)
    a, b = _rows(tmp_path / "fixed"), _rows(tmp_path / "budgeted")

    def stable(rows):
        return [
            {
                k: v
                for k, v in r.items()
                if not k.startswith(("noise/", "curv/", "perf/")) and k != "wall_seconds"
            }
            for r in rows
        ]

    assert stable(a) == stable(b)
    train_rows = [r for r in b if "train/reward_mean" in r]
    assert "curv/top_eig" in train_rows[0] and math.isfinite(train_rows[0]["noise/trace_cov"])
    measured = sum("noise/trace_cov" in r for r in train_rows)
    assert 1 <= measured < len(train_rows)  # 2 % of the wall time: not every rollout
    state = json.loads(
        max((tmp_path / "budgeted" / "checkpoints").glob("rollout-*/trainer.json")).read_text()
    )
    assert state["instruments"]["noise"]["spent"] > 0 and state["instruments"]["curvature"]["spent"] > 0


def test_an_lr_rule_reading_the_estimates_gets_fixed_cadences():
    from types import SimpleNamespace

    import torch

    from rlvr_scaling.curvature import READ_BY_LR_EVERY, ThetaOldInstruments

    def make(lr):
        cfg = SimpleNamespace(
            noise=NoiseParams(),
            lr=lr,
            optim=SimpleNamespace(steps_per_rollout=8),
            rollout=SimpleNamespace(group_size=8),
        )
        return ThetaOldInstruments(cfg, torch.nn.Linear(2, 2), "cpu", None, 4.0)

    snr = make(SimpleNamespace(rule="snr", source="minibatch"))
    assert (snr.every, snr.curvature_every) == (
        READ_BY_LR_EVERY["at_theta_old"],
        READ_BY_LR_EVERY["curvature"],
    )
    power = make(SimpleNamespace(rule="power"))
    assert (power.every, power.curvature_every) == (None, None)
    assert power.budget["noise"].share == pytest.approx(NoiseParams().budget / 2)
    assert "wall time" in power.describe()
