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

**Generation-trainer mismatch.** Whenever pi_old is recomputed, the engine's behaviour log-probs of the
same tokens are in hand, and their disagreement is logged on every rollout (:func:`mismatch_sums`), over
the completion tokens of the recomputed rows, with d = log pi_trainer - log pi_engine per token:
``rollout/mismatch_logp_abs_mean`` (mean |d|), ``rollout/mismatch_logp_abs_max`` (max |d|),
``rollout/mismatch_ratio_outside_frac`` (fraction of tokens with pi_trainer / pi_engine outside
[0.5, 2], i.e. |d| > log 2) and ``rollout/mismatch_kl`` (mean of the k3 estimator exp(d) - 1 - d,
unbiased for KL(pi_engine || pi_trainer) per token since the tokens were sampled by the engine). vLLM
in bf16 against the trainer is the case that matters; the HF engine in bf16 shows the smaller
disagreement of an incremental decode against a full forward. Data-parallel, the sums are reduced over
the ranks (a row recomputed on two ranks counts twice).

**Truncated importance sampling** (``loss.tis``, :func:`tis_weights`): the loss's ratio is taken
against the recomputed pi_old, but the tokens were sampled by the engine's pi_engine. Yao et al. (2025,
"Your efficient RL framework secretly brings you off-policy RL training") correct the policy gradient
by the importance weight pi_old / pi_engine, truncated from above at C to bound the variance:

    token:     w_it = min(pi_old(o_it) / pi_engine(o_it), C)
    sequence:  w_i  = min(prod_t pi_old(o_it) / pi_engine(o_it), C)   (the same w_i on every token)

detached, multiplying each token's objective loss (:class:`~rlvr_scaling.algorithms.loss.LossBatch`
``is_weights``; the KL term is not weighted), as verl's and OpenRLHF's TIS do; C = ``loss.tis_cap``
(2 in the paper). TIS needs the recomputation: ``optim.old_logprobs=auto`` recomputes when ``loss.tis``
is set, ``behaviour`` is refused (the weight would be 1 by construction). Not implemented: icepop-style
masking of tokens whose ratio leaves a band. Logged: ``rollout/tis_weight_mean`` and
``rollout/tis_capped_frac`` over the recomputed rows' tokens (token) or responses (sequence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .config import check_logprob_config  # noqa: F401 (a start-up check of this phase, kept in config.py)
from .engines.base import Generation
from .policy import completion_logprobs_shared

LOG2 = math.log(2.0)


@dataclass
class RolloutLogprobs:
    old: torch.Tensor  # [N, Lc] log pi_old of the sampled completion tokens (0 elsewhere / not computed)
    ref: torch.Tensor | None  # [N, Lc] log pi_ref, when the KL term is on
    entropy_mean: float  # mean token entropy of the rollout's completions under pi_old
    needed: torch.Tensor  # rows that reach the loss on some rank
    stats: dict[str, float] = field(default_factory=dict)  # logged as-is (rollout/mismatch_*, rollout/tis_*)
    is_weights: torch.Tensor | None = None  # [N, Lc] truncated IS weights (loss.tis), 1 off-completion


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
        self.tis = cfg.loss.tis
        self.behaviour = mode == "behaviour" or (
            mode == "auto" and engine.exact_behaviour_logprobs and self.tis is None
        )

    def describe(self) -> str:
        if self.behaviour:
            return "from the engine (behaviour)"
        tis = f"; truncated IS ({self.tis}, cap {self.cfg.loss.tis_cap:g})" if self.tis else ""
        return f"recomputed (engine mismatch logged{tis})"

    def compute(self, gen: Generation, plan, all_rows: bool = False) -> RolloutLogprobs:
        """``plan``: the rollout's optimizer steps as (rows, active rows) pairs. ``all_rows``: compute
        every active row on every rank (the per-sample noise instrument needs them all)."""
        dist = self.dist
        needed = torch.unique(torch.cat([a for _, a in plan])) if plan else torch.arange(0)
        mine = needed
        if dist.enabled and not all_rows:
            mine = torch.unique(torch.cat([a[dist.block(a.numel())] for _, a in plan] + [needed[:0]]))
        comp = gen.completion_mask[:, gen.prompt_width :]
        behaviour = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
        recomputed = mine
        if gen.entropies is not None:
            if self.behaviour:  # theta_old's log-probs as the engine computed them while sampling
                old = behaviour
            else:
                old, _ = self.logprobs(self.behaviour_model, gen, mine)
            entropy_mean = float(gen.entropies[:, gen.prompt_width :][comp].mean())
        else:  # the engine reports no entropies: each rank computes them on its block of rows
            rows = torch.arange(len(gen))[dist.block(len(gen))]
            recomputed = torch.unique(torch.cat([mine, rows]))
            old, ent = self.logprobs(self.behaviour_model, gen, rows if self.behaviour else recomputed, True)
            if self.behaviour:
                old = behaviour
            entropy_mean = self.entropy_mean(ent, comp, rows)
        ref = self.logprobs(self.ref_model, gen, mine)[0] if self.ref_model is not None else None
        out = RolloutLogprobs(old, ref, entropy_mean, needed)
        if not self.behaviour:
            on = torch.zeros_like(comp)
            on[recomputed] = comp[recomputed]
            out.stats = self._reduce_stats(mismatch_sums(old, behaviour, on))
            if self.tis is not None:
                out.is_weights, sums = tis_weights(old, behaviour, on, self.tis, self.cfg.loss.tis_cap)
                out.stats.update(self._reduce_stats(sums))
        return out

    def _reduce_stats(self, sums: dict[str, float]) -> dict[str, float]:
        """Means (and maxima) over all ranks' rows from this rank's sums (see :func:`mismatch_sums`)."""
        keys = sorted(k for k in sums if not k.endswith("_max"))
        total = dict(zip(keys, self.dist.all_reduce_sum([sums[k] for k in keys])))
        maxima = {k: sums[k] for k in sums if k.endswith("_max")}
        if self.dist.enabled and maxima:
            parts = self.dist.all_gather_object(maxima)
            maxima = {k: max(p[k] for p in parts) for k in maxima}
        return summarise(total, maxima)

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


