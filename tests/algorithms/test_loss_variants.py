"""GSPO, GSPO-token, CISPO and dual-clip against references written per sequence from the papers'
formulas (plain Python loops over responses and tokens, independent of the vectorised objectives)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_scaling.algorithms.loss import OBJECTIVES, LossBatch, LossConfig, policy_loss, token_weights
from rlvr_scaling.errors import ConfigError

AGGREGATIONS = ("token_mean", "sequence_mean", "constant")
CONSTANT = 6  # L of the constant normaliser in these tests


def _batch(seed=0, n=6, t=6, vocab=7, spread=0.3, lengths=None):
    """Per-token log-probs of a toy policy (leaf logits), a perturbed pi_old, mixed-sign advantages,
    and completion masks of unequal lengths."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, t, vocab, generator=g, requires_grad=True)
    tokens = torch.randint(vocab, (n, t), generator=g)
    logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    old = logp.detach() + spread * torch.randn(n, t, generator=g)
    adv = torch.randn(n, generator=g)
    lengths = lengths or [1 + (i * 5) % t for i in range(n)]
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    return logits, logp, old, adv, mask


def _weights_loop(mask, aggregation):
    """w_it from the definitions: 1/N_tokens, 1/(n |y_i|), 1/(n L)."""
    n = mask.shape[0]
    total = int(mask.sum())
    w = torch.zeros(mask.shape)
    for i in range(n):
        length = int(mask[i].sum())
        for t in range(length):
            w[i, t] = {
                "token_mean": 1 / total,
                "sequence_mean": 1 / (n * length),
                "constant": 1 / (n * CONSTANT),
            }[aggregation]
    return w


def _loss(cfg, logp, old, adv, mask):
    w = token_weights(mask, cfg.aggregation, CONSTANT)
    return policy_loss(cfg, LossBatch(logp, old, adv, w))


def _grad(value, logits):
    (g,) = torch.autograd.grad(value, logits, retain_graph=True)
    return g


def _clip(x, low, high):
    return min(max(x, low), high)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("dual_clip", [None, 1.5])
def test_gspo_gradient_matches_per_sequence_loop(aggregation, dual_clip):
    """GSPO: s_i = exp(mean_t log rho_it), L_i = -min(s_i A_i, clip(s_i) A_i) (bounded by -c A_i for
    A_i < 0 with dual-clip), weighted by W_i = sum_t w_it."""
    eps_low, eps_high = 0.05, 0.08  # wider than the paper's, so that a 6-response batch has both cases
    cfg = LossConfig(
        name="gspo", clip=eps_low, clip_high=eps_high, aggregation=aggregation, dual_clip=dual_clip
    )
    logits, logp, old, adv, mask = _batch(spread=0.6)
    loss, stats = _loss(cfg, logp, old, adv, mask)
    w = _weights_loop(mask, aggregation)
    reference = 0.0
    clipped_tokens = dual_tokens = 0
    kinds = set()
    for i in range(len(adv)):
        length = int(mask[i].sum())
        log_s = sum(logp[i, t] - old[i, t] for t in range(length)) / length
        s = torch.exp(log_s)
        a = float(adv[i])
        value = float(s.detach())
        clipped_s = (
            s
            if 1 - eps_low <= value <= 1 + eps_high
            else torch.tensor(_clip(value, 1 - eps_low, 1 + eps_high))
        )
        objective = s * a if value * a <= float(clipped_s) * a else clipped_s * a
        if dual_clip is not None and a < 0 and float(objective.detach()) < dual_clip * a:
            objective = torch.tensor(dual_clip * a)
            dual_tokens += length
        outside = (value > 1 + eps_high and a > 0) or (value < 1 - eps_low and a < 0)
        clipped_tokens += length * outside
        kinds.add(outside)
        reference = reference + float(w[i, :length].sum()) * -objective
    assert kinds == {True, False}  # both clipped and unclipped responses: the test can tell them apart
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(_grad(loss, logits), _grad(reference, logits))
    assert stats["clip_sum"].item() == clipped_tokens
    if dual_clip is not None:
        assert dual_tokens > 0 and stats["dual_clip_sum"].item() == dual_tokens


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("dual_clip", [None, 1.2])
def test_gspo_with_one_token_per_response_is_the_token_level_loss(aggregation, dual_clip):
    """|y_i| = 1: the sequence ratio is the token ratio, so GSPO (and GSPO-token) equal PPO's loss."""
    logits, logp, old, adv, mask = _batch(seed=3, n=8, lengths=[1] * 8, spread=0.5)
    ppo = LossConfig(name="ppo", clip=0.2, clip_high=0.3, aggregation=aggregation, dual_clip=dual_clip)
    ref_loss, ref_stats = _loss(ppo, logp, old, adv, mask)
    assert ref_stats["clip_sum"] > 0
    for name in ("gspo", "gspo_token"):
        cfg = LossConfig(name=name, clip=0.2, clip_high=0.3, aggregation=aggregation, dual_clip=dual_clip)
        loss, stats = _loss(cfg, logp, old, adv, mask)
        torch.testing.assert_close(loss, ref_loss)
        torch.testing.assert_close(_grad(loss, logits), _grad(ref_loss, logits))
        assert stats["clip_sum"] == ref_stats["clip_sum"]


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_gspo_token_gradient_equals_gspo_gradient(aggregation):
    """With one advantage per response, GSPO-token's gradient equals GSPO's (Zheng et al. 2025)."""
    logits, logp, old, adv, mask = _batch(seed=5, spread=0.4)
    grads = []
    for name in ("gspo", "gspo_token"):
        cfg = LossConfig(name=name, clip=0.05, clip_high=0.08, aggregation=aggregation)
        loss, _ = _loss(cfg, logp, old, adv, mask)
        grads.append(_grad(loss, logits))
    torch.testing.assert_close(grads[0], grads[1])
    assert grads[0].abs().max() > 0


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("clip", [(1.0, 0.28), (0.2, 0.2), (None, None)])
def test_cispo_gradient_is_reinforce_weighted_by_the_clipped_ratio(aggregation, clip):
    """CISPO's gradient: -sum_it w_it clip(rho_it) A_i grad log pi(y_it), every token included."""
    low, high = clip
    cfg = LossConfig(name="cispo", clip=low, clip_high=high, aggregation=aggregation)
    logits, logp, old, adv, mask = _batch(seed=7, spread=0.6)
    loss, stats = _loss(cfg, logp, old, adv, mask)
    w = _weights_loop(mask, aggregation)
    reference = 0.0
    truncated = 0
    for i in range(len(adv)):
        for t in range(int(mask[i].sum())):
            rho = math.exp(float(logp[i, t].detach() - old[i, t]))
            weight = rho if low is None else _clip(rho, 1 - low, 1 + high)
            truncated += weight != rho
            reference = reference - float(w[i, t]) * weight * float(adv[i]) * logp[i, t]
    torch.testing.assert_close(_grad(loss, logits), _grad(reference, logits))
    torch.testing.assert_close(loss, reference)
    if low is not None:
        assert truncated > 0 and stats["clip_sum"].item() == truncated
    # no token is dropped: every completion token's logit row gets a gradient (PPO zeroes clipped ones)
    rows = _grad(loss, logits).abs().sum(-1)
    assert bool((rows[mask] > 0).all())


