"""The run's clocks (DESIGN.md §3): monotone counters carried on every metrics row."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass


@dataclass
class Clocks:
    rollout: int = 0  # completed rollouts (policy-update cycles)
    responses: int = 0  # every response generated for training (the primary clock)
    tokens: int = 0  # completion tokens generated for training
    optimizer_steps: int = 0
    wall_seconds: float = 0.0  # active time, continued across resumes
    flops: float = 0.0  # estimated training + generation FLOPs (2N per token forward, 6N forward+backward)
    eval_responses: int = 0  # validation responses (not on the training clocks)

    def __post_init__(self) -> None:
        self._started = time.perf_counter()
        self._base = self.wall_seconds

    def tick(self) -> None:
        self.wall_seconds = self._base + (time.perf_counter() - self._started)

    def as_dict(self) -> dict:
        self.tick()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def restore(self, data: dict) -> None:
        """Continue from saved clock values (a resumed run): wall time goes on from the saved value."""
        for f in dataclasses.fields(self):  # a clock an older checkpoint lacks keeps its default
            setattr(self, f.name, data.get(f.name, f.default))
        self.__post_init__()

    @classmethod
    def from_dict(cls, data: dict) -> Clocks:
        """Clocks absent from ``data`` (a checkpoint written before they existed) start at their defaults."""
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})
