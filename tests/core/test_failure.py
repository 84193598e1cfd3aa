"""Failure detectors: each fires on a degraded history and stays quiet on a healthy one; decisions do not
depend on the rollout size; the onset is the first row of the sustained condition."""

import math

import pytest

from rlvr_scaling.algorithms.failure import (
    CollapseParams,
    EntropyCollapseParams,
    FailureConfig,
    FailureMonitor,
    KLBlowupParams,
    LengthBlowupParams,
    MismatchParams,
)

ALL_OFF = {name: None for name in FailureConfig.__dataclass_fields__}


def only(**detectors) -> FailureConfig:
    return FailureConfig(**{**ALL_OFF, **detectors})


def train_rows(values: dict[str, list[float]], b: int, start: int = 0) -> list[dict]:
    """Training rows of B responses each, with clocks."""
    n = len(next(iter(values.values())))
    return [
        {
            "rollout": start + i + 1,
            "responses": (start + i + 1) * b,
            "rollout/responses": b,
            "rollout/prompts": b // 8,
            **{k: v[i] for k, v in values.items()},
        }
        for i in range(n)
    ]


def eval_rows(accuracies: list[float], every: int = 256, n: int = 256) -> list[dict]:
    return [
        {
            "rollout": i,
            "responses": i * every,
            "eval/accuracy": a,
            "eval/responses": 4 * n,
            "eval/problems": n,
        }
        for i, a in enumerate(accuracies)
    ]


def first_fire(monitor: FailureMonitor, rows: list[dict]):
    for row in rows:
        fired = monitor.observe(row)
        if fired:
            name, event = fired
            return name, row["responses"], event.onset_responses
    return None


def healthy_rows(b: int, n_responses: int = 8192) -> list[dict]:
    k = n_responses // b
    return train_rows(
        {
            "train/reward_mean": [0.3 + 0.2 * i / k for i in range(k)],
            "train/kl_old": [0.01] * k,
            "train/entropy": [0.6 - 0.3 * i / k for i in range(k)],
            "train/finished_frac": [0.98] * k,
            "loss/policy": [0.01] * k,
            "opt/grad_norm": [0.3] * k,
            "train/param_norm": [40.0] * k,
        },
        b,
    )


@pytest.mark.parametrize("b", [32, 512])
def test_no_detector_fires_on_a_healthy_history(b):
    rows = healthy_rows(b) + eval_rows([0.27, 0.3, 0.35, 0.33, 0.4, 0.38, 0.45])
    assert first_fire(FailureMonitor(FailureConfig()), sorted(rows, key=lambda r: r["responses"])) is None


def test_non_finite_fires_at_once_with_onset_equal_to_detection():
    rows = healthy_rows(64, 640)
    rows[4]["opt/grad_norm"] = math.nan
    assert first_fire(FailureMonitor(FailureConfig()), rows) == ("non_finite", 320, 320)


def test_accuracy_collapse_needs_peak_drop_beyond_noise_and_two_evaluations():
    cfg = only(accuracy_collapse=CollapseParams())
    # peak 0.5, then two evaluations below 0.25 (more than 3 SE of sqrt(.25/256) = 0.031 below 0.5)
    rows = eval_rows([0.2, 0.35, 0.5, 0.45, 0.2, 0.15])
    assert first_fire(FailureMonitor(cfg), rows) == ("accuracy_collapse", 5 * 256, 4 * 256)
    # a single bad evaluation (a noise dip) does not fire
    assert first_fire(FailureMonitor(cfg), eval_rows([0.2, 0.5, 0.2, 0.5, 0.45, 0.5])) is None
    # never above min_peak: never armed
    assert first_fire(FailureMonitor(cfg), eval_rows([0.05, 0.09, 0.01, 0.0, 0.0])) is None


