"""The evaluation schedule (docs/design.md §3): at which points of the ``responses`` clock a run
evaluates. One definition for the trainer (:class:`rlvr_scaling.evaluation.Evaluator`) and for everything
that predicts a run's evaluation grid (the study's planner, ``rlvr_study.plan.Schedule``); no dependency
beyond the standard library, so a planner imports it without the trainer's machinery.
"""

from __future__ import annotations


def schedule_point(
    responses: float,
    *,
    schedule: str,
    every_responses: float,
    first_responses: float = 64,
    points_per_doubling: int = 4,
) -> float:
    """The first scheduled point strictly after ``responses``.

    ``linear``: every ``every_responses``. ``geometric``: points ``round(first * 2^(k / ppd))`` while
    their spacing is at most ``every_responses``, then every ``every_responses`` from the last such point
    on (the same points for every run). A run evaluates at the first rollout boundary at or past it."""
    if schedule == "linear":
        return (responses // every_responses + 1) * every_responses
    ratio = 2.0 ** (1.0 / points_per_doubling)
    point, k = first_responses, 0
    while point <= responses:
        nxt = round(first_responses * ratio ** (k + 1))
        if nxt - point > every_responses:  # past the crossover: linear from here on
            return point + ((responses - point) // every_responses + 1) * every_responses
        point, k = nxt, k + 1
    return point


def next_eval_point(e, responses: int) -> int:
    """:func:`schedule_point` of the ``eval`` config ``e`` (``schedule``, ``every_responses``,
    ``first_responses``, ``points_per_doubling``)."""
    return schedule_point(
        responses,
        schedule=e.schedule,
        every_responses=e.every_responses,
        first_responses=e.first_responses,
        points_per_doubling=e.points_per_doubling,
    )
