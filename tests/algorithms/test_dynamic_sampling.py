"""DAPO dynamic sampling inside the real trainer: it trains on groups with signal, draws the next
prompts of the data order, and every response it generates is on the clocks."""

from __future__ import annotations

import json

import pytest
import torch

import rlvr_scaling.collect as collect_module
from rlvr_scaling.algorithms.allocators import VigorParams, reward_variance
from rlvr_scaling.algorithms.baselines import ReMaxParams
from rlvr_scaling.collect import Collector
from rlvr_scaling.config import derive, validate
from rlvr_scaling.distributed import DistEnv
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.run import build_components, train
from tests.conftest import tiny_config


@pytest.fixture
def some_flat_groups(monkeypatch):
    """A verifier under which about a sixth of the prompts can never vary (reward 0 whatever the
    answer) and the others score the parity of the completion's length: groups of both kinds."""
    from rlvr_scaling.tasks.reasoning_gym_task import ReasoningGymTask

    def score(self, texts, examples):
        return [
            0.0 if sum(map(ord, e.prompt)) % 6 == 0 else float(len(t) % 2 == 0)
            for t, e in zip(texts, examples)
        ]

    monkeypatch.setattr(ReasoningGymTask, "score", score)


class Recorder:
    """Wraps collect.generate_blocks and Collector.collect, to count what the engine generated for
    training in each rollout (calls outside Collector.collect, i.e. evaluation, are not counted)."""

    def __init__(self, monkeypatch):
        self.calls: list[dict] = []
        self.batches: list = []
        self.active = False
        original_generate = collect_module.generate_blocks
        original_collect = Collector.collect
        rec = self

        def generate_blocks(engine, dist, prompts, prompt_ids, counts, params, seed, keys=None):
            gen = original_generate(engine, dist, prompts, prompt_ids, counts, params, seed, keys=keys)
            if not rec.active:
                return gen
            rec.calls[-1]["responses"] += len(gen)
            rec.calls[-1]["tokens"] += gen.num_tokens
            rec.calls[-1]["greedy"] += len(gen) if params.greedy else 0
            rec.calls[-1]["prompts"] += [prompts[i] for i in prompt_ids] if not params.greedy else []
            return gen

        def collect(self, rollout):
            rec.calls.append({"responses": 0, "tokens": 0, "greedy": 0, "prompts": []})
            rec.active = True
            try:
                batch = original_collect(self, rollout)
            finally:
                rec.active = False
            rec.batches.append(batch)
            rec.collector = self
            return batch

        monkeypatch.setattr(collect_module, "generate_blocks", generate_blocks)
        monkeypatch.setattr(Collector, "collect", collect)


def no_detectors(cfg):
    """Runs here end at their budget: the tiny model's noisy accuracy would trip collapse detectors."""
    from rlvr_scaling.algorithms.failure import DETECTORS

    for name in DETECTORS.names():
        setattr(cfg.failure, name, None)


def _train_rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "train/reward_mean" in r]


def test_dynamic_sampling_spends_and_counts_exactly_what_it_generates(
    cache_dir, tmp_path, monkeypatch, some_flat_groups
):
    cfg = tiny_config(cache_dir, baseline=ReMaxParams())  # ReMax: greedy responses for the kept prompts
    cfg.rollout.dynamic_sampling = True
    cfg.rollout.max_generation_batches = 3
    cfg.train.max_responses = 512  # ~14 rollouts: both cases below occur whatever the warm start
    no_detectors(cfg)
    rec = Recorder(monkeypatch)
    train(cfg, tmp_path, log=lambda *_: None)
    rows = _train_rows(tmp_path)
    p, g = cfg.rollout.prompts_per_rollout, cfg.rollout.group_size
    assert len(rows) == len(rec.calls) >= 4
    previous = {"responses": 0, "tokens": 0}
    drawn_prompts = []
    for row, call, batch in zip(rows, rec.calls, rec.batches):
        sampled = call["responses"] - call["greedy"]
        # the clocks advance by exactly what the engine generated for training, greedy included
        assert row["responses"] - previous["responses"] == call["responses"]
        assert row["tokens"] - previous["tokens"] == call["tokens"]
        previous = row
        assert row["rollout/drawn_responses"] == sampled == row["rollout/drawn_prompts"] * g
        assert row["rollout/drawn_prompts"] == row["rollout/generation_batches"] * p
        assert row["rollout/greedy_responses"] == call["greedy"] == p
        assert row["rollout/responses"] == p * g == len(batch.gen)
        assert row["rollout/discarded_responses"] == sampled - p * g
        assert row["rollout/kept_prompts"] + row["rollout/padded_prompts"] == p
        drawn = (
            row["rollout/kept_prompts"]
            + row["rollout/surplus_prompts"]
            + row["rollout/zero_variance_prompts"]
        )
        assert drawn == row["rollout/drawn_prompts"]
        # the trained groups: first the kept ones (reward variance > 0), then padding (none)
        var = reward_variance(batch.rewards, batch.gen.prompt_index, p)
        kept = row["rollout/kept_prompts"]
        assert bool((var[:kept] > 0).all()) and bool((var[kept:] == 0).all())
        assert batch.gen.prompt_index.tolist() == [j for j in range(p) for _ in range(g)]
        assert row["rollout/padded_prompts"] == 0 or row["rollout/generation_batches"] == 3
        drawn_prompts += call["prompts"]
    # prompts are drawn in the data order, none skipped and none twice
    assert drawn_prompts == [e.prompt for e in rec.collector.examples_at(0, len(drawn_prompts))]
    assert rec.collector.data_position == len(drawn_prompts)
    # the test saw both cases: extra generation batches, and rollouts that needed none
    batches = {r["rollout/generation_batches"] for r in rows}
    assert 1 in batches and max(batches) > 1


