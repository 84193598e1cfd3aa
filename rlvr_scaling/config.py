"""Typed run configuration: the structured-config schemas behind ``conf/``, validation, derived numbers.

Hydra composes ``conf/`` against these dataclasses (registered in the ConfigStore by
:func:`register_configs`), so a misspelt key or a wrong type fails at composition. The entry point
turns the composed tree into a :class:`Config` instance; from there on the library sees only typed
objects. :func:`validate` checks every rule that composition cannot (G >= 2, K divides B, ...) before
any model is loaded, with a message naming the key. :func:`derive` computes the numbers that follow
from the config (B, B/K, eta(B)); they are printed, logged and written to ``summary.json``, never
written back into the config.

Axes with one schema per option (task, baseline, lr, allocator) are typed ``Any`` at the root; each
YAML preset extends its own schema (``defaults: [<name>_schema]``), so the node is still typed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from .algorithms import allocators, baselines, lr_rules
from .algorithms.failure import (
    CollapseParams,
    EntropyCollapseParams,
    FailureConfig,
    KLBlowupParams,
    NonFiniteParams,
)
from .algorithms.loss import LossConfig
from .engines.vllm_config import VLLMConfig
from .errors import ConfigError
from .models import EmbeddedModelConfig, ModelConfig, WarmStartConfig
from .per_sample import PerSampleNoiseParams
from .samples import SamplesConfig


@dataclass
class RolloutConfig:
    prompts_per_rollout: int = 16  # P: prompts drawn per rollout
    group_size: int = 8  # G: responses per prompt (GRPO group)
    engine: str = "auto"  # generation engine: hf | vllm | auto (vllm on a GPU where installed, else hf)
    temperature: float = 1.0  # sampling temperature; the policy is softmax(logits / T)
    top_p: float = 1.0
    max_new_tokens: int = 8
    generation_batch_responses: int | None = None  # engine micro-batch; null = all at once
    vllm: VLLMConfig = field(default_factory=VLLMConfig)  # settings of engine=vllm (ignored by hf)

    def validate(self, prefix: str = "rollout") -> None:
        if self.prompts_per_rollout < 1:
            raise ConfigError(f"{prefix}.prompts_per_rollout must be >= 1 (got {self.prompts_per_rollout})")
        if self.group_size < 2:
            raise ConfigError(
                f"{prefix}.group_size must be >= 2: a group of one response has no group baseline (got {self.group_size})"
            )
        if not self.temperature > 0:
            raise ConfigError(f"{prefix}.temperature must be > 0 (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"{prefix}.top_p must be in (0, 1] (got {self.top_p})")
        if self.max_new_tokens < 1:
            raise ConfigError(f"{prefix}.max_new_tokens must be >= 1 (got {self.max_new_tokens})")
        self.vllm.validate(f"{prefix}.vllm")


@dataclass
class OptimConfig:
    name: str = "adamw"
    steps_per_rollout: int = 8  # K: optimizer steps per rollout (minibatches of B/K responses)
    epochs: int = 1  # passes over the rollout; K * epochs steps in all
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0  # max global gradient norm; null disables
    warmup_rollouts: int = 0  # linear learning-rate warm-up over this many rollouts
    micro_batch_responses: int | None = None  # gradient accumulation; null = whole minibatch at once
    skip_zero_advantage: bool = True  # exact: rows with A = 0 and no KL term have zero gradient
    fused: bool = True  # fused AdamW kernel (same update, far less per-tensor overhead)
    # the loss forward packs a micro-batch's rows into one unpadded sequence (same numbers up to float
    # rounding, no compute on padding); false = one padded batch
    pack_sequences: bool = True
    # pi_old log-probs of the sampled tokens: "recompute" (a forward pass over the rollout after
    # generation), "behaviour" (the log-probs the engine recorded while sampling), or "auto" =
    # behaviour when the engine samples with the trainer's own weights in the trainer's dtype (the HF
    # engine: the same numbers up to float rounding, measured in docs/speed.md), recompute otherwise
    # (vLLM: other kernels and dtypes, a real train/inference mismatch, logged as rollout/mismatch_*), and
    # recompute whenever loss.tis is set. behaviour is refused with vLLM at top_p < 1 and with loss.tis.
    old_logprobs: str = "auto"

    def validate(self, prefix: str = "optim") -> None:
        if self.name != "adamw":
            raise ConfigError(f"{prefix}.name: only 'adamw' is available (got {self.name!r})")
        if self.steps_per_rollout < 1:
            raise ConfigError(f"{prefix}.steps_per_rollout must be >= 1 (got {self.steps_per_rollout})")
        if self.epochs < 1:
            raise ConfigError(f"{prefix}.epochs must be >= 1 (got {self.epochs})")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"{prefix}.betas must be two numbers in [0, 1) (got {list(self.betas)})")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ConfigError(f"{prefix}.grad_clip must be > 0 or null (got {self.grad_clip})")
        if self.micro_batch_responses is not None and self.micro_batch_responses < 1:
            raise ConfigError(f"{prefix}.micro_batch_responses must be >= 1 or null")
        if self.old_logprobs not in ("auto", "recompute", "behaviour"):
            raise ConfigError(
                f"{prefix}.old_logprobs must be auto, recompute or behaviour (got {self.old_logprobs!r})"
            )
        if self.warmup_rollouts < 0 or self.weight_decay < 0:
            raise ConfigError(f"{prefix}.warmup_rollouts and {prefix}.weight_decay must be >= 0")


@dataclass
class EvalConfig:
    # When validation runs (always at 0 too, then at the first rollout boundary at or past each point):
    # linear = every `every_responses`; geometric = at first_responses * 2^(k / points_per_doubling),
    # k = 0, 1, ..., with at most `every_responses` between two evaluations. Geometric points give the
    # same relative resolution (~12 % at 6 per doubling) to every crossing time, early or late.
    schedule: str = "geometric"
    every_responses: int = 1024  # linear: the interval; geometric: the largest interval
    first_responses: int = 64  # geometric: the first point after 0
    points_per_doubling: int = 6  # geometric
    targets: list[float] = field(default_factory=lambda: [0.25, 0.3, 0.35])  # accuracies to time
    samples: int = 0  # 0 = greedy pass@1; n > 0 = mean pass@1 over n samples at rollout temperature
    max_new_tokens: int | None = None  # null = rollout.max_new_tokens

    def validate(self, prefix: str = "eval") -> None:
        if self.schedule not in ("linear", "geometric"):
            raise ConfigError(f"{prefix}.schedule must be linear or geometric (got {self.schedule!r})")
        if self.every_responses < 1:
            raise ConfigError(f"{prefix}.every_responses must be >= 1 (got {self.every_responses})")
        if self.first_responses < 1 or self.points_per_doubling < 1:
            raise ConfigError(f"{prefix}.first_responses and {prefix}.points_per_doubling must be >= 1")
        for t in self.targets:
            if not 0 <= t <= 1:
                raise ConfigError(f"{prefix}.targets must lie in [0, 1] (got {t})")
        if self.samples < 0:
            raise ConfigError(f"{prefix}.samples must be >= 0 (got {self.samples})")


@dataclass
class TrainConfig:
    max_responses: int = 8192  # budget on the responses clock
    stop_at_targets: bool = False  # stop once every eval target is reached

    def validate(self, prefix: str = "train") -> None:
        if self.max_responses < 1:
            raise ConfigError(f"{prefix}.max_responses must be >= 1 (got {self.max_responses})")


@dataclass
class LoggerConfig:
    """Where metrics go besides the run directory (bookkeeping: not part of a run's condition)."""

    name: str = "none"  # none | wandb
    project: str = "rlvr-scaling"
    entity: str | None = None
    mode: str = "auto"  # auto (online with credentials, else offline) | online | offline
    tags: list[str] = field(default_factory=list)
    samples: SamplesConfig = field(default_factory=SamplesConfig)  # sampled completions (samples.py)

    def validate(self, prefix: str = "logger") -> None:
        self.samples.validate(f"{prefix}.samples")
        if self.name not in ("none", "wandb"):
            raise ConfigError(f"{prefix}.name must be none or wandb (got {self.name!r})")
        if self.mode not in ("auto", "online", "offline"):
            raise ConfigError(f"{prefix}.mode must be auto, online or offline (got {self.mode!r})")


@dataclass
class RunConfig:
    """Bookkeeping that does not change the science (excluded from a run's condition)."""

    name: str | None = None  # display name (wandb); null = derived from the run directory
    sweep: str = "single"  # sweep name = wandb group
    checkpoint_every_rollouts: int = 16
    threads: int | None = None  # torch intra-op threads; null = torch's default
    device: str = "auto"  # auto | cpu | cuda
    force: bool = False  # re-run even if the run directory says completed/failed
    cache_dir: str = "~/.cache/rlvr_scaling"  # warm-started embedded models
    progress: bool = True
    # data-parallel runs (N processes from torchrun or SLURM tasks; see rlvr_scaling/distributed.py):
    # auto = FSDP2 on GPUs, DDP on CPU; fsdp | ddp force one. Ignored by single-process runs.
    parallel: str = "auto"
    dist_backend: str = "auto"  # auto = nccl on GPUs, gloo on CPU
    # stop (checkpointed, state "preempted", resumable) once this many rollouts are done: time-sliced
    # jobs, or continuing a run elsewhere (another machine, another number of processes)
    stop_after_rollouts: int | None = None
    # one process owns a run directory (rundir.RunDirLock): a launch finding it held by another live
    # process waits this long for it (a requeued job whose predecessor is still being killed), then exits
    # naming the holder; 0 = exit at once
    lock_wait_s: float = 60.0

    def validate(self, prefix: str = "run") -> None:
        if self.parallel not in ("auto", "ddp", "fsdp"):
            raise ConfigError(f"{prefix}.parallel must be auto, ddp or fsdp (got {self.parallel!r})")
        if self.dist_backend not in ("auto", "gloo", "nccl"):
            raise ConfigError(f"{prefix}.dist_backend must be auto, gloo or nccl (got {self.dist_backend!r})")
        if self.checkpoint_every_rollouts < 1:
            raise ConfigError(f"{prefix}.checkpoint_every_rollouts must be >= 1")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"{prefix}.device must be auto, cpu or cuda (got {self.device!r})")
        if self.stop_after_rollouts is not None and self.stop_after_rollouts < 1:
            raise ConfigError(f"{prefix}.stop_after_rollouts must be >= 1 or null")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"{prefix}.threads must be >= 1 or null")
        if not self.lock_wait_s >= 0:
            raise ConfigError(f"{prefix}.lock_wait_s must be >= 0 seconds (got {self.lock_wait_s})")


