"""Every sweep file launches with every launcher: locally (joblib) and on every SLURM preset.

The product sweeps/*.yaml x (no preset + slurm/*.yaml) is discovered from the folders, so a new sweep
or preset is covered without editing this file. In-process: each pair composes (base config, launcher,
first and last job, run directory names) as ``rlvr-train -m`` and ``rlvr-grid`` compose it. As real
processes: ``rlvr-train -m sweeps=<s> slurm=<preset>`` for every preset gets through composition and
the launcher to ``sbatch`` (a stand-in ``sbatch`` on PATH records the script and refuses it, so nothing
is submitted whether or not a cluster is up), ``rlvr-grid`` lists the same number of runs, and a small
local grid runs to the end through the joblib launcher. The real cluster: tests/slurm/.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from rlvr_scaling.cli.compose import REPO_ROOT, compose, to_config
from rlvr_scaling.cli.grid import run_dir_of, sweep_jobs
from rlvr_scaling.cli.train import default_threads
from rlvr_scaling.config import validate
from rlvr_scaling.errors import ConfigError

SWEEPS = sorted(p.stem for p in (REPO_ROOT / "sweeps").glob("*.yaml"))
# slurm/local*.yaml other than presets: the git-ignored site file and its example (never selected)
PRESETS = sorted(
    p.stem for p in (REPO_ROOT / "slurm").glob("*.yaml") if p.stem not in ("local", "local.example")
)
LAUNCHERS = [None, *PRESETS]
SUBMITIT = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
TRAIN = [sys.executable, "-m", "rlvr_scaling.cli.train"]
GRID = [sys.executable, "-m", "rlvr_scaling.cli.grid"]


def _overrides(sweep: str, preset: str | None) -> list[str]:
    return [f"sweeps={sweep}"] + ([f"slurm={preset}"] if preset else [])


def _job_part(cfg):
    """The job's config without ``hydra:`` (what the run sees)."""
    cfg = cfg.copy()
    OmegaConf.set_struct(cfg, False)
    cfg.pop("hydra")
    return cfg


def _validate(typed) -> None:
    try:
        validate(typed)
    except ConfigError as err:  # real-model presets on a machine without the model: the path is named
        if typed.model.path == "embedded":
            raise
        assert str(err).startswith("model.path"), err


@functools.cache
def _local_jobs(sweep: str) -> list[list[str]]:
    return sweep_jobs([f"sweeps={sweep}"])


@functools.cache
def _compose_cached(job: tuple[str, ...]):
    return compose(job, hydra=True)


def test_the_product_is_discovered():
    assert {"demo", "two_clock", "two_clock_unclipped"} <= set(SWEEPS)
    assert {"gpu", "local_cluster", "local_cluster_dp"} <= set(PRESETS)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_sweep_files_say_nothing_about_launchers(sweep):
    """A sweep says what varies and the budget; the launcher comes from launcher: local or slurm=."""
    text = (REPO_ROOT / "sweeps" / f"{sweep}.yaml").read_text()
    data = yaml.safe_load(text)
    assert "launcher" not in (data.get("hydra") or {}), f"sweeps/{sweep}.yaml sets hydra.launcher"
    assert not any("launcher" in str(entry) for entry in data.get("defaults", [])), data["defaults"]
    assert data["hydra"]["mode"] == "MULTIRUN" and data["hydra"]["sweeper"]["params"]


@pytest.mark.parametrize("preset", LAUNCHERS, ids=lambda p: p or "local")
@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_sweep_composes_with_every_launcher(sweep, preset):
    from hydra.utils import get_class

    overrides = _overrides(sweep, preset)
    base = compose(overrides, hydra=True)
    launcher = base.hydra.launcher
    if preset is None:
        assert base.hydra.runtime.choices["hydra/launcher"] == "local"
        assert launcher._target_ == JOBLIB and isinstance(launcher.n_jobs, int) and launcher.n_jobs >= 1
    else:
        assert base.hydra.runtime.choices["hydra/launcher"] == "submitit_slurm"
        assert launcher._target_ == SUBMITIT and "n_jobs" not in launcher
    get_class(launcher._target_)  # the launcher plugin imports
    jobs = sweep_jobs(overrides, base=base)
    assert len(jobs) >= 4
    local_jobs = _local_jobs(sweep)
    unlaunched = [[o for o in job if not o.startswith("slurm=")] for job in jobs]
    assert unlaunched == local_jobs, "a launcher preset changed the grid"
    # Every job of every sweep is composed without a preset in tests/core/test_configs.py (and with one
    # by each rlvr-train below); here the last one (the largest value of every axis) with the launcher.
    cfg = compose(jobs[-1], hydra=True)
    typed = to_config(cfg)
    _validate(typed)
    assert typed.run.sweep == sweep
    name = run_dir_of(cfg).name
    assert not re.search(r"(^|,)(sweeps|slurm|launcher|hydra)[.=/]", name), name
    local = _compose_cached(tuple(local_jobs[-1]))
    assert run_dir_of(cfg) == run_dir_of(local), "the launcher changed a run directory"
    assert _job_part(cfg) == _job_part(local), "a launcher preset changed the run's config"


