"""submitit on the real local SLURM cluster: results, failures, cancellation, requeue/preemption.

Needs ``slurm/local_cluster.sh start`` and ``eval "$(slurm/local_cluster.sh env)"``; skipped otherwise.
Every test is bounded (pytest-timeout): a hang here is a bug (e.g. missing accounting), not slowness.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import cloudpickle
import pytest
import submitit
from slurm_utils import ACCOUNT, PARTITION, job_state, requeue_and_release, wait_for, wait_for_state
from submitit.core.utils import FailedJobError, UncompletedJobError

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

# The job process unpickles the submitted callables; this test module is not importable there
# (pytest put its folder on sys.path, sbatch does not), so ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# ------------------------------------------------------------------------------------ job payloads
def add(a: int, b: int) -> int:
    return a + b


def whoami() -> dict[str, str | None]:
    keys = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT", "SLURM_CONF")
    return {k: os.environ.get(k) for k in keys}


def square(x: int) -> int:
    return x * x


def explode(message: str) -> None:
    raise ValueError(message)


class CountTo(submitit.helpers.Checkpointable):
    """Counts to ``total``, one step every ``step_s`` s, keeping the count in ``workdir/count``.

    That file is the checkpoint: each (re)start resumes from it and appends its starting count to
    ``workdir/starts``; ``checkpoint()`` (called by submitit on SIGUSR2) appends to
    ``workdir/checkpoints``. The result is ``(final count, starting counts)``.
    """

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, workdir: str, total: int, step_s: float) -> tuple[int, list[int]]:
        root = Path(workdir)
        state = root / "count"
        self.count = int(state.read_text()) if state.exists() else 0
        with open(root / "starts", "a") as f:
            f.write(f"{self.count}\n")
        while self.count < total:
            time.sleep(step_s)
            self.count += 1
            tmp = root / "count.tmp"
            tmp.write_text(str(self.count))
            os.replace(tmp, state)  # atomic: a kill never leaves a torn checkpoint
        starts = [int(x) for x in (root / "starts").read_text().split()]
        return self.count, starts

    def checkpoint(self, workdir: str, total: int, step_s: float) -> submitit.helpers.DelayedSubmission:
        with open(Path(workdir) / "checkpoints", "a") as f:
            f.write(f"{self.count}\n")
        return super().checkpoint(workdir, total, step_s)


# ---------------------------------------------------------------------------------------- fixtures
@pytest.fixture
def executor(tmp_path: Path) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=tmp_path / "submitit" / "%j", cluster="slurm")
    ex.update_parameters(
        timeout_min=10,
        cpus_per_task=1,
        mem_gb=1,
        slurm_partition=PARTITION,
        slurm_account=ACCOUNT,
        slurm_signal_delay_s=30,
    )
    return ex


def _elapsed(t0: float) -> float:
    return time.monotonic() - t0


# ------------------------------------------------------------------------------------------- tests
@pytest.mark.timeout(120)
def test_job_returns_its_value(executor: submitit.AutoExecutor) -> None:
    job = executor.submit(add, 2, 3)
    assert job.result() == 5
    env = executor.submit(whoami).result()
    assert env["SLURM_JOB_PARTITION"] == PARTITION
    assert env["SLURM_JOB_ACCOUNT"] == ACCOUNT
    assert env["SLURM_CONF"] == os.environ["SLURM_CONF"]  # jobs inherit the cluster's config
    # submitit reads the state from sacct: accounting has the job.
    wait_for(lambda: job_state(job.job_id) == "COMPLETED", 30, f"sacct to show {job.job_id} COMPLETED")


@pytest.mark.timeout(120)
def test_map_array_is_one_array_job(executor: submitit.AutoExecutor) -> None:
    jobs = executor.map_array(square, [1, 2, 3])
    assert [j.result() for j in jobs] == [1, 4, 9]
    array_ids = {j.job_id.split("_")[0] for j in jobs}
    assert len(array_ids) == 1, f"expected one array job, got {[j.job_id for j in jobs]}"


@pytest.mark.timeout(120)
def test_failure_surfaces_with_traceback(executor: submitit.AutoExecutor) -> None:
    job = executor.submit(explode, "boom from the job")
    with pytest.raises(FailedJobError) as err:
        job.result()
    text = str(err.value)
    assert "ValueError: boom from the job" in text
    assert "Traceback" in text and "explode" in text


@pytest.mark.timeout(150)
def test_cancelled_job_does_not_hang(executor: submitit.AutoExecutor) -> None:
    job = executor.submit(time.sleep, 600)
    wait_for_state(job.job_id, {"RUNNING"}, timeout=60)
    t0 = time.monotonic()
    job.cancel(check=True)
    with pytest.raises(UncompletedJobError):
        job.result()
    assert _elapsed(t0) < 90, "result() of a cancelled job must return promptly (needs sacct)"
    wait_for(lambda: job_state(job.job_id) == "CANCELLED", 30, "sacct to show CANCELLED")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("how", ["signal", "scontrol"])
def test_requeue_resumes_from_checkpoint(executor: submitit.AutoExecutor, tmp_path: Path, how: str) -> None:
    """A job preempted mid-run is requeued, released from the BeginTime hold, resumes, finishes.

    ``signal``: submitit's own path (job._interrupt(): SIGUSR2 -> checkpoint() -> scontrol requeue).
    ``scontrol``: an external requeue (admin/preemption): killed, restarted with the original
    arguments, resuming only from what the task itself saved.
    """
    workdir = tmp_path / "work"
    workdir.mkdir()
    total, step_s, preempt_at = 32, 0.25, 8
    job = executor.submit(CountTo(), str(workdir), total, step_s)
    wait_for_state(job.job_id, {"RUNNING"}, timeout=60)
    count_file = workdir / "count"
    wait_for(
        lambda: count_file.exists() and int(count_file.read_text() or 0) >= preempt_at,
        60,
        f"the job to count to {preempt_at}",
        interval=0.1,
    )

    info = requeue_and_release(job.job_id, how=how, timeout=150)
    assert int(info["Restarts"]) == 1

    final, starts = job.result()
    assert final == total
    assert len(starts) == 2 and starts[0] == 0, starts
    assert preempt_at <= starts[1] < total, f"did not resume from the checkpoint: {starts}"
    checkpoints = (workdir / "checkpoints").read_text().split() if (workdir / "checkpoints").exists() else []
    if how == "signal":
        assert len(checkpoints) == 1 and int(checkpoints[0]) >= preempt_at, checkpoints
    else:
        assert checkpoints == [], "scontrol requeue must not go through submitit's checkpoint()"
    # result() returns once the result file exists; the job itself ends a moment later.
    wait_for(lambda: job_state(job.job_id) == "COMPLETED", 30, f"job {job.job_id} to end COMPLETED")
