"""Log-probabilities of completion tokens under a causal LM (the trainer's side of the ratio)."""

from __future__ import annotations

import torch

from .engines.hf import position_ids_from_mask
from .models import kv_cache


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
    return token_logprobs(out.logits[:, :-1], input_ids[:, start:], temperature, with_entropy)


def token_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log softmax(logits / T) at ``tokens`` (logits [..., V], tokens [...]), and the entropies."""
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy


def completion_logprobs_shared(
    model,
    input_ids: torch.Tensor,  # [n, L]: left-padded prompts in columns < prompt_width, then completions
    attention_mask: torch.Tensor,  # [n, L]
    prompt_width: int,
    temperature: float,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What :func:`completion_logprobs` computes on the same rows, with each distinct prompt run once.

    A GRPO minibatch holds several responses to the same prompt; the prompt's hidden states (and so
    its keys and values) are the same for all of them. The prompts are de-duplicated, run once with a
    KV cache, the cache is indexed out to the rows, and the completions run on top of it. The
    gradient reaches the prompt computation through the cache, summed over the rows that share it, so
    the forward and the gradient are the plain computation's, up to float rounding (different matrix
    shapes). Returns log-probs (and entropies) of the completion columns, trimmed of columns that are
    padding in every row: [n, Lc].
    """
    from transformers import DynamicCache

    n = input_ids.shape[0]
    p_ids, p_mask = input_ids[:, :prompt_width], attention_mask[:, :prompt_width]
    c_ids, c_mask = input_ids[:, prompt_width:], attention_mask[:, prompt_width:]
    # drop prompt columns that are padding for every row (left) and completion columns (right)
    used = p_mask.bool().any(dim=0).nonzero()
    left = int(used[0]) if used.numel() else prompt_width - 1
    p_ids, p_mask = p_ids[:, left:], p_mask[:, left:]
    c_used = c_mask.bool().any(dim=0).nonzero()
    lc = max(int(c_used[-1]) + 1 if c_used.numel() else 1, 1)
    c_ids, c_mask = c_ids[:, :lc], c_mask[:, :lc]
    key = torch.cat([p_ids, p_mask], dim=1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    lp = p_ids.shape[1]
    u_ids, u_mask = uniq[:, :lp], uniq[:, lp:]
    cache = DynamicCache(config=model.config) if lc > 1 else None
    out = model(
        input_ids=u_ids,
        attention_mask=u_mask,
        position_ids=position_ids_from_mask(u_mask),
        **kv_cache(model, cache),
        use_cache=lc > 1,
        logits_to_keep=1,
    )
    logits = out.logits[inverse]  # [n, 1, V]: predicts the first completion token
    if lc > 1:  # the cache now holds the prompts' keys and values; one copy per row
        cache.batch_select_indices(inverse.to(u_ids.device))
        row_mask = u_mask[inverse]
        full_mask = torch.cat([row_mask, c_mask[:, : lc - 1]], dim=1)
        positions = row_mask.sum(-1, keepdim=True) + torch.arange(lc - 1, device=input_ids.device)[None, :]
        out2 = model(
            input_ids=c_ids[:, : lc - 1],
            attention_mask=full_mask,
            position_ids=positions,
            **kv_cache(model, cache),
            use_cache=True,
        )
        logits = torch.cat([logits, out2.logits], dim=1)
    logp, entropy = token_logprobs(logits, c_ids, temperature, with_entropy)
    assert logp.shape == (n, lc)
    return logp, entropy


def completion_logprobs_packed(
    model,
    input_ids: torch.Tensor,  # [n, L]: left-padded prompts in columns < prompt_width, then completions
    attention_mask: torch.Tensor,  # [n, L]
    prompt_width: int,
    temperature: float,
    max_tokens: int = 512,
) -> torch.Tensor:
    """What :func:`completion_logprobs` computes on the same rows, without padding: the rows' real
    tokens are packed into sequences of at most ``max_tokens`` (whole rows) with position ids
    restarting at every row, which makes the model attend only within each row (transformers builds
    the block-causal mask from the position ids), and logits are taken only at the positions that
    predict a completion token. The same forward and gradient, up to float rounding, with no compute
    on padding (a minibatch of responses of unequal lengths is ~20 % padding on the default task).
    The cap keeps the packed attention mask (quadratic in the packed length) small. Returns [n, Lc]
    log-probs of the completion columns (Lc = the longest completion; 0 beyond a row's completion).
    """
    mask = attention_mask.bool()
    n = mask.shape[0]
    lengths = mask.sum(1)
    c_len = lengths - mask[:, :prompt_width].sum(1)
    lc = max(int(c_len.max()), 1)
    bounds, total, first = [], 0, 0
    for i, length in enumerate(lengths.tolist()):
        if total and total + length > max_tokens:
            bounds.append((first, i))
            first, total = i, 0
        total += length
    bounds.append((first, n))
    parts = [
        _packed_chunk(model, input_ids[a:b], mask[a:b], prompt_width, temperature, lc) for a, b in bounds
    ]
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def _packed_chunk(model, input_ids, mask, prompt_width: int, temperature: float, lc: int) -> torch.Tensor:
    n = mask.shape[0]
    device = input_ids.device
    lengths = mask.sum(1)
    p_len = mask[:, :prompt_width].sum(1)
    c_len = lengths - p_len
    flat = input_ids[mask]  # row-major: each row's prompt tokens, then its completion tokens
    starts = torch.cumsum(lengths, 0) - lengths
    positions = torch.arange(flat.numel(), device=device) - starts.repeat_interleave(lengths)
    t = torch.arange(lc, device=device)
    valid = t[None, :] < c_len[:, None]
    predicting = (starts + p_len - 1)[:, None] + t[None, :]  # the position whose logits predict token t
    keep = predicting[valid]
    out = model(input_ids=flat[None], position_ids=positions[None], use_cache=False, logits_to_keep=keep)
    lp, _ = token_logprobs(out.logits[0], flat[keep + 1], temperature)
    rows, cols = valid.nonzero(as_tuple=True)
    return torch.zeros((n, lc), dtype=lp.dtype, device=device).index_put((rows, cols), lp)
