"""Every config file composes into a valid typed config; registries and config groups agree;
bad values fail before any compute with a message naming the key."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rlvr_scaling.algorithms import allocators, baselines, failure, lr_rules
from rlvr_scaling.cli.train import CONF_DIR, REPO_ROOT, _register_resolvers
from rlvr_scaling.config import derive, register_configs, validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.tasks import TASKS

_register_resolvers()
register_configs()

GROUPS = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())


def _compose(overrides, hydra=False):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)


def _typed(cfg):
    cfg = cfg.copy()
    OmegaConf.set_struct(cfg, False)
    cfg.pop("hydra", None)
    return OmegaConf.to_object(cfg)


@pytest.mark.parametrize(
    "group,option",
    [(g, p.stem) for g in GROUPS for p in sorted((CONF_DIR / g).glob("*.yaml"))],
)
def test_every_option_composes(group, option):
    typed = _typed(_compose([f"{group}={option}"]))
    if (group, option) == ("task", "math_file"):
        with pytest.raises(ConfigError, match=r"task\.path"):  # the data file must be given
            validate(typed)
        return
    if _needs_local_files(typed):
        # Real-model and dataset presets load files this machine may not have (hub models, data under
        # $RLVR_DATA_DIR): they compose, and validation passes or names the missing path.
        try:
            validate(typed)
        except ConfigError as err:
            assert re.match(r"(model\.path|task\.(val_)?path): ", str(err)), err
            return
    validate(typed)
    derive(typed)


def _needs_local_files(typed) -> bool:
    return typed.model.path != "embedded" or getattr(typed.task, "kind", None) == "math_file"


@pytest.mark.parametrize("sweep", sorted(p.stem for p in (REPO_ROOT / "sweeps").glob("*.yaml")))
def test_every_sweep_composes_and_expands(sweep):
    from rlvr_scaling.cli.grid import expand

    jobs, composed = expand([f"sweeps={sweep}"])
    assert len(jobs) >= 4
    typed_all = [_typed(cfg) for cfg in composed]
    for typed in typed_all:
        validate(typed)
        assert typed.run.sweep == sweep
    sizes = {t.rollout.prompts_per_rollout * t.rollout.group_size for t in typed_all}
    if sweep in ("demo", "two_clock", "two_clock_unclipped"):
        assert max(sizes) / min(sizes) >= 8 and len(sizes) >= 4


def test_registries_match_config_groups():
    def names(group, key):
        return {
            yaml.safe_load((CONF_DIR / group / f).read_text())[key]
            for f in __import__("os").listdir(CONF_DIR / group)
        }

    assert names("baseline", "name") == set(baselines.BASELINES.names())
    assert names("lr", "rule") == set(lr_rules.LR_RULES.names())
    assert names("allocator", "name") == set(allocators.ALLOCATORS.names())
    assert names("task", "kind") == set(TASKS.names())
    assert {f.name for f in __import__("dataclasses").fields(failure.FailureConfig)} == set(
        failure.DETECTORS.names()
    )


@pytest.mark.parametrize(
    "override,key",
    [
        ("rollout.group_size=1", "rollout.group_size"),
        ("optim.steps_per_rollout=3", "optim.steps_per_rollout"),
        ("lr.ref_lr=0", "lr.ref_lr"),
        ("lr.ref_lr=-1e-6", "lr.ref_lr"),
        ("eval.targets=[0.5,1.2]", "eval.targets"),
        ("task.dataset=no_such_task", "task.dataset"),
        ("model.path=/no/such/model", "model.path"),
        ("baseline.scale=median", "baseline.scale"),
        ("loss.aggregation=sum", "loss.aggregation"),
        ("train.max_responses=0", "train.max_responses"),
        ("rollout.temperature=0", "rollout.temperature"),
    ],
)
def test_bad_values_name_the_key(override, key):
    typed = _typed(_compose([override]))
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(typed)


@pytest.mark.parametrize("override", ["rollout.group_sizee=4", "rollout.group_size=four", "lr=cosine"])
def test_typos_fail_at_composition(override):
    with pytest.raises(Exception, match=override.split("=")[0].split(".")[-1]):
        _compose([override])


def test_cli_reports_config_error_before_compute(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling.cli.train", "rollout.group_size=1", f"hydra.run.dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "rollout.group_size must be >= 2" in proc.stderr
    assert not (tmp_path / "metrics.jsonl").exists()
