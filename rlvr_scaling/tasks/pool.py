"""A small pool of verifier worker processes with a per-item time limit.

Verifiers that call sympy (math-verify, some reasoning-gym scorers) can hang or eat memory on
adversarial strings (``9**9**9**9``). They run here, in separate processes started with ``spawn`` (the
trainer holds torch threads, so ``fork`` is unsafe), never in the trainer process.

Two layers of time limit per item:

1. *soft*, in the worker: ``setitimer`` raises an exception (a ``BaseException``, so verifier code
   that catches ``Exception`` cannot swallow it) in the worker's main thread after ``timeout_s``; the
   item scores ``None`` and the worker carries on. This is why math-verify's own signal-based timeouts
   are switched off inside the workers: the worker's main thread owns ``SIGALRM``.
2. *hard*, in the parent: a worker that has not reported an item ``timeout_s + max(1, timeout_s)``
   seconds after the previous report (C code that never returns to the interpreter) is killed and
   replaced; the item scores ``None`` and the rest of its chunk is re-queued.

Items travel in chunks (one message per chunk, one small message back per item) to amortise IPC;
chunks are handed out dynamically, so a slow item delays only its own worker. A worker that crashes
(segfault, ``os._exit``) is replaced the same way. Workers ignore SIGINT (the trainer handles Ctrl-C)
and run under an address-space limit, so a memory blow-up becomes a ``MemoryError`` -> ``None``.
"""

from __future__ import annotations

import collections
import logging
import math
import multiprocessing
import os
import pickle
import signal
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

log = logging.getLogger(__name__)

_OK, _TIMEOUT, _ERROR = "ok", "timeout", "error"


