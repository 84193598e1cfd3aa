"""wandb sources: a real offline round trip, a damaged log, and the API path with a stand-in Api.

The stand-in for ``wandb.Api`` is the one fake in these tests: there is no wandb server here, and the
API path shares its conversion (``record_from_wandb``) with the offline reader, which the round trip
checks against real wandb 0.31 files.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.data.clock_tables import build_tables
from analysis.data.load import load_source
from analysis.data.wandb_io import read_offline_run
from analysis.synthetic import SyntheticSpec, simulate, write_run_dirs, write_wandb_offline

# columns that name where a run came from; everything else must match between sources
_SOURCE_COLUMNS = ["run", "source", "path", "notes", "summary_mismatch"]


def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=_SOURCE_COLUMNS).sort_values("name").reset_index(drop=True)


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> tuple[Path, list]:
    """Three runs (one fails, one never reaches the top target) as run dirs and as wandb offline runs."""
    root = tmp_path_factory.mktemp("wandb_roundtrip")
    runs = simulate(SyntheticSpec(sizes=(32, 128, 512), seeds=1, budget=20000, seed=5))
    assert {r.status["state"] for r in runs} == {"completed", "failed"}
    write_run_dirs(runs, root / "dirs")
    write_wandb_offline(runs, root / "wb")
    return root, runs


def test_offline_round_trip_gives_the_same_tables(offline):
    root, runs = offline
    from_dirs = build_tables(load_source(str(root / "dirs")).runs)
    loaded = load_source(str(root / "wb"))
    assert not loaded.skipped and len(loaded.runs) == len(runs)
    assert {r.source for r in loaded.runs} == {"wandb-offline"}
    assert {r.group for r in loaded.runs} == {"synthetic"} and all(
        r.tags == ("synthetic",) for r in loaded.runs
    )
    from_wandb = build_tables(loaded.runs)
    pd.testing.assert_frame_equal(
        _comparable(from_dirs.runs), _comparable(from_wandb.runs), check_dtype=False
    )
    ev_dirs = from_dirs.evals.drop(columns="run").sort_values(["B", "responses"]).reset_index(drop=True)
    ev_wb = from_wandb.evals.drop(columns="run").sort_values(["B", "responses"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ev_dirs, ev_wb, check_dtype=False)
    # the config came back nested and complete (minus wandb's own key)
    record = next(r for r in loaded.runs if r.name == runs[0].config["run"]["name"])
    assert record.config == runs[0].config and record.rows == runs[0].rows


def test_auto_prefers_run_dirs_over_offline_copies(offline, tmp_path: Path):
    root, runs = offline
    loaded = load_source(str(root))
    assert len(loaded.runs) == len(runs) and {r.source for r in loaded.runs} == {"dir"}
    assert any("offline run(s) ignored" in m for m in loaded.messages)
    assert {r.source for r in load_source(str(root), prefer="wandb-offline").runs} == {"wandb-offline"}


def test_damaged_wandb_log_is_truncated_and_reported(offline, tmp_path: Path):
    root, _ = offline
    src = sorted((root / "wb" / "wandb").glob("offline-run-*"))[0]
    wandb_file = next(src.glob("*.wandb"))
    data = wandb_file.read_bytes()
    cut = tmp_path / "cut" / src.name
    cut.mkdir(parents=True)
    (cut / wandb_file.name).write_bytes(data[: int(len(data) * 0.6)])
    bad = tmp_path / "bad" / "offline-run-x"
    bad.mkdir(parents=True)
    (bad / "run-x.wandb").write_bytes(b"garbage that is not a wandb log")
    loaded = load_source(str(tmp_path))
    assert [s.reason for s in loaded.skipped] == ["run-x.wandb: not a wandb transaction log"]
    (record,) = loaded.runs
    assert any("torn" in n or "corrupt" in n for n in record.notes)
    assert record.status is None  # the summary with the state was in the lost tail
    row = build_tables([record]).runs.iloc[0]
    assert row["state"] == "unknown" and row["incomplete"]


class _Summary(dict):
    """Like wandb's HTTPSummary: a mapping whose plain form is ``_json_dict``."""

    @property
    def _json_dict(self):
        return dict(self)


