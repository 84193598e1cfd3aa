"""The trainer's inner loop: exactness of the update, clocks, and the run-directory contract."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from rlvr_scaling.config import derive
from rlvr_scaling.engines.base import SamplingParams
from rlvr_scaling.run import build_components, train
from rlvr_scaling.trainer import Trainer
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def components(cache_dir):
    return build_components(tiny_config(cache_dir), log=lambda *_: None)


def _trainer(cfg, comps, tmp_path):
    comps = copy.copy(comps)
    comps.model = copy.deepcopy(comps.model)
    comps.engine = copy.copy(comps.engine)
    comps.engine.model = comps.model
    return Trainer(cfg, derive(cfg), tmp_path, comps, log=lambda *_: None)


def _rollout(trainer, seed=0):
    """One real rollout from the engine with synthetic non-degenerate rewards and advantages."""
    cfg = trainer.cfg
    prompts = [trainer.task.train_example(i).prompt for i in range(cfg.rollout.prompts_per_rollout)]
    g = torch.Generator().manual_seed(seed)
    gen = trainer.engine.generate(
        prompts, [cfg.rollout.group_size] * len(prompts), SamplingParams(cfg.rollout.max_new_tokens), g
    )
    adv = torch.randn(len(gen), generator=g)
    adv[::3] = 0.0  # some rows with zero advantage, as in groups of identical rewards
    old_logp, _ = trainer.logprobs.logprobs(trainer.model, gen)
    return gen, adv, old_logp


def _params_after(cfg, components, tmp_path, rollout):
    trainer = _trainer(cfg, components, tmp_path)
    gen, adv, old = rollout
    trainer.optim.run(
        gen, adv, old, None, trainer.optim.plan(len(gen), adv, torch.Generator().manual_seed(1))
    )
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters()])


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "constant"])
def test_gradient_accumulation_and_zero_skipping_are_exact(cache_dir, components, tmp_path, aggregation):
    """Every exact lever (micro-batching, zero-advantage skipping, sequence packing) leaves the
    parameters after K steps equal, to float tolerance, to the plain padded computation."""
    base = tiny_config(cache_dir)
    base.loss.aggregation = aggregation
    base.optim.skip_zero_advantage = False
    rollout = _rollout(_trainer(base, components, tmp_path))
    base.optim.pack_sequences = False  # the plain computation: one padded batch per minibatch
    reference = _params_after(base, components, tmp_path, rollout)
    for micro, skip, pack in (
        (1, False, False),
        (2, True, False),
        (None, True, False),
        (None, True, True),
        (3, True, True),
    ):
        cfg = copy.deepcopy(base)
        cfg.optim.micro_batch_responses = micro
        cfg.optim.skip_zero_advantage = skip
        cfg.optim.pack_sequences = pack
        got = _params_after(cfg, components, tmp_path, rollout)
        # Adam normalises each coordinate, so rounding-level gradient differences can move a parameter
        # by a small fraction of one step (lr = 1e-3): tolerate 1 % of a step.
        torch.testing.assert_close(got, reference, rtol=1e-5, atol=1e-5)
    moved = _params_after(base, components, tmp_path, rollout)
    start = torch.cat([p.detach().flatten() for p in components.model.parameters()])
    assert (moved - start).abs().max() > 0  # the update did something


@pytest.mark.parametrize("grad_clip", [None, 1e-3])
def test_one_step_unclipped_gradient_is_reinforce(cache_dir, components, tmp_path, grad_clip):
    """K = 1, no PPO clip: the gradient equals -sum_i A_i/n_tokens * sum_t grad log pi(o_it), from a
    plain loop; with gradient clipping, that gradient clipped by torch's clip_grad_norm_."""
    cfg = tiny_config(cache_dir)
    cfg.optim.steps_per_rollout = 1
    cfg.loss.clip = None
    cfg.optim.grad_clip = grad_clip
    trainer = _trainer(cfg, components, tmp_path)
    gen, adv, old = _rollout(trainer)
    captured = {}

    class Capture:
        param_groups = [{"lr": 0.0}]

        def zero_grad(self, set_to_none=False):
            for p in trainer.model.parameters():
                p.grad = None if set_to_none else torch.zeros_like(p)

        def step(self):
            captured["grad"] = torch.cat([p.grad.flatten().clone() for p in trainer.model.parameters()])

    trainer.optim.optimizer = Capture()
    trainer.optim.run(
        gen, adv, old, None, trainer.optim.plan(len(gen), adv, torch.Generator().manual_seed(1))
    )
    # Plain loop: one unpadded sequence at a time.
    model = trainer.model
    model.zero_grad()
    n_tokens = int(gen.completion_lengths.sum())
    total = 0.0
    for i in range(len(gen)):
        keep = gen.attention_mask[i].bool()
        ids = gen.input_ids[i][keep][None]
        n_prompt = int(gen.attention_mask[i, : gen.prompt_width].sum())
        logits = model(input_ids=ids).logits[0, n_prompt - 1 : -1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[0, n_prompt:, None]).sum()
        total = total - adv[i] * logp / n_tokens
    total.backward()
    if grad_clip is not None:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        assert norm > 10 * grad_clip  # the clip really scales this gradient
    expected = torch.cat([p.grad.flatten() for p in model.parameters()])
    torch.testing.assert_close(captured["grad"], expected, rtol=1e-4, atol=1e-7)
    assert expected.abs().max() > 0


