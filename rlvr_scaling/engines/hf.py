"""Generation with a Hugging Face ``transformers`` causal LM: batched sampling with a KV cache.

A hand-written decode loop rather than ``model.generate`` because the trainer needs, in one pass,
the behaviour log-prob of every sampled token, per-sequence stopping, and sampling from an explicit
``torch.Generator`` (so a resumed run draws exactly the numbers the uninterrupted run drew). On a
~1M-parameter model the loop is within a few percent of ``generate``. The engine shares the trainer's
model object, so weight sync is free.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ..registry import Registry
from .base import Engine, Generation, SamplingParams

ENGINES: Registry[type] = Registry("engine")


def position_ids_from_mask(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_tokens(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next tokens and their log-probs under softmax(logits / T). logits: [n, V] float32."""
    if params.greedy:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    if params.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > params.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


@ENGINES.register("hf")
class HFEngine(Engine):
    def __init__(self, model, tokenizer, device: torch.device, max_batch_responses: int | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.max_batch = max_batch_responses
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    def encode(self, prompts: list[str]) -> list[list[int]]:
        # add_special_tokens: the tokenizer's own convention (a BOS for Llama-style and the embedded
        # tokenizer, nothing for Qwen), the same convention the warm start and the trainer use.
        return [self.tokenizer.encode(p, add_special_tokens=True) for p in prompts]

    @torch.no_grad()
    def generate(self, prompts, counts, params, generator) -> Generation:
        encoded = self.encode(prompts)
        rows = [i for i, c in enumerate(counts) for _ in range(c)]
        if not rows:
            raise ValueError("generate() called with zero responses")
        chunk = self.max_batch or len(rows)
        parts = [
            self._generate_rows(
                [encoded[i] for i in rows[s : s + chunk]], rows[s : s + chunk], params, generator
            )
            for s in range(0, len(rows), chunk)
        ]
        return Generation.concat(parts, self.pad_id)

    def _generate_rows(self, prompt_ids, rows, params: SamplingParams, generator) -> Generation:
        n, lp, dev = len(prompt_ids), max(len(p) for p in prompt_ids), self.device
        ids = torch.full((n, lp), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, lp), dtype=torch.long)
        for i, p in enumerate(prompt_ids):
            ids[i, lp - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, lp - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        was_training = self.model.training
        self.model.eval()
        cache = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=position_ids_from_mask(mask),
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        next_pos = mask.sum(-1, keepdim=True) - 1  # [n, 1] position of the last prompt token
        tokens_out, logps_out = [], []
        alive = torch.ones(n, dtype=torch.bool, device=dev)
        lengths = torch.zeros(n, dtype=torch.long, device=dev)
        full_mask = mask
        for _ in range(params.max_new_tokens):
            logits = out.logits[:, -1, :].float()
            tok, lp_tok = sample_tokens(logits, params, generator)
            tok = torch.where(alive, tok, torch.full_like(tok, self.pad_id))
            lp_tok = torch.where(alive, lp_tok, torch.zeros_like(lp_tok))
            tokens_out.append(tok)
            logps_out.append(lp_tok)
            step_mask = alive.long()
            lengths += step_mask
            alive = alive & (tok != self.eos_id)
            full_mask = torch.cat([full_mask, step_mask[:, None]], dim=1)
            if not alive.any() or len(tokens_out) == params.max_new_tokens:
                break
            next_pos = next_pos + 1
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=full_mask,
                position_ids=next_pos,
                cache=out.cache,
                use_cache=True,
            )
        if was_training:
            self.model.train()
        completion = torch.stack(tokens_out, dim=1).cpu()  # [n, Lc]
        comp_logp = torch.stack(logps_out, dim=1).float().cpu()
        comp_mask = full_mask[:, lp:].bool().cpu()
        lengths = lengths.cpu()
        finished = (completion == self.eos_id).any(dim=1) & comp_mask.any(dim=1)
        texts = []
        for i in range(n):
            toks = completion[i, : int(lengths[i])].tolist()
            if toks and toks[-1] == self.eos_id:
                toks = toks[:-1]
            texts.append(self.tokenizer.decode(toks, skip_special_tokens=True))
        return Generation(
            prompt_index=torch.tensor(rows, dtype=torch.long),
            input_ids=torch.cat([ids.cpu(), completion], dim=1),
            attention_mask=torch.cat([mask.cpu(), comp_mask.long()], dim=1),
            completion_mask=torch.cat([torch.zeros((n, lp), dtype=torch.bool), comp_mask], dim=1),
            behaviour_logprobs=torch.cat([torch.zeros((n, lp)), comp_logp], dim=1),
            completion_lengths=lengths,
            finished=finished,
            texts=texts,
            prompt_width=lp,
        )
