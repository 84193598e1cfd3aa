"""Read runs back from wandb: offline run folders and the wandb API, into :class:`RunRecord`.

The trainer logs (docs/design.md §6): ``wandb.init(config=<config.yaml tree>, group=<run.sweep>,
name=<run.name>, tags=[...])``, every metrics row through ``wandb.log(row)`` unchanged, and at the end
``run.summary["state"|"failure"|"derived"]``. :func:`record_from_wandb` turns those three pieces
(config, summary, history) into a record; both the offline reader and the API reader go through it,
so the API path (tested with an injected stand-in for ``wandb.Api``) shares its conversion with the
offline path (tested by a real wandb round trip).

Offline folders hold no config or summary file: the ``run-<id>.wandb`` transaction log is the only
record. :func:`read_offline_records` decodes it: a LevelDB-log framed stream (7-byte file header
``:W&B`` + 0xBEE1 + version; 32 KiB blocks; 7-byte chunk headers crc32/length/type, types FULL, FIRST,
MIDDLE, LAST; a block tail shorter than a header is zero padding) of
``wandb.proto.wandb_internal_pb2.Record`` messages. These are wandb internals, checked against the
pinned wandb 0.31.0 (pyproject) by ``tests/analysis/test_analysis_wandb.py``; if a wandb upgrade breaks the
round trip, this function is the one place to change (``wandb leet inspect --json`` prints the same
records and is the fallback to reach for).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.data.records import LoadResult, RunReadError, RunRecord, SkippedRun, validate_rows

_HEADER = struct.Struct("<4sHB")
_CHUNK = struct.Struct("<IHB")
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
ANALYSIS_JOB_TYPE = "analysis"  # wandb job_type of the runs rlvr-analyze --to-wandb logs


def read_offline_records(path: Path) -> tuple[list[Any], list[str]]:
    """Decode the records of one ``.wandb`` file; a torn or corrupt tail is dropped and noted."""
    from wandb.proto import wandb_internal_pb2 as pb

    notes: list[str] = []
    data = path.read_bytes()
    if len(data) < _HEADER.size:
        raise RunReadError(f"{path.name}: shorter than the wandb file header")
    magic, ident, _version = _HEADER.unpack_from(data)
    if magic != b":W&B" or ident != 0xBEE1:
        raise RunReadError(f"{path.name}: not a wandb transaction log")
    records: list[Any] = []
    pos, pending = _HEADER.size, None
    while pos < len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _CHUNK.size:
            pos += left
            continue
        if pos + _CHUNK.size > len(data):
            notes.append("wandb log: torn chunk header at the end; dropped")
            break
        crc, length, kind = _CHUNK.unpack_from(data, pos)
        if crc == 0 and length == 0 and kind == 0:  # zero-filled preallocation
            break
        chunk = data[pos + _CHUNK.size : pos + _CHUNK.size + length]
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            notes.append(f"wandb log: corrupt or torn chunk at byte {pos}; rest dropped")
            break
        pos += _CHUNK.size + length
        if kind == _FULL:
            payloads = [chunk]
        elif kind == _FIRST:
            pending, payloads = chunk, []
        elif kind == _MIDDLE and pending is not None:
            pending, payloads = pending + chunk, []
        elif kind == _LAST and pending is not None:
            payloads, pending = [pending + chunk], None
        else:
            notes.append(f"wandb log: unexpected chunk type {kind} at byte {pos}; rest dropped")
            break
        for payload in payloads:
            record = pb.Record()
            try:
                record.ParseFromString(payload)
            except Exception:  # protobuf raises its own DecodeError
                notes.append("wandb log: undecodable record; rest dropped")
                return records, notes
            records.append(record)
    return records, notes


def _item_path(item: Any) -> list[str]:
    return [item.key] if item.key else list(item.nested_key)


def _item_value(item: Any) -> Any:
    if item.value_json:
        return json.loads(item.value_json)
    which = item.WhichOneof("value") if "value" in type(item).DESCRIPTOR.oneofs_by_name else None
    return None if which in (None, "none") else getattr(item, which)


def _set_nested(target: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        node = target.get(part)
        if not isinstance(node, dict):
            node = target[part] = {}
        target = node
    target[path[-1]] = value


def _remove_nested(target: dict[str, Any], path: list[str]) -> None:
    for part in path[:-1]:
        target = target.get(part, {})
        if not isinstance(target, dict):
            return
    target.pop(path[-1], None)


def offline_run_id(path: Path) -> str:
    """wandb's run id of an offline folder (``run-<id>.wandb``), or the folder name if there is none."""
    files = [path] if path.is_file() else sorted(path.glob("run-*.wandb"))
    return files[0].name[len("run-") : -len(".wandb")] if files else path.name


