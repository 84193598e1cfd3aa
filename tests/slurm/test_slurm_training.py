"""Training grids on the real local SLURM cluster through the Hydra submitit launcher: a shipped sweep
file (sweeps/demo.yaml, shrunk to tiny runs) runs as one job array, with one and with two tasks (ranks)
per run, every run directory ends completed and rlvr-analyze reads them; a job preempted mid-training
is requeued and resumes from its checkpoint with the same metrics as an uninterrupted run, and the
run-directory lock passes from the killed job to the restarted one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from slurm_utils import requeue_and_release, restarts, squeue_jobs, wait_for

from tests.conftest import build_warm_cache, tiny_cli

pytestmark = [pytest.mark.slurm]
TRAIN = [sys.executable, "-m", "rlvr_scaling.cli.train"]


def tiny(cache_dir: Path, prompts: int | None = 4) -> list[str]:
    """The tiny model and task; ``prompts=None`` leaves rollout.prompts_per_rollout to the sweep."""
    return tiny_cli(cache_dir, prompts)


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]

    # (the noise-at-theta_old and curvature keys too: their default cadence is budgeted on wall time)
    def kept(k: str) -> bool:
        at_old = k.startswith("curv/") or (k.startswith("noise/") and not k.startswith("noise/multistep"))
        return k != "wall_seconds" and not k.startswith("perf/") and not at_old

    return [{k: v for k, v in r.items() if kept(k)} for r in rows]


def _env():
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _holder(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.lock").read_text())


def _slurm_id(holder: dict) -> str:
    """The job id squeue shows for the lock's holder: ``<array>_<task>`` or the plain job id."""
    if holder["slurm_array_job_id"]:
        return f"{holder['slurm_array_job_id']}_{holder['slurm_array_task_id']}"
    return holder["slurm_job_id"]


def _analyze(sweep: Path, out: Path, n_runs: int) -> None:
    """rlvr-analyze (its main(), in this process) reads every run directory of the sweep, none skipped."""
    from analysis.cli import main as analyze

    assert analyze([str(sweep), "--out", str(out), "--no-plots", "--bootstrap", "50", "--quiet"]) == 0
    runs = (out / "runs.csv").read_text().strip().splitlines()
    assert len(runs) == 1 + n_runs, runs
    assert len((out / "skipped.csv").read_text().strip().splitlines()) == 1, (out / "skipped.csv").read_text()


