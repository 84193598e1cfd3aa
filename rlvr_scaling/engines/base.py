"""The generation-engine interface: prompts and per-prompt counts in, token-level rollouts out.

The trainer only sees this interface, so an engine (Hugging Face ``transformers`` here, vLLM in its own
module) can be swapped by config (``rollout.engine``). Per-prompt counts let adaptive allocators ask for
more responses for a subset of prompts, incrementally.

Conventions shared by every engine:

- The policy is softmax(logits / temperature). Behaviour log-probs are log-probs of the sampled tokens
  under that distribution (top-p truncation is not folded into them, as in TRL).
- A :class:`Generation` stores each response as one row: the left-padded prompt, then the completion,
  right-padded. ``completion_mask`` marks completion tokens including the final EOS.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic): a bijective 64-bit hash."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class SampleKeys:
    """Counter-based sampling randomness, independent of batching and of which process generates.

    Response ``j`` (0-based within one ``generate`` call) of the prompt with key ``prompt_keys[i]`` draws
    its sampling numbers from a stream determined by ``(seed, prompt_keys[i], j)`` alone: the same
    rollout comes out whether its prompts are generated in one batch, in chunks, or split across the
    ranks of a data-parallel run (up to float rounding in the forward passes), and a resumed run draws
    exactly what the uninterrupted one drew. The trainer keys a prompt by its position in the run's data
    order and seeds each engine call from (run seed, call number within the rollout), so runs with one
    seed draw the same numbers for a prompt whatever their rollout size (docs/study.md, "Seeds as
    blocks").
    """

    seed: int
    prompt_keys: tuple[int, ...]

    def row_keys(self, counts: Sequence[int]) -> np.ndarray:
        if len(counts) != len(self.prompt_keys):
            raise ValueError("SampleKeys: one key per prompt")
        prompt = np.repeat(np.asarray(self.prompt_keys, dtype=np.uint64), counts)
        j = np.concatenate([np.arange(c, dtype=np.uint64) for c in counts]) if counts else prompt
        with np.errstate(over="ignore"):
            base = _mix(np.uint64(self.seed & ((1 << 64) - 1)) + _GOLDEN)
            return _mix(
                base ^ _mix(prompt * _GOLDEN + np.uint64(1)) ^ _mix(j + np.uint64(0x5851F42D4C957F2D))
            )

    def uniforms(self, counts: Sequence[int], steps: int) -> torch.Tensor:
        """[N, steps] float64 uniforms in [0, 1): one per response and decoding step."""
        keys = self.row_keys(counts)
        with np.errstate(over="ignore"):
            t = (np.arange(1, steps + 1, dtype=np.uint64) * _GOLDEN)[None, :]
            bits = _mix(keys[:, None] + t) >> np.uint64(11)
        return torch.from_numpy(bits.astype(np.float64) * 2.0**-53)

    def request_seeds(self, counts: Sequence[int]) -> list[int]:
        """One 31-bit seed per response (engines that take per-request seeds, e.g. vLLM)."""
        return (self.row_keys(counts) >> np.uint64(33)).astype(np.int64).tolist()


def draw_uniforms(
    source: torch.Generator | SampleKeys, counts: Sequence[int], steps: int, device: torch.device
) -> torch.Tensor:
    """[N, steps] float64 sampling uniforms from keys (batch-invariant) or a plain generator."""
    if isinstance(source, SampleKeys):
        return source.uniforms(counts, steps).to(device)
    n = int(sum(counts))
    u = torch.rand((n, steps), generator=source, dtype=torch.float64, device=source.device)
    return u.to(device)


@dataclass
class Generation:
    prompt_index: torch.Tensor  # [N] long: index into the prompt list given to the engine
    input_ids: torch.Tensor  # [N, L] long
    attention_mask: torch.Tensor  # [N, L] long: 1 on prompt and completion tokens
    completion_mask: torch.Tensor  # [N, L] bool: 1 on completion tokens (incl. EOS)
    behaviour_logprobs: torch.Tensor  # [N, L] float32: log-prob of the token at t (0 off-completion)
    completion_lengths: torch.Tensor  # [N] long, EOS included
    finished: torch.Tensor  # [N] bool: ended with EOS
    texts: list[str]  # decoded completions, EOS and padding removed
    prompt_width: int  # L_p: completions start at column L_p
    # [N, L] float32 entropy of the sampling distribution at each completion token, where the engine
    # can compute it (HF); None otherwise (the trainer then computes it in its log-prob pass).
    entropies: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.prompt_index.numel())

    @property
    def num_tokens(self) -> int:
        return int(self.completion_lengths.sum())

    def select(self, rows: torch.Tensor) -> Generation:
        return Generation(
            prompt_index=self.prompt_index[rows],
            input_ids=self.input_ids[rows],
            attention_mask=self.attention_mask[rows],
            completion_mask=self.completion_mask[rows],
            behaviour_logprobs=self.behaviour_logprobs[rows],
            completion_lengths=self.completion_lengths[rows],
            finished=self.finished[rows],
            texts=[self.texts[i] for i in rows.tolist()],
            prompt_width=self.prompt_width,
            entropies=self.entropies[rows] if self.entropies is not None else None,
        )

    @staticmethod
    def concat(parts: list[Generation], pad_id: int) -> Generation:
        """Stack generations from several engine calls (re-aligning prompt and completion columns)."""
        if len(parts) == 1:
            return parts[0]
        lp = max(p.prompt_width for p in parts)
        lc = max(p.input_ids.shape[1] - p.prompt_width for p in parts)

        def align(t: torch.Tensor, p: Generation, fill) -> torch.Tensor:
            left, right = lp - p.prompt_width, lc - (t.shape[1] - p.prompt_width)
            if left == 0 and right == 0:
                return t
            out = torch.full((t.shape[0], t.shape[1] + left + right), fill, dtype=t.dtype)
            out[:, left : left + t.shape[1]] = t
            return out

        return Generation(
            prompt_index=torch.cat([p.prompt_index for p in parts]),
            input_ids=torch.cat([align(p.input_ids, p, pad_id) for p in parts]),
            attention_mask=torch.cat([align(p.attention_mask, p, 0) for p in parts]),
            completion_mask=torch.cat([align(p.completion_mask, p, False) for p in parts]),
            behaviour_logprobs=torch.cat([align(p.behaviour_logprobs, p, 0.0) for p in parts]),
            completion_lengths=torch.cat([p.completion_lengths for p in parts]),
            finished=torch.cat([p.finished for p in parts]),
            texts=[t for p in parts for t in p.texts],
            prompt_width=lp,
            entropies=torch.cat([align(p.entropies, p, 0.0) for p in parts])
            if all(p.entropies is not None for p in parts)
            else None,
        )


class Engine(abc.ABC):
    """Generates completions with the current policy weights."""

    # True when the recorded behaviour log-probs are the trainer's own forward on the same weights and
    # dtype (so they equal a recomputation up to float rounding): optim.old_logprobs=auto uses them.
    exact_behaviour_logprobs: bool = False

    @abc.abstractmethod
    def generate(
        self,
        prompts: list[str],
        counts: list[int],
        params: SamplingParams,
        generator: torch.Generator | SampleKeys,
    ) -> Generation:
        """Sample ``counts[i]`` completions for ``prompts[i]``; rows are grouped by prompt, in order.

        ``generator``: the sampling randomness, either :class:`SampleKeys` (what the trainer passes:
        per-response streams, batch-invariant) or a ``torch.Generator``."""

    def attach_meter(self, meter) -> None:  # noqa: B027 - optional hook
        """Report generation work to ``meter`` (accounting.FlopMeter). Engines whose forwards run
        through the trainer's modules (HF) need nothing: the meter sees those forwards itself."""

    def sync_weights(self, model: torch.nn.Module) -> None:  # noqa: B027 - optional hook
        """Make the engine generate with ``model``'s current weights (no-op when it shares them)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""