@dataclass
class OfflineRun:
    """Everything one offline run (all its segments) recorded, as plain values."""

    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # rows, nested keys joined by "."
    name: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    job_type: str | None = None
    project: str | None = None
    entity: str | None = None
    artifacts: list[Any] = field(default_factory=list)  # wandb_internal_pb2.ArtifactRecord messages
    files: list[str] = field(default_factory=list)  # paths (relative to files/) the run saved
    notes: list[str] = field(default_factory=list)


def read_offline_contents(paths: Path | list[Path]) -> OfflineRun:
    """Replay the records of one run's offline folder(s) (oldest first) into an :class:`OfflineRun`."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    run = OfflineRun()
    if len(paths) > 1:
        run.notes.append(f"{len(paths)} offline segments of one wandb run (resumed) merged")
    segments = []
    for path in paths:
        files = [path] if path.is_file() else sorted(path.glob("*.wandb"))
        if not files:
            raise RunReadError(f"{path.name}: no .wandb file")
        try:
            segments.append(read_offline_records(files[0]))
        except OSError as err:
            raise RunReadError(f"{files[0].name} unreadable ({type(err).__name__})") from err
    # oldest first by the start each segment recorded (folder names carry it only to the second, and
    # wandb numbers folders of one second -1, -2, ...); a segment without a run record keeps its place
    order = sorted(range(len(segments)), key=lambda i: (_segment_start(segments[i][0]), i))
    for records, segment_notes in (segments[i] for i in order):
        run.notes += segment_notes
        try:
            for record in records:
                kind = record.WhichOneof("record_type")
                if kind == "run":
                    run.name = record.run.display_name or run.name
                    run.group = record.run.run_group or run.group
                    run.tags = tuple(record.run.tags) or run.tags
                    run.job_type = record.run.job_type or run.job_type
                    run.project = record.run.project or run.project
                    run.entity = record.run.entity or run.entity
                    for item in record.run.config.update:
                        _set_nested(run.config, _item_path(item), _item_value(item))
                elif kind == "config":
                    for item in record.config.update:
                        _set_nested(run.config, _item_path(item), _item_value(item))
                    for item in record.config.remove:
                        _remove_nested(run.config, _item_path(item))
                elif kind == "summary":
                    for item in record.summary.update:
                        _set_nested(run.summary, _item_path(item), _item_value(item))
                    for item in record.summary.remove:
                        _remove_nested(run.summary, _item_path(item))
                elif kind == "history":
                    run.history.append({".".join(_item_path(i)): _item_value(i) for i in record.history.item})
                elif kind == "artifact":
                    run.artifacts.append(record.artifact)
                elif kind == "files":
                    run.files += [f.path for f in record.files.files]
        except ValueError as err:
            raise RunReadError(f"wandb log: undecodable value ({err})") from err
    return run


def _segment_start(records: list[Any]) -> int:
    """The start time (ns) a segment's run record carries; 0 where it has none."""
    for record in records:
        if record.WhichOneof("record_type") == "run":
            return record.run.start_time.ToNanoseconds()
    return 0


def read_offline_run(paths: Path | list[Path], run_id: str) -> RunRecord:
    """Read one run from its ``offline-run-*`` folder(s) (or ``.wandb`` file).

    A run resumed with the same wandb id (``resume="allow"``, e.g. after preemption) leaves one folder
    per segment; pass them all: their records are replayed oldest first (by the start each segment
    recorded), and the history rows the resumed segment re-logs supersede the old ones
    (:func:`analysis.data.load.validate_rows`). An analysis run (``job_type="analysis"``, written by
    ``rlvr-analyze --to-wandb``) is not a training run and is refused with that reason.
    """
    paths = [paths] if isinstance(paths, Path) else list(paths)
    run = read_offline_contents(paths)
    if run.job_type == ANALYSIS_JOB_TYPE:
        raise RunReadError("an analysis run (job_type=analysis, rlvr-analyze --to-wandb), not a training run")
    return record_from_wandb(
        run_id,
        str(paths[0]),
        "wandb-offline",
        run.config,
        run.summary,
        run.history,
        run.name,
        run.group,
        run.tags,
        run.notes,
    )