def _listed(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> list[dict]:
    """rlvr-grid's view of the same command (its main(), in this process): states, run directories."""
    from rlvr_scaling.cli.grid import main as grid

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    assert grid(["--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """Build the tiny warm-started model once, outside SLURM, so jobs only load it."""
    cache = tmp_path_factory.mktemp("slurm_cache")
    out = tmp_path_factory.mktemp("warm")
    build_warm_cache(tiny(cache), out, _env())
    return cache


@pytest.mark.timeout(420)
def test_demo_sweep_runs_as_one_job_array(slurm_cluster, warm_cache, tmp_path, monkeypatch, capsys):
    """``rlvr-train -m sweeps=demo slurm=local_cluster`` with seed=0 and a small budget: the sweep's 4
    rollout sizes run as one job array of 4 tasks into the run directories rlvr-grid lists; each holds
    a completed run whose lock names its array task; rlvr-analyze reads all of them."""
    args = [
        "sweeps=demo",
        "slurm=local_cluster",
        "seed=0",
        "train.max_responses=256",
        *tiny(warm_cache, None),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*TRAIN, "-m", *args], env=_env(), timeout=400, capture_output=True, text=True, cwd=tmp_path
    )
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = _listed(args, tmp_path, monkeypatch, capsys)
    assert len(runs) == 4 and {r["state"] for r in runs} == {"completed"}, runs
    assert sorted(r["B"] for r in runs) == [16, 32, 64, 128]
    sweep = tmp_path / "runs" / "demo"
    assert {p.parent for p in sweep.glob("*/status.json")} == {tmp_path / r["run_dir"] for r in runs}
    holders = []
    for run in runs:
        run_dir = tmp_path / run["run_dir"]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["derived"]["responses_per_rollout"] == run["B"]
        rows = _rows(run_dir)
        assert rows[-1]["responses"] == 256 and rows[-1]["rollout"] == 256 // run["B"]
        assert (run_dir / "config.yaml").is_file() and (run_dir / ".hydra").is_dir()
        holders.append(_holder(run_dir))
    array_ids = {h["slurm_array_job_id"] for h in holders}
    assert len(array_ids) == 1 and None not in array_ids, "one multirun = one job array"
    assert sorted(int(h["slurm_array_task_id"]) for h in holders) == [0, 1, 2, 3]
    with capsys.disabled():
        print(
            f"\n[measured] sweeps=demo on slurm=local_cluster: array {array_ids.pop()} of {len(runs)} tasks, {wall:.1f} s"
        )
    _analyze(sweep, tmp_path / "analysis", len(runs))


def _checkpoint_rollout(run_dir: Path) -> int:
    pointer = run_dir / "checkpoints" / "latest.json"
    return int(json.loads(pointer.read_text())["tag"].split("-")[1]) if pointer.is_file() else -1


@pytest.mark.timeout(600)
def test_preempted_job_resumes_from_checkpoint_with_identical_metrics(slurm_cluster, warm_cache, tmp_path):
    """One training job preempted twice, both ways a job is requeued, and resumed each time:

    1. submitit's own path (``job._interrupt()``: SIGUSR2 -> checkpoint at the next rollout boundary
       -> ``scontrol requeue`` by submitit): resumes exactly where it stopped;
    2. a hard ``scontrol requeue`` (an admin, a ``PreemptMode=REQUEUE`` preemption): SIGTERM, ignored,
       then SIGKILL after KillWait; the restarted job resumes from its last periodic checkpoint.

    Rows up to the second resume point equal an uninterrupted reference run's (bit-identical: the
    signal checkpoint is exact), the clocks continue without a gap or a duplicate, and the
    run-directory lock goes from each killed job to its restart without blocking it: ``run.lock``
    names the same job with ``restart 2`` and a new pid.
    """
    # outlasts two checkpoints, the requeues and KillWait (2 s on the local cluster) on a quiet machine
    responses = 16000
    budget = [f"train.max_responses={responses}", "run.checkpoint_every_rollouts=10"]
    reference = tmp_path / "reference"
    ref_log = tmp_path / "reference.log"
    with open(ref_log, "w") as fh:  # the uninterrupted reference runs here while the job runs on the cluster
        ref_proc = subprocess.Popen(
            [*TRAIN, *tiny(warm_cache), *budget, f"hydra.run.dir={reference}"],
            env=_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
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
    holders = []
    try:
        job_id = wait_for(
            lambda: next((j for j, n, s in squeue_jobs(name) if s == "RUNNING"), None),
            180,
            "the training job to run",
        )
        wait_for(lambda: _checkpoint_rollout(run_dir) > 0, 180, "a first checkpoint", interval=0.1)
        assert json.loads((run_dir / "status.json").read_text())["state"] == "running"
        holders.append(_holder(run_dir))
        requeue_and_release(job_id, how="signal", timeout=150)
        assert restarts(job_id) == 1
        # the restarted job has resumed and written a periodic checkpoint of its own
        wait_for(lambda: "[resume] from rollout-" in _logs(sweep), 180, "the first resume")
        at_signal = _checkpoint_rollout(run_dir)
        wait_for(lambda: _checkpoint_rollout(run_dir) > at_signal, 180, "a checkpoint after the resume", 0.1)
        holders.append(_holder(run_dir))
        requeue_and_release(job_id, how="scontrol", timeout=150)
        assert restarts(job_id) == 2
        output, _ = proc.communicate(timeout=400)
        ref_proc.wait(timeout=400)
    finally:
        for p in (proc, ref_proc):
            if p.poll() is None:
                p.kill()
    assert proc.returncode == 0, output[-3000:]
    assert ref_proc.returncode == 0, ref_log.read_text()[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    holders.append(_holder(run_dir))
    assert [_slurm_id(h) for h in holders] == [job_id] * 3
    assert [h["slurm_restart_count"] or "0" for h in holders] == ["0", "1", "2"]
    assert len({h["pid"] for h in holders}) == 3, holders
    logs = _logs(sweep)
    assert logs.count("[signal] SIGUSR2") == 1
    starts = [int(part[:7]) for part in logs.split("[resume] from rollout-")[1:]]
    assert len(starts) == 2 and 0 < starts[0] < starts[1], starts
    assert "gave up after waiting" not in logs  # each restarted job got the lock
    got, want = _rows(run_dir), _rows(reference)
    # Up to the hard kill's checkpoint the rows are the reference's (the signal's resume is exact).
    # Later rows may drift from it: a resumed process may round the last bit of a CPU kernel
    # differently, and a different sampled token then changes the trajectory.
    prefix = [r for r in want if r["rollout"] <= starts[1]]
    assert got[: len(prefix)] == prefix
    train_rows = [r for r in got if "train/reward_mean" in r]
    assert [r["rollout"] for r in train_rows] == list(range(1, len(train_rows) + 1))
    assert [r["responses"] for r in train_rows] == [16 * i for i in range(1, len(train_rows) + 1)]
    assert train_rows[-1]["responses"] == responses


def _logs(sweep: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((sweep / ".submitit").rglob("*_log.out")))


@pytest.mark.timeout(420)
def test_data_parallel_sweep_with_two_tasks_per_run(slurm_cluster, warm_cache, tmp_path, monkeypatch, capsys):
    """``rlvr-train -m sweeps=demo slurm=local_cluster_dp`` (tasks_per_node = 2, the shape of the GPU
    data-parallel presets), narrowed to 2 runs: one job array, each run one job of 2 tasks that join
    one gloo process group through submitit's distributed environment and write one run directory;
    rank 0 alone holds its lock; rlvr-analyze reads both."""
    args = [
        "sweeps=demo",
        "slurm=local_cluster_dp",
        "seed=0",
        "rollout.prompts_per_rollout=4,8",
        "train.max_responses=64",
        "run.checkpoint_every_rollouts=1",
        *tiny(warm_cache, None),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(
        [*TRAIN, "-m", *args], env=_env(), timeout=400, capture_output=True, text=True, cwd=tmp_path
    )
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = _listed(args, tmp_path, monkeypatch, capsys)
    assert len(runs) == 2 and {r["state"] for r in runs} == {"completed"}, runs
    holders = []
    for run in runs:
        run_dir = tmp_path / run["run_dir"]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["derived"]["world_size"] == 2
        assert summary["final"]["clocks"]["responses"] == 64
        rows = _rows(run_dir)
        assert [r["responses"] for r in rows if "train/reward_mean" in r] == list(
            range(run["B"], 65, run["B"])
        )
        latest = json.loads((run_dir / "checkpoints" / "latest.json").read_text())["tag"]
        assert (run_dir / "checkpoints" / latest / "dcp" / ".metadata").is_file()
        holders.append(_holder(run_dir))
    assert len({h["slurm_array_job_id"] for h in holders}) == 1, "one multirun = one job array"
    # both tasks of each job ran the trainer: rank 0 logged the process group, rank 1 stayed quiet
    sweep = tmp_path / "runs" / "demo"
    logs = sorted((sweep / ".submitit").rglob("*_log.out"))
    text = "\n".join(p.read_text() for p in logs)
    assert text.count("[parallel] ddp over 2 ranks (gloo)") == 2, text[-2000:]
    rank0 = [p for p in logs if p.name.endswith("_0_log.out")]
    assert len(rank0) == 2 and all("[run]" in p.read_text() for p in rank0)
    with capsys.disabled():
        print(f"\n[measured] sweeps=demo on slurm=local_cluster_dp: {len(runs)} runs x 2 tasks, {wall:.1f} s")
    _analyze(sweep, tmp_path / "analysis", len(runs))
