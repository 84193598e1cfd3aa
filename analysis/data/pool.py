"""A pool of runs that outlives its machine: run directories packed into one compact file, and read back.

A study's calibration needs real runs (``benchmarks/calibration/pool_coverage.py``: intervals from designs
drawn out of one part of a pool, checked against an estimate from seeds they did not draw), and real runs
take hours. A *pool* keeps what the analysis reads of each run — ``config.yaml``, ``metrics.jsonl``,
``eval_problems.jsonl`` (the per-problem record that replays thinner evaluations exactly:
:mod:`analysis.data.eval_records`), ``status.json`` and ``summary.json`` — and nothing else (no
checkpoints, samples, logs or ``.hydra/``), in one xz-compressed tar file with a manifest ``pool.json``
(the runs, and the command that regenerates them)::

    python -m analysis.data.pool pack runs/reference runs/reference-r1 --out pool.tar.xz \\
        --command "rlvr-study studies/reference.yaml --replicate 0 ..."
    python -m analysis.data.pool unpack pool.tar.xz /tmp/pool      # run directories again
    rlvr-analyze /tmp/pool/runs                                    # as if they had just run

Packing is deterministic (members sorted, times and owners zeroed), so the same runs give the same bytes.
Unpacking refuses members outside the destination (``tarfile``'s ``data`` filter). A run directory is any
folder the analysis would read (:func:`analysis.data.load.discover`); its path inside the pool is its path
below the folder it was found in, prefixed by that folder's name.

:func:`thinned` replaces a loaded run's evaluation rows by those a thinner evaluation would have logged
(fewer problems, fewer samples per problem, a coarser cadence), from its per-problem record: the designs of
a calibration can price a cheaper evaluation on the same runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from analysis.data.eval_records import EVAL_PROBLEMS, EvalRecords, read_eval_records, replay
from analysis.data.load import discover
from analysis.data.records import RunRecord

#: What a pool keeps of every run directory (the files the analysis reads).
POOL_FILES = ("config.yaml", "metrics.jsonl", EVAL_PROBLEMS, "status.json", "summary.json")
MANIFEST = "pool.json"
RUNS = "runs"


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info, io.BytesIO(data)


def pack(folders: Sequence[str | Path], out: str | Path, command: str = "") -> dict:
    """Write the run directories found under ``folders`` into the pool file ``out``; returns its manifest
    (``runs``: the runs' paths inside the pool, ``files``, ``command``). ValueError where no run directory
    is found or two folders share a name."""
    names = [Path(f).resolve().name for f in folders]
    if len(set(names)) != len(names):
        raise ValueError(f"folders must have distinct names (got {names})")
    members: dict[str, bytes] = {}
    runs = []
    for folder, name in zip(folders, names):
        run_dirs, _ = discover(Path(folder))
        for run_dir in run_dirs:
            below = run_dir.relative_to(folder).as_posix()
            rel = f"{RUNS}/{name}" + ("" if below == "." else f"/{below}")
            runs.append(rel)
            for file in POOL_FILES:
                if (run_dir / file).is_file():
                    members[f"{rel}/{file}"] = (run_dir / file).read_bytes()
    if not runs:
        raise ValueError(f"no run directory under {', '.join(map(str, folders))}")
    manifest = {"runs": sorted(runs), "files": list(POOL_FILES), "command": command}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:xz", preset=9) as tar:
        tar.addfile(*_member(MANIFEST, json.dumps(manifest, indent=1).encode()))
        for name in sorted(members):
            tar.addfile(*_member(name, members[name]))
    return manifest


def read_manifest(pool: str | Path) -> dict:
    """The manifest of a pool file (without unpacking the runs)."""
    with tarfile.open(pool, "r:*") as tar:
        try:
            member = tar.extractfile(MANIFEST)
        except KeyError:
            member = None
        if member is None:
            raise ValueError(f"{pool}: no {MANIFEST}; not a pool")
        return json.loads(member.read())


def unpack(pool: str | Path, dest: str | Path) -> Path:
    """Extract ``pool`` into ``dest``; returns the folder of its run directories (``dest/runs``)."""
    read_manifest(pool)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(pool, "r:*") as tar:
        tar.extractall(dest, filter="data")
    return dest / RUNS


def thinned(
    record: RunRecord,
    problems: np.ndarray | None = None,
    samples: int | None = None,
    every: int = 1,
    records: EvalRecords | None = None,
    margin: float | None = None,
    targets: Sequence[float] = (),
) -> RunRecord | None:
    """``record`` with its evaluation rows as a thinner evaluation would have logged them
    (:func:`analysis.data.eval_records.replay`: ``eval/accuracy`` the mean over ``problems`` of their first
    ``samples`` responses; with ``every`` > 1 only the step-0 evaluation and every ``every``-th after it
    keep their row, and the last one where the run ended on it; with a ``margin``, the sparse schedule of
    ``eval.sparse_every`` = ``every``, ``eval.dense_margin`` = ``margin`` on ``targets``:
    :func:`sparse_points`). None where the run has no readable per-problem record, or its record does not
    match its evaluation rows (their number and clocks). ``records``: the run's record where the caller
    has read it already (else it is read here)."""
    records = records if records is not None else read_eval_records(record.path)
    evals = [i for i, row in enumerate(record.rows) if "eval/accuracy" in row]
    if records is None or len(evals) != records.responses.size:
        return None
    if not np.allclose([float(record.rows[i]["responses"]) for i in evals], records.responses):
        return None
    full = replay(records, problems, samples, every=1)
    if margin is not None:
        kept = set(sparse_points(full["accuracy"].to_numpy(float), targets, every, margin).tolist())
    else:
        kept = set(range(0, len(evals), every)) | ({len(evals) - 1} if every > 1 else set())
    rows = []
    for i, row in enumerate(record.rows):
        if i not in evals:
            rows.append(row)
            continue
        k = evals.index(i)
        if k in kept:
            rows.append(
                {**row, "eval/accuracy": float(full["accuracy"][k]), "eval/responses": int(full["n"][k])}
            )
    return dataclasses.replace(record, rows=rows)


def sparse_points(accuracy: np.ndarray, targets: Sequence[float], every: int, margin: float) -> np.ndarray:
    """The evaluation points (indices, step 0 first) that the sparse schedule keeps of a full schedule
    whose accuracies are ``accuracy`` (``rlvr_scaling.evaluation.sparse_due``, replayed): every
    ``every``-th point, every point while the last kept evaluation is within ``margin`` below a target
    no kept evaluation has reached, and the last point (a run that ended on it)."""
    kept: list[int] = []
    reached: set[float] = set()
    for i, acc in enumerate(np.asarray(accuracy, dtype=float)):
        last = accuracy[kept[-1]] if kept else -np.inf
        unreached = [a for a in targets if a not in reached]
        dense = bool(unreached) and last >= min(unreached) - margin
        if i % every == 0 or dense or i == len(accuracy) - 1:
            kept.append(i)
            reached |= {a for a in targets if np.isfinite(acc) and acc >= a}
    return np.asarray(kept, dtype=int)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.data.pool", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="run directories -> one pool file")
    p.add_argument("folders", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--command", default="", help="the command that regenerates the runs (kept in pool.json)")
    u = sub.add_parser("unpack", help="a pool file -> run directories under DEST/runs")
    u.add_argument("pool")
    u.add_argument("dest")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "pack":
            manifest = pack(args.folders, args.out, args.command)
            print(f"{args.out}: {len(manifest['runs'])} runs, {Path(args.out).stat().st_size / 1e6:.2f} MB")
        else:
            print(unpack(args.pool, args.dest))
    except (OSError, ValueError, tarfile.TarError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