class _ItemTimeout(BaseException):
    """Raised by SIGALRM inside a worker; a BaseException so ``except Exception`` cannot eat it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _ItemTimeout()


def _worker_main(
    conn: Any,
    fn: Callable[[Any], float | None],
    initializer: Callable[..., None] | None,
    initargs: tuple,
    timeout_s: float,
    memory_limit_mb: int | None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _on_alarm)
    if memory_limit_mb:
        try:
            import resource

            limit = memory_limit_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
    if initializer is not None:
        initializer(*initargs)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        except Exception:  # a payload that does not unpickle here: the whole chunk is unscorable
            conn.send(("unreadable",))
            continue
        if message is None:
            return
        for k, payload in enumerate(message):
            status = _OK
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout_s)
                try:
                    value = fn(payload)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _ItemTimeout:
                value, status = None, _TIMEOUT
            except Exception:
                value, status = None, _ERROR
            value = _as_reward(value)
            try:
                conn.send((k, value, status))
            except (BrokenPipeError, OSError):
                return


def _as_reward(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


@dataclass
class _Worker:
    proc: Any
    conn: Any
    ready: bool = False
    chunk: tuple[int, int] | None = None  # [start, end) of the payloads being verified
    done: int = 0  # items of the chunk already reported
    deadline: float = math.inf


@dataclass
class PoolStats:
    items: int = 0  # items verified (any outcome)
    soft_timeouts: int = 0  # interrupted inside the worker
    hard_timeouts: int = 0  # worker killed by the parent
    errors: int = 0  # verifier raised
    crashes: int = 0  # worker died
    restarts: int = 0
    last_map_items_per_s: float = 0.0


class PooledVerifier:
    """What a task that scores in a :class:`VerifierPool` shares: the pool is built on first use (the
    verifier's imports and its workers cost nothing to a task that never scores through it) and closed
    with the task. The task says how to build it in :meth:`_new_verifier_pool`."""

    _pool: VerifierPool | None = None

    def _new_verifier_pool(self) -> VerifierPool:
        raise NotImplementedError

    def verifier_pool(self) -> VerifierPool:
        if self._pool is None:
            self._pool = self._new_verifier_pool()
        return self._pool

    def close(self) -> None:
        """Stop the verifier's worker processes, if any. Idempotent."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class VerifierPool:
    """Run ``fn(payload) -> float | None`` over payloads in worker processes, with a time limit.

    ``fn`` and ``initializer`` must be module-level functions (they are pickled by reference).
    :meth:`map` returns one reward per payload: ``fn``'s value if it is a finite number in [0, 1],
    else ``None`` (time-out, exception, crash, out-of-range value). It never raises because of a payload.
    Workers start on first use and are reused; :meth:`close` stops them (also done at garbage
    collection and interpreter exit).
    """

    def __init__(
        self,
        fn: Callable[[Any], float | None],
        *,
        num_workers: int = 2,
        timeout_s: float = 2.0,
        initializer: Callable[..., None] | None = None,
        initargs: tuple = (),
        chunk_size: int = 64,
        start_method: str = "spawn",
        startup_timeout_s: float = 120.0,
        memory_limit_mb: int | None = 4096,
    ):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1 (got {num_workers})")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 (got {timeout_s})")
        self.fn = fn
        self.num_workers = num_workers
        self.timeout_s = float(timeout_s)
        self.hard_timeout_s = self.timeout_s + max(1.0, self.timeout_s)
        self.initializer = initializer
        self.initargs = tuple(initargs)
        self.chunk_size = chunk_size
        self.startup_timeout_s = startup_timeout_s
        self.memory_limit_mb = memory_limit_mb
        self.stats = PoolStats()
        self._ctx = multiprocessing.get_context(start_method)
        self._workers: list[_Worker | None] = [None] * num_workers
        self._lock = threading.Lock()
        self._failed_starts = 0
        self._closed = False
        self._finalizer = weakref.finalize(self, _stop_workers, self._workers)

    # ------------------------------------------------------------------ public

    def map(self, payloads: Sequence[Any]) -> list[float | None]:
        n = len(payloads)
        results: list[float | None] = [None] * n
        if n == 0:
            return results
        with self._lock:
            if self._closed:
                raise RuntimeError("VerifierPool.map after close()")
            t0 = time.perf_counter()
            try:
                self._run(payloads, results)
            except Exception:  # a bug here must not take the trainer down: unscored items stay None
                log.exception("verifier pool failed; %d items left unscored", n)
                self._restart_all()
            self.stats.last_map_items_per_s = n / max(time.perf_counter() - t0, 1e-9)
        return results

    def close(self) -> None:
        with self._lock:
            self._closed = True
            _stop_workers(self._workers)

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _start(self, slot: int) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self.fn, self.initializer, self.initargs, self.timeout_s, self.memory_limit_mb),
            daemon=True,
            name=f"rlvr-verifier-{slot}",
        )
        proc.start()
        child.close()
        worker = _Worker(proc, parent, deadline=time.monotonic() + self.startup_timeout_s)
        self._workers[slot] = worker
        return worker

    def _kill(self, slot: int) -> None:
        worker = self._workers[slot]
        self._workers[slot] = None
        if worker is not None:
            _stop_worker(worker, graceful=False)

    def _restart_all(self) -> None:
        for slot in range(self.num_workers):
            self._kill(slot)

    def _run(self, payloads: Sequence[Any], results: list[float | None]) -> None:
        n = len(payloads)
        size = max(1, min(self.chunk_size, math.ceil(n / (4 * self.num_workers))))
        queue = collections.deque((s, min(s + size, n)) for s in range(0, n, size))
        for slot in range(self.num_workers):
            if self._workers[slot] is None:
                self._start(slot)
        while True:
            for slot, worker in enumerate(self._workers):
                if worker is not None and worker.chunk is None and queue:
                    self._assign(slot, queue.popleft(), payloads, results, queue)
            busy = [
                (slot, w) for slot, w in enumerate(self._workers) if w is not None and w.chunk is not None
            ]
            if not busy:
                if queue:  # every worker failed to start: give up on this call, items stay None
                    log.error("verifier workers keep failing to start; %d items left unscored", n)
                return
            timeout = max(0.0, min(w.deadline for _, w in busy) - time.monotonic())
            wait([w.conn for _, w in busy] + [w.proc.sentinel for _, w in busy], timeout)
            for slot, worker in busy:
                self._poll(slot, worker, results, queue)

    def _assign(self, slot, chunk, payloads, results, queue) -> None:
        worker = self._workers[slot]
        start, end = chunk
        try:
            worker.conn.send(list(payloads[start:end]))
        except (pickle.PicklingError, TypeError, AttributeError):
            # a payload cannot be pickled: score it None, send the others one item per chunk
            if end - start == 1:
                results[start] = None
                self.stats.errors += 1
                return
            good = []
            for i in range(start, end):
                try:
                    pickle.dumps(payloads[i])
                    good.append(i)
                except Exception:
                    results[i] = None
                    self.stats.errors += 1
            queue.extendleft(reversed([(i, i + 1) for i in good]))
            return
        except (BrokenPipeError, OSError):
            queue.appendleft(chunk)
            self._replace(slot, started=False)
            return
        worker.chunk, worker.done = chunk, 0
        if worker.ready:
            worker.deadline = time.monotonic() + self.hard_timeout_s

    def _poll(self, slot, worker, results, queue) -> None:
        dead = False
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                start, end = worker.chunk
                if message[0] == "ready":
                    worker.ready = True
                    self._failed_starts = 0
                    worker.deadline = time.monotonic() + self.hard_timeout_s
                    continue
                if message[0] == "unreadable":  # the rest of the chunk stays None
                    self.stats.items += end - start - worker.done
                    self.stats.errors += end - start - worker.done
                    worker.chunk, worker.deadline = None, math.inf
                    return
                k, value, status = message
                results[start + k] = value
                worker.done = k + 1
                self.stats.items += 1
                if status == _TIMEOUT:
                    self.stats.soft_timeouts += 1
                elif status == _ERROR:
                    self.stats.errors += 1
                worker.deadline = time.monotonic() + self.hard_timeout_s
                if start + worker.done == end:
                    worker.chunk = None
                    worker.deadline = math.inf
                    return
        except (EOFError, OSError):
            dead = True
        if dead or not worker.proc.is_alive():
            if worker.ready:
                self.stats.crashes += 1
                log.warning(
                    "verifier worker %d died (exit code %s); replacing it", slot, worker.proc.exitcode
                )
            else:
                log.warning("verifier worker %d failed to start (exit code %s)", slot, worker.proc.exitcode)
            self._fail_current(slot, worker, results, queue)
        elif time.monotonic() > worker.deadline:
            if worker.ready:
                self.stats.hard_timeouts += 1
                log.warning(
                    "verifier worker %d exceeded %.1fs on one item; killing it", slot, self.hard_timeout_s
                )
            else:
                log.warning("verifier worker %d did not start within %.0fs", slot, self.startup_timeout_s)
            self._fail_current(slot, worker, results, queue)

    def _fail_current(self, slot, worker, results, queue) -> None:
        """The worker is dead or hung: its current item scores None, the rest of its chunk is re-queued."""
        started = worker.ready
        if worker.chunk is not None:
            start, end = worker.chunk
            current = start + worker.done
            if started:  # the item it was on is the culprit
                results[current] = None
                self.stats.items += 1
                current += 1
            if current < end:
                queue.appendleft((current, end))
        self._replace(slot, started=started)

    def _replace(self, slot: int, started: bool) -> None:
        self._kill(slot)
        if not started:
            self._failed_starts += 1
            if self._failed_starts > 2 * self.num_workers:
                return  # leave the slot empty; _run gives up on this call
        self.stats.restarts += 1
        self._start(slot)


