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


@pytest.fixture(scope="session")
def analysed(tmp_path_factory) -> tuple[Path, Path]:
    """Two conditions (so the cross-condition figures and comparisons exist), one run with a git
    revision in its status.json, analysed by rlvr-analyze (report.html is read by test_analysis_html.py
    and opened in a browser by test_analysis_browser.py)."""
    from analysis.cli import main

    root = tmp_path_factory.mktemp("html")
    common = {"sizes": (32, 64, 128), "seeds": 2, "budget": 40000, "failure_prefactor": 30000.0}
    write_sweep(
        root / "sweep",
        [
            SyntheticSpec(alpha=0.15, seed=31, overrides=(("lr.ref_lr", 1e-6),), **common),
            SyntheticSpec(alpha=0.44, seed=32, overrides=(("lr.ref_lr", 1e-5),), **common),
        ],
    )
    status_path = next((root / "sweep").glob("*/status.json"))
    status = json.loads(status_path.read_text())
    status["git"] = "0123456789abcdef0123456789abcdef01234567"
    status_path.write_text(json.dumps(status))
    out = root / "out"
    argv = [str(root / "sweep"), "--out", str(out), "--bootstrap", "60", "--sigmoid-bootstrap", "0"]
    assert main([*argv, "--formats", "png", "--dpi", "60", "--jobs", "1", "--quiet"]) == 0
    return root, out
