"""A run killed with SIGKILL and resumed produces the same metrics as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("run_tiny.py")
TIMING = ("wall_seconds",)


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("perf/")} for r in rows]


def _run(run_dir, cache_dir, *args, **popen):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(run_dir), str(cache_dir), *args], env=env, **popen
    )


@pytest.mark.timeout(300)
def test_sigkill_and_resume_is_bit_identical(cache_dir, tmp_path):
    budget = "train.max_responses=320"
    reference = tmp_path / "reference"
    assert _run(reference, cache_dir, budget).wait(timeout=240) == 0
    killed = tmp_path / "killed"
    proc = _run(killed, cache_dir, budget)
    pointer = killed / "checkpoints" / "latest.json"
    deadline = time.time() + 200
    while time.time() < deadline and proc.poll() is None:
        # Kill once a checkpoint exists *and* rows were written after it (they must be discarded).
        if pointer.is_file():
            tag = json.loads(pointer.read_text())["tag"]
            state = json.loads((killed / "checkpoints" / tag / "trainer.json").read_text())
            written = len((killed / "metrics.jsonl").read_text().splitlines())
            if 0 < state["clocks"]["rollout"] < 18 and written > state["state"]["metrics_lines"]:
                proc.send_signal(signal.SIGKILL)
                break
        time.sleep(0.005)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the run finished before it could be killed"
    assert json.loads((killed / "status.json").read_text())["state"] == "running"
    assert _run(killed, cache_dir, budget).wait(timeout=240) == 0
    assert json.loads((killed / "status.json").read_text())["state"] in ("completed", "failed")
    assert _rows(killed) == _rows(reference)
    ref_summary = json.loads((reference / "summary.json").read_text())
    got_summary = json.loads((killed / "summary.json").read_text())
    assert (
        got_summary["targets"] == ref_summary["targets"] and got_summary["failure"] == ref_summary["failure"]
    )
