"""Phase 6 of a cycle: advance the clocks and assemble the rollout's training row.

Every response the rollout generated counts on the ``responses`` clock (trained-on responses, responses
an allocator or filter drew, ReMax's greedy responses, and the responses dynamic sampling drew and
discarded); ``tokens`` counts their generated tokens.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .clocks import Clocks
from .collect import RolloutBatch


def charge(clocks: Clocks, batch: RolloutBatch, n_params: int, cfg, has_ref: bool) -> None:
    """Advance the clocks by one rollout (FLOPs: 2N per forward token, 6N per trained token)."""
    gen, greedy = batch.gen, batch.greedy
    n, tokens = len(gen), gen.num_tokens
    prompt_tokens = int(gen.attention_mask.sum()) - tokens
    passes = 2 * (1 + has_ref) + 6 * cfg.optim.epochs
    n_greedy, greedy_tokens = (len(greedy), greedy.num_tokens) if greedy is not None else (0, 0)
    greedy_seq = int(greedy.attention_mask.sum()) if greedy is not None else 0
    clocks.rollout += 1
    clocks.responses += n + n_greedy
    clocks.tokens += tokens + greedy_tokens
    clocks.flops += float(n_params) * (
        2 * (tokens + prompt_tokens) + passes * (tokens + prompt_tokens) + 2 * greedy_seq
    )
    if batch.discarded is not None:  # dynamic sampling: generated (2N per token), never trained on
        dropped = batch.discarded
        clocks.responses += len(dropped)
        clocks.tokens += dropped.num_tokens
        clocks.flops += float(n_params) * 2 * int(dropped.attention_mask.sum())


def training_row(
    batch: RolloutBatch, advantages: torch.Tensor, entropy_mean: float, needed: int
) -> dict[str, Any]:
    """The rollout's own statistics: rewards, lengths, entropy, allocation (``train/``, ``rollout/``)."""
    gen, rewards = batch.gen, batch.rewards
    valid = ~torch.isnan(rewards)
    rv = rewards[valid]
    row: dict[str, Any] = {
        "train/reward_mean": float(rv.mean()) if rv.numel() else math.nan,
        "train/reward_std": float(rv.std()) if rv.numel() > 1 else 0.0,
        "train/accuracy": float((rv >= 1.0 - 1e-9).double().mean()) if rv.numel() else math.nan,
        "train/unscorable": int((~valid).sum()),
        "train/zero_adv_frac": float((advantages == 0).float().mean()),
        "train/completion_length": float(gen.completion_lengths.float().mean()),
        "train/finished_frac": float(gen.finished.float().mean()),
        "train/entropy": entropy_mean,
        "rollout/responses": len(gen),
        "rollout/tokens": gen.num_tokens,
        "rollout/prompts": batch.n_prompts,
        "rollout/rounds": batch.rounds,
        "rollout/responses_in_gradient": needed,
        **{f"rollout/{k}": v for k, v in batch.stats.items()},
    }
    if batch.greedy is not None:
        row["rollout/greedy_responses"] = len(batch.greedy)
        row["rollout/greedy_tokens"] = batch.greedy.num_tokens
        row["train/greedy_reward_mean"] = float(batch.greedy_rewards.nanmean())
    return row
