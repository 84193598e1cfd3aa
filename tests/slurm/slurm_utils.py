"""Drive jobs on the local SLURM cluster (``slurm/local_cluster.sh``) from tests and demos.

The one non-obvious piece is requeueing. SLURM holds a requeued job for about two minutes
(``JobState=PENDING Reason=BeginTime``) before it may start again. A test releases the hold with
``scontrol update JobId=<id> StartTime=now``, but not in the same second as the requeue (the restart
then fails with "Job credential revoked"): :func:`release_begin_time_hold` waits until the hold has
been seen for ``min_hold_s`` seconds first, retries the update while the job stays held, and returns
once the job has left the hold.

Typical use, e.g. to preempt a real training job::

    from slurm_utils import requeue_and_release, wait_for_state

    wait_for_state(job_id, {"RUNNING"}, timeout=120)
    ...                                   # let it write a checkpoint
    requeue_and_release(job_id, how="signal")   # or how="scontrol"
    result = job.result()                 # submitit: the same job id finishes after the restart

Job ids may be plain (``"123"``) or array tasks (``"123_4"``, what Hydra's submitit launcher makes).
Every wait is bounded and raises :class:`TimeoutError` saying what it last saw.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "slurm" / "local_cluster.sh"
PARTITION = "debug"  # the local cluster's only partition
ACCOUNT = "rlvr"  # registered in accounting by local_cluster.sh

_CMD_TIMEOUT_S = 30.0
_FIELD = re.compile(r"(\w+)=(\S*)")
_RESTARTED = {"RUNNING", "COMPLETED"}  # states that prove a requeued job ran again


def run(*cmd: str, check: bool = True, timeout: float = _CMD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run a SLURM client command; raise with its stderr when it fails and ``check`` is set."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def cluster_unavailable_reason() -> str | None:
    """Why the SLURM tests cannot run here, or ``None`` when the cluster is up and usable.

    Checks, in order: the client tools, ``SLURM_CONF``, the controller (``sinfo``), a usable node,
    and accounting (``sacct``; without slurmdbd a cancelled job never looks finished to submitit).
    """
    start = f'start it with: {CLUSTER_SCRIPT.relative_to(REPO)} start && eval "$({CLUSTER_SCRIPT.relative_to(REPO)} env)"'
    if shutil.which("sinfo") is None or shutil.which("srun") is None:
        return f"SLURM client tools (sinfo/srun) not on PATH; install them: {CLUSTER_SCRIPT.relative_to(REPO)} install"
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        return f"SLURM_CONF is unset; {start}"
    if not Path(conf).is_file():
        return f"SLURM_CONF={conf} does not exist; {start}"
    try:
        proc = run("sinfo", "-h", "-p", PARTITION, "-o", "%t", check=False, timeout=15)
    except subprocess.TimeoutExpired:
        return f"sinfo timed out (controller unreachable); {start}"
    if proc.returncode != 0:
        return f"sinfo failed ({proc.stderr.strip()[:200]}); {start}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#") in {"idle", "mix", "alloc", "comp"} for s in states):
        return f"no usable node in partition {PARTITION!r} (states: {states or 'none'}); {start}"
    try:
        proc = run("sacct", "-n", "-X", "-S", "now", check=False, timeout=15)
    except subprocess.TimeoutExpired:
        return "sacct timed out: accounting (slurmdbd) unreachable"
    if proc.returncode != 0:
        return f"sacct failed ({proc.stderr.strip()[:200]}): accounting (slurmdbd) unreachable"
    return None


def wait_for(probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Call ``probe`` until it returns something truthy and return that; bounded by ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------- job state
def job_info(job_id: str) -> dict[str, str]:
    """``scontrol show job -o`` as a dict (``JobState``, ``Reason``, ``Restarts``, ...); ``{}`` if unknown."""
    proc = run("scontrol", "show", "job", "-o", str(job_id), check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {}
    # An array's parent id lists every task; keep the first line (the task itself for "123_4").
    return dict(_FIELD.findall(proc.stdout.strip().splitlines()[0]))


def job_state(job_id: str) -> str:
    """``JobState`` from the controller, falling back to ``sacct`` once the job has been purged."""
    state = job_info(job_id).get("JobState")
    if state:
        return state
    proc = run("sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State", check=False)
    lines = proc.stdout.split()
    return lines[-1].split()[0] if lines else "UNKNOWN"


def wait_for_state(job_id: str, states: Iterable[str], timeout: float = 60.0) -> dict[str, str]:
    """Wait until the job's ``JobState`` is one of ``states``; return its ``job_info``."""
    wanted = set(states)
    last: dict[str, str] = {}

    def probe() -> dict[str, str] | None:
        nonlocal last
        last = job_info(job_id)
        return last if last.get("JobState") in wanted else None

    try:
        return wait_for(probe, timeout, f"job {job_id} to reach {sorted(wanted)}", interval=0.3)
    except TimeoutError as err:
        raise TimeoutError(f"{err}; last seen {_brief(last)}") from None


