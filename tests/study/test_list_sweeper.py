"""The ``rlvr_list`` sweeper (``hydra_plugins/rlvr_list_sweeper``): an explicit list of jobs in one
launcher call, each in the run directory the cartesian ``rlvr-train -m`` of its overrides gives it.

In this process, through Hydra's own multirun path (``@hydra.main`` over ``conf/``, the sweeper, Hydra's
basic launcher, one composition per job) with a task that records where each job would run instead of
training (``rlvr-study`` end to end: test_study_e2e.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
import pytest
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.errors import HydraException

from hydra_plugins.rlvr_list_sweeper import expand_jobs, read_jobs
from rlvr_scaling.cli.compose import CONF_DIR, VERSION_BASE, register_resolvers
from rlvr_scaling.cli.grid import list_jobs
from rlvr_scaling.config import register_configs
from rlvr_study.cli import base_overrides, jobs_file, launch_command, round_jobs, write_jobs
from rlvr_study.rounds import Launch
from rlvr_study.study_file import parse_study

# A round that is no cartesian product: two conditions, different seeds, sizes with different seeds.
ROUND = [Launch(0, [2, 3], [2]), Launch(0, [3], [8]), Launch(1, [2], [2])]


@pytest.fixture(autouse=True)
def _logging_restored():
    """Hydra's in-process multirun configures logging (dictConfig disables every existing logger):
    restore the loggers afterwards, or later tests' caplog sees nothing."""
    import logging

    loggers = {n: lg for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    saved = {n: (lg.disabled, lg.propagate, list(lg.handlers), lg.level) for n, lg in loggers.items()}
    root = (list(logging.root.handlers), logging.root.level)
    yield
    for name, lg in list(logging.root.manager.loggerDict.items()):
        if not isinstance(lg, logging.Logger):
            continue
        if name in saved:
            lg.disabled, lg.propagate, handlers, lg.level = saved[name]
            lg.handlers[:] = handlers
        else:
            lg.disabled = False
    logging.root.handlers[:] = root[0]
    logging.root.setLevel(root[1])


def _study(tmp_path: Path):
    study = parse_study(
        {
            "name": "s",
            "sweep": "demo",
            "sizes": [2, 4, 8],
            "budget": {"responses": 1e6},
            "conditions": [{"lr.ref_lr": 1e-6}, {"lr.ref_lr": 3e-6}],
            "overrides": ["eval.targets=[0.05,0.9]", "train.max_responses=64"],
        },
        base=tmp_path,
    )
    return study


def _multirun(argv: list[str], monkeypatch) -> tuple[list[tuple[Path, list[str]]], list[int]]:
    """``rlvr-train -m <argv>`` with Hydra's basic launcher: (run directory, task overrides) per job,
    and the size of every ``Launcher.launch`` call."""
    jobs: list[tuple[Path, list[str]]] = []
    calls: list[int] = []
    # the class Hydra instantiates (its plugin scan may have re-run the module since it was imported)
    basic = Plugins.instance().class_name_to_class[
        "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    ]
    real_launch = basic.launch

    def launch(self, job_overrides, initial_job_idx):
        calls.append(len(job_overrides))
        return real_launch(self, job_overrides, initial_job_idx)

    @hydra.main(version_base=VERSION_BASE, config_path=str(CONF_DIR), config_name="config")
    def probe(cfg) -> None:
        hc = HydraConfig.get()
        jobs.append((Path(hc.runtime.output_dir), list(hc.overrides.task)))

    monkeypatch.setattr(basic, "launch", launch)
    quiet = ["hydra/launcher=basic", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    monkeypatch.setattr(sys, "argv", ["rlvr-train", "-m", *argv, *quiet])
    register_resolvers()
    register_configs()
    try:
        probe()
    finally:
        GlobalHydra.instance().clear()
    return jobs, calls


def _old_commands(study, launches, sweep_dir: Path) -> list[list[str]]:
    """The cartesian multiruns a round was before (one per condition and seed layer)."""
    return [
        [
            *base_overrides(study, x.condition),
            "train.stop_at_targets=false",
            "seed=" + ",".join(str(s) for s in x.seeds),
            "rollout.prompts_per_rollout=" + ",".join(str(p) for p in x.sizes),
            f"run.sweep={study.name}",
            f"hydra.sweep.dir={sweep_dir}",
        ]
        for x in launches
    ]


def test_a_round_is_one_launch_into_the_cartesian_multiruns_directories(tmp_path, monkeypatch):
    study = _study(tmp_path)
    cartesian, cartesian_calls = [], []
    for argv in _old_commands(study, ROUND, tmp_path / "cartesian"):
        jobs, calls = _multirun(argv, monkeypatch)
        cartesian += jobs
        cartesian_calls += calls
    assert cartesian_calls == [2, 1, 1], "the cartesian way: one launch per condition and seed layer"

    path = jobs_file(study, 1)
    write_jobs(path, round_jobs(study, ROUND))
    argv = launch_command(study, path)
    assert argv[0] == "-m" and argv[-1] == f"hydra.sweep.dir={Path(study.folder).resolve()}"
    listed, calls = _multirun(argv[1:], monkeypatch)
    assert calls == [4], "one launcher call for the whole round"

    assert sorted(d.name for d, _ in listed) == sorted(d.name for d, _ in cartesian)
    assert {d.parent for d, _ in listed} == {Path(study.folder).resolve()}
    assert len({d.name for d, _ in listed}) == 4
    # the same task overrides, spelt alike (what run.name and the logger's tags are made of)
    assert sorted(sorted(o) for _, o in listed) == sorted(sorted(o) for _, o in cartesian)
    names = {d.name for d, _ in listed}
    assert (
        # train.stop_at_targets (on every job of a study) names no run directory
        "eval.targets=[0.05,0.9],lr.ref_lr=3e-06,rollout.prompts_per_rollout=2,seed=2,train.max_responses=64"
        in names
    )
    assert (
        "eval.targets=[0.05,0.9],lr.ref_lr=1e-06,rollout.prompts_per_rollout=8,seed=3,train.max_responses=64"
        in names
    )
    assert not any(part in n for n in names for part in ("sweeper", "hydra", "sweeps="))
    # rlvr-grid lists the same runs for the same command
    assert {job.run_dir for job in list_jobs(argv[1:])} == {d for d, _ in listed}


def test_a_wrong_job_fails_before_anything_launches(tmp_path, monkeypatch, capsys):
    study = _study(tmp_path)
    path = tmp_path / "jobs.yaml"
    write_jobs(path, [["seed=0", "rollout.prompts_per_rollout=2"], ["seed=1", "optim.stepz=3"]])
    argv = launch_command(study, path)[1:]
    with pytest.raises(SystemExit):
        _multirun(argv, monkeypatch)
    assert "optim.stepz" in capsys.readouterr().err
    assert not list(Path(study.folder).glob("*/.hydra")), "a job ran"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "required"),
        ("missing.yaml", "does not exist"),
        ([], "non-empty list"),
        ([["seed=1"], "seed=2"], "job 1"),
        ([["seed=1", "hydra.launcher.n_jobs=1"]], "hydra settings go on the command line"),
    ],
)
def test_a_wrong_job_list_names_the_key(tmp_path, content, message):
    if content == "missing.yaml":
        content = str(tmp_path / content)
    with pytest.raises(HydraException, match=f"^hydra.sweeper.jobs: .*{message}"):
        read_jobs(content)


def test_job_lists_expand_as_the_basic_sweeper_does(tmp_path):
    path = tmp_path / "jobs.json"  # JSON is YAML
    path.write_text('[["seed=2", "x=1"], ["seed=3,4"]]')
    jobs = read_jobs(str(path))
    params = {"seed": "0,1", "rollout.prompts_per_rollout": "4,8"}
    batch = expand_jobs(jobs, ["rollout.prompts_per_rollout=4", "eval.targets=[0.5, 0.9]"], params)
    assert batch == [
        ["seed=2", "rollout.prompts_per_rollout=4", "eval.targets=[0.5,0.9]", "x=1"],
        ["seed=3", "rollout.prompts_per_rollout=4", "eval.targets=[0.5,0.9]"],
        ["seed=4", "rollout.prompts_per_rollout=4", "eval.targets=[0.5,0.9]"],
    ]
    with pytest.raises(HydraException, match="jobs 0 and 2 are the same run"):
        expand_jobs([["seed=1", "x=2"], ["seed=2"], ["x=2", "seed=1"]], [])
