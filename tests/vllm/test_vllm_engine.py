"""The vLLM engine on a real (CPU) engine: the Generation contract, equivalence with the trainer after
an in-place weight push, seeds, prompt formats, and the in-process side effects it must undo."""

from __future__ import annotations

import copy
import shutil

import pytest
import torch
from vllm_utils import pytestmark  # noqa: F401  (marks every test `vllm`; skips where vLLM is missing)

from rlvr_scaling.engines.base import Generation, SamplingParams
from rlvr_scaling.engines.hf import HFEngine
from rlvr_scaling.models import encode_prompt, load_hf
from rlvr_scaling.policy import completion_logprobs, trim_padding

CPU = torch.device("cpu")
PROMPTS = ["3+4=", "12+5=", "7+1=", "9+9=", "5+0=", "2+8="]


@pytest.fixture(scope="module")
def trainer_model(tiny_model_dir):
    model, tokenizer = load_hf(tiny_model_dir, "float32", CPU)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def engine(tiny_model_dir, trainer_model):
    from rlvr_scaling.engines.vllm import VLLMEngine
    from rlvr_scaling.engines.vllm_config import VLLMConfig

    eng = VLLMEngine(tiny_model_dir, trainer_model[1], VLLMConfig(), dtype="float32", seed=0)
    yield eng
    eng.close()


