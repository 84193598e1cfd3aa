"""The evaluation schedule: the same points for every rollout size, geometric spacing with a cap."""

import math

import pytest

from rlvr_scaling.config import EvalConfig
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.evaluation import next_eval_point


def points(e: EvalConfig, until: int) -> list[int]:
    out, r = [], 0
    while r < until:
        r = next_eval_point(e, r)
        out.append(r)
    return out


def test_geometric_points_have_constant_ratio_until_the_cap():
    e = EvalConfig(schedule="geometric", first_responses=64, points_per_doubling=6, every_responses=1024)
    pts = points(e, 16384)
    assert pts[0] == 64 and 4096 in pts and 8192 in pts
    gaps = [b - a for a, b in zip(pts, pts[1:])]
    assert max(gaps) <= 1024
    ratios = [b / a for a, b in zip(pts, pts[1:]) if b - a < 1024]
    assert all(abs(r - 2 ** (1 / 6)) < 0.02 for r in ratios[6:])  # rounding matters only early
    assert len(pts) < 60  # vs 64 evaluations every 256 responses over the same run
    # strictly increasing, and a point is never repeated
    assert all(b > a for a, b in zip(pts, pts[1:]))


def test_evaluation_happens_at_the_same_points_whatever_the_rollout_size():
    """A run evaluates at the first rollout boundary at or past each point: the evaluations of a run
    with B responses per rollout bracket every point within one rollout."""
    e = EvalConfig()
    grid = points(e, 16384)
    for b in (32, 128, 512):
        evals, nxt, r = [], next_eval_point(e, 0), 0
        while r < 16384:
            r += b
            if r >= nxt:
                evals.append(r)
                nxt = next_eval_point(e, r)
        for p in grid:
            if p <= 16384 - b:
                assert any(p <= x < p + b for x in evals), (b, p)


def test_linear_schedule():
    e = EvalConfig(schedule="linear", every_responses=256)
    assert points(e, 1024) == [256, 512, 768, 1024]
    assert next_eval_point(e, 300) == 512


@pytest.mark.parametrize(
    ("key", "value"), [("schedule", "log"), ("first_responses", 0), ("points_per_doubling", 0)]
)
def test_bad_schedule_is_refused_naming_the_key(key, value):
    e = EvalConfig(**{key: value})
    with pytest.raises(ConfigError, match=f"eval.{key}"):
        e.validate()


def test_geometric_resolution_is_relative():
    e = EvalConfig(points_per_doubling=6, every_responses=1024)
    for r in (200, 1000, 5000):
        nxt = next_eval_point(e, r)
        assert (nxt - r) / r <= 2 ** (1 / 6) - 1 + 0.02 or nxt - r <= 1024
    assert math.isclose(next_eval_point(e, 4096) / 4096, 2 ** (1 / 6), rel_tol=0.01)
    d = EvalConfig()  # the default: 4 points per doubling
    assert math.isclose(next_eval_point(d, 4096) / 4096, 2 ** (1 / d.points_per_doubling), rel_tol=0.01)
