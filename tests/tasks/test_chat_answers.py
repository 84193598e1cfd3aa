"""Chat models' prompts and answers: the chat answer reader, reasoning-gym's chat form, the stop ids every
engine uses, and the config rules that keep a chat model off compact prompts and strict verifiers."""

from __future__ import annotations

import pytest

from rlvr_scaling.errors import ConfigError
from rlvr_scaling.tasks.answers import read_chat_answer
from rlvr_scaling.tasks.exact import chat_answer_reward


@pytest.mark.parametrize(
    "text,number",
    [
        ("58 + 26 = 84.", "84"),  # the final number
        ("The answer is 84", "84"),
        ("Answer: 84\nso maybe 85 after all", "84"),  # an Answer: line wins over later numbers
        ("ANSWER = -7 (I think)", "-7"),
        ("The answer to 5 + 3 is 8", "8"),  # 'answer' without ':'/'is' right after is no Answer: line
        ("we get \\boxed{-6}. Answer: 3", "-6"),  # the last \boxed{} first
        ("8 \u2212 14 = \u22126", "-6"),  # Unicode minus
        ("x = 1,000", "1000"),
        ("Answer: unknown", None),  # an Answer: line without a number is no answer
        ("Answer: <number>", None),
        ("I cannot say.", None),
        ("", None),
    ],
)
def test_chat_answer_reader(text, number):
    assert read_chat_answer(text) == number


def test_chat_answer_reward_compares_numbers_exactly():
    assert chat_answer_reward("So 58 + 26 = 84.", "84") == 1.0
    assert chat_answer_reward("Answer: 84.0", "84") == 1.0  # the same number
    assert chat_answer_reward("Answer: 840", "84") == 0.0
    assert chat_answer_reward("58 + 26 = 84, which is more than 26", "84") == 0.0  # the last number is 26
    assert (
        chat_answer_reward("Answer: 2.5", "2.5") == 1.0
        and chat_answer_reward("Answer: 2.50001", "2.5") == 0.0
    )
    assert chat_answer_reward(None, "84") == 0.0  # never raises
    assert chat_answer_reward("Answer: 84", "eighty-four") == 0.0


def test_reasoning_gym_chat_form_holds_out_the_same_problems():
    from rlvr_scaling.tasks import ReasoningGymTaskParams, build_task

    common = dict(
        dataset_config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}, val_size=16
    )
    compact = build_task(ReasoningGymTaskParams(**common))
    chat = build_task(ReasoningGymTaskParams(**common, prompt_format="chat", verifier="answer"))
    assert chat.info()["prompt_format"] == "chat"
    for a, b in zip(compact.validation(), chat.validation()):
        expression = " ".join(a.prompt.rstrip("=").replace("+", " + ").replace("-", " - ").split())
        assert b.prompt == f"Calculate {expression}. Give the final answer as 'Answer: <number>'."
        assert b.answer == a.answer
    ex = chat.validation()[0]
    assert chat.sft_completion(ex) == f"Answer: {ex.answer}"
    assert chat.score([f"Sure! {ex.prompt[10:]} The result is {ex.answer}.", "no idea"], [ex, ex]) == [
        1.0,
        0.0,
    ]
    with pytest.raises(ConfigError, match=r"task\.verifier=exact .* use task\.verifier=answer"):
        ReasoningGymTaskParams(prompt_format="chat", verifier="exact").validate()


def test_stop_ids_are_eos_generation_config_and_end_of_turn():
    from transformers import GenerationConfig

    from rlvr_scaling.models import build_tokenizer, end_of_turn_id, stop_token_ids
    from rlvr_scaling.stand_in import build_tokenizer as chat_tokenizer

    embedded = build_tokenizer()
    assert stop_token_ids(embedded) == [embedded.eos_token_id] and end_of_turn_id(embedded) is None
    tok = chat_tokenizer(["What is 1 + 2? 3", "hello world"], vocab_size=300)
    tok.eos_token = "<|endoftext|>"  # a base model's EOS; the template ends a turn with <|im_end|>
    eos, eot = tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")
    assert eos != eot and end_of_turn_id(tok) == eot
    assert stop_token_ids(tok, None, "plain") == [eos]
    assert stop_token_ids(tok, None, "chat") == [eos, eot]
    extra = GenerationConfig(eos_token_id=[eos, 7])
    assert stop_token_ids(tok, extra, "plain") == [eos, 7]
    assert stop_token_ids(tok, GenerationConfig(eos_token_id=9), "chat") == [eos, 9, eot]


def test_chat_model_config_rules():
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import check_chat_task

    cfg = compose(["task=chain_sum_chat"])
    assert cfg.rollout.max_new_tokens == 32  # the task preset sizes its rollouts
    check_chat_task(cfg)
    cfg.rollout.max_new_tokens = 8
    with pytest.raises(ConfigError, match=r"^rollout\.max_new_tokens=8 cuts most chat answers"):
        check_chat_task(cfg)
    cfg = compose(["task=chain_sum_chat", "eval.max_new_tokens=12"])
    with pytest.raises(ConfigError, match=r"^eval\.max_new_tokens=12"):
        check_chat_task(cfg)
    cfg = compose(["task=basic_arithmetic"])
    cfg.model.prompt_format = "chat"  # a chat model on the compact task: the failure this rule prevents
    with pytest.raises(ConfigError, match=r"^task\.prompt_format=compact gives a chat model"):
        check_chat_task(cfg)
    cfg = compose(["task=basic_arithmetic", "task.prompt_format=native"])
    cfg.model.prompt_format = "chat"
    with pytest.raises(ConfigError, match=r"^task\.verifier=exact"):
        check_chat_task(cfg)


def test_chat_model_presets_compose_their_chat_task():
    from rlvr_scaling.cli.compose import compose

    for model in ("smollm2_135m", "qwen2.5_1.5b_instruct"):
        cfg = compose([f"model={model}"])
        assert (cfg.task.name, cfg.task.prompt_format, cfg.task.verifier) == (
            "chain_sum_chat",
            "chat",
            "answer",
        )
        assert cfg.rollout.max_new_tokens == 32
    cfg = compose(["model=smollm2_135m", "rollout.max_new_tokens=24", "eval.samples=2"])
    assert cfg.rollout.max_new_tokens == 24 and cfg.eval.samples == 2  # the command line wins
    assert (cfg.rollout.prompts_per_rollout, cfg.rollout.group_size, cfg.optim.steps_per_rollout) == (4, 4, 2)
    # noise at theta_old within the budget; curvature and Adam noise off (their measured costs: docs/real_model.md)
    assert cfg.noise.at_theta_old and cfg.noise.at_theta_old_every_rollouts is None
    assert cfg.noise.curvature_every_rollouts == 0 and not cfg.noise.adam_noise
    assert compose([]).task.prompt_format == "compact"  # the embedded default keeps its compact task
