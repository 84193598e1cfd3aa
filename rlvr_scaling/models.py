"""Policy models: the embedded tiny Llama (built locally, warm-started, cached) or any HF causal LM.

``model.path: embedded`` builds a ``transformers`` Llama-architecture model from a config and a
character-level tokenizer with ``tokenizers``, warm-starts it with a short supervised phase on the
run's task (see :mod:`rlvr_scaling.warm_start`), and saves it as a normal Hugging Face model directory
(safetensors + tokenizer files) in a cache keyed by everything that determines it. Any other value is
a local model directory or a hub id, loaded with ``HF_HUB_OFFLINE`` honoured.
"""

from __future__ import annotations

import functools
import inspect
import os
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PROMPT_FORMATS = ("plain", "chat")
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
# Every character a compact arithmetic prompt or a short English/math answer can contain.
CHARACTERS = string.digits + string.ascii_letters + " \n+-*/=()#.,:;!?'\"<>[]{}^_%&|\\$~@`"


@dataclass
class EmbeddedModelConfig:
    """Architecture of the embedded model (a LlamaForCausalLM; ~1M parameters by default)."""

    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 64
    init_seed: int = 0


@dataclass
class WarmStartConfig:
    """Supervised warm start of the embedded model on the run's task (so that RL has signal)."""

    steps: int = 600
    examples_per_step: int = 128
    lr: float = 3e-3
    # Fraction of SFT targets written in a wrong answer format ('#57' for '57', which scores 0): the
    # model starts with a deficit that RL can remove, as base models start with format errors.
    deficit_frac: float = 0.5
    deficit_prefix: str = "#"
    seed: int = 0


@dataclass
class ModelConfig:
    path: str = "embedded"  # 'embedded', a local HF model directory, or a hub id
    dtype: str = "float32"  # float32 | bfloat16 | float16 (weights and training)
    embedded: EmbeddedModelConfig = field(default_factory=EmbeddedModelConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    trust_remote_code: bool = False
    # How a task prompt becomes token ids, in every engine and the warm start (see encode_prompt):
    # plain = the text as is (base models); chat = one user turn through the tokenizer's chat template.
    prompt_format: str = "plain"

    def validate(self, prefix: str = "model") -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"{prefix}.dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")
        if self.prompt_format not in PROMPT_FORMATS:
            raise ConfigError(
                f"{prefix}.prompt_format must be one of {', '.join(PROMPT_FORMATS)} (got {self.prompt_format!r})"
            )
        if self.path == "embedded":
            if self.prompt_format != "plain":
                raise ConfigError(
                    f"{prefix}.prompt_format: the embedded model's character tokenizer has no chat "
                    "template; use prompt_format=plain"
                )
            e, w = self.embedded, self.warm_start
            if e.hidden_size % e.num_heads:
                raise ConfigError(f"{prefix}.embedded.hidden_size must be divisible by num_heads")
            if w.steps < 0 or w.examples_per_step < 1 or not w.lr > 0:
                raise ConfigError(f"{prefix}.warm_start: steps >= 0, examples_per_step >= 1, lr > 0 required")
            if not 0 <= w.deficit_frac < 1:
                raise ConfigError(
                    f"{prefix}.warm_start.deficit_frac must be in [0, 1) (got {w.deficit_frac})"
                )
            return
        check_model_path(self.path, prefix)


def check_model_path(path: str, prefix: str = "model") -> None:
    """Fail fast on a model path that cannot load, without touching the network."""
    p = Path(os.path.expanduser(path))
    looks_local = path.startswith((".", "/", "~")) or p.exists() or path.count("/") != 1
    if looks_local:
        if not (p / "config.json").is_file():
            raise ConfigError(
                f"{prefix}.path: no Hugging Face model directory at {path!r} (config.json missing)"
            )
        return
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(path, "config.json"), str):
            raise ConfigError(
                f"{prefix}.path: hub id {path!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
            )


def build_tokenizer():
    """A character-level tokenizer: every character is one token, so digits tokenize consistently."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + list(CHARACTERS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
    )


def build_embedded_model(cfg: EmbeddedModelConfig, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(cfg.init_seed)
        model = LlamaForCausalLM(config)
    gen = model.generation_config
    gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = (
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
    )
    return model


def save_hf_dir(model, tokenizer, out: Path) -> None:
    import json

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # Name the class that both transformers 4.x and 5.x can load.
    cfg_path = out / "tokenizer_config.json"
    data = json.loads(cfg_path.read_text())
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(data, indent=2))


def load_hf(path: str | Path, dtype: str, device: torch.device, trust_remote_code: bool = False):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=DTYPES[dtype], trust_remote_code=trust_remote_code
    ).to(device)
    return model, tokenizer


def encode_prompt(tokenizer, text: str, prompt_format: str = "plain") -> list[int]:
    """Token ids of a task prompt, exactly as every engine and the warm start feed it to the model.

    ``plain``: ``tokenizer.encode(text, add_special_tokens=True)``, the tokenizer's own convention (a
    BOS for Llama-style tokenizers and the embedded one, nothing for Qwen). ``chat``: ``text`` as one
    user message through the tokenizer's chat template with the assistant turn opened
    (``add_generation_prompt``); only the template's own special tokens are added.
    """
    if prompt_format == "plain":
        return tokenizer.encode(text, add_special_tokens=True)
    if prompt_format == "chat":
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return tokenizer.encode(rendered, add_special_tokens=False)
    raise ConfigError(
        f"model.prompt_format must be one of {', '.join(PROMPT_FORMATS)} (got {prompt_format!r})"
    )


def check_prompt_format(tokenizer, prompt_format: str, path: str) -> None:
    """Fail before any compute when ``chat`` is asked of a tokenizer without a chat template."""
    if prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"model.prompt_format=chat but the tokenizer of {path!r} has no chat template "
            "(base models usually need prompt_format=plain)"
        )


def kv_cache(model, cache) -> dict[str, Any]:
    """Forward keyword arguments that hand ``cache`` (a ``DynamicCache``, updated in place) to ``model``.

    transformers renamed the argument from ``past_key_values`` to ``cache`` in 5.2x (5.17 knows only
    the old name and silently ignores ``cache=``; 5.24 accepts the old one with a deprecation warning),
    so the name is read from the model's ``forward`` signature. Callers keep their own reference to the
    cache object rather than reading it back from the output (``out.cache`` / ``out.past_key_values``).
    """
    return {_cache_keyword(type(getattr(model, "module", model))): cache}


@functools.cache
def _cache_keyword(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
