"""The run directory (docs/design.md §6): atomic files, the metrics log, checkpoints.

One process owns a run directory at a time: :class:`RunDirLock` (``run.lock``, an advisory ``flock``
held for the run's life). Every file is written under a temporary name and renamed, so a run killed at
any instant leaves either the old or the new version. ``metrics.jsonl`` is append-only; a checkpoint
records how many lines it covers, and a resumed run truncates the log to that count before appending,
so the log of a killed and resumed run equals the log of an uninterrupted one (``eval_problems.jsonl``, the
per-problem record of the evaluations, the same way). Checkpoints hold tensors
in safetensors and everything else in JSON; nothing is unpickled when loading.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import shutil
import socket
import time
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

CHECKPOINTS = "checkpoints"
# one line per evaluation: which response of which held-out problem was correct (evaluation.problem_record)
EVAL_PROBLEMS = "eval_problems.jsonl"
LOCK_FILE = "run.lock"


def _json_default(obj: Any):
    if isinstance(obj, torch.Tensor):
        return obj.item() if obj.numel() == 1 else obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def clean_float(value: Any) -> Any:
    """NaN/Inf are not JSON: write them as strings the analysis can parse back ('nan', 'inf')."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def dumps(obj: Any, strict: bool = True, **kw) -> str:
    """JSON text; ``strict`` refuses NaN/Inf (files other tools read), else Python's extension."""
    return json.dumps(obj, default=_json_default, allow_nan=not strict, **kw)


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj: Any, strict: bool = True) -> None:
    atomic_write_text(path, dumps(obj, strict=strict, indent=2) + "\n")


def ended_state(run_dir: Path) -> str | None:
    """``completed``/``failed`` when the directory holds a run that has ended, else None (no lock needed)."""
    status = run_dir / "status.json"
    if not (run_dir / "config.yaml").is_file() or not status.is_file():
        return None
    try:
        state = json.loads(status.read_text()).get("state")
    except (OSError, json.JSONDecodeError):
        return None
    return state if state in ("completed", "failed") else None


class RunDirLocked(RuntimeError):
    """Another live process holds the run directory (the message names it)."""


_SLURM_KEYS = {
    "slurm_job_id": "SLURM_JOB_ID",
    "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
    "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
    "slurm_restart_count": "SLURM_RESTART_COUNT",
}
_HELD: weakref.WeakSet[RunDirLock] = weakref.WeakSet()


def _forget_locks_in_child() -> None:
    # A forked child shares the lock's open file description; closing its copy of the descriptor (never
    # LOCK_UN, which would unlock the parent too) means a child that outlives a killed parent cannot
    # keep the directory locked.
    for lock in list(_HELD):
        lock._forget()


os.register_at_fork(after_in_child=_forget_locks_in_child)


def holder_info() -> dict[str, Any]:
    """Who holds a lock: host, pid, start time (UTC) and the SLURM job, array task and restart count."""
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    info.update({key: os.environ.get(var) for key, var in _SLURM_KEYS.items()})
    return info


def describe_holder(info: dict[str, Any] | None) -> str:
    if not info:
        return "another process (it has not written its name yet)"
    text = f"host {info.get('host')}, pid {info.get('pid')}"
    if info.get("slurm_array_job_id"):
        text += f", SLURM job {info['slurm_array_job_id']}_{info.get('slurm_array_task_id')}"
        text += f" (job id {info.get('slurm_job_id')})"
    elif info.get("slurm_job_id"):
        text += f", SLURM job {info['slurm_job_id']}"
    if info.get("slurm_restart_count"):
        text += f", restart {info['slurm_restart_count']}"
    return text + f", since {info.get('since')}"


