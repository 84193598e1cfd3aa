"""One process owns a run directory: the advisory lock (rundir.RunDirLock, ``run.lock``).

Unit tests of the lock in one process (two open file descriptions conflict like two processes), a
forked child that outlives its parent, and real ``rlvr-train`` processes: a second launch into a
directory in use exits naming the holder or waits for it, and a SIGKILLed holder never blocks the
resume. The same under ``scontrol requeue`` on the local SLURM cluster: tests/slurm/test_slurm_training.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlvr_scaling.rundir import LOCK_FILE, RunDirLock, RunDirLocked, read_holder
from tests.conftest import build_warm_cache, tiny_cli

TRAIN = [sys.executable, "-m", "rlvr_scaling.cli.train"]
SLURM_ENV = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT")


@pytest.fixture(autouse=True)
def _no_slurm_env(monkeypatch):
    for key in SLURM_ENV:
        monkeypatch.delenv(key, raising=False)


# ------------------------------------------------------------------------------------ the lock itself
def test_second_holder_is_refused_with_the_holders_name(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "812")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "800")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "12")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    first, second = RunDirLock(tmp_path), RunDirLock(tmp_path)
    assert first.acquire(0) and first.held
    holder = read_holder(tmp_path / LOCK_FILE)
    assert holder["host"] == socket.gethostname() and holder["pid"] == os.getpid()
    assert (holder["slurm_job_id"], holder["slurm_array_job_id"], holder["slurm_array_task_id"]) == (
        "812",
        "800",
        "12",
    )
    t0 = time.monotonic()
    with pytest.raises(RunDirLocked) as err:
        second.acquire(0.6)
    assert time.monotonic() - t0 >= 0.6  # it waited run.lock_wait_s before giving up
    message = str(err.value)
    for part in (str(tmp_path), f"host {socket.gethostname()}", f"pid {os.getpid()}", "SLURM job 800_12"):
        assert part in message, message
    assert "restart 1" in message and "run.lock_wait_s" in message
    assert not second.held
    first.release()
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID")
    assert second.acquire(0)
    assert read_holder(tmp_path / LOCK_FILE)["slurm_array_job_id"] is None
    second.release()
    assert (tmp_path / LOCK_FILE).is_file(), "the lock file stays (deleting it would allow two holders)"


def test_a_waiting_launch_gets_the_lock_when_the_holder_lets_go(tmp_path):
    first, second = RunDirLock(tmp_path), RunDirLock(tmp_path)
    first.acquire(0)
    timer = threading.Timer(0.8, first.release)
    timer.start()
    lines: list[str] = []
    t0 = time.monotonic()
    assert second.acquire(30, log=lines.append)
    waited = time.monotonic() - t0
    timer.join()
    assert 0.7 <= waited < 10
    assert "waiting up to 30 s" in lines[0] and f"pid {os.getpid()}" in lines[0]
    assert "previous holder is gone" in lines[-1]
    second.release()


def test_a_forked_child_does_not_keep_the_lock(tmp_path):
    """A child forked by the holder (a worker pool, say) outlives it: the lock must still go with the
    holder. Here the holder forks a sleeping child and is SIGKILLed; the lock is free within seconds."""
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from rlvr_scaling.rundir import RunDirLock
lock = RunDirLock({str(tmp_path)!r})
lock.acquire(0)
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    try:
        assert read_holder(tmp_path / LOCK_FILE)["pid"] == holder.pid
        with pytest.raises(RunDirLocked):
            RunDirLock(tmp_path).acquire(0)
        holder.kill()
        holder.wait(timeout=30)
        os.kill(child, 0)  # the child is still alive ...
        lock = RunDirLock(tmp_path)
        # ... and does not hold the directory: the child drops its copy of the descriptor in its
        # after-fork hook, which a loaded machine may not have scheduled yet when the holder dies, so
        # wait a few seconds (the child lives for 60)
        assert lock.acquire(10, log=lambda _: None)
        lock.release()
    finally:
        holder.kill()
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_lock_wait_must_not_be_negative():
    from rlvr_scaling.config import RunConfig
    from rlvr_scaling.errors import ConfigError

    with pytest.raises(ConfigError, match=r"run\.lock_wait_s"):
        RunConfig(lock_wait_s=-1).validate()
    RunConfig(lock_wait_s=0).validate()


def test_an_ended_run_is_skipped_without_the_lock(cache_dir, tmp_path):
    """Re-launching a grid: a completed run is checked and skipped even while something holds its
    lock; a run that would (re)start, here ``run.force``, needs the lock."""
    from rlvr_scaling.run import train
    from tests.conftest import tiny_config

    run_dir = tmp_path / "run"
    cfg = tiny_config(cache_dir, **{"train.max_responses": 16, "run.lock_wait_s": 0})
    assert train(cfg, run_dir, log=lambda *_: None) == "completed"
    blocker = RunDirLock(run_dir)
    blocker.acquire(0)
    try:
        lines: list[str] = []
        assert train(cfg, run_dir, log=lines.append) == "completed"
        assert any(line.startswith("[skip]") for line in lines) and not any("[lock]" in x for x in lines)
        forced = tiny_config(
            cache_dir, **{"train.max_responses": 16, "run.lock_wait_s": 0, "run.force": True}
        )
        with pytest.raises(RunDirLocked, match=f"pid {os.getpid()}"):
            train(forced, run_dir, log=lambda *_: None)
        assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"  # untouched
    finally:
        blocker.release()


# ------------------------------------------------------------------------------ real rlvr-train processes
def tiny(cache_dir: Path) -> list[str]:
    return [*tiny_cli(cache_dir), "run.checkpoint_every_rollouts=4"]


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    for key in SLURM_ENV:
        env.pop(key, None)
    return env


def _launch(run_dir: Path, args: list[str], log: Path) -> subprocess.Popen:
    out = open(log, "w")
    proc = subprocess.Popen(
        [*TRAIN, *args, f"hydra.run.dir={run_dir}"], env=_env(), stdout=out, stderr=subprocess.STDOUT
    )
    out.close()
    return proc


def _wait_for(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def _train_rollouts(run_dir: Path) -> list[int]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["rollout"] for r in rows if "train/reward_mean" in r]


def _holds(run_dir: Path, pid: int) -> bool:
    holder = read_holder(run_dir / LOCK_FILE)
    return bool(holder) and holder.get("pid") == pid


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    """The tiny warm-started model, built once so every process below only loads it."""
    cache = tmp_path_factory.mktemp("lock_cache")
    out = tmp_path_factory.mktemp("warm")
    build_warm_cache(tiny(cache), out, _env())
    return cache


@pytest.mark.timeout(300)
def test_second_launch_exits_naming_the_holder_or_waits_for_it(warm_cache, tmp_path):
    """Process A trains; B (run.lock_wait_s=0) exits at once with code 3 naming A; C (a long wait)
    waits, takes over when A stops (SIGTERM: checkpoint, state preempted) and resumes A's run. The
    metrics file is written by one process at a time: its train rows are rollouts 1, 2, 3, ... once."""
    run_dir = tmp_path / "run"
    args = [*tiny(warm_cache), "train.max_responses=400000"]
    a = _launch(run_dir, args, tmp_path / "a.log")
    c = None
    try:
        _wait_for(lambda: _holds(run_dir, a.pid) and (run_dir / "metrics.jsonl").is_file(), 120, "A to train")
        c = _launch(run_dir, [*args, "run.lock_wait_s=120"], tmp_path / "c.log")  # starts up beside B
        b = subprocess.run(
            [*TRAIN, *args, "run.lock_wait_s=0", f"hydra.run.dir={run_dir}"],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert b.returncode == 3, b.stdout[-2000:] + b.stderr[-2000:]
        assert f"in use by host {socket.gethostname()}, pid {a.pid}" in b.stderr, b.stderr
        assert "[model]" not in b.stdout and "[eval]" not in b.stdout  # B never started training

        _wait_for(lambda: "[lock]" in (tmp_path / "c.log").read_text(), 120, "C to wait for the lock")
        assert a.poll() is None, "A ended before C was seen waiting"
        a.send_signal(signal.SIGTERM)
        assert a.wait(timeout=60) == 0
        stopped_at = _train_rollouts(run_dir)[-1]
        assert json.loads((run_dir / "status.json").read_text())["state"] == "preempted"
        _wait_for(lambda: _holds(run_dir, c.pid), 60, "C to take the lock")
        _wait_for(lambda: _train_rollouts(run_dir)[-1] >= stopped_at + 8, 120, "C to train on")
        c.send_signal(signal.SIGTERM)
        assert c.wait(timeout=60) == 0
    finally:
        for proc in (a, c):
            if proc is not None and proc.poll() is None:
                proc.kill()
    a_log, c_log = (tmp_path / "a.log").read_text(), (tmp_path / "c.log").read_text()
    assert f"in use by host {socket.gethostname()}, pid {a.pid}" in c_log
    assert "previous holder is gone" in c_log and "[resume] from rollout-" in c_log, c_log[-2000:]
    rollouts = _train_rollouts(run_dir)
    assert rollouts == list(range(1, len(rollouts) + 1)), "two writers, or a gap"
    assert rollouts[-1] > stopped_at
    assert "[lock]" not in a_log


@pytest.mark.timeout(300)
def test_sigkilled_holder_never_blocks_the_resume(warm_cache, tmp_path):
    run_dir = tmp_path / "run"
    args = [*tiny(warm_cache), "train.max_responses=2400", "run.lock_wait_s=0"]
    a = _launch(run_dir, args, tmp_path / "a.log")
    try:
        _wait_for(lambda: (run_dir / "checkpoints" / "latest.json").is_file(), 120, "A's first checkpoint")
        assert _holds(run_dir, a.pid)
        a.send_signal(signal.SIGKILL)
        assert a.wait(timeout=30) == -signal.SIGKILL
    finally:
        if a.poll() is None:
            a.kill()
    assert json.loads((run_dir / "status.json").read_text())["state"] == "running"
    assert _holds(run_dir, a.pid), "the file still names the dead holder"
    # no wait allowed: the dead process's lock went with it
    b = subprocess.run(
        [*TRAIN, *args, f"hydra.run.dir={run_dir}"], env=_env(), capture_output=True, text=True, timeout=240
    )
    assert b.returncode == 0, b.stdout[-2000:] + b.stderr[-2000:]
    assert "[resume] from rollout-" in b.stdout and "[lock]" not in b.stdout
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    assert read_holder(run_dir / LOCK_FILE)["pid"] != a.pid
    rollouts = _train_rollouts(run_dir)
    assert rollouts == list(range(1, 2400 // 16 + 1))


@pytest.mark.timeout(300)
def test_in_a_multirun_the_job_fails_with_the_message(tmp_path, cache_dir):
    """Inside a multirun (here Hydra's basic launcher; on SLURM one task of the array) a run directory
    in use fails that job with the holder's name, which the launcher reports, instead of exiting
    without a result. Nothing is trained: the lock is checked before the model is built."""
    run_dir = tmp_path / "sweep" / "run"
    run_dir.mkdir(parents=True)
    holder = RunDirLock(run_dir)
    holder.acquire(0)
    try:
        proc = subprocess.run(
            [
                *TRAIN,
                "-m",
                "hydra/launcher=basic",
                *tiny(cache_dir),
                "run.lock_wait_s=0",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                "hydra.sweep.subdir=run",
            ],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        holder.release()
    assert proc.returncode not in (0, 3), proc.stdout[-2000:]
    assert f"in use by host {socket.gethostname()}, pid {os.getpid()}" in proc.stderr, proc.stderr[-2000:]
    assert "RunDirLocked" in proc.stderr and "[model]" not in proc.stdout
    assert not (run_dir / "metrics.jsonl").exists()
