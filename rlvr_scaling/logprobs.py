"""Phase 3 of a cycle: the log-probs the loss compares against — pi_old (the behaviour policy) and pi_ref.

``optim.old_logprobs`` decides where pi_old comes from: the log-probs the engine recorded while
sampling (``behaviour``; ``auto`` when the engine samples with the trainer's own module and dtype, the
HF engine) or a forward pass of the trainer over the rollout after generation (``recompute``; what a
vLLM run does, since vLLM's kernels and dtype differ from the trainer's). The mean token entropy of the
rollout comes from the engine when it reports it, else from the same pass. The reference log-probs
(k3 KL term) come from the frozen reference model.

Only the rows that can reach the loss are computed: rows of a minibatch this rank trains on, minus rows
with zero advantage when there is no KL term (their gradient is exactly zero). Data-parallel, each rank
computes its own rows; entropies are reduced over the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .engines.base import Generation
from .policy import completion_logprobs_shared


@dataclass
class RolloutLogprobs:
    old: torch.Tensor  # [N, Lc] log pi_old of the sampled completion tokens (0 elsewhere / not computed)
    ref: torch.Tensor | None  # [N, Lc] log pi_ref, when the KL term is on
    entropy_mean: float  # mean token entropy of the rollout's completions under pi_old
    needed: torch.Tensor  # rows that reach the loss on some rank
    stats: dict[str, float] = field(default_factory=dict)  # logged as-is


class LogprobPhase:
    def __init__(self, cfg, full_model, ref_model, engine, device, dist, behaviour_model=None):
        self.cfg, self.full_model, self.ref_model, self.device, self.dist = (
            cfg,
            full_model,
            ref_model,
            device,
            dist,
        )
        # the weights that generated the rollout (staleness.py): a recomputed pi_old uses them
        self.behaviour_model = full_model if behaviour_model is None else behaviour_model
        mode = cfg.optim.old_logprobs
        self.behaviour = mode == "behaviour" or (mode == "auto" and engine.exact_behaviour_logprobs)

    def describe(self) -> str:
        return "from the engine (behaviour)" if self.behaviour else "recomputed"

    def compute(self, gen: Generation, plan, all_rows: bool = False) -> RolloutLogprobs:
        """``plan``: the rollout's optimizer steps as (rows, active rows) pairs. ``all_rows``: compute
        every active row on every rank (the per-sample noise instrument needs them all)."""
        dist = self.dist
        needed = torch.unique(torch.cat([a for _, a in plan])) if plan else torch.arange(0)
        mine = needed
        if dist.enabled and not all_rows:
            mine = torch.unique(torch.cat([a[dist.block(a.numel())] for _, a in plan] + [needed[:0]]))
        comp = gen.completion_mask[:, gen.prompt_width :]
        if gen.entropies is not None:
            if self.behaviour:  # theta_old's log-probs as the engine computed them while sampling
                old = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
            else:
                old, _ = self.logprobs(self.behaviour_model, gen, mine)
            entropy_mean = float(gen.entropies[:, gen.prompt_width :][comp].mean())
        else:  # the engine reports no entropies: each rank computes them on its block of rows
            rows = torch.arange(len(gen))[dist.block(len(gen))]
            todo = rows if self.behaviour else torch.unique(torch.cat([mine, rows]))
            old, ent = self.logprobs(self.behaviour_model, gen, todo, with_entropy=True)
            if self.behaviour:
                old = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
            entropy_mean = self.entropy_mean(ent, comp, rows)
        ref = self.logprobs(self.ref_model, gen, mine)[0] if self.ref_model is not None else None
        return RolloutLogprobs(old, ref, entropy_mean, needed)

    def logprobs(self, model, gen: Generation, rows: torch.Tensor | None = None, with_entropy: bool = False):
        """Per-token log-probs (and entropies) of the completion columns, [N, Lc], for ``rows``
        (default: all; the others stay 0), in chunks of ``rollout.generation_batch_responses``."""
        lc = gen.input_ids.shape[1] - gen.prompt_width
        logp = torch.zeros((len(gen), lc))
        ent = torch.zeros((len(gen), lc)) if with_entropy else None
        todo = torch.arange(len(gen)) if rows is None else rows
        chunk = self.cfg.rollout.generation_batch_responses or max(todo.numel(), 1)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for s in range(0, todo.numel(), chunk):
                sel = todo[s : s + chunk]
                # each distinct prompt runs once (a group's G rows share it): same numbers, less work
                lp, h = completion_logprobs_shared(
                    model,
                    gen.input_ids[sel].to(self.device),
                    gen.attention_mask[sel].to(self.device),
                    gen.prompt_width,
                    self.cfg.rollout.temperature,
                    with_entropy,
                )
                logp[sel, : lp.shape[1]] = lp.cpu()
                if with_entropy:
                    ent[sel, : h.shape[1]] = h.cpu()
        model.train(was_training)
        comp = gen.completion_mask[:, gen.prompt_width :]
        logp = torch.where(comp, logp, torch.zeros_like(logp))
        return logp, ent

    def entropy_mean(self, ent: torch.Tensor, comp: torch.Tensor, rows: torch.Tensor) -> float:
        """Mean entropy over the completion tokens of all ranks' ``rows`` (this rank's block)."""
        sums = [float(ent[rows][comp[rows]].sum()), float(comp[rows].sum())]
        total, count = self.dist.all_reduce_sum(sums)
        return total / max(count, 1.0)

    def rollout_entropy(self, gen: Generation) -> float:
        """Mean token entropy of ``gen``'s completions (evaluation): the engine's, or a pass over the rows."""
        comp = gen.completion_mask[:, gen.prompt_width :]
        if gen.entropies is not None:
            return float(gen.entropies[:, gen.prompt_width :][comp].mean())
        rows = torch.arange(len(gen))[self.dist.block(len(gen))]
        _, ent = self.logprobs(self.full_model, gen, rows, with_entropy=True)
        return self.entropy_mean(ent, comp, rows)
