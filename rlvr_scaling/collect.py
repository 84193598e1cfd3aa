"""Phase 1 of a cycle: draw the rollout's prompts, allocate and generate the responses, score them.

Everything that decides *which* responses a rollout holds lives here: the data order, the allocator
(uniform or VIGOR), DAPO's dynamic sampling, ReMax's greedy baseline responses, and how generation and
scoring are split over the ranks of a data-parallel run. The result is a :class:`RolloutBatch`; every
response in it, every greedy response beside it and every response dynamic sampling drew and
discarded counts on the ``responses`` clock.

Dynamic sampling (``rollout.dynamic_sampling``; DAPO, Yu et al. 2025, "dynamic sampling"): a group
whose rewards all agree (zero sample variance of its scorable rewards, fewer than two scorable
rewards included) gives GRPO no gradient, so it is dropped and more prompts are drawn, the next P in
the data order per generation batch, until P groups with signal are collected; the rollout trains on
the first P of them in draw order (groups with signal beyond P are discarded, as DAPO truncates its
batch). The filter looks at the sampled rewards alone, whatever the baseline (ReMax's greedy
responses are generated afterwards, for the P prompts kept). The cap ``rollout.max_generation_batches``
(DAPO's max_num_gen_batches, the first batch included) ends the drawing; DAPO stops with an error
there, we fill the rollout up to P groups with the zero-variance groups drawn first
(``rollout/padded_prompts``), so that every update still holds B = P * G responses in K minibatches
of B/K and eta(B) means what it says (with grpo/rloo their advantages are zero: they change only the
loss normaliser of ``token_mean``). The data position advances by every prompt drawn; it is part of
the checkpoint. Logged per rollout: ``rollout/generation_batches``, ``rollout/drawn_prompts``,
``rollout/drawn_responses``, ``rollout/kept_prompts`` (groups with signal trained on),
``rollout/zero_variance_prompts``, ``rollout/surplus_prompts``, ``rollout/padded_prompts`` and
``rollout/discarded_responses`` (drawn, not trained on, on the clocks).

Data-parallel generation: each rank generates a contiguous block of the prompts (whole groups) with
its own engine, and the blocks are all-gathered in order, so every rank holds the whole rollout. The
sampling numbers are keyed by (seed, call within the rollout, the prompt's position in the data order,
response) (:class:`SampleKeys`), so N ranks draw what one process draws, and runs with one seed draw
the same numbers for a prompt at every rollout size.
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

from .algorithms.allocators import build_allocator, reward_variance
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
    discarded: Generation | None = None  # drawn by dynamic sampling, not trained on (on the clocks)
    rounds: int = 1  # allocator rounds
    stats: dict[str, float] = field(default_factory=dict)  # logged as rollout/<key>
    perf: dict[str, float] = field(default_factory=dict)  # seconds per sub-phase

    @property
    def n_prompts(self) -> int:
        return len(self.examples)


def generate_blocks(
    engine, dist, prompts, prompt_ids, counts, params: SamplingParams, seed: int, keys=None
) -> Generation:
    """Sample ``counts[i]`` responses to ``prompts[prompt_ids[i]]``; rows keyed by prompt id (so the
    result depends neither on batching nor on the number of ranks). The sampling numbers of prompt id
    ``q`` come from the stream ``(seed, keys[q])`` (``keys`` defaults to the prompt ids). Data-parallel:
    each rank generates a contiguous block of the prompts (whole groups) and the blocks are all-gathered
    in order: every rank returns the whole generation."""
    mine = dist.block(len(prompt_ids))
    ids = [prompt_ids[i] for i in mine]
    cnt = [counts[i] for i in mine]
    stream = tuple(int(keys[i]) for i in ids) if keys is not None else tuple(ids)
    local = None
    if sum(cnt) > 0 or not dist.enabled:
        local = engine.generate([prompts[i] for i in ids], cnt, params, SampleKeys(seed, stream))
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
    """Draws, generates and scores one rollout (allocator, dynamic sampling and ReMax's greedy
    responses included)."""

    def __init__(self, cfg, derived, task, engine, dist, needs: frozenset[str]):
        self.cfg, self.derived, self.task, self.engine, self.dist = cfg, derived, task, engine, dist
        self.allocator = build_allocator(cfg.allocator)
        self.needs_greedy = "greedy" in needs
        # the order in which training examples are drawn: a permutation fixed by the run seed
        self.order = np.random.default_rng(derived_seed(cfg.seed, "data")).permutation(task.num_train())
        r = cfg.rollout
        self.params = SamplingParams(r.max_new_tokens, r.temperature, r.top_p)
        # prompts drawn so far (checkpointed): dynamic sampling draws a variable number per rollout;
        # without it rollout r starts at r * P
        self.data_position = 0

    def examples_of(self, rollout: int, n_prompts: int, offset: int = 0) -> list:
        """The ``n_prompts`` training examples of rollout ``rollout`` (from position ``offset`` on)."""
        return self.examples_at(rollout * self.derived.prompts_per_rollout + offset, n_prompts)

    def examples_at(self, start: int, n_prompts: int) -> list:
        """``n_prompts`` training examples from position ``start`` of the data order (cycling)."""
        return [
            self.task.train_example(int(self.order[(start + j) % len(self.order)])) for j in range(n_prompts)
        ]

    def state_dict(self) -> dict:
        return {"data_position": self.data_position}

    def load_state_dict(self, state: dict) -> None:
        self.data_position = int(state.get("data_position", 0))

    def collect(self, rollout: int) -> RolloutBatch:
        cfg, d = self.cfg, self.derived
        if cfg.rollout.dynamic_sampling:
            examples = []  # grows with every generation batch
            positions: list[int] = []
        else:
            examples = self.examples_of(rollout, d.prompts_per_rollout)
            start = rollout * d.prompts_per_rollout
            positions = list(range(start, start + d.prompts_per_rollout))
        prompts = [e.prompt for e in examples]
        perf = {"generate_s": 0.0, "reward_s": 0.0}
        calls = itertools.count()

        def generate(prompt_ids: list[int], counts: list[int], sampling=self.params) -> Generation:
            t = time.perf_counter()
            # keyed by the prompt's position in the data order (not by rollout and index in it): runs
            # with one seed draw the same responses to a prompt whatever B, while their policies agree
            seed = derived_seed(cfg.seed, "sample", next(calls))
            gen = generate_blocks(
                self.engine, self.dist, prompts, prompt_ids, counts, sampling, seed, keys=positions
            )
            perf["generate_s"] += time.perf_counter() - t
            return gen

        def score(gen: Generation) -> torch.Tensor:
            t = time.perf_counter()
            rewards = score_blocks(
                self.task, self.dist, gen.texts, [examples[i] for i in gen.prompt_index.tolist()]
            )
            perf["reward_s"] += time.perf_counter() - t
            return as_reward_tensor(rewards)

        if cfg.rollout.dynamic_sampling:

            def draw(n_prompts: int) -> int:
                """Append the next ``n_prompts`` of the data order; returns the id of the first."""
                new = self.examples_at(self.data_position, n_prompts)
                positions.extend(range(self.data_position, self.data_position + n_prompts))
                self.data_position += n_prompts
                examples.extend(new)
                prompts.extend(e.prompt for e in new)
                return len(examples) - n_prompts

            batch, ids = self._dynamic(rollout, examples, draw, generate, score)
        else:
            alloc = self.allocator.collect(d.prompts_per_rollout, d.group_size, generate, score)
            batch = RolloutBatch(
                rollout,
                examples,
                alloc.generation,
                alloc.rewards,
                rounds=alloc.rounds,
                stats=dict(alloc.stats),
            )
            ids = list(range(d.prompts_per_rollout))
            self.data_position = (rollout + 1) * d.prompts_per_rollout
        batch.perf = perf
        if self.needs_greedy:  # ReMax: one greedy response per prompt, scored as the baseline
            greedy_params = SamplingParams(cfg.rollout.max_new_tokens, greedy=True)
            batch.greedy = generate(ids, [1] * len(ids), greedy_params)
            batch.greedy_rewards = score(batch.greedy)
            if cfg.rollout.dynamic_sampling:  # drawn ids -> the rollout's prompt ids 0..P-1
                batch.greedy.prompt_index = torch.arange(len(ids))
        return batch

    def _dynamic(self, rollout: int, examples: list, draw, generate, score) -> tuple[RolloutBatch, list[int]]:
        """DAPO's dynamic sampling (module docstring): generation batches of P prompts until P groups
        with signal, at most ``rollout.max_generation_batches``. Returns the rollout (its P prompts
        renumbered 0..P-1 in draw order; everything else drawn as ``discarded``) and the drawn ids of
        its prompts."""
        cfg, d = self.cfg, self.derived
        p = d.prompts_per_rollout
        parts, rewards = [], []
        signal: list[int] = []  # prompt ids (into the drawn examples) of groups with reward variance
        flat: list[int] = []  # zero-variance prompt ids, in draw order
        batches = 0
        while len(signal) < p and batches < cfg.rollout.max_generation_batches:
            first = draw(p)
            offset = lambda ids, counts, first=first: generate([first + i for i in ids], counts)  # noqa: E731
            alloc = self.allocator.collect(p, d.group_size, offset, score)  # uniform: G per prompt
            var = reward_variance(alloc.rewards, alloc.generation.prompt_index - first, p)
            signal += [first + j for j in range(p) if var[j] > 0]
            flat += [first + j for j in range(p) if not var[j] > 0]
            parts.append(alloc.generation)
            rewards.append(alloc.rewards)
            batches += 1
        chosen = (signal + flat[: max(0, p - len(signal))])[:p]
        gen = Generation.concat(parts, self.engine.pad_id)
        all_rewards = torch.cat(rewards)
        slot = {q: j for j, q in enumerate(chosen)}
        index = gen.prompt_index.tolist()
        rows = sorted((i for i, q in enumerate(index) if q in slot), key=lambda i: (slot[index[i]], i))
        keep = torch.tensor(rows, dtype=torch.long)
        drop = torch.tensor(sorted(set(range(len(gen))) - set(rows)), dtype=torch.long)
        trained = gen.select(keep)
        trained.prompt_index = torch.tensor([slot[index[i]] for i in rows], dtype=torch.long)
        drawn_prompts = batches * p
        kept = min(len(signal), p)
        stats = {
            "generation_batches": batches,
            "drawn_prompts": drawn_prompts,
            "drawn_responses": len(gen),
            "kept_prompts": kept,
            "zero_variance_prompts": len(flat),
            "surplus_prompts": len(signal) - kept,
            "padded_prompts": p - kept,
            "discarded_responses": int(drop.numel()),
        }
        batch = RolloutBatch(
            rollout,
            [examples[q] for q in chosen],
            trained,
            all_rewards[keep],
            discarded=gen.select(drop) if drop.numel() else None,
            rounds=batches,
            stats=stats,
        )
        return batch, chosen
