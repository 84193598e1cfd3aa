"""Mixed precision (``model.dtype=bfloat16`` with fp32 master weights): the same K optimizer steps as in
fp32 up to bf16 rounding of the forward and backward passes; pure bf16 (``model.master_weights=false``,
the old behaviour) rounds small AdamW steps away. See rlvr_scaling/models.py (Precision)."""

from __future__ import annotations

import copy

import pytest
import torch

from rlvr_scaling.config import derive
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.models import ModelConfig, compute_dtype, load_hf, precision_of
from rlvr_scaling.run import build_components
from rlvr_scaling.trainer import Trainer
from tests.conftest import tiny_config

LR = 3e-6  # the learning rate of the issue's check: steps far below bf16's resolution at |w| ~ 0.02


def _cfg(cache_dir, dtype: str, master: bool):
    cfg = tiny_config(cache_dir)
    cfg.model.dtype, cfg.model.master_weights = dtype, master
    cfg.lr.ref_lr = LR
    cfg.optim.steps_per_rollout = 4
    cfg.optim.skip_zero_advantage = False
    return cfg


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


@pytest.fixture(scope="module")
def rollout(cache_dir):
    """One rollout sampled by the fp32 model, with fixed advantages: every precision trains on it."""
    from rlvr_scaling.engines.base import SamplingParams

    cfg = _cfg(cache_dir, "float32", True)
    comps = build_components(cfg, log=lambda *_: None)
    prompts = [comps.task.train_example(i).prompt for i in range(cfg.rollout.prompts_per_rollout)]
    g = torch.Generator().manual_seed(0)
    gen = comps.engine.generate(
        prompts, [cfg.rollout.group_size] * len(prompts), SamplingParams(cfg.rollout.max_new_tokens), g
    )
    adv = torch.randn(len(gen), generator=g)
    return gen, adv


def _delta(cache_dir, dtype: str, master: bool, rollout):
    """Parameters after K steps minus the parameters before, and the trainer (for dtype checks)."""
    cfg = _cfg(cache_dir, dtype, master)
    comps = build_components(cfg, log=lambda *_: None)
    run_dir = cache_dir / f"run-{dtype}-{master}"
    run_dir.mkdir(exist_ok=True)
    trainer = Trainer(cfg, derive(cfg), run_dir, comps, log=lambda *_: None)
    gen, adv = rollout
    old, _ = trainer.logprobs.logprobs(trainer.model, gen)  # pi_old as this precision computes it
    start = _flat(trainer.model)
    plan = trainer.optim.plan(len(gen), adv, torch.Generator().manual_seed(1))
    trainer.optim.run(gen, adv, old, None, plan)
    return _flat(trainer.model) - start, trainer


def test_bf16_with_master_weights_follows_fp32_and_pure_bf16_loses_the_updates(cache_dir, rollout):
    ref, _ = _delta(cache_dir, "float32", True, rollout)
    mixed, mixed_trainer = _delta(cache_dir, "bfloat16", True, rollout)
    pure, pure_trainer = _delta(cache_dir, "bfloat16", False, rollout)
    rel = lambda d: float((d - ref).norm() / ref.norm())  # noqa: E731
    changed = lambda d: float((d != 0).float().mean())  # noqa: E731
    cos = float(torch.nn.functional.cosine_similarity(mixed, ref, dim=0))
    print(
        f"\n[precision] K=4 AdamW steps at lr {LR:g}: |update| fp32 {ref.norm():.3e}; "
        f"bf16+master: rel. error {rel(mixed):.3f}, cosine {cos:.4f}, changed {changed(mixed):.3f}; "
        f"pure bf16: rel. error {rel(pure):.3f}, changed {changed(pure):.3f}"
    )
    assert changed(ref) > 0.99  # fp32: every weight moves
    # bf16 compute: the per-step update is AdamW's ~lr * sign(g) with g computed in bf16; coordinates
    # whose gradient is at the level of bf16 rounding can take the other sign, nothing more
    assert changed(mixed) > 0.99
    assert cos > 0.99 and rel(mixed) < 0.1  # measured: 0.9997, 0.026
    # pure bf16: most steps are below half a bf16 ulp of the weight and round away
    assert changed(pure) < 0.1  # measured: 0.024
    assert rel(pure) > 0.8
    # where the state lives: fp32 master weights and AdamW moments; bf16 compute
    m = mixed_trainer.model
    assert all(p.dtype == torch.float32 for p in m.parameters())
    assert compute_dtype(m) == torch.bfloat16
    states = [s for st in mixed_trainer.optim.optimizer.state.values() for s in st.values() if s.dim() > 0]
    assert states and all(s.dtype == torch.float32 for s in states)
    assert all(p.dtype == torch.bfloat16 for p in pure_trainer.model.parameters())


