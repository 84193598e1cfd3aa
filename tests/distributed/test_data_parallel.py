"""Data-parallel runs on torch.distributed (gloo, CPU): N processes under torchrun produce the same run
as one process (same metrics rows, same parameters), with DDP and with FSDP2, and a run resumes at a
different number of processes than the one that wrote its checkpoint, in both directions. Every run
starts from the shipped warm start of the embedded default (rlvr_scaling/assets/), the same weights on
every CPU: no precondition here hinges on how a warm start rounds on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.distributed]
TRAIN = ["-m", "rlvr_scaling.cli.train"]
# keys that legitimately differ with the number of processes or the wall clock
VARYING = {
    "wall_seconds",
    # the work done: a rank without rows in a step runs a zero-weighted padding micro-batch so that the
    # collectives pair up, real work the `flops` clock charges (flops_nominal stays equal)
    "flops",
    "derived/world_size",
    "derived/prompts_per_rank",
    "derived/minibatch_responses_per_rank",
}
SHIPPED = "[warm start] shipped warm start"


def tiny(cache_dir: Path) -> list[str]:
    """The embedded default model and task (the shipped warm start: nothing to train) with a small
    rollout: B = 32, K = 2, three rollouts. ``run.cache_dir`` points at an empty directory, so a
    run that did not use the shipped weights would show as a cache entry there."""
    return [
        "rollout.prompts_per_rollout=8",
        "rollout.group_size=4",
        "optim.steps_per_rollout=2",
        "rollout.max_new_tokens=6",
        "eval.schedule=linear",
        "eval.samples=0",
        "eval.every_responses=96",
        "lr.ref_lr=1e-4",
        "lr.ref_responses=32",
        "failure=none",
        "train.max_responses=96",
        "run.checkpoint_every_rollouts=1",
        "run.progress=false",
        f"run.cache_dir={cache_dir}",
        # curvature (curv/...) on the first rollout, by the Hessian-vector products every world size can
        # run; tests/core/test_curvature.py compares them with double backward. Fixed cadences: budgeted
        # ones (the default) depend on each run's wall time
        "noise.hvp=finite_difference",
        "noise.at_theta_old_every_rollouts=8",
        "noise.curvature_every_rollouts=128",
    ]


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for key in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_NTASKS",
        "SLURM_PROCID",
    ):
        env.pop(key, None)
    return env


def train(n: int, run_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    if n == 1:
        cmd = [sys.executable, *TRAIN, *args, "run.threads=1"]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={n}",
            *TRAIN,
            *args,
        ]
    proc = subprocess.run(
        [*cmd, f"hydra.run.dir={run_dir}"], env=_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def rows(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        out.append({k: v for k, v in row.items() if k not in VARYING and not k.startswith("perf/")})
    return out


def assert_same_rows(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for key in w:
            if isinstance(w[key], float):
                # the drift KL is second order in the parameter change: the rounding-level parameter
                # differences of a reduction over ranks reach it at ~1e-5 relative
                rel = 1e-4 if key.startswith("train/kl_old") else 1e-5
                if key.startswith(("noise/", "curv/")):
                    # the instruments at theta_old (curvature.py): cell vectors summed over ranks; central
                    # differences of gradients divide their rounding by the step (h = 1e-4 |theta|)
                    rel = 1e-2 if key.startswith("curv/") else 1e-3
                assert g[key] == pytest.approx(w[key], rel=rel, abs=1e-7), key
            else:
                assert g[key] == w[key], key


def final_params(run_dir: Path) -> torch.Tensor:
    """Parameters of the run's latest checkpoint (either format), read by one plain process."""
    from rlvr_scaling.models import load_hf
    from rlvr_scaling.rundir import latest_checkpoint, load_checkpoint
    from rlvr_scaling.warm_start import SHIPPED_DIR

    model, _ = load_hf(str(SHIPPED_DIR), "float32", torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters())
    load_checkpoint(latest_checkpoint(run_dir), model, optimizer)
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """An empty warm-start cache: the shipped warm start is used, so it stays empty."""
    path = tmp_path_factory.mktemp("dp_cache")
    yield path
    assert not (path / "embedded").exists(), "a run trained its own warm start instead of the shipped one"


