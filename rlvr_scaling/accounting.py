"""Phase 6 of a cycle: advance the clocks and assemble the rollout's training row.

Every response the rollout generated counts on the ``responses`` clock (trained-on responses, responses
an allocator or filter drew, ReMax's greedy responses, and the responses dynamic sampling drew and
discarded); ``tokens`` counts their generated tokens.

**FLOPs** (docs/flops.md). Two clocks:

- ``flops``: the model FLOPs of the forward and backward passes that actually ran during the rollout,
  on every rank, counted by :class:`FlopMeter` from the inputs of every forward call of the policy and
  reference models (and reported by engines whose forwards it cannot see, vLLM). Per forward over T
  real (non-padding) input tokens, of which the logits of K positions are computed, each token attending
  to c_t real positions (itself included):

      F = 2 * N_body * T + 2 * N_head * K + 4 * n_layers * d_attn * sum_t c_t

  with N_body the weights of the transformer's linear layers (embeddings excluded: a lookup is no
  matmul), N_head the output projection's (d_model x vocabulary), d_attn = heads x head_dim (the
  4 = QK^T and AV at 2 FLOPs per multiply-add). A forward with gradient (training, exact per-sample
  gradients) counts 3F (forward + backward). So generation is charged one prefill per distinct prompt
  per engine call plus one token per decoding step, rows skipped for zero advantage are not charged, the
  old-log-prob pass only when it ran, the per-sample and baseline-weight passes and the drift pass after
  the last step when they ran; evaluation is not training work and is not charged. Padding, norms,
  softmax and the optimizer step are not counted (model FLOPs, as in MFU).
- ``flops_nominal``: the framework-independent count of the nominal formula, N = all parameters:
  2N per prompt-plus-completion token of every generated response (greedy ones included), 2N per such
  token for an old-log-prob pass and again for a reference pass when there is a KL term, and 6N per such
  token per epoch for training on every response. It depends only on (N, tokens, B, epochs), which makes
  it comparable across frameworks; it is what the ``flops`` clock logged before it counted real work.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any

import torch

from .clocks import Clocks
from .collect import RolloutBatch


def charge(clocks: Clocks, batch: RolloutBatch, n_params: int, cfg, has_ref: bool, flops: float) -> None:
    """Advance the clocks by one rollout; ``flops``: the work metered over the rollout (all ranks)."""
    gen, greedy = batch.gen, batch.greedy
    n, tokens = len(gen), gen.num_tokens
    prompt_tokens = int(gen.attention_mask.sum()) - tokens
    passes = 2 * (1 + has_ref) + 6 * cfg.optim.epochs
    n_greedy, greedy_tokens = (len(greedy), greedy.num_tokens) if greedy is not None else (0, 0)
    greedy_seq = int(greedy.attention_mask.sum()) if greedy is not None else 0
    clocks.rollout += 1
    clocks.responses += n + n_greedy
    clocks.tokens += tokens + greedy_tokens
    clocks.flops += flops
    clocks.flops_nominal += float(n_params) * (
        2 * (tokens + prompt_tokens) + passes * (tokens + prompt_tokens) + 2 * greedy_seq
    )
    if batch.discarded is not None:  # dynamic sampling: generated, never trained on
        dropped = batch.discarded
        clocks.responses += len(dropped)
        clocks.tokens += dropped.num_tokens
        # (their generation forwards are in `flops` already: the meter saw them)
        clocks.flops_nominal += float(n_params) * 2 * int(dropped.attention_mask.sum())


class FlopMeter:
    """Counts the model FLOPs (module docstring) of every forward of the modules it is attached to.

    A forward pre-hook reads the call's ``input_ids``, ``attention_mask``, ``position_ids`` and
    ``logits_to_keep``: real tokens are the mask's 1s over the new columns; a token's context is its
    position id + 1 (left padding, packed rows restarting at 0 and KV-cached decoding all give the
    number of real positions it attends to), or the count of real positions up to it without position
    ids. Counts accumulate on the tensors' device and are read (one synchronisation) by :meth:`stop`.
    """

    def __init__(self, model: torch.nn.Module):
        self.body, self.head, self.attn = flop_constants(model)
        self._sums: dict[str, Any] = {}
        self._handles: list = []
        self._attached: set[int] = set()

    @classmethod
    def for_trainer(cls, parallel, ref_model, engine) -> FlopMeter:
        """A meter on every module a cycle runs forwards through: the training module, its unsharded
        copy (engine, log-prob passes), the reference model; engines that run forwards elsewhere (vLLM)
        report to it themselves."""
        meter = cls(parallel.full_module)
        for module in (parallel.params_module, parallel.full_module, ref_model):
            if module is not None:
                meter.attach(module)
        engine.attach_meter(meter)
        return meter

    def attach(self, module: torch.nn.Module) -> None:
        if id(module) in self._attached:
            return
        self._attached.add(id(module))
        trains = any(p.requires_grad for p in module.parameters())
        self._handles.append(
            module.register_forward_pre_hook(
                lambda m, args, kwargs: self._observe(args, kwargs, trains), with_kwargs=True
            )
        )

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles, self._attached = [], set()

    def start(self) -> None:
        """Begin a rollout's count (forwards before it, e.g. an evaluation, are dropped)."""
        self._sums = {}

    @contextmanager
    def paused(self):
        """Forwards inside are not charged: the measuring instruments (curvature.py) are not the
        cycle's work, so the flops clock does not depend on their cadence."""
        saved = dict(self._sums)
        try:
            yield
        finally:
            self._sums = saved

    def stop(self, dist=None) -> float:
        """The FLOPs counted since :meth:`start`, summed over the ranks of ``dist``."""
        total = sum(float(v) for v in self._sums.values())
        if dist is not None and dist.enabled:
            total = dist.all_reduce_sum([total])[0]
        self._sums = {}
        return total

    def add(self, tokens, logits, context, backward: bool = False) -> None:
        """Charge one forward (tensors or numbers): ``tokens`` real input tokens, ``logits`` positions
        whose logits were computed, ``context`` the sum over tokens of the positions each attends to."""
        f = 2.0 * self.body * _f64(tokens) + 2.0 * self.head * _f64(logits) + 4.0 * self.attn * _f64(context)
        f = f * 3.0 if backward else f
        key = str(f.device) if isinstance(f, torch.Tensor) else "cpu"
        self._sums[key] = self._sums[key] + f if key in self._sums else f

    def _observe(self, args, kwargs, trains: bool) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:  # inputs_embeds-only calls: not used by this project
            return
        n, width = ids.shape
        mask = kwargs.get("attention_mask")
        real = mask[:, -width:].bool() if mask is not None else torch.ones_like(ids, dtype=torch.bool)
        pos = kwargs.get("position_ids")
        if pos is not None:
            ctx = torch.where(real, pos + 1, 0).sum()
        elif mask is not None:
            ctx = torch.where(real, mask.long().cumsum(-1)[:, -width:], 0).sum()
        else:
            ctx = n * width * (width + 1) // 2
        keep = kwargs.get("logits_to_keep", 0)
        if isinstance(keep, torch.Tensor):
            logits = keep.numel() * n
        else:
            logits = real[:, -keep:].sum() if keep else real.sum()
        self.add(real.sum(), logits, ctx, backward=trains and torch.is_grad_enabled())


def flop_constants(model: torch.nn.Module) -> tuple[int, int, int]:
    """(N_body, N_head, n_layers * d_attn) of a Hugging Face causal LM (see the module docstring)."""
    head = model.get_output_embeddings()
    head_params = {id(p) for p in head.parameters()} if head is not None else set()
    body = sum(
        p.numel()
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
        for p in m.parameters(recurse=False)
        if id(p) not in head_params
    )
    n_head = sum(p.numel() for p in head.parameters()) if head is not None else 0
    c = model.config
    heads = c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    return body, n_head, c.num_hidden_layers * heads * head_dim


def _f64(x):
    return x.double() if isinstance(x, torch.Tensor) else float(x)


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
