"""``rlvr-study`` end to end on the tiny model (the embedded architecture at test size): a pilot round
through the local joblib launcher, an interruption after it, and a second call that resumes the study
instead of restarting it, until the response budget is spent; the final report is ``rlvr-analyze``'s.

The tiny model does not reach its target in 32 responses, so the widths stay unbounded and the rounds
add a seed at every size (the planner's path on real exponents: tests/study/test_study_rounds.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import tiny_cli

REPO = Path(__file__).resolve().parents[2]
STUDY = [sys.executable, "-m", "rlvr_study.cli"]
RUN_BUDGET = 32
SIZES = [2, 4]  # prompts per rollout, G = 4: B = 8, 16


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "WANDB_SILENT": "true",
        "PYTHONUNBUFFERED": "1",
    }


def _overrides(cache_dir: Path) -> list[str]:
    tiny = [o for o in tiny_cli(cache_dir, None) if not o.startswith("eval.every_responses=")]
    return [*tiny, "eval.every_responses=16", f"train.max_responses={RUN_BUDGET}"]


def write_study(path: Path, cache_dir: Path, **extra) -> Path:
    study = {
        "name": "tiny",
        "sizes": SIZES,
        "targets": [0.05],
        "width": 0.5,
        "pilot_seeds": 2,
        "max_rounds": 4,
        "bootstrap": 50,
        # the pilot (4 runs of 32) and one more seed at both sizes
        "budget": {"responses": 6 * RUN_BUDGET},
        "overrides": _overrides(cache_dir),
        **extra,
    }
    path.write_text(yaml.safe_dump(study))
    return path


def _study(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([*STUDY, *args], env=_env(), cwd=cwd, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def _status(folder: Path) -> dict[Path, tuple[str, int, float]]:
    out = {}
    for s in folder.glob("*/status.json"):
        out[s.parent] = (json.loads(s.read_text())["state"], s.stat().st_mtime_ns, s.parent.name)
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_study_runs_in_rounds_and_resumes_after_an_interruption(tmp_path, cache_dir):
    """Call 1 stops after the pilot (``--stop-after 1``, as an interruption between rounds would);
    call 2 measures the pilot again, launches round 1 (seed 2 at both sizes, one command), finds
    the budget spent and writes the report. The pilot's runs are not run again, the state keeps
    round 0 as it was, and rlvr-analyze on the folder reads the same runs. An unfinished round is
    launched again into the same run directories, from its job list (removed: written again from the
    state); a state file of before rounds were one command with a job list is refused, naming it. The
    condition asks for γ's interval (no tiny run fails: unbounded, so the rounds go on until the budget
    ends them; a target no run reaches within the horizon would end the study after its pilot instead:
    the next test)."""
    study_file = write_study(tmp_path / "study.yaml", cache_dir, conditions=[{"clock": "failure"}])
    folder = tmp_path / "runs" / "tiny"
    out1 = _study([str(study_file), "--stop-after", "1"], tmp_path)
    assert "round 0 (pilot): launching 4 runs, at most 128 responses" in out1
    assert "stopped after 1 round(s)" in out1 and "round 1" not in out1
    state1 = json.loads((folder / "study_state.json").read_text())
    assert len(state1["rounds"]) == 1 and state1["rounds"][0]["ended"] is not None
    assert state1["rounds"][0]["responses_spent"] == 4 * RUN_BUDGET and state1["finished"] is None
    pilot = _status(folder)
    assert len(pilot) == 4 and {s for s, _, _ in pilot.values()} == {"completed"}
    (command,) = state1["rounds"][0]["commands"]
    assert (
        "hydra/sweeper=rlvr_list" in command
        and f"hydra.sweeper.jobs={folder.resolve()}/study_round_0.yaml" in command
    )
    stop = "train.stop_at_targets=false"  # a study never stops a run at its targets
    jobs0 = [[stop, f"seed={s}", f"rollout.prompts_per_rollout={p}"] for s in (0, 1) for p in SIZES]
    assert yaml.safe_load((folder / "study_round_0.yaml").read_text()) == jobs0 == state1["rounds"][0]["jobs"]

    out2 = _study([str(study_file)], tmp_path)
    assert "round 0 (pilot)" not in out2 and "resuming" not in out2
    assert "round 1 (adaptive): launching 2 runs, at most 64 responses" in out2
    assert "condition 0: seeds [2] at prompts_per_rollout [2, 4]" in out2
    assert "after round 1: 6 runs, 192 responses spent of 192" in out2
    assert "finished: budget.responses spent" in out2
    state2 = json.loads((folder / "study_state.json").read_text())
    assert state2["rounds"][0] == state1["rounds"][0]
    assert [r["runs"] for r in state2["rounds"]] == [4, 2] and state2["finished"] == "budget.responses spent"
    assert len(state2["rounds"][1]["commands"]) == 1
    # no horizon is fixed for a failure-clock condition
    assert json.loads((folder / "horizons.json").read_text()) == {}
    jobs1 = [[stop, "seed=2", f"rollout.prompts_per_rollout={p}"] for p in SIZES]
    assert yaml.safe_load((folder / "study_round_1.yaml").read_text()) == jobs1
    after = _status(folder)
    assert len(after) == 6 and {s for s, _, _ in after.values()} == {"completed"}
    for run_dir, (_, mtime, _) in pilot.items():
        assert after[run_dir][1] == mtime, f"{run_dir.name} ran again"
    runs = pd.read_csv(folder / "analysis" / "runs.csv")
    assert len(runs) == 6 and sorted(runs["seed"]) == [0, 0, 1, 1, 2, 2]
    exps = pd.read_csv(folder / "analysis" / "exponents.csv")
    row = exps[exps["clock"] == "target:0.05"]
    assert len(row) == 1 and int(row["n_runs"].iloc[0]) == 6
    assert state2["rounds"][-1]["widths"][0]["width"] is None  # unbounded, as the report says
    assert pd.isna(row["ci_low"].iloc[0]) or pd.isna(row["ci_high"].iloc[0])

    # a study that ended says so again and launches nothing; an unfinished round is resumed
    state2["rounds"][-1]["ended"] = None
    state2["finished"] = None
    (folder / "study_state.json").write_text(json.dumps(state2))
    (folder / "study_round_1.yaml").unlink()
    out3 = _study([str(study_file)], tmp_path)
    assert "round 1: resuming" in out3 and "(adaptive): launching" not in out3
    assert _status(folder) == after  # every run had ended: none ran again
    assert "finished: budget.responses spent" in out3
    assert yaml.safe_load((folder / "study_round_1.yaml").read_text()) == jobs1

    # the state file of before: round 1 as one cartesian multirun, no job list: refused, nothing runs
    old = dict(state2["rounds"][-1])
    del old["jobs"], old["jobs_file"]
    (folder / "study_state.json").write_text(json.dumps({**state2, "rounds": [state2["rounds"][0], old]}))
    proc = subprocess.run([*STUDY, str(study_file)], env=_env(), cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "round 1 was written by an earlier rlvr-study" in proc.stderr, proc.stderr
    # the message is one line of its own (a dependency's compile-time warning may precede it on stderr)
    assert any(
        line.startswith("rlvr-study: runs/tiny/study_state.json: round 1")
        for line in proc.stderr.splitlines()
    )
    assert _status(folder) == after


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("per_size", [False, True], ids=["one_horizon", "horizon_per_size"])
def test_a_study_whose_target_is_beyond_its_horizon_ends_after_its_pilot(tmp_path, cache_dir, per_size):
    """No tiny run reaches the target within the horizon fixed after the pilot (the budget: no pilot run
    crossed it at B_ref), at any size: the interval is not chased. The study launches nothing after the
    pilot, ends with the reason, and prints the condition's status with the sizes and runs that missed.
    With ``horizon_per_size`` every size keeps the budget (no pilot run there crossed), recorded per size."""
    study_file = write_study(
        tmp_path / "study.yaml", cache_dir, **({"horizon_per_size": True} if per_size else {})
    )
    folder = tmp_path / "runs" / "tiny"
    out = _study([str(study_file), "--no-analysis"], tmp_path)
    assert "round 0 (pilot): launching 4 runs" in out and "round 1" not in out
    fixed = json.loads((folder / "horizons.json").read_text())
    if per_size:
        assert fixed == {"all": {"8": RUN_BUDGET, "16": RUN_BUDGET}}
        assert f"condition 0: horizons B=8 {RUN_BUDGET}, B=16 {RUN_BUDGET} responses" in out
        state = json.loads((folder / "study_state.json").read_text())
        assert state["horizons"] == {"0": {str(p): RUN_BUDGET for p in SIZES}}
    else:
        assert fixed == {"all": RUN_BUDGET}
    why = f"target 0.05 not reached within the horizon ({RUN_BUDGET} responses) by 2 of 2 runs at B=8, 2 of 2 runs at B=16"
    assert "finished: every requested width is met or not identifiable within its horizon" in out
    assert f"  condition 0 (all): not identifiable within its horizon: {why}" in out
    state = json.loads((folder / "study_state.json").read_text())
    assert state["conditions"]["0"]["status"] == "not identifiable within its horizon"
    assert len(state["rounds"]) == 1


def test_a_wrong_study_file_fails_before_compute(tmp_path, cache_dir, monkeypatch, capsys):
    """The CLI's own entry point (``rlvr-study`` is ``rlvr_study.cli:main``), in this process: exit
    status 2 and a message naming the key, before any run directory exists."""
    from rlvr_study.cli import main

    monkeypatch.chdir(tmp_path)
    bad = write_study(tmp_path / "bad.yaml", cache_dir, pilot_seeds=1)
    assert main([str(bad)]) == 2
    assert capsys.readouterr().err.startswith("rlvr-study: pilot_seeds:")
    over = write_study(tmp_path / "over.yaml", cache_dir, budget={"responses": 100})
    assert main([str(over)]) == 2
    assert "budget.responses: the pilot alone needs 128 responses" in capsys.readouterr().err
    typo = write_study(tmp_path / "typo.yaml", cache_dir, overrides=[*_overrides(cache_dir), "optim.stepz=3"])
    assert main([str(typo)]) == 2
    assert "optim.stepz" in capsys.readouterr().err
    assert main([str(bad), "--replicate", "-1"]) == 2
    assert "--replicate" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


FAKE_SBATCH = """\
#!/bin/sh
# Stand-in for sbatch: keep the script submitit wrote, then refuse it (nothing is submitted).
n=$(ls "$FAKE_SBATCH_OUT" | wc -l)
cp "$1" "$FAKE_SBATCH_OUT/$n.sh"
echo "sbatch: error: refused by the test (no submission)" >&2
exit 1
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_round_on_a_slurm_preset_is_one_sbatch_job_array(tmp_path, cache_dir, monkeypatch):
    """With ``launcher: [slurm=local_cluster]`` and two conditions the pilot round reaches sbatch once,
    as one array of its 8 runs (a stand-in sbatch records the script and refuses it: no cluster
    needed). The refused round stays in the state as unfinished, so the next call launches it again.
    A round whose conditions get different seeds at different sizes (not a cartesian product) is one
    array too (the real cluster: tests/slurm/test_slurm_study.py)."""
    from rlvr_study.cli import _launch, load_state
    from rlvr_study.rounds import Launch, RoundPlan
    from rlvr_study.study_file import StudyError, load_study

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "sbatch").write_text(FAKE_SBATCH)
    (fake_bin / "srun").write_text("#!/bin/sh\nexit 1\n")
    for tool in ("sbatch", "srun"):
        (fake_bin / tool).chmod(0o755)
    scripts = tmp_path / "sbatch"
    scripts.mkdir()
    env = {k: v for k, v in _env().items() if not k.startswith(("SLURM_", "RLVR_SLURM_", "SUBMITIT_"))}
    env.update(PATH=f"{fake_bin}{os.pathsep}{env['PATH']}", FAKE_SBATCH_OUT=str(scripts))
    study_file = write_study(
        tmp_path / "study.yaml",
        cache_dir,
        launcher=["slurm=local_cluster"],
        conditions=[{"optim.grad_clip": 1.0}, {"optim.grad_clip": 0.5}],
        budget={"responses": 100 * RUN_BUDGET},
    )
    proc = subprocess.run(
        [*STUDY, str(study_file)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=500
    )
    assert proc.returncode == 2 and "round 0: rlvr-train exited" in proc.stderr, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )
    assert proc.stdout.count("  rlvr-train -m ") == 1
    sent = sorted(scripts.iterdir())
    assert len(sent) == 1, "one sbatch call per round"
    flags = _sbatch_flags(sent[0])
    assert flags["array"] == "0-7%4" and flags["partition"] == "debug", flags
    folder = tmp_path / "runs" / "tiny"
    state = json.loads((folder / "study_state.json").read_text())
    assert len(state["rounds"]) == 1 and state["rounds"][0]["ended"] is None
    assert len(state["rounds"][0]["commands"]) == 1 and len(state["rounds"][0]["jobs"]) == 8
    assert state["rounds"][0]["jobs"][0] == [
        "optim.grad_clip=1.0",
        "train.stop_at_targets=false",
        "seed=0",
        "rollout.prompts_per_rollout=2",
    ]

    # an adaptive round that is no cartesian product: 3 multiruns before, one array now
    study = load_study(study_file, base=tmp_path)
    plan = RoundPlan([Launch(0, [2, 3], [2]), Launch(0, [3], [4]), Launch(1, [2], [2, 4])], 5 * RUN_BUDGET)
    for key in [k for k in os.environ if k.startswith(("SLURM_", "RLVR_SLURM_", "SUBMITIT_"))]:
        monkeypatch.delenv(key)
    for key in ("PATH", "FAKE_SBATCH_OUT", "PYTHONPATH", "HF_HUB_OFFLINE", "WANDB_SILENT"):
        monkeypatch.setenv(key, env[key])
    with pytest.raises(StudyError, match="round 1: rlvr-train exited"):
        _launch(study, load_state(study), plan, "adaptive", dry_run=False)
    sent = sorted(scripts.iterdir())
    assert len(sent) == 2, "one sbatch call for the round"
    assert _sbatch_flags(sent[1])["array"] == "0-4%4"
    jobs = yaml.safe_load((folder / "study_round_1.yaml").read_text())
    stop = "train.stop_at_targets=false"
    assert sorted(" ".join(j) for j in jobs) == sorted(
        [f"optim.grad_clip=1.0 {stop} seed={s} rollout.prompts_per_rollout=2" for s in (2, 3)]
        + [f"optim.grad_clip=1.0 {stop} seed=3 rollout.prompts_per_rollout=4"]
        + [f"optim.grad_clip=0.5 {stop} seed=2 rollout.prompts_per_rollout={p}" for p in SIZES]
    )


def _sbatch_flags(script: Path) -> dict[str, str]:
    return dict(
        line[len("#SBATCH --") :].partition("=")[::2]
        for line in script.read_text().splitlines()
        if line.startswith("#SBATCH --")
    )