@pytest.fixture(scope="module")
def reference(cache, tmp_path_factory) -> Path:
    """The single-process run: three rollouts of B = 32, K = 2."""
    run_dir = tmp_path_factory.mktemp("dp_reference")
    assert SHIPPED in train(1, run_dir, tiny(cache)).stdout
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    train_rows = [r for r in rows(run_dir) if "train/reward_mean" in r]
    assert len(train_rows) == 3
    assert all(r["opt/grad_norm"] > 0 for r in train_rows)  # a test of something: real gradients
    return run_dir


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_equal_one(strategy, cache, reference, tmp_path):
    run_dir = tmp_path / strategy
    proc = train(2, run_dir, [*tiny(cache), f"run.parallel={strategy}"])
    assert f"[parallel] {strategy} over 2 ranks (gloo)" in proc.stdout
    assert "2 ranks: <= 4 prompts and <= 8 responses of each minibatch per rank" in proc.stdout
    # one run directory, written by rank 0 only, with the same rows and clocks as one process
    assert_same_rows(rows(run_dir), rows(reference))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["derived"]["world_size"] == 2
    assert summary["final"]["clocks"]["responses"] == 96
    assert (latest := json.loads((run_dir / "checkpoints" / "latest.json").read_text()))["tag"]
    assert (run_dir / "checkpoints" / latest["tag"] / "dcp" / ".metadata").is_file()  # sharded (DCP)
    assert SHIPPED in proc.stdout
    want = final_params(reference)
    got = final_params(run_dir)
    assert_same_params(got, want)


LR = 1e-4  # lr.ref_lr at B = lr.ref_responses
STEPS = 6  # optimizer steps in the reference run: 3 rollouts x K = 2


def assert_same_params(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to float rounding as Adam amplifies it. Adam divides each coordinate's step by that
    coordinate's own gradient scale, so a rounding-level difference in a coordinate whose gradient is
    near zero (a sum over ranks in another order) can move it by up to a step either way; which
    coordinates and how far depends on the weights and the CPU's kernels (on the shipped model: a few
    hundred of 1.06M coordinates by more than 1 % of a step, the largest by ~0.3 step). So, with
    margins well above that: the difference is below 1 % of the training movement in L2 (measured
    ~2.5e-4; a real divergence such as a wrong reduction or a shifted minibatch is of order 1), under
    1 % of coordinates differ by more than 1 % of a step, and none by more than two Adam runs can part
    by (each step moves a coordinate by at most ~1.02 lr in Adam's first 6 steps: Cauchy-Schwarz on
    the bias-corrected moments, beta1 = 0.9, beta2 = 0.999). The metrics rows match to 1e-5 besides."""
    start = final_params_start()
    moved = (want - start).norm()
    assert float((want - start).abs().max()) > LR  # training moved the parameters
    diff = (got - want).abs()
    assert float(diff.norm()) < 1e-2 * float(moved)
    assert float((diff > 0.01 * LR).double().mean()) < 1e-2
    assert float(diff.max()) < 2 * 1.02 * STEPS * LR


def final_params_start() -> torch.Tensor:
    from rlvr_scaling.models import load_hf
    from rlvr_scaling.warm_start import SHIPPED_DIR

    model, _ = load_hf(str(SHIPPED_DIR), "float32", torch.device("cpu"))
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("first,second", [(1, 2), (2, 1)])
def test_resume_at_another_world_size(first, second, cache, reference, tmp_path):
    """Stop after one rollout at N = first, continue at N = second (FSDP when N = 2): the run equals
    the uninterrupted single-process run."""
    run_dir = tmp_path / "run"
    args = [*tiny(cache), "run.parallel=fsdp"]
    train(first, run_dir, [*args, "run.stop_after_rollouts=1"])
    assert json.loads((run_dir / "status.json").read_text())["state"] == "preempted"
    proc = train(second, run_dir, args)
    assert "[resume] from rollout-0000001" in proc.stdout
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    assert_same_rows(rows(run_dir), rows(reference))
    assert_same_params(final_params(run_dir), final_params(reference))


@pytest.mark.timeout(900)
def test_embedded_default_under_torchrun(cache, tmp_path):
    """The embedded default as 2 processes (512 of its 8,192 responses): one run directory, complete."""
    run_dir = tmp_path / "run"
    args = [f"run.cache_dir={cache}", "train.max_responses=512", "run.progress=false"]
    proc = train(2, run_dir, args)
    assert "[parallel] ddp over 2 ranks (gloo)" in proc.stdout and SHIPPED in proc.stdout
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "completed"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in metrics if "train/reward_mean" in r]
    assert [r["responses"] for r in train_rows] == [128, 256, 384, 512]
    # at 0 and at the rollouts that pass the default geometric points (64, 152, 304, 431 -> 128, 256, 384, 512)
    assert [r["responses"] for r in metrics if "eval/accuracy" in r] == [0, 128, 256, 384, 512]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert (run_dir / "summary.json").is_file() and (run_dir / "config.yaml").is_file()
