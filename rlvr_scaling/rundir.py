"""The run directory (DESIGN.md §6): atomic files, the metrics log, checkpoints.

Every file is written under a temporary name and renamed, so a run killed at any instant leaves either
the old or the new version. ``metrics.jsonl`` is append-only; a checkpoint records how many lines it
covers, and a resumed run truncates the log to that count before appending, so the log of a killed and
resumed run equals the log of an uninterrupted one. Checkpoints hold tensors in safetensors and
everything else in JSON; nothing is unpickled when loading.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

CHECKPOINTS = "checkpoints"


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