def test_at_the_cap_the_rollout_is_padded_with_zero_variance_groups(cache_dir, tmp_path, monkeypatch):
    """The tiny warm start's rewards are all zero: no group ever has signal, so every rollout draws the
    maximum, trains on B padded responses with zero advantage and counts every drawn response."""
    cfg = tiny_config(cache_dir)
    cfg.rollout.dynamic_sampling = True
    cfg.rollout.max_generation_batches = 2
    cfg.train.max_responses = 96
    rec = Recorder(monkeypatch)
    train(cfg, tmp_path, log=lambda *_: None)
    rows = _train_rows(tmp_path)
    b = cfg.rollout.prompts_per_rollout * cfg.rollout.group_size
    assert [r["responses"] for r in rows] == [2 * b, 4 * b, 6 * b]
    for r, call in zip(rows, rec.calls):
        assert (
            r["rollout/padded_prompts"] == cfg.rollout.prompts_per_rollout and r["rollout/kept_prompts"] == 0
        )
        assert r["rollout/drawn_responses"] == call["responses"] == 2 * b
        assert r["rollout/responses"] == b and r["rollout/responses_in_gradient"] == 0
        assert r["train/zero_adv_frac"] == 1.0
    # padding takes the zero-variance groups drawn first: the rollout's first batch
    assert [e.prompt for e in rec.batches[1].examples] == rec.calls[1]["prompts"][
        : cfg.rollout.prompts_per_rollout
    ]


def test_a_first_batch_with_signal_everywhere_is_the_plain_rollout(cache_dir, varied_rewards):
    """Dynamic sampling draws its first batch exactly as the plain collector draws the rollout: when
    every group has signal, the rollouts are identical."""
    cfg = tiny_config(cache_dir)
    comps = build_components(cfg, log=lambda *_: None)
    plain = Collector(cfg, derive(cfg), comps.task, comps.engine, DistEnv(), frozenset())
    dyn_cfg = tiny_config(cache_dir)
    dyn_cfg.rollout.dynamic_sampling = True
    dynamic = Collector(dyn_cfg, derive(dyn_cfg), comps.task, comps.engine, DistEnv(), frozenset())
    outcomes = set()
    for r in range(8):
        dynamic.data_position = r * cfg.rollout.prompts_per_rollout
        a, b = plain.collect(r), dynamic.collect(r)
        one_batch = b.stats["generation_batches"] == 1
        outcomes.add(one_batch)
        if one_batch:
            assert b.discarded is None and [e.prompt for e in a.examples] == [e.prompt for e in b.examples]
            for key in ("input_ids", "attention_mask", "behaviour_logprobs", "prompt_index"):
                assert torch.equal(getattr(a.gen, key), getattr(b.gen, key)), key
            assert torch.equal(a.rewards, b.rewards)
        else:  # the first batch of a longer draw is still the plain rollout's prompts
            assert b.stats["drawn_prompts"] > cfg.rollout.prompts_per_rollout
    assert outcomes == {True, False}
    comps.task.close()


def test_dynamic_sampling_with_vigor_is_refused(cache_dir):
    cfg = tiny_config(cache_dir, allocator=VigorParams())
    cfg.rollout.dynamic_sampling = True
    with pytest.raises(ConfigError, match=r"rollout\.dynamic_sampling needs allocator=uniform"):
        validate(cfg)
    cfg.allocator = tiny_config(cache_dir).allocator
    cfg.rollout.max_generation_batches = 0
    with pytest.raises(ConfigError, match=r"rollout\.max_generation_batches must be >= 1"):
        validate(cfg)