def test_accuracy_collapse_drop_must_exceed_the_evaluation_noise():
    """Half the best, but on a 16-problem evaluation that is within 3 standard errors: quiet."""
    cfg = only(accuracy_collapse=CollapseParams())
    small = eval_rows([0.25, 0.3, 0.14, 0.13], n=16)  # SE = sqrt(.3*.7/16) = 0.115; drop 0.16 < 3 SE
    assert first_fire(FailureMonitor(cfg), small) is None
    large = eval_rows([0.25, 0.3, 0.14, 0.13], n=1024)
    assert first_fire(FailureMonitor(cfg), large) == ("accuracy_collapse", 3 * 256, 2 * 256)


@pytest.mark.parametrize(
    ("name", "params", "key", "good", "bad"),
    [
        (
            "reward_collapse",
            FailureConfig().reward_collapse,
            "train/reward_mean",
            0.4,
            0.05,
        ),
        ("kl_blowup", KLBlowupParams(), "train/kl_old", 0.01, 2.0),
        ("entropy_collapse", EntropyCollapseParams(), "train/entropy", 0.6, 0.001),
        ("length_blowup", LengthBlowupParams(), "train/finished_frac", 1.0, 0.2),
        ("mismatch", MismatchParams(), "rollout/mismatch_logp_abs_mean", 0.01, 1.0),
    ],
)
def test_training_row_detectors_decide_at_the_same_responses_at_every_rollout_size(
    name, params, key, good, bad
):
    """The same per-response degradation (good until 4,096 responses, bad afterwards) injected at
    B = 32 and B = 512: the same decision, at the same responses within one rollout of the larger B,
    with the onset at the degradation within one window; quiet when it never degrades."""
    decisions = {}
    for b in (32, 512):
        n = 8192 // b
        values = [good if (i + 1) * b <= 4096 else bad for i in range(n)]
        fired = first_fire(FailureMonitor(only(**{name: params})), train_rows({key: values}, b))
        assert fired is not None and fired[0] == name, (b, fired)
        decisions[b] = fired
        assert first_fire(FailureMonitor(only(**{name: params})), train_rows({key: [good] * n}, b)) is None
    (_, at_small, onset_small), (_, at_large, onset_large) = decisions[32], decisions[512]
    assert abs(at_small - at_large) <= 512
    assert abs(onset_small - onset_large) <= 512
    assert 4096 < onset_small <= 4096 + max(params.window_responses, 32)
    assert at_small - onset_small >= params.sustain_responses - 32  # the onset row covers 32 responses
    assert params.sustain_responses > params.window_responses  # one outlying rollout cannot fire alone


