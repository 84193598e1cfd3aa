"""The drift statistics the trainer logs are unbiased estimators of KL(pi_old || pi_theta), measured after
every optimizer step (also at K = 1), and a non-finite step is caught before it is applied."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from rlvr_scaling.algorithms.loss import kl_old_sums
from rlvr_scaling.run import train
from tests.conftest import tiny_config


def _categoricals(seed: int, vocab: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    p_old = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64) * 1.5, -1)
    p_new = torch.softmax(torch.log(p_old) + torch.randn(vocab, generator=g, dtype=torch.float64) * 0.8, -1)
    return p_old, p_new


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_k3_is_unbiased_for_kl_old_to_theta(seed):
    """Tokens sampled from pi_old: the token mean of k3 = rho - 1 - log rho matches the exact
    KL(pi_old || pi_theta) within 4 standard errors; the previous form exp(-log rho) + log rho - 1 does
    not (it estimates a chi-square-type divergence)."""
    p_old, p_new = _categoricals(seed)
    exact = float((p_old * (p_old.log() - p_new.log())).sum())
    g = torch.Generator().manual_seed(100 + seed)
    n = 400_000
    tok = torch.multinomial(p_old, n, replacement=True, generator=g)
    logp, old = p_new.log()[tok][None], p_old.log()[tok][None]
    on = torch.ones_like(logp, dtype=torch.bool)
    sums = kl_old_sums(logp, old, on)
    est = float(sums["kl_old_sum"] / sums["tokens"])
    lr = (logp - old)[0]
    k3 = torch.expm1(lr) - lr
    se = float(k3.std()) / math.sqrt(n)
    assert abs(est - exact) < 4 * se, (est, exact, se)
    wrong = torch.exp(-lr) + lr - 1
    assert abs(float(wrong.mean()) - exact) > 10 * float(wrong.std()) / math.sqrt(n)
    assert float(k3.min()) >= 0.0


def test_sequence_k3_is_unbiased_for_the_sequence_kl():
    """Two-token sequences from a small Markov chain: the per-response sum of token k3 estimates the
    exact sequence-level KL(pi_old || pi_theta)."""
    vocab = 4
    p1_old, p1_new = _categoricals(3, vocab)
    cond = [_categoricals(10 + a, vocab) for a in range(vocab)]  # p(x2 | x1 = a)
    exact = float((p1_old * (p1_old.log() - p1_new.log())).sum())
    for a in range(vocab):
        q_old, q_new = cond[a]
        exact += float(p1_old[a] * (q_old * (q_old.log() - q_new.log())).sum())
    g = torch.Generator().manual_seed(7)
    n = 200_000
    x1 = torch.multinomial(p1_old, n, replacement=True, generator=g)
    old_rows = torch.stack([c[0] for c in cond])[x1]  # [n, V]
    new_rows = torch.stack([c[1] for c in cond])[x1]
    x2 = torch.multinomial(old_rows, 1, generator=g)[:, 0]
    idx = torch.arange(n)
    old = torch.stack([p1_old.log()[x1], old_rows.log()[idx, x2]], 1)
    new = torch.stack([p1_new.log()[x1], new_rows.log()[idx, x2]], 1)
    on = torch.ones(n, 2, dtype=torch.bool)
    sums = kl_old_sums(new, old, on)
    est = float(sums["kl_old_seq_sum"] / sums["rows"])
    lr = new - old
    per_seq = (torch.expm1(lr) - lr).sum(1)
    se = float(per_seq.std()) / math.sqrt(n)
    assert abs(est - exact) < 4 * se, (est, exact, se)
    assert sums["rows"] == n and sums["tokens"] == 2 * n


def test_padding_and_empty_rows_do_not_count():
    logp = torch.tensor([[-1.0, -2.0, 0.0], [0.0, 0.0, 0.0]])
    old = torch.tensor([[-1.5, -1.0, 99.0], [0.0, 0.0, 0.0]])
    on = torch.tensor([[True, True, False], [False, False, False]])
    sums = kl_old_sums(logp, old, on)
    lr = torch.tensor([0.5, -1.0], dtype=torch.float64)
    assert sums["tokens"] == 2 and sums["rows"] == 1
    torch.testing.assert_close(sums["kl_old_sum"], (torch.expm1(lr) - lr).sum())


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_drift_is_measured_after_the_last_step_also_at_k1(cache_dir, tmp_path, varied_rewards):
    """K = 1: the one forward sees theta_old (drift ~0 with behaviour log-probs), and the drift after
    the step comes from the pass after it: positive, finite, and the token mean over steps equals it."""
    cfg = tiny_config(cache_dir, **{"optim.steps_per_rollout": 1, "train.max_responses": 48})
    assert train(cfg, tmp_path, log=lambda *_: None) == "completed"
    rows = [
        {k: float(v) for k, v in r.items() if k.startswith("train/kl")}
        for r in _rows(tmp_path)
        if "train/kl_old" in r and math.isfinite(float(r["train/kl_old"]))  # NaN: no row in the loss
    ]
    assert len(rows) >= 2
    for r in rows:
        assert abs(r["train/kl_old_first"]) < 1e-6
        assert r["train/kl_old"] == pytest.approx(r["train/kl_old_final"])
    assert any(r["train/kl_old_final"] > 1e-8 for r in rows)
    assert all(r["train/kl_old_seq_final"] >= r["train/kl_old_final"] - 1e-12 for r in rows)


def test_non_finite_step_is_not_applied_and_ends_the_run(cache_dir, tmp_path, monkeypatch, varied_rewards):
    """A NaN loss in the second step of the second rollout: the step is not taken, the run ends
    failed: non_finite at that rollout, and the checkpoint holds the finite parameters from before."""
    import rlvr_scaling.optimize as optimize

    calls = {"n": 0}
    real = optimize.policy_loss

    def poisoned(cfg, batch):
        loss, stats = real(cfg, batch)
        calls["n"] += 1
        if calls["n"] == 4:  # K = 2 steps per rollout, one micro-batch each: rollout 2, step 2
            loss = loss * math.nan
            stats = {**stats, "policy": loss.detach()}
        return loss, stats

    seen = {}
    real_step = optimize.PolicyOptimizer._step

    def spy(self, rows, loss, *rest):
        if calls["n"] == 4 and "params" not in seen:
            seen["params"] = {n: p.detach().clone() for n, p in self.model.named_parameters()}
        return real_step(self, rows, loss, *rest)

    monkeypatch.setattr(optimize, "policy_loss", poisoned)
    monkeypatch.setattr(optimize.PolicyOptimizer, "_step", spy)
    cfg = tiny_config(cache_dir, **{"train.max_responses": 96, "optim.skip_zero_advantage": False})
    assert train(copy.deepcopy(cfg), tmp_path, log=lambda *_: None) == "failed"
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["failure"]["detector"] == "non_finite"
    assert status["failure"]["rollout"] == 2 and status["failure"]["onset_rollout"] == 2
    assert status["failure"]["onset_lower_responses"] == 16  # the previous rollout's responses (B = 16)
    row = [r for r in _rows(tmp_path) if r.get("rollout") == 2 and "opt/grad_norm" in r][0]
    assert row["opt/nonfinite_step"] == 2 and row["optimizer_steps"] == 3
    from safetensors.torch import load_file

    ckpt = sorted((tmp_path / "checkpoints").glob("rollout-*"))[-1]
    saved = load_file(str(ckpt / "model.safetensors"))
    shared = [name for name in saved if name in seen["params"]]
    assert len(shared) >= len(saved) - 1  # (a tied weight is stored once)
    for name in shared:  # the parameters from before the poisoned step, exactly
        assert torch.isfinite(saved[name]).all()
        torch.testing.assert_close(saved[name], seen["params"][name], rtol=0, atol=0)


def test_drift_on_a_subsample_is_unbiased_for_the_rollout():
    """The end-of-rollout drift pass sees a simple random sample of n of the rollout's N loss rows:
    with the sums scaled by N / n and the rollout's token and response counts, ``kl_old_final`` is
    unbiased for the rollout's token mean of k3 and ``kl_old_seq_final`` for its mean per response
    (responses of unequal length whose k3 grows with the length, so a ratio over the sample would not be)."""
    from types import SimpleNamespace

    from rlvr_scaling.distributed import DistEnv
    from rlvr_scaling.optimize import PolicyOptimizer

    g = torch.Generator().manual_seed(5)
    n_rows, width, n = 40, 12, 6
    lengths = torch.randint(1, width + 1, (n_rows,), generator=g)
    on = torch.arange(width)[None, :] < lengths[:, None]
    old = -torch.rand(n_rows, width, generator=g, dtype=torch.float64)
    shift = 0.05 * lengths[:, None].double() * torch.randn(n_rows, width, generator=g, dtype=torch.float64)
    new = old + shift
    whole = kl_old_sums(new, old, on)
    token_mean = float(whole["kl_old_sum"] / whole["tokens"])
    seq_mean = float(whole["kl_old_seq_sum"] / whole["rows"])
    counts = {"tokens": float(whole["tokens"]), "rows": float(whole["rows"])}
    host = SimpleNamespace(dist=DistEnv(), _after=[])
    finals, seqs, ratios = [], [], []
    for _ in range(10_000):
        rows = torch.randperm(n_rows, generator=g)[:n]
        out = PolicyOptimizer.final_drift(host, new[rows], old[rows], on[rows], n_rows / n, counts)
        finals.append(out["train/kl_old_final"])
        seqs.append(out["train/kl_old_seq_final"])
        sample = kl_old_sums(new[rows], old[rows], on[rows])
        ratios.append(float(sample["kl_old_sum"] / sample["tokens"]))
    for values, want in ((finals, token_mean), (seqs, seq_mean)):
        x = torch.tensor(values, dtype=torch.float64)
        se = float(x.std()) / math.sqrt(x.numel())
        assert abs(float(x.mean()) - want) < 4 * se, (float(x.mean()), want, se)
    r = torch.tensor(ratios, dtype=torch.float64)
    assert abs(float(r.mean()) - token_mean) > 4 * float(r.std()) / math.sqrt(r.numel())  # the ratio is not
