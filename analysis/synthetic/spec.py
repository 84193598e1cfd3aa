"""What a synthetic condition is: its parameters (:class:`SyntheticSpec`; the model in
:mod:`analysis.synthetic`), a simulated run (:class:`SyntheticRun`), the run's config in the trainer's
tree (:func:`make_config`) and a target's crossing in units of the run's time scale."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SyntheticSpec:
    sizes: tuple[int, ...] = (32, 64, 128, 256)  # rollout sizes B
    seeds: int = 3  # runs per size
    alpha: float = 0.3  # exponent of responses-to-target (all targets)
    b_crit: float | None = None  # set: McCandlish's R_T = c * (1 + B / b_crit) in place of c * B**alpha
    prefactor: float = 2000.0  # c: median responses to the first target is c * B**alpha
    sigma: float = 0.25  # log-normal scatter of responses-to-target
    gamma: float | None = 0.0  # exponent of responses-to-failure; None: no run fails
    failure_prefactor: float = 20000.0  # d: median responses to failure is d * B**gamma
    failure_sigma: float = 0.4  # log-normal scatter of responses-to-failure
    rho: float = 0.0  # correlation of log time to target and log time to failure (dependence="normal")
    dependence: str = "normal"  # joint law of the two clocks' noises: normal, clayton, gumbel, frailty
    dependence_param: float = 0.0  # clayton/gumbel: Kendall's tau (< 0: rotated); frailty: Var Z
    seed_corr: float = 0.0  # share of the target-time scatter that belongs to the seed (all sizes, all
    # conditions with the same seed_stream): the correlation of one seed's log times between sizes
    seed_size_corr: float = 0.0  # share that belongs to the (seed, B) pair, shared by the conditions with
    # the same seed_stream only at that B (same data order and sampling keys): the correlation of one
    # seed's log times between conditions at one size is seed_corr + seed_size_corr
    seed_stream: int = 0  # conditions with the same stream share their seed effects
    detection_delay: int = 0  # rollouts from failure onset to the detector's decision
    b_noise: float | None = 200.0  # true gradient-noise scale tr Sigma / |G|^2 (None: no noise/ rows)
    adam_b_noise: float | None = None  # true tr(P Sigma) / G'PG: noise/adam_* rows (None: none)
    targets: tuple[float, ...] = (0.3, 0.5)  # eval.targets
    budget: int = 30000  # train.max_responses: runs still going there are censored
    eval_every: int = 256  # eval.every_responses
    eval_growth: float = 1.0  # > 1: geometric evaluation schedule eval_every * eval_growth**k
    group_size: int = 8  # G (P = B / G)
    steps_per_rollout: int = 8  # K
    acc_start: float = 0.05  # accuracy at step 0
    acc_max: float = 0.8  # accuracy plateau
    acc_noise: float = 0.0  # sd of additive noise on each evaluation (0: smooth curves)
    curve: str = "exponential"  # accuracy curve: "exponential" saturation or ScaleRL's "sigmoid"
    curve_b: float = 1.5  # the sigmoid's exponent b (curve="sigmoid")
    seed: int = 0  # random seed of the whole sweep
    overrides: tuple[tuple[str, Any], ...] = ()  # dotted config keys setting the condition
    sweep: str = "synthetic"  # run.sweep (the wandb group)
    train_rows: str = "eval"  # "eval": one train row per evaluation (small files); "all": every rollout
    parameters: int | None = None  # summary.json's model.parameters (the model size N); None: not written


@dataclass
class SyntheticRun:
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    status: dict[str, Any]
    summary: dict[str, Any]
    truth: dict[str, Any] = field(default_factory=dict)  # continuous and expected measured clocks


def crossing_scale(a: float, spec: SyntheticSpec) -> float:
    """Crossing time of target ``a`` in units of the run's time scale."""
    frac = (a - spec.acc_start) / (spec.acc_max - spec.acc_start)
    if not 0 < frac < 1:
        raise ValueError(f"target {a} outside (acc_start, acc_max)")
    if spec.curve == "sigmoid":
        return (frac / (1 - frac)) ** (1 / spec.curve_b)
    return -math.log1p(-frac)


def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        config = config.setdefault(part, {})
    config[parts[-1]] = value


def make_config(spec: SyntheticSpec, size: int, seed: int) -> dict[str, Any]:
    """A config with the trainer's tree (docs/design.md §2, §6), the condition set by ``spec.overrides``."""
    group = min(spec.group_size, size)
    if size % group:
        raise ValueError(f"B={size} is not a multiple of group_size={group}")
    suffix = "".join(f"_{k.split('.')[-1]}{v}" for k, v in spec.overrides)
    config: dict[str, Any] = {
        "seed": seed,
        "model": {"name": "tiny-llama", "hidden_size": 128, "num_layers": 4},
        "task": {"name": "chain_sum", "train_size": 10000, "eval_size": 128},
        "rollout": {
            "prompts_per_rollout": size // group,
            "group_size": group,
            "engine": "hf",
            "temperature": 1.0,
            "max_new_tokens": 16,
        },
        "optim": {"name": "adamw", "steps_per_rollout": spec.steps_per_rollout, "epochs": 1},
        "lr": {"rule": "power", "ref_lr": 1.0e-6, "ref_responses": 64, "power": 0.5},
        "loss": {"clip": None, "kl_coef": 0.0, "aggregation": "token_mean"},
        "baseline": {"name": "grpo", "scale": "group_std"},
        "allocator": {"name": "uniform"},
        "eval": {
            "every_responses": spec.eval_every,
            "targets": list(spec.targets),
            "size": 128,
            "samples": 1,
        },
        "failure": {
            "non_finite": {},
            "accuracy_collapse": {"drop_frac": 0.5, "min_peak": 0.2},
            "reward_collapse": {"drop_frac": 0.5, "min_peak": 0.2},
            "kl_blowup": None,
            "entropy_collapse": None,
        },
        "train": {"max_responses": spec.budget, "stop_at_targets": False},
        "logger": {"wandb": {"mode": "offline", "project": "rlvr-scaling"}},
        "run": {"sweep": spec.sweep, "name": f"B{size}_seed{seed}{suffix}", "threads": 1, "device": "cpu"},
    }
    for key, value in spec.overrides:
        _set(config, key, value)
    return config