def test_a_single_outlying_rollout_does_not_fire():
    """One rollout of up to 256 responses with a huge drift estimate among healthy ones is not a
    failure (a rollout covering the whole sustain window, 512 responses of drift, is: the same responses
    at small B would be 16 bad rollouts in a row)."""
    for b in (32, 128, 256):
        n = 8192 // b
        kl = [0.01] * n
        kl[n // 2] = 5.0  # one rollout with a huge drift estimate
        rows = train_rows({"train/kl_old": kl}, b)
        assert first_fire(FailureMonitor(only(kl_blowup=KLBlowupParams())), rows) is None, b


def test_entropy_collapse_is_relative_to_the_start():
    """A model that starts at entropy 0.02 (a real model's converged level) and stays there is healthy;
    one that falls to 1/50 of its own start collapses."""
    cfg = only(entropy_collapse=EntropyCollapseParams())
    assert first_fire(FailureMonitor(cfg), train_rows({"train/entropy": [0.02] * 64}, 64)) is None
    falling = [0.5] * 16 + [0.01] * 48
    fired = first_fire(FailureMonitor(cfg), train_rows({"train/entropy": falling}, 64))
    assert fired is not None and fired[0] == "entropy_collapse"


def test_dropping_a_detector_silences_it():
    rows = train_rows({"train/kl_old": [100.0] * 32}, 64)
    assert first_fire(FailureMonitor(FailureConfig(kl_blowup=None)), rows) is None
    assert first_fire(FailureMonitor(FailureConfig()), rows)[0] == "kl_blowup"


def test_mismatch_is_quiet_without_the_key():
    rows = healthy_rows(64)
    assert first_fire(FailureMonitor(only(mismatch=MismatchParams())), rows) is None


def test_state_round_trip_mid_streak():
    """A monitor restored from a checkpoint in the middle of a sustained condition decides where the
    uninterrupted one does, with the same onset."""
    cfg = FailureConfig()
    rows = train_rows({"train/kl_old": [0.01] * 20 + [3.0] * 20}, 32)
    whole = first_fire(FailureMonitor(cfg), rows)
    a = FailureMonitor(cfg)
    for row in rows[:22]:
        assert a.observe(row) is None
    b = FailureMonitor(cfg)
    b.load_state_dict(a.state_dict())
    assert first_fire(b, rows[22:]) == whole


# ---------------------------------------------------------------- standard errors over independent units


def test_accuracy_collapse_standard_error_counts_problems_not_samples():
    """16 problems x 8 samples: a drop from 0.3 to 0.14 is more than half, and more than 3 SE of the
    128 responses (0.040) but within 3 SE of the 16 problems (0.115), the independent units: quiet.
    Greedy on 16 problems decides the same; on 1,024 problems the drop is beyond the noise at either
    sample count."""
    cfg = only(accuracy_collapse=CollapseParams())
    for samples in (1, 8):
        for problems, expected in ((16, None), (1024, ("accuracy_collapse", 3 * 256, 2 * 256))):
            rows = eval_rows([0.25, 0.3, 0.14, 0.13], n=problems)
            for row in rows:
                row["eval/responses"] = samples * problems
            assert first_fire(FailureMonitor(cfg), rows) == expected, (samples, problems)


def test_reward_collapse_standard_error_counts_prompts_in_the_window():
    """B = 32 in groups of 8 (4 prompts a rollout), a 512-response window: 64 prompts. A smoothed
    reward falling from 0.3 to 0.14 is half of it and 7.9 SE of 512 responses, but 2.8 SE of the 64
    prompts: quiet; a fall to 0.09 (3.7 SE of the prompts) fires. The same at B = 512 (64 prompts a
    rollout, one rollout a window)."""
    cfg = only(reward_collapse=FailureConfig().reward_collapse)
    for b in (32, 512):
        n = 16384 // b
        for low, fires in ((0.14, False), (0.09, True)):
            values = [0.3 if (i + 1) * b <= 4096 else low for i in range(n)]
            fired = first_fire(FailureMonitor(cfg), train_rows({"train/reward_mean": values}, b))
            assert (fired is not None) == fires, (b, low, fired)


# ---------------------------------------------------------------- checkpointed state


def _degrading_histories() -> dict[str, tuple[FailureConfig, list[dict]]]:
    """For every detector: a configuration with it alone and a history (training and evaluation rows in
    clock order, B = 32) that makes it fire after a sustained stretch."""
    b, n = 32, 256

    def step(good, bad, at=4096):
        return [good if (i + 1) * b <= at else bad for i in range(n)]

    def merged(train: list[dict], evals: list[dict]) -> list[dict]:
        return sorted(train + evals, key=lambda r: (r["responses"], "eval/accuracy" in r))

    healthy = healthy_rows(b, n * b)
    nan_rows = [dict(r) for r in healthy]
    nan_rows[150]["opt/grad_norm"] = math.nan
    evals = eval_rows([0.2, 0.3, 0.45, 0.5, 0.48, 0.5, 0.5, 0.2, 0.22, 0.18, 0.1, 0.1], every=512)
    return {
        "non_finite": (only(non_finite=FailureConfig().non_finite), merged(nan_rows, evals)),
        "accuracy_collapse": (only(accuracy_collapse=CollapseParams()), merged(healthy, evals)),
        "reward_collapse": (
            only(reward_collapse=FailureConfig().reward_collapse),
            merged(train_rows({"train/reward_mean": step(0.45, 0.05)}, b), evals),
        ),
        "kl_blowup": (only(kl_blowup=KLBlowupParams()), train_rows({"train/kl_old": step(0.01, 2.0)}, b)),
        "entropy_collapse": (
            only(entropy_collapse=EntropyCollapseParams()),
            train_rows({"train/entropy": step(0.6, 0.001)}, b),
        ),
        "length_blowup": (
            only(length_blowup=LengthBlowupParams()),
            train_rows({"train/finished_frac": step(1.0, 0.2)}, b),
        ),
        "mismatch": (
            only(mismatch=MismatchParams()),
            train_rows({"rollout/mismatch_logp_abs_mean": step(0.01, 1.0)}, b),
        ),
    }


def _decisions(monitor: FailureMonitor, rows: list[dict]):
    for row in rows:
        fired = monitor.observe(row)
        if fired:
            name, event = fired
            return name, row["responses"], event
    return None


@pytest.mark.parametrize("name", list(FailureConfig.__dataclass_fields__))
def test_checkpointed_state_continues_exactly_as_the_uninterrupted_run(name):
    """state_dict -> JSON (as in trainer.json) -> load_state_dict into a fresh monitor, at every row of
    the history: the restored state equals the saved one, and the run continues to the identical
    decision (detector, responses, onset, lower onset bound, reason) as the uninterrupted one."""
    import json

    cfg, rows = _degrading_histories()[name]
    whole = _decisions(FailureMonitor(cfg), rows)
    assert whole is not None and whole[0] == name
    stop = rows.index(next(r for r in rows if r["responses"] == whole[1]))
    for k in range(1, stop + 1):
        a = FailureMonitor(cfg)
        for row in rows[:k]:
            assert a.observe(row) is None
        saved = json.loads(json.dumps(a.state_dict()))
        b = FailureMonitor(cfg)
        b.load_state_dict(saved)
        assert json.loads(json.dumps(b.state_dict())) == saved, (name, k)
        assert _decisions(b, rows[k:]) == whole, (name, k)


# ---------------------------------------------------------------- the lower onset bound


def test_lower_onset_bound_of_non_finite_and_accuracy_collapse():
    """non_finite: the previous rollout's responses; accuracy_collapse: the evaluation before the onset
    evaluation."""
    rows = healthy_rows(64, 640)
    rows[4]["opt/grad_norm"] = math.nan
    _, at, event = _decisions(FailureMonitor(FailureConfig()), rows)
    assert (at, event.onset_responses, event.onset_lower_responses) == (320, 320, 256)
    rows = eval_rows([0.2, 0.35, 0.5, 0.45, 0.2, 0.15])
    _, at, event = _decisions(FailureMonitor(only(accuracy_collapse=CollapseParams())), rows)
    assert (at, event.onset_responses, event.onset_lower_responses) == (5 * 256, 4 * 256, 3 * 256)


@pytest.mark.parametrize(
    "name", ["reward_collapse", "kl_blowup", "entropy_collapse", "length_blowup", "mismatch"]
)
@pytest.mark.parametrize("b", [32, 128, 512])
@pytest.mark.parametrize("change", [4096, 4100, 4600])
def test_lower_onset_bound_brackets_the_change_of_a_windowed_detector(name, b, change):
    """Per-response behaviour turning bad at ``change`` responses (on a rollout boundary or inside a
    rollout): the failure time is interval-censored in (onset_lower_responses, onset_responses], which
    holds the change, and the bound is no looser than one rollout plus one window (in whole rollouts)
    before the onset."""
    cfg, _ = _degrading_histories()[name]
    key, good, bad = {
        "reward_collapse": ("train/reward_mean", 0.45, 0.05),
        "kl_blowup": ("train/kl_old", 0.01, 2.0),
        "entropy_collapse": ("train/entropy", 0.6, 0.001),
        "length_blowup": ("train/finished_frac", 1.0, 0.2),
        "mismatch": ("rollout/mismatch_logp_abs_mean", 0.01, 1.0),
    }[name]
    n = 8192 // b
    # a rollout straddling the change carries the mixture of its responses
    frac_bad = [min(max((i + 1) * b - change, 0), b) / b for i in range(n)]
    values = [good + (bad - good) * f for f in frac_bad]
    fired, at, event = _decisions(FailureMonitor(cfg), train_rows({key: values}, b))
    window = getattr(cfg, name).window_responses
    assert fired == name
    assert event.onset_lower_responses < change <= event.onset_responses <= at
    assert event.onset_lower_responses >= max(0, event.onset_responses - b - b * math.ceil(window / b))
