"""The real-model path on CPU: the Qwen presets (``model=qwen2.5_0.5b`` / ``qwen2.5_1.5b_instruct``,
bf16 with fp32 master weights) on a random-initialised Qwen2 of tiny size saved where the presets look
($RLVR_MODEL_DIR/<name>), with a locally built BPE tokenizer that has a chat template, trained on
``task=math_file`` (the GSM8K-style fixture, rewards by math-verify) through the real Hydra composition
and trainer, with ``prompt_format`` chat and plain. A short supervised warm start on the fixture gives the
model answers to get right, so the rollouts carry reward variance and the bf16 path really trains."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr_scaling.models import WarmStartConfig, load_hf
from rlvr_scaling.stand_in import build_model, build_tokenizer
from rlvr_scaling.tasks import MathFileTaskParams, build_task
from rlvr_scaling.warm_start import supervised_warm_start

GSM8K = Path(__file__).resolve().parents[1] / "fixtures" / "math" / "gsm8k_tiny.jsonl"


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    """$RLVR_MODEL_DIR with Qwen2.5-0.5B and Qwen2.5-1.5B-Instruct: one tiny stand-in, warm-started."""
    root = tmp_path_factory.mktemp("models")
    rows = [json.loads(x) for x in GSM8K.read_text().splitlines()]
    tok = build_tokenizer([f"Question: {r['question']}\nAnswer: {r['answer']}" for r in rows] * 4, 400)
    raw = build_model("tiny", tok, root / "raw")
    model, tok = load_hf(raw, "float32", torch.device("cpu"))
    with build_task(MathFileTaskParams(path=str(GSM8K), val_size=5)) as task:
        ws = WarmStartConfig(steps=150, examples_per_step=16, lr=3e-3, deficit_frac=0.0)
        report = supervised_warm_start(model, tok, task, ws, log=lambda *_: None, prompt_format="chat")
    assert report["final_loss"] < 1.5, report
    for name in ("Qwen2.5-1.5B-Instruct", "Qwen2.5-0.5B"):
        shutil.copytree(raw, root / name)  # tokenizer files and chat template
        model.save_pretrained(root / name)  # the warm-started weights
    return root


def _compose(preset: str, cache: Path, extra=()):
    from rlvr_scaling.cli.compose import compose

    overrides = [
        f"model={preset}",
        "task=math_file",
        f"task.path={GSM8K}",
        "task.val_size=5",
        "rollout.prompts_per_rollout=4",
        "rollout.group_size=4",
        "rollout.max_new_tokens=24",
        "optim.steps_per_rollout=2",
        "lr.ref_lr=1e-4",
        "lr.ref_responses=16",
        "train.max_responses=48",
        "eval.schedule=linear",
        "eval.every_responses=32",
        "eval.samples=0",
        "eval.targets=[0.5]",
        "failure=none",
        "logger.samples.every_rollouts=1",
        "run.device=cpu",
        "run.progress=false",
        f"run.cache_dir={cache}",
        *extra,
    ]
    return compose(overrides)


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "preset, prompt_format, model_name",
    [("qwen2.5_1.5b_instruct", "chat", "Qwen2.5-1.5B-Instruct"), ("qwen2.5_0.5b", "plain", "Qwen2.5-0.5B")],
)
def test_qwen_preset_trains_in_bf16_with_master_weights(
    model_root, tmp_path, monkeypatch, preset, prompt_format, model_name
):
    from rlvr_scaling.run import build_components, train

    monkeypatch.setenv("RLVR_MODEL_DIR", str(model_root))
    cfg = _compose(preset, tmp_path / "cache")
    assert cfg.model.path == f"{model_root}/{model_name}"
    assert (cfg.model.dtype, cfg.model.master_weights, cfg.model.prompt_format) == (
        "bfloat16",
        True,
        prompt_format,
    )
    # the prompt ids every engine and the warm start use: the chat template, or the text alone
    comps = build_components(cfg, log=lambda *_: None)
    tok = comps.tokenizer
    ids = comps.engine.encode([comps.task.train_example(0).prompt])[0]
    starts_chat = ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    assert starts_chat == (prompt_format == "chat")
    assert all(p.dtype == torch.float32 for p in comps.model.parameters())
    comps.task.close()
    before = load_file(str(model_root / model_name / "model.safetensors"))

    assert train(cfg, tmp_path / "run", log=lambda *_: None) == "completed"
    rows = _rows(tmp_path / "run")
    train_rows = [r for r in rows if "train/reward_mean" in r]
    evals = [r for r in rows if "eval/accuracy" in r]
    assert len(train_rows) == 3 and len(evals) >= 2
    for r in train_rows:  # math-verify scored every response (no unscorable ones)
        assert r["train/unscorable"] == 0 and 0.0 <= r["train/reward_mean"] <= 1.0
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert {s["reward"] for s in samples} <= {0.0, 1.0}
    print(
        f"\n[{preset}] train reward {[round(r['train/reward_mean'], 3) for r in train_rows]}, "
        f"eval accuracy {[r['eval/accuracy'] for r in evals]}, zero-adv "
        f"{[r['train/zero_adv_frac'] for r in train_rows]}"
    )
    if prompt_format == "chat":  # warm-started on chat prompts: right and wrong answers in a group
        assert any(r["train/zero_adv_frac"] < 1.0 for r in train_rows)
        assert max(r["train/reward_mean"] for r in train_rows) > 0
        # the bf16 run trained: its fp32 master weights moved, in (almost) every coordinate of the
        # matrices that received gradient, at lr 1e-4 (steps a pure bf16 weight would mostly round away)
        after = load_file(
            str(next((tmp_path / "run" / "checkpoints").glob("rollout-*")) / "model.safetensors")
        )
        assert all(t.dtype == torch.float32 for t in after.values())
        name = "model.layers.0.mlp.down_proj.weight"
        changed = float((after[name] != before[name]).float().mean())
        assert changed > 0.9, changed
