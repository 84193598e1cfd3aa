"""One explicit registry per variant axis (baseline, LR rule, allocator, detector, engine, task).

A registry maps a config name to an implementation. Names are unique; an unknown name fails with the
list of valid ones. Every axis has a Hydra config group with one YAML per registered name, and a test
checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"duplicate {self.kind} '{name}' (already {self._items[name]!r})")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} '{name}'; valid: {', '.join(sorted(self._items))}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