def restarts(job_id: str) -> int:
    """How many times SLURM has requeued the job (``Restarts``)."""
    return int(job_info(job_id).get("Restarts", "0") or 0)


def squeue_jobs(name: str | None = None) -> list[tuple[str, str, str]]:
    """``(job_id, name, state)`` of the queued/running jobs, optionally only those named ``name``.

    Array tasks come out one per line (``123_4``); handy to find the jobs a Hydra multirun submitted.
    """
    cmd = ["squeue", "-h", "-r", "-o", "%i|%j|%T"]
    if name is not None:
        cmd += ["-n", name]
    out = run(*cmd).stdout
    return [tuple(line.split("|", 2)) for line in out.splitlines() if line.strip()]  # type: ignore[misc]


def _brief(info: dict[str, str]) -> str:
    keys = ("JobId", "JobState", "Reason", "Restarts", "StartTime")
    return " ".join(f"{k}={info[k]}" for k in keys if k in info) or "nothing (job unknown)"


# ----------------------------------------------------------------------------------------- requeue
def requeue(job_id: str, how: str = "signal") -> None:
    """Preempt a running job so that it is requeued.

    ``how="signal"``: what submitit's ``job._interrupt()`` does: SIGTERM, then SIGUSR2, to the job's
    steps. submitit ignores the SIGTERM; on SIGUSR2 it calls the task's ``checkpoint()``, pickles the
    result and runs ``scontrol requeue`` itself. This is the time-out/preemption path submitit is
    built for.

    ``how="scontrol"``: ``scontrol requeue <id>``, what an admin or a ``PreemptMode=REQUEUE``
    preemption does: SIGTERM, SIGKILL after ``KillWait``, and no ``checkpoint()`` call; the task
    restarts from its original arguments and must resume from whatever it saved on its own.
    """
    if how == "signal":
        run("scancel", str(job_id), "--signal", "SIGTERM")
        run("scancel", str(job_id), "--signal", "USR2")
    elif how == "scontrol":
        run("scontrol", "requeue", str(job_id))
    else:
        raise ValueError(f"how must be 'signal' or 'scontrol', got {how!r}")


def release_begin_time_hold(
    job_id: str,
    min_hold_s: float = 3.0,
    timeout: float = 90.0,
    retry_s: float = 3.0,
    min_restarts: int = 1,
) -> float:
    """Release the ~2-minute hold SLURM puts on a requeued job; return the seconds this took.

    Waits for ``JobState=PENDING Reason=BeginTime``; once that has been seen continuously for
    ``min_hold_s`` seconds, runs ``scontrol update JobId=<id> StartTime=now``, again every
    ``retry_s`` seconds while the job stays held. Returns when the job has left the hold, or when it
    already runs again with at least ``min_restarts`` restarts (a release that raced this function).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    held_since: float | None = None
    last_update = float("-inf")
    errors: list[str] = []
    info: dict[str, str] = {}
    while time.monotonic() < deadline:
        info = job_info(job_id)
        held = info.get("JobState") == "PENDING" and info.get("Reason") == "BeginTime"
        now = time.monotonic()
        if held:
            held_since = held_since if held_since is not None else now
            if now - held_since >= min_hold_s and now - last_update >= retry_s:
                proc = run("scontrol", "update", f"JobId={job_id}", "StartTime=now", check=False)
                if proc.returncode != 0:
                    errors.append(proc.stderr.strip())
                last_update = now
        elif held_since is not None:
            return now - t0  # was held, is not any more
        elif info.get("JobState") in _RESTARTED and int(info.get("Restarts", "0") or 0) >= min_restarts:
            # Requeued and restarted without us seeing the hold. (Not COMPLETING: after
            # `scontrol requeue` the killed run completes with Restarts already incremented.)
            return now - t0
        time.sleep(0.25)
    raise TimeoutError(
        f"job {job_id} not released from the requeue hold within {timeout:.0f}s; last seen {_brief(info)}"
        + (f"; scontrol update errors: {errors[-3:]}" if errors else "")
    )


def requeue_and_release(job_id: str, how: str = "signal", timeout: float = 120.0) -> dict[str, str]:
    """Requeue a running job (:func:`requeue`), release the hold, wait until it runs again.

    Returns the ``job_info`` of the restarted job (``Restarts`` one higher than before).
    """
    before = restarts(job_id)
    t0 = time.monotonic()
    requeue(job_id, how)
    release_begin_time_hold(job_id, timeout=timeout, min_restarts=before + 1)
    left = max(5.0, timeout - (time.monotonic() - t0))

    def restarted() -> dict[str, str] | None:
        info = job_info(job_id)
        ok = int(info.get("Restarts", "0") or 0) > before and info.get("JobState") in _RESTARTED
        return info if ok else None

    return wait_for(restarted, left, f"job {job_id} to run again after the requeue", interval=0.3)
