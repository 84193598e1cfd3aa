"""Validation: when it runs, and what it measures (docs/design.md §3).

Validation runs on the task's fixed held-out set at step 0 and then whenever the ``responses`` clock
has passed the next scheduled point (at a rollout boundary): every ``eval.every_responses``
(``schedule: linear``) or at geometrically spaced points ``first_responses * 2^(k / points_per_doubling)``
with at most ``every_responses`` between two (``schedule: geometric``, the default): a crossing time is
then bracketed to the same relative width early and late in a run, which is what a power-law fit in
log R needs. ``eval/accuracy`` is pass@1: greedy
(``eval.samples: 0``) or the mean over ``eval.samples`` samples per problem at the rollout temperature.
Validation responses are counted on ``eval_responses``, never on the training clocks.

**Screened schedule** (``eval.screen_problems`` > 0, at most half the held-out set; off by default:
on the embedded default it keeps too few brackets for what it saves, ``docs/speed.md``): at every point a *screen* runs
first, the same pass@1 on a fixed subset of the held-out problems with common random numbers (the same
sampling keys at every point, so that two screens differ by what the policy changed, not by the draw),
logged in the rollout's row as ``eval/screen_accuracy`` (never ``eval/accuracy``). The full evaluation
runs at the point only when :func:`full_needed` says so: the screen's prediction of the full accuracy
at the next point is within ``eval.screen_margin`` of a target not yet reached, the screen suggests a
drop below the best full accuracy (so the accuracy-collapse detector still sees a collapse), or the
responses clock has grown by ``eval.screen_full_ratio`` since the last full evaluation (the curve stays
sampled once per doubling). A crossing stays bracketed between two full evaluations: the trainer's
targets and the analysis read ``eval/accuracy`` rows only, and a full evaluation at a point is the
same pass (same seed, same numbers) whether or not the schedule is screened. ``docs/speed.md`` measures
how often the brackets agree with a full evaluation at every point and what it saves.

**Per-problem record.** Every evaluation also records which response of which problem was correct: one
line of ``eval_problems.jsonl`` per evaluation (:func:`problem_record`; docs/design.md §6). Response
``j`` of problem ``q`` draws from the stream ``(seed, q, j)`` alone (``engines.base.SampleKeys``), so
an evaluation with fewer problems or fewer samples at the same points would have drawn exactly a subset
of these responses: a thinner evaluation (fewer problems, fewer samples, a coarser cadence) is an exact
subsample of the record, with common random numbers (``analysis.data.eval_records.replay``).

A task may name further held-out sets (``Task.extra_validation``: the ``compose`` task's depth-3
problems); each is evaluated at the same points with the same sampling and logged beside the main set
as ``eval/<name>_accuracy``, ``eval/<name>_reward`` and ``eval/<name>_responses``. Targets, crossings
and the failure detectors read ``eval/accuracy`` (the main set) only.
"""

from __future__ import annotations

import base64
import math
import time
from typing import Any

import numpy as np

from .collect import derived_seed, generate_blocks, score_blocks
from .engines.base import SamplingParams
from .eval_schedule import next_eval_point

__all__ = [
    "Evaluator",
    "correct_matrix",
    "full_needed",
    "next_eval_point",
    "problem_record",
    "sparse_due",
    "target_key",
]


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
        # the screen's problems: a fixed subset of the held-out set (the same for every run and seed)
        # (none when the held-out set has fewer than twice as many problems: such a screen saves little)
        n_val = len(self.validation)
        k = cfg.eval.screen_problems if 0 < 2 * cfg.eval.screen_problems <= n_val else 0
        order = np.random.default_rng(derived_seed("eval-screen-problems")).permutation(n_val)
        self.screen_ids = sorted(int(i) for i in order[:k])
        self.screening = k > 0
        self.extra = task.extra_validation()
        self.last_record: dict[str, Any] = {}  # the per-problem record of the last evaluate()

    def screen(self) -> dict[str, Any]:
        """The screen (module docstring): pass@1 on the fixed subset, with the sampling keys of the run's
        seed and the problems' indices, the same at every point (common random numbers)."""
        t = time.perf_counter()
        prompts = [e.prompt for e in self.validation]
        ids = self.screen_ids
        gen = generate_blocks(
            self.engine,
            self.dist,
            prompts,
            ids,
            [self.counts[i] for i in ids],
            self.params,
            derived_seed(self.cfg.seed, "eval-screen"),
        )
        rewards = score_blocks(
            self.task, self.dist, gen.texts, [self.validation[i] for i in gen.prompt_index.tolist()]
        )
        acc = sum(x is not None and x >= 1.0 - 1e-9 for x in rewards) / max(len(rewards), 1)
        return {
            "eval/screen_accuracy": acc,
            "eval/screen_responses": len(gen),
            "eval/screen_problems": len(ids),
            "perf/eval_screen_s": round(time.perf_counter() - t, 4),
        }

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
        self.last_record = problem_record(
            gen.prompt_index.tolist(), rewards, len(self.validation), self.counts[0]
        )
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


