"""Policy models: the embedded tiny Llama (built locally, warm-started, cached) or any HF causal LM.

``model.path: embedded`` builds a ``transformers`` Llama-architecture model from a config and a
character-level tokenizer with ``tokenizers``, warm-starts it with a short supervised phase on the
run's task (see :mod:`rlvr_scaling.warm_start`), and saves it as a normal Hugging Face model directory
(safetensors + tokenizer files) in a cache keyed by everything that determines it. Any other value is
a local model directory or a hub id, loaded with ``HF_HUB_OFFLINE`` honoured, or a GGUF file (a
``.gguf`` path, or ``package:<distribution>`` for the file an installed package ships), converted once
into the run cache (:mod:`rlvr_scaling.gguf_models`).

**Precision** (``model.dtype``, ``model.master_weights``; :class:`Precision`). ``model.dtype`` is the
dtype the forward passes compute in. For ``bfloat16`` the default is mixed precision with fp32 master
weights: the parameters, their gradients (and the data-parallel reduction of the gradients) and the
AdamW states stay in fp32, and every forward of the policy and the reference model (training, log-prob
passes, HF-engine generation, evaluation) runs under ``torch.autocast(bfloat16)``, installed once on
the model (:func:`enable_autocast`) so that no call site can forget it. This is PyTorch's AMP recipe;
under FSDP2 the same thing is a ``MixedPrecisionPolicy`` (bf16 unsharded parameters, fp32 gradient
reduction; see :mod:`rlvr_scaling.distributed`). Why: AdamW's step is about ``lr`` per weight, and a
bf16 weight of size ~0.02 has a resolution of ~1e-4, so at lr 3e-6 a bf16 parameter never changes
(``tests/core/test_precision.py``: 4 steps at lr 3e-6 changed 2.4 % of the weights of a pure bf16
model; with master weights all of them, the update within 2.6 % of the fp32 run's); an fp32 master
copy accumulates the steps. ``model.master_weights=false`` keeps the old behaviour (parameters and
optimizer states in ``model.dtype``, AdamW stepping them directly) as an explicit option.
``float16`` compute with master weights would need loss scaling, which the trainer does not do: it is
refused (``float16`` with ``master_weights=false`` is allowed).
"""

from __future__ import annotations

import contextlib
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
    # 'embedded', a local HF model directory, a hub id, a .gguf file or package:<distribution> (the GGUF
    # file an installed distribution ships; both converted once into run.cache_dir: gguf_models.py)
    path: str = "embedded"
    dtype: str = "float32"  # compute dtype of every forward pass: float32 | bfloat16 | float16
    # dtype != float32: keep fp32 master weights (parameters, gradients, their reduction and AdamW
    # states in fp32; forwards under autocast). false = parameters and optimizer states in `dtype`
    # itself (pure low precision: AdamW steps smaller than the dtype's resolution round away).
    master_weights: bool = True
    embedded: EmbeddedModelConfig = field(default_factory=EmbeddedModelConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    trust_remote_code: bool = False
    # How a task prompt becomes token ids, in every engine and the warm start (see encode_prompt):
    # plain = the text as is (base models); chat = one user turn through the tokenizer's chat template.
    prompt_format: str = "plain"

    def validate(self, prefix: str = "model") -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"{prefix}.dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")
        if self.dtype == "float16" and self.master_weights:
            raise ConfigError(
                f"{prefix}.dtype=float16 with {prefix}.master_weights=true needs loss scaling, which the "
                f"trainer does not implement: use {prefix}.dtype=bfloat16 (or {prefix}.master_weights=false "
                "for pure float16)"
            )
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
        from .gguf_models import check_gguf_source, is_gguf_source

        if is_gguf_source(self.path):
            check_gguf_source(self.path, prefix)
            return
        check_model_path(self.path, prefix)


@dataclass(frozen=True)
class Precision:
    """What ``model.dtype`` and ``model.master_weights`` mean for one model (module docstring)."""

    compute: torch.dtype  # every forward pass computes in this dtype
    params: torch.dtype  # parameters, gradients, optimizer states

    @property
    def autocast(self) -> bool:
        """Mixed precision: forwards under autocast over parameters of a wider dtype."""
        return self.compute != self.params

    def describe(self) -> str:
        c, p = _name(self.compute), _name(self.params)
        if self.autocast:
            return f"{c} compute (autocast), {p} master weights, gradients and optimizer states"
        return f"{c} parameters, gradients, optimizer states and compute"


