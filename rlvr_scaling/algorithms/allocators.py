"""Rollout allocators: how the rollout budget B = P * G is spread over the P prompts of a rollout.

An allocator drives generation: it asks the engine for responses (possibly in several rounds, for a
subset of prompts), scores them, and returns all accumulated responses with their rewards. Every
response it generates counts on the ``responses`` clock.

- ``uniform``: G responses for every prompt, in one engine call (standard GRPO).
- ``vigor`` (VIGOR, Jiang, Liu & Mirzasoleiman 2026): variance-guided progressive allocation of the
  same budget B = P * G (G is the *average* budget per prompt). Round 0 samples m_0 responses for every
  prompt. Each refinement round t = 1..T scores the active prompts by the sample variance of all their
  rewards so far, keeps the top ceil(alpha * n_active) (ties broken by prompt order, which is already a
  random draw), and samples m_t = m_0 * gamma^t *new* responses for each kept prompt (our reading of the
  paper's "m_{t+1} = gamma * m_t": the per-round allotment of a surviving prompt grows by gamma). The
  round that would overrun the budget, or round T at the latest, is the last one: it spreads exactly
  the remaining responses over its prompts (evenly, the remainder one each to the highest-variance
  ones), so every rollout spends exactly B responses and the K minibatches split N = B as usual. The
  update uses all accumulated responses (groups of unequal size; every baseline handles them). With
  alpha * gamma = 1 every round costs P * m_0, so m_0 = G / (T + 1) spends B in exactly T + 1 rounds
  (defaults: alpha = 1/2, gamma = 2, T = 3, m_0 = G / 4 = 2 at G = 8: 16x2, 8x4, 4x8, 2x16 responses).
  ``initial_responses: null`` derives m_0 = max(2, floor(G / sum_{t<=T} (alpha gamma)^t)).
  Deviation: the paper stops "when the budget is spent or the rounds are done" (so a step may use less
  than its budget); here the last round always fills the budget exactly, so VIGOR and the uniform
  allocator compare at equal responses per rollout. The paper's m_0, T, alpha, gamma are not known to
  us; the defaults above are our choice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..engines.base import Generation
from ..registry import Registry

GenerateFn = Callable[[list[int], list[int]], Generation]  # (prompt ids, counts) -> generation
ScoreFn = Callable[[Generation], torch.Tensor]  # generation -> rewards [N] (NaN = unscorable)


@dataclass
class UniformParams:
    name: str = "uniform"

    def validate(self, prefix: str = "allocator") -> None:
        pass


@dataclass
class VigorParams:
    """Variance-guided progressive rollout allocation (VIGOR) at the uniform allocator's budget B = P * G."""

    name: str = "vigor"
    initial_responses: int | None = None  # m_0 per prompt in round 0; null = derived from G (see above)
    rounds: int = 3  # T: refinement rounds after round 0 (the last one fills the budget exactly)
    keep_fraction: float = 0.5  # alpha: fraction of the active prompts kept each round, by reward variance
    expansion: float = 2.0  # gamma: m_t = m_0 * gamma^t new responses per kept prompt in round t

    def validate(self, prefix: str = "allocator") -> None:
        from ..errors import ConfigError

        if self.initial_responses is not None and self.initial_responses < 2:
            raise ConfigError(
                f"{prefix}.initial_responses must be >= 2 (a reward variance needs two responses) "
                f"or null (got {self.initial_responses})"
            )
        if self.rounds < 0:
            raise ConfigError(f"{prefix}.rounds must be >= 0 (got {self.rounds})")
        if not 0 < self.keep_fraction <= 1:
            raise ConfigError(f"{prefix}.keep_fraction must be in (0, 1] (got {self.keep_fraction})")
        if not self.expansion >= 1:
            raise ConfigError(f"{prefix}.expansion must be >= 1 (got {self.expansion})")


@dataclass
class Allocation:
    generation: Generation
    rewards: torch.Tensor  # [N]
    rounds: int = 1
    stats: dict[str, float] = field(default_factory=dict)  # logged as rollout/<key>


ALLOCATORS: Registry[type] = Registry("allocator")
PARAMS: dict[str, type] = {"uniform": UniformParams, "vigor": VigorParams}


