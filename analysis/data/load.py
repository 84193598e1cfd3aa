"""Read runs into one in-memory form, whatever their source.

Three sources give the same :class:`RunRecord` (and therefore the same tables downstream):

* run directories (docs/design.md §6): any folder holding ``config.yaml`` at its own top level together
  with ``metrics.jsonl`` or ``status.json``; Hydra's ``.hydra/config.yaml`` copies are not runs;
* wandb offline run folders (``wandb/offline-run-*/run-<id>.wandb``), see :mod:`analysis.data.wandb_io`;
* the wandb API (``wandb:ENTITY/PROJECT``), see :mod:`analysis.data.wandb_io`.

Nothing here raises on a bad run: a run that cannot be read becomes a :class:`SkippedRun` (which run,
why), and a run that can be partly read is truncated and keeps a note saying so.
"""

from __future__ import annotations

import json
import math
import os
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import yaml

from analysis.data.records import (  # noqa: F401 - the record types' public import path stays analysis.data.load
    LoadResult,
    RunReadError,
    RunRecord,
    SkippedRun,
    is_number,
    validate_rows,
)

#: Clocks every metrics row carries (docs/design.md §3); ``responses`` is the primary one and must be valid.
CLOCKS = (
    "rollout",
    "responses",
    "tokens",
    "optimizer_steps",
    "wall_seconds",
    "flops",
    "flops_nominal",
    "eval_responses",
)
STATES = ("running", "completed", "failed", "preempted")
#: Keys never part of a condition: the seed, the key a sweep varies to change B, and bookkeeping.
# the seed, the size and bookkeeping; a run's budget, its stop rule and its planned horizon decide only
# how long it runs, never its dynamics (analysis.data.clock_tables reads every run of a condition to one horizon)
DEFAULT_IGNORED_KEYS = (
    "seed",
    "rollout.prompts_per_rollout",
    "logger",
    "run",
    "train.max_responses",
    "train.stop_at_targets",
    "train.stop_at_responses",
    "train.stop_at_accuracy",
    "eval.horizon",
    "eval.sparse_every",
    "eval.dense_margin",
)

_SKIP_DIRS = {".hydra", "checkpoints", "__pycache__", ".git"}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ----------------------------------------------------------------------------------------------
# config helpers


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten a nested config to dotted leaf keys; lists become their JSON text, ``{}`` stays a leaf."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_config(value, name + "."))
        elif isinstance(value, dict):
            flat[name] = "{}"
        elif isinstance(value, (list, tuple)):
            flat[name] = json.dumps(list(value))
        else:
            flat[name] = value
    return flat


def key_matches(key: str, pattern: str) -> bool:
    """``pattern`` names ``key`` itself, a parent of it (``run`` covers ``run.name``) or globs it."""
    return key == pattern or key.startswith(pattern + ".") or fnmatch(key, pattern)


