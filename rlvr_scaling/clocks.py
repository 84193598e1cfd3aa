"""The run's clocks (docs/design.md §3): monotone counters carried on every metrics row."""

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
    flops: float = 0.0  # model FLOPs of the passes that ran for training and generation (accounting.py)
    eval_responses: int = 0  # validation responses (not on the training clocks)
    # the nominal count, comparable across frameworks: 2N per generated and 2N per log-prob pass, 6N per
    # trained prompt+completion token, N = all parameters (accounting.py; what `flops` was before)
    flops_nominal: float = 0.0

    def __post_init__(self) -> None:
        self._started = time.perf_counter()
        self._base = self.wall_seconds

    def tick(self) -> None:
        self.wall_seconds = self._base + (time.perf_counter() - self._started)

    def as_dict(self) -> dict:
        self.tick()
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def restore(self, data: dict) -> None:
        """Continue from saved clock values (a resumed run): wall time goes on from the saved value.

        A checkpoint written before a clock existed lacks it: ``flops_nominal`` then continues from the
        saved ``flops`` (which was the nominal count then), any other missing clock from its default."""
        for f in dataclasses.fields(self):
            if f.name in data:
                setattr(self, f.name, data[f.name])
            elif f.name == "flops_nominal":
                self.flops_nominal = float(data.get("flops", 0.0))
            else:
                setattr(self, f.name, f.default)
        self.__post_init__()

    @classmethod
    def from_dict(cls, data: dict) -> Clocks:
        clocks = cls()
        clocks.restore(data)
        return clocks
