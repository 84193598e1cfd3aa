"""``rlvr-study`` on the local SLURM cluster: a round is one job array (``slurm=local_cluster``).

Needs ``slurm/local_cluster.sh start`` and ``eval "$(slurm/local_cluster.sh env)"``; skipped otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import build_warm_cache, tiny_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))
from test_study_e2e import RUN_BUDGET, STUDY, _env, write_study  # noqa: E402

pytestmark = [pytest.mark.slurm]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """Build the tiny warm-started model once, outside SLURM, so jobs only load it."""
    cache = tmp_path_factory.mktemp("study_cache")
    build_warm_cache(tiny_cli(cache), tmp_path_factory.mktemp("warm"), _env())
    return cache


@pytest.mark.timeout(600)
def test_a_study_round_is_one_job_array(slurm_cluster, warm_cache, tmp_path):
    """max_rounds 1: the pilot's 4 runs (2 seeds x 2 sizes) go out as one array of 4 tasks through the
    local_cluster preset, all complete, and the study ends with the report over those 4 runs."""
    study_file = write_study(
        tmp_path / "study.yaml", warm_cache, max_rounds=1, launcher=["slurm=local_cluster"]
    )
    proc = subprocess.run(
        [*STUDY, str(study_file)], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=560
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "slurm=local_cluster seed=0,1 rollout.prompts_per_rollout=2,4" in proc.stdout
    assert "finished: max_rounds (1) reached" in proc.stdout
    folder = tmp_path / "runs" / "tiny"
    run_dirs = sorted(p.parent for p in folder.glob("*/status.json"))
    assert len(run_dirs) == 4
    holders = []
    for run_dir in run_dirs:
        assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
        holders.append(json.loads((run_dir / "run.lock").read_text()))
    array_ids = {h["slurm_array_job_id"] for h in holders}
    assert len(array_ids) == 1 and None not in array_ids, "one round = one job array"
    assert sorted(int(h["slurm_array_task_id"]) for h in holders) == [0, 1, 2, 3]
    state = json.loads((folder / "study_state.json").read_text())
    assert len(state["rounds"]) == 1 and state["rounds"][0]["responses_spent"] == 4 * RUN_BUDGET
    assert len(pd.read_csv(folder / "analysis" / "runs.csv")) == 4