def precision_of(cfg: ModelConfig) -> Precision:
    compute = DTYPES[cfg.dtype]
    params = torch.float32 if cfg.master_weights else compute
    return Precision(compute, params)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


_AUTOCAST_CLASSES: dict[type, type] = {}


def _autocast_class(cls: type) -> type:
    """A subclass of ``cls`` whose ``forward`` runs under the instance's autocast settings.

    A subclass rather than a wrapper module or an instance attribute: parameter names (checkpoints,
    vLLM weight pushes) stay the same, ``copy.deepcopy`` (FSDP's full copy) and FSDP2's own class swap
    keep it, and ``functools.wraps`` keeps the signature transformers inspects.
    """
    if cls in _AUTOCAST_CLASSES:
        return _AUTOCAST_CLASSES[cls]
    base_forward = cls.forward

    @functools.wraps(base_forward)
    def forward(self, *args, **kwargs):
        with torch.autocast(self.rlvr_autocast_device, dtype=self.rlvr_autocast_dtype):
            return base_forward(self, *args, **kwargs)

    sub = type(cls.__name__, (cls,), {"forward": forward, "__module__": cls.__module__})
    sub.__qualname__ = cls.__qualname__
    _AUTOCAST_CLASSES[cls] = sub
    return sub


def enable_autocast(model: torch.nn.Module, device_type: str, dtype: torch.dtype) -> torch.nn.Module:
    """Make every forward of ``model`` run under ``torch.autocast(device_type, dtype)`` (in place)."""
    if not getattr(model, "rlvr_autocast_dtype", None):
        model.__class__ = _autocast_class(type(model))
    model.rlvr_autocast_device, model.rlvr_autocast_dtype = device_type, dtype
    return model


def autocast_region(model: torch.nn.Module):
    """The model's autocast as one region around many forwards (the HF engine's decode loop): autocast
    casts each fp32 weight to the compute dtype once per outermost region, not once per forward."""
    dtype = getattr(model, "rlvr_autocast_dtype", None)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(model.rlvr_autocast_device, dtype=dtype)


def compute_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype ``model``'s forwards compute in (its autocast dtype, else its parameters')."""
    return getattr(model, "rlvr_autocast_dtype", None) or next(model.parameters()).dtype


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


def load_hf(
    path: str | Path,
    dtype: str,
    device: torch.device,
    trust_remote_code: bool = False,
    master_weights: bool = False,
):
    """Model and tokenizer from a HF directory or hub id. ``dtype``: the compute dtype; with
    ``master_weights`` and a ``dtype`` other than float32 the parameters load in fp32 and every forward
    runs under autocast (:class:`Precision`), else the parameters load in ``dtype``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    prec = Precision(DTYPES[dtype], torch.float32 if master_weights else DTYPES[dtype])
    model = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=prec.params, trust_remote_code=trust_remote_code
    ).to(device)
    if prec.autocast:
        enable_autocast(model, torch.device(device).type, prec.compute)
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


def end_of_turn_id(tokenizer) -> int | None:
    """The special token a chat template writes right after an assistant message (ChatML's
    ``<|im_end|>``, Llama 3's ``<|eot_id|>``), read off the rendered template; ``None`` without one."""
    marker = "rlvr-end-of-turn-probe"
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "1"}, {"role": "assistant", "content": marker}], tokenize=False
        )
    except Exception:  # no template, or one that refuses this conversation
        return None
    pos = rendered.rfind(marker)
    if not isinstance(rendered, str) or pos < 0:
        return None
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    for i in tokenizer.encode(rendered[pos + len(marker) :], add_special_tokens=False):
        if i in special:
            return i
    return None


def stop_token_ids(tokenizer, generation_config=None, prompt_format: str = "plain") -> list[int]:
    """The token ids that end a response, in every engine: the tokenizer's EOS, every id of the
    checkpoint's ``generation_config.eos_token_id`` (an id or a list of ids), and with ``chat`` prompts
    the template's end-of-turn token (:func:`end_of_turn_id`). The first is the tokenizer's EOS."""
    ids = [tokenizer.eos_token_id]
    eos = getattr(generation_config, "eos_token_id", None)
    ids += list(eos) if isinstance(eos, (list, tuple)) else [eos]
    if prompt_format == "chat":
        ids.append(end_of_turn_id(tokenizer))
    return list(dict.fromkeys(int(i) for i in ids if i is not None))


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