def test_autocast_survives_deepcopy_and_keeps_the_forward_signature(cache_dir):
    import inspect

    cfg = _cfg(cache_dir, "bfloat16", True)
    comps = build_components(cfg, log=lambda *_: None)
    model = comps.model
    copied = copy.deepcopy(model)
    ids = torch.tensor([[5, 6, 7, 8]])
    for m in (model, copied):
        assert m.model.embed_tokens.weight.dtype == torch.float32
        assert m(input_ids=ids).logits.dtype == torch.bfloat16  # lm_head ran under autocast
    # the copy is its own module (not a forward bound to the original)
    with torch.no_grad():
        copied.lm_head.weight.mul_(0.0)
    assert not torch.equal(model(input_ids=ids).logits, copied(input_ids=ids).logits)
    params = inspect.signature(type(model).forward).parameters
    assert "input_ids" in params and "attention_mask" in params
    assert type(model).__name__ == "LlamaForCausalLM"


def test_precision_config():
    assert precision_of(ModelConfig(dtype="bfloat16")).autocast
    assert precision_of(ModelConfig(dtype="bfloat16")).params == torch.float32
    assert not precision_of(ModelConfig(dtype="bfloat16", master_weights=False)).autocast
    assert not precision_of(ModelConfig(dtype="float32")).autocast
    with pytest.raises(ConfigError, match="model.dtype=float16 with model.master_weights=true"):
        ModelConfig(dtype="float16").validate()
    ModelConfig(dtype="float16", master_weights=False).validate()


def test_load_hf_precision(cache_dir):
    cfg = _cfg(cache_dir, "float32", True)
    comps = build_components(cfg, log=lambda *_: None)
    model, _ = load_hf(comps.model_dir, "bfloat16", torch.device("cpu"), master_weights=True)
    assert next(model.parameters()).dtype == torch.float32 and compute_dtype(model) == torch.bfloat16
    model, _ = load_hf(comps.model_dir, "bfloat16", torch.device("cpu"))
    assert next(model.parameters()).dtype == torch.bfloat16 and compute_dtype(model) == torch.bfloat16


def test_fsdp_mixed_precision_computes_what_its_full_copy_computes(cache_dir, monkeypatch):
    """FSDP2 with a MixedPrecisionPolicy (one gloo process): fp32 sharded master weights and fp32
    gradients, bf16 compute; the full copy that generates and computes pi_old holds bf16 parameters
    (fp32 buffers) and computes exactly what the FSDP forward computes."""
    import socket

    from rlvr_scaling import distributed
    from rlvr_scaling.policy import completion_logprobs_packed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1").items():
        monkeypatch.setenv(key, value)
    comps = build_components(_cfg(cache_dir, "float32", True), log=lambda *_: None)
    model, _ = load_hf(comps.model_dir, "bfloat16", torch.device("cpu"), master_weights=True)
    env = distributed.init("cpu", "gloo", force=True)
    try:
        par = distributed.wrap(model, env, "fsdp", torch.device("cpu"))
        assert all(p.dtype == torch.bfloat16 for p in par.full_module.parameters())
        assert all(b.dtype == torch.float32 for b in par.full_module.buffers() if b.is_floating_point())
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(4, 60, (4, 12), generator=g)
        mask = torch.ones_like(ids)
        train = completion_logprobs_packed(par.train_module, ids, mask, 6, 1.0)
        with torch.no_grad():
            full = completion_logprobs_packed(par.full_module, ids, mask, 6, 1.0)
        assert torch.equal(train.detach(), full)
        train.sum().backward()
        for p in par.train_module.parameters():
            assert p.dtype == torch.float32 and p.grad.dtype == torch.float32
        # refresh_full casts the fp32 shards into the bf16 copy
        with torch.no_grad():
            for p in par.train_module.parameters():
                p.add_(0.01)
        par.refresh_full()
        name, p = next(iter(par.train_module.named_parameters()))
        torch.testing.assert_close(
            dict(par.full_module.named_parameters())[name], p.full_tensor().to(torch.bfloat16)
        )
    finally:
        distributed.shutdown()
