"""Baselines and advantages: A_i for response i of prompt q with reward r_i.

Every estimator takes the same inputs (:class:`AdvantageInputs`) and returns one advantage per
response. Groups may have unequal sizes (adaptive allocators), and a reward may be missing (NaN: the
verifier could not score the response): missing rewards get advantage 0 and are excluded from every
group statistic.

Registered estimators (config group ``baseline``):

- ``grpo`` (Shao et al. 2024, DeepSeekMath): A_i = (r_i - mean_q r) / (s + delta) with s chosen by
  ``scale``: ``group_std`` (sample std of the group, Bessel-corrected as in TRL), ``batch_std`` (std of
  all rewards of the rollout) or ``none`` (no division, as in Dr. GRPO, Liu et al. 2025).
- ``rloo`` (Ahmadian et al. 2024): A_i = r_i - mean_{j != i, j in q} r_j. Leave-one-out makes the
  baseline independent of r_i, so the estimator is unbiased; advantages of a group sum to zero.
- ``remax`` (Li et al. 2024, ReMax): A_i = r_i - r_greedy(q), the reward of one greedy response to the
  same prompt. The trainer generates those P greedy responses (they count on the ``responses`` clock
  and are logged as ``rollout/greedy_responses``); they are not trained on. A prompt whose greedy
  response cannot be scored gives its group advantage 0.
- ``optimal`` (OBLR-PO, Huang, Sheng & Zheng 2026): the variance-optimal gradient-weighted baseline
  b_q = sum_i w_i r~_i / sum_i w_i over the responses of prompt q, with w_i = |grad_theta log pi(o_i)|^2
  and the KL-shaped reward r~_i = r_i - beta * log(pi_theta(o_i) / pi_ref(o_i)) when ``loss.kl_coef`` is
  on (beta = kl_coef, the log-ratio summed over the response's tokens, at theta_old). A_i = r_i - b_q.
  Our reading: for the score-function estimator (r~_i - b) grad log pi(o_i) the variance
  E|(r~ - b) grad log pi|^2 is minimised by b = E[w r~] / E[w] (the classic optimal constant baseline,
  Greensmith et al. 2004, which the paper derives with the KL cross-covariance term). Our loss carries
  the KL as the per-token k3 term instead of inside the reward, so the advantage uses r and only the
  baseline sees r~ (to first order the k3 gradient is the -beta*log-ratio*score term, so b_q is still the
  minimiser); with beta = 0, r~ = r. ``leave_one_out: true`` (default) uses b_{q,-i} from the other
  responses of the group, so the baseline is independent of o_i and the estimator stays unbiased (the
  paper's in-group estimate is ``false``). Weights (``weights``): ``exact`` per-sample gradient norms
  (:mod:`rlvr_scaling.per_sample`, one extra forward/backward pass per rollout), ``proxy`` the
  logit-gradient norm sum_t |e_{o_t} - pi_t|^2 (one forward pass), ``auto`` = exact up to
  ``exact_max_parameters`` parameters, else proxy. Equal weights give the group mean (rloo with
  leave-one-out). ``scale`` divides by a std as in ``grpo`` (default ``none``, the paper's estimator).

What a baseline needs besides rewards is declared in :data:`NEEDS` and checked at start-up:
``greedy`` (greedy rewards, filled by the trainer) and ``grad_weights`` (per-response w_i).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..registry import Registry


@dataclass
class AdvantageInputs:
    rewards: torch.Tensor  # [N] float64, NaN where unscorable
    group: torch.Tensor  # [N] long, prompt index of each response in [0, n_groups)
    n_groups: int
    greedy_rewards: torch.Tensor | None = None  # [n_groups] reward of a greedy response (ReMax)
    grad_weights: torch.Tensor | None = None  # [N] per-response weights w_i (optimal baseline)
    logratio: torch.Tensor | None = None  # [N] sum_t log(pi_theta / pi_ref)(o_it), when the KL term is on
    kl_coef: float = 0.0  # beta of the KL term (shapes the reward the optimal baseline averages)


@dataclass
class GRPOParams:
    """Group-normalised advantages (GRPO)."""

    name: str = "grpo"
    scale: str = "group_std"  # group_std | batch_std | none
    eps: float = 1e-6  # delta added to the scale

    def validate(self, prefix: str = "baseline") -> None:
        if self.scale not in ("group_std", "batch_std", "none"):
            raise ConfigError(
                f"{prefix}.scale must be one of group_std, batch_std, none (got {self.scale!r})"
            )
        if self.eps < 0:
            raise ConfigError(f"{prefix}.eps must be >= 0 (got {self.eps})")


@dataclass
class RLOOParams:
    """Leave-one-out baseline (RLOO)."""

    name: str = "rloo"

    def validate(self, prefix: str = "baseline") -> None:
        pass


@dataclass
class ReMaxParams:
    """Greedy-response baseline (ReMax)."""

    name: str = "remax"

    def validate(self, prefix: str = "baseline") -> None:
        pass


WEIGHTS = ("exact", "proxy", "auto")


@dataclass
class OptimalParams:
    """Gradient-weighted variance-optimal baseline (OBLR-PO)."""

    name: str = "optimal"
    weights: str = "auto"  # exact (per-sample gradient norms) | proxy (logit-gradient norms) | auto
    exact_max_parameters: int = 20_000_000  # auto: exact weights up to this many model parameters
    leave_one_out: bool = True  # b_{q,-i} from the other responses (unbiased); false = in-group estimate
    scale: str = "none"  # none | group_std | batch_std: divide A by a std as in grpo
    eps: float = 1e-6  # delta added to the scale

    def validate(self, prefix: str = "baseline") -> None:
        if self.weights not in WEIGHTS:
            raise ConfigError(f"{prefix}.weights must be one of {', '.join(WEIGHTS)} (got {self.weights!r})")
        if self.exact_max_parameters < 0:
            raise ConfigError(f"{prefix}.exact_max_parameters must be >= 0 (got {self.exact_max_parameters})")
        GRPOParams(scale=self.scale, eps=self.eps).validate(prefix)


AdvantageFn = Callable[[object, AdvantageInputs], torch.Tensor]
BASELINES: Registry[AdvantageFn] = Registry("baseline")
PARAMS: dict[str, type] = {
    "grpo": GRPOParams,
    "rloo": RLOOParams,
    "remax": ReMaxParams,
    "optimal": OptimalParams,
}
# Inputs a baseline needs beyond rewards, checked at start-up.
NEEDS: dict[str, frozenset[str]] = {
    "grpo": frozenset(),
    "rloo": frozenset(),
    "remax": frozenset({"greedy"}),
    "optimal": frozenset({"grad_weights"}),
}


def check_inputs(params, inputs: AdvantageInputs) -> None:
    """Raise if an input the baseline declared in NEEDS is missing (a trainer bug, not a user error)."""
    fields = {"greedy": inputs.greedy_rewards, "grad_weights": inputs.grad_weights}
    missing = [need for need in NEEDS[params.name] if fields[need] is None]
    if missing:
        raise ValueError(f"baseline {params.name!r} needs {', '.join(missing)} but got none")


def group_sums(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    return torch.zeros(n_groups, dtype=values.dtype).index_add_(0, group, values)


def _valid(inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    valid = ~torch.isnan(inputs.rewards)
    return valid, torch.where(valid, inputs.rewards, torch.zeros_like(inputs.rewards))


@BASELINES.register("grpo")
def grpo_advantages(params: GRPOParams, inputs: AdvantageInputs) -> torch.Tensor:
    valid, r = _valid(inputs)
    g, n = inputs.group, inputs.n_groups
    count = group_sums(valid.double(), g, n)  # [n_groups]
    mean = group_sums(r, g, n) / count.clamp(min=1)
    centred = torch.where(valid, r - mean[g], torch.zeros_like(r))
    if params.scale == "none":
        return centred
    if params.scale == "group_std":
        scale = (group_sums(centred**2, g, n) / (count - 1).clamp(min=1)).sqrt()[g]
    else:  # batch_std: one scale for the whole rollout
        rb = r[valid]
        std = rb.std() if rb.numel() > 1 else torch.zeros((), dtype=r.dtype)
        scale = std.expand_as(r)
    return torch.where(valid, centred / (scale + params.eps), torch.zeros_like(r))


@BASELINES.register("rloo")
def rloo_advantages(params: RLOOParams, inputs: AdvantageInputs) -> torch.Tensor:
    valid, r = _valid(inputs)
    g, n = inputs.group, inputs.n_groups
    count = group_sums(valid.double(), g, n)[g]
    total = group_sums(r, g, n)[g]
    loo_mean = (total - r) / (count - 1).clamp(min=1)
    # A group with a single valid response has no leave-one-out baseline: it carries no signal.
    ok = valid & (count > 1)
    return torch.where(ok, r - loo_mean, torch.zeros_like(r))


def _scaled(centred: torch.Tensor, valid: torch.Tensor, inputs: AdvantageInputs, scale: str, eps: float):
    """Divide centred advantages by the std chosen by ``scale`` (as grpo does); ``none`` leaves them."""
    if scale == "none":
        return centred
    _, r = _valid(inputs)
    g, n = inputs.group, inputs.n_groups
    if scale == "group_std":
        count = group_sums(valid.double(), g, n)
        mean = group_sums(r, g, n) / count.clamp(min=1)
        dev = torch.where(valid, r - mean[g], torch.zeros_like(r))
        std = (group_sums(dev**2, g, n) / (count - 1).clamp(min=1)).sqrt()[g]
    else:
        rb = r[valid]
        std = (rb.std() if rb.numel() > 1 else torch.zeros((), dtype=r.dtype)).expand_as(r)
    return torch.where(valid, centred / (std + eps), torch.zeros_like(r))


@BASELINES.register("remax")
def remax_advantages(params: ReMaxParams, inputs: AdvantageInputs) -> torch.Tensor:
    check_inputs(params, inputs)
    valid, r = _valid(inputs)
    greedy = inputs.greedy_rewards.to(r.dtype)[inputs.group]  # [N]
    ok = valid & ~torch.isnan(greedy)
    return torch.where(ok, r - torch.nan_to_num(greedy), torch.zeros_like(r))


def shaped_rewards(inputs: AdvantageInputs) -> torch.Tensor:
    """r~ = r - beta * log(pi_theta / pi_ref)(o), the KL-shaped reward (r itself when beta = 0)."""
    if inputs.kl_coef > 0 and inputs.logratio is not None:
        return inputs.rewards - inputs.kl_coef * inputs.logratio.to(inputs.rewards.dtype)
    return inputs.rewards


def optimal_baseline(inputs: AdvantageInputs, leave_one_out: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """b for every response, [N] (b_q, or b_{q,-i} with leave-one-out), and where it is defined, [N] bool.

    b_q = sum_{i in q} w_i r~_i / sum_{i in q} w_i over the scorable responses of the group. Where the
    weights of the group (or of the others, with leave-one-out) sum to zero, the unweighted mean is used.
    """
    valid, _ = _valid(inputs)
    rt = shaped_rewards(inputs)
    rt = torch.where(valid, rt, torch.zeros_like(rt))
    w = torch.where(valid, inputs.grad_weights.to(rt.dtype).clamp(min=0), torch.zeros_like(rt))
    g, n = inputs.group, inputs.n_groups
    count = group_sums(valid.double(), g, n)[g]
    sw, swr = group_sums(w, g, n)[g], group_sums(w * rt, g, n)[g]
    sr = group_sums(rt, g, n)[g]
    if leave_one_out:
        sw, swr, sr, count = sw - w, swr - w * rt, sr - rt, count - 1
    tiny = 1e-12 * group_sums(w, g, n).max().clamp(min=1e-300)
    mean = sr / count.clamp(min=1)
    b = torch.where(sw > tiny, swr / sw.clamp(min=1e-300), mean)
    return b, valid & (count > 0)


@BASELINES.register("optimal")
def optimal_advantages(params: OptimalParams, inputs: AdvantageInputs) -> torch.Tensor:
    check_inputs(params, inputs)
    b, ok = optimal_baseline(inputs, params.leave_one_out)
    _, r = _valid(inputs)
    centred = torch.where(ok, r - b, torch.zeros_like(r))
    return torch.where(ok, _scaled(centred, ok, inputs, params.scale, params.eps), torch.zeros_like(r))


def weighted_second_moment(advantages: torch.Tensor, weights: torch.Tensor) -> float:
    """sum_i w_i A_i^2: the per-sample gradient second moment sum_i |A_i grad log pi(o_i)|^2 when w_i are
    exact squared score norms; the quantity the optimal baseline minimises per group."""
    return float((weights.double() * advantages.double() ** 2).sum())


def compute_advantages(params, inputs: AdvantageInputs) -> torch.Tensor:
    return BASELINES.get(params.name)(params, inputs)