def test_behaviour_logprobs_are_the_recomputed_ones(cache_dir, components, tmp_path):
    """optim.old_logprobs=auto with the HF engine takes pi_old from the engine's sampling pass: the same
    numbers as the recomputation up to float rounding, and the same parameters after K steps."""
    cfg = tiny_config(cache_dir)
    trainer = _trainer(cfg, components, tmp_path)
    assert trainer.logprobs.behaviour  # auto -> behaviour for the HF engine
    gen, adv, recomputed = _rollout(trainer)
    comp = gen.completion_mask[:, gen.prompt_width :]
    behaviour = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
    assert comp.sum() > 0 and float((behaviour - recomputed).abs().max()) < 1e-5
    params = [_params_after(cfg, components, tmp_path, (gen, adv, old)) for old in (recomputed, behaviour)]
    torch.testing.assert_close(params[0], params[1], rtol=1e-5, atol=1e-5)
    cfg.optim.old_logprobs = "recompute"
    assert not _trainer(cfg, components, tmp_path).logprobs.behaviour


def test_identical_rewards_give_zero_gradient(cache_dir, components, tmp_path):
    cfg = tiny_config(cache_dir)
    trainer = _trainer(cfg, components, tmp_path)
    gen, _, old = _rollout(trainer)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    zero = torch.zeros(len(gen))
    stats = trainer.optim.run(
        gen, zero, old, None, trainer.optim.plan(len(gen), zero, torch.Generator().manual_seed(1))
    )
    assert stats["opt/grad_norm"] == 0.0
    for p, q in zip(trainer.model.parameters(), before):
        torch.testing.assert_close(p.detach(), q)  # AdamW with zero gradients and no weight decay: no move


def test_run_directory_contract_and_clocks(cache_dir, tmp_path):
    cfg = tiny_config(cache_dir)
    state = train(cfg, tmp_path, log=lambda *_: None)
    assert state in ("completed", "failed")
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    clocks = ("rollout", "responses", "tokens", "optimizer_steps", "wall_seconds", "flops", "eval_responses")
    for row in rows:
        assert all(c in row for c in clocks)
    for a, b in zip(rows, rows[1:]):
        assert all(b[c] >= a[c] for c in clocks)
    train_rows = [r for r in rows if "train/reward_mean" in r]
    eval_rows = [r for r in rows if "eval/accuracy" in r]
    d = derive(cfg)
    # Clocks count exactly: B responses and K optimizer steps per rollout, tokens = completion tokens.
    for i, r in enumerate(train_rows, start=1):
        assert r["rollout"] == i
        assert r["responses"] == i * d.responses_per_rollout
        assert r["optimizer_steps"] == i * d.steps_per_rollout
    assert sum(r["rollout/tokens"] for r in train_rows) == train_rows[-1]["tokens"]
    assert eval_rows[0]["responses"] == 0 and eval_rows[0]["derived/responses_per_rollout"] == 16
    assert eval_rows[-1]["eval_responses"] == len(eval_rows) * cfg.task.val_size
    status = json.loads((tmp_path / "status.json").read_text())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert status["state"] == state and status["clocks"]["responses"] == rows[-1]["responses"]
    assert set(status) >= {"state", "failure", "clocks", "git", "versions", "host"}
    assert summary["derived"] == {**d.as_dict()}
    for key, target in summary["targets"].items():
        first = next((r["responses"] for r in eval_rows if r["eval/accuracy"] >= float(key)), None)
        assert target == {"responses": first, "reached": first is not None}
    assert (tmp_path / "config.yaml").is_file() and (tmp_path / "checkpoints" / "latest.json").is_file()
    # A second call on an ended run skips it.
    assert train(cfg, tmp_path, log=lambda *_: None) == state
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == len(rows)


