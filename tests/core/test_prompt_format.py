"""model.prompt_format: one encoding of task prompts, shared by the engines and the warm start."""

from __future__ import annotations

import pytest
import torch

from rlvr_scaling.engines.base import SamplingParams
from rlvr_scaling.engines.hf import HFEngine
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.models import ModelConfig, build_tokenizer, check_prompt_format, encode_prompt

TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<a>{% endif %}"
)


def test_plain_is_the_tokenizers_own_encoding():
    tok = build_tokenizer()
    assert encode_prompt(tok, "3+4=", "plain") == tok.encode("3+4=", add_special_tokens=True)
    assert encode_prompt(tok, "3+4=")[0] == tok.bos_token_id


def test_chat_renders_one_user_turn_with_the_generation_prompt():
    tok = build_tokenizer()
    tok.chat_template = TEMPLATE
    ids = encode_prompt(tok, "3+4=", "chat")
    assert tok.decode(ids) == "<user>3+4=\n<a>"
    assert tok.bos_token_id not in ids  # only the template's own special tokens


def test_chat_without_a_template_fails_before_compute():
    tok = build_tokenizer()
    with pytest.raises(ConfigError, match=r"model\.prompt_format=chat"):
        check_prompt_format(tok, "chat", "some/model")
    check_prompt_format(tok, "plain", "some/model")


@pytest.mark.parametrize(
    "cfg,match",
    [
        (ModelConfig(prompt_format="instruct"), r"model\.prompt_format must be one of plain, chat"),
        (ModelConfig(prompt_format="chat"), r"model\.prompt_format: the embedded model"),
    ],
)
def test_bad_prompt_formats_name_the_key(cfg, match):
    with pytest.raises(ConfigError, match=match):
        cfg.validate()


def test_hf_engine_feeds_the_chat_encoding():
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tokenizer()
    tok.chat_template = TEMPLATE
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).eval()
    gen = HFEngine(model, tok, torch.device("cpu"), prompt_format="chat").generate(
        ["3+4=", "12+5="], [1, 2], SamplingParams(3), torch.Generator().manual_seed(0)
    )
    for row, prompt in zip(range(len(gen)), ["3+4=", "12+5=", "12+5="]):
        keep = gen.attention_mask[row, : gen.prompt_width].bool()
        assert gen.input_ids[row, : gen.prompt_width][keep].tolist() == encode_prompt(tok, prompt, "chat")
