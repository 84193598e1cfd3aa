"""Generation-trainer mismatch statistics and truncated importance sampling (``loss.tis``): formulas
against plain loops, the loss weighting, the config rules, and a real bf16 run where the HF engine's
incremental decode and the trainer's full forward disagree (vLLM: tests/vllm/test_vllm_mismatch.py)."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from rlvr_scaling.algorithms.loss import LossBatch, LossConfig, policy_loss, token_weights
from rlvr_scaling.config import validate
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.logprobs import mismatch_sums, summarise, tis_weights
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def _random(seed=0, n=5, t=7):
    g = torch.Generator().manual_seed(seed)
    trainer = -torch.rand(n, t, generator=g) * 3
    engine = trainer + torch.randn(n, t, generator=g) * 0.6
    on = torch.rand(n, t, generator=g) > 0.3
    on[2] = False  # a row with no tokens (not recomputed)
    return trainer, engine, on


def test_mismatch_statistics_match_a_loop():
    trainer, engine, on = _random()
    stats = summarise(*_split(mismatch_sums(trainer, engine, on)))
    d = [float(trainer[i, t] - engine[i, t]) for i in range(5) for t in range(7) if on[i, t]]
    assert stats["rollout/mismatch_logp_abs_mean"] == pytest.approx(sum(map(abs, d)) / len(d))
    assert stats["rollout/mismatch_logp_abs_max"] == pytest.approx(max(map(abs, d)))
    outside = sum(1 for x in d if not 0.5 <= math.exp(x) <= 2.0)
    assert stats["rollout/mismatch_ratio_outside_frac"] == pytest.approx(outside / len(d))
    assert stats["rollout/mismatch_kl"] == pytest.approx(sum(math.exp(x) - 1 - x for x in d) / len(d))


def _split(sums):
    return {k: v for k, v in sums.items() if not k.endswith("_max")}, {
        k: v for k, v in sums.items() if k.endswith("_max")
    }


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_tis_weights_match_the_formula(level):
    old, engine, on = _random(1)
    cap = 1.5
    w, sums = tis_weights(old, engine, on, level, cap)
    stats = summarise(*_split(sums))
    expected = torch.ones_like(w)
    units, capped = [], 0
    for i in range(5):
        if level == "token":
            for t in range(7):
                if on[i, t]:
                    r = math.exp(float(old[i, t] - engine[i, t]))
                    expected[i, t] = min(r, cap)
                    units.append(min(r, cap))
                    capped += r > cap
        elif on[i].any():
            r = math.exp(sum(float(old[i, t] - engine[i, t]) for t in range(7) if on[i, t]))
            expected[i][on[i]] = min(r, cap)
            units.append(min(r, cap))
            capped += r > cap
    torch.testing.assert_close(w, expected)
    assert stats["rollout/tis_weight_mean"] == pytest.approx(sum(units) / len(units))
    assert stats["rollout/tis_capped_frac"] == pytest.approx(capped / len(units))
    assert 0 < capped < len(units)  # the draw exercises both sides of the cap


@pytest.mark.parametrize("clip", [0.2, None])
def test_is_weights_multiply_each_tokens_objective_loss(clip):
    """The gradient with weights w equals the sum over tokens of w_it * (the unweighted per-token
    loss's gradient); w = 1 is the unweighted loss; the KL term is not weighted."""
    g = torch.Generator().manual_seed(3)
    n, t = 4, 6
    base = -torch.rand(n, t, generator=g) - 0.1
    old = base + 0.1 * torch.randn(n, t, generator=g)
    ref = base + 0.1 * torch.randn(n, t, generator=g)
    mask = torch.rand(n, t, generator=g) > 0.2
    adv = torch.randn(n, generator=g)
    w = torch.rand(n, t, generator=g) * 2
    cfg = LossConfig(clip=clip, kl_coef=0.05)
    weights = token_weights(mask, "token_mean", t)

    def grad(is_weights, kl=True):
        logp = base.clone().requires_grad_(True)
        c = copy.copy(cfg)
        c.kl_coef = cfg.kl_coef if kl else 0.0
        loss, _ = policy_loss(c, LossBatch(logp, old, adv, weights, ref, is_weights))
        loss.backward()
        return logp.grad

    none, ones = grad(None), grad(torch.ones(n, t))
    torch.testing.assert_close(none, ones)
    kl_only = grad(None) - grad(None, kl=False)
    objective_only = grad(None, kl=False)
    torch.testing.assert_close(grad(w), w * objective_only + kl_only)


def test_tis_and_behaviour_config_rules(cache_dir):
    cfg = tiny_config(cache_dir, **{"loss.tis": "token", "optim.old_logprobs": "behaviour"})
    with pytest.raises(ConfigError, match="loss.tis=token"):
        validate(cfg)
    cfg = tiny_config(cache_dir, **{"rollout.engine": "vllm", "rollout.top_p": 0.9})
    cfg.optim.old_logprobs = "behaviour"
    with pytest.raises(ConfigError, match="optim.old_logprobs=behaviour with rollout.engine=vllm"):
        validate(cfg)
    cfg.optim.old_logprobs = "recompute"
    validate(cfg)  # recomputing pi_old is exact whatever vLLM reports
    cfg = tiny_config(cache_dir, **{"rollout.top_p": 0.9, "optim.old_logprobs": "behaviour"})
    validate(cfg)  # the HF engine reports softmax(logits / T) log-probs, top-p or not
    for bad, match in (("tis", "tokens"), ("tis_cap", 0.5)):
        cfg = tiny_config(cache_dir, **{f"loss.{bad}": match})
        with pytest.raises(ConfigError, match=f"loss.{bad}"):
            validate(cfg)


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("tis", ["token", "sequence"])
def test_runs_log_the_engine_mismatch_and_tis_weights(cache_dir, tmp_path, varied_rewards, tis):
    """pi_old recomputed: every rollout logs the mismatch and the TIS statistics. The HF engine samples
    with the trainer's own module, so its log-probs equal the recomputation: to float rounding in fp32,
    and to bf16 rounding in bf16 (its one-token decode steps and the recomputation's prompt-then-completion
    forward may round differently in bf16, by a few bf16 ulps of a log-prob; which tokens differ depends
    on the CPU's kernels (AVX2 or AVX-512): the real bf16 mismatch is vLLM's, tests/vllm)."""
    base = {
        "optim.old_logprobs": "recompute",
        "train.max_responses": 48,
        "loss.tis": tis,
        "model.embedded.hidden_size": 64,
        "model.embedded.intermediate_size": 128,
        "rollout.max_new_tokens": 8,
    }
    rows = {}
    for dtype in ("float32", "bfloat16"):
        cfg = tiny_config(cache_dir, **base, **{"model.dtype": dtype})
        assert train(cfg, tmp_path / dtype, log=lambda *_: None) == "completed"
        rows[dtype] = [r for r in _rows(tmp_path / dtype) if "train/reward_mean" in r]
    keys = (
        "rollout/mismatch_logp_abs_mean",
        "rollout/mismatch_logp_abs_max",
        "rollout/mismatch_ratio_outside_frac",
        "rollout/mismatch_kl",
        "rollout/tis_weight_mean",
        "rollout/tis_capped_frac",
    )
    tolerance = {"float32": 1e-4, "bfloat16": 5e-2}
    for dtype, rs in rows.items():
        assert len(rs) == 3
        for r in rs:
            assert all(k in r for k in keys), (dtype, sorted(r))
            assert r["rollout/mismatch_logp_abs_max"] >= r["rollout/mismatch_logp_abs_mean"] >= 0
            # fp32: float rounding; bf16: a few ulps (2^-8 relative) of log-probs of order 1
            assert r["rollout/mismatch_logp_abs_max"] < tolerance[dtype]
            assert r["rollout/mismatch_ratio_outside_frac"] == 0.0
            assert r["rollout/tis_weight_mean"] == pytest.approx(1.0, abs=tolerance[dtype])
    print(
        "\n[mismatch, HF engine] max |d| fp32 "
        f"{max(r['rollout/mismatch_logp_abs_max'] for r in rows['float32']):.2e}, bf16 "
        f"{max(r['rollout/mismatch_logp_abs_max'] for r in rows['bfloat16']):.2e}"
    )


def test_an_engine_with_other_weights_gives_exact_mismatch_and_tis_weights(cache_dir, tmp_path):
    """An engine that samples with other weights than the trainer's (here: the trainer's weights
    perturbed, as a stale or differently computed engine would be): the mismatch statistics and the
    TIS weights the loss receives are those of the recomputed and the engine's log-probs of the same
    tokens, min(exp(old - behaviour), cap)."""
    from rlvr_scaling.config import derive
    from rlvr_scaling.engines.base import SamplingParams
    from rlvr_scaling.engines.hf import HFEngine
    from rlvr_scaling.run import build_components
    from rlvr_scaling.trainer import Trainer

    cfg = tiny_config(cache_dir, **{"loss.tis": "token", "loss.tis_cap": 1.2})
    comps = build_components(cfg, log=lambda *_: None)
    other = copy.deepcopy(comps.model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(7)))
    comps.engine = HFEngine(other, comps.tokenizer, torch.device("cpu"))
    trainer = Trainer(cfg, derive(cfg), tmp_path, comps, log=lambda *_: None)
    assert not trainer.logprobs.behaviour  # auto recomputes when TIS is on
    prompts = [comps.task.train_example(i).prompt for i in range(4)]
    gen = comps.engine.generate(prompts, [4] * 4, SamplingParams(4), torch.Generator().manual_seed(0))
    adv = torch.ones(len(gen))
    plan = trainer.optim.plan(len(gen), adv, torch.Generator().manual_seed(1))
    logps = trainer.logprobs.compute(gen, plan)
    comp = gen.completion_mask[:, gen.prompt_width :]
    beh = gen.behaviour_logprobs[:, gen.prompt_width :]
    d = (logps.old - beh)[comp].double()
    torch.testing.assert_close(
        logps.is_weights, torch.where(comp, torch.exp(logps.old - beh).clamp(max=1.2), 1.0)
    )
    s = logps.stats
    assert s["rollout/mismatch_logp_abs_mean"] == pytest.approx(float(d.abs().mean()))
    assert s["rollout/mismatch_logp_abs_max"] == pytest.approx(float(d.abs().max()))
    assert s["rollout/tis_capped_frac"] == pytest.approx(float((d > math.log(1.2)).double().mean()))
    assert 0 < s["rollout/tis_capped_frac"] < 1 and s["rollout/mismatch_logp_abs_mean"] > 1e-3