def _rng(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _trainer_logprobs(model, gen: Generation, temperature: float) -> torch.Tensor:
    ids, mask, start = trim_padding(gen.input_ids, gen.attention_mask, gen.prompt_width)
    with torch.no_grad():
        logp, _ = completion_logprobs(model, ids, mask, start, temperature)
    out = torch.zeros_like(gen.behaviour_logprobs[:, gen.prompt_width :])
    out[:, : logp.shape[1]] = logp
    return out


def _max_logprob_diff(model, gen: Generation, temperature: float) -> float:
    comp = gen.completion_mask[:, gen.prompt_width :]
    got = gen.behaviour_logprobs[:, gen.prompt_width :]
    return float((_trainer_logprobs(model, gen, temperature) - got)[comp].abs().max())


def _completions(gen: Generation) -> list[list[int]]:
    lp = gen.prompt_width
    return [gen.input_ids[r, lp : lp + int(gen.completion_lengths[r])].tolist() for r in range(len(gen))]


def test_generation_contract_matches_the_hf_engine(engine, trainer_model):
    model, tokenizer = trainer_model
    counts = [3, 0, 2, 1]
    prompts = PROMPTS[:4]
    gen = engine.generate(prompts, counts, SamplingParams(8), _rng(0))
    ref = HFEngine(model, tokenizer, CPU).generate(prompts, counts, SamplingParams(8), _rng(0))
    assert gen.prompt_index.tolist() == ref.prompt_index.tolist() == [0, 0, 0, 2, 2, 3]
    lp = gen.prompt_width
    assert lp == ref.prompt_width
    # the same prompt ids, left-padded the same way
    assert torch.equal(gen.input_ids[:, :lp], ref.input_ids[:, :lp])
    assert torch.equal(gen.attention_mask[:, :lp], ref.attention_mask[:, :lp])
    eos = tokenizer.eos_token_id
    for r, tokens in enumerate(_completions(gen)):
        n = int(gen.completion_lengths[r])
        assert 1 <= n <= 8 and len(tokens) == n
        assert gen.completion_mask[r].nonzero().squeeze(-1).tolist() == list(range(lp, lp + n))
        assert gen.attention_mask[r, lp:].sum() == n and not gen.attention_mask[r, lp + n :].any()
        assert bool(gen.finished[r]) == (tokens[-1] == eos)  # EOS is part of the completion
        assert eos not in tokens[:-1]
        text_tokens = tokens[:-1] if gen.finished[r] else tokens
        assert gen.texts[r] == tokenizer.decode(text_tokens, skip_special_tokens=True)
    assert (gen.behaviour_logprobs[~gen.completion_mask] == 0).all()
    assert (gen.behaviour_logprobs[gen.completion_mask] < 0).all()
    # incremental requests (adaptive allocators) stack like the HF engine's
    more = engine.generate(PROMPTS[4:], [2, 1], SamplingParams(8), _rng(1))
    both = Generation.concat([gen, more], tokenizer.pad_token_id)
    assert len(both) == len(gen) + 3 and both.completion_lengths.sum() == gen.num_tokens + more.num_tokens


def test_vllm_generation_work_is_charged_like_the_hf_engine(engine, tiny_model_dir):
    """The FLOPs clock sees no vLLM forward: the engine reports its work, with the formula the HF
    engine's forwards are metered by (one prefill per distinct prompt, c - 1 decoding steps). Runs
    before any second engine of this module is closed: closing an in-process engine tears down vLLM's
    process-global groups, under every other live engine of the process."""
    from rlvr_scaling.accounting import FlopMeter
    from tests.core.test_flops import Hand

    model, _ = load_hf(tiny_model_dir, "float32", CPU)
    meter = FlopMeter(model)
    engine.attach_meter(meter)
    try:
        meter.start()
        gen = engine.generate(PROMPTS[:3], [3, 2, 4], SamplingParams(8), _rng(4))
        charged = meter.stop()
    finally:
        engine.meter = None
    p = gen.attention_mask[:, : gen.prompt_width].sum(1).tolist()
    c = gen.completion_lengths.tolist()
    assert charged == Hand(model).generation(p, c, gen.prompt_index.tolist())


def test_after_a_weight_push_logprobs_and_greedy_outputs_match_the_trainer(engine, trainer_model):
    """fp32: the engine's log-probs of its sampled tokens equal the trainer's HF log-probs (<= 1e-3)
    after K optimizer steps and one in-place push; greedy outputs are token-for-token identical."""
    model, tokenizer = copy.deepcopy(trainer_model[0]), trainer_model[1]
    params = SamplingParams(8)
    before = engine.generate(PROMPTS, [4] * len(PROMPTS), params, _rng(0))
    assert _max_logprob_diff(model, before, 1.0) <= 1e-3  # same weights to start with
    # K = 4 AdamW steps on a REINFORCE-style loss over the engine's own samples
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    adv = torch.randn(len(before), generator=_rng(3))
    model.train()
    for _ in range(4):
        opt.zero_grad()
        logp = _trainer_logprobs_grad(model, before)
        (-(adv[:, None] * logp).sum() / before.num_tokens).backward()
        opt.step()
    model.eval()
    stale = _max_logprob_diff(model, engine.generate(PROMPTS, [4] * 6, params, _rng(1)), 1.0)
    assert stale > 1e-2, "the optimizer steps should have changed the policy"
    engine.sync_weights(model)
    push_s = engine.sync.last_s
    diffs = {}
    for temperature in (1.0, 0.7):
        gen = engine.generate(PROMPTS, [4] * 6, SamplingParams(8, temperature=temperature), _rng(2))
        diffs[temperature] = _max_logprob_diff(model, gen, temperature)
    greedy = SamplingParams(8, greedy=True)
    got = engine.generate(PROMPTS, [1] * 6, greedy, _rng(0))
    ref = HFEngine(model, tokenizer, CPU).generate(PROMPTS, [1] * 6, greedy, _rng(0))
    print(f"\n[vllm fp32] stale max|dlogp| {stale:.3g}; after push {diffs}; push {push_s * 1e3:.1f} ms")
    assert max(diffs.values()) <= 1e-3, diffs
    assert _completions(got) == _completions(ref)
    assert got.texts == ref.texts
    assert _max_logprob_diff(model, got, 1.0) <= 1e-3  # greedy log-probs are reported at T = 1


def _trainer_logprobs_grad(model, gen: Generation) -> torch.Tensor:
    ids, mask, start = trim_padding(gen.input_ids, gen.attention_mask, gen.prompt_width)
    logp, _ = completion_logprobs(model, ids, mask, start, 1.0)
    comp = gen.completion_mask[:, gen.prompt_width :][:, : logp.shape[1]]
    return logp * comp


def test_request_seeding_is_reproducible_and_independent_of_batching(engine):
    params = SamplingParams(8)
    a = engine.generate(PROMPTS[:3], [2, 3, 2], params, _rng(5))
    b = engine.generate(PROMPTS[:3], [2, 3, 2], params, _rng(5))
    assert _completions(a) == _completions(b)
    # the same responses when the rollout arrives as incremental requests from one generator
    g = _rng(5)
    parts = [engine.generate([p], [c], params, g) for p, c in zip(PROMPTS[:3], [2, 3, 2])]
    assert [t for part in parts for t in _completions(part)] == _completions(a)
    c = engine.generate(PROMPTS[:3], [2, 3, 2], params, _rng(6))
    assert _completions(c) != _completions(a)


def test_seeded_requests_whose_prompts_overflow_one_scheduler_step(engine):
    """More prompt tokens in one call than one scheduler step takes (vLLM's CPU default is 4,096
    tokens): with chunked prefill a seeded request's prefill is cut in two and vLLM's CPU sampler fails
    (``RuntimeError: CPU Generator does not use offset``). The engine turns chunked prefill off for
    seeded requests on CPU; the samples are those of the same requests sent in small calls."""
    prompts = [f"{i % 10}+" + "+".join(str((i + j) % 10) for j in range(19)) + "=" for i in range(128)]
    encoded = engine.encode(prompts)
    assert sum(len(e) for e in encoded) > 4096  # one call's prefill overflows a 4,096-token step
    params = SamplingParams(4)
    whole = engine.generate(prompts, [1] * len(prompts), params, _rng(11))
    g = _rng(11)
    parts = [engine.generate(prompts[i : i + 16], [1] * 16, params, g) for i in range(0, len(prompts), 16)]
    assert [t for part in parts for t in _completions(part)] == _completions(whole)
    assert int(whole.completion_lengths.sum()) > 0


def test_chat_prompt_format_gives_both_engines_the_same_ids(engine, trainer_model, tmp_path):
    model, tokenizer = trainer_model
    chat_tok = copy.deepcopy(tokenizer)
    chat_tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<a>{% endif %}"
    )
    expected = chat_tok.encode("<user>3+4=\n<a>", add_special_tokens=False)
    assert encode_prompt(chat_tok, "3+4=", "chat") == expected
    saved = engine.tokenizer, engine.prompt_format
    engine.tokenizer, engine.prompt_format = chat_tok, "chat"
    try:
        gen = engine.generate(["3+4="], [2], SamplingParams(4), _rng(0))
    finally:
        engine.tokenizer, engine.prompt_format = saved
    ref = HFEngine(model, chat_tok, CPU, prompt_format="chat").generate(
        ["3+4="], [2], SamplingParams(4), _rng(0)
    )
    lp = gen.prompt_width
    assert lp == ref.prompt_width == len(expected)
    assert gen.input_ids[0, :lp].tolist() == ref.input_ids[0, :lp].tolist() == expected


