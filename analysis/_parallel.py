"""Spread independent work (reading runs, drawing figures) over forked worker processes.

Workers are forked, so they inherit what the parent holds when the pool starts and nothing needs to be
re-imported; results come back pickled. Work that needs large read-only inputs (the tables, the fits)
passes them as ``shared``: every call gets them as its second argument, and they reach the workers by
the fork, never by pickling. Where fork is unavailable (macOS/Windows default), with one
job, when torch is loaded in this process (forking a running OpenMP pool can deadlock), or if the pool
cannot start, the work runs in-process — same results, only slower.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def default_jobs() -> int:
    """Worker processes to use: the CPUs this process may run on, at most 2 (the target machine)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


_NO_SHARED = object()
# What the forked workers inherit for one fork_map call (set just before the pool forks, cleared after).
_INHERITED: tuple[Callable[..., Any], Any] | None = None


def _call(item: Any) -> Any:
    func, shared = _INHERITED
    return func(item) if shared is _NO_SHARED else func(item, shared)


def fork_map(func: Callable[..., T], items: Sequence[Any], jobs: int, shared: Any = _NO_SHARED) -> list[T]:
    """``[func(item) for item in items]`` (``[func(item, shared) ...]`` when ``shared`` is given), in
    ``jobs`` forked processes when that is possible."""
    global _INHERITED

    def serial() -> list[T]:
        return [func(item) if shared is _NO_SHARED else func(item, shared) for item in items]

    if jobs <= 1 or len(items) <= 1 or "fork" not in mp.get_all_start_methods():
        return serial()
    if "torch" in sys.modules:
        # Forking a process whose OpenMP thread pool is running (torch imported and used, e.g. a test
        # session or a notebook that also trains) can deadlock the child: stay in-process.
        return serial()
    _INHERITED = (func, shared)
    try:
        try:
            pool = mp.get_context("fork").Pool(min(jobs, len(items)))
        except OSError:
            return serial()
        with pool:
            return pool.map(_call, items, chunksize=max(1, len(items) // (4 * jobs)))
    finally:
        _INHERITED = None
