"""The FLOPs clocks on a hand-counted rollout: ``flops`` charges the passes that ran (one prefill per
distinct prompt, one token per decoding step, no zero-advantage rows, the old-log-prob and reference
passes only when they ran, the drift pass after the last step), ``flops_nominal`` the fixed formula;
old checkpoints without the new clock still restore (rlvr_scaling/accounting.py, docs/flops.md)."""

from __future__ import annotations

import pytest
import torch

from rlvr_scaling.accounting import FlopMeter, flop_constants
from rlvr_scaling.clocks import Clocks
from rlvr_scaling.config import derive
from rlvr_scaling.run import build_components
from rlvr_scaling.trainer import Trainer
from tests.conftest import tiny_config


def _tri(n: int) -> int:
    return n * (n + 1) // 2


class Hand:
    """F = 2 N_body T + 2 N_head K + 4 n_layers d_attn sum(context), written out per phase."""

    def __init__(self, model):
        self.body, self.head, self.attn = flop_constants(model)

    def f(self, tokens: int, logits: int, context: int) -> float:
        return 2.0 * self.body * tokens + 2.0 * self.head * logits + 4.0 * self.attn * context

    def generation(self, p: list[int], c: list[int], prompt_of: list[int]) -> float:
        """HF engine, one call: each distinct prompt prefilled once (its last position's logits), then
        c_i - 1 one-token steps per response, step t attending to p_i + t positions."""
        first = {}
        for i, j in enumerate(prompt_of):
            first.setdefault(j, i)
        total = sum(self.f(p[i], 1, _tri(p[i])) for i in first.values())
        for pi, ci in zip(p, c):
            total += self.f(ci - 1, ci - 1, sum(pi + t for t in range(1, ci)))
        return total

    def shared_pass(self, rows: list[int], p, c, prompt_of) -> float:
        """A no-grad log-prob pass over ``rows``: each distinct prompt once, then the completions'
        first lc - 1 columns on top of the prompt cache (lc = the longest completion)."""
        if not rows:
            return 0.0
        distinct = {prompt_of[i]: i for i in rows}
        total = sum(self.f(p[i], 1, _tri(p[i])) for i in distinct.values())
        lc = max(c[i] for i in rows)
        if lc > 1:
            for i in rows:
                r = min(c[i], lc - 1)
                total += self.f(r, r, sum(p[i] + t + 1 for t in range(r)))
        return total

    def per_sample(self, rows: list[int], p, c) -> float:
        """The exact per-sample gradient pass (with backward, 3x): each row's prompt and completion,
        logits from the prompt's last position on."""
        return 3.0 * sum(self.f(p[i] + c[i], c[i] + 1, _tri(p[i] + c[i])) for i in rows)

    def plain(self, rows: list[int], p, c) -> float:
        """A no-grad forward over each row's prompt and completion, logits from the prompt's last
        position on (the drift pass after the last step)."""
        return sum(self.f(p[i] + c[i], c[i] + 1, _tri(p[i] + c[i])) for i in rows)

    def training(self, rows: list[int], p, c) -> float:
        """One packed forward with backward (3x) over each trained row's prompt and completion."""
        return 3.0 * sum(self.f(p[i] + c[i], c[i], _tri(p[i] + c[i])) for i in rows)


def _drift_sample(steps, k: int) -> list[int]:
    """The drift pass's rows (Trainer._final_drift): the first min(B/K, 16) loss rows of the first
    epoch, in the plan's order."""
    from rlvr_scaling.trainer import DRIFT_RESPONSES

    order = [int(i) for _, a in steps[:k] for i in a]
    return order[: min(len(steps[0][0]), DRIFT_RESPONSES, len(order))]


