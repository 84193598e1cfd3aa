"""Staleness and dynamic sampling across data-parallel ranks: 2 processes under torchrun (FSDP2, gloo)
log the rows of one process, and resume at the other world size."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.algorithms.test_staleness import assert_same_rows
from tests.distributed.test_data_parallel import rows, tiny, train

pytestmark = [pytest.mark.distributed]

AXES = [
    "rollout.staleness=1",
    "rollout.dynamic_sampling=true",
    "rollout.max_generation_batches=2",
    "loss.dual_clip=3",
    "train.max_responses=256",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    if os.environ.get("RLVR_TEST_CACHE"):
        return Path(os.environ["RLVR_TEST_CACHE"])
    return tmp_path_factory.mktemp("axes_dp_cache")


@pytest.mark.timeout(900)
def test_stale_dynamic_run_is_the_same_on_two_ranks(cache, tmp_path):
    args = [*tiny(cache), *AXES, "run.parallel=fsdp"]
    train(1, tmp_path / "one", args)
    reference = rows(tmp_path / "one")
    train_rows = [r for r in reference if "train/reward_mean" in r]
    assert len(train_rows) >= 3 and all(r["opt/grad_norm"] > 0 for r in train_rows)
    assert all(r["train/kl_old_first"] > 0 for r in train_rows[1:])  # stale behaviour policy
    assert any(r["rollout/generation_batches"] > 1 for r in train_rows)  # extra draws happened
    train(2, tmp_path / "two", args)
    # clocks, draws and counts exactly; floats up to the rounding of sums over ranks (grown over the
    # run: the estimates of noise/ are differences of squares)
    assert_same_rows(rows(tmp_path / "two"), reference, rel=1e-4, abs=1e-6)
    # stop after one rollout on two ranks, finish on one: the queue and data position travel along
    run_dir = tmp_path / "resumed"
    train(2, run_dir, [*args, "run.stop_after_rollouts=1"])
    assert json.loads((run_dir / "status.json").read_text())["state"] == "preempted"
    assert (run_dir / "checkpoints" / "rollout-0000001" / "staleness.safetensors").is_file()
    train(1, run_dir, args)
    assert_same_rows(rows(run_dir), reference, rel=1e-4, abs=1e-6)
