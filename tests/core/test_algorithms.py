"""Invariants of the algorithm core: baselines, loss, learning-rate rule, noise estimators."""

import math

import pytest
import torch

from rlvr_scaling.algorithms.baselines import AdvantageInputs, GRPOParams, RLOOParams, compute_advantages
from rlvr_scaling.algorithms.loss import LossBatch, LossConfig, policy_loss, token_weights
from rlvr_scaling.algorithms.lr_rules import PowerLRParams, build_lr_rule


def _inputs(rewards, groups):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.tensor(groups)
    return AdvantageInputs(rewards=r, group=g, n_groups=int(g.max()) + 1)


def test_grpo_matches_loop_reference_with_unequal_groups():
    rewards = [1, 0, 0, 1, 1, 0.5, 0, 1, 1]
    groups = [0, 0, 0, 0, 1, 1, 2, 2, 2]
    adv = compute_advantages(GRPOParams(eps=1e-6), _inputs(rewards, groups))
    for q in set(groups):
        rs = torch.tensor([r for r, g in zip(rewards, groups) if g == q], dtype=torch.float64)
        expect = (rs - rs.mean()) / (rs.std() + 1e-6)
        got = adv[torch.tensor(groups) == q]
        torch.testing.assert_close(got, expect)


def test_grpo_scale_options():
    inp = _inputs([1, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    none = compute_advantages(GRPOParams(scale="none"), inp)
    torch.testing.assert_close(
        none, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75], dtype=torch.float64)
    )
    batch = compute_advantages(GRPOParams(scale="batch_std", eps=0.0), inp)
    torch.testing.assert_close(batch, none / inp.rewards.std())


def test_rloo_sums_to_zero_per_group_and_matches_definition():
    rewards = [1, 0, 0, 1, 0.3, 0.9, 0.2]
    groups = [0, 0, 0, 0, 1, 1, 1]
    adv = compute_advantages(RLOOParams(), _inputs(rewards, groups))
    g = torch.tensor(groups)
    for q in (0, 1):
        assert abs(float(adv[g == q].sum())) < 1e-12
    # A_0 = r_0 - mean(r_1, r_2, r_3)
    assert math.isclose(float(adv[0]), 1 - (0 + 0 + 1) / 3)


@pytest.mark.parametrize(
    "params", [GRPOParams(), GRPOParams(scale="batch_std"), GRPOParams(scale="none"), RLOOParams()]
)
def test_identical_rewards_give_zero_advantage(params):
    adv = compute_advantages(params, _inputs([1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]))
    assert torch.all(adv == 0)


def test_unscorable_rewards_are_excluded():
    adv = compute_advantages(GRPOParams(), _inputs([1, float("nan"), 0, 0], [0, 0, 0, 0]))
    assert adv[1] == 0
    ref = compute_advantages(GRPOParams(), _inputs([1, 0, 0], [0, 0, 0]))
    torch.testing.assert_close(adv[[0, 2, 3]], ref)


def test_power_rule_returns_ref_lr_at_ref_and_scales_as_sqrt():
    p = PowerLRParams(ref_lr=1e-6, ref_responses=32, power=0.5)
    assert build_lr_rule(p, 32).lr() == pytest.approx(1e-6)
    for b in (8, 64, 128, 1024):
        assert build_lr_rule(p, b).lr() == pytest.approx(1e-6 * math.sqrt(b / 32))
    assert build_lr_rule(PowerLRParams(ref_lr=1e-6, power=1.0), 128).lr() == pytest.approx(4e-6)
    assert build_lr_rule(PowerLRParams(ref_lr=1e-6, power=0.0), 128).lr() == pytest.approx(1e-6)


def test_token_weights_sum_to_one_for_mean_aggregations():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    assert float(token_weights(mask, "token_mean", 4).sum()) == pytest.approx(1.0)
    assert float(token_weights(mask, "sequence_mean", 4).sum()) == pytest.approx(1.0)
    torch.testing.assert_close(token_weights(mask, "constant", 4), mask.float() / 12)


def test_loss_without_clip_at_ratio_one_is_reinforce():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    logp = torch.log_softmax(logits, -1)[:, :4]
    adv = torch.tensor([1.0, -0.5, 0.0])
    w = token_weights(torch.ones(3, 4, dtype=torch.bool), "token_mean", 4)
    loss, _ = policy_loss(LossConfig(clip=None), LossBatch(logp, logp.detach(), adv, w))
    (g,) = torch.autograd.grad(loss, logits, retain_graph=True)
    reinforce = -(adv[:, None] * logp * w).sum()
    (g_ref,) = torch.autograd.grad(reinforce, logits)
    torch.testing.assert_close(g, g_ref)


def test_clip_zeroes_gradient_outside_trust_region():
    logp = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-1.0]])  # ratio e > 1.2
    w = torch.ones(1, 1)
    loss, st = policy_loss(LossConfig(clip=0.2), LossBatch(logp, old, torch.tensor([1.0]), w))
    (g,) = torch.autograd.grad(loss, logp)
    assert g.item() == 0.0 and st["clip_sum"].item() == st["tokens"].item() > 0
    loss, _ = policy_loss(LossConfig(clip=None), LossBatch(logp, old, torch.tensor([1.0]), w))
    (g,) = torch.autograd.grad(loss, logp)
    assert g.item() == pytest.approx(-math.e)


def test_noise_estimators_unbiased_on_synthetic_gradients():
    from rlvr_scaling.noise import NoiseEstimator

    torch.manual_seed(0)
    dim, b, k, trials = 50, 16, 8, 400
    mean = torch.randn(dim) * 0.3
    scales = torch.rand(dim) * 2  # per-sample covariance diag(scales^2)
    true_g2, true_tr = float(mean.pow(2).sum()), float(scales.pow(2).sum())
    p = torch.nn.Parameter(torch.zeros(dim))
    model = torch.nn.Module()
    model.p = p
    est = NoiseEstimator(model, steps_per_epoch=k)
    g2s, trs = [], []
    for _ in range(trials):
        est.start_rollout()
        for _ in range(k):
            samples = mean + torch.randn(b, dim) * scales
            p.grad = samples.mean(0)
            est.observe(b)
        out = est.finish_rollout()
        g2s.append(out["grad_norm_sq"])
        trs.append(out["trace_cov"])
    g2, tr = sum(g2s) / trials, sum(trs) / trials
    se_g2 = torch.tensor(g2s).std().item() / math.sqrt(trials)
    se_tr = torch.tensor(trs).std().item() / math.sqrt(trials)
    assert abs(g2 - true_g2) < 4 * se_g2, (g2, true_g2, se_g2)
    assert abs(tr - true_tr) < 4 * se_tr, (tr, true_tr, se_tr)