def read_holder(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent, or being written right now


class RunDirLock:
    """One process owns a run directory: an exclusive ``fcntl.flock`` on ``<run_dir>/run.lock``.

    :meth:`acquire` takes the lock, waiting up to ``wait_s`` seconds while another process holds it,
    then writes the holder (:func:`holder_info`: host, pid, start time, SLURM job/array task/restart)
    into the file; past the wait it raises :class:`RunDirLocked` naming the holder. The lock lives as
    long as the process: the kernel drops it when the process exits or is killed (SIGKILL, a node's
    OOM killer, SLURM's KillWait), so a lock left by a dead process never blocks a resume. The file is
    never deleted (deleting it would let two processes lock two different files of the same name);
    between runs it names the last holder.

    Advisory: only processes that ask for it are kept out. ``flock`` works across the processes of one
    machine on any local filesystem; on network filesystems see docs/slurm.md (NFS emulates it with
    byte-range locks; a filesystem that refuses it gets a warning and the run goes on unlocked).
    """

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self._fh = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def acquire(self, wait_s: float, log=print, poll_s: float = 0.25) -> bool:
        """Take the lock (True), or go on without it where the filesystem has no ``flock`` (False)."""
        if self._fh is not None:
            return True
        fh = open(self.path, "a+")  # never truncated before the lock is ours
        deadline = time.monotonic() + wait_s
        waiting = False
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = describe_holder(read_holder(self.path))
                left = deadline - time.monotonic()
                if left <= 0:
                    fh.close()
                    raise RunDirLocked(
                        f"run directory {self.path.parent} is in use by {holder}; "
                        f"gave up after waiting {wait_s:g} s (run.lock_wait_s). If that process is gone for "
                        "good, its lock went with it: launch again"
                    ) from None
                if not waiting:
                    log(f"[lock] {self.path.parent} is in use by {holder}: waiting up to {wait_s:g} s")
                    waiting = True
                time.sleep(min(poll_s, left))
            except OSError as err:
                if err.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP):
                    fh.close()
                    raise
                fh.close()
                log(
                    f"[lock] warning: the filesystem of {self.path.parent} does not support flock "
                    f"({errno.errorcode.get(err.errno, err.errno)}): running without the run-directory lock"
                )
                return False
        fh.seek(0)
        fh.truncate()
        fh.write(dumps(holder_info()) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
        self._fh = fh
        _HELD.add(self)
        if waiting:
            log(f"[lock] {self.path.parent}: the previous holder is gone, continuing")
        return True

    def release(self) -> None:
        if self._fh is None:
            return
        fh, self._fh = self._fh, None
        _HELD.discard(self)
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        finally:
            fh.close()

    def _forget(self) -> None:
        if self._fh is not None:
            fh, self._fh = self._fh, None
            _HELD.discard(self)
            fh.close()  # this process's descriptor only; the lock stays with the parent


class MetricsLog:
    """Append-only JSON-lines log; every row is flushed so a SIGKILL loses at most a partial line."""

    def __init__(self, path: Path):
        self.path = path
        self.lines = 0
        if path.exists():
            self.lines = sum(1 for line in path.read_text().splitlines() if line.strip())
        self._fh = open(path, "a")

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(dumps({k: clean_float(v) for k, v in row.items()}) + "\n")
        self._fh.flush()
        self.lines += 1

    def truncate(self, n_lines: int) -> None:
        """Keep the first ``n_lines`` complete rows (drops rows written after the last checkpoint)."""
        self._fh.close()
        kept = []
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                if len(kept) == n_lines:
                    break
                if line.strip():
                    kept.append(line)
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))
        self.lines = len(kept)
        self._fh = open(self.path, "a")

    def close(self) -> None:
        self._fh.close()


