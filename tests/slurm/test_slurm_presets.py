"""The Hydra launcher presets in slurm/: composition, site file, env defaults, the sbatch they produce.

The composition and sbatch tests need no cluster (they run everywhere). The two ``slurm``-marked
tests launch a real Hydra multirun through each preset onto the local cluster.

Each test composes a throwaway app whose ``hydra.searchpath`` points at a *copy* of slurm/, so a
developer's own slurm/local.yaml never leaks into the tests and the tests never touch it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import submitit
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig
from slurm_utils import ACCOUNT, PARTITION, REPO, run

PRESETS = sorted(p.stem for p in (REPO / "slurm").glob("*.yaml") if not p.name.startswith("local."))
ENV_KEYS = ("RLVR_SLURM_PARTITION", "RLVR_SLURM_ACCOUNT", "RLVR_SLURM_QOS")

APP = """
import json, os
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg) -> int:
    keys = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT",
            "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED")
    out = {k: os.environ.get(k) for k in keys}
    out["x"] = cfg.x
    Path(HydraConfig.get().runtime.output_dir, "job.json").write_text(json.dumps(out))
    return cfg.x


if __name__ == "__main__":
    main()
"""


def make_app(root: Path, site: str | None = None) -> Path:
    """A minimal Hydra app under ``root`` with ``optional slurm: null`` and slurm/ on its search path."""
    slurm_dir = root / "repo" / "slurm"
    slurm_dir.mkdir(parents=True)
    for yaml in (REPO / "slurm").glob("*.yaml"):
        if yaml.name != "local.yaml":
            shutil.copy(yaml, slurm_dir / yaml.name)
    if site is not None:
        (slurm_dir / "local.yaml").write_text(textwrap.dedent(site))
    conf = root / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text(
        textwrap.dedent(
            f"""\
            defaults:
              - optional slurm: null
              - _self_
            hydra:
              searchpath:
                - file://{root / "repo"}
            x: 1
            """
        )
    )
    (root / "app.py").write_text(APP)
    return conf


def compose_app(conf: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def sbatch_text(cfg: DictConfig, n_jobs: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The sbatch script the real launcher would submit for an ``n_jobs`` multirun (nothing is run)."""

    class Submitted(Exception):
        pass

    captured: dict[str, str] = {}

    def fake_map_array(self: submitit.AutoExecutor, fn: object, *iterables: list) -> list:
        inner = self._executor
        inner.parameters["map_count"] = len(iterables[0])
        captured["sbatch"] = inner._make_submission_file_text("python -m submitit.core._submit X", "uid")
        raise Submitted

    # No srun here: pretend to be on a cluster, and stop right before anything is submitted.
    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    monkeypatch.setattr(submitit.AutoExecutor, "map_array", fake_map_array)
    launcher = instantiate(cfg.hydra.launcher)
    launcher.config = cfg
    with pytest.raises(Submitted):
        launcher.launch([[f"x={i}"] for i in range(n_jobs)], initial_job_idx=0)
    return captured["sbatch"]


def sbatch_flags(text: str) -> dict[str, str | bool]:
    flags: dict[str, str | bool] = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --") :].partition("=")
            flags[key] = value if value else True
    return flags


@pytest.fixture(autouse=True)
def _no_site_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


# ------------------------------------------------------------------------------ composition only
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_with_the_slurm_launcher(tmp_path: Path, preset: str) -> None:
    cfg = compose_app(make_app(tmp_path), f"slurm={preset}")
    assert cfg.hydra.runtime.choices["hydra/launcher"] == "submitit_slurm"
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")
    assert "slurm" not in cfg, "presets are _global_ and must not leave a `slurm:` key in the job config"


def test_presets_are_the_expected_ones() -> None:
    assert {"gpu", "local_cluster"} <= set(PRESETS)


