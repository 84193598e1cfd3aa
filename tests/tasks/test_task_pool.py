"""The verifier pool: per-item time limits, killed and replaced workers, order and None semantics."""

import time

import pytest

from rlvr_scaling.tasks import VerifierPool
from rlvr_scaling.tasks.pool import selftest_fn

TIMEOUT = 0.5  # soft limit; the parent kills a worker after TIMEOUT + max(1, TIMEOUT) = 1.5 s


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(selftest_fn, num_workers=2, timeout_s=TIMEOUT) as p:
        yield p


def test_values_come_back_in_order(pool):
    payloads = [("value", (i % 11) / 10) for i in range(500)]
    assert pool.map(payloads) == [(i % 11) / 10 for i in range(500)]
    assert pool.map([]) == []


def test_misbehaving_items_score_none_and_the_rest_survive(pool):
    before = pool.stats.restarts
    payloads = [
        ("value", 1.0),
        ("sleep", 30),  # interrupted by the worker's own alarm
        ("value", 0.0),
        ("hang", 30),  # ignores the alarm: the parent kills the worker
        ("value", 0.25),
        ("crash",),  # the worker dies
        ("raise",),
        ("value", 2.0),  # out of [0, 1]
        ("value", float("nan")),
        ("value", "abc"),
        ("value", 0.75),
    ]
    t = time.perf_counter()
    got = pool.map(payloads)
    elapsed = time.perf_counter() - t
    assert got == [1.0, None, 0.0, None, 0.25, None, None, None, None, None, 0.75]
    assert elapsed < 15, elapsed
    assert pool.stats.restarts >= before + 2  # one for the hang, one for the crash
    assert pool.stats.soft_timeouts >= 1 and pool.stats.hard_timeouts >= 1 and pool.stats.crashes >= 1
    # the replaced workers keep working
    assert pool.map([("value", 0.5)] * 50) == [0.5] * 50


def test_unpicklable_payload_scores_none(pool):
    assert pool.map([("value", 1.0), ("value", lambda: 0), ("value", 0.0)]) == [1.0, None, 0.0]


def test_close_is_idempotent_and_final():
    p = VerifierPool(selftest_fn, num_workers=1, timeout_s=TIMEOUT)
    assert p.map([("value", 1.0)]) == [1.0]
    p.close()
    p.close()
    with pytest.raises(RuntimeError):
        p.map([("value", 1.0)])


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_workers"):
        VerifierPool(selftest_fn, num_workers=0)
    with pytest.raises(ValueError, match="timeout_s"):
        VerifierPool(selftest_fn, timeout_s=0)


class _Unreadable:
    """Pickles fine here, fails to unpickle in the worker."""

    def __reduce__(self):
        return (_raise, ())


def _raise():
    raise RuntimeError("cannot unpickle")


def test_payload_that_does_not_unpickle_in_the_worker(pool):
    # the chunk it travels in is unscorable; the worker survives
    got = pool.map([("value", 1.0), ("value", _Unreadable())])
    assert got[1] is None
    assert pool.map([("value", 0.5)] * 4) == [0.5] * 4
