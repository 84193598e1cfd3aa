"""The sparse evaluation schedule (``eval.sparse_every``): which points it evaluates, that it changes
nothing else (training rows, the numbers of the evaluations it runs), that the pool's replay of it
(``analysis.data.pool.sparse_points``) picks the same points, and that a wrong key is named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.data.pool import sparse_points
from rlvr_scaling.config import EvalConfig
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.evaluation import sparse_due
from rlvr_scaling.run import train
from rlvr_scaling.trainer import TrainerState
from tests.conftest import tiny_config


def test_sparse_points_dense_near_an_unreached_target():
    e = EvalConfig(sparse_every=3, dense_margin=0.03, targets=[0.22, 0.25])
    far = TrainerState(targets={"0.22": None, "0.25": None}, last_eval={"eval/accuracy": 0.15})
    near = TrainerState(targets={"0.22": None, "0.25": None}, last_eval={"eval/accuracy": 0.195})
    reached = TrainerState(targets={"0.22": 500, "0.25": 900}, last_eval={"eval/accuracy": 0.3})
    assert [sparse_due(e, far, k, False) for k in range(1, 7)] == [False, False, True, False, False, True]
    assert all(sparse_due(e, near, k, False) for k in range(1, 7))  # 0.195 >= 0.22 - 0.03
    assert not sparse_due(e, reached, 1, False)  # every target reached: sparse again
    assert sparse_due(e, far, 1, True)  # the run's last rollout
    assert all(sparse_due(EvalConfig(), far, k, False) for k in range(1, 7))  # sparse_every 1: off


@pytest.mark.parametrize(
    "kw,key",
    [({"sparse_every": 0}, "sparse_every"), ({"dense_margin": -0.1}, "dense_margin"),
     ({"sparse_every": 2, "screen_problems": 4}, "sparse_every and eval.screen_problems")],
)  # fmt: skip
def test_a_wrong_sparse_key_is_named(kw, key):
    with pytest.raises(ConfigError, match=f"eval.{key}"):
        EvalConfig(**kw).validate()


def _run(cache_dir, path, **kw) -> list[dict]:
    cfg = tiny_config(cache_dir, **{"train.max_responses": 160, "eval.every_responses": 16, **kw})
    cfg.eval.samples = 2
    cfg.eval.targets = [0.3, 0.6]
    train(cfg, path, log=lambda *_: None)
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _stable(row: dict) -> dict:
    drop = ("wall_seconds", "eval_responses")
    return {k: v for k, v in row.items() if k not in drop and not k.startswith("perf/")}


def test_the_sparse_schedule_changes_only_which_points_are_evaluated(cache_dir, tmp_path):
    full = _run(cache_dir, tmp_path / "full")
    sparse = _run(cache_dir, tmp_path / "sparse", **{"eval.sparse_every": 3, "eval.dense_margin": 0.05})
    train_rows = lambda rows: [_stable(r) for r in rows if "train/reward_mean" in r]  # noqa: E731
    assert train_rows(sparse) == train_rows(full)
    full_evals = [_stable(r) for r in full if "eval/accuracy" in r]
    ran = [_stable(r) for r in sparse if "eval/accuracy" in r]
    assert 2 <= len(ran) < len(full_evals)
    by_clock = {r["responses"]: r for r in full_evals}
    assert all(r == by_clock[r["responses"]] for r in ran), "an evaluation it runs is the full schedule's"
    # the pool's replay of the rule on the full run keeps exactly the points the trainer evaluated
    acc = np.array([r["eval/accuracy"] for r in full_evals])
    kept = sparse_points(acc, [0.3, 0.6], 3, 0.05)
    assert [full_evals[i]["responses"] for i in kept] == [r["responses"] for r in ran]
    assert ran[-1]["responses"] == 160  # the last rollout is evaluated
