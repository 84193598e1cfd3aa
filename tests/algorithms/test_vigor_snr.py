"""VIGOR spends exactly B, keeps the top-alpha prompts by reward variance, counts every response;
the SNR learning-rate rule follows its formula, smooths once per rollout and resumes exactly."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_scaling.algorithms.allocators import (
    VigorAllocator,
    VigorParams,
    initial_responses,
    reward_variance,
)
from rlvr_scaling.algorithms.lr_rules import SNRLRParams, build_lr_rule
from rlvr_scaling.engines.base import Generation
from rlvr_scaling.errors import ConfigError


def _fake_generation(prompt_ids: list[int], counts: list[int]) -> Generation:
    rows = [q for q, c in zip(prompt_ids, counts) for _ in range(c)]
    n = len(rows)
    width = 3 + (len(prompt_ids) % 2)  # parts of different widths exercise Generation.concat
    ids = torch.full((n, width), 7)
    mask = torch.ones((n, width), dtype=torch.long)
    mask[:, 0] = 0
    ids[:, 0] = 0
    comp = torch.zeros((n, width), dtype=torch.bool)
    comp[:, -1] = True
    return Generation(
        prompt_index=torch.tensor(rows, dtype=torch.long),
        input_ids=ids,
        attention_mask=mask,
        completion_mask=comp,
        behaviour_logprobs=torch.zeros((n, width)),
        completion_lengths=torch.ones(n, dtype=torch.long),
        finished=torch.ones(n, dtype=torch.bool),
        texts=["x"] * n,
        prompt_width=width - 1,
    )


class FakeRollout:
    """Prompt q answers correctly with probability p[q]; records every engine call."""

    def __init__(self, p: list[float], seed: int = 0):
        self.p = torch.tensor(p, dtype=torch.float64)
        self.rng = torch.Generator().manual_seed(seed)
        self.calls: list[tuple[list[int], list[int]]] = []

    def generate(self, prompt_ids, counts):
        assert all(c > 0 for c in counts)
        self.calls.append((list(prompt_ids), list(counts)))
        return _fake_generation(prompt_ids, counts)

    def score(self, gen):
        u = torch.rand(len(gen), generator=self.rng, dtype=torch.float64)
        return (u < self.p[gen.prompt_index]).double()


@pytest.mark.parametrize(
    "prompts,group,params",
    [
        (16, 8, VigorParams()),  # the default plan: 16x2, 8x4, 4x8, 2x16 = 128
        (16, 16, VigorParams()),
        (5, 8, VigorParams(rounds=2, keep_fraction=0.4, expansion=3.0)),
        (7, 4, VigorParams(initial_responses=3, rounds=5)),
        (3, 2, VigorParams()),  # budget below the round-0 demand: one round of G each
        (8, 8, VigorParams(rounds=0)),
    ],
)
def test_vigor_spends_exactly_the_budget_and_counts_every_response(prompts, group, params):
    fake = FakeRollout([0.5] * prompts)
    alloc = VigorAllocator(params).collect(prompts, group, fake.generate, fake.score)
    generated = sum(sum(c) for _, c in fake.calls)
    assert generated == prompts * group == len(alloc.generation) == alloc.rewards.numel()
    assert alloc.rounds == len(fake.calls)
    counts = torch.bincount(alloc.generation.prompt_index, minlength=prompts)
    hist = {int(k.rsplit("_", 1)[1]): v for k, v in alloc.stats.items() if k.startswith("alloc_hist_")}
    assert sum(hist.values()) == prompts and sum(m * c for m, c in hist.items()) == prompts * group
    assert alloc.stats["alloc_min"] == int(counts.min()) and alloc.stats["alloc_max"] == int(counts.max())


def test_vigor_default_plan_and_initial_responses():
    alloc = VigorAllocator(VigorParams())
    assert alloc.plan(16, 8) == [(16, 2), (8, 4), (4, 8), (2, 16)]
    assert initial_responses(VigorParams(), 8) == 2 and initial_responses(VigorParams(), 16) == 4
    assert initial_responses(VigorParams(), 4) == 2  # never fewer than two (a variance needs two)


def test_vigor_keeps_the_top_alpha_prompts_by_reward_variance():
    # prompts 0-3 always right or always wrong (variance 0); 4-7 are coin flips
    p = [0.0, 1.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    fake = FakeRollout(p, seed=3)
    alloc = VigorAllocator(VigorParams(initial_responses=4, rounds=1, keep_fraction=0.5)).collect(
        8, 8, fake.generate, fake.score
    )
    first_ids, _ = fake.calls[0]
    assert first_ids == list(range(8))
    # the round-1 prompts are the top half by the sample variance of the round-0 rewards
    rewards0 = alloc.rewards[:32]
    var = reward_variance(rewards0, alloc.generation.prompt_index[:32], 8)
    kept, counts = fake.calls[1]
    order = torch.argsort(-var, stable=True)[:4].tolist()
    assert sorted(kept) == sorted(order)
    assert sum(counts) == 64 - 32 and all(q >= 4 for q in kept if var[q] > 0)


def test_reward_variance_is_the_sample_variance():
    r = torch.tensor([1.0, 0.0, 1.0, float("nan"), 0.3], dtype=torch.float64)
    g = torch.tensor([0, 0, 0, 1, 1])
    var = reward_variance(r, g, 2)
    assert var[0].item() == pytest.approx(torch.tensor([1.0, 0.0, 1.0]).var().item())
    assert var[1].item() == 0.0  # one scorable reward


def test_vigor_params_validation():
    for bad, key in (
        (VigorParams(initial_responses=1), "initial_responses"),
        (VigorParams(keep_fraction=0), "keep_fraction"),
        (VigorParams(expansion=0.5), "expansion"),
    ):
        with pytest.raises(ConfigError, match=key):
            bad.validate("allocator")


# ---------------------------------------------------------------------------------------- SNR rule


def _noise(g2, tr):
    return {"grad_norm_sq": g2, "trace_cov": tr, "snr": math.nan, "b_noise": math.nan}


def test_snr_rule_formula_smoothing_and_warmup():
    p = SNRLRParams(
        ref_lr=1e-3, ref_responses=32, power=0.0, smoothing=0.5, min_factor=0.01, warmup_rollouts=1
    )
    rule = build_lr_rule(p, 128, 8)  # b = 16
    assert rule.base_lr == pytest.approx(1e-3)
    assert rule.lr({}) == pytest.approx(1e-5)  # no estimate yet: eta_max * min_factor
    # one estimate: |G|^2 = 0.5, tr Sigma = 8 -> SNR_b = 0.5 / (8 / 16) = 1 -> factor 1/2
    assert rule.lr(_noise(0.5, 8.0)) == pytest.approx(5e-4)
    assert rule.lr(_noise(0.5, 8.0)) == pytest.approx(5e-4)  # the same estimate is folded in once
    assert rule.seen == 1
    # second estimate (smoothing 0.5, bias-corrected): |G|^2 = (0.25*0.5 + 0.5*1.5)/0.75, tr = 8
    rule.lr(_noise(1.5, 8.0))
    g2 = (0.25 * 0.5 + 0.5 * 1.5) / 0.75
    snr = g2 / (8.0 / 16)
    assert rule.lr(None) == pytest.approx(1e-3 * snr / (1 + snr))
    assert rule.stats()["snr_smoothed"] == pytest.approx(snr)
    # negative signal estimates are clamped: the factor falls to its floor; NaN estimates are ignored
    low = build_lr_rule(p, 128, 8)
    low.lr(_noise(-1.0, 8.0))
    assert low.lr(_noise(math.nan, math.nan)) == pytest.approx(1e-5) and low.seen == 1


def test_snr_rule_grows_with_minibatch_size_and_saturates():
    p = SNRLRParams(ref_lr=1.0, smoothing=0.0, min_factor=1e-6, warmup_rollouts=1)
    lrs = []
    for b in (32, 128, 512, 1 << 20):
        rule = build_lr_rule(p, b, 8)
        lrs.append(rule.lr(_noise(0.01, 10.0)))
    assert lrs == sorted(lrs) and lrs[-1] == pytest.approx(1.0, rel=1e-2)
    assert lrs[1] / lrs[0] == pytest.approx(4.0, rel=0.05)  # noise-dominated: ~linear in B


def test_snr_rule_state_round_trip_is_exact():
    import json

    p = SNRLRParams(ref_lr=1e-3, smoothing=0.9)
    a, b = build_lr_rule(p, 128, 8), build_lr_rule(p, 128, 8)
    stream = [_noise(0.1 * i, 5.0 + i) for i in range(1, 6)]
    for s in stream[:3]:
        a.lr(s)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    a.lr(stream[2])
    b.lr(stream[2])  # the estimate the checkpointed rule already saw is not folded in twice
    for s in stream[3:]:
        assert a.lr(s) == b.lr(s)


def test_snr_rule_checks_at_startup():
    with pytest.raises(ConfigError, match="steps_per_rollout"):
        build_lr_rule(SNRLRParams(), 128, 1)
    build_lr_rule(SNRLRParams(source="per_sample"), 128, 1)
    for bad, key in (
        (SNRLRParams(source="x"), "lr.source"),
        (SNRLRParams(min_factor=0), "lr.min_factor"),
        (SNRLRParams(smoothing=1.0), "lr.smoothing"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            bad.validate("lr")