def test_every_objective_has_the_same_gradient_at_ratio_one():
    """At pi_theta = pi_old (first step on fresh data) ppo, gspo, gspo_token and cispo give the REINFORCE
    gradient -sum_it w_it A_i grad log pi under every aggregation."""
    logits, logp, _, adv, mask = _batch(seed=11)
    for aggregation in AGGREGATIONS:
        reinforce = -(adv[:, None] * logp * _weights_loop(mask, aggregation)).sum()
        expected = _grad(reinforce, logits)
        for name in OBJECTIVES.names():
            cfg = LossConfig(name=name, clip=0.2, aggregation=aggregation)
            loss, _ = _loss(cfg, logp, logp.detach(), adv, mask)
            torch.testing.assert_close(_grad(loss, logits), expected, msg=f"{name} / {aggregation}")


@pytest.mark.parametrize("name", ["ppo", "gspo_token"])
def test_dual_clip_bounds_negative_advantages(name):
    """Dual-clip (Ye et al. 2020): for A < 0 the objective is max(min(rho A, clip(rho) A), c A), so
    the loss is at most -c A and a ratio beyond c gives no gradient; A > 0 is untouched."""
    c = 3.0
    log_rho = torch.tensor([[math.log(5.0)], [math.log(2.0)], [math.log(0.5)], [math.log(5.0)]])
    adv = torch.tensor([-1.0, -1.0, -1.0, 1.0])
    logp = log_rho.clone().requires_grad_(True)
    old = torch.zeros_like(log_rho)
    mask = torch.ones(4, 1, dtype=torch.bool)
    w = torch.ones(4, 1)
    out = {}
    for dual in (None, c):
        cfg = LossConfig(name=name, clip=0.2, dual_clip=dual)
        per_token, stats = OBJECTIVES.get(name)(cfg, LossBatch(logp, old, adv, w), mask)
        (g,) = torch.autograd.grad(per_token.sum(), logp)
        out[dual] = (per_token.detach().squeeze(1), g.squeeze(1), stats)
    loss, grad, stats = out[c]
    plain_loss, plain_grad, _ = out[None]
    # rho = 5 > c, A = -1: bounded at -c A = 3, no gradient (PPO alone: 5, gradient rho * 1 = 5)
    assert loss[0].item() == pytest.approx(3.0) and grad[0].item() == 0.0
    assert plain_loss[0].item() == pytest.approx(5.0) and plain_grad[0].item() == pytest.approx(5.0)
    # 1 + eps < rho = 2 < c: the bound is not active; the loss is PPO's -rho A with gradient rho
    assert loss[1].item() == pytest.approx(2.0) and grad[1].item() == pytest.approx(2.0)
    # rho = 0.5 < 1 - eps with A < 0: PPO's clip (constant 0.8), also without the bound
    assert loss[2].item() == pytest.approx(0.8) and grad[2].item() == 0.0
    # A > 0 is never bounded below: the PPO clip applies (rho = 5 > 1.2: constant -1.2)
    assert loss[3].item() == pytest.approx(-1.2) and plain_loss[3].item() == pytest.approx(-1.2)
    assert stats["dual_clip_sum"].item() == 1.0
    for i in range(4):  # the bound -loss >= c * A holds for every negative advantage
        if adv[i] < 0:
            assert -loss[i].item() >= c * adv[i].item() - 1e-6


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"dual_clip": 3.0, "clip": None}, r"loss\.dual_clip needs loss\.clip"),
        ({"dual_clip": 1.0}, r"loss\.dual_clip must be > 1"),
        ({"dual_clip": 3.0, "name": "cispo"}, r"loss\.dual_clip applies to"),
        ({"name": "gpso"}, r"loss\.name: unknown loss 'gpso'"),
        ({"name": "gspo", "clip_high": 4e-4, "clip": None}, r"loss\.clip_high needs loss\.clip"),
    ],
)
def test_bad_loss_settings_name_the_key(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        LossConfig(**kwargs).validate()