def test_call_seeding_bf16_threads_and_global_rng(tiny_model_dir, trainer_model):
    """A second engine in the same process: seeding=call is reproducible; bf16 log-probs stay close to
    the fp32 trainer's; start-up leaves torch's thread count and set_num_threads alone; generation
    leaves the process-global RNG alone."""
    from rlvr_scaling.engines.vllm import VLLMEngine
    from rlvr_scaling.engines.vllm_config import VLLMConfig

    model, tokenizer = trainer_model
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        eng = VLLMEngine(tiny_model_dir, tokenizer, VLLMConfig(seeding="call"), dtype="bfloat16", seed=0)
        assert torch.set_num_threads is set_threads
        assert torch.get_num_threads() == 2
    finally:
        set_threads(threads)
    try:
        state = torch.get_rng_state()
        a = eng.generate(PROMPTS, [4] * 6, SamplingParams(8), _rng(0))
        assert torch.equal(torch.get_rng_state(), state)
        b = eng.generate(PROMPTS, [4] * 6, SamplingParams(8), _rng(0))
        assert _completions(a) == _completions(b)
        eng.sync_weights(model)
        gen = eng.generate(PROMPTS, [4] * 6, SamplingParams(8), _rng(1))
        comp = gen.completion_mask[:, gen.prompt_width :]
        err = (_trainer_logprobs(model, gen, 1.0) - gen.behaviour_logprobs[:, gen.prompt_width :])[comp].abs()
        print(
            f"\n[vllm bf16] mean |dlogp| {err.mean():.3g}, max {err.max():.3g}; push {eng.sync.last_s * 1e3:.1f} ms"
        )
        assert err.mean() < 0.05
    finally:
        eng.close()


@pytest.mark.slow
def test_multiprocess_engine_receives_serialized_weights(tiny_model_dir, trainer_model, tmp_path):
    """in_process=false: tensors cannot cross vLLM's RPC as tensors; the state dict travels as
    safetensors bytes to the worker extension, which reloads it in place."""
    from rlvr_scaling.engines.vllm import VLLMEngine
    from rlvr_scaling.engines.vllm_config import VLLMConfig

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    model, tokenizer = copy.deepcopy(trainer_model[0]), trainer_model[1]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=_rng(7)))
    eng = VLLMEngine(str(model_dir), tokenizer, VLLMConfig(in_process=False), dtype="float32", seed=0)
    try:
        assert (
            _max_logprob_diff(model, eng.generate(PROMPTS, [2] * 6, SamplingParams(8), _rng(0)), 1.0) > 1e-2
        )
        eng.sync_weights(model)
        assert (
            _max_logprob_diff(model, eng.generate(PROMPTS, [2] * 6, SamplingParams(8), _rng(0)), 1.0) <= 1e-3
        )
    finally:
        eng.close()


def test_bf16_engine_in_a_fresh_process_asks_for_amx(tiny_model_dir):
    """vLLM's CPU attention runs its AMX kernel for bfloat16 where the CPU reports AMX tiles, without
    asking Linux for the permission to use them: in a process where nothing else has (no oneDNN
    bfloat16 matmul yet), the first tile instruction was SIGILL. The engine asks before building vLLM;
    a fresh interpreter builds a bf16 engine and generates, and exits cleanly on any CPU."""
    import subprocess
    import sys

    script = f"""
import torch
from rlvr_scaling.engines.base import SamplingParams
from rlvr_scaling.engines.vllm import VLLMEngine
from rlvr_scaling.engines.vllm_config import VLLMConfig
from rlvr_scaling.models import load_hf
_, tok = load_hf({tiny_model_dir!r}, "float32", torch.device("cpu"))
eng = VLLMEngine({tiny_model_dir!r}, tok, VLLMConfig(), dtype="bfloat16", seed=0)
gen = eng.generate({PROMPTS!r}, [4] * 6, SamplingParams(8), torch.Generator().manual_seed(0))
assert int(gen.completion_lengths.sum()) > 0
eng.close()
print("amx", torch.cpu._is_amx_tile_supported())
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip().splitlines()[-1] in ("amx True", "amx False")
