"""The shipped warm start of the embedded default (rlvr_scaling/assets/): it is what the default
composition asks for, a default run uses it as is, any other config trains and caches its own, the
recipe still produces it, and it gives the recorded starting accuracy on this CPU (whatever kernels
torch picks here: AVX-512 natively, AVX2 with ATEN_CPU_CAPABILITY=avx2)."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr_scaling.cli.compose import compose
from rlvr_scaling.warm_start import (
    HEAD_STEPS,
    SHIPPED_DIR,
    greedy_accuracy,
    prepare_embedded,
    shipped_blob,
    supervised_warm_start,
    warm_start_blob,
)


@pytest.fixture(scope="module")
def default_cfg():
    return compose()


@pytest.fixture(scope="module")
def task(default_cfg):
    from rlvr_scaling.tasks import build_task

    task = build_task(default_cfg.task)
    yield task
    task.close()


@pytest.fixture(scope="module")
def meta():
    return json.loads((SHIPPED_DIR / "warm_start.json").read_text())


def test_shipped_blob_is_what_the_default_composition_asks_for(default_cfg, meta):
    assert default_cfg.model.path == "embedded"
    assert shipped_blob() == warm_start_blob(default_cfg.model, default_cfg.task)
    # built without overrides, with the kernels every x86-64 CPU can rerun, on one thread
    built = meta["built_with"]
    assert built["overrides"] == [] and built["aten_cpu_capability"] == "avx2" and built["threads"] == 1
    assert built["cpu_capability"] == "AVX2"


def test_shipped_directory_is_a_complete_hf_model(meta):
    from rlvr_scaling.models import load_hf

    names = {p.name for p in SHIPPED_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "COMPLETE" not in names  # not a cache entry
    model, tokenizer = load_hf(SHIPPED_DIR, "float32", torch.device("cpu"))
    assert sum(p.numel() for p in model.parameters()) == 1_062_528
    assert tokenizer.decode(tokenizer.encode("47+8=", add_special_tokens=False)) == "47+8="
    assert meta["steps"] == 600 and len(meta["loss_head"]) == HEAD_STEPS
    assert meta["loss_curve"][-1]["steps"] == 600
    assert 0.0 < meta["final_loss"] < meta["loss_head"][0]


def test_default_run_uses_the_shipped_directory_without_training(default_cfg, task, tmp_path):
    logs: list[str] = []
    out = prepare_embedded(default_cfg.model, task, default_cfg.task, tmp_path, log=logs.append)
    assert out == SHIPPED_DIR
    assert logs == [
        f"[warm start] shipped warm start {SHIPPED_DIR} (the config it was built from; no training)"
    ]
    assert list(tmp_path.iterdir()) == []  # nothing copied, nothing cached


def test_another_config_trains_and_caches_its_own(default_cfg, task, tmp_path):
    cfg = compose(["model.warm_start.steps=2"])
    logs: list[str] = []
    out = prepare_embedded(cfg.model, task, cfg.task, tmp_path, log=logs.append)
    assert out.parent == tmp_path / "embedded" and (out / "COMPLETE").is_file()
    assert logs[0].startswith("[warm start] training the warm start (config differs from the shipped one: ")
    assert "model.warm_start.steps: 600 -> 2" in logs[0]
    assert json.loads((out / "warm_start.json").read_text())["config"] == warm_start_blob(cfg.model, cfg.task)
    logs.clear()
    assert prepare_embedded(cfg.model, task, cfg.task, tmp_path, log=logs.append) == out
    assert logs[0].startswith(f"[warm start] cached warm start {out} (config differs")


def test_without_an_asset_the_default_is_trained(default_cfg, task, tmp_path):
    logs: list[str] = []
    cfg = compose(["model.warm_start.steps=1"])
    out = prepare_embedded(
        cfg.model, task, cfg.task, tmp_path, log=logs.append, shipped_dir=tmp_path / "none"
    )
    assert "(no shipped warm start installed)" in logs[0] and (out / "COMPLETE").is_file()


def test_the_recipe_still_produces_the_shipped_model(default_cfg, task, meta):
    """The first steps of the warm start, rerun with today's code, match the shipped loss curve: a change
    to the recipe (data order, loss, optimizer, initialisation) must come with a rebuilt asset. The
    first steps agree across CPU kernels to float rounding (later ones drift apart)."""
    from rlvr_scaling.models import build_embedded_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_embedded_model(default_cfg.model.embedded, tokenizer)
    report = supervised_warm_start(
        model, tokenizer, task, default_cfg.model.warm_start, log=lambda *_: None, max_steps=HEAD_STEPS
    )
    assert report["loss_head"] == pytest.approx(meta["loss_head"], rel=1e-4)


def test_starting_accuracy_on_this_cpu_is_the_recorded_one(default_cfg, task, meta):
    """Same starting point on any x86-64 CPU: the shipped weights' greedy validation accuracy here is
    the one recorded at build time (AVX2 kernels, one thread) to within 0.01."""
    max_new = default_cfg.eval.max_new_tokens or default_cfg.rollout.max_new_tokens
    assert meta["greedy_accuracy_max_new_tokens"] == max_new
    acc = greedy_accuracy(SHIPPED_DIR, task, max_new, default_cfg.model.prompt_format)
    assert abs(acc - meta["greedy_accuracy"]) <= 0.01
    assert 0.05 < acc < 0.5  # the warm start leaves RL something to learn, and a signal to learn from