def test_other_config_in_same_directory_is_refused(cache_dir, tmp_path):
    from rlvr_scaling.errors import ConfigError

    train(tiny_config(cache_dir, **{"train.max_responses": 16}), tmp_path, log=lambda *_: None)
    with pytest.raises(ConfigError, match="rollout.group_size"):
        train(
            tiny_config(cache_dir, **{"train.max_responses": 16, "rollout.group_size": 2}),
            tmp_path,
            log=lambda *_: None,
        )


def test_failure_ends_run_normally(cache_dir, tmp_path, varied_rewards):
    from rlvr_scaling.algorithms.failure import KLBlowupParams

    cfg = tiny_config(cache_dir)
    # any drift at all, over a one-rollout window held one rollout (B = 16): fires on rollout 1
    cfg.failure.kl_blowup = KLBlowupParams(max_kl=1e-12, window_responses=16, sustain_responses=16)
    assert train(cfg, tmp_path, log=lambda *_: None) == "failed"
    status = json.loads((tmp_path / "status.json").read_text())
    failure = status["failure"]
    assert failure["detector"] == "kl_blowup" and failure["rollout"] == 1
    assert failure["onset_rollout"] == 1 and failure["onset_responses"] == 16
    assert failure["onset_lower_responses"] == 0  # no rollout before the onset one
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failure"]["failed"] and summary["failure"]["responses"] == 16
    assert summary["failure"]["onset_responses"] == 16 and summary["failure"]["onset_lower_responses"] == 0
    assert not math.isnan(summary["final"]["responses"])


def test_shared_prompt_forward_equals_the_plain_one(cache_dir, components, tmp_path):
    """completion_logprobs_shared (each distinct prompt run once, its KV cache indexed out to the rows)
    gives the plain padded forward's log-probs, entropies and gradient, up to float rounding."""
    from rlvr_scaling.policy import completion_logprobs, completion_logprobs_shared, trim_padding

    trainer = _trainer(tiny_config(cache_dir), components, tmp_path)
    gen, _, _ = _rollout(trainer)
    rows = torch.tensor([0, 5, 1, 9, 2, 12, 3, 4])  # several rows per prompt, in mixed order
    model = trainer.model
    ids, mask, start = trim_padding(gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width)
    comp = gen.completion_mask[rows, gen.prompt_width :].float()
    results = []
    for shared in (False, True):
        model.zero_grad()
        if shared:
            args = (gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width)
            logp, ent = completion_logprobs_shared(model, *args, 1.0, with_entropy=True)
        else:
            logp, ent = completion_logprobs(model, ids, mask, start, 1.0, with_entropy=True)
        w = comp[:, : logp.shape[1]]
        (logp * w).sum().backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()])
        results.append((logp * w, ent * w, grad))
    (lp0, h0, g0), (lp1, h1, g1) = results
    assert lp0.shape == lp1.shape and float(comp.sum()) > 0
    torch.testing.assert_close(lp1, lp0, rtol=0, atol=1e-5)
    torch.testing.assert_close(h1, h0, rtol=0, atol=1e-5)
    torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-6)
    assert g0.abs().max() > 0


@pytest.mark.parametrize("max_tokens", [10_000, 20, 1])
def test_packed_forward_equals_the_padded_one(cache_dir, components, tmp_path, max_tokens):
    """completion_logprobs_packed (rows packed into unpadded sequences of at most max_tokens, one row
    per sequence at the smallest cap) gives the padded forward's log-probs and gradient."""
    from rlvr_scaling.policy import completion_logprobs, completion_logprobs_packed, trim_padding

    trainer = _trainer(tiny_config(cache_dir), components, tmp_path)
    gen, _, _ = _rollout(trainer)
    rows = torch.arange(len(gen))
    model = trainer.model
    comp = gen.completion_mask[:, gen.prompt_width :].float()
    results = []
    for packed in (False, True):
        model.zero_grad()
        if packed:
            logp = completion_logprobs_packed(
                model, gen.input_ids, gen.attention_mask, gen.prompt_width, 0.7, max_tokens=max_tokens
            )
        else:
            ids, mask, start = trim_padding(gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width)
            logp, _ = completion_logprobs(model, ids, mask, start, 0.7)
        w = comp[:, : logp.shape[1]]
        (logp * w).sum().backward()
        results.append((logp * w, torch.cat([p.grad.flatten() for p in model.parameters()])))
    (lp0, g0), (lp1, g1) = results
    assert lp0.shape == lp1.shape and float(comp.sum()) > 0
    torch.testing.assert_close(lp1, lp0, rtol=0, atol=1e-5)
    torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-6)