def _flatten_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors, meta = {}, {"param_groups": state["param_groups"], "state": {}}
    for idx, entry in state["state"].items():
        meta["state"][str(idx)] = {}
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{idx}.{key}"] = value.detach().cpu().contiguous()
                meta["state"][str(idx)][key] = "__tensor__"
            else:
                meta["state"][str(idx)][key] = value
    return tensors, meta


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state = {}
    for idx, entry in meta["state"].items():
        state[int(idx)] = {
            key: tensors[f"{idx}.{key}"] if value == "__tensor__" else value for key, value in entry.items()
        }
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(
    run_dir: Path,
    tag: str,
    model,
    optimizer,
    trainer_state: dict,
    keep: int = 1,
    dist_env=None,
    tensor_files: dict[str, dict[str, torch.Tensor]] | None = None,
) -> Path:
    """Write a checkpoint atomically (a temporary directory renamed into place).

    ``tensor_files``: further safetensors files (name -> tensors, identical on every rank), written by
    rank 0 beside the others (e.g. the queued stale weights of ``rollout.staleness``).

    One process: ``model.safetensors`` + ``optimizer.safetensors``/``.json``. Data-parallel
    (``dist_env.enabled``): model and optimizer state go through ``torch.distributed.checkpoint`` into
    ``dcp/`` (every rank writes its shards; loadable at any world size, including 1); rank 0 writes
    the rest. Every rank must call this.
    """
    distributed = dist_env is not None and dist_env.enabled
    main = not distributed or dist_env.is_main
    root = run_dir / CHECKPOINTS
    final = root / tag
    tmp = root / f".{tag}.tmp"
    if main:
        root.mkdir(exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    if distributed:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        dist_env.barrier()
        msd, osd = get_state_dict(model, optimizer)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(tmp / "dcp"))
        dist_env.barrier()
        if not main:
            dist_env.barrier()
            return final
    else:
        save_model(model, str(tmp / "model.safetensors"))
        opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        atomic_write_json(tmp / "optimizer.json", opt_meta)
    rng = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng.update({f"torch_cuda_{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    save_file(rng, str(tmp / "rng.safetensors"))
    for name, tensors in (tensor_files or {}).items():
        save_file(tensors, str(tmp / name))
    atomic_write_json(tmp / "trainer.json", trainer_state, strict=False)  # detector state may hold -inf
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    atomic_write_json(root / "latest.json", {"tag": tag})
    tags = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for old in tags[:-keep] if keep else []:
        if old != tag:
            shutil.rmtree(root / old, ignore_errors=True)
    if distributed:
        dist_env.barrier()
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = run_dir / CHECKPOINTS / "latest.json"
    if not pointer.is_file():
        return None
    path = run_dir / CHECKPOINTS / json.loads(pointer.read_text())["tag"]
    return path if (path / "trainer.json").is_file() else None


def load_checkpoint(path: Path, model, optimizer, full_model=None, dist_env=None) -> dict:
    """Restore model, optimizer and RNG state; returns the trainer state. Either format loads at any
    world size: a ``dcp/`` checkpoint through ``torch.distributed.checkpoint`` (resharded to the
    current ranks, or read whole by a single process); a single-process safetensors checkpoint into a
    data-parallel run through full state dicts (``full_model``: the run's unsharded module)."""
    distributed = dist_env is not None and dist_env.enabled
    if (path / "dcp").is_dir():
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        msd, osd = get_state_dict(model, optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=str(path / "dcp"))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    elif distributed:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        load_model(full_model, str(path / "model.safetensors"), strict=True)  # resolves tied weights
        names = [n for n, _ in full_model.named_parameters()]
        opt_meta = json.loads((path / "optimizer.json").read_text())
        native = _unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), opt_meta)
        by_name = {
            "state": {names[int(i)]: v for i, v in native["state"].items()},
            "param_groups": [
                {**g, "params": [names[int(i)] for i in g["params"]]} for g in native["param_groups"]
            ],
        }
        set_state_dict(
            model,
            optimizer,
            model_state_dict=full_model.state_dict(),
            optim_state_dict=by_name,
            options=StateDictOptions(full_state_dict=True),
        )
    else:
        load_model(model, str(path / "model.safetensors"), strict=True)
        opt_meta = json.loads((path / "optimizer.json").read_text())
        optimizer.load_state_dict(
            _unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), opt_meta)
        )
    rng = load_file(str(path / "rng.safetensors"))
    torch.set_rng_state(rng["torch_cpu"])
    if torch.cuda.is_available():
        cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
    return json.loads((path / "trainer.json").read_text())


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive ``flock`` on ``path`` (created) for the block: concurrent jobs that would build the
    same cached artefact (a warm start, a converted model) wait for the first instead of building twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
