"""Spread independent work (reading runs, drawing figures) over forked worker processes.

Workers are forked, so they inherit module state set before the pool starts and nothing needs to be
re-imported; results come back pickled. Where fork is unavailable (macOS/Windows default), with one
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


def fork_map(func: Callable[[Any], T], items: Sequence[Any], jobs: int) -> list[T]:
    """``[func(item) for item in items]``, in ``jobs`` forked processes when that is possible."""
    if jobs <= 1 or len(items) <= 1 or "fork" not in mp.get_all_start_methods():
        return [func(item) for item in items]
    if "torch" in sys.modules:
        # Forking a process whose OpenMP thread pool is running (torch imported and used, e.g. a test
        # session or a notebook that also trains) can deadlock the child: stay in-process.
        return [func(item) for item in items]
    try:
        pool = mp.get_context("fork").Pool(min(jobs, len(items)))
    except OSError:
        return [func(item) for item in items]
    with pool:
        return pool.map(func, items, chunksize=max(1, len(items) // (4 * jobs)))
