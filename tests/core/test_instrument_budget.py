"""Instruments at a budget: a null cadence follows from noise.budget and the phase timers."""

from __future__ import annotations

import json
import math
import re

import pytest

from rlvr_scaling.curvature import InstrumentBudget
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.noise import NoiseParams
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def test_budget_measures_when_its_spending_stays_within_its_share():
    b = InstrumentBudget(0.05, prior_cycles=2.0)
    assert not b.due(10.0, 0.0)  # no rollout timed yet: no cost estimate, no measurement
    assert not b.due(10.0, 1.0) and b.due(40.0, 1.0)  # the first: 2 cycles of 1 s <= 5 % of 40 s
    b.charge(1.0)  # it cost 1 s: the next one fits once 1 + 1 s <= 5 % of the wall time
    assert not b.due(39.9, 1.0) and b.due(40.0, 9.0)  # (the last cost now, not the prior)
    b.charge(1.0)
    assert not b.due(50.0, 1.0) and b.due(60.0, 1.0)
    # over a long run the spending converges to the share: 1 s a rollout, 1 s a measurement
    b, wall = InstrumentBudget(0.03, prior_cycles=1.0), 0.0
    for _ in range(5000):
        wall += 1.0
        if b.due(wall, 1.0):
            b.charge(1.0)
            wall += 1.0
    assert abs(b.spent / wall - 0.03) < 0.002
    restored = InstrumentBudget(0.03, prior_cycles=1.0)
    restored.load_state_dict(json.loads(json.dumps(b.state_dict())))
    assert restored.state_dict() == b.state_dict()


def test_the_parts_of_one_rollouts_measurement_are_one_cost():
    """Charges on one rollout (the noise at theta_old, then Adam's noise scale) add up to the next
    measurement's expected cost; a charge on a later rollout starts a new one."""
    b = InstrumentBudget(0.05, prior_cycles=2.0)
    b.charge(1.0, rollout=3)
    b.charge(0.5, rollout=3)
    assert (b.spent, b.last) == (1.5, 1.5)
    assert not b.due(29.9, 1.0) and b.due(60.0, 1.0)  # 1.5 + 1.5 s within 5 %
    b.charge(0.25, rollout=7)
    assert (b.spent, b.last) == (1.75, 0.25)
    restored = InstrumentBudget(0.05, prior_cycles=2.0)
    restored.load_state_dict(json.loads(json.dumps(b.state_dict())))
    restored.charge(0.25, rollout=7)  # the same measurement after a resume
    assert restored.last == 0.5


def test_adam_noise_is_charged_to_the_budget(cache_dir, tmp_path):
    """``noise.adam_noise``: its seconds (``perf/noise_adam_s``) count against the instruments' budget,
    so the instruments together stay within it."""
    cfg = tiny_config(cache_dir, **{"train.max_responses": 128})
    cfg.noise.at_theta_old_every_rollouts = None
    cfg.noise.curvature_every_rollouts = 0
    cfg.noise.adam_noise = True
    cfg.noise.budget = 0.9
    train(cfg, tmp_path / "run", log=lambda *_: None)
    rows = _rows(tmp_path / "run")
    spent = sum(r.get("perf/noise_theta_old_s", 0.0) + r.get("perf/noise_adam_s", 0.0) for r in rows)
    assert any("perf/noise_adam_s" in r for r in rows)
    state = json.loads(max((tmp_path / "run" / "checkpoints").glob("rollout-*/trainer.json")).read_text())
    # the logged perf/ seconds are rounded to 4 decimals
    assert state["instruments"]["noise"]["spent"] == pytest.approx(spent, abs=1e-4 * len(rows))
    assert state["instruments"]["noise"]["spent"] > 0


def test_a_rollouts_whole_measurement_is_charged_to_the_instrument_that_decided_it(cache_dir, tmp_path):
    """Adam's noise scale on: a rollout where curvature runs charges the curvature its curvature, its noise
    at theta_old and its Adam noise scale with the sharpness, all of it; a rollout where only the noise
    runs charges the noise. (Charged in parts to each, a curvature rollout's next expected cost was a part
    of it, and the noise's next expected cost a part of a noise measurement.) The curvature on a fixed
    cadence, so that both kinds of rollout happen whatever the machine's speed; the noise budgeted."""
    cfg = tiny_config(cache_dir, **{"train.max_responses": 256})
    cfg.noise.at_theta_old_every_rollouts = None
    cfg.noise.curvature_every_rollouts = 4
    cfg.noise.adam_noise = True
    cfg.noise.budget = 0.9  # generous: the noise measures on most of the 16 tiny rollouts
    train(cfg, tmp_path / "run", log=lambda *_: None)
    rows = [r for r in _rows(tmp_path / "run") if "train/reward_mean" in r]
    parts = ("perf/noise_theta_old_s", "perf/noise_adam_s", "perf/curvature_s")

    def seconds(rs):
        return sum(r.get(k, 0.0) for r in rs for k in parts)

    curvature = [r for r in rows if "perf/curvature_s" in r]
    noise = [r for r in rows if "perf/curvature_s" not in r and "perf/noise_theta_old_s" in r]
    assert curvature and noise  # both kinds of rollout happened
    assert all("perf/noise_adam_s" in r and "curv/adam_top_eig" in r for r in curvature)
    state = json.loads(max((tmp_path / "run" / "checkpoints").glob("rollout-*/trainer.json")).read_text())
    spent = state["instruments"]
    assert spent["curvature"]["spent"] == pytest.approx(seconds(curvature), abs=1e-4 * 3 * len(curvature))
    assert spent["noise"]["spent"] == pytest.approx(seconds(noise), abs=1e-4 * 2 * len(noise))
    # the next expected costs are whole measurements: the last curvature rollout's, the last noise one's
    assert spent["curvature"]["last"] == pytest.approx(seconds(curvature[-1:]), abs=3e-4)
    assert spent["noise"]["last"] == pytest.approx(seconds(noise[-1:]), abs=2e-4)


