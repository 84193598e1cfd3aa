"""The multi-step GRPO trainer: one loop, read top to bottom.

Per rollout (one policy-update cycle of B = P * G responses):

    allocate + generate -> reward -> advantages -> old log-probs -> K optimizer steps
    -> clocks -> evaluate (when due) -> failure detectors -> log -> checkpoint (when due)

Variant logic (baseline, learning-rate rule, allocator, detectors, engine, task) lives in small modules
selected by config; the loop only calls them. Randomness is drawn from generators seeded by
(seed, rollout index), so a run resumed from a checkpoint draws the same numbers as an uninterrupted
run and produces the same metrics (up to the wall-clock fields).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .algorithms.allocators import build_allocator
from .algorithms.baselines import AdvantageInputs, compute_advantages
from .algorithms.failure import FailureMonitor
from .algorithms.loss import policy_loss, token_weights
from .algorithms.lr_rules import build_lr_rule
from .clocks import Clocks
from .config import Config, Derived
from .distributed import DistEnv, Parallel, full_value, local_tensor
from .engines.base import Generation, SampleKeys, SamplingParams
from .noise import NoiseEstimator
from .policy import (
    completion_logprobs,
    completion_logprobs_packed,
    completion_logprobs_shared,
    trim_padding,
)
from .progress import ProgressDisplay
from .rundir import MetricsLog, atomic_write_json, latest_checkpoint, load_checkpoint, save_checkpoint


def derived_seed(*parts: Any) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


@dataclass
class TrainerState:
    """Everything besides tensors that a checkpoint must restore."""

    next_eval_at: int = 0
    targets: dict[str, int | None] = field(default_factory=dict)
    metrics_lines: int = 0
    best_accuracy: float | None = None
    last_eval: dict[str, float] = field(default_factory=dict)


class Trainer:
    def __init__(self, cfg: Config, derived: Derived, run_dir: Path, components, sinks=(), log=print):
        self.cfg, self.derived, self.run_dir = cfg, derived, run_dir
        self.task = components.task
        self.model, self.tokenizer = components.model, components.tokenizer
        self.ref_model = components.ref_model
        self.engine = components.engine
        self.device = components.device
        # data parallelism (distributed.py): a single process is world size 1 with the model itself
        self.dist: DistEnv = getattr(components, "dist", None) or DistEnv()
        parallel = getattr(components, "parallel", None)
        if parallel is None or parallel.strategy == "none":
            parallel = Parallel("none", self.model, self.model, self.model)
        self.parallel: Parallel = parallel
        # theta_old, unsharded: what the engine generates with and the per-rank log-prob passes use
        self.full_model = self.parallel.full_module
        self.n_params = sum(p.numel() for p in self.full_model.parameters())
        self.sinks = list(sinks)
        self.log = log
        opt = cfg.optim
        # fused: one kernel for all parameters instead of a Python loop over them (same AdamW update;
        # on a 1M-parameter model the per-tensor loop costs more than the arithmetic).
        self.optimizer_params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.optimizer_params,
            lr=derived.lr,
            betas=tuple(opt.betas),
            eps=opt.eps,
            weight_decay=opt.weight_decay,
            fused=opt.fused,
        )
        self.lr_rule = build_lr_rule(cfg.lr, derived.responses_per_rollout, derived.steps_per_rollout)
        self.allocator = build_allocator(cfg.allocator)
        # What the baseline needs (greedy responses, gradient weights) and the per-sample noise
        # instrument, decided and checked here at start-up.
        from .algorithms.baselines import NEEDS
        from .per_sample import RolloutGradients

        self.baseline_needs = NEEDS[cfg.baseline.name]
        self.grads = RolloutGradients(
            cfg, self.full_model, self.ref_model, self.device, self.n_params, self.baseline_needs
        )
        log(f"[gradients] {self.grads.describe()}")
        mode = cfg.optim.old_logprobs
        self.behaviour_old = mode == "behaviour" or (mode == "auto" and self.engine.exact_behaviour_logprobs)
        log(f"[old log-probs] {'from the engine (behaviour)' if self.behaviour_old else 'recomputed'}")
        self.monitor = FailureMonitor(cfg.failure)
        sharded = self.parallel.strategy == "fsdp"
        self.noise = NoiseEstimator(
            self.model, derived.steps_per_rollout, self._reduce_scalar if sharded else None
        )
        self.clocks = Clocks()
        self.state = TrainerState(targets={_target_key(t): None for t in cfg.eval.targets})
        self.validation = self.task.validation()
        self.order = np.random.default_rng(derived_seed(cfg.seed, "data")).permutation(self.task.num_train())
        # rank 0 alone writes the run directory; the other ranks count rows so control flow agrees
        self.metrics = MetricsLog(run_dir / "metrics.jsonl") if self.dist.is_main else _CountingLog()
        self.stop_signal: int | None = None
        self.failure: dict[str, Any] | None = None
        self.resumed_from: str | None = None
        self.progress = ProgressDisplay(
            cfg.train.max_responses, cfg.run.progress and self.dist.is_main, log=log
        )

    # ------------------------------------------------------------------ public

    def run(self) -> str:
        """Train until the budget, a target stop, a failure, or a stop signal. Returns the final state."""
        self._resume()
        self._install_signal_handlers()
        self._write_status("running")
        if self.clocks.rollout == 0 and self.metrics.lines == 0:
            self._evaluate_and_log(extra={f"derived/{k}": v for k, v in self.derived.as_dict().items()})
        state = "completed"
        while self.failure is None:
            if self.clocks.responses >= self.cfg.train.max_responses:
                break
            if self.cfg.train.stop_at_targets and self._all_targets_reached():
                break
            if self._stop_requested():
                state = "preempted"
                break
            if self.cfg.run.stop_after_rollouts and self.clocks.rollout >= self.cfg.run.stop_after_rollouts:
                state = "preempted"
                break
            self._rollout()
            if self.clocks.rollout % self.cfg.run.checkpoint_every_rollouts == 0:
                self._checkpoint()
        if self.failure is not None:
            state = "failed"
        self._checkpoint()
        self._write_status(state)
        self._write_summary()
        self.metrics.close()
        self.progress.close()
        self.dist.barrier()
        if state == "preempted" and self.stop_signal is not None and callable(self._chained_handler):
            self._chained_handler(self.stop_signal, None)  # submitit: requeue this job and exit
        return state

    # ------------------------------------------------------------------ one rollout

    def _rollout(self) -> None:
        cfg, d = self.cfg, self.derived
        r = self.clocks.rollout
        gen_rng = torch.Generator(device="cpu").manual_seed(derived_seed(cfg.seed, "rollout", r))
        calls = itertools.count()
        examples = [
            self.task.train_example(int(self.order[(r * d.prompts_per_rollout + j) % len(self.order)]))
            for j in range(d.prompts_per_rollout)
        ]
        prompts = [e.prompt for e in examples]
        params = SamplingParams(cfg.rollout.max_new_tokens, cfg.rollout.temperature, cfg.rollout.top_p)
        perf: dict[str, float] = {"generate_s": 0.0, "reward_s": 0.0}

        def generate(prompt_ids: list[int], counts: list[int], sampling=params) -> Generation:
            t = time.perf_counter()
            seed = derived_seed(cfg.seed, "sample", r, next(calls))
            gen = self._generate(prompts, prompt_ids, counts, sampling, seed)
            perf["generate_s"] += time.perf_counter() - t
            return gen

        def score(gen: Generation) -> torch.Tensor:
            t = time.perf_counter()
            rewards = self._score(gen.texts, [examples[i] for i in gen.prompt_index.tolist()])
            perf["reward_s"] += time.perf_counter() - t
            return torch.tensor([math.nan if x is None else float(x) for x in rewards], dtype=torch.float64)

        # allocate + generate + reward
        alloc = self.allocator.collect(d.prompts_per_rollout, d.group_size, generate, score)
        gen, rewards = alloc.generation, alloc.rewards
        # ReMax: one greedy response per prompt, scored as the baseline (on the clocks, not trained on)
        greedy = None
        if "greedy" in self.baseline_needs:
            greedy_params = SamplingParams(cfg.rollout.max_new_tokens, greedy=True)
            greedy = generate(list(range(d.prompts_per_rollout)), [1] * d.prompts_per_rollout, greedy_params)
        # advantages (the optimal baseline's weights w_i come from one per-sample gradient pass)
        t = time.perf_counter()
        inputs = AdvantageInputs(
            rewards=rewards,
            group=gen.prompt_index,
            n_groups=d.prompts_per_rollout,
            greedy_rewards=score(greedy) if greedy is not None else None,
            grad_weights=self.grads.baseline_weights(gen, rewards),
            logratio=self.grads.kl_logratio(gen),
            kl_coef=cfg.loss.kl_coef,
        )
        if inputs.grad_weights is not None:
            perf["baseline_weights_s"] = time.perf_counter() - t
        advantages = compute_advantages(cfg.baseline, inputs).float()
        # The K minibatches (and each rank's share of them) are drawn first, so that the old
        # log-prob pass covers exactly the rows this process trains on.
        plan = self._plan(len(gen), advantages, gen_rng)
        needed = torch.unique(torch.cat([a for _, a in plan])) if plan else torch.arange(0)
        # old log-probs (pi_old recomputed by the trainer) and reference log-probs. Rows that cannot
        # reach the loss (zero advantage, no KL term) are skipped: exact, their gradient is zero.
        t = time.perf_counter()
        mine = needed
        if self.dist.enabled and not self.grads.noise_due(r):
            mine = torch.unique(torch.cat([a[self.dist.block(a.numel())] for _, a in plan] + [needed[:0]]))
        comp = gen.completion_mask[:, gen.prompt_width :]
        if gen.entropies is not None:
            if self.behaviour_old:  # theta_old's log-probs as the engine computed them while sampling
                old_logp = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
            else:
                old_logp, _ = self._logprobs(self.full_model, gen, mine)
            entropy_mean = float(gen.entropies[:, gen.prompt_width :][comp].mean())
        else:  # the engine reports no entropies: each rank computes them on its block of rows
            rows = torch.arange(len(gen))[self.dist.block(len(gen))]
            todo = rows if self.behaviour_old else torch.unique(torch.cat([mine, rows]))
            old_logp, ent = self._logprobs(self.full_model, gen, todo, with_entropy=True)
            if self.behaviour_old:
                old_logp = torch.where(comp, gen.behaviour_logprobs[:, gen.prompt_width :], 0.0)
            entropy_mean = self._entropy_mean(ent, comp, rows)
        ref_logp = self._logprobs(self.ref_model, gen, mine)[0] if self.ref_model is not None else None
        perf["old_logprob_s"] = time.perf_counter() - t
        # exact per-sample gradient noise at theta_old (noise/per_sample_*); an LR rule with
        # lr.source=per_sample reads this rollout's estimate through the noise statistics
        per_sample: dict[str, float] = {}
        if self.grads.noise_due(r):
            t = time.perf_counter()
            estimates = self.grads.noise(gen, advantages, old_logp, ref_logp)
            per_sample = {f"per_sample_{k}": v for k, v in estimates.items()}
            perf["per_sample_noise_s"] = time.perf_counter() - t
            self.noise.last = {**self.noise.last, **per_sample}
        # K optimizer steps
        t = time.perf_counter()
        train_stats = self._optimize(gen, advantages, old_logp, ref_logp, plan)
        perf["train_s"] = time.perf_counter() - t
        # weight sync: free for the HF engine (shared model), an in-place push for vLLM; under FSDP
        # the full weights are gathered from the shards into every rank's engine copy first
        t = time.perf_counter()
        self.parallel.refresh_full()
        self.engine.sync_weights(self.full_model)
        perf["sync_s"] = time.perf_counter() - t
        # clocks
        n, tokens = len(gen), gen.num_tokens
        prompt_tokens = int(gen.attention_mask.sum()) - tokens
        passes = 2 * (1 + (self.ref_model is not None)) + 6 * cfg.optim.epochs
        n_greedy, greedy_tokens = (len(greedy), greedy.num_tokens) if greedy is not None else (0, 0)
        greedy_seq = int(greedy.attention_mask.sum()) if greedy is not None else 0
        self.clocks.rollout += 1
        self.clocks.responses += n + n_greedy
        self.clocks.tokens += tokens + greedy_tokens
        self.clocks.flops += float(self.n_params) * (
            2 * (tokens + prompt_tokens) + passes * (tokens + prompt_tokens) + 2 * greedy_seq
        )
        # training row
        valid = ~torch.isnan(rewards)
        rv = rewards[valid]
        row = {
            "train/reward_mean": float(rv.mean()) if rv.numel() else math.nan,
            "train/reward_std": float(rv.std()) if rv.numel() > 1 else 0.0,
            "train/accuracy": float((rv >= 1.0 - 1e-9).double().mean()) if rv.numel() else math.nan,
            "train/unscorable": int((~valid).sum()),
            "train/zero_adv_frac": float((advantages == 0).float().mean()),
            "train/completion_length": float(gen.completion_lengths.float().mean()),
            "train/finished_frac": float(gen.finished.float().mean()),
            "train/entropy": entropy_mean,
            "rollout/responses": n,
            "rollout/tokens": tokens,
            "rollout/prompts": d.prompts_per_rollout,
            "rollout/rounds": alloc.rounds,
            "rollout/responses_in_gradient": int(needed.numel()),
            **{f"rollout/{k}": v for k, v in alloc.stats.items()},
            **(
                {
                    "rollout/greedy_responses": n_greedy,
                    "rollout/greedy_tokens": greedy_tokens,
                    "train/greedy_reward_mean": float(inputs.greedy_rewards.nanmean()),
                }
                if greedy is not None
                else {}
            ),
            **train_stats,
            **{f"noise/{k}": v for k, v in per_sample.items()},
            **self.grads.baseline_diagnostics(inputs, advantages),
            **{f"opt/{k}": v for k, v in self.lr_rule.stats().items()},
            **{f"perf/{k}": round(v, 4) for k, v in perf.items()},
            "perf/responses_per_s": n / max(sum(perf.values()), 1e-9),
        }
        self._log_row(row)
        self.progress.update(
            self.clocks.responses,
            reward=row["train/reward_mean"],
            lr=row["opt/lr"],
            rate=self.clocks.responses / max(self.clocks.wall_seconds, 1e-9),
        )
        self._detect(row)
        if self.failure is None and self.clocks.responses >= self.state.next_eval_at:
            self._evaluate_and_log()

    def _plan(
        self, n: int, advantages: torch.Tensor, rng: torch.Generator
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
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

    def _optimize(self, gen: Generation, advantages, old_logp, ref_logp, plan) -> dict[str, float]:
        """The K optimizer steps. Data-parallel: each step's active rows are split into one block per
        rank; each rank's loss is its part of the minibatch loss (global normaliser) times N, since
        DDP/FSDP average gradients over ranks. Every rank runs the same number of micro-batches (the
        largest share's), a rank with fewer pads with a zero-weighted one, so collectives pair up."""
        cfg, d, env = self.cfg, self.derived, self.dist
        k = d.steps_per_rollout
        micro = cfg.optim.micro_batch_responses or max(1, -(-(len(gen) // k) // env.world_size))
        comp_mask = gen.completion_mask[:, gen.prompt_width :]
        constant = cfg.loss.constant_normalizer or cfg.rollout.max_new_tokens
        sums: dict[str, list[float]] = {}
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
            local = {int(x): i for i, x in enumerate(rows.tolist())}
            for m in range(n_micro):
                sub = share[m * micro : (m + 1) * micro]
                padding = sub.numel() == 0
                if padding:
                    sub = rows[:1]
                sub_local = torch.tensor([local[int(x)] for x in sub.tolist()], dtype=torch.long)
                with self.parallel.micro_context(sync=m == n_micro - 1):
                    if cfg.optim.pack_sequences:
                        logp = completion_logprobs_packed(
                            train_module,
                            gen.input_ids[sub].to(self.device),
                            gen.attention_mask[sub].to(self.device),
                            gen.prompt_width,
                            cfg.rollout.temperature,
                        )
                    else:
                        ids, mask, start = trim_padding(
                            gen.input_ids[sub], gen.attention_mask[sub], gen.prompt_width
                        )
                        logp, _ = completion_logprobs(
                            train_module,
                            ids.to(self.device),
                            mask.to(self.device),
                            start,
                            cfg.rollout.temperature,
                        )
                    sl = slice(0, logp.shape[1])
                    loss, st = policy_loss(
                        logp,
                        old_logp[sub][:, sl].to(self.device),
                        advantages[sub].to(self.device),
                        weights[sub_local][:, sl].to(self.device),
                        clip=cfg.loss.clip,
                        clip_high=cfg.loss.clip_high,
                        ref_logp=ref_logp[sub][:, sl].to(self.device) if ref_logp is not None else None,
                        kl_coef=cfg.loss.kl_coef,
                    )
                    if env.enabled:
                        loss = loss * (0.0 if padding else float(env.world_size))
                    loss.backward()
                if padding:
                    continue
                for key, v in st.items():
                    stats_acc[key] = stats_acc.get(key, 0.0) + float(v)
            if env.enabled:  # the step's statistics over all ranks (same order everywhere)
                merged: dict[str, float] = {}
                for part in env.all_gather_object(stats_acc):
                    for key, v in part.items():
                        merged[key] = merged.get(key, 0.0) + v
                stats_acc = merged
            tokens = stats_acc.pop("tokens", 0.0)
            for key, mean_key in (("kl_old_sum", "kl_old"), ("clip_sum", "clip_frac")):
                if key in stats_acc:
                    stats_acc[mean_key] = stats_acc.pop(key) / max(tokens, 1.0)
            params = self.optimizer_params
            if n_micro == 0:  # no backward ran (nothing in the loss): AdamW still steps, on zeros
                for p in params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
            # The global gradient norm before clipping, computed once: the noise estimator records
            # it, and the clip (same coefficient as clip_grad_norm_) runs only when it changes anything.
            grads = [p.grad for p in params if p.grad is not None]
            total = torch.nn.utils.get_total_norm(grads, foreach=True) if grads else torch.zeros(())
            grad_norm = float(full_value(total))
            self.noise.observe(rows.numel(), grad_norm**2)
            # (the coefficient in clip_grads_with_norm_'s own float32 arithmetic: scaling by 1 is a no-op)
            if (
                cfg.optim.grad_clip is not None
                and float(cfg.optim.grad_clip / (full_value(total) + 1e-6)) < 1.0
            ):
                torch.nn.utils.clip_grads_with_norm_(params, cfg.optim.grad_clip, total, foreach=True)
            lr = self._current_lr()
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.clocks.optimizer_steps += 1
            stats_acc["grad_norm"] = grad_norm
            stats_acc["lr"] = lr
            for key, v in stats_acc.items():
                sums.setdefault(key, []).append(v)
        self.model.eval()
        out = {
            "loss/policy": _mean(sums.get("policy", [0.0])),
            "opt/lr": _mean(sums["lr"]),
            "opt/grad_norm": _mean(sums["grad_norm"]),
            "opt/grad_norm_max": max(sums["grad_norm"]),
            "train/kl_old": _mean(sums.get("kl_old", [0.0])),
            "train/kl_old_max": max(sums.get("kl_old", [0.0])),
            "train/param_norm": self._param_norm(),
        }
        if "clip_frac" in sums:
            out["loss/clip_frac"] = _mean(sums["clip_frac"])
        if "kl_ref" in sums:
            out["loss/kl_ref"] = _mean(sums["kl_ref"])
        out.update({f"noise/{k}": v for k, v in self.noise.finish_rollout().items()})
        return out

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def _evaluate_and_log(self, extra: dict[str, Any] | None = None) -> None:
        cfg = self.cfg
        t = time.perf_counter()
        n_samples = cfg.eval.samples
        params = SamplingParams(
            cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens,
            cfg.rollout.temperature,
            cfg.rollout.top_p,
            greedy=n_samples == 0,
        )
        counts = [max(n_samples, 1)] * len(self.validation)
        seed = derived_seed(cfg.seed, "eval", self.clocks.responses)
        prompts = [e.prompt for e in self.validation]
        gen = self._generate(prompts, list(range(len(prompts))), counts, params, seed)
        rewards = self._score(gen.texts, [self.validation[i] for i in gen.prompt_index.tolist()])
        scored = [x for x in rewards if x is not None]
        acc = sum(x >= 1.0 - 1e-9 for x in scored) / max(len(rewards), 1)
        comp = gen.completion_mask[:, gen.prompt_width :]
        if gen.entropies is not None:
            entropy_mean = float(gen.entropies[:, gen.prompt_width :][comp].mean())
        else:  # each rank computes the entropies of its block of rows
            rows = torch.arange(len(gen))[self.dist.block(len(gen))]
            _, ent = self._logprobs(self.full_model, gen, rows, with_entropy=True)
            entropy_mean = self._entropy_mean(ent, comp, rows)
        self.clocks.eval_responses += len(gen)
        row = {
            "eval/accuracy": acc,
            "eval/reward": sum(scored) / max(len(rewards), 1),
            "eval/length": float(gen.completion_lengths.float().mean()),
            "eval/entropy": entropy_mean,
            "eval/unscorable": len(rewards) - len(scored),
            "eval/responses": len(gen),
            "perf/eval_s": round(time.perf_counter() - t, 4),
            **(extra or {}),
        }
        for a in cfg.eval.targets:
            key = _target_key(a)
            if self.state.targets.get(key) is None and acc >= a:
                self.state.targets[key] = self.clocks.responses
        self.state.last_eval = {"eval/accuracy": acc, "eval/reward": row["eval/reward"]}
        self.state.best_accuracy = max(acc, self.state.best_accuracy or -1.0)
        every = cfg.eval.every_responses
        self.state.next_eval_at = (self.clocks.responses // every + 1) * every
        self._log_row(row)
        self._detect(row)
        self.progress.update(self.clocks.responses, accuracy=acc)
        self.progress.line(
            f"[eval] rollout {self.clocks.rollout} responses {self.clocks.responses} "
            f"accuracy {acc:.3f} lr {self._current_lr():.3g} "
            f"({self.clocks.responses / max(self.clocks.wall_seconds, 1e-9):.0f} responses/s)"
        )

    # ------------------------------------------------------------------ helpers

    def _generate(
        self, prompts: list[str], prompt_ids: list[int], counts: list[int], params: SamplingParams, seed: int
    ) -> Generation:
        """Sample ``counts[i]`` responses to ``prompts[prompt_ids[i]]``; rows keyed by prompt id (so
        the result does not depend on batching or on the number of ranks). Data-parallel: each rank
        generates a contiguous block of the prompts (whole groups) with its own engine, and the blocks
        are all-gathered in order: every rank returns the whole generation."""
        env = self.dist
        mine = env.block(len(prompt_ids))
        ids = [prompt_ids[i] for i in mine]
        cnt = [counts[i] for i in mine]
        local = None
        if sum(cnt) > 0 or not env.enabled:
            local = self.engine.generate([prompts[i] for i in ids], cnt, params, SampleKeys(seed, tuple(ids)))
            local.prompt_index = torch.tensor(ids, dtype=torch.long)[local.prompt_index]
        if not env.enabled:
            return local
        parts = [p for p in env.all_gather_object(local) if p is not None]
        return Generation.concat(parts, self.engine.pad_id)

    def _score(self, texts: list[str], examples: list) -> list[float | None]:
        """Rewards of ``texts``; data-parallel, each rank scores a block and the blocks are gathered."""
        env = self.dist
        if not env.enabled:
            return self.task.score(texts, examples)
        blk = env.block(len(texts))
        mine = (
            self.task.score(texts[blk.start : blk.stop], examples[blk.start : blk.stop]) if len(blk) else []
        )
        return [x for part in env.all_gather_object(list(mine)) for x in part]

    def _stop_requested(self) -> bool:
        """A stop signal on any rank stops every rank at the same rollout boundary."""
        flag = 1.0 if self.stop_signal is not None else 0.0
        if self.dist.enabled:
            flag = self.dist.all_reduce_sum([flag])[0]
            if flag > 0 and self.stop_signal is None:  # another rank got it: act as if this one had
                self.stop_signal = self._handled_signals[0]
        return flag > 0

    def _entropy_mean(self, ent: torch.Tensor, comp: torch.Tensor, rows: torch.Tensor) -> float:
        """Mean entropy over the completion tokens of all ranks' ``rows`` (this rank's block)."""
        sums = [float(ent[rows][comp[rows]].sum()), float(comp[rows].sum())]
        total, count = self.dist.all_reduce_sum(sums)
        return total / max(count, 1.0)

    def _reduce_scalar(self, value: float) -> float:
        return self.dist.all_reduce_sum([value])[0]

    def _logprobs(self, model, gen: Generation, rows: torch.Tensor | None = None, with_entropy: bool = False):
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

    def _current_lr(self) -> float:
        lr = self.lr_rule.lr(self.noise.last)
        warm = self.cfg.optim.warmup_rollouts
        if warm:
            lr *= min(1.0, (self.clocks.rollout + 1) / warm)
        return lr

    @torch.no_grad()
    def _param_norm(self) -> float:
        if self.parallel.strategy == "fsdp":  # sum of squares over the shards of every rank
            local = sum(float(local_tensor(p).float().pow(2).sum()) for p in self.model.parameters())
            return math.sqrt(self._reduce_scalar(local))
        return float(
            torch.linalg.vector_norm(torch.stack([p.float().norm() for p in self.model.parameters()]))
        )

    def _log_row(self, row: dict[str, Any]) -> None:
        full = {**self.clocks.as_dict(), **row}
        self.metrics.write(full)
        if not self.dist.is_main:
            return
        for sink in self.sinks:
            sink.log(full)

    def _detect(self, row: dict[str, Any]) -> None:
        if self.failure is not None:
            return
        fired = self.monitor.observe(row)
        if fired is not None:
            name, reason = fired
            self.failure = {
                "detector": name,
                "reason": reason,
                "responses": self.clocks.responses,
                "rollout": self.clocks.rollout,
            }
            self.progress.line(f"[failure] {name}: {reason} at {self.clocks.responses} responses")

    def _all_targets_reached(self) -> bool:
        return bool(self.state.targets) and all(v is not None for v in self.state.targets.values())

    # ------------------------------------------------------------------ persistence

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "clocks": self.clocks.as_dict(),
            "state": self.state.__dict__ | {"metrics_lines": self.metrics.lines},
            "failure": self.failure,
            "detectors": self.monitor.state_dict(),
            "lr_rule": self.lr_rule.state_dict(),
            "noise": self.noise.state_dict(),
        }

    def _checkpoint(self) -> None:
        t = time.perf_counter()
        save_checkpoint(
            self.run_dir,
            f"rollout-{self.clocks.rollout:07d}",
            self.parallel.params_module,
            self.optimizer,
            self._trainer_state(),
            dist_env=self.dist,
        )
        self._write_status("running" if self.failure is None else "failed")
        self.last_checkpoint_s = time.perf_counter() - t

    def _resume(self) -> None:
        path = latest_checkpoint(self.run_dir)
        if path is None:
            if self.metrics.lines:
                self.metrics.truncate(0)  # rows from a run that died before its first checkpoint
            return
        saved = load_checkpoint(path, self.model, self.optimizer, self.full_model, self.dist)
        self.parallel.refresh_full()
        self.engine.sync_weights(self.full_model)
        self.clocks = Clocks.from_dict(saved["clocks"])
        self.state = TrainerState(**saved["state"])
        # entries and fields an older checkpoint lacks take their defaults (TrainerState, Clocks too)
        self.failure = saved.get("failure")
        self.monitor.load_state_dict(saved.get("detectors", {}))
        self.lr_rule.load_state_dict(saved.get("lr_rule", {}))
        self.noise.load_state_dict(saved.get("noise", {}))
        self.metrics.truncate(self.state.metrics_lines)
        self.resumed_from = path.name
        self.log(
            f"[resume] from {path.name}: rollout {self.clocks.rollout}, responses {self.clocks.responses}"
        )

    def _install_signal_handlers(self) -> None:
        """Stop signals end the run at the next rollout boundary with a checkpoint.

        Standalone: SIGTERM and SIGUSR1 -> checkpoint, ``state: preempted``, return (re-run the
        command to resume). Under submitit (SLURM): its preemption/time-out signal (SIGUSR2 unless
        ``SUBMITIT_PREEMPT_SIGNAL`` says otherwise) -> checkpoint, then submitit's own handler, which
        requeues the job and exits; the requeued job resumes from that checkpoint. SIGTERM stays
        submitit's (ignored): a hard requeue (``scontrol requeue``) kills the job, which then resumes
        from its last periodic checkpoint.
        """

        def handler(signum, _frame):
            self.stop_signal = signum
            self.progress.line(f"[signal] {signal.Signals(signum).name}: checkpointing after this rollout")

        self._chained_handler = None
        if os.environ.get("SUBMITIT_EXECUTOR"):
            name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2").upper().removeprefix("SIG")
            signals = [getattr(signal, f"SIG{name}")]
            self._chained_handler = signal.getsignal(signals[0])
        else:
            signals = [signal.SIGTERM, signal.SIGUSR1]
        self._handled_signals = signals
        for sig in signals:
            try:
                signal.signal(sig, handler)
            except ValueError:  # not the main thread
                pass

    def _write_status(self, state: str) -> None:
        from .provenance import provenance

        if not self.dist.is_main:
            return
        atomic_write_json(
            self.run_dir / "status.json",
            {"state": state, "failure": self.failure, "clocks": self.clocks.as_dict(), **provenance()},
        )

    def _write_summary(self) -> None:
        if not self.dist.is_main:
            return
        final = {"responses": self.clocks.responses, **self.state.last_eval, "clocks": self.clocks.as_dict()}
        atomic_write_json(
            self.run_dir / "summary.json",
            {
                "derived": self.derived.as_dict(),
                "targets": {
                    k: {"responses": v, "reached": v is not None} for k, v in self.state.targets.items()
                },
                "failure": {
                    "responses": self.failure["responses"] if self.failure else None,
                    "failed": self.failure is not None,
                    "detector": self.failure["detector"] if self.failure else None,
                },
                "final": final,
                "best": {"eval/accuracy": self.state.best_accuracy},
                "model": {"parameters": self.n_params},
            },
        )


class _CountingLog:
    """What ranks other than 0 hold instead of the metrics file: a row count (control flow that
    depends on it must agree on every rank), no writes."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, row: dict[str, Any]) -> None:
        self.lines += 1

    def truncate(self, n_lines: int) -> None:
        self.lines = n_lines

    def close(self) -> None:
        pass


def _mean(values: list[float]) -> float:
    return sum(values) / max(len(values), 1)


def _target_key(a: float) -> str:
    return f"{a:g}"
