"""Noise and curvature at theta_old (rlvr_scaling/curvature.py): each estimator against a model whose
answer is known in closed form, and the instruments leave the training trajectory unchanged."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr_scaling.curvature import (
    cell_estimates,
    design_cells,
    hessian_vector_product,
    power_iteration,
)
from tests.conftest import tiny_config

# ------------------------------------------------------------------ the cell estimators (Monte Carlo)


def _spd(d: int, g: torch.Generator, scale: float) -> torch.Tensor:
    m = torch.randn(d, d, generator=g, dtype=torch.float64)
    return scale * (m @ m.T / d + 0.1 * torch.eye(d, dtype=torch.float64))


def test_cell_estimates_are_unbiased_for_the_within_and_between_parts():
    """g_i = G + a_q + e_i with Cov a = Sigma_b, Cov e = Sigma_w, unequal groups (odd sizes split
    unevenly): the means of the estimates over many draws match tr(X Sigma_w), tr(X Sigma_b) and G'XG
    for X = I and for a known Hessian X = H, within 4 Monte-Carlo standard errors."""
    g = torch.Generator().manual_seed(0)
    d, reps = 5, 4000
    big_g = torch.randn(d, generator=g, dtype=torch.float64)
    sigma_b, sigma_w = _spd(d, g, 0.5), _spd(d, g, 2.0)
    h = torch.randn(d, d, generator=g, dtype=torch.float64)
    h = (h + h.T) / 2  # indefinite, as a policy loss's Hessian can be
    counts = [2, 3, 4, 5, 3, 6]  # six prompts, responses per prompt
    prompt_index = torch.tensor([q for q, c in enumerate(counts) for _ in range(c)])
    design = design_cells(prompt_index, len(counts))
    assert design is not None and (design.n_a, design.n_b) == (3, 3)
    lb, lw = torch.linalg.cholesky(sigma_b), torch.linalg.cholesky(sigma_w)
    a = torch.randn(reps, len(counts), d, generator=g, dtype=torch.float64) @ lb.T
    e = torch.randn(reps, len(prompt_index), d, generator=g, dtype=torch.float64) @ lw.T
    grads = big_g + a[:, prompt_index] + e  # [reps, N, d]
    cells = torch.stack(
        [(grads[:, rows] * w[None, :, None]).sum(1) for rows, w in zip(design.rows, design.weights)], 1
    )  # [reps, 4, d]
    for x in (torch.eye(d, dtype=torch.float64), h):
        est = [cell_estimates(c @ x @ c.T, design) for c in cells]
        truth = {
            "within": float(torch.trace(x @ sigma_w)),
            "between": float(torch.trace(x @ sigma_b)),
            "signal": float(big_g @ x @ big_g),
        }
        truth["total"] = truth["within"] + truth["between"]
        for key, want in truth.items():
            vals = torch.tensor([r[key] for r in est])
            se = float(vals.std()) / math.sqrt(reps)
            assert abs(float(vals.mean()) - want) < 4 * se, (key, float(vals.mean()), want, se)


def test_cells_take_whole_prompts_with_two_or_more_responses():
    prompt_index = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 3, 3])
    d = design_cells(prompt_index, 3)
    # prompt 1 has one response: skipped; prompts 0, 2, 3 alternate A, B, A
    assert d.n_a == 2 and d.n_b == 1
    assert sorted(torch.cat(d.rows).tolist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert d.rows[0].tolist() == [0, 6, 7] and d.rows[1].tolist() == [1, 2, 8, 9]
    assert d.weights[1].tolist() == [0.5, 0.5, 0.5, 0.5]
    assert design_cells(torch.tensor([0, 1, 2]), 3) is None  # no prompt with two responses


# ------------------------------------------------------------------ Hessian-vector products (a quadratic)


class _Quadratic:
    """L(theta) = 1/2 theta' A theta + b' theta: Hessian A everywhere."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor, theta: torch.nn.Parameter):
        self.a, self.b, self.params, self.active = a, b, [theta], True

    def value(self):
        t = self.params[0]
        return 0.5 * t @ self.a @ t + self.b @ t

    def grad(self, create_graph: bool = False):
        with torch.enable_grad():
            return list(torch.autograd.grad(self.value(), self.params, create_graph=create_graph))


