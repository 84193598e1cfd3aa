"""Each failure detector fires on a synthetic history and stays quiet on a healthy one."""

import math

from rlvr_scaling.algorithms.failure import (
    CollapseParams,
    EntropyCollapseParams,
    FailureConfig,
    FailureMonitor,
    KLBlowupParams,
)


def _run(monitor, rows):
    for i, row in enumerate(rows):
        fired = monitor.observe(row)
        if fired:
            return i, fired[0]
    return None


HEALTHY = [
    {
        "eval/accuracy": 0.30,
        "train/reward_mean": 0.2,
        "train/kl_old": 1e-3,
        "train/entropy": 0.5,
        "loss/policy": 0.01,
        "opt/grad_norm": 0.2,
        "train/param_norm": 40.0,
    },
    {
        "eval/accuracy": 0.35,
        "train/reward_mean": 0.3,
        "train/kl_old": 2e-3,
        "train/entropy": 0.4,
        "loss/policy": -0.02,
        "opt/grad_norm": 0.3,
        "train/param_norm": 40.1,
    },
    {
        "eval/accuracy": 0.33,
        "train/reward_mean": 0.28,
        "train/kl_old": 1e-3,
        "train/entropy": 0.4,
        "loss/policy": 0.0,
        "opt/grad_norm": 0.25,
        "train/param_norm": 40.2,
    },
] * 5


def test_no_detector_fires_on_healthy_history():
    assert _run(FailureMonitor(FailureConfig()), HEALTHY) is None


def test_non_finite_fires():
    rows = HEALTHY[:3] + [{**HEALTHY[0], "opt/grad_norm": math.nan}]
    assert _run(FailureMonitor(FailureConfig()), rows) == (3, "non_finite")


def test_accuracy_collapse_needs_peak_then_drop():
    cfg = FailureConfig(reward_collapse=None, accuracy_collapse=CollapseParams(drop_frac=0.5, min_peak=0.2))
    rows = [{"eval/accuracy": a} for a in (0.1, 0.3, 0.5, 0.3, 0.24)]
    assert _run(FailureMonitor(cfg), rows) == (4, "accuracy_collapse")
    # Never above min_peak: never armed.
    assert _run(FailureMonitor(cfg), [{"eval/accuracy": a} for a in (0.15, 0.19, 0.01)]) is None


def test_reward_collapse_window_in_responses_is_the_same_at_every_b():
    cfg = FailureConfig(
        accuracy_collapse=None,
        reward_collapse=CollapseParams(drop_frac=0.5, min_peak=0.1, window_responses=64),
    )
    # B = 16: one noisy rollout at 0.0 among 0.4s does not fire (4-rollout window), a sustained drop does.
    noisy = [{"train/reward_mean": r, "rollout/responses": 16} for r in (0.4, 0.4, 0.4, 0.4, 0.0, 0.4, 0.4)]
    assert _run(FailureMonitor(cfg), noisy) is None
    drop = [{"train/reward_mean": r, "rollout/responses": 16} for r in (0.4,) * 4 + (0.0,) * 4]
    assert _run(FailureMonitor(cfg), drop) == (6, "reward_collapse")
    # B = 64: the window is one rollout.
    big = [{"train/reward_mean": r, "rollout/responses": 64} for r in (0.4, 0.4, 0.1)]
    assert _run(FailureMonitor(cfg), big) == (2, "reward_collapse")


def test_reward_collapse_smoothed():
    cfg = FailureConfig(
        accuracy_collapse=None, reward_collapse=CollapseParams(drop_frac=0.5, min_peak=0.1, window=2)
    )
    rows = [{"train/reward_mean": r} for r in (0.4, 0.4, 0.0, 0.4, 0.0, 0.0)]
    # smoothed: -, .4, .2, .2, .2, 0 -> the single 0 at index 2 does not fire; index 5 does.
    assert _run(FailureMonitor(cfg), rows) == (5, "reward_collapse")


def test_kl_and_entropy():
    cfg = FailureConfig(
        kl_blowup=KLBlowupParams(max_kl=0.5), entropy_collapse=EntropyCollapseParams(min_entropy=0.01)
    )
    assert _run(FailureMonitor(cfg), HEALTHY[:2] + [{"train/kl_old": 0.8}]) == (2, "kl_blowup")
    assert _run(FailureMonitor(cfg), HEALTHY[:2] + [{"train/entropy": 0.001}]) == (2, "entropy_collapse")


def test_dropping_a_detector():
    cfg = FailureConfig(kl_blowup=None)
    assert _run(FailureMonitor(cfg), [{"train/kl_old": 100.0}]) is None


def test_state_round_trip():
    cfg = FailureConfig(reward_collapse=None)
    a = FailureMonitor(cfg)
    for acc in (0.1, 0.6, 0.5):
        a.observe({"eval/accuracy": acc})
    b = FailureMonitor(cfg)
    b.load_state_dict(a.state_dict())
    assert a.observe({"eval/accuracy": 0.2}) == b.observe({"eval/accuracy": 0.2})
