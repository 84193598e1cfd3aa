"""A run killed with SIGKILL between the onset of a failure and the detector's decision, then resumed,
fails exactly as the uninterrupted run: the same failure record (detector, reason, clocks, onset, lower
onset bound), the same rows and the same detector state in its last checkpoint. One case per windowed
detector (tests/core/run_failing.py: the embedded default, unclipped, B = 32, short windows)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.run_failing import CASES, failing_config

SCRIPT = Path(__file__).with_name("run_failing.py")
TIMING = ("wall_seconds",)


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("perf/")} for r in rows]


def _checkpoint(run_dir: Path) -> dict:
    tag = json.loads((run_dir / "checkpoints" / "latest.json").read_text())["tag"]
    return json.loads((run_dir / "checkpoints" / tag / "trainer.json").read_text())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("detector", list(CASES))
def test_killed_between_onset_and_decision_resumes_to_the_same_failure(cache_dir, tmp_path, detector):
    from rlvr_scaling.run import train

    cfg = failing_config(cache_dir, detector)
    reference = tmp_path / "reference"
    assert train(cfg, reference, log=lambda *_: None) == "failed"
    want = json.loads((reference / "status.json").read_text())["failure"]
    assert want["detector"] == detector
    every = cfg.run.checkpoint_every_rollouts
    kill_at = -(-want["onset_rollout"] // every) * every  # the first checkpoint at or after the onset
    assert want["onset_rollout"] <= kill_at < want["rollout"], want

    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.run(
        [sys.executable, str(SCRIPT), str(killed), str(cache_dir), detector, str(kill_at)],
        env=env,
        timeout=240,
        capture_output=True,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    assert json.loads((killed / "status.json").read_text()) | {"failure": None} == json.loads(
        (killed / "status.json").read_text()
    )
    saved = _checkpoint(killed)
    assert saved["clocks"]["rollout"] == kill_at and saved["failure"] is None
    state = saved["detectors"][detector]
    assert state["streak"] is not None and state["recent"], state  # mid-condition, the window full
    assert len((killed / "metrics.jsonl").read_text().splitlines()) > saved["state"]["metrics_lines"]

    logs: list[str] = []
    assert train(cfg, killed, log=logs.append) == "failed"
    assert any(m.startswith(f"[resume] from rollout-{kill_at:07d}") for m in logs)
    assert json.loads((killed / "status.json").read_text())["failure"] == want
    assert (
        json.loads((killed / "summary.json").read_text())["failure"]
        == json.loads((reference / "summary.json").read_text())["failure"]
    )
    assert _rows(killed) == _rows(reference)
    assert _checkpoint(killed)["detectors"] == _checkpoint(reference)["detectors"]
