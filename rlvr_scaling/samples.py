"""Sampled completions in the run directory (``samples.jsonl``) and in wandb (a table ``samples``).

Every ``logger.samples.every_rollouts`` rollouts (the 1st, then every n-th after it), the responses of the
rollout's first ``logger.samples.prompts`` prompts are written, one JSON object per response:

    {"rollout": 1, "responses": 128, "prompt_index": 0, "example": "train:4711", "prompt": "...",
     "response": "...", "reward": 1.0, "advantage": 0.94, "length": 7, "finished": true}

``rollout`` and ``responses`` are the clocks of the rollout's training row in ``metrics.jsonl`` (so a
sample joins its metrics row on them); ``prompt_index`` is the prompt's position in the rollout;
``reward`` is null for an unscorable response; ``length`` counts completion tokens (EOS included).

Bounded: texts are cut to ``max_chars`` characters (an ellipsis marks a cut), and the file stops growing
once it passes ``max_mb`` (a line in the log says so); ``every_rollouts: 0`` turns it off. A resumed run
first drops the samples of rollouts after its checkpoint, as the metrics log does. Rank 0 alone writes.
These settings are bookkeeping (``logger``), not part of a run's condition.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .rundir import atomic_write_text

FILE = "samples.jsonl"
COLUMNS = (
    "rollout",
    "responses",
    "prompt_index",
    "example",
    "prompt",
    "response",
    "reward",
    "advantage",
    "length",
    "finished",
)


@dataclass
class SamplesConfig:
    """Sampled completions (``logger.samples``)."""

    every_rollouts: int = 10  # write the 1st rollout's samples, then every n-th; 0 = off
    prompts: int = 2  # prompts per logged rollout (with all their responses)
    max_chars: int = 2000  # prompt and response texts are cut to this many characters
    max_mb: float = 20.0  # samples.jsonl stops growing past this size

    def validate(self, prefix: str = "logger.samples") -> None:
        if self.every_rollouts < 0:
            raise ConfigError(f"{prefix}.every_rollouts must be >= 0 (got {self.every_rollouts})")
        if self.prompts < 1 or self.max_chars < 1:
            raise ConfigError(f"{prefix}.prompts and {prefix}.max_chars must be >= 1")
        if not self.max_mb > 0:
            raise ConfigError(f"{prefix}.max_mb must be > 0 (got {self.max_mb})")


class SampleLog:
    def __init__(self, cfg: SamplesConfig, run_dir: Path, enabled: bool = True, log=print):
        self.cfg, self.path, self.log = cfg, Path(run_dir) / FILE, log
        self.enabled = enabled and cfg.every_rollouts > 0
        self.full = False
        self._checked = False

    def due(self, rollout: int) -> bool:
        """Whether the rollout with clock value ``rollout`` (1-based) is logged."""
        return self.enabled and not self.full and (rollout - 1) % self.cfg.every_rollouts == 0

    def write(self, batch, advantages, clocks, sinks=()) -> list[dict[str, Any]]:
        """Write the due rollout's samples (after its training row); returns the rows written."""
        if not self.due(clocks.rollout):
            return []
        if not self._checked:
            self._drop_from(clocks.rollout)
        gen = batch.gen
        keep = set(range(min(self.cfg.prompts, batch.n_prompts)))
        rows = []
        for i, j in enumerate(gen.prompt_index.tolist()):
            if j not in keep:
                continue
            example = batch.examples[j]
            reward = float(batch.rewards[i])
            rows.append(
                {
                    "rollout": clocks.rollout,
                    "responses": clocks.responses,
                    "prompt_index": j,
                    "example": getattr(example, "id", None),
                    "prompt": self._cut(example.prompt),
                    "response": self._cut(gen.texts[i]),
                    "reward": None if math.isnan(reward) else reward,
                    "advantage": float(advantages[i]),
                    "length": int(gen.completion_lengths[i]),
                    "finished": bool(gen.finished[i]),
                }
            )
        with open(self.path, "a") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
        if self.path.stat().st_size > self.cfg.max_mb * 2**20:
            self.full = True
            self.log(
                f"[samples] {self.path} passed logger.samples.max_mb={self.cfg.max_mb:g}: no more samples"
            )
        for sink in sinks:
            if hasattr(sink, "log_samples"):
                sink.log_samples(rows)
        return rows

    def _cut(self, text: str) -> str:
        return text if len(text) <= self.cfg.max_chars else text[: self.cfg.max_chars - 1] + "…"

    def _drop_from(self, rollout: int) -> None:
        """Drop samples of rollouts at or after ``rollout`` (written after the checkpoint a run resumed
        from), once per process."""
        self._checked = True
        if not self.path.is_file():
            return
        lines = self.path.read_text().splitlines()
        kept = [x for x in lines if x.strip() and _rollout_of(x) < rollout]
        if len(kept) != len(lines):
            atomic_write_text(self.path, "".join(x + "\n" for x in kept))
        self.full = self.path.stat().st_size > self.cfg.max_mb * 2**20


def _rollout_of(line: str) -> int:
    try:
        return int(json.loads(line)["rollout"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62  # a torn last line: dropped