# ---------------------------------------------------------------------- mismatch and truncated IS


def mismatch_sums(
    trainer_logp: torch.Tensor, engine_logp: torch.Tensor, on: torch.Tensor
) -> dict[str, float]:
    """Sums over the tokens ``on`` [N, Lc] of d = log pi_trainer - log pi_engine: |d|, k3 = exp(d) - 1 - d,
    tokens with |d| > log 2 (ratio outside [0.5, 2]), the token count, and the largest |d|."""
    d = (trainer_logp.double() - engine_logp.double())[on]
    return {
        "mismatch_tokens": float(d.numel()),
        "mismatch_abs_sum": float(d.abs().sum()),
        "mismatch_outside_sum": float((d.abs() > LOG2).sum()),
        "mismatch_k3_sum": float((torch.expm1(d) - d).sum()),
        "mismatch_abs_max": float(d.abs().max()) if d.numel() else math.nan,
    }


def tis_weights(
    old_logp: torch.Tensor, engine_logp: torch.Tensor, on: torch.Tensor, level: str, cap: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """Truncated importance weights (module docstring) [N, Lc] (1 off ``on``) and their sums."""
    d = torch.where(on, old_logp.double() - engine_logp.double(), torch.zeros((), dtype=torch.float64))
    log_cap = math.log(cap)
    if level == "token":
        logw = d.clamp(max=log_cap)
        capped = (d > log_cap) & on
        units, w_units = on, logw.exp()
    elif level == "sequence":
        seq = d.sum(dim=1, keepdim=True)  # log prod_t ratio
        logw = seq.clamp(max=log_cap).expand_as(d)
        rows = on.any(dim=1, keepdim=True)
        units, w_units = rows, seq.clamp(max=log_cap).exp()
        capped = (seq > log_cap) & rows
    else:
        raise ValueError(f"unknown TIS level {level!r}")
    weights = torch.where(on, logw.exp(), torch.ones((), dtype=torch.float64)).float()
    return weights, {
        "tis_units": float(units.sum()),
        "tis_weight_sum": float(w_units[units].sum()),
        "tis_capped_sum": float(capped.sum()),
    }


def summarise(sums: dict[str, float], maxima: dict[str, float]) -> dict[str, float]:
    """The ``rollout/`` statistics from summed counts (over ranks) and maxima."""
    out: dict[str, float] = {}
    n = sums.get("mismatch_tokens", 0.0)
    if n > 0:
        out["rollout/mismatch_logp_abs_mean"] = sums["mismatch_abs_sum"] / n
        out["rollout/mismatch_logp_abs_max"] = maxima["mismatch_abs_max"]
        out["rollout/mismatch_ratio_outside_frac"] = sums["mismatch_outside_sum"] / n
        out["rollout/mismatch_kl"] = sums["mismatch_k3_sum"] / n
    u = sums.get("tis_units", 0.0)
    if u > 0:
        out["rollout/tis_weight_mean"] = sums["tis_weight_sum"] / u
        out["rollout/tis_capped_frac"] = sums["tis_capped_sum"] / u
    return out
