"""B_noise for Adam (rlvr_scaling/noise.py, rlvr_scaling/curvature.py, rlvr_scaling/noisy_quadratic.py): the
two-half estimators against a known G and Sigma, the preconditioner against torch's own AdamW update, the
Adam-aware noise scale against the critical batch a noisy quadratic's simulated samples-to-target give, and
the trainer's new noise/adam_* and noise/all_* metrics."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr_scaling.noise import adam_preconditioner, two_half_estimates
from tests.conftest import tiny_config


def test_two_half_estimates_are_unbiased_for_g_p_g_and_tr_p_sigma():
    g = torch.Generator().manual_seed(0)
    d, n, draws = 6, 8, 20000
    G = torch.tensor([1.0, -0.5, 0.2, 0.0, 0.1, 0.3], dtype=torch.float64)
    sd = torch.tensor([2.0, 1.0, 3.0, 0.5, 1.0, 4.0], dtype=torch.float64)
    P = torch.tensor([0.5, 2.0, 0.1, 1.0, 3.0, 0.2], dtype=torch.float64)
    samples = G + sd * torch.randn(draws, n, d, generator=g, dtype=torch.float64)
    ma, mb = samples[:, : n // 2].mean(1), samples[:, n // 2 :].mean(1)
    for weight in (P, None):
        w = torch.ones(d, dtype=torch.float64) if weight is None else weight
        est = two_half_estimates(ma, mb, n / 2, n / 2, weight)
        for key, truth in (("signal", float((w * G * G).sum())), ("trace", float((w * sd * sd).sum()))):
            values = est[key]
            se = float(values.std()) / math.sqrt(draws)
            assert abs(float(values.mean()) - truth) < 4 * se, (key, float(values.mean()), truth)


def test_the_preconditioner_is_the_one_torch_adamw_applied():
    """With beta1 = 0 AdamW's update is exactly -lr * P * g with P from the state after the step."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(5, 3, dtype=torch.float64))
    frozen = torch.nn.Parameter(torch.randn(2))  # not the optimizer's: P = 0
    opt = torch.optim.AdamW([p], lr=0.01, betas=(0.0, 0.99), eps=1e-6, weight_decay=0.0)
    assert adam_preconditioner(opt, [p]) is None  # no state before the first step
    assert adam_preconditioner(opt, [frozen]) is None  # none of the optimizer's parameters
    for _ in range(4):
        p.grad = torch.randn(5, 3, dtype=torch.float64)
        before = p.detach().clone()
        opt.step()
        P = adam_preconditioner(opt, [p, frozen])
        torch.testing.assert_close(p.detach() - before, -0.01 * P[0].double() * p.grad, rtol=1e-6, atol=1e-9)
        assert torch.equal(P[1], torch.zeros(2))


def test_on_a_noisy_quadratic_adams_noise_scale_is_the_simulated_critical_batch():
    """20 coordinates at standard-normal distances, each with noise scale 20 noise^2, at three noise
    levels; AdamW (beta1 = 0) at a tenth of the step's expected-optimal rate at four batches around B_crit:
    McCandlish's form fitted to the samples to target gives B_crit, and tr(P Sigma) / G'PG measured along
    the runs is within 25 % of it (benchmarks/calibration/adam_noise_quadratic.py: the full setting, and the cases
    where it is not)."""
    from analysis.fits.bcrit_simulated import simulated_critical_batch as critical_batch
    from rlvr_scaling.noisy_quadratic import NoisyQuadratic, sweep

    torch.set_num_threads(1)
    for noise in (1.0, 2.0, 4.0):
        problem = NoisyQuadratic.groups([(20, 1.0, 1.0, 20.0)], noise, seed=1)
        batches = [max(1, round(f * 20 * noise**2)) for f in (0.25, 1.0, 4.0, 16.0)]
        sims = sweep(
            problem, batches, [0.1], 6, 0.1, 5000, seed=1, betas=(0.0, 0.999), greedy=True, measure_every=2
        )
        out = critical_batch(sims)
        assert out["b_crit_low"] < out["b_crit"] < out["b_crit_high"]
        assert out["b_noise_adam"] == pytest.approx(out["b_crit"], rel=0.25)
        assert out["b_noise_adam"] == pytest.approx(20 * noise**2, rel=0.1)  # the problem's own noise scale
        samples = [r["samples"] for r in out["per_b"]]
        assert samples == sorted(samples)  # larger batches always cost more samples


def test_preconditioned_power_iteration_finds_the_top_eigenvalue_of_p_h():
    from rlvr_scaling.curvature import adam_threshold, preconditioned_power_iteration

    g = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=g, dtype=torch.float64)
    H = m @ m.T / 6 + 0.1 * torch.eye(6, dtype=torch.float64)
    P = torch.rand(6, generator=g, dtype=torch.float64) + 0.1
    want = float(torch.linalg.eigvals(torch.diag(P) @ H).real.max())
    got = preconditioned_power_iteration(lambda v: [H @ v[0]], [P], [torch.ones(6, dtype=torch.float64)], 300)
    assert got == pytest.approx(want, rel=1e-6)
    assert adam_threshold(0.9) == pytest.approx(38.0) and adam_threshold(0.0) == 2.0


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_the_trainer_logs_adams_noise_over_all_prompts_and_leaves_the_run_unchanged(
    cache_dir, tmp_path, varied_rewards
):
    from rlvr_scaling.run import train

    runs = {}
    for name, on in (("off", False), ("on", True)):
        cfg = tiny_config(cache_dir)
        cfg.noise.adam_noise = on
        cfg.noise.at_theta_old_every_rollouts = 1
        cfg.noise.curvature_every_rollouts = 2 if on else 0
        train(cfg, tmp_path / name, log=lambda *_: None)
        runs[name] = _rows(tmp_path / name)
    rows = [r for r in runs["on"] if "train/reward_mean" in r]
    assert len(rows) == 4
    assert math.isnan(float(rows[0]["noise/adam_b_noise"]))  # no optimizer state before the first step
    for r in rows:
        assert math.isfinite(r["noise/all_trace_cov"]) and math.isfinite(r["noise/all_grad_norm_sq"])
    for r in rows[1:]:
        assert math.isfinite(r["noise/adam_trace_cov"]) and r["noise/adam_trace_cov"] > 0
        assert math.isfinite(r["noise/adam_grad_norm_sq"])
    assert not any("noise/adam_trace_cov" in r for r in runs["off"])
    # the rate in edge units where curvature ran with an optimizer state (rollout 2; rollout 0 has none)
    assert math.isnan(float(rows[0]["curv/adam_edge"])) and "curv/adam_edge" not in rows[1]
    # signed, as curv/top_eig: the largest-magnitude eigenvalue of the surrogate's P H may be negative
    eig, edge = rows[2]["curv/adam_top_eig"], rows[2]["curv/adam_edge"]
    assert math.isfinite(eig) and eig != 0 and math.isfinite(edge) and edge * eig > 0

    def stable(row):
        return {
            k: v
            for k, v in row.items()
            if not k.startswith(("noise/", "curv/", "perf/")) and k != "wall_seconds"
        }

    assert [stable(r) for r in runs["on"]] == [stable(r) for r in runs["off"]]


def test_adam_noise_needs_the_noise_at_theta_old():
    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.noise import NoiseParams

    with pytest.raises(ConfigError, match="noise.adam_noise"):
        NoiseParams(adam_noise=True, at_theta_old=False, curvature_every_rollouts=0).validate()
