"""The shipped warm start of task=compose (rlvr_scaling/assets/embedded_compose): it is what
``task=compose`` composes to, a run uses it as is, the recipe still produces it, it scores (atomic
transforms learned, held-out compositions not), and it gives the recorded starting accuracy with
torch's native kernels and with its AVX2 kernels (ATEN_CPU_CAPABILITY=avx2, in a child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from rlvr_scaling.cli.compose import REPO_ROOT, compose
from rlvr_scaling.warm_start import (
    HEAD_STEPS,
    SHIPPED_COMPOSE_DIR,
    SHIPPED_DIR,
    greedy_accuracy,
    prepare_embedded,
    shipped_blob,
    shipped_dirs,
    supervised_warm_start,
    warm_start_blob,
)


@pytest.fixture(scope="module")
def cfg():
    return compose(["task=compose"])


@pytest.fixture(scope="module")
def task(cfg):
    from rlvr_scaling.tasks import build_task

    return build_task(cfg.task)


@pytest.fixture(scope="module")
def meta():
    return json.loads((SHIPPED_COMPOSE_DIR / "warm_start.json").read_text())


def test_shipped_blob_is_what_task_compose_asks_for(cfg, meta):
    assert shipped_dirs() == [SHIPPED_DIR, SHIPPED_COMPOSE_DIR]
    assert shipped_blob(SHIPPED_COMPOSE_DIR) == warm_start_blob(cfg.model, cfg.task)
    assert cfg.model.warm_start.deficit_frac == 0.0  # no format deficit: RL must learn to compose
    built = meta["built_with"]
    assert built["overrides"] == ["task=compose"] and built["aten_cpu_capability"] == "avx2"
    assert built["threads"] == 1 and built["cpu_capability"] == "AVX2"


def test_a_compose_run_uses_the_shipped_directory_and_the_default_keeps_its_own(cfg, task, tmp_path):
    logs: list[str] = []
    assert prepare_embedded(cfg.model, task, cfg.task, tmp_path, log=logs.append) == SHIPPED_COMPOSE_DIR
    assert logs == [
        f"[warm start] shipped warm start {SHIPPED_COMPOSE_DIR} (the config it was built from; no training)"
    ]
    default = compose([])
    assert prepare_embedded(default.model, None, default.task, tmp_path, log=logs.append) == SHIPPED_DIR
    assert list(tmp_path.iterdir()) == []  # nothing copied, nothing cached


def test_shipped_directory_is_a_small_complete_hf_model(meta):
    from rlvr_scaling.models import load_hf

    names = {p.name for p in SHIPPED_COMPOSE_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "COMPLETE" not in names
    assert sum(p.stat().st_size for p in SHIPPED_COMPOSE_DIR.iterdir()) < 8 * 2**20
    model, tokenizer = load_hf(SHIPPED_COMPOSE_DIR, "float32", torch.device("cpu"))
    assert tokenizer.decode(tokenizer.encode("RU:abcde=", add_special_tokens=False)) == "RU:abcde="
    assert len(meta["loss_head"]) == HEAD_STEPS and meta["loss_curve"][-1]["steps"] == meta["steps"]
    assert 0.0 < meta["final_loss"] < 0.3 * meta["loss_head"][0]


def test_the_recipe_still_produces_the_shipped_model(cfg, task, meta):
    from rlvr_scaling.models import build_embedded_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_embedded_model(cfg.model.embedded, tokenizer)
    report = supervised_warm_start(
        model, tokenizer, task, cfg.model.warm_start, log=lambda *_: None, max_steps=HEAD_STEPS
    )
    assert report["loss_head"] == pytest.approx(meta["loss_head"], rel=1e-4)


_CHILD = """
import json, sys
from rlvr_scaling.cli.compose import compose
from rlvr_scaling.tasks import build_task
from rlvr_scaling.warm_start import SHIPPED_COMPOSE_DIR, greedy_accuracy
import torch
cfg = compose(["task=compose"])
task = build_task(cfg.task)
max_new = cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "accuracy": greedy_accuracy(SHIPPED_COMPOSE_DIR, task, max_new, "plain")}))
"""


def test_starting_accuracy_is_the_recorded_one_natively_and_with_avx2(cfg, task, meta):
    """The shipped weights' greedy held-out accuracy, with this CPU's native kernels (this process)
    and with the AVX2 kernels (a child process), is the one recorded at build time to within 0.01;
    the atomic transforms are learned and the held-out compositions are not (RL has a range)."""
    max_new = cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens
    assert meta["greedy_accuracy_max_new_tokens"] == max_new
    native = greedy_accuracy(SHIPPED_COMPOSE_DIR, task, max_new, "plain")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout.strip().splitlines()[-1])
    assert child["capability"] == "AVX2"
    assert abs(native - meta["greedy_accuracy"]) <= 0.01
    assert abs(child["accuracy"] - meta["greedy_accuracy"]) <= 0.01
    assert native <= 0.25  # greedy 0.184; the sampled eval/accuracy starts at 0.150 (docs/tasks.md)
    atomic = [task.warm_start_example(i) for i in range(400)]
    atomic = [e for e in atomic if len(task.codes_of(e)) == 1][:128]
    assert greedy_accuracy(SHIPPED_COMPOSE_DIR, task, max_new, "plain", examples=atomic) >= 0.9
