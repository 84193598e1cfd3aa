"""Phase 4 of a cycle: the K optimizer steps on one rollout.

The rollout's N responses are shuffled and split into K minibatches of N/K (times ``optim.epochs``
passes); each minibatch is one AdamW step on the policy loss of :mod:`rlvr_scaling.algorithms.loss`,
with the learning rate of the run's LR rule and the gradient-noise instruments fed from the same
gradients. What this module guarantees (and ``tests/core/test_trainer.py`` checks):

- the loss normaliser is computed over the whole minibatch once, so micro-batching, skipping rows with
  zero gradient (zero advantage, no KL term) and packing rows into unpadded sequences leave the update
  unchanged up to float rounding;
- data-parallel, each minibatch's active rows are split into one contiguous block per rank; a rank's
  loss is its part of the minibatch loss (global normaliser) times N, because DDP/FSDP average
  gradients over ranks; every rank runs the same number of micro-batches (a rank with fewer runs a
  zero-weighted padding one) so collectives pair up;
- one gradient-norm pass per step serves the clip and the noise estimator; the clip multiplies only
  when torch's own coefficient is below 1.
"""

from __future__ import annotations

import math

import torch

from .algorithms.loss import LossBatch, kl_old_sums, policy_loss, token_weights
from .algorithms.lr_rules import build_lr_rule
from .distributed import full_value, local_tensor
from .engines.base import Generation
from .noise import NoiseEstimator
from .policy import completion_logprobs, completion_logprobs_packed, trim_padding

Plan = list[tuple[torch.Tensor, torch.Tensor]]  # per step: (minibatch rows, rows that reach the loss)


