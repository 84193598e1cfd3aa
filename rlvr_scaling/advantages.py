"""Phase 2 of a cycle: the baseline's advantages, and the gradient inputs the baseline needs.

The estimators are pure functions of :class:`~rlvr_scaling.algorithms.baselines.AdvantageInputs`
(:mod:`rlvr_scaling.algorithms.baselines`). This phase fills those inputs from the rollout: the
optimal baseline's weights w_i = |grad log pi_theta(o_i)|^2 at theta_old (exact per-sample norms from
:class:`~rlvr_scaling.per_sample.PerSampleGradients`, or the logit-gradient proxy) and, with a KL term,
the per-response log-ratio log(pi_theta / pi_ref). Which weights run is decided (and checked) at
start-up, not at step 500.
"""

from __future__ import annotations

import math
import time

import torch

from .algorithms.baselines import AdvantageInputs, compute_advantages
from .errors import ConfigError
from .per_sample import PerSampleGradients, logit_grad_norms
from .policy import completion_logprobs, trim_padding


class AdvantagePhase:
    """Per rollout: the advantages and the optimal baseline's diagnostics (``train/baseline_*``)."""

    def __init__(self, cfg, model, ref_model, device, n_params: int, needs: frozenset[str]):
        self.cfg, self.model, self.ref_model, self.device = cfg, model, ref_model, device
        self.weights_kind: str | None = None
        # the exact per-sample gradient machinery, when the baseline's weights use it (shared with the
        # per-sample noise instrument, see noise.PerSampleNoise)
        self.exact: PerSampleGradients | None = None
        if "grad_weights" in needs:
            kind = getattr(cfg.baseline, "weights", "auto")
            if kind == "auto":
                kind = "exact" if n_params <= cfg.baseline.exact_max_parameters else "proxy"
                if kind == "exact":
                    try:
                        self.exact = PerSampleGradients(model)
                    except ConfigError:
                        kind = "proxy"
            elif kind == "exact":
                self.exact = PerSampleGradients(model)  # raises ConfigError for an unsupported model
            self.weights_kind = kind
        k = cfg.optim.steps_per_rollout
        self.chunk = cfg.optim.micro_batch_responses or max(
            cfg.rollout.prompts_per_rollout * cfg.rollout.group_size // k, 64
        )

    def describe(self) -> str:
        return f"optimal-baseline weights: {self.weights_kind}" if self.weights_kind else ""

    def compute(self, batch) -> tuple[torch.Tensor, dict[str, float]]:
        """The rollout's advantages [N] (float32) and the baseline's diagnostics row; the time spent on
        the weights goes to ``batch.perf['baseline_weights_s']``."""
        t = time.perf_counter()
        inputs = AdvantageInputs(
            rewards=batch.rewards,
            group=batch.gen.prompt_index,
            n_groups=batch.n_prompts,
            greedy_rewards=batch.greedy_rewards,
            grad_weights=self.baseline_weights(batch.gen, batch.rewards),
            logratio=self.kl_logratio(batch.gen),
            kl_coef=self.cfg.loss.kl_coef,
        )
        if inputs.grad_weights is not None:
            batch.perf["baseline_weights_s"] = time.perf_counter() - t
        advantages = compute_advantages(self.cfg.baseline, inputs).float()
        return advantages, self.baseline_diagnostics(inputs, advantages)

    def _comp(self, gen) -> torch.Tensor:
        return gen.completion_mask[:, gen.prompt_width :]

    def baseline_weights(self, gen, rewards: torch.Tensor) -> torch.Tensor | None:
        """w_i = |grad log pi_theta(o_i)|^2 (exact) or the logit-gradient proxy, [N] float64.

        Exact weights are computed only where they can change an advantage: scorable responses in
        groups whose rewards are not all equal (without a KL term, a constant group has A = 0 whatever
        its baseline); the others get w = 0, which no baseline reads.
        """
        if self.weights_kind is None:
            return None
        t = self.cfg.rollout.temperature
        comp = self._comp(gen)
        if self.weights_kind == "exact":
            rows = ~torch.isnan(rewards)
            if self.cfg.loss.kl_coef == 0:
                from .algorithms.allocators import reward_variance

                n_groups = int(gen.prompt_index.max()) + 1
                rows &= (reward_variance(rewards, gen.prompt_index, n_groups) > 0)[gen.prompt_index]
            coef = (comp & rows[:, None]).to(torch.float32)
            res = self.exact.compute(
                gen.input_ids, gen.attention_mask, gen.prompt_width, coef, t, self.device, self.chunk, False
            )
            return res.norms_sq
        return logit_grad_norms(
            self.model, gen.input_ids, gen.attention_mask, comp, gen.prompt_width, t, self.device, self.chunk
        )

    @torch.no_grad()
    def kl_logratio(self, gen) -> torch.Tensor | None:
        """sum_t log(pi_theta / pi_ref)(o_it) per response at theta_old, when the KL term is on."""
        if self.weights_kind is None or self.ref_model is None or self.cfg.loss.kl_coef == 0:
            return None
        out = torch.zeros(len(gen), dtype=torch.float64)
        comp = self._comp(gen)
        for sign, model in ((1.0, self.model), (-1.0, self.ref_model)):
            for s in range(0, len(gen), self.chunk):
                rows = slice(s, s + self.chunk)
                ids, mask, start = trim_padding(
                    gen.input_ids[rows], gen.attention_mask[rows], gen.prompt_width
                )
                lp, _ = completion_logprobs(
                    model, ids.to(self.device), mask.to(self.device), start, self.cfg.rollout.temperature
                )
                c = comp[rows][:, : lp.shape[1]].to(lp.device)
                out[rows] += sign * torch.where(c, lp, torch.zeros_like(lp)).sum(1).double().cpu()
        return out

    def baseline_diagnostics(self, inputs, advantages: torch.Tensor) -> dict[str, float]:
        """Which weights ran, and the baseline's effect on the per-sample gradient second moment.

        ``train/baseline_var_ratio`` = sum_i w_i A_i^2 / sum_i w_i (r_i - mean_q r)^2: with exact weights,
        sum_i |A_i grad log pi(o_i)|^2 under this baseline relative to the plain group-mean baseline on the
        same responses (< 1: the weighted baseline lowered the gradient's second moment).
        """
        if self.weights_kind is None or inputs.grad_weights is None:
            return {}
        from .algorithms.baselines import GRPOParams

        centred = compute_advantages(GRPOParams(scale="none"), inputs)
        w = inputs.grad_weights.double()
        ref = float((w * centred.double() ** 2).sum())
        got = float((w * advantages.double() ** 2).sum())
        return {
            "train/baseline_weights_exact": 1.0 if self.weights_kind == "exact" else 0.0,
            "train/baseline_var_ratio": got / ref if ref > 0 else math.nan,
            "train/baseline_weight_cv": _cv(w[w > 0]),
        }


def _cv(w: torch.Tensor) -> float:
    """Coefficient of variation of the (computed, positive) weights: 0 means the plain group mean."""
    return float(w.std() / w.mean()) if w.numel() > 1 else 0.0
