"""Validation: when it runs, and what it measures (docs/design.md §3).

Validation runs on the task's fixed held-out set at step 0 and then whenever the ``responses`` clock
has passed the next scheduled point (at a rollout boundary): every ``eval.every_responses``
(``schedule: linear``) or at geometrically spaced points ``first_responses * 2^(k / points_per_doubling)``
with at most ``every_responses`` between two (``schedule: geometric``, the default): a crossing time is
then bracketed to the same relative width early and late in a run, which is what a power-law fit in
log R needs. ``eval/accuracy`` is pass@1: greedy
(``eval.samples: 0``) or the mean over ``eval.samples`` samples per problem at the rollout temperature.
Validation responses are counted on ``eval_responses``, never on the training clocks.

A task may name further held-out sets (``Task.extra_validation``: the ``compose`` task's depth-3
problems); each is evaluated at the same points with the same sampling and logged beside the main set
as ``eval/<name>_accuracy``, ``eval/<name>_reward`` and ``eval/<name>_responses``. Targets, crossings
and the failure detectors read ``eval/accuracy`` (the main set) only.
"""

from __future__ import annotations

import time
from typing import Any

from .collect import derived_seed, generate_blocks, score_blocks
from .engines.base import SamplingParams


def next_eval_point(e, responses: int) -> int:
    """The schedule of ``eval`` config ``e``: the first point strictly after ``responses``.

    Geometric: points ``round(first * 2^(k / ppd))`` while their spacing is at most ``every_responses``,
    then every ``every_responses`` from the last such point on (the same points for every run)."""
    if e.schedule == "linear":
        return (responses // e.every_responses + 1) * e.every_responses
    ratio = 2.0 ** (1.0 / e.points_per_doubling)
    point, k = e.first_responses, 0
    while point <= responses:
        nxt = round(e.first_responses * ratio ** (k + 1))
        if nxt - point > e.every_responses:  # past the crossover: linear from here on
            return point + ((responses - point) // e.every_responses + 1) * e.every_responses
        point, k = nxt, k + 1
    return point


class Evaluator:
    def __init__(self, cfg, task, engine, dist, logprobs):
        self.cfg, self.engine, self.dist, self.logprobs = cfg, engine, dist, logprobs
        self.task = task
        self.validation = task.validation()
        n = cfg.eval.samples
        self.params = SamplingParams(
            cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens,
            cfg.rollout.temperature,
            cfg.rollout.top_p,
            greedy=n == 0,
        )
        self.counts = [max(n, 1)] * len(self.validation)
        self.extra = task.extra_validation()

    def next_at(self, responses: int) -> int:
        """The first point of the schedule strictly after ``responses`` (the same points for every
        rollout size: evaluation happens at the first rollout boundary at or past it)."""
        return next_eval_point(self.cfg.eval, responses)

    def _run(self, examples: list, seed: int):
        """Generate ``max(eval.samples, 1)`` responses per example and score them: ``(gen, rewards,
        accuracy, mean reward)``."""
        gen = generate_blocks(
            self.engine,
            self.dist,
            [e.prompt for e in examples],
            list(range(len(examples))),
            [self.counts[0]] * len(examples),
            self.params,
            seed,
        )
        rewards = score_blocks(
            self.task, self.dist, gen.texts, [examples[i] for i in gen.prompt_index.tolist()]
        )
        scored = [x for x in rewards if x is not None]
        acc = sum(x >= 1.0 - 1e-9 for x in scored) / max(len(rewards), 1)
        return gen, rewards, acc, sum(scored) / max(len(rewards), 1)

    def evaluate(self, responses: int) -> dict[str, Any]:
        """One validation pass at ``responses`` training responses; returns the ``eval/`` row."""
        t = time.perf_counter()
        gen, rewards, acc, reward = self._run(self.validation, derived_seed(self.cfg.seed, "eval", responses))
        row = {
            "eval/accuracy": acc,
            "eval/reward": reward,
            "eval/length": float(gen.completion_lengths.float().mean()),
            "eval/entropy": self.logprobs.rollout_entropy(gen),
            "eval/unscorable": sum(x is None for x in rewards),
            "eval/responses": len(gen),
            "eval/problems": len(self.validation),
        }
        for name, examples in self.extra.items():
            gen, _, acc, reward = self._run(examples, derived_seed(self.cfg.seed, "eval", name, responses))
            row[f"eval/{name}_accuracy"] = acc
            row[f"eval/{name}_reward"] = reward
            row[f"eval/{name}_responses"] = len(gen)
        row["perf/eval_s"] = round(time.perf_counter() - t, 4)
        return row

    def responses_of(self, row: dict[str, Any]) -> int:
        """Every validation response of one ``evaluate`` row (the main set and the extra sets)."""
        return row["eval/responses"] + sum(row[f"eval/{name}_responses"] for name in self.extra)