def test_the_first_measurements_expected_cost_counts_adams_noise_scale():
    """With Adam's noise scale a noise rollout and a curvature rollout cost several times what they cost
    without it (instrument_budget.PRIOR_CYCLES_ADAM): the first measurement's prior says so."""
    from rlvr_scaling.instrument_budget import PRIOR_CYCLES, prior_cycles

    plain, adam = prior_cycles(False), prior_cycles(True)
    assert plain == PRIOR_CYCLES
    assert adam["noise"] >= 3 * plain["noise"] and adam["curvature"] >= 3 * plain["curvature"]
    # a 3 % share split between the two: a run of 100 one-second rollouts affords the noise (1.6 s at
    # 1.5 % of 100 s) but not the curvature (12 s), which waits for 800 s of wall time
    b = InstrumentBudget(0.015, adam["curvature"])
    assert not b.due(100.0, 1.0) and not b.due(799.0, 1.0) and b.due(800.0, 1.0)
    assert InstrumentBudget(0.015, adam["noise"]).due(107.0, 1.0)


@pytest.mark.parametrize("budget", [0.0, 1.0, -0.1])
def test_a_wrong_budget_is_named(budget):
    with pytest.raises(ConfigError, match="noise.budget"):
        NoiseParams(budget=budget).validate()


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_budgeted_cadence_changes_only_the_instrument_rows(cache_dir, tmp_path):
    """Null cadences: the instruments measure within the budget (never on rollout 0, before any cost is
    known); every other metric is the fixed-cadence run's, bit for bit; the spending is in the
    checkpoint."""
    fixed = tiny_config(cache_dir, **{"train.max_responses": 128})
    budgeted = tiny_config(cache_dir, **{"train.max_responses": 128})
    budgeted.noise.at_theta_old_every_rollouts = None
    budgeted.noise.curvature_every_rollouts = None
    budgeted.noise.budget = 0.9  # a generous share: measurements happen in a run of 8 tiny rollouts
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
    assert "noise/trace_cov" not in train_rows[0]  # rollout 0: no cost estimate yet
    measured = [r for r in train_rows if "noise/trace_cov" in r]
    assert measured and all(math.isfinite(r["noise/trace_cov"]) for r in measured)
    state = json.loads(
        max((tmp_path / "budgeted" / "checkpoints").glob("rollout-*/trainer.json")).read_text()
    )
    assert state["instruments"]["noise"]["spent"] > 0


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
    # 100 s of wall time, 1 s rollouts, 1.5 % each: a first noise measurement (0.35 s expected) fits,
    # a first curvature measurement (3 s) does not; nothing on a rollout before any was timed
    power.wall, power.cycle = 100.0, 1.0
    assert power._decide(5) == (True, False)
    power.wall = 200.0
    assert power._decide(6) == (True, True)
    power.cycle = 0.0
    assert power._decide(7) == (False, False)


def test_the_start_up_note_quotes_a_presets_measured_reasons():
    from rlvr_scaling.noise_config import LARGE_MODEL_PARAMETERS, instruments_off_note

    small, large = LARGE_MODEL_PARAMETERS // 100, LARGE_MODEL_PARAMETERS * 2
    quiet = NoiseParams(at_theta_old=True, adam_noise=True, curvature_every_rollouts=None)
    assert instruments_off_note(quiet, large) is None  # nothing off
    off = NoiseParams(at_theta_old=True, adam_noise=False, curvature_every_rollouts=0)
    assert instruments_off_note(off, small) is None  # a small model without reasons: silent
    generic = instruments_off_note(off, large)
    assert "Adam noise (rides on" in generic and "curvature (Hessian-vector" in generic
    assert "noise at theta_old (" not in generic  # it is on
    off.off_reasons = {"curvature": "measured: 95 s a call, 3.3 rollouts"}
    for n in (small, large):  # a measured reason is said at any size, in place of the generic one
        note = instruments_off_note(off, n)
        assert (
            "curvature (measured: 95 s a call, 3.3 rollouts)" in note and f"off at {n:,} parameters" in note
        )
    assert "Adam noise" not in instruments_off_note(off, small)  # no reason given, small: not listed
    with pytest.raises(ConfigError, match="noise.off_reasons.curvatur:"):
        NoiseParams(off_reasons={"curvatur": "x"}).validate()


def test_the_smollm2_preset_says_why_each_instrument_it_turns_off_is_off():
    from rlvr_scaling.compose import compose

    noise = compose(["model=smollm2_135m"]).noise
    noise.validate()
    off = {
        "at_theta_old": not noise.at_theta_old,
        "adam_noise": not noise.adam_noise,
        "curvature": noise.curvature_every_rollouts == 0,
    }
    assert {k for k, v in off.items() if v} == set(noise.off_reasons)  # a reason for each, none else
    assert all(re.search(r"\d s\b", r) for r in noise.off_reasons.values())  # each states measured seconds
