"""Exact per-sample gradient norms equal separate backward passes; the noise estimator is unbiased."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_scaling.engines.base import SamplingParams
from rlvr_scaling.per_sample import PerSampleGradients, logit_grad_norms, noise_from_norms
from rlvr_scaling.policy import completion_logprobs, trim_padding
from rlvr_scaling.run import build_components
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def rollout(cache_dir):
    comps = build_components(tiny_config(cache_dir), log=lambda *_: None)
    prompts = [comps.task.train_example(i).prompt for i in range(3)]
    gen = comps.engine.generate(prompts, [2, 1, 3], SamplingParams(4), torch.Generator().manual_seed(0))
    return comps, gen


def _separate(model, gen, coef, temperature=1.0):
    """Reference: one unpadded forward/backward pass per response."""
    params = [p for p in model.parameters() if p.requires_grad]
    norms, total = [], [torch.zeros_like(p) for p in params]
    for i in range(len(gen)):
        ids, mask, start = trim_padding(
            gen.input_ids[i : i + 1], gen.attention_mask[i : i + 1], gen.prompt_width
        )
        logp, _ = completion_logprobs(model, ids, mask, start, temperature)
        f = (coef[i : i + 1, : logp.shape[1]] * logp).sum()
        grads = torch.autograd.grad(f, params)
        norms.append(float(sum(g.double().pow(2).sum() for g in grads)))
        for t, g in zip(total, grads):
            t += g
    return torch.tensor(norms, dtype=torch.float64), total


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_exact_norms_equal_separate_backward_passes(rollout, temperature):
    comps, gen = rollout
    comp = gen.completion_mask[:, gen.prompt_width :]
    coef = torch.where(comp, torch.randn(comp.shape, generator=torch.Generator().manual_seed(1)), 0.0)
    coef[1] = 0.0  # a row with zero coefficients (zero advantage) has g_i = 0 and is skipped
    expect, expect_sum = _separate(comps.model, gen, coef, temperature)
    for method, chunk in (("auto", None), ("ghost", 2), ("direct", 4)):
        ps = PerSampleGradients(comps.model, linear_method=method)
        got = ps.compute(
            gen.input_ids, gen.attention_mask, gen.prompt_width, coef, temperature, comps.device, chunk
        )
        torch.testing.assert_close(got.norms_sq, expect, rtol=1e-4, atol=1e-9)
        for a, b in zip(got.grad_sum, expect_sum):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
        norms_only = ps.compute(
            gen.input_ids, gen.attention_mask, gen.prompt_width, coef, temperature, comps.device, chunk, False
        )
        torch.testing.assert_close(norms_only.norms_sq, expect, rtol=1e-4, atol=1e-9)
        assert norms_only.grad_sum == []
    assert expect[1] == 0 and expect[[0, 2, 3, 4, 5]].min() > 0


def test_exact_norms_cover_tied_embeddings_and_norm_layers(rollout):
    comps, _ = rollout
    model = comps.model
    assert model.lm_head.weight is model.model.embed_tokens.weight  # the embedded model ties them
    kinds = {kind for _, kind in PerSampleGradients(model).modules}
    assert kinds == {"linear", "embedding", "elementwise"}


def test_unsupported_module_fails_at_construction():
    from rlvr_scaling.errors import ConfigError

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Conv1d(3, 3, 1))
    with pytest.raises(ConfigError, match="Conv1d"):
        PerSampleGradients(model)


def test_logit_proxy_matches_definition(rollout):
    comps, gen = rollout
    comp = gen.completion_mask[:, gen.prompt_width :]
    got = logit_grad_norms(
        comps.model, gen.input_ids, gen.attention_mask, comp, gen.prompt_width, 0.7, comps.device
    )
    for i in range(len(gen)):
        keep = gen.attention_mask[i].bool()
        ids = gen.input_ids[i][keep]
        n_prompt = int(gen.attention_mask[i, : gen.prompt_width].sum())
        with torch.no_grad():
            logits = comps.model(input_ids=ids[None]).logits[0, n_prompt - 1 : -1] / 0.7
        probs = torch.softmax(logits.float(), -1)
        onehot = torch.nn.functional.one_hot(ids[n_prompt:], probs.shape[-1]).float()
        expect = float((onehot - probs).pow(2).sum()) / 0.7**2
        assert got[i].item() == pytest.approx(expect, rel=1e-4)


def test_per_sample_noise_estimator_unbiased_on_synthetic_gradients():
    torch.manual_seed(0)
    dim, n, trials, minibatch = 40, 32, 600, 8
    mean = torch.randn(dim) * 0.3
    scales = torch.rand(dim) * 2
    true_g2, true_tr = float(mean.pow(2).sum()), float(scales.pow(2).sum())
    g2s, trs = [], []
    for _ in range(trials):
        g = mean + torch.randn(n, dim) * scales
        out = noise_from_norms(g.double().pow(2).sum(1), float(g.sum(0).double().pow(2).sum()), minibatch)
        g2s.append(out["grad_norm_sq"])
        trs.append(out["trace_cov"])
    for vals, truth in ((g2s, true_g2), (trs, true_tr)):
        v = torch.tensor(vals, dtype=torch.float64)
        assert abs(float(v.mean()) - truth) < 4 * float(v.std()) / math.sqrt(trials), (float(v.mean()), truth)
    out = noise_from_norms(torch.ones(4), 16.0, 2)  # four identical unit gradients: no noise
    assert out["trace_cov"] == pytest.approx(0.0) and out["grad_norm_sq"] == pytest.approx(1.0)
