"""``rlvr-analyze … --to-wandb``: a real wandb offline run, read back with the project's own reader
(:func:`analysis.data.wandb_io.read_offline_contents`, the decoder behind ``--from wandb-offline``)."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.cli import main
from analysis.data.load import RunRecord, load_source
from analysis.data.wandb_io import read_offline_contents
from analysis.reporting.to_wandb import DEFAULT_PROJECT, resolve_target
from analysis.synthetic import SyntheticSpec, write_sweep

PROJECT = ("logger.project", "share-study")  # as the trainer's logger=wandb records it


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("to_wandb")
    common = {"sizes": (32, 64, 128), "seeds": 2, "budget": 40000, "failure_prefactor": 30000.0}
    write_sweep(
        root / "sweep",
        [
            SyntheticSpec(alpha=0.15, seed=41, overrides=(("lr.ref_lr", 1e-6), PROJECT), **common),
            SyntheticSpec(alpha=0.44, seed=42, overrides=(("lr.ref_lr", 1e-5), PROJECT), **common),
        ],
    )
    wandb_dir = root / "wandb_dir"
    env = {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(wandb_dir),
        "WANDB_CACHE_DIR": str(root / "cache"),
        "WANDB_DATA_DIR": str(root / "data"),
        "WANDB_CONFIG_DIR": str(root / "config"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        out = root / "out"
        argv = [str(root / "sweep"), "--out", str(out), "--bootstrap", "40", "--sigmoid-bootstrap", "0"]
        assert main([*argv, "--formats", "png", "--dpi", "50", "--jobs", "1", "--to-wandb"]) == 0
    (folder,) = sorted((wandb_dir / "wandb").glob("offline-run-*"))
    return root, out, folder


def test_the_analysis_run_has_job_type_group_project_and_the_provenance(logged):
    root, out, folder = logged
    run = read_offline_contents(folder)
    assert run.job_type == "analysis" and run.group == "synthetic" and run.project == "share-study"
    assert run.name == "analysis-synthetic" and run.tags == ("analysis",)
    assert run.config["source"] == str(root / "sweep") and run.config["runs"] == 12
    assert run.config["options"]["bootstrap"] == 40 and run.config["options"]["to_wandb"] == ""
    assert run.config["run_sources"] == {"dir": 12}


def test_summary_holds_every_exponent(logged):
    _, out, folder = logged
    summary = read_offline_contents(folder).summary
    exponents = pd.read_csv(out / "exponents.csv")
    assert len(exponents) == 6  # 2 conditions x (2 targets + failure)
    assert summary["runs"] == 12 and summary["conditions"] == 2
    for row in exponents.itertuples():
        key = f"exponents/{row.condition}/{row.clock}"
        for column in ("exponent", "ci_low", "ci_high"):
            value, want = summary[f"{key}/{column}"], getattr(row, column)
            if math.isfinite(want):
                assert value == pytest.approx(want, rel=1e-9)
            else:
                assert str(value) == str(want)  # ±inf bounds as text
        assert summary[f"{key}/n_runs"] == row.n_runs and summary[f"{key}/n_censored"] == row.n_censored


def test_tables_images_and_report_artifact(logged):
    _, out, folder = logged
    run = read_offline_contents(folder)
    (row,) = [h for h in run.history if "exponents_table._type" in h]
    for key, csv in (("exponents_table", "exponents.csv"), ("comparisons_table", "comparisons.csv")):
        assert row[f"{key}._type"] == "table-file"
        table = json.loads((folder / "files" / row[f"{key}.path"]).read_text())
        frame = pd.read_csv(out / csv)
        assert table["columns"] == list(frame.columns) and len(table["data"]) == len(frame) > 0
        got = [
            r[table["columns"].index("condition" if key == "exponents_table" else "clock")]
            for r in table["data"]
        ]
        assert got == frame["condition" if key == "exponents_table" else "clock"].tolist()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) >= 10
    for name in pngs:
        key = f"figures/{name[:-4]}"
        assert row[f"{key}._type"] == "image-file", name
        assert (folder / "files" / row[f"{key}.path"]).read_bytes() == (out / name).read_bytes()
    (artifact,) = [a for a in run.artifacts if a.type == "analysis-report"]
    assert artifact.name == "analysis-synthetic"
    (entry,) = artifact.manifest.contents
    html = (out / "report.html").read_bytes()
    assert entry.path == "report.html" and entry.size == len(html)
    assert entry.digest == base64.b64encode(hashlib.md5(html).digest()).decode()


def test_loaders_leave_the_analysis_run_out(logged):
    _, _, folder = logged
    loaded = load_source(str(folder.parent.parent), prefer="wandb-offline")
    assert loaded.runs == []
    (skipped,) = loaded.skipped
    assert "analysis run (job_type=analysis" in skipped.reason


def _record(group: str | None, config: dict) -> RunRecord:
    return RunRecord(run="r", path="r", source="dir", config=config, rows=[], group=group)


def test_where_the_analysis_run_goes():
    logger = {"logger": {"name": "wandb", "project": "p1", "entity": "e1"}}
    runs = [_record("g", logger), _record("g", logger)]
    target, notes = resolve_target("me/proj", "runs/x", runs)
    assert (target.entity, target.project, target.group, notes) == ("me", "proj", "g", [])
    target, _ = resolve_target("proj", "runs/x", runs)
    assert (target.entity, target.project) == (None, "proj")
    target, _ = resolve_target("", "wandb:team/study", runs, group="two_clock")
    assert (target.entity, target.project, target.group) == ("team", "study", "two_clock")
    target, _ = resolve_target("", "runs/x", runs)
    assert (target.entity, target.project, target.why) == ("e1", "p1", "the runs' logger.project")
    target, notes = resolve_target("", "runs/x", [_record("a", {}), _record("b", {})])
    assert (target.entity, target.project, target.group) == (None, DEFAULT_PROJECT, None)
    assert notes == ["the runs are in 2 wandb groups (a, b): logged without a group"]
