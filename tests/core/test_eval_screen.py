"""The screened evaluation schedule: when the full evaluation runs, and that screening changes nothing
else (training rows, the full evaluations' numbers, resume)."""

from __future__ import annotations

import json

import pytest

from rlvr_scaling.config import EvalConfig
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.evaluation import full_needed
from rlvr_scaling.run import train
from rlvr_scaling.trainer import TrainerState
from tests.conftest import tiny_config

SCREEN_KEYS = ("eval/screen_accuracy", "eval/screen_responses", "eval/screen_problems", "perf/eval_screen_s")


def _state(**kw) -> TrainerState:
    base = {"targets": {"0.22": None, "0.25": None}, "screen_offsets": [0.01], "last_full_at": 1000}
    return TrainerState(**{**base, **kw})


def test_full_evaluation_only_near_an_unreached_target_a_drop_or_a_doubling():
    e = EvalConfig(screen_margin=0.03, screen_full_ratio=2.0)
    # prediction = screen + mean offset (0.01) + the screen's last rise
    assert not full_needed(e, _state(screen_last=0.15), 0.15, 1200)  # 0.16 < 0.22 - 0.03
    assert full_needed(e, _state(screen_last=0.18), 0.18, 1200)  # 0.19 >= 0.19
    assert full_needed(e, _state(screen_last=0.14), 0.17, 1200)  # 0.18 + rise 0.03 >= 0.19
    assert full_needed(e, _state(screen_last=0.15), 0.15, 2000)  # the clock doubled since the last full
    assert not full_needed(e, _state(screen_last=0.15, targets={"0.22": 500}), 0.2, 1200)  # all reached
    assert full_needed(e, _state(screen_last=0.3, targets={"0.22": 500}, best_accuracy=0.3), 0.22, 1200)
    assert full_needed(EvalConfig(screen_margin=1.0), _state(screen_last=0.0), 0.0, 1200)  # margin >= 1
    assert full_needed(e, _state(screen_offsets=[]), 0.0, 1200)  # not calibrated yet


@pytest.mark.parametrize(
    "key,value", [("screen_problems", -1), ("screen_margin", -0.1), ("screen_full_ratio", 0.5)]
)
def test_a_wrong_screen_key_is_named(key, value):
    with pytest.raises(ConfigError, match=f"eval.{key}"):
        EvalConfig(**{key: value}).validate()


def _run(cache_dir, path, **kw) -> list[dict]:
    cfg = tiny_config(cache_dir, **{"train.max_responses": 160, "eval.every_responses": 16, **kw})
    cfg.eval.samples = 2  # sampled pass@1: the screen's common random numbers matter
    cfg.eval.targets = [0.3, 0.6]
    train(cfg, path, log=lambda *_: None)
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _stable(row: dict) -> dict:
    drop = ("wall_seconds", "eval_responses")
    return {
        k: v for k, v in row.items() if k not in drop and k not in SCREEN_KEYS and not k.startswith("perf/")
    }


def test_screening_changes_only_which_points_run_the_full_evaluation(cache_dir, tmp_path):
    full = _run(cache_dir, tmp_path / "full", **{"eval.screen_problems": 0})
    every = _run(cache_dir, tmp_path / "every", **{"eval.screen_problems": 4, "eval.screen_margin": 1.0})
    screened = _run(
        cache_dir,
        tmp_path / "screened",
        **{"eval.screen_problems": 4, "eval.screen_margin": 0.0, "eval.screen_full_ratio": 0.0},
    )
    # a screen at every point (margin >= 1): the full evaluations all run; rows equal but for the screen
    assert [_stable(r) for r in every] == [_stable(r) for r in full]
    screens = [r for r in every if "eval/screen_accuracy" in r and "eval/accuracy" not in r]
    assert len(screens) == sum("eval/accuracy" in r for r in full) - 1  # every point but step 0, which
    assert "eval/screen_accuracy" in every[0] and "eval/accuracy" in every[0]  # logs it with its evaluation
    assert all("train/reward_mean" in r for r in screens)  # in the rollout's row, never as eval/accuracy
    assert all(r["eval/screen_responses"] == 8 and r["eval/screen_problems"] == 4 for r in screens)
    # screened: the same training rows, and each full evaluation it ran is the unscreened one's row
    train_rows = lambda rows: [_stable(r) for r in rows if "train/reward_mean" in r]  # noqa: E731
    assert train_rows(screened) == train_rows(full)
    by_clock = {r["responses"]: _stable(r) for r in full if "eval/accuracy" in r}
    ran = [r for r in screened if "eval/accuracy" in r]
    assert all(_stable(r) == by_clock[r["responses"]] for r in ran)
    assert len(ran) < len(by_clock)  # margin 0 and no doubling rule: some points were screened only
    # eval_responses counts the screens too
    last = lambda rows: rows[-1]["eval_responses"]  # noqa: E731
    assert last(every) == last(full) + 8 * len(screens) + 8  # (+ the step-0 screen)


def test_screened_run_resumes_exactly(cache_dir, tmp_path):
    kw = {"eval.screen_problems": 4, "eval.screen_margin": 0.05, "eval.screen_full_ratio": 0.0}
    reference = _run(cache_dir, tmp_path / "reference", **kw)
    _run(cache_dir, tmp_path / "resumed", **kw, **{"run.stop_after_rollouts": 5})
    resumed = _run(cache_dir, tmp_path / "resumed", **kw)
    stable = lambda rows: [{k: v for k, v in _stable(r).items()} for r in rows]  # noqa: E731
    assert stable(resumed) == stable(reference)
    assert [r.get("eval/screen_accuracy") for r in resumed] == [
        r.get("eval/screen_accuracy") for r in reference
    ]
