"""``rlvr-study`` on the local SLURM cluster: a round is one job array (``slurm=local_cluster``), whatever
its conditions and seeds.

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
    """max_rounds 1, two conditions: the pilot's 8 runs (2 conditions x 2 seeds x 2 sizes; two
    cartesian multiruns, so two arrays, before rounds were one command) go out as one array of 8 tasks
    through the local_cluster preset, all complete, and the study ends (max_rounds, or triage where no
    run reached a target) with the report over them."""
    study_file = write_study(
        tmp_path / "study.yaml",
        warm_cache,
        max_rounds=1,
        launcher=["slurm=local_cluster"],
        conditions=[{"optim.grad_clip": 1.0}, {"optim.grad_clip": 0.5}],
        budget={"responses": 100 * RUN_BUDGET},
    )
    proc = subprocess.run(
        [*STUDY, str(study_file)], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=560
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.stdout.count("  rlvr-train -m ") == 1, "one command for the round"
    assert "slurm=local_cluster run.sweep=tiny hydra/sweeper=rlvr_list" in proc.stdout
    # 32 responses reach no target, so triage (rlvr_study/triage.py) may end the study before max_rounds
    finished = [line for line in proc.stdout.splitlines() if line.startswith("study tiny finished: ")]
    assert len(finished) == 1, proc.stdout[-4000:]
    assert finished[0].endswith(
        ("max_rounds (1) reached", "every requested width is met or not identifiable within its horizon")
    ), finished[0]
    folder = tmp_path / "runs" / "tiny"
    run_dirs = sorted(p.parent for p in folder.glob("*/status.json"))
    assert len(run_dirs) == 8
    holders = []
    for run_dir in run_dirs:
        assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
        holders.append(json.loads((run_dir / "run.lock").read_text()))
    array_ids = {h["slurm_array_job_id"] for h in holders}
    assert len(array_ids) == 1 and None not in array_ids, "one round = one job array"
    assert sorted(int(h["slurm_array_task_id"]) for h in holders) == list(range(8))
    # one sbatch call: submitit keeps the script of each submission as <job id>/<job id>_submission.sh
    (array_id,) = array_ids
    scripts = sorted((folder / ".submitit").glob("*/*_submission.sh"))
    assert [p.name for p in scripts] == [f"{array_id}_submission.sh"], scripts
    assert "#SBATCH --array=0-7%4" in scripts[0].read_text().splitlines()
    state = json.loads((folder / "study_state.json").read_text())
    assert len(state["rounds"]) == 1 and state["rounds"][0]["responses_spent"] == 8 * RUN_BUDGET
    assert len(state["rounds"][0]["jobs"]) == 8 and len(state["rounds"][0]["commands"]) == 1
    runs = pd.read_csv(folder / "analysis" / "runs.csv")
    assert len(runs) == 8