@pytest.mark.parametrize("kind", ["double_backward", "finite_difference"])
def test_hessian_vector_products_on_a_quadratic(kind):
    g = torch.Generator().manual_seed(1)
    d = 12
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    a = (a + a.T) / 2
    b = torch.randn(d, generator=g, dtype=torch.float64)
    theta = torch.nn.Parameter(torch.randn(d, generator=g, dtype=torch.float64))
    before = theta.detach().clone()
    objective = _Quadratic(a, b, theta)
    v = [torch.randn(d, generator=g, dtype=torch.float64)]
    hv = hessian_vector_product([objective], v, kind, eps=1e-3)
    assert torch.allclose(hv[0].double(), a @ v[0], rtol=1e-5, atol=1e-6)
    assert torch.equal(theta.detach(), before)  # the parameters are restored bit for bit
    assert theta.grad is None  # nothing left in .grad
    # power iteration: the eigenvalue of largest magnitude, and a warm start keeps it
    eig = torch.linalg.eigvalsh(a)
    top = float(eig[eig.abs().argmax()])
    value, vec = power_iteration(lambda x: hessian_vector_product([objective], x, kind, 1e-3), v, 300)
    assert value == pytest.approx(top, rel=1e-3)
    value, _ = power_iteration(lambda x: hessian_vector_product([objective], x, kind, 1e-3), vec, 3)
    assert value == pytest.approx(top, rel=1e-3)


# ------------------------------------------------------------------ in the trainer


def _rows(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _stable(row):
    return {
        k: v for k, v in row.items() if not k.startswith(("noise/", "curv/", "perf/")) and k != "wall_seconds"
    }


def test_instruments_leave_the_trajectory_unchanged(cache_dir, tmp_path, varied_rewards):
    """Noise at theta_old and curvature on every rollout (double backward and finite differences) or
    off: every metric besides noise/, curv/ and the wall clock is bit-identical."""
    from rlvr_scaling.run import train

    runs = {}
    for name, at_old, every, hvp in (
        ("off", False, 0, "auto"),
        ("double_backward", True, 1, "double_backward"),
        ("finite_difference", True, 1, "finite_difference"),
    ):
        cfg = tiny_config(cache_dir)
        cfg.noise.at_theta_old, cfg.noise.curvature_every_rollouts, cfg.noise.hvp = at_old, every, hvp
        train(cfg, tmp_path / name, log=lambda *_: None)
        runs[name] = _rows(tmp_path / name)
    train_rows = [r for r in runs["double_backward"] if "train/reward_mean" in r]
    assert len(train_rows) == 4
    for r in train_rows:
        for key in ("noise/trace_cov", "noise/trace_cov_within", "noise/trace_cov_between", "curv/top_eig"):
            assert key in r and math.isfinite(r[key]), key
        assert "curv/uHu" in r and "noise/multistep_trace_cov" in r
    assert not any("noise/trace_cov" in r or "curv/top_eig" in r for r in runs["off"])
    for name in ("double_backward", "finite_difference"):
        assert [_stable(r) for r in runs[name]] == [_stable(r) for r in runs["off"]], name
    # the two Hessian-vector products agree (central differences with h = 1e-4 |theta|: ~1e-3)
    for x, y in zip(runs["double_backward"], runs["finite_difference"]):
        if "curv/top_eig" in x:
            scale = abs(x["curv/top_eig"]) + 1.0
            assert abs(x["curv/top_eig"] - y["curv/top_eig"]) < 0.01 * scale
            assert x["curv/uHu"] == y["curv/uHu"]  # a secant of gradients: no HVP involved


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("curvature_every_rollouts", -1, "noise.curvature_every_rollouts"),
        ("hvp", "exact", "noise.hvp"),
        ("prompts_at_theta_old", 1, "noise.prompts_at_theta_old"),
        ("hvp_eps", 0.0, "noise.hvp_eps"),
        ("power_iterations", -1, "noise.power_iterations"),
    ],
)
def test_a_wrong_instrument_key_is_named(key, value, match):
    from rlvr_scaling.errors import ConfigError
    from rlvr_scaling.noise import NoiseParams

    with pytest.raises(ConfigError, match=match):
        NoiseParams(**{key: value}).validate()