@pytest.fixture
def mixed_rewards(monkeypatch):
    """Groups whose prompt starts with an odd digit get varying rewards (an even number of characters
    scores 1), the others a
    constant 0, so a rollout both trains on rows and skips rows with zero advantage. The model, engine
    and trainer stay real; only the verifier's rule changes."""
    from rlvr_scaling.tasks.reasoning_gym_task import ReasoningGymTask

    def score(self, texts, examples):
        return [float(len(t) % 2 == 0) if e.prompt[0] in "13579" else 0.0 for t, e in zip(texts, examples)]

    monkeypatch.setattr(ReasoningGymTask, "score", score)


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # pi_old from the sampling pass, no reference model
        {"optim.old_logprobs": "recompute", "loss.kl_coef": 0.04, "optim.micro_batch_responses": 2},
        {"baseline": "optimal"},  # + the exact per-sample gradient pass for the baseline's weights
    ],
    ids=["behaviour", "recompute+kl+micro", "optimal-baseline"],
)
def test_flops_of_a_hand_counted_rollout(cache_dir, tmp_path, mixed_rewards, overrides):
    overrides = dict(overrides)
    optimal = overrides.pop("baseline", None) == "optimal"
    cfg = tiny_config(cache_dir, **overrides)
    if optimal:
        from rlvr_scaling.algorithms.baselines import OptimalParams

        cfg.baseline = OptimalParams(weights="exact")
    cfg.rollout.max_new_tokens = 6
    comps = build_components(cfg, log=lambda *_: None)
    trainer = Trainer(cfg, derive(cfg), tmp_path, comps, log=lambda *_: None)
    trainer.state.next_eval_at = 1 << 40  # no evaluation (not training work in any case)
    seen = {}
    collect, plan = trainer.collector.collect, trainer.optim.plan
    trainer.collector.collect = lambda r: seen.setdefault("batch", collect(r))
    trainer.optim.plan = lambda *a: seen.setdefault("plan", plan(*a))
    trainer._rollout()
    batch, steps = seen["batch"], seen["plan"]
    gen = batch.gen
    p = gen.attention_mask[:, : gen.prompt_width].sum(1).tolist()
    c = gen.completion_lengths.tolist()
    prompt_of = gen.prompt_index.tolist()
    needed = sorted({int(i) for _, active in steps for i in active})
    trained = [int(i) for _, active in steps for i in active]
    skipped = len(gen) * cfg.optim.epochs - len(trained)
    assert trained
    # without a KL term rows with zero advantage are skipped (with one, every row has a gradient)
    assert (skipped > 0) == (cfg.loss.kl_coef == 0), skipped
    hand = Hand(comps.model)
    expected = {
        "generation": hand.generation(p, c, prompt_of),
        "old log-probs": 0.0 if trainer.logprobs.behaviour else hand.shared_pass(needed, p, c, prompt_of),
        "reference": hand.shared_pass(needed, p, c, prompt_of) if comps.ref_model is not None else 0.0,
        "training": hand.training(trained, p, c),
        "drift": hand.plain(_drift_sample(steps, cfg.optim.steps_per_rollout), p, c),
    }
    if optimal:  # one forward with backward over the scorable rows of groups whose rewards vary
        rows = [i for i in range(len(gen)) if i in {int(j) for _, a in steps for j in a}]
        expected["baseline weights"] = hand.per_sample(rows, p, c)
    assert trainer.logprobs.behaviour == ("optim.old_logprobs" not in overrides)
    assert (trainer.advantage_phase.weights_kind == "exact") == optimal
    print(f"\n[flops] {overrides}: {expected}; clock {trainer.clocks.flops:.6g}")
    assert trainer.clocks.flops == pytest.approx(sum(expected.values()), rel=1e-9)
    # the nominal clock: 2N generation + 2N per log-prob pass (old, and reference with KL) + 6N
    # training, on every response's prompt + completion tokens; N = all parameters
    n = sum(q.numel() for q in comps.model.parameters())
    seq = sum(p) + sum(c)
    passes = 2 + 2 * (1 + (comps.ref_model is not None)) + 6
    assert trainer.clocks.flops_nominal == pytest.approx(n * passes * seq, rel=1e-12)


def test_meter_counts_contexts_and_kept_logits():
    """The meter's reading of a call's inputs: left padding, position ids, logits_to_keep."""
    from rlvr_scaling.models import build_embedded_model, build_tokenizer

    tok = build_tokenizer()
    from rlvr_scaling.models import EmbeddedModelConfig

    model = build_embedded_model(EmbeddedModelConfig(hidden_size=32, num_layers=2, num_heads=2), tok)
    meter = FlopMeter(model)
    meter.attach(model)
    hand = Hand(model)
    ids = torch.tensor([[0, 0, 7, 8, 9], [5, 6, 7, 8, 9]])
    mask = (ids != 0).long()
    with torch.no_grad():
        meter.start()
        model(input_ids=ids, attention_mask=mask, logits_to_keep=1)
        # no position ids: contexts from the mask (1..3 and 1..5), logits of the last column
        assert meter.stop() == pytest.approx(hand.f(8, 2, 6 + 15))
        meter.start()
        model(input_ids=ids[:, -1:], attention_mask=mask, position_ids=torch.tensor([[3], [5]]))
        assert meter.stop() == pytest.approx(hand.f(2, 2, 4 + 6))
    meter.start()
    model(input_ids=ids, attention_mask=mask).logits.sum().backward()  # with gradient: x3
    assert meter.stop() == pytest.approx(3 * hand.f(8, 8, 6 + 15))
    meter.detach()
    meter.start()
    model(input_ids=ids)
    assert meter.stop() == 0.0


def test_flop_constants_of_a_qwen2_shape():
    """N_body: the linear layers (q, k, v with biases, o, MLP); N_head: vocabulary x hidden; attention:
    layers x heads x head_dim."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        tie_word_embeddings=True,
    )
    body, head, attn = flop_constants(Qwen2ForCausalLM(cfg))
    d, kv = 64, 2 * 16
    per_layer = (d * d + d) + 2 * (d * kv + kv) + d * d + 3 * d * 96
    assert (body, head, attn) == (2 * per_layer, 100 * 64, 2 * 64)


def test_clocks_from_an_older_checkpoint_restore():
    old = {
        "rollout": 3,
        "responses": 48,
        "tokens": 100,
        "optimizer_steps": 6,
        "wall_seconds": 12.5,
        "flops": 7.0e9,
        "eval_responses": 32,
    }
    clocks = Clocks()
    clocks.restore(old)
    assert clocks.flops_nominal == 7.0e9  # the old clock was the nominal count
    assert clocks.flops == 7.0e9 and clocks.responses == 48 and clocks.wall_seconds >= 12.5
    assert Clocks.from_dict({**old, "flops_nominal": 9.0}).flops_nominal == 9.0