class _FakeRun:
    def __init__(self, run, index, legacy_config=False):
        self.id = f"id{index}"
        self.name = run.config["run"]["name"]
        self.group = run.config["run"]["sweep"]
        self.tags = ["synthetic"]
        self.state = "finished"
        config = run.config
        if legacy_config:  # older servers wrap every top-level value as {"value": ..., "desc": ...}
            config = {k: {"value": v, "desc": None} for k, v in config.items()}
        self.config = {**config, "_wandb": {"cli_version": "0.31.0"}}
        self.summary = _Summary(
            state=run.status["state"], failure=run.status["failure"], derived=run.summary["derived"]
        )
        self._rows = run.rows

    def scan_history(self):
        # dense rows (keys not logged at a step are None) and non-finite floats as strings
        keys = sorted(set().union(*self._rows))
        for step, row in enumerate(self._rows):
            dense = {k: row.get(k) for k in keys}
            yield {
                **{k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in dense.items()},
                "_step": step,
            }


class _BrokenRun(_FakeRun):
    def scan_history(self):
        raise ConnectionError("server hung up")


class _FakeApi:
    def __init__(self, runs):
        self._runs = runs
        self.calls = []

    def runs(self, path, filters=None):
        self.calls.append((path, filters))
        return iter(self._runs)


def test_api_path_gives_the_same_tables(offline):
    root, runs = offline
    fake = [_FakeRun(r, i, legacy_config=(i == 1)) for i, r in enumerate(runs)]
    api = _FakeApi([*fake, _BrokenRun(runs[0], 99)])
    loaded = load_source("wandb:me/rlvr-scaling", group="synthetic", tags=("synthetic",), api=api)
    assert api.calls == [
        ("me/rlvr-scaling", {"$and": [{"tags": {"$in": ["synthetic"]}}, {"group": "synthetic"}]})
    ]
    assert [s.run for s in loaded.skipped] == ["me/rlvr-scaling/id99"]
    assert "server hung up" in loaded.skipped[0].reason
    from_api = build_tables(loaded.runs)
    from_dirs = build_tables(load_source(str(root / "dirs")).runs)
    pd.testing.assert_frame_equal(_comparable(from_dirs.runs), _comparable(from_api.runs), check_dtype=False)
    assert set(from_api.runs["source"]) == {"wandb-api"}
    # client-side filters apply to API runs too
    only = load_source(
        "wandb:me/rlvr-scaling", filters={"rollout.prompts_per_rollout": "4"}, api=_FakeApi(fake)
    )
    assert [r.name for r in only.runs] == [runs[0].config["run"]["name"]]


def test_api_unavailable_is_a_message_not_a_crash(monkeypatch):
    import wandb

    def refuse(*args, **kwargs):
        raise RuntimeError("no API key")

    monkeypatch.setattr(wandb, "Api", refuse)
    loaded = load_source("wandb:me/project", base_url="https://wandb.example.org")
    assert loaded.runs == [] and "no API key" in loaded.messages[0]


def test_resumed_offline_run_is_merged(tmp_path: Path):
    """A preempted run resumed with the same wandb id leaves two offline folders; rows the first
    segment logged after the last checkpoint are re-logged by the second and must not count twice."""
    import wandb

    (run,) = simulate(SyntheticSpec(sizes=(64,), seeds=1, seed=3))
    cut = 2 * len(run.rows) // 3
    # the resumed segment starts with the first rollout after a checkpoint: a row whose clock is new
    checkpoint = next(
        i for i in range(len(run.rows) // 3, cut) if run.rows[i]["responses"] > run.rows[i - 1]["responses"]
    )
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True)
    for rows, last in ((run.rows[:cut], False), (run.rows[checkpoint:], True)):
        wb = wandb.init(
            project="p", dir=str(tmp_path), mode="offline", id="resumed1", resume="allow",
            config=run.config, name="resumed", settings=settings,
        )  # fmt: skip
        for row in rows:
            wb.log(row)
        if last:
            wb.summary.update({"state": run.status["state"], "failure": run.status["failure"]})
            wb.summary["derived"] = run.summary["derived"]
        wb.finish()
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2
    loaded = load_source(str(tmp_path))
    (record,) = loaded.runs
    assert record.rows == run.rows, (len(record.rows), len(run.rows), [f.name for f in folders], record.notes)
    # the segments are replayed in the order they started, whatever order they are passed in
    for given in (folders, folders[::-1]):
        assert read_offline_run(given, "resumed1").rows == run.rows
    assert any("2 offline segments" in n for n in record.notes)
    assert any("superseded" in n for n in record.notes)
    assert record.status["state"] == run.status["state"]
