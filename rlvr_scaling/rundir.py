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


def save_checkpoint(run_dir: Path, tag: str, model, optimizer, trainer_state: dict, keep: int = 1) -> Path:
    root = run_dir / CHECKPOINTS
    root.mkdir(exist_ok=True)
    final = root / tag
    tmp = root / f".{tag}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_model(model, str(tmp / "model.safetensors"))
    opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
    save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    rng = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng.update({f"torch_cuda_{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    save_file(rng, str(tmp / "rng.safetensors"))
    atomic_write_json(tmp / "optimizer.json", opt_meta)
    atomic_write_json(tmp / "trainer.json", trainer_state, strict=False)  # detector state may hold -inf
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    atomic_write_json(root / "latest.json", {"tag": tag})
    tags = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for old in tags[:-keep] if keep else []:
        if old != tag:
            shutil.rmtree(root / old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = run_dir / CHECKPOINTS / "latest.json"
    if not pointer.is_file():
        return None
    path = run_dir / CHECKPOINTS / json.loads(pointer.read_text())["tag"]
    return path if (path / "trainer.json").is_file() else None


def load_checkpoint(path: Path, model, optimizer) -> dict:
    missing, unexpected = load_model(model, str(path / "model.safetensors"), strict=True)
    opt_meta = json.loads((path / "optimizer.json").read_text())
    optimizer.load_state_dict(_unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), opt_meta))
    rng = load_file(str(path / "rng.safetensors"))
    torch.set_rng_state(rng["torch_cpu"])
    if torch.cuda.is_available():
        cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
    return json.loads((path / "trainer.json").read_text())