def test_curvature_resumes_exactly(cache_dir, tmp_path, varied_rewards):
    """A run with curvature on every rollout, preempted after 2 rollouts and resumed, logs the rows of
    the uninterrupted run (the power iteration's warm start is checkpointed)."""
    from rlvr_scaling.run import train

    def cfg(**kw):
        c = tiny_config(cache_dir, **kw)
        c.noise.curvature_every_rollouts = 1
        return c

    train(cfg(), tmp_path / "reference", log=lambda *_: None)
    assert train(cfg(**{"run.stop_after_rollouts": 2}), tmp_path / "run", log=lambda *_: None) == "preempted"
    assert (tmp_path / "run" / "checkpoints" / "rollout-0000002" / "curvature.safetensors").is_file()
    train(cfg(), tmp_path / "run", log=lambda *_: None)

    def strip(rows):
        return [
            {k: v for k, v in r.items() if not k.startswith("perf/") and k != "wall_seconds"} for r in rows
        ]

    got, want = strip(_rows(tmp_path / "run")), strip(_rows(tmp_path / "reference"))
    assert sum("curv/top_eig" in r for r in want) == 4
    assert got == want


# ------------------------------------------------------------------ a linear softmax policy (closed form)


class _LinearSoftmaxPolicy(torch.nn.Module):
    """A bigram policy: the logits of the next token are W[current token] (a causal-LM interface)."""

    def __init__(self, vocab: int, g: torch.Generator):
        super().__init__()
        self.weight = torch.nn.Parameter(0.5 * torch.randn(vocab, vocab, generator=g, dtype=torch.float64))

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0, use_cache=False):
        from types import SimpleNamespace

        logits = self.weight[input_ids]
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits)


@pytest.mark.parametrize("kind", ["double_backward", "finite_difference"])
def test_surrogate_hessian_of_a_linear_softmax_policy(kind):
    """The surrogate loss sum_t c_t rho_t of a softmax policy with logits z = W[x] has, at theta_old, the
    Hessian sum_t c_t [(e_a - p)(e_a - p)' - (diag p - p p')] / T^2 in the block of row x (rewards from a
    verifier: token 0 at the end scores 1). Both Hessian-vector products through the trainer's
    log-prob path equal it."""
    from types import SimpleNamespace

    from rlvr_scaling.curvature import SurrogateObjective

    g = torch.Generator().manual_seed(2)
    vocab, n, prompt, completion, temperature = 5, 6, 2, 3, 0.7
    model = _LinearSoftmaxPolicy(vocab, g)
    ids = torch.randint(0, vocab, (n, prompt + completion), generator=g)
    mask = torch.ones_like(ids)
    rewards = (ids[:, -1] == 0).double()
    adv = (rewards - rewards.mean()).float()
    coef = -adv[:, None] * torch.ones(n, completion) / completion  # the loss's token weights times -A
    gen = SimpleNamespace(input_ids=ids, attention_mask=mask, prompt_width=prompt)
    objective = SurrogateObjective(model, gen, torch.arange(n), coef, temperature, torch.device("cpu"))
    w = model.weight.detach()
    hess = torch.zeros(vocab, vocab, vocab, vocab, dtype=torch.float64)  # [x, a, x', a']
    for i in range(n):
        for t in range(completion):
            x, a = int(ids[i, prompt + t - 1]), int(ids[i, prompt + t])
            p = torch.softmax(w[x] / temperature, -1)
            r = torch.nn.functional.one_hot(torch.tensor(a), vocab).double() - p
            block = (torch.outer(r, r) - (torch.diag(p) - torch.outer(p, p))) / temperature**2
            hess[x, :, x, :] += float(coef[i, t]) * block
    hmat = hess.reshape(vocab * vocab, vocab * vocab)
    v = [torch.randn(vocab, vocab, generator=g, dtype=torch.float64)]
    hv = hessian_vector_product([objective], v, kind, eps=1e-4)
    want = (hmat @ v[0].reshape(-1)).reshape(vocab, vocab)
    # the log-prob path computes in float32 (policy.token_logprobs): central differences divide that
    # rounding by the step, double backward is exact
    tol = 1e-6 if kind == "double_backward" else 1e-2
    scale = float(want.abs().max())
    assert float((hv[0].double() - want).abs().max()) < tol * scale
    eig = torch.linalg.eigvalsh(hmat)
    top = float(eig[eig.abs().argmax()])
    value, _ = power_iteration(lambda x: hessian_vector_product([objective], x, kind, 1e-4), v, 400)
    assert value == pytest.approx(top, rel=max(tol, 1e-4))