def correct_matrix(prompt_index: list[int], rewards: list, problems: int, samples: int) -> np.ndarray:
    """``[problems, samples]`` booleans: whether response ``j`` of problem ``q`` was correct (reward 1; an
    unscorable response is not). The generation's rows of a problem come in sample order."""
    out = np.zeros((problems, samples), dtype=bool)
    seen = np.zeros(problems, dtype=int)
    for q, x in zip(prompt_index, rewards):
        out[q, seen[q]] = x is not None and x >= 1.0 - 1e-9
        seen[q] += 1
    if (seen != samples).any():
        raise RuntimeError(f"evaluation: {samples} responses per problem expected, got {sorted(set(seen))}")
    return out


def problem_record(prompt_index: list[int], rewards: list, problems: int, samples: int) -> dict[str, Any]:
    """One evaluation's per-problem record: ``problems``, ``samples`` and ``correct``, the
    :func:`correct_matrix` packed 8 responses to a byte along each problem's row (``numpy.packbits``,
    big-endian bit order) and base64-encoded, with ``counts``, the correct responses per problem. The
    mean of the matrix is the evaluation's ``eval/accuracy``."""
    m = correct_matrix(prompt_index, rewards, problems, samples)
    packed = np.packbits(m, axis=1)
    return {
        "problems": problems,
        "samples": samples,
        "counts": m.sum(axis=1).tolist(),
        "correct": base64.b64encode(packed.tobytes()).decode("ascii"),
    }


def full_needed(e, state, screen: float, responses: int) -> bool:
    """Whether the screened schedule runs the full evaluation at a point (module docstring).

    ``e``: the ``eval`` config; ``state``: the trainer's state (targets reached so far, the best full
    accuracy, the last full evaluation's clock, the screen-to-full offsets measured at the full
    evaluations so far, the previous screen); ``screen``: this point's screen accuracy. The prediction
    of the full accuracy at the next point is the screen plus the mean offset (full minus screen at the
    same points: the subset's difficulty) plus the screen's last rise (common random numbers make the
    difference of two screens far less noisy than either)."""
    if not state.screen_offsets or e.screen_margin >= 1.0:
        return True
    if e.screen_full_ratio and responses >= e.screen_full_ratio * max(state.last_full_at, 1):
        return True
    now = screen + sum(state.screen_offsets) / len(state.screen_offsets)
    rise = max(0.0, screen - state.screen_last) if state.screen_last is not None else 0.0
    ahead = now + rise
    unreached = [float(k) for k, v in state.targets.items() if v is None]
    if unreached and ahead >= min(unreached) - e.screen_margin:
        return True
    best = state.best_accuracy
    return best is not None and math.isfinite(best) and now < best - 2 * e.screen_margin


def sparse_due(e, state, point: int, last_rollout: bool) -> bool:
    """Whether the sparse schedule (``eval.sparse_every`` > 1) evaluates at schedule point ``point``
    (1, 2, ... after the step-0 evaluation, counted over every point the run has reached, evaluated or
    not): every ``sparse_every``-th point; every point while the last evaluation's accuracy is within
    ``eval.dense_margin`` below a target the run has not reached (``state.targets``: the first
    evaluation at or above it), so the evaluations around a crossing stay as dense as the full
    schedule's; and the run's last rollout (``last_rollout``), so its curve ends where it stopped.

    A crossing stays bracketed by two evaluations of the schedule's points; away from the targets the
    brackets are ``sparse_every`` points wide. Measured on a pool of real runs against the full schedule
    (``benchmarks/calibration/eval_brackets.py``, which replays this rule as ``K:S:E:M``): docs/speed.md.
    The failure detectors read the evaluations the run makes, so an accuracy collapse far from every
    target is seen up to ``sparse_every`` points later: keep the full schedule for a failure clock."""
    if e.sparse_every <= 1 or last_rollout or point % e.sparse_every == 0:
        return True
    last = state.last_eval.get("eval/accuracy")
    unreached = [float(a) for a in e.targets if state.targets.get(target_key(a)) is None]
    return last is not None and bool(unreached) and last >= min(unreached) - e.dense_margin


def target_key(a: float) -> str:
    """A target's key in the trainer's state and ``summary.json`` (``0.25``)."""
    return f"{float(a):g}"