def test_run_directory_names_leave_out_launcher_settings():
    cfg = compose(
        [
            "sweeps=demo",
            "slurm=gpu",
            "launcher=local",
            "seed=3",
            "hydra.launcher.timeout_min=5",
            "hydra.launcher.array_parallelism=2",
            "run.lock_wait_s=5",
            "run.threads=1",
        ],
        hydra=True,
    )
    assert cfg.hydra.job.override_dirname == "seed=3"
    local = compose(["sweeps=demo", "seed=3", "hydra.launcher.n_jobs=1"], hydra=True)
    assert local.hydra.job.override_dirname == "seed=3" and local.hydra.launcher.n_jobs == 1
    basic = compose(["sweeps=demo", "seed=3", "hydra/launcher=basic"], hydra=True)
    assert basic.hydra.job.override_dirname == "seed=3"
    assert basic.hydra.runtime.choices["hydra/launcher"] == "basic"  # the command line beats launcher: local


def test_command_line_narrows_a_sweep_axis():
    """As Hydra's basic sweeper does: seed=0 replaces the sweep file's seed: 0,1."""
    jobs = sweep_jobs(["sweeps=demo", "seed=0", "rollout.prompts_per_rollout=4,8"])
    assert sorted(tuple(sorted(x for x in j if not x.startswith("sweeps="))) for j in jobs) == [
        ("rollout.prompts_per_rollout=4", "seed=0"),
        ("rollout.prompts_per_rollout=8", "seed=0"),
    ]


def test_default_threads_share_cores_locally_and_follow_slurm(monkeypatch):
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    cores = os.cpu_count() or 1
    local = compose(["sweeps=demo"], hydra=True).hydra
    assert default_threads(local) == max(1, cores // local.launcher.n_jobs)
    assert default_threads(compose(["sweeps=demo", "hydra.launcher.n_jobs=1"], hydra=True).hydra) is None
    assert default_threads(compose([], hydra=True).hydra) is None  # a single run: torch's default
    on_slurm = compose(["sweeps=demo", "slurm=local_cluster"], hydra=True).hydra
    assert default_threads(on_slurm) is None  # no n_jobs: only SLURM's CPU count applies
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "6")
    assert default_threads(on_slurm) == 6


# ------------------------------------------------------------------------------------ real processes
FAKE_SBATCH = """\
#!/bin/sh
# Stand-in for sbatch: keep the script submitit wrote, then refuse it (nothing is submitted).
n=$(ls "$FAKE_SBATCH_OUT" | wc -l)
cp "$1" "$FAKE_SBATCH_OUT/$n.sh"
echo "sbatch: error: refused by the test (no submission)" >&2
exit 1
"""


def _env(extra_path: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for key in list(env):
        if key.startswith(("SLURM_", "RLVR_SLURM_", "SUBMITIT_")):
            del env[key]
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env['PATH']}"
    return env


