"""``rlvr-analyze`` is quiet: the tables are built at once, so a trainer-sized config (well over a
hundred keys, each a column of the runs table) gives no pandas ``PerformanceWarning`` even with
warnings shown (before: one "DataFrame is highly fragmented" per key past the hundredth)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from analysis.cli import main as analyze
from analysis.data.clock_tables import build_tables
from analysis.synthetic import SyntheticSpec, records, write_sweep

N_KEYS = 150  # the trainer's resolved config flattens to about this many keys


def _wide(record):
    record.config["extra"] = {f"key{i:03d}": i * 0.5 for i in range(N_KEYS)}
    return record


def test_build_tables_with_many_config_keys_gives_no_performance_warning():
    recs = [_wide(r) for r in records(SyntheticSpec(sizes=(32, 64, 128), seeds=2))]
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        tables = build_tables(recs)
    assert {f"extra.key{i:03d}" for i in range(N_KEYS)} <= set(tables.runs.columns)
    assert len(tables.runs) == 6


def _run(sweep: Path, out: Path) -> list[warnings.WarningMessage]:
    """The warnings one ``rlvr-analyze`` run raises, every one recorded (none filtered out here)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = analyze([str(sweep), "--out", str(out), "--no-plots", "--no-sigmoid", "--bootstrap", "50",
                        "--jobs", "1", "--quiet"])  # fmt: skip
    assert code == 0 and "extra.key149" in pd.read_csv(out / "runs.csv").columns
    return caught


def test_cli_is_quiet_and_has_no_fragmentation_warning_even_when_warnings_are_shown(tmp_path, monkeypatch):
    write_sweep(tmp_path / "s", SyntheticSpec(sizes=(32, 64, 128), seeds=2, gamma=None))
    for config in (tmp_path / "s").glob("*/config.yaml"):
        config.write_text(
            config.read_text() + "extra:\n" + "".join(f"  key{i:03d}: {i}\n" for i in range(N_KEYS))
        )
    monkeypatch.delenv("RLVR_ANALYZE_WARNINGS", raising=False)
    caught = _run(tmp_path / "s", tmp_path / "out")
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]  # a normal run: none
    monkeypatch.setenv("RLVR_ANALYZE_WARNINGS", "1")  # shown: still no fragmentation warning
    caught = _run(tmp_path / "s", tmp_path / "out2")
    assert not [w for w in caught if issubclass(w.category, pd.errors.PerformanceWarning)]
