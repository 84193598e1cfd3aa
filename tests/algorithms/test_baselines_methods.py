"""The OBLR-PO optimal baseline and ReMax: hand-computed values and limiting cases."""

from __future__ import annotations

import pytest
import torch

from rlvr_scaling.algorithms.baselines import (
    NEEDS,
    AdvantageInputs,
    GRPOParams,
    OptimalParams,
    ReMaxParams,
    RLOOParams,
    compute_advantages,
)
from rlvr_scaling.errors import ConfigError


def _inputs(rewards, groups, **kw):
    r = torch.tensor(rewards, dtype=torch.float64)
    g = torch.tensor(groups)
    extra = {k: torch.tensor(v, dtype=torch.float64) for k, v in kw.items() if k != "kl_coef"}
    return AdvantageInputs(
        rewards=r, group=g, n_groups=int(g.max()) + 1, kl_coef=kw.get("kl_coef", 0.0), **extra
    )


REWARDS = [1, 0, 0, 1, 1, 0.5, 0]
GROUPS = [0, 0, 0, 0, 1, 1, 1]
WEIGHTS = [1, 2, 3, 4, 2, 0, 2]


def test_optimal_baseline_equals_weighted_formula_by_hand():
    inp = _inputs(REWARDS, GROUPS, grad_weights=WEIGHTS)
    # group 0: b = (1*1 + 4*1) / (1+2+3+4) = 0.5; group 1: b = (2*1 + 0 + 2*0) / 4 = 0.5
    adv = compute_advantages(OptimalParams(leave_one_out=False), inp)
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5, -0.5, 0.5, 0.5, 0.0, -0.5], dtype=torch.float64))
    # leave-one-out: b_{-i} = (sum w r - w_i r_i) / (sum w - w_i)
    loo = compute_advantages(OptimalParams(leave_one_out=True), inp)
    expect = [1 - 4 / 9, 0 - 5 / 8, 0 - 5 / 7, 1 - 1 / 6, 1 - 0 / 2, 0.5 - 2 / 4, 0 - 2 / 2]
    torch.testing.assert_close(loo, torch.tensor(expect, dtype=torch.float64))


def test_optimal_with_equal_weights_is_the_group_mean():
    inp = _inputs(REWARDS, GROUPS, grad_weights=[3.0] * len(REWARDS))
    plain = compute_advantages(OptimalParams(leave_one_out=False), inp)
    torch.testing.assert_close(plain, compute_advantages(GRPOParams(scale="none"), inp))
    loo = compute_advantages(OptimalParams(leave_one_out=True), inp)
    torch.testing.assert_close(loo, compute_advantages(RLOOParams(), inp))
    scaled = compute_advantages(OptimalParams(leave_one_out=False, scale="group_std"), inp)
    torch.testing.assert_close(scaled, compute_advantages(GRPOParams(), inp))


def test_optimal_uses_the_kl_shaped_reward_for_the_baseline_only():
    logratio = [2.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    inp = _inputs(REWARDS, GROUPS, grad_weights=WEIGHTS, logratio=logratio, kl_coef=0.1)
    adv = compute_advantages(OptimalParams(leave_one_out=False), inp)
    shaped = [r - 0.1 * lr for r, lr in zip(REWARDS, logratio)]  # r~ = r - beta log(pi/pi_ref)
    b0 = sum(w * x for w, x in zip(WEIGHTS[:4], shaped[:4])) / sum(WEIGHTS[:4])
    torch.testing.assert_close(adv[:4], torch.tensor(REWARDS[:4], dtype=torch.float64) - b0)
    off = compute_advantages(
        OptimalParams(leave_one_out=False), _inputs(REWARDS, GROUPS, grad_weights=WEIGHTS)
    )
    assert not torch.allclose(adv[:4], off[:4])


def test_optimal_minimises_the_weighted_second_moment_per_group():
    torch.manual_seed(0)
    r = torch.rand(6, dtype=torch.float64)
    w = torch.rand(6, dtype=torch.float64) + 0.1
    inp = AdvantageInputs(rewards=r, group=torch.zeros(6, dtype=torch.long), n_groups=1, grad_weights=w)
    adv = compute_advantages(OptimalParams(leave_one_out=False), inp)
    best = float((w * adv**2).sum())
    for b in torch.linspace(0, 1, 41, dtype=torch.float64):
        assert best <= float((w * (r - b) ** 2).sum()) + 1e-12


def test_optimal_edge_cases():
    # unscorable rewards get 0 and are excluded; zero weights fall back to the plain mean; LOO with
    # a single valid response has no baseline (0)
    inp = _inputs([1, float("nan"), 0, 1], [0, 0, 0, 1], grad_weights=[0, 5, 0, 1])
    adv = compute_advantages(OptimalParams(leave_one_out=False), inp)
    torch.testing.assert_close(adv, torch.tensor([0.5, 0.0, -0.5, 0.0], dtype=torch.float64))
    loo = compute_advantages(OptimalParams(), inp)
    torch.testing.assert_close(loo, torch.tensor([1.0, 0.0, -1.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="grad_weights"):
        compute_advantages(OptimalParams(), _inputs([1, 0], [0, 0]))


def test_remax_subtracts_the_greedy_reward():
    inp = _inputs([1, 0, 1, 0, 0], [0, 0, 1, 1, 2], greedy_rewards=[1.0, 0.0, float("nan")])
    adv = compute_advantages(ReMaxParams(), inp)
    torch.testing.assert_close(adv, torch.tensor([0.0, -1.0, 1.0, 0.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="greedy"):
        compute_advantages(ReMaxParams(), _inputs([1, 0], [0, 0]))


def test_needs_are_declared_for_every_baseline():
    from rlvr_scaling.algorithms.baselines import BASELINES

    assert set(NEEDS) == set(BASELINES.names())
    assert NEEDS["remax"] == {"greedy"} and NEEDS["optimal"] == {"grad_weights"}


@pytest.mark.parametrize(
    "params,key",
    [
        (OptimalParams(weights="ghost"), "baseline.weights"),
        (OptimalParams(scale="median"), "baseline.scale"),
    ],
)
def test_bad_optimal_params_name_the_key(params, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        params.validate("baseline")