def _sbatch_flags(text: str) -> dict[str, str]:
    return dict(
        line[len("#SBATCH --") :].partition("=")[::2]
        for line in text.splitlines()
        if line.startswith("#SBATCH --")
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rlvr_train_multirun_reaches_sbatch_on_every_preset(tmp_path, capsys):
    """One real ``rlvr-train -m sweeps=demo seed=0 slurm=<preset>`` per preset, all at once: each
    composes every job, builds submitit's job array and calls sbatch once, with one array task per
    run that ``rlvr-grid`` lists for the same arguments and the preset's resources."""
    from rlvr_scaling.cli import grid

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "sbatch").write_text(FAKE_SBATCH)
    (fake_bin / "srun").write_text("#!/bin/sh\nexit 1\n")  # only its presence is checked (cluster detection)
    for tool in ("sbatch", "srun"):
        (fake_bin / tool).chmod(0o755)
    procs = {}
    for preset in PRESETS:
        out = tmp_path / preset
        (out / "sbatch").mkdir(parents=True)
        args = ["sweeps=demo", "seed=0", f"slurm={preset}", f"hydra.sweep.dir={out / 'sweep'}"]
        procs[preset] = (
            args,
            subprocess.Popen(
                [*TRAIN, "-m", *args],
                env={**_env(fake_bin), "FAKE_SBATCH_OUT": str(out / "sbatch")},
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
    for preset, (args, proc) in procs.items():
        output, _ = proc.communicate(timeout=500)
        capsys.readouterr()
        assert grid.main(["--json", *args]) == 0
        runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(runs) == 4
        scripts = sorted((tmp_path / preset / "sbatch").iterdir())
        assert len(scripts) == 1, f"slurm={preset}: no sbatch call\n{output[-3000:]}"
        assert "refused by the test" in output and proc.returncode != 0
        launcher = compose(args, hydra=True).hydra.launcher
        flags = _sbatch_flags(scripts[0].read_text())
        n = len(runs)
        assert flags["array"] == f"0-{n - 1}%{min(n, launcher.array_parallelism)}", flags
        assert flags["ntasks-per-node"] == str(launcher.tasks_per_node)
        assert flags["partition"] == launcher.partition and flags["nodes"] == str(launcher.nodes)
        assert not list((tmp_path / preset / "sweep").glob("*/metrics.jsonl")), "something ran"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_sweep_runs_locally_through_the_joblib_launcher(tmp_path, cache_dir):
    """``rlvr-train -m sweeps=demo`` with no preset, narrowed to 2 tiny runs: both run (n_jobs = 2 at a
    time, cores / 2 torch threads each), into the directories rlvr-grid lists, and end completed."""
    tiny = [
        "model=tiny",
        "rollout.group_size=4",
        "optim.steps_per_rollout=2",
        "rollout.max_new_tokens=4",
        "task.train_size=200",
        "task.val_size=16",
        "eval.schedule=linear",
        "eval.samples=0",
        "eval.every_responses=64",
        "lr.ref_responses=16",
        "train.max_responses=64",
        "train.stop_at_targets=false",
        "run.progress=false",
        f"run.cache_dir={cache_dir}",
    ]
    args = ["sweeps=demo", "seed=0", "rollout.prompts_per_rollout=4,8", *tiny]
    proc = subprocess.run(
        [*TRAIN, "-m", *args], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=560
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Joblib.Parallel(n_jobs=2" in proc.stdout + proc.stderr
    listed = subprocess.run(
        [*GRID, "--json", *args], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    runs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(runs) == 2 and {r["state"] for r in runs} == {"completed"}
    made = {p.parent for p in (tmp_path / "runs" / "demo").glob("*/status.json")}
    assert made == {(tmp_path / r["run_dir"]) for r in runs}
    for run in runs:
        run_dir = tmp_path / run["run_dir"]
        assert (
            json.loads((run_dir / "summary.json").read_text())["derived"]["responses_per_rollout"] == run["B"]
        )
        threads = yaml.safe_load((run_dir / "config.yaml").read_text())["run"]["threads"]
        assert threads == max(1, (os.cpu_count() or 1) // 2)


def test_long_override_lists_get_short_unique_directory_names():
    from rlvr_scaling.cli.compose import MAX_DIRNAME_BYTES, run_dirname

    assert run_dirname("") == "default"
    assert run_dirname("seed=1") == "seed=1"
    # a path in a value: one directory, and distinct values keep distinct names
    assert run_dirname("model.path=/data/a,seed=0") == "model.path=%2Fdata%2Fa,seed=0"
    assert run_dirname("x=a%2Fb") != run_dirname("x=a/b")
    name = run_dir_of(compose(["model.path=/tmp/ckpt", "seed=3"], hydra=True)).name
    assert name == "model.path=%2Ftmp%2Fckpt,seed=3"
    long_a = ",".join(f"task.option_{i}=value" for i in range(20)) + ",seed=0"
    long_b = long_a[:-1] + "1"
    a, b = run_dirname(long_a), run_dirname(long_b)
    assert a != b and len(a.encode()) <= MAX_DIRNAME_BYTES and len(b.encode()) <= MAX_DIRNAME_BYTES
    assert a.startswith("task.option_0=value,") and a == run_dirname(long_a)
    long_job = [f"eval.targets=[{','.join(['0.5'] * 60)}]", "seed=0"]
    name = run_dir_of(compose(long_job, hydra=True)).name  # Hydra's name: 261 bytes
    assert len(name.encode()) <= MAX_DIRNAME_BYTES and name.startswith("eval.targets=[0.5,") and ",~" in name