@ALLOCATORS.register("uniform")
class UniformAllocator:
    def __init__(self, params: UniformParams):
        self.params = params

    def collect(self, n_prompts: int, group_size: int, generate: GenerateFn, score: ScoreFn) -> Allocation:
        gen = generate(list(range(n_prompts)), [group_size] * n_prompts)
        return Allocation(gen, score(gen))


def initial_responses(params: VigorParams, group_size: int) -> int:
    """m_0: configured, or the largest m_0 >= 2 whose planned rounds fit in G per prompt."""
    if params.initial_responses is not None:
        return params.initial_responses
    rate = params.keep_fraction * params.expansion
    per_prompt_rounds = sum(rate**t for t in range(params.rounds + 1))
    return max(2, math.floor(group_size / per_prompt_rounds + 1e-9))


def reward_variance(rewards: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Sample (Bessel) variance of each prompt's scorable rewards, [n_groups]; 0 with fewer than two."""
    valid = ~torch.isnan(rewards)
    r = torch.where(valid, rewards, torch.zeros_like(rewards)).double()
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group, valid.double())
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group, r)
    mean = total / count.clamp(min=1)
    dev = torch.where(valid, r - mean[group], torch.zeros_like(r))
    ss = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group, dev**2)
    return torch.where(count > 1, ss / (count - 1).clamp(min=1), torch.zeros_like(ss))


def _pad_id(parts: list[Generation]) -> int:
    """The padding id the engine used (any id works under a zero attention mask)."""
    for p in parts:
        off = p.attention_mask == 0
        if off.any():
            return int(p.input_ids[off][0])
    return 0


@ALLOCATORS.register("vigor")
class VigorAllocator:
    def __init__(self, params: VigorParams):
        self.params = params

    def plan(self, n_prompts: int, group_size: int) -> list[tuple[int, int]]:
        """The nominal schedule [(prompts, new responses per prompt)] per round, before the budget cut."""
        m0, p = initial_responses(self.params, group_size), self.params
        out, active = [], n_prompts
        for t in range(p.rounds + 1):
            if t:
                active = max(1, math.ceil(p.keep_fraction * active - 1e-9))
            out.append((active, max(1, round(m0 * p.expansion**t))))
        return out

    def collect(self, n_prompts: int, group_size: int, generate: GenerateFn, score: ScoreFn) -> Allocation:
        budget = n_prompts * group_size
        plan = self.plan(n_prompts, group_size)
        parts: list[Generation] = []
        rewards: list[torch.Tensor] = []
        counts = torch.zeros(n_prompts, dtype=torch.long)
        ranked = list(range(n_prompts))  # active prompts, highest reward variance first
        spent, rounds = 0, 0
        for t, (n_active, per_prompt) in enumerate(plan):
            if t:
                group = torch.cat([p.prompt_index for p in parts])
                var = reward_variance(torch.cat(rewards), group, n_prompts)
                order = torch.argsort(-var[ranked], stable=True)
                ranked = [ranked[i] for i in order[:n_active].tolist()]
            remaining = budget - spent
            last = t == len(plan) - 1 or len(ranked) * per_prompt >= remaining
            new = torch.zeros(n_prompts, dtype=torch.long)
            if last:  # spread exactly the remainder: evenly, one extra each to the top-ranked
                base, extra = divmod(remaining, len(ranked))
                for j, q in enumerate(ranked):
                    new[q] = base + (j < extra)
            else:
                new[ranked] = per_prompt
            ids = [q for q in range(n_prompts) if new[q] > 0]
            gen = generate(ids, [int(new[q]) for q in ids])
            parts.append(gen)
            rewards.append(score(gen))
            counts += new
            spent += len(gen)
            rounds += 1
            if last:
                break
        generation = Generation.concat(parts, _pad_id(parts))
        hist: dict[str, float] = {}
        for c in counts.tolist():
            hist[f"alloc_hist_{c}"] = hist.get(f"alloc_hist_{c}", 0) + 1
        stats = {
            "alloc_min": int(counts.min()),
            "alloc_max": int(counts.max()),
            "alloc_expanded_prompts": int((counts > counts.min()).sum()),
            **dict(sorted(hist.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[1]))),
        }
        return Allocation(generation, torch.cat(rewards), rounds=rounds, stats=stats)


def build_allocator(params):
    return ALLOCATORS.get(params.name)(params)