def _plain(value: Any) -> Any:
    """wandb API objects (HTTPSummary, SummarySubDict, config wrappers) to plain Python values."""
    if hasattr(value, "_json_dict"):
        value = value._json_dict
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _unwrap_config(config: dict[str, Any]) -> dict[str, Any]:
    """Drop wandb's own ``_wandb`` entry and unwrap legacy ``{"value": v, "desc": d}`` leaves."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key.startswith("_wandb"):
            continue
        if isinstance(value, dict) and set(value) in ({"value"}, {"value", "desc"}):
            value = value["value"]
        out[key] = _unwrap_config(value) if isinstance(value, dict) else value
    return out


def record_from_wandb(
    run_id: str,
    path: str,
    source: str,
    config: Mapping[str, Any],
    summary: Mapping[str, Any],
    history: Iterable[Mapping[str, Any]],
    name: str | None,
    group: str | None,
    tags: Iterable[str],
    notes: list[str] | None = None,
    wandb_state: str | None = None,
) -> RunRecord:
    """The shared conversion: wandb config + summary + history rows -> :class:`RunRecord`.

    ``summary["state"|"failure"]`` play the role of ``status.json`` and ``summary["derived"]`` that of
    ``summary.json["derived"]``; the per-target part of ``summary.json`` does not exist in wandb, so
    those cross-checks are simply not made. History rows lose wandb's own ``_step``/``_runtime``/
    ``_timestamp`` keys and ``None`` values and are otherwise the trainer's metrics rows.
    """
    notes = list(notes or [])
    config = _unwrap_config(_plain(config))
    summary = _plain(summary) or {}
    rows = []
    for row in history:
        # the API may fill keys not logged at a step with None: absent, like in metrics.jsonl
        rows.append({k: _denan(v) for k, v in row.items() if v is not None and not str(k).startswith("_")})
    rows = validate_rows(rows, notes)
    if not rows:
        raise RunReadError("wandb history has no valid rows" + (f" ({notes[-1]})" if notes else ""))
    status = None
    if "state" in summary:
        status = {"state": summary.get("state"), "failure": summary.get("failure")}
    else:
        state = "running" if wandb_state == "running" else None
        notes.append("wandb summary has no 'state' (run did not finish cleanly)")
        if state:
            status = {"state": state, "failure": None}
    derived = summary.get("derived")
    return RunRecord(
        run=run_id,
        path=path,
        source=source,
        config=config,
        rows=rows,
        status=status,
        summary={"derived": derived} if isinstance(derived, dict) else None,
        name=name,
        group=group,
        tags=tuple(tags),
        notes=notes,
    )


def _denan(value: Any) -> Any:
    # the API returns non-finite floats as the strings "NaN"/"Infinity"; metrics files as floats
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return value


def load_api(
    entity_project: str,
    *,
    group: str | None = None,
    tags: tuple[str, ...] = (),
    base_url: str | None = None,
    api: Any = None,
) -> LoadResult:
    """Read runs of ``ENTITY/PROJECT`` from the wandb API (``base_url`` for self-hosted servers).

    ``api`` replaces ``wandb.Api(...)``; tests pass a stand-in whose runs expose ``id``, ``name``,
    ``group``, ``tags``, ``state``, ``config``, ``summary`` and ``scan_history()``, the attributes read
    here. Group and tags are also sent to the server as filters to cut the download.
    """
    result = LoadResult(runs=[], skipped=[])
    if api is None:
        try:
            import wandb

            api = wandb.Api(overrides={"base_url": base_url} if base_url else {}, timeout=60)
        except Exception as err:  # no key, no network: one clear message, no traceback
            result.messages.append(f"wandb API unavailable: {type(err).__name__}: {err}")
            return result
    server: dict[str, Any] = {}
    clauses: list[dict[str, Any]] = [{"tags": {"$in": [tag]}} for tag in tags]
    if group:
        clauses.append({"group": group})
    if clauses:
        server = clauses[0] if len(clauses) == 1 else {"$and": clauses}
    try:
        runs = list(api.runs(entity_project, filters=server or None))
    except Exception as err:
        result.messages.append(f"wandb API: cannot list runs of {entity_project}: {err}")
        return result
    analyses = [run for run in runs if getattr(run, "job_type", None) == ANALYSIS_JOB_TYPE]
    if analyses:
        result.messages.append(f"{len(analyses)} analysis run(s) (job_type=analysis) left out")
        runs = [run for run in runs if getattr(run, "job_type", None) != ANALYSIS_JOB_TYPE]
    for run in runs:
        run_id = f"{entity_project}/{getattr(run, 'id', '?')}"
        try:
            record = record_from_wandb(
                run_id,
                run_id,
                "wandb-api",
                run.config,
                run.summary,
                run.scan_history(),
                getattr(run, "name", None),
                getattr(run, "group", None),
                getattr(run, "tags", ()) or (),
                wandb_state=getattr(run, "state", None),
            )
        except RunReadError as err:
            result.skipped.append(SkippedRun(run_id, run_id, str(err)))
            continue
        except Exception as err:  # a broken run must not stop the analysis
            result.skipped.append(SkippedRun(run_id, run_id, f"wandb API error: {type(err).__name__}: {err}"))
            continue
        result.runs.append(record)
    return result
