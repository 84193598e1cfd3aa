"""Shared fixtures: small synthetic sweeps written in the trainer's run-directory format.

Test files here are named ``test_analysis_*.py`` (unique across ``tests/``: there is no
``__init__.py``, which would shadow the ``analysis`` package).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.synthetic import SyntheticSpec, write_sweep


@pytest.fixture
def small_spec() -> SyntheticSpec:
    return SyntheticSpec(sizes=(32, 64, 128, 256), seeds=3, alpha=0.3, seed=7)


@pytest.fixture
def sweep(tmp_path: Path, small_spec: SyntheticSpec) -> Path:
    """One condition, 4 sizes x 3 seeds, under tmp_path/sweep."""
    root = tmp_path / "sweep"
    write_sweep(root, small_spec)
    return root


def _read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def rows_io() -> SimpleNamespace:
    """``read(path)`` / ``write(path, rows)`` for a run directory's metrics.jsonl."""
    return SimpleNamespace(read=_read_rows, write=_write_rows)
