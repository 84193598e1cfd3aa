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


# ---------------------------------------------------------------- a run written by an older version


def _drop(tree: dict, dotted: str) -> None:
    *parents, name = dotted.split(".")
    for part in parents:
        tree = tree[part]
    del tree[name]


def test_stored_config_lacking_keys_at_their_defaults_is_the_same_run(cache_dir):
    from rlvr_scaling.run import config_dict, reconcile_stored_config
    from tests.conftest import tiny_config

    cfg = tiny_config(cache_dir)
    stored = config_dict(cfg)
    for key in (
        "optim.pack_sequences",
        "rollout.vllm",
        "failure.reward_collapse.window_responses",
        "run.threads",
    ):
        _drop(stored, key)
    added, diffs = reconcile_stored_config(cfg, stored)
    # window_responses: its default is the failure section's own (1024), not CollapseParams' field default 0;
    # run.* is bookkeeping, never compared
    assert sorted(added) == [
        "failure.reward_collapse.window_responses",
        "optim.pack_sequences",
        "rollout.vllm",
    ]
    assert diffs == []


@pytest.mark.parametrize(
    "key,message",
    [
        (
            "model.warm_start.steps",
            "model.warm_start.steps: absent in the stored config (added since?), but 30 is "
            "not its default 600",
        ),
        (
            "task.dataset_config.max_digits",
            "task.dataset_config.max_digits: absent in the stored config, and it has no schema default (now 1)",
        ),
        (
            "lr.ref_lr",
            "lr.ref_lr: absent in the stored config (added since?), but 0.001 is not its default 3e-06",
        ),
    ],
)
def test_stored_config_lacking_a_key_off_its_default_is_refused(cache_dir, key, message):
    from rlvr_scaling.run import config_dict, reconcile_stored_config
    from tests.conftest import tiny_config

    cfg = tiny_config(cache_dir)
    stored = config_dict(cfg)
    _drop(stored, key)
    stored["rollout"]["group_size"] = 8  # and a plain difference, reported beside it
    added, diffs = reconcile_stored_config(cfg, stored)
    assert added == []
    assert diffs == [message, "rollout.group_size: 8 -> 4"]


def _strip_checkpoint_entries_at_defaults(run_dir: Path) -> list[str]:
    """Remove what a checkpoint of an older version would lack: entries whose saved value is the
    initial one (state a newer version added); returns their names."""
    pointer = json.loads((run_dir / "checkpoints" / "latest.json").read_text())
    path = run_dir / "checkpoints" / pointer["tag"] / "trainer.json"
    saved = json.loads(path.read_text())
    stripped = []
    for key in ("failure", "lr_rule"):  # None; {} for the power rule
        if saved[key] in (None, {}):
            del saved[key]
            stripped.append(key)
    for name, state in saved["detectors"].items():
        for key in [k for k, v in state.items() if v == 0]:  # e.g. a collapse detector's 'below' count
            del state[key]
            stripped.append(f"detectors.{name}.{key}")
    path.write_text(json.dumps(saved))
    return stripped


@pytest.mark.timeout(300)
def test_run_interrupted_under_an_older_version_resumes(cache_dir, tmp_path):
    """Stop a run after 2 of its 4 rollouts; make its directory look as if an older version wrote it
    (config keys and checkpoint entries added since are absent); resuming rewrites config.yaml, says
    which keys were added, and ends with exactly the rows of the uninterrupted run."""
    import yaml

    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.run import config_dict, train
    from tests.conftest import tiny_config

    train(tiny_config(cache_dir), tmp_path / "reference", log=lambda *_: None)
    run_dir = tmp_path / "run"
    assert train(tiny_config(cache_dir, **{"run.stop_after_rollouts": 2}), run_dir, log=lambda *_: None) == (
        "preempted"
    )
    older = yaml.safe_load((run_dir / "config.yaml").read_text())
    for key in ("optim.pack_sequences", "failure.reward_collapse.window_responses", "rollout.vllm"):
        _drop(older, key)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    stripped = _strip_checkpoint_entries_at_defaults(run_dir)
    assert "failure" in stripped and "lr_rule" in stripped

    # a key whose value here is not its default: refused, naming the key, nothing touched
    off_default = yaml.safe_load((run_dir / "config.yaml").read_text())
    _drop(off_default, "model.warm_start.steps")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(off_default, sort_keys=False))
    with pytest.raises(ConfigError, match=r"model\.warm_start\.steps: absent in the stored config"):
        train(tiny_config(cache_dir), run_dir, log=lambda *_: None)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "preempted"

    (run_dir / "config.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    logs: list[str] = []
    assert (
        train(tiny_config(cache_dir), run_dir, log=logs.append)
        == json.loads((tmp_path / "reference" / "status.json").read_text())["state"]
    )
    (line,) = [m for m in logs if m.startswith("[config]")]
    assert (
        "failure.reward_collapse.window_responses=" in line
        and "optim.pack_sequences=True" in line
        and "rollout.vllm=" in line
    )
    assert any(m.startswith("[resume] from rollout-0000002") for m in logs)
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == config_dict(tiny_config(cache_dir))
    assert _rows(run_dir) == _rows(tmp_path / "reference")
