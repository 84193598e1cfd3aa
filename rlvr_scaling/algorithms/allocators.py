"""Rollout allocators: how the rollout budget B = P * G is spread over the P prompts of a rollout.

An allocator drives generation: it asks the engine for responses (possibly in several rounds, for a
subset of prompts), scores them, and returns all accumulated responses with their rewards. Every
response it generates counts on the ``responses`` clock.

- ``uniform``: G responses for every prompt, in one engine call (standard GRPO).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
class Allocation:
    generation: Generation
    rewards: torch.Tensor  # [N]
    rounds: int = 1


ALLOCATORS: Registry[type] = Registry("allocator")
PARAMS: dict[str, type] = {"uniform": UniformParams}


@ALLOCATORS.register("uniform")
class UniformAllocator:
    def __init__(self, params: UniformParams):
        self.params = params

    def collect(self, n_prompts: int, group_size: int, generate: GenerateFn, score: ScoreFn) -> Allocation:
        gen = generate(list(range(n_prompts)), [group_size] * n_prompts)
        return Allocation(gen, score(gen))


def build_allocator(params):
    return ALLOCATORS.get(params.name)(params)
