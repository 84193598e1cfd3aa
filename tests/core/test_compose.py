"""``rlvr_scaling.cli.compose.compose`` gives the config ``rlvr-train`` runs: the typed config equals,
key for key and value for value, what ``rlvr-train --cfg job --resolve`` prints for the same overrides
(group choices, value overrides, a sweep file with a cluster preset, a real-model preset), and the call
leaves no Hydra state behind."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from rlvr_scaling.cli.compose import compose, to_config

CASES = [
    [],
    ["loss=unclipped", "rollout.prompts_per_rollout=32", "lr=linear", "eval.targets=[0.2,0.3]"],
    ["sweeps=two_clock", "seed=3", "slurm=gpu", "model=qwen3_8b_base", "allocator=vigor"],
]


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) or "default" for c in CASES])
def test_compose_equals_what_rlvr_train_prints(overrides, tmp_path):
    printed = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling.cli.train", "--cfg", "job", "--resolve", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=tmp_path,
    ).stdout
    typed = compose(overrides)
    assert OmegaConf.to_yaml(OmegaConf.structured(typed)) == printed
    assert to_config(compose(overrides, hydra=True)) == typed


def test_compose_leaves_no_hydra_state_and_names_a_bad_key():
    from hydra.core.global_hydra import GlobalHydra

    job = compose(["sweeps=demo", "seed=3"], hydra=True)
    assert not GlobalHydra.instance().is_initialized()
    assert job.hydra.job.override_dirname == "seed=3" and "hydra" in job
    assert to_config(job).seed == 3 and "hydra" in job  # to_config leaves its argument whole
    with pytest.raises(Exception, match="group_sizee"):
        compose(["rollout.group_sizee=4"])
    assert not GlobalHydra.instance().is_initialized()