def get_path(config: dict[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


# ----------------------------------------------------------------------------------------------
# metrics rows


def parse_jsonl(text: str, notes: list[str]) -> list[Any]:
    """Parse JSON lines; a bad last line is a crash mid-write (dropped), a bad middle line truncates."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    filled = [line for line in lines if line.strip()]
    try:  # fast path: one parse for the whole file (checked: one value per line)
        parsed = json.loads("[" + ",".join(filled) + "]")
        if len(parsed) == len(filled):
            return parsed
    except ValueError:
        pass  # find the bad line below
    out: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                notes.append(f"metrics: last line {number} is truncated; dropped")
            else:
                notes.append(f"metrics: invalid JSON at line {number}; rows from there on dropped")
            break
    return out


_NON_FINITE = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "-infinity": -math.inf,
}


def as_float(value: Any) -> float | None:
    """A metric value as a float: numbers, and the strings the trainer writes for non-finite values
    (``"nan"``, ``"inf"``; JSON has no NaN); anything else is None."""
    if type(value) is float or type(value) is int:
        return float(value)
    if isinstance(value, str):
        return _NON_FINITE.get(value.strip().lower())
    return float(value) if is_number(value) else None


# ----------------------------------------------------------------------------------------------
# run directories


def _read_json(path: Path, what: str, notes: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        notes.append(f"{what} missing")
        return None
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        notes.append(f"{what} unreadable ({type(err).__name__})")
        return None
    if not isinstance(value, dict):
        notes.append(f"{what} is not a JSON object")
        return None
    return value


def read_run_dir(path: Path, run_id: str) -> RunRecord:
    """Read one run directory; raises :class:`RunReadError` when nothing usable is left."""
    notes: list[str] = []
    try:
        config = yaml.load((path / "config.yaml").read_text(), Loader=_Loader)
    except (OSError, yaml.YAMLError) as err:
        raise RunReadError(f"config.yaml unreadable ({type(err).__name__})") from err
    if not isinstance(config, dict):
        raise RunReadError("config.yaml is not a mapping")
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise RunReadError("metrics.jsonl missing")
    try:
        text = metrics.read_text(errors="replace")
    except OSError as err:
        raise RunReadError(f"metrics.jsonl unreadable ({type(err).__name__})") from err
    rows = validate_rows(parse_jsonl(text, notes), notes)
    if not rows:
        raise RunReadError("metrics.jsonl has no valid rows" + (f" ({notes[-1]})" if notes else ""))
    status = _read_json(path / "status.json", "status.json", notes)
    summary = _read_json(path / "summary.json", "summary.json", notes)
    return RunRecord(
        run=run_id,
        path=str(path),
        source="dir",
        config=config,
        rows=rows,
        status=status,
        summary=summary,
        name=get_path(config, "run.name"),
        group=get_path(config, "run.sweep"),
        notes=notes,
    )


def discover(root: Path) -> tuple[list[Path], list[Path]]:
    """Walk ``root`` for run directories and wandb offline run folders (both sorted)."""
    run_dirs: list[Path] = []
    offline: list[Path] = []
    if root.is_file() and root.suffix == ".wandb":
        return [], [root.parent]
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        names = set(filenames)
        if here.name.startswith(("offline-run-", "run-")) and any(n.endswith(".wandb") for n in names):
            offline.append(here)
            dirnames[:] = []
            continue
        if here.name != ".hydra" and "config.yaml" in names and names & {"metrics.jsonl", "status.json"}:
            run_dirs.append(here)
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    return sorted(run_dirs), sorted(offline)


def _relative(path: Path, root: Path) -> str:
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else path.name


def _read_any(item: tuple[str, tuple[str, ...], str]) -> RunRecord | SkippedRun:
    """Read one run; any failure becomes a :class:`SkippedRun` (a bad run never stops the analysis)."""
    kind, paths, run_id = item
    path = paths[0]
    try:
        if kind == "dir":
            return read_run_dir(Path(path), run_id)
        from analysis.data import wandb_io  # local import: keeps wandb internals off the run-directory path

        return wandb_io.read_offline_run([Path(p) for p in paths], run_id)
    except RunReadError as err:
        return SkippedRun(run_id, path, str(err))
    except Exception as err:  # anything unforeseen in one file is still that run's problem only
        return SkippedRun(run_id, path, f"unexpected {type(err).__name__}: {err}")


def load_dirs(root: Path, prefer: str = "auto", jobs: int = 1) -> LoadResult:
    """Load every run under ``root`` (in ``jobs`` processes).

    ``prefer``: ``dirs`` reads run directories only, ``wandb-offline`` offline wandb folders only,
    ``auto`` run directories when there are any (offline copies of the same runs are then ignored,
    and said so), else offline wandb folders.
    """
    from analysis._parallel import fork_map

    run_dirs, offline = discover(root)
    result = LoadResult(runs=[], skipped=[])
    use_dirs = prefer == "dirs" or (prefer == "auto" and run_dirs)
    if use_dirs and offline:
        result.messages.append(
            f"{len(offline)} wandb offline run(s) ignored because run directories were found "
            "(use --from wandb-offline to read them instead)"
        )
    if use_dirs:
        items = [("dir", (str(p),), _relative(p, root)) for p in run_dirs]
    else:
        from analysis.data.wandb_io import offline_run_id

        segments: dict[str, list[Path]] = {}  # a resumed wandb run leaves one folder per segment
        for p in offline:
            segments.setdefault(offline_run_id(p), []).append(p)
        items = [
            ("wandb", tuple(str(p) for p in sorted(ps, key=lambda p: p.name)), _relative(ps[0], root))
            for ps in segments.values()
        ]
    for got in fork_map(_read_any, items, jobs if len(items) >= 64 else 1):
        (result.skipped if isinstance(got, SkippedRun) else result.runs).append(got)
    return result


def apply_filters(
    result: LoadResult,
    group: str | None = None,
    tags: tuple[str, ...] = (),
    filters: dict[str, str] | None = None,
) -> LoadResult:
    """Keep runs in ``group``, carrying every tag in ``tags`` and whose config matches ``filters``.

    Filter values are compared as text (``lr.ref_lr=1e-05`` matches the float 1e-05), so the same
    ``--filter`` works for run directories, offline folders and the API.
    """
    kept = []
    for record in result.runs:
        if group is not None and record.group != group:
            continue
        if tags and not set(tags) <= set(record.tags):
            continue
        if filters:
            flat = flatten_config(record.config)
            if not all(_same_text(flat.get(k), v) for k, v in filters.items()):
                continue
        kept.append(record)
    dropped = len(result.runs) - len(kept)
    messages = list(result.messages)
    if dropped:
        messages.append(f"{dropped} run(s) left out by --group/--tag/--filter")
    return LoadResult(runs=kept, skipped=result.skipped, messages=messages)


def _same_text(value: Any, wanted: str) -> bool:
    if value is None:
        return wanted.lower() in ("none", "null", "")
    if isinstance(value, bool):
        return str(value).lower() == wanted.lower()
    if is_number(value):
        try:
            return float(value) == float(wanted)
        except ValueError:
            return False
    return str(value) == wanted


def load_source(
    source: str,
    *,
    prefer: str = "auto",
    group: str | None = None,
    tags: tuple[str, ...] = (),
    filters: dict[str, str] | None = None,
    base_url: str | None = None,
    api: Any = None,
    jobs: int = 1,
) -> LoadResult:
    """Load runs from a folder or ``wandb:ENTITY/PROJECT`` (``api`` injects a wandb.Api stand-in)."""
    if source.startswith("wandb:"):
        from analysis.data import wandb_io

        result = wandb_io.load_api(
            source[len("wandb:") :], group=group, tags=tags, base_url=base_url, api=api
        )
    else:
        root = Path(source)
        if not root.exists():
            return LoadResult([], [], [f"source {source} does not exist"])
        result = load_dirs(root, prefer=prefer, jobs=jobs)
    return apply_filters(result, group=group, tags=tags, filters=filters)