@dataclass
class Config:
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    task: Any = MISSING
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    lr: Any = MISSING
    loss: LossConfig = field(default_factory=LossConfig)
    baseline: Any = MISSING
    allocator: Any = MISSING
    eval: EvalConfig = field(default_factory=EvalConfig)
    failure: FailureConfig = field(default_factory=FailureConfig)
    noise: PerSampleNoiseParams = field(default_factory=PerSampleNoiseParams)
    train: TrainConfig = field(default_factory=TrainConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    run: RunConfig = field(default_factory=RunConfig)


@dataclass(frozen=True)
class Derived:
    """Numbers that follow from the config; computed once, printed, logged, never written back."""

    responses_per_rollout: int  # B = P * G
    prompts_per_rollout: int  # P
    group_size: int  # G
    steps_per_rollout: int  # K
    minibatch_responses: int  # B / K
    lr: float  # eta(B) actually used (the maximum for adaptive rules)
    epochs: int
    rollouts_in_budget: int  # ceil(max_responses / B) for a uniform allocator
    engine: str = "hf"  # the generation engine rollout.engine resolves to (auto -> hf | vllm)
    world_size: int = 1  # data-parallel processes (ranks)
    prompts_per_rank: int = 0  # the largest rank's share of the P prompts (whole groups)
    minibatch_responses_per_rank: int = 0  # the largest rank's share of a minibatch of B/K

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def validate(cfg: Config) -> None:
    """Every rule composition cannot check, before any model is loaded. Raises ConfigError."""
    from .engines import ENGINE_NAMES
    from .tasks import TASKS

    cfg.model.validate()
    cfg.rollout.validate()
    if cfg.rollout.engine not in ENGINE_NAMES:
        raise ConfigError(
            f"rollout.engine: unknown engine {cfg.rollout.engine!r}; valid: {', '.join(ENGINE_NAMES)}"
        )
    cfg.optim.validate()
    cfg.loss.validate()
    from .engines import resolve_engine
    from .logprobs import check_logprob_config

    check_logprob_config(cfg, resolve_engine(cfg.rollout.engine, cfg.run.device))
    cfg.eval.validate()
    cfg.failure.validate()
    cfg.noise.validate()
    cfg.train.validate()
    cfg.logger.validate()
    cfg.run.validate()
    kind = getattr(cfg.task, "kind", None)
    if kind not in TASKS:
        raise ConfigError(f"task.kind: unknown task kind {kind!r}; valid: {', '.join(TASKS.names())}")
    try:
        cfg.task.validate("task")
    except ConfigError:
        raise
    except (ValueError, KeyError) as err:
        raise ConfigError(str(err).strip("'\"")) from None
    for axis, registry, key in (
        ("baseline", baselines.BASELINES, "name"),
        ("lr", lr_rules.LR_RULES, "rule"),
        ("allocator", allocators.ALLOCATORS, "name"),
    ):
        params = getattr(cfg, axis)
        name = getattr(params, key, None)
        if name not in registry:
            raise ConfigError(
                f"{axis}.{key}: unknown {registry.kind} {name!r}; valid: {', '.join(registry.names())}"
            )
        params.validate(axis)
    b = cfg.rollout.prompts_per_rollout * cfg.rollout.group_size
    k = cfg.optim.steps_per_rollout
    if b % k:
        raise ConfigError(
            f"optim.steps_per_rollout: the rollout size B = P*G = {cfg.rollout.prompts_per_rollout}*"
            f"{cfg.rollout.group_size} = {b} must be divisible by K = {k} (minibatches of B/K responses)"
        )
    mb = cfg.optim.micro_batch_responses
    if mb is not None and (b // k) % mb:
        raise ConfigError(f"optim.micro_batch_responses ({mb}) must divide the minibatch B/K = {b // k}")


def derive(cfg: Config, world_size: int = 1) -> Derived:
    from .algorithms.lr_rules import build_lr_rule
    from .engines import resolve_engine

    b = cfg.rollout.prompts_per_rollout * cfg.rollout.group_size
    k = cfg.optim.steps_per_rollout
    return Derived(
        world_size=world_size,
        prompts_per_rank=-(-cfg.rollout.prompts_per_rollout // world_size),
        minibatch_responses_per_rank=-(-(b // k) // world_size),
        responses_per_rollout=b,
        prompts_per_rollout=cfg.rollout.prompts_per_rollout,
        group_size=cfg.rollout.group_size,
        steps_per_rollout=k,
        minibatch_responses=b // k,
        lr=build_lr_rule(cfg.lr, b).base_lr,
        epochs=cfg.optim.epochs,
        rollouts_in_budget=-(-cfg.train.max_responses // b),
        engine=resolve_engine(cfg.rollout.engine, cfg.run.device),
    )


def register_configs() -> None:
    """Register every schema in Hydra's ConfigStore (called by the entry point and the tests)."""
    from hydra.core.config_store import ConfigStore

    from .tasks import TASK_PARAMS

    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="rollout", name="rollout_schema", node=RolloutConfig)
    cs.store(group="optim", name="optim_schema", node=OptimConfig)
    cs.store(group="loss", name="loss_schema", node=LossConfig)
    cs.store(group="eval", name="eval_schema", node=EvalConfig)
    cs.store(group="failure", name="failure_schema", node=FailureConfig)
    cs.store(group="noise", name="noise_schema", node=PerSampleNoiseParams)
    cs.store(group="logger", name="logger_schema", node=LoggerConfig)
    cs.store(group="train", name="train_schema", node=TrainConfig)
    cs.store(group="run", name="run_schema", node=RunConfig)
    for name, params in baselines.PARAMS.items():
        cs.store(group="baseline", name=f"{name}_schema", node=params)
    for name, params in lr_rules.PARAMS.items():
        cs.store(group="lr", name=f"{name}_schema", node=params)
    for name, params in allocators.PARAMS.items():
        cs.store(group="allocator", name=f"{name}_schema", node=params)
    for kind, params in TASK_PARAMS.items():
        cs.store(group="task", name=f"{kind}_schema", node=params)


__all__ = [
    "CollapseParams",
    "Config",
    "Derived",
    "EmbeddedModelConfig",
    "EntropyCollapseParams",
    "EvalConfig",
    "FailureConfig",
    "KLBlowupParams",
    "LoggerConfig",
    "LossConfig",
    "ModelConfig",
    "NonFiniteParams",
    "OptimConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainConfig",
    "VLLMConfig",
    "WarmStartConfig",
    "derive",
    "register_configs",
    "validate",
]
