"""Random-initialised stand-ins of real model shapes, built locally (no download): for machines without
the weights (offline GPU nodes, CI) that must still run a real architecture end to end.

:func:`build_tokenizer` trains a small byte-level BPE tokenizer with ``tokenizers`` on the given texts,
with Qwen2.5-style special tokens (``<|endoftext|>`` as padding, ``<|im_start|>`` / ``<|im_end|>`` and a
ChatML chat template; EOS ``<|im_end|>``, as for the Instruct models), so both ``model.prompt_format``
values work. :func:`build_model` builds a model of a named shape (:data:`SHAPES`: the public
``config.json`` values of every real-model preset in conf/model/, and ``tiny`` for CPU tests) with random
weights, ``Qwen2ForCausalLM`` or, for the ``qwen3_*`` shapes, ``Qwen3ForCausalLM``
(:func:`model_classes`), and saves it with the tokenizer as a Hugging Face directory. The model's
vocabulary is the real model's (same embedding and output-layer cost), larger than the tokenizer's, as
with Qwen itself; ids beyond the tokenizer decode to nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

# Public config.json values (hidden, layers, heads, KV heads, [head size,] MLP width, vocabulary, tied
# embeddings), one per real-model preset (conf/model/<name>.yaml).
SHAPES: dict[str, dict] = {
    "qwen2.5_0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5_1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5_3b": dict(
        hidden_size=2048,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        intermediate_size=11008,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen2.5_7b": dict(
        hidden_size=3584,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        intermediate_size=18944,
        vocab_size=152064,
        tie_word_embeddings=False,
    ),
    "qwen3_4b_base": dict(
        hidden_size=2560,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=9728,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "qwen3_8b_base": dict(
        hidden_size=4096,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=12288,
        vocab_size=151936,
        tie_word_embeddings=False,
    ),
    # CPU tests and smoke runs: the same architecture, tiny (head size 32: vLLM's CPU attention)
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
        vocab_size=None,  # = the tokenizer's
        tie_word_embeddings=True,
    ),
}
SHAPES["qwen2.5_1.5b_instruct"] = SHAPES["qwen2.5_1.5b"]  # the Instruct model: the same shape
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)


def build_tokenizer(texts: list[str], vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on ``texts`` (module docstring)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def model_classes(shape: str):
    """The transformers config and model classes of ``shape``: Qwen3 for ``qwen3_*``, else Qwen2."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    return (Qwen3Config, Qwen3ForCausalLM) if shape.startswith("qwen3") else (Qwen2Config, Qwen2ForCausalLM)


def build_model(
    shape: str, tokenizer, out: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", seed: int = 0
) -> Path:
    """A random-weight model of ``shape`` (:func:`model_classes`) saved with ``tokenizer`` in ``out``."""
    config_cls, model_cls = model_classes(shape)
    arch = dict(SHAPES[shape])
    arch["vocab_size"] = arch["vocab_size"] or len(tokenizer)
    config = config_cls(
        **arch,
        max_position_embeddings=4096,
        rope_theta=1e6,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # initialise directly in the target dtype, on the device
    try:
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(seed)
            model = model_cls(config)
    finally:
        torch.set_default_dtype(default)
    gen = model.generation_config
    gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = (
        None,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
    )
    out = Path(out)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"  # a class name transformers 4.x and 5.x both load
    data = json.loads(cfg_path.read_text())
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(data, indent=2))
    del model
    return out