class PolicyOptimizer:
    def __init__(self, cfg, derived, parallel, device, dist, clocks):
        self.cfg, self.derived, self.parallel, self.device, self.dist = cfg, derived, parallel, device, dist
        self.clocks = clocks  # the trainer's clocks: optimizer_steps is counted here, warm-up reads rollout
        self.model = parallel.params_module
        opt = cfg.optim
        # fused: one kernel for all parameters instead of a Python loop over them (same AdamW update;
        # on a 1M-parameter model the per-tensor loop costs more than the arithmetic).
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=derived.lr,
            betas=tuple(opt.betas),
            eps=opt.eps,
            weight_decay=opt.weight_decay,
            fused=opt.fused,
        )
        self.lr_rule = build_lr_rule(cfg.lr, derived.responses_per_rollout, derived.steps_per_rollout)
        sharded = parallel.strategy == "fsdp"
        self.noise = NoiseEstimator(
            self.model, derived.steps_per_rollout, self._reduce_scalar if sharded else None
        )

    # ------------------------------------------------------------------ plan

    def plan(self, n: int, advantages: torch.Tensor, rng: torch.Generator) -> Plan:
        """The rollout's optimizer steps: per step, the minibatch's rows (B/K of them; with adaptive
        allocators N/K) and the rows among them that reach the loss (all, or those with non-zero
        advantage when there is no KL term: the others have zero gradient)."""
        cfg, k = self.cfg, self.derived.steps_per_rollout
        mb = n // k
        skip_zero = cfg.optim.skip_zero_advantage and cfg.loss.kl_coef == 0
        steps = []
        for _epoch in range(cfg.optim.epochs):
            perm = torch.randperm(n, generator=rng)
            for step in range(k):
                rows = perm[step * mb : (step + 1) * mb] if step < k - 1 else perm[step * mb :]
                steps.append((rows, rows[advantages[rows] != 0] if skip_zero else rows))
        return steps

    # ------------------------------------------------------------------ the K steps

    def run(
        self,
        gen: Generation,
        advantages,
        old_logp,
        ref_logp,
        plan: Plan,
        is_weights=None,
        estimates: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """The K steps on the rollout ``gen``; ``is_weights`` [N, Lc]: truncated IS weights (loss.tis);
        ``estimates``: this rollout's noise estimates at theta_old (``grad_norm_sq``, ``trace_cov``, ...
        from curvature.ThetaOldInstruments; ``per_sample_*`` from noise.PerSampleNoise), which the LR
        rule sees in place of the previous rollout's K-gradient estimates."""
        cfg, d, env = self.cfg, self.derived, self.dist
        k = d.steps_per_rollout
        micro = cfg.optim.micro_batch_responses or max(1, -(-(len(gen) // k) // env.world_size))
        comp_mask = gen.completion_mask[:, gen.prompt_width :]
        constant = cfg.loss.constant_normalizer or cfg.rollout.max_new_tokens
        steps: list[dict[str, float]] = []
        self.noise.start_rollout()
        self.model.train()
        train_module = self.parallel.train_module
        for rows, active in plan:
            weights = token_weights(comp_mask[rows], cfg.loss.aggregation, constant)
            # set_to_none: the first backward writes the gradient instead of adding it to zeros
            self.optimizer.zero_grad(set_to_none=True)
            stats_acc: dict[str, float] = {}
            share = active[env.block(active.numel())]
            n_micro = max(-(-len(env.block(active.numel(), q)) // micro) for q in range(env.world_size))
            local = torch.empty(len(gen), dtype=torch.long)  # a rollout row's position in the minibatch
            local[rows] = torch.arange(rows.numel())
            for m in range(n_micro):
                sub = share[m * micro : (m + 1) * micro]
                padding = sub.numel() == 0
                if padding:
                    sub = rows[:1]
                sub_local = local[sub]
                with self.parallel.micro_context(sync=m == n_micro - 1):
                    logp = self._forward(train_module, gen, sub)
                    sl = slice(0, logp.shape[1])
                    batch = LossBatch(
                        logp=logp,
                        old_logp=old_logp[sub][:, sl].to(self.device),
                        advantages=advantages[sub].to(self.device),
                        weights=weights[sub_local][:, sl].to(self.device),
                        ref_logp=ref_logp[sub][:, sl].to(self.device) if ref_logp is not None else None,
                        is_weights=is_weights[sub][:, sl].to(self.device) if is_weights is not None else None,
                    )
                    loss, st = policy_loss(cfg.loss, batch)
                    if env.enabled:
                        loss = loss * (0.0 if padding else float(env.world_size))
                    loss.backward()
                if padding:
                    continue
                # one host read for all statistics (float64 holds every float32 value exactly)
                values = torch.stack([v.detach().double() for v in st.values()]).tolist()
                for key, v in zip(st, values):
                    stats_acc[key] = stats_acc.get(key, 0.0) + v
            if env.enabled:  # the step's statistics over all ranks (same order everywhere)
                merged: dict[str, float] = {}
                for part in env.all_gather_object(stats_acc):
                    for key, v in part.items():
                        merged[key] = merged.get(key, 0.0) + v
                stats_acc = merged
            step = step_means(stats_acc)
            if n_micro == 0:  # no backward ran (nothing in the loss): AdamW still steps, on zeros
                for p in self.params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
            lr = self.current_lr(estimates)
            step["grad_norm"], step["lr"], applied = self._step(rows.numel(), step.get("policy", 0.0), lr)
            step["applied"] = applied
            steps.append(step)
            if not applied:  # a non-finite loss or gradient: the step is not taken, the rollout ends
                break
        self.model.eval()
        return self._summary(steps)

    def _summary(self, steps: list[dict[str, float]]) -> dict[str, float]:
        """The rollout's training statistics from its steps. The drift KL(pi_old || pi_theta) measured in
        step j's forward is the drift after j - 1 steps: the first is the one before any step (the
        engine/trainer mismatch when pi_old is recomputed, ~0 otherwise); ``train/kl_old`` is the mean
        over the measurements after steps 1.. (the one after the last step is added by
        :meth:`final_drift`)."""
        col = lambda key: [s[key] for s in steps if key in s]  # noqa: E731
        after = steps[1:]
        out = {
            "loss/policy": _mean(col("policy") or [0.0]),
            "opt/lr": _mean(col("lr")),
            "opt/grad_norm": _mean(col("grad_norm")),
            "opt/grad_norm_max": max(col("grad_norm")),
            "opt/nonfinite_step": 0 if steps[-1]["applied"] else len(steps),  # 1-based index, 0 = none
            "train/kl_old_first": steps[0].get("kl_old", math.nan),
            "train/param_norm": self.param_norm(),
        }
        self._after = [(s["kl_old"], s["kl_old_seq"]) for s in after if "kl_old" in s]
        for key in ("clip_frac", "dual_clip_frac"):
            if key in steps[0]:
                out[f"loss/{key}"] = _mean(col(key))
        if "kl_ref" in steps[0]:
            out["loss/kl_ref"] = _mean(col("kl_ref"))
        # the K gradients' (trajectory) estimates; the unbiased ones at theta_old are curvature.py's
        out.update({f"noise/multistep_{k}": v for k, v in self.noise.finish_rollout().items()})
        return out

    def final_drift(
        self,
        logp: torch.Tensor,
        old_logp: torch.Tensor,
        on: torch.Tensor,
        scale: float = 1.0,
        population: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """KL(pi_old || pi_theta) after the rollout's last step from ``logp`` (pi_theta after the K steps,
        this rank's rows) and the per-step measurements: ``train/kl_old`` (token mean over the
        measurements after steps 1..K), ``train/kl_old_max``, ``train/kl_old_seq`` (per response), and
        ``train/kl_old_final`` / ``train/kl_old_seq_final`` (after the last step alone).

        ``scale`` and ``population``: the rows are a simple random sample of n_r of this rank's N_r rows
        of a population (the rollout's loss rows) with ``population`` token and response counts. Then
        sum_ranks (N_r / n_r) sum_sample k3 is unbiased for the population's k3 sum (Horvitz-Thompson),
        and dividing by the known counts makes ``kl_old_final`` unbiased for the population's token mean
        of k3 and ``kl_old_seq_final`` for its mean per response (a ratio over the sample alone would be
        biased at O(1/n)). Without them the means are over the rows given."""
        sums = {k: float(v) for k, v in kl_old_sums(logp, old_logp, on).items()}
        if population is not None:
            sums = {
                "kl_old_sum": sums["kl_old_sum"] * scale,
                "kl_old_seq_sum": sums["kl_old_seq_sum"] * scale,
            }
        keys = sorted(sums)
        if self.dist.enabled:
            sums = dict(zip(keys, self.dist.all_reduce_sum([sums[k] for k in keys])))
        if population is not None:
            sums.update(population)
        final = step_means(sums)
        after = self._after + ([(final["kl_old"], final["kl_old_seq"])] if "kl_old" in final else [])
        nan = math.nan
        return {
            "train/kl_old": _mean([a for a, _ in after]) if after else nan,
            "train/kl_old_max": max(a for a, _ in after) if after else nan,
            "train/kl_old_seq": _mean([b for _, b in after]) if after else nan,
            "train/kl_old_final": final.get("kl_old", nan),
            "train/kl_old_seq_final": final.get("kl_old_seq", nan),
        }

    def _forward(self, module, gen: Generation, sub: torch.Tensor) -> torch.Tensor:
        """log pi_theta of the completion tokens of rows ``sub`` (with gradient), [n, Lc']."""
        cfg = self.cfg
        if cfg.optim.pack_sequences:
            return completion_logprobs_packed(
                module,
                gen.input_ids[sub].to(self.device),
                gen.attention_mask[sub].to(self.device),
                gen.prompt_width,
                cfg.rollout.temperature,
            )
        ids, mask, start = trim_padding(gen.input_ids[sub], gen.attention_mask[sub], gen.prompt_width)
        logp, _ = completion_logprobs(
            module, ids.to(self.device), mask.to(self.device), start, cfg.rollout.temperature
        )
        return logp

    def _step(self, rows: int, loss: float, lr: float) -> tuple[float, float, bool]:
        """Clip, set the learning rate ``lr`` and take the optimizer step; returns (grad norm, lr, applied).
        A non-finite loss or gradient norm is caught here, before ``optimizer.step``: the step is not
        taken (parameters and optimizer state stay finite) and ``applied`` is False."""
        cfg = self.cfg
        params = self.params
        # The global gradient norm before clipping, computed once: the noise estimator records it, and
        # the clip (same coefficient as clip_grad_norm_) runs only when it changes anything.
        grads = [p.grad for p in params if p.grad is not None]
        total = torch.nn.utils.get_total_norm(grads, foreach=True) if grads else torch.zeros(())
        grad_norm = float(full_value(total))
        if not (math.isfinite(grad_norm) and math.isfinite(loss)):
            self.optimizer.zero_grad(set_to_none=True)
            return grad_norm, lr, False
        self.noise.observe(rows, grad_norm**2)
        # (the coefficient in clip_grads_with_norm_'s own float32 arithmetic: scaling by 1 is a no-op)
        if cfg.optim.grad_clip is not None and float(cfg.optim.grad_clip / (full_value(total) + 1e-6)) < 1.0:
            torch.nn.utils.clip_grads_with_norm_(params, cfg.optim.grad_clip, total, foreach=True)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.clocks.optimizer_steps += 1
        return grad_norm, lr, True

    # ------------------------------------------------------------------ helpers

    def current_lr(self, estimates: dict[str, float] | None = None) -> float:
        """The LR rule's learning rate from the last K-gradient estimates, overridden by ``estimates``
        (the current rollout's estimates at theta_old, when they ran), with the warm-up on top."""
        lr = self.lr_rule.lr({**self.noise.last, **estimates} if estimates else self.noise.last)
        warm = self.cfg.optim.warmup_rollouts
        if warm:
            lr *= min(1.0, (self.clocks.rollout + 1) / warm)
        return lr

    @torch.no_grad()
    def param_norm(self) -> float:
        if self.parallel.strategy == "fsdp":  # sum of squares over the shards of every rank
            local = sum(float(local_tensor(p).float().pow(2).sum()) for p in self.model.parameters())
            return math.sqrt(self._reduce_scalar(local))
        return float(
            torch.linalg.vector_norm(torch.stack([p.float().norm() for p in self.model.parameters()]))
        )

    def _reduce_scalar(self, value: float) -> float:
        return self.dist.all_reduce_sum([value])[0]

    def state_dict(self) -> dict:
        return {"lr_rule": self.lr_rule.state_dict(), "noise": self.noise.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.lr_rule.load_state_dict(state.get("lr_rule", {}))
        self.noise.load_state_dict(state.get("noise", {}))


def step_means(sums: dict[str, float]) -> dict[str, float]:
    """Token and response means of one step's summed statistics (see ``loss.policy_loss``)."""
    out = dict(sums)
    tokens, rows = out.pop("tokens", 0.0), out.pop("rows", 0.0)
    for key, mean_key, count in (
        ("kl_old_sum", "kl_old", tokens),
        ("kl_old_seq_sum", "kl_old_seq", rows),
        ("clip_sum", "clip_frac", tokens),
        ("dual_clip_sum", "dual_clip_frac", tokens),
    ):
        if key in out:
            total = out.pop(key)
            if count > 0:  # a step without tokens measures nothing
                out[mean_key] = total / count
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / max(len(values), 1)
