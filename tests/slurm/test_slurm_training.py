"""Training grids on the real local SLURM cluster through the Hydra submitit launcher: a grid of tiny
runs completes with correct run directories, and a job preempted mid-training is requeued and resumes
from its checkpoint with the same final metrics as an uninterrupted run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from slurm_utils import requeue_and_release, restarts, squeue_jobs, wait_for

pytestmark = [pytest.mark.slurm]
TRAIN = [sys.executable, "-m", "rlvr_scaling.cli.train"]


def tiny(cache_dir: Path) -> list[str]:
    return [
        "model=tiny",
        "rollout.prompts_per_rollout=4",
        "rollout.group_size=4",
        "optim.steps_per_rollout=2",
        "rollout.max_new_tokens=4",
        "task.train_size=500",
        "task.val_size=16",
        "eval.every_responses=64",
        "eval.targets=[0.05,0.9]",
        "lr.ref_lr=1e-3",
        "lr.ref_responses=16",
        "failure=none",
        "run.threads=1",
        "run.progress=false",
        f"run.cache_dir={cache_dir}",
    ]


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "wall_seconds" and not k.startswith("perf/")} for r in rows]


def _env():
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """Build the tiny warm-started model once, outside SLURM, so jobs only load it."""
    cache = tmp_path_factory.mktemp("slurm_cache")
    out = tmp_path_factory.mktemp("warm")
    subprocess.run(
        [*TRAIN, *tiny(cache), "train.max_responses=16", f"hydra.run.dir={out}"],
        check=True,
        env=_env(),
        timeout=300,
        capture_output=True,
    )
    return cache


@pytest.mark.timeout(420)
def test_grid_of_tiny_runs_on_slurm(slurm_cluster, warm_cache, tmp_path):
    sweep = tmp_path / "grid"
    proc = subprocess.run(
        [
            *TRAIN,
            "-m",
            "slurm=local_cluster",
            "seed=0,1,2",
            "train.max_responses=64",
            *tiny(warm_cache),
            f"hydra.sweep.dir={sweep}",
            "hydra.sweep.subdir=seed_${seed}",
        ],
        env=_env(),
        timeout=400,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for seed in (0, 1, 2):
        run_dir = sweep / f"seed_{seed}"
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "completed"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["derived"]["responses_per_rollout"] == 16
        rows = _rows(run_dir)
        assert rows[-1]["responses"] == 64 and rows[-1]["rollout"] == 4
        assert (run_dir / "config.yaml").is_file() and (run_dir / ".hydra").is_dir()
    # Three distinct runs: different seeds draw different rollouts.
    assert len({json.dumps(_rows(sweep / f"seed_{s}")[1]) for s in (0, 1, 2)}) == 3


@pytest.mark.parametrize("how", ["signal", "scontrol"])
@pytest.mark.timeout(600)
def test_preempted_job_resumes_from_checkpoint_with_identical_metrics(
    slurm_cluster, warm_cache, tmp_path, how
):
    # A hard requeue (scontrol) ignores the job until SLURM's KillWait (10 s on the local cluster) ends it:
    # that run must last well beyond it, or it finishes before it is killed.
    budget = [f"train.max_responses={4800 if how == 'signal' else 24000}", "run.checkpoint_every_rollouts=10"]
    reference = tmp_path / "reference"
    subprocess.run(
        [*TRAIN, *tiny(warm_cache), *budget, f"hydra.run.dir={reference}"],
        check=True,
        env=_env(),
        timeout=400,
        capture_output=True,
    )
    name = f"rlvr_requeue_{uuid.uuid4().hex[:8]}"
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [
            *TRAIN,
            "-m",
            "slurm=local_cluster",
            "seed=0",
            *tiny(warm_cache),
            *budget,
            f"hydra.sweep.dir={sweep}",
            "hydra.sweep.subdir=seed_${seed}",
            f"hydra.launcher.name={name}",
        ],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    run_dir = sweep / "seed_0"
    try:
        job_id = wait_for(
            lambda: next((j for j, n, s in squeue_jobs(name) if s == "RUNNING"), None),
            180,
            "the training job to run",
        )
        wait_for(
            lambda: (run_dir / "checkpoints" / "latest.json").is_file(),
            180,
            "a first checkpoint",
            interval=0.1,
        )
        state = json.loads((run_dir / "status.json").read_text())
        assert state["state"] == "running"
        requeue_and_release(job_id, how=how, timeout=150)
        assert restarts(job_id) >= 1
        output, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    logs = "".join(p.read_text(errors="replace") for p in (sweep / ".submitit").rglob("*_log.out"))
    assert "[resume] from rollout-" in logs, logs[-3000:]
    if how == "signal":
        assert "[signal] SIGUSR2" in logs
    got, want = _rows(run_dir), _rows(reference)
    if how == "signal":
        assert got == want  # checkpoint at the signal: bit-identical
    else:
        # Hard kill (SIGKILL after KillWait): resumed from the last periodic checkpoint in a new process.
        # Rows up to that checkpoint are the reference's, and the clocks continue without a gap or a
        # duplicate. (Later rows can drift from the reference: a resumed process may round the last bit
        # of a CPU kernel differently, and a different sampled token then changes the trajectory.)
        resumed_at = int(logs.split("[resume] from rollout-")[1][:7])
        assert resumed_at > 0
        prefix = [r for r in want if r["rollout"] <= resumed_at]
        assert got[: len(prefix)] == prefix
        train_rows = [r for r in got if "train/reward_mean" in r]
        assert [r["rollout"] for r in train_rows] == list(range(1, len(train_rows) + 1))
        assert [r["responses"] for r in train_rows] == [16 * i for i in range(1, len(train_rows) + 1)]
        assert train_rows[-1]["responses"] == 24000


@pytest.mark.timeout(420)
def test_data_parallel_job_with_two_tasks(slurm_cluster, warm_cache, tmp_path):
    """One run as one SLURM job of 2 tasks (submitit launcher, tasks_per_node=2): the tasks join one
    gloo process group through submitit's distributed environment and write one run directory."""
    sweep = tmp_path / "dp"
    proc = subprocess.run(
        [
            *TRAIN,
            "-m",
            "slurm=local_cluster",
            "hydra.launcher.tasks_per_node=2",
            "seed=0",
            "train.max_responses=48",
            "run.checkpoint_every_rollouts=1",
            *tiny(warm_cache),
            f"hydra.sweep.dir={sweep}",
            "hydra.sweep.subdir=dp",
        ],
        env=_env(),
        timeout=400,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = sweep / "dp"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["derived"]["world_size"] == 2
    assert summary["final"]["clocks"]["responses"] == 48
    rows = _rows(run_dir)
    assert [r["responses"] for r in rows if "train/reward_mean" in r] == [16, 32, 48]
    latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())["tag"]
    assert (run_dir / "checkpoints" / latest / "dcp" / ".metadata").is_file()
    # both tasks ran the trainer: rank 0 logged the process group, rank 1 stayed quiet
    logs = sorted((sweep / ".submitit").rglob("*_log.out"))
    text = "\n".join(p.read_text() for p in logs)
    assert text.count("[parallel] ddp over 2 ranks (gloo)") == 1, text[-2000:]
