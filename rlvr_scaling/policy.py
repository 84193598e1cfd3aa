"""Log-probabilities of completion tokens under a causal LM (the trainer's side of the ratio)."""

from __future__ import annotations

import torch

from .engines.hf import position_ids_from_mask


def trim_padding(input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int):
    """Drop columns that are padding in every row (left of the prompts, right of the completions).

    Returns the trimmed tensors and the completion start column in trimmed coordinates. Exact: a
    column that no row attends to changes nothing.
    """
    used = attention_mask.bool().any(dim=0)
    idx = used.nonzero().squeeze(-1)
    left = int(idx[0]) if idx.numel() else 0
    left = min(left, start - 1)  # keep the column that predicts the first completion token
    right = int(idx[-1]) + 1 if idx.numel() else input_ids.shape[1]
    right = max(right, start + 1)
    return input_ids[:, left:right], attention_mask[:, left:right], start - left


def completion_logprobs(
    model,
    input_ids: torch.Tensor,  # [n, L]
    attention_mask: torch.Tensor,  # [n, L]
    start: int,  # first completion column (>= 1)
    temperature: float,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log softmax(logits / T) of the tokens in columns start..L-1: [n, L - start] (and entropies)."""
    length = input_ids.shape[1]
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        logits_to_keep=length - start + 1,
        use_cache=False,
    )
    logits = out.logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, input_ids[:, start:, None]).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy
