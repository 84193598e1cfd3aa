"""Phase 1 of a cycle: draw the rollout's prompts, allocate and generate the responses, score them.

Everything that decides *which* responses a rollout holds lives here: the data order, the allocator
(uniform or VIGOR), ReMax's greedy baseline responses, and how generation and scoring are split over
the ranks of a data-parallel run. The result is a :class:`RolloutBatch`; every response in it (and
every greedy response beside it) counts on the ``responses`` clock.

Data-parallel generation: each rank generates a contiguous block of the prompts (whole groups) with
its own engine, and the blocks are all-gathered in order, so every rank holds the whole rollout. The
sampling numbers are keyed by (seed, rollout, call, prompt, response) (:class:`SampleKeys`), so N
ranks draw what one process draws.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .algorithms.allocators import build_allocator
from .engines.base import Generation, SampleKeys, SamplingParams


def derived_seed(*parts: Any) -> int:
    """A 63-bit seed from any parts (run seed, purpose, counters): stable across processes and runs."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass
class RolloutBatch:
    """One rollout's responses and rewards, identical on every rank."""

    rollout: int  # 0-based index of this rollout
    examples: list  # the P task examples, in rollout order (prompt id j -> examples[j])
    gen: Generation  # the responses trained on (rows keyed by prompt id)
    rewards: torch.Tensor  # [N] float64, NaN = unscorable
    greedy: Generation | None = None  # ReMax's greedy responses (on the clocks, not trained on)
    greedy_rewards: torch.Tensor | None = None  # [P]
    rounds: int = 1  # allocator rounds
    stats: dict[str, float] = field(default_factory=dict)  # logged as rollout/<key>
    perf: dict[str, float] = field(default_factory=dict)  # seconds per sub-phase

    @property
    def n_prompts(self) -> int:
        return len(self.examples)


def generate_blocks(
    engine, dist, prompts, prompt_ids, counts, params: SamplingParams, seed: int
) -> Generation:
    """Sample ``counts[i]`` responses to ``prompts[prompt_ids[i]]``; rows keyed by prompt id (so the
    result depends neither on batching nor on the number of ranks). Data-parallel: each rank generates
    a contiguous block of the prompts (whole groups) and the blocks are all-gathered in order: every
    rank returns the whole generation."""
    mine = dist.block(len(prompt_ids))
    ids = [prompt_ids[i] for i in mine]
    cnt = [counts[i] for i in mine]
    local = None
    if sum(cnt) > 0 or not dist.enabled:
        local = engine.generate([prompts[i] for i in ids], cnt, params, SampleKeys(seed, tuple(ids)))
        local.prompt_index = torch.tensor(ids, dtype=torch.long)[local.prompt_index]
    if not dist.enabled:
        return local
    parts = [p for p in dist.all_gather_object(local) if p is not None]
    return Generation.concat(parts, engine.pad_id)


def score_blocks(task, dist, texts: list[str], examples: list) -> list[float | None]:
    """Rewards of ``texts``; data-parallel, each rank scores a block and the blocks are gathered."""
    if not dist.enabled:
        return task.score(texts, examples)
    blk = dist.block(len(texts))
    mine = task.score(texts[blk.start : blk.stop], examples[blk.start : blk.stop]) if len(blk) else []
    return [x for part in dist.all_gather_object(list(mine)) for x in part]


def as_reward_tensor(rewards: list[float | None]) -> torch.Tensor:
    return torch.tensor([math.nan if x is None else float(x) for x in rewards], dtype=torch.float64)


class Collector:
    """Draws, generates and scores one rollout (allocator and ReMax's greedy responses included)."""

    def __init__(self, cfg, derived, task, engine, dist, needs: frozenset[str]):
        self.cfg, self.derived, self.task, self.engine, self.dist = cfg, derived, task, engine, dist
        self.allocator = build_allocator(cfg.allocator)
        self.needs_greedy = "greedy" in needs
        # the order in which training examples are drawn: a permutation fixed by the run seed
        self.order = np.random.default_rng(derived_seed(cfg.seed, "data")).permutation(task.num_train())
        r = cfg.rollout
        self.params = SamplingParams(r.max_new_tokens, r.temperature, r.top_p)

    def examples_of(self, rollout: int, n_prompts: int, offset: int = 0) -> list:
        """The ``n_prompts`` training examples of rollout ``rollout`` (from position ``offset`` on)."""
        start = rollout * self.derived.prompts_per_rollout + offset
        return [
            self.task.train_example(int(self.order[(start + j) % len(self.order)])) for j in range(n_prompts)
        ]

    def collect(self, rollout: int) -> RolloutBatch:
        cfg, d = self.cfg, self.derived
        examples = self.examples_of(rollout, d.prompts_per_rollout)
        prompts = [e.prompt for e in examples]
        perf = {"generate_s": 0.0, "reward_s": 0.0}
        calls = itertools.count()

        def generate(prompt_ids: list[int], counts: list[int], sampling=self.params) -> Generation:
            t = time.perf_counter()
            seed = derived_seed(cfg.seed, "sample", rollout, next(calls))
            gen = generate_blocks(self.engine, self.dist, prompts, prompt_ids, counts, sampling, seed)
            perf["generate_s"] += time.perf_counter() - t
            return gen

        def score(gen: Generation) -> torch.Tensor:
            t = time.perf_counter()
            rewards = score_blocks(
                self.task, self.dist, gen.texts, [examples[i] for i in gen.prompt_index.tolist()]
            )
            perf["reward_s"] += time.perf_counter() - t
            return as_reward_tensor(rewards)

        alloc = self.allocator.collect(d.prompts_per_rollout, d.group_size, generate, score)
        batch = RolloutBatch(
            rollout,
            examples,
            alloc.generation,
            alloc.rewards,
            rounds=alloc.rounds,
            stats=dict(alloc.stats),
            perf=perf,
        )
        if self.needs_greedy:  # ReMax: one greedy response per prompt, scored as the baseline
            greedy_params = SamplingParams(cfg.rollout.max_new_tokens, greedy=True)
            batch.greedy = generate(
                list(range(d.prompts_per_rollout)), [1] * d.prompts_per_rollout, greedy_params
            )
            batch.greedy_rewards = score(batch.greedy)
        return batch