def _stop_worker(worker: _Worker, graceful: bool) -> None:
    try:
        if graceful:
            worker.conn.send(None)
            worker.proc.join(0.5)
        if worker.proc.is_alive():
            worker.proc.kill()
        worker.proc.join(1.0)
    except Exception:
        pass
    try:
        worker.conn.close()
    except Exception:
        pass


def _stop_workers(workers: list[_Worker | None]) -> None:
    for slot, worker in enumerate(workers):
        if worker is not None:
            workers[slot] = None
            _stop_worker(worker, graceful=worker.chunk is None)


# ---------------------------------------------------------------------- self-test payloads


def selftest_fn(payload: tuple) -> float | None:
    """Deterministic misbehaviour for the pool's tests: ``("value", x)`` returns x; ``("sleep", s)``
    sleeps interruptibly; ``("hang", s)`` sleeps with SIGALRM ignored (only the parent's hard limit
    stops it); ``("crash",)`` kills the worker; ``("raise",)`` raises."""
    kind = payload[0]
    if kind == "value":
        return payload[1]
    if kind == "sleep":
        time.sleep(payload[1])
        return 1.0
    if kind == "hang":
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        try:
            time.sleep(payload[1])
        finally:
            signal.signal(signal.SIGALRM, _on_alarm)
        return 1.0
    if kind == "crash":
        os._exit(3)
    raise RuntimeError(f"selftest payload {payload!r}")
