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

from ..models import autocast_region, encode_prompt, kv_cache, stop_token_ids
from ..registry import Registry
from .base import Engine, Generation, SamplingParams, draw_uniforms

ENGINES: Registry[type] = Registry("engine")


def position_ids_from_mask(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_tokens(
    logits: torch.Tensor, params: SamplingParams, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Next tokens, their log-probs and the entropy under softmax(logits / T). logits: [n, V] float32.

    Sampling is by inversion: row i takes the token whose interval of the cumulative distribution
    holds ``uniforms[i]`` (one uniform per row and step, drawn up front from per-response streams), so
    a response's tokens do not depend on which other rows share its batch. Greedy decoding reports
    log-probs and entropy at temperature 1.
    """
    if params.greedy:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = logits.argmax(dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1), entropy
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    entropy = -(probs * logp).sum(-1)
    if params.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > params.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    cdf = probs.double().cumsum(-1)
    tokens = torch.searchsorted(cdf, (uniforms.to(cdf.dtype) * cdf[:, -1])[:, None], right=True).squeeze(-1)
    # rounding at the top of the CDF must not select a zero-probability tail token
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).to(torch.uint8).argmax(-1)
    tokens = torch.minimum(tokens, last)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1), entropy


@ENGINES.register("hf")
class HFEngine(Engine):
    exact_behaviour_logprobs = True  # the trainer's model object itself (or its unsharded copy)

    def __init__(
        self,
        model,
        tokenizer,
        device: torch.device,
        max_batch_responses: int | None = None,
        prompt_format: str = "plain",
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.max_batch = max_batch_responses
        self.prompt_format = prompt_format
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        # models.stop_token_ids: EOS, generation_config's eos ids, the chat template's end of turn
        generation_config = getattr(getattr(model, "module", model), "generation_config", None)
        self.stop_ids = stop_token_ids(tokenizer, generation_config, prompt_format)

    def encode(self, prompts: list[str]) -> list[list[int]]:
        # models.encode_prompt: the one encoding every engine and the warm start use (model.prompt_format).
        return [encode_prompt(self.tokenizer, p, self.prompt_format) for p in prompts]

    @torch.no_grad()
    def generate(self, prompts, counts, params, generator) -> Generation:
        encoded = self.encode(prompts)
        rows = [i for i, c in enumerate(counts) for _ in range(c)]
        if not rows:
            raise ValueError("generate() called with zero responses")
        chunk = self.max_batch or len(rows)
        uniforms = draw_uniforms(generator, counts, params.max_new_tokens, self.device)
        # one autocast region over the whole call (mixed precision): the fp32 weights are cast to the
        # compute dtype once, not at every decoding step
        with autocast_region(self.model):
            parts = [
                self._generate_rows(
                    [encoded[i] for i in rows[s : s + chunk]],
                    rows[s : s + chunk],
                    params,
                    uniforms[s : s + chunk],
                )
                for s in range(0, len(rows), chunk)
            ]
        return Generation.concat(parts, self.pad_id)

    def _generate_rows(self, prompt_ids, rows, params: SamplingParams, uniforms: torch.Tensor) -> Generation:
        n, lp, dev = len(prompt_ids), max(len(p) for p in prompt_ids), self.device
        ids = torch.full((n, lp), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, lp), dtype=torch.long)
        for i, p in enumerate(prompt_ids):
            ids[i, lp - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, lp - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        max_new = params.max_new_tokens
        completion = torch.full((n, max_new), self.pad_id, dtype=torch.long, device=dev)
        comp_logp = torch.zeros((n, max_new), device=dev)
        comp_entropy = torch.zeros((n, max_new), device=dev)
        lengths = torch.zeros(n, dtype=torch.long, device=dev)
        stops = torch.tensor(self.stop_ids, dtype=torch.long, device=dev)
        was_training = self.model.training
        self.model.eval()
        # Prefill each distinct prompt once (a GRPO group repeats its prompt G times), then give every
        # response its copy of the prompt's KV cache: same computation, 1/G of the prefill work.
        first = [i for i in range(n) if i == 0 or rows[i] != rows[i - 1]]
        expand = torch.repeat_interleave(
            torch.arange(len(first), device=dev),
            torch.tensor([b - a for a, b in zip(first, first[1:] + [n])], device=dev),
        )
        cache = DynamicCache(config=self.model.config)
        uniq_mask = mask[first]
        out = self.model(
            input_ids=ids[first],
            attention_mask=uniq_mask,
            position_ids=position_ids_from_mask(uniq_mask),
            **kv_cache(self.model, cache),
            use_cache=True,
            logits_to_keep=1,
        )
        if len(first) < n:
            cache.batch_select_indices(expand)
            out.logits = out.logits[expand]
        # Rows still generating; finished rows are dropped from the batch and its KV cache, so a
        # rollout whose answers stop early costs only what it generates.
        active = torch.arange(n, device=dev)
        act_mask = mask
        next_pos = mask.sum(-1, keepdim=True) - 1
        for t in range(max_new):
            logits = out.logits[:, -1, :].float()
            tok, lp_tok, ent = sample_tokens(logits, params, uniforms[active, t])
            completion[active, t] = tok
            comp_logp[active, t] = lp_tok
            comp_entropy[active, t] = ent
            lengths[active] += 1
            alive = ~torch.isin(tok, stops)
            if t == max_new - 1 or not alive.any():
                break
            act_mask = torch.cat([act_mask, torch.ones_like(act_mask[:, :1])], dim=1)
            next_pos = next_pos + 1
            if not alive.all():
                keep = alive.nonzero().squeeze(-1)
                active, tok, act_mask, next_pos = active[keep], tok[keep], act_mask[keep], next_pos[keep]
                cache.batch_select_indices(keep)
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=act_mask,
                position_ids=next_pos,
                **kv_cache(self.model, cache),
                use_cache=True,
            )
        if was_training:
            self.model.train()
        completion, comp_logp, comp_entropy = completion.cpu(), comp_logp.cpu(), comp_entropy.cpu()
        lengths = lengths.cpu()
        width = max(int(lengths.max()), 1)
        completion, comp_logp, comp_entropy = (
            completion[:, :width],
            comp_logp[:, :width],
            comp_entropy[:, :width],
        )
        comp_mask = torch.arange(width)[None, :] < lengths[:, None]
        last = completion.gather(1, (lengths - 1).clamp(min=0)[:, None]).squeeze(1)
        finished = torch.isin(last, stops.cpu()) & (lengths > 0)
        texts = []
        for i in range(n):
            toks = completion[i, : int(lengths[i])].tolist()
            if finished[i]:
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
            entropies=torch.cat([torch.zeros((n, lp)), comp_entropy], dim=1),
        )
