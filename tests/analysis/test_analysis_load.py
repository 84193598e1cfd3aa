"""Loading run directories: discovery, and corrupt inputs reported and skipped, never fatal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis._parallel import fork_map
from analysis.data.clock_tables import build_tables
from analysis.data.load import _read_any, discover, flatten_config, load_source, validate_rows


def test_discovery_finds_run_dirs_and_skips_hydra_copies(sweep: Path, tmp_path: Path):
    nested = tmp_path / "sweep" / "multirun" / "2026-01-01" / "12-00-00"
    nested.mkdir(parents=True)
    src = sorted(sweep.glob("B32_seed0"))[0]
    (nested / "0").mkdir()
    for name in ("config.yaml", "metrics.jsonl", "status.json", "summary.json"):
        (nested / "0" / name).write_text((src / name).read_text())
    (tmp_path / "sweep" / "conf_only").mkdir()
    (tmp_path / "sweep" / "conf_only" / "config.yaml").write_text("a: 1\n")  # not a run
    run_dirs, offline = discover(sweep)
    assert len(run_dirs) == 13 and not offline
    assert all(p.name != ".hydra" for p in run_dirs)
    assert nested / "0" in run_dirs


def test_flatten_config():
    flat = flatten_config({"a": {"b": 1, "c": [0.4, 0.5], "d": None, "e": {}}, "seed": 3})
    assert flat == {"a.b": 1, "a.c": "[0.4, 0.5]", "a.d": None, "a.e": "{}", "seed": 3}


def test_corrupt_inputs_are_reported_and_the_rest_analysed(sweep: Path, rows_io):
    runs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert len(runs) == 12
    # 1. truncated last line (crash mid-write): kept, truncated, noted
    text = (runs[0] / "metrics.jsonl").read_text()
    (runs[0] / "metrics.jsonl").write_text(text + '{"rollout": 99, "respon')
    # 2. missing status.json: kept, state unknown, flagged incomplete
    (runs[1] / "status.json").unlink()
    # 3. wrong types: a string clock in the middle truncates the run there
    rows = rows_io.read(runs[2])
    rows[5]["responses"] = "many"
    rows_io.write(runs[2], rows)
    # 4. non-numeric accuracy: that evaluation is dropped
    rows = rows_io.read(runs[3])
    evals = [r for r in rows if "eval/accuracy" in r]
    evals[3]["eval/accuracy"] = "n/a"
    rows_io.write(runs[3], rows)
    # 5. still running: flagged incomplete, kept out of fits
    status = json.loads((runs[4] / "status.json").read_text())
    status["state"] = "running"
    (runs[4] / "status.json").write_text(json.dumps(status))
    # 6. unreadable: metrics.jsonl missing -> skipped
    (runs[5] / "metrics.jsonl").unlink()
    # 7. unreadable: config.yaml not a mapping -> skipped
    (runs[6] / "config.yaml").write_text("- just\n- a list\n")
    # 8. invalid JSON in the middle: rows from there on dropped
    lines = (runs[7] / "metrics.jsonl").read_text().splitlines()
    lines[4] = lines[4][:-5]
    (runs[7] / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    # 9. status.json garbage, summary.json with a wrong type for B
    (runs[8] / "status.json").write_text("{not json")
    summary = json.loads((runs[9] / "summary.json").read_text())
    summary["derived"]["responses_per_rollout"] = "lots"
    (runs[9] / "summary.json").write_text(json.dumps(summary))
    # 10. no evaluation rows at all -> skipped at the clock stage
    rows_io.write(runs[10], [r for r in rows_io.read(runs[10]) if "eval/accuracy" not in r])

    loaded = load_source(str(sweep))
    skipped = {s.run: s.reason for s in loaded.skipped}
    assert skipped == {runs[5].name: "metrics.jsonl missing", runs[6].name: "config.yaml is not a mapping"}
    tables = build_tables(loaded.runs)
    assert {s.run: s.reason for s in tables.skipped} == {runs[10].name: "no evaluation rows"}
    df = tables.runs.set_index("run")
    assert len(df) == 9
    notes = df["notes"].to_dict()
    assert "last line" in notes[runs[0].name] and "truncated" in notes[runs[0].name]
    assert "status.json missing" in notes[runs[1].name]
    assert df.loc[runs[1].name, "state"] == "unknown" and df.loc[runs[1].name, "incomplete"]
    assert "invalid 'responses'" in notes[runs[2].name]
    assert df.loc[runs[2].name, "final_responses"] < df.loc[runs[3].name, "final_responses"]
    assert "non-numeric eval/accuracy" in notes[runs[3].name]
    assert df.loc[runs[4].name, "state"] == "running" and df.loc[runs[4].name, "incomplete"]
    assert "invalid JSON at line 5" in notes[runs[7].name]
    assert "status.json unreadable" in notes[runs[8].name]
    assert "B taken from config" in notes[runs[9].name] and df.loc[runs[9].name, "B"] > 0
    # the readable runs still go into fits: 6 complete, 3 incomplete as right-censored
    assert df["in_fit"].sum() == 9 and df["incomplete"].sum() == 3


def test_incomplete_runs_enter_fits_as_censored_unless_dropped(sweep: Path):
    # dropping incomplete runs biases alpha when incompleteness depends on B (the slow large-B runs are
    # the ones still running): by default they are right-censored at their last evaluation
    path = sorted(p for p in sweep.iterdir() if p.is_dir())[0]
    status = json.loads((path / "status.json").read_text())
    status.update(state="preempted", failure=None)
    (path / "status.json").write_text(json.dumps(status))
    from analysis.data.clock_tables import ClockOptions

    records = load_source(str(sweep)).runs
    default = build_tables(records).runs.set_index("run")
    assert default.loc[path.name, "in_fit"] and default.loc[path.name, "failure:censored"]
    assert default.loc[path.name, "incomplete"]
    dropped = build_tables(records, ClockOptions(include_incomplete=False)).runs.set_index("run")
    assert not dropped.loc[path.name, "in_fit"]


def test_missing_source_and_filters(sweep: Path, tmp_path: Path):
    assert load_source(str(tmp_path / "nope")).runs == []
    assert len(load_source(str(sweep), group="synthetic").runs) == 12
    assert load_source(str(sweep), group="other").runs == []
    assert len(load_source(str(sweep), filters={"rollout.group_size": "8"}).runs) == 12
    assert len(load_source(str(sweep), filters={"rollout.prompts_per_rollout": "4"}).runs) == 3
    assert load_source(str(sweep), filters={"lr.ref_lr": "1e-5"}).runs == []
    assert len(load_source(str(sweep), filters={"lr.ref_lr": "1e-6"}).runs) == 12


def test_forked_reading_equals_serial(sweep: Path):
    run_dirs, _ = discover(sweep)
    items = [("dir", (str(p),), p.name) for p in run_dirs]
    serial = build_tables(fork_map(_read_any, items, 1)).runs
    forked = build_tables(fork_map(_read_any, items, 2)).runs
    assert serial.equals(forked)
    assert np.array_equal(serial["target:0.3"], forked["target:0.3"])


def test_clock_going_back_is_a_resume_whose_new_rows_win():
    notes: list[str] = []
    raw = [{"responses": r, "i": i} for i, r in enumerate([0, 64, 128, 192, 128, 192, 256])]
    rows = validate_rows(raw, notes)
    assert [(r["responses"], r["i"]) for r in rows] == [(0, 0), (64, 1), (128, 4), (192, 5), (256, 6)]
    assert "goes back to 128" in notes[0] and "2 earlier row(s) superseded" in notes[0]


def test_non_finite_values_written_as_strings(sweep: Path, rows_io):
    """The trainer writes NaN/Inf as "nan"/"inf" (JSON has none): a NaN evaluation is kept, reaches no
    target, and is noted."""
    path = sorted(p for p in sweep.iterdir() if p.is_dir())[0]
    rows = rows_io.read(path)
    evals = [r for r in rows if "eval/accuracy" in r]
    evals[2]["eval/accuracy"] = "nan"
    evals[3]["eval/entropy"] = "inf"
    rows_io.write(path, rows)
    tables = build_tables(load_source(str(sweep)).runs)
    run = tables.runs.set_index("run").loc[path.name]
    assert "1 non-finite eval/accuracy" in run["notes"] and run["n_evals"] == len(evals)
    ev = tables.evals[tables.evals["run"] == path.name]
    assert np.isnan(ev["eval/accuracy"].iloc[2]) and np.isinf(ev["eval/entropy"].iloc[3])
