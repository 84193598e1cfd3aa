"""Thinner evaluations replayed from a run's per-problem record (docs/design.md §6, ``eval_problems.jsonl``).

Every evaluation of a run records which response of which held-out problem was correct: one JSON line
per evaluation with the clocks ``rollout`` and ``responses``, ``problems``, ``samples``, ``counts`` (correct
responses per problem) and ``correct``, the ``[problems, samples]`` matrix of booleans packed 8 to a byte
along each problem's row (``numpy.packbits``, big-endian bit order), base64-encoded. Its mean is the
evaluation's ``eval/accuracy``.

Response ``j`` of problem ``q`` draws its sampling numbers from the stream ``(run seed, q, j)`` alone, so an
evaluation with fewer problems or fewer samples per problem, at the same points, would have drawn exactly a
subset of the recorded responses: :func:`replay` gives its accuracies as an exact subsample with common
random numbers (the same responses in every thinner design, and in the full one), and a coarser cadence
keeps a subset of the evaluations. Reading a record never raises: a missing or unreadable file, or one that
does not match the run's evaluations, is reported and left out (:func:`read_eval_records` returns None and
says why).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

EVAL_PROBLEMS = "eval_problems.jsonl"


@dataclass(frozen=True)
class EvalRecords:
    """A run's evaluations, problem by problem."""

    rollout: np.ndarray  # [points]
    responses: np.ndarray  # [points] the responses clock at each evaluation
    correct: np.ndarray  # [points, problems, samples] bool

    @property
    def problems(self) -> int:
        return int(self.correct.shape[1])

    @property
    def samples(self) -> int:
        return int(self.correct.shape[2])


def decode(record: dict) -> np.ndarray:
    """The ``[problems, samples]`` booleans of one line (module docstring); ValueError where the line's
    ``correct`` does not hold that matrix, or its ``counts`` disagree with it."""
    problems, samples = int(record["problems"]), int(record["samples"])
    raw = np.frombuffer(base64.b64decode(record["correct"]), dtype=np.uint8)
    width = -(-samples // 8)
    if raw.size != problems * width:
        raise ValueError(f"correct holds {raw.size} bytes, not {problems} x {width}")
    m = np.unpackbits(raw.reshape(problems, width), axis=1, count=samples).astype(bool)
    if "counts" in record and list(m.sum(axis=1)) != list(record["counts"]):
        raise ValueError("counts disagree with correct")
    return m


def read_eval_records(run_dir: str | Path, notes: list[str] | None = None) -> EvalRecords | None:
    """The per-problem record of a run directory, or None (and a line in ``notes``) where there is none
    or it cannot be read; every line must have the same problems and samples."""
    path = Path(run_dir) / EVAL_PROBLEMS
    notes = notes if notes is not None else []
    if not path.is_file():
        notes.append(f"{run_dir}: no {EVAL_PROBLEMS} (written by runs from this release on)")
        return None
    try:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        mats = [decode(r) for r in lines]
        if not mats or len({m.shape for m in mats}) != 1:
            raise ValueError("no evaluation" if not mats else "evaluations of different sizes")
        return EvalRecords(
            rollout=np.array([int(r["rollout"]) for r in lines]),
            responses=np.array([float(r["responses"]) for r in lines]),
            correct=np.stack(mats),
        )
    except (OSError, ValueError, KeyError, TypeError) as err:  # json.JSONDecodeError is a ValueError
        notes.append(f"{path}: unreadable ({err})")
        return None


def problem_subset(problems: int, k: int, seed: int = 0) -> np.ndarray:
    """``k`` of ``problems`` held-out problems, the same for every run and evaluation (a fixed draw from
    ``seed``), sorted: the problems of a thinner evaluation."""
    if not 0 < k <= problems:
        raise ValueError(f"problems: 1..{problems}, got {k}")
    return np.sort(np.random.default_rng(seed).permutation(problems)[:k])


def replay(
    records: EvalRecords,
    problems: np.ndarray | list[int] | None = None,
    samples: int | None = None,
    every: int = 1,
) -> pd.DataFrame:
    """The accuracies a thinner evaluation would have logged: the mean over ``problems`` (indices into the
    held-out set; all by default) of their first ``samples`` responses (all by default), at every
    ``every``-th evaluation (the step-0 one and every ``every``-th after it; 1: all). Columns ``rollout``,
    ``responses``, ``accuracy``, ``correct`` (correct responses) and ``n`` (responses evaluated)."""
    samples = records.samples if samples is None else int(samples)
    if not 0 < samples <= records.samples:
        raise ValueError(f"samples: 1..{records.samples}, got {samples}")
    if every < 1:
        raise ValueError(f"every: a positive integer, got {every}")
    idx = np.arange(records.problems) if problems is None else np.asarray(problems, dtype=int)
    if idx.size == 0 or idx.min() < 0 or idx.max() >= records.problems:
        raise ValueError(f"problems: indices in 0..{records.problems - 1}")
    keep = np.arange(0, records.responses.size, every)
    sub = records.correct[keep][:, idx, :samples]
    correct = sub.sum(axis=(1, 2))
    n = idx.size * samples
    return pd.DataFrame(
        {
            "rollout": records.rollout[keep],
            "responses": records.responses[keep],
            "accuracy": correct / n,
            "correct": correct,
            "n": n,
        }
    )