def test_gpu_defaults_without_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = compose_app(make_app(tmp_path), "slurm=gpu", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    flags = sbatch_flags(sbatch_text(cfg, 3, monkeypatch))
    assert flags["partition"] == "gpu"
    assert "account" not in flags and "qos" not in flags
    assert flags["gpus-per-node"] == "1"
    assert flags["cpus-per-task"] == "8"
    assert flags["mem"] == "64GB"
    assert flags["time"] == "240"
    assert flags["ntasks-per-node"] == "1" and flags["nodes"] == "1"
    assert flags["signal"] == "USR2@120"
    assert flags["requeue"] is True
    assert flags["array"] == "0-2%3"


@pytest.mark.parametrize("preset,nodes", [("gpu_1x8", 1), ("gpu_2x8", 2)])
def test_data_parallel_gpu_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preset, nodes) -> None:
    """One task per GPU (one rank each), 8 per node, on 1 or 2 nodes."""
    cfg = compose_app(make_app(tmp_path), f"slurm={preset}", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    flags = sbatch_flags(sbatch_text(cfg, 1, monkeypatch))
    assert flags["nodes"] == str(nodes)
    assert flags["ntasks-per-node"] == "8" and flags["gpus-per-node"] == "8"
    assert flags["partition"] == "gpu" and flags["signal"] == "USR2@120"


def test_gpu_reads_env_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_SLURM_PARTITION", "a100")
    monkeypatch.setenv("RLVR_SLURM_ACCOUNT", "acme")
    monkeypatch.setenv("RLVR_SLURM_QOS", "high")
    cfg = compose_app(make_app(tmp_path), "slurm=gpu", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    flags = sbatch_flags(sbatch_text(cfg, 1, monkeypatch))
    assert (flags["partition"], flags["account"], flags["qos"]) == ("a100", "acme", "high")


def test_gpu_site_file_overrides_env_and_cli_overrides_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = """\
        # @package hydra.launcher
        partition: h100
        account: lab
        setup:
          - module load cuda/12.4
        additional_parameters:
          mail-type: END
        """
    monkeypatch.setenv("RLVR_SLURM_PARTITION", "from-env")
    monkeypatch.setenv("RLVR_SLURM_QOS", "env-qos")
    conf = make_app(tmp_path, site=site)
    cfg = compose_app(conf, "slurm=gpu", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    text = sbatch_text(cfg, 1, monkeypatch)
    flags = sbatch_flags(text)
    assert flags["partition"] == "h100"  # site file beats the environment
    assert flags["account"] == "lab"
    assert flags["qos"] == "env-qos"  # not in the site file: the environment still applies
    assert flags["mail-type"] == "END" and flags["requeue"] is True  # dicts merge
    assert "module load cuda/12.4" in text and "PYTHONUNBUFFERED" not in text  # lists replace
    cli = compose_app(conf, "slurm=gpu", "hydra.launcher.partition=cli", f"hydra.sweep.dir={tmp_path / 's2'}")
    assert sbatch_flags(sbatch_text(cli, 1, monkeypatch))["partition"] == "cli"


def test_example_site_file_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = (REPO / "slurm" / "local.example.yaml").read_text()
    cfg = compose_app(make_app(tmp_path, site=example), "slurm=gpu", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    flags = sbatch_flags(sbatch_text(cfg, 1, monkeypatch))
    assert flags["account"] == "my-project"


def test_local_cluster_preset_targets_the_local_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = compose_app(make_app(tmp_path), "slurm=local_cluster", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    flags = sbatch_flags(sbatch_text(cfg, 6, monkeypatch))
    assert flags["partition"] == PARTITION and flags["account"] == ACCOUNT
    assert "gpus-per-node" not in flags
    assert flags["array"] == "0-5%4"


def test_no_preset_keeps_the_basic_launcher(tmp_path: Path) -> None:
    cfg = compose_app(make_app(tmp_path))
    assert cfg.hydra.runtime.choices["hydra/launcher"] == "basic"


# -------------------------------------------------------------------------- on the real cluster
def _multirun(app_root: Path, *overrides: str) -> list[dict]:
    sweep = app_root / "multirun"
    cmd = [sys.executable, str(app_root / "app.py"), "-m", *overrides, f"hydra.sweep.dir={sweep}"]
    proc = subprocess.run(cmd, cwd=app_root, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"multirun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    results = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/job.json"))]
    return sorted(results, key=lambda r: r["x"])


@pytest.mark.slurm
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("slurm_cluster")
def test_multirun_through_local_cluster_preset(tmp_path: Path) -> None:
    make_app(tmp_path)
    results = _multirun(tmp_path, "slurm=local_cluster", "x=1,2,3")
    assert [r["x"] for r in results] == [1, 2, 3]
    assert len({r["SLURM_ARRAY_JOB_ID"] for r in results}) == 1, "one multirun = one job array"
    assert all(r["SLURM_JOB_PARTITION"] == PARTITION and r["SLURM_JOB_ACCOUNT"] == ACCOUNT for r in results)
    assert all(r["PYTHONUNBUFFERED"] == "1" for r in results)  # the preset's setup lines ran


@pytest.mark.slurm
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("slurm_cluster")
def test_gpu_preset_is_accepted_by_sbatch(tmp_path: Path) -> None:
    """slurm=gpu, shrunk to fit the local node, really schedules: --gpus-per-node, --requeue, ...

    The local cluster's GPUs are fake (scheduling only); the job sees CUDA_VISIBLE_DEVICES.
    """
    gres = run("sinfo", "-h", "-p", PARTITION, "-o", "%G").stdout
    if "gpu" not in gres:
        pytest.skip(f"local node has no (fake) GPUs: gres={gres.strip()!r}; start with RLVR_SLURM_GPUS>0")
    make_app(tmp_path)
    results = _multirun(
        tmp_path,
        "slurm=gpu",
        f"hydra.launcher.partition={PARTITION}",
        f"hydra.launcher.account={ACCOUNT}",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=1",
        "hydra.launcher.timeout_min=10",
        "x=1,2",
    )
    assert [r["x"] for r in results] == [1, 2]
    assert all(r["CUDA_VISIBLE_DEVICES"] not in (None, "") for r in results), results
