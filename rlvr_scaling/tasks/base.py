"""The task interface: prompts, reference answers and a verifier that turns completions into rewards.

A task owns a deterministic training pool (``train_example(i)``, wrapping around at ``num_train()``),
a fixed validation set disjoint from it by prompt text, the gold completion used by the supervised warm
start, and ``score``: one reward in [0, 1] per completion, ``None`` where the verifier could not decide
(it timed out or crashed). ``score`` never raises because of what a completion contains.

Each task kind is a :class:`Task` subclass registered in :data:`TASKS` under its ``kind`` and
constructed from a small params dataclass (:data:`TASK_PARAMS`), which is also the Hydra
structured-config schema of the ``task`` group. ``params.name`` is the preset's display name
(``chain_sum``), ``params.kind`` the registry key (``reasoning_gym``).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError
from ..registry import Registry


@dataclass(frozen=True)
class Example:
    prompt: str  # text fed to the model verbatim (already formatted)
    answer: str  # reference answer
    id: str  # stable id, "train:<i>" or "val:<j>"


class Task(abc.ABC):
    """One verifiable task. Subclasses set ``Params`` and register themselves in :data:`TASKS`."""

    Params: ClassVar[type]
    name: str

    @abc.abstractmethod
    def train_example(self, index: int) -> Example:
        """Training item ``index % num_train()``; deterministic for a given params."""

    @abc.abstractmethod
    def num_train(self) -> int:
        """Size of the training pool."""

    @abc.abstractmethod
    def validation(self) -> list[Example]:
        """The fixed held-out set, disjoint from the training pool by prompt text."""

    @abc.abstractmethod
    def sft_completion(self, example: Example) -> str:
        """Gold completion for a supervised warm start (no EOS; the caller appends it)."""

    @abc.abstractmethod
    def score(self, completions: Sequence[str], examples: Sequence[Example]) -> list[float | None]:
        """Rewards in [0, 1], ``None`` where unscorable. Never raises because of a completion."""

    def warm_start_example(self, index: int) -> Example:
        """Item ``index`` of the supervised warm start's data (drawn from ``0 .. num_train() - 1``):
        by default the training pool itself; a task whose warm start must see other data (atomic
        skills only, say) overrides it."""
        return self.train_example(index)

    def extra_validation(self) -> dict[str, list[Example]]:
        """Further fixed held-out sets, evaluated beside :meth:`validation` and logged as
        ``eval/<name>_accuracy``; none by default."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Stop worker processes, if any. Idempotent."""

    def info(self) -> dict[str, Any]:
        """Facts worth printing and logging at start-up (effective prompt format, pool sizes, ...)."""
        return {"name": self.name, "num_train": self.num_train(), "num_val": len(self.validation())}

    def __enter__(self) -> Task:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


TASKS: Registry[type] = Registry("task")
# kind -> params dataclass (Hydra schema), filled by the task modules alongside TASKS.
TASK_PARAMS: dict[str, type] = {}


def register_task(kind: str):
    """Class decorator: register a :class:`Task` subclass (and its ``Params``) under ``kind``."""

    def decorator(cls: type[Task]) -> type[Task]:
        TASKS.register(kind)(cls)
        TASK_PARAMS[kind] = cls.Params
        return cls

    return decorator


def build_task(params: Any) -> Task:
    """Validate ``params`` (cheap) and construct the task registered under ``params.kind``."""
    kind = getattr(params, "kind", None)
    if kind not in TASKS:
        raise ConfigError(f"task.kind: unknown task kind {kind!r}; valid: {', '.join(TASKS.names())}")
    params.validate("task")
    return TASKS.get(kind)(params)


def check(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` (a ValueError) with ``message`` unless ``condition``."""
    if not condition:
        raise ConfigError(message)
