"""Data-parallel runs on ``torch.distributed``: process-group set-up, shares, model wrapping.

One run can span N processes (one per GPU, or N CPU processes with gloo). The launcher decides N:

- ``torchrun --nproc_per_node=N -m rlvr_scaling.cli.train ...`` sets ``RANK``/``WORLD_SIZE``/
  ``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT``;
- SLURM (``slurm=gpu_1x8`` / ``gpu_2x8``: submitit launcher with one task per GPU, or plain ``srun``)
  sets ``SLURM_PROCID``/``SLURM_NTASKS``; submitit's ``TorchDistributedEnvironment`` turns those into
  the same variables (master = the first host of the job, port from the job id).

With none of these the run is the ordinary single process and nothing here is used.

How the work is split (the trainer does the splitting; this module only supplies the pieces):

- Generation: prompt ``j`` of a rollout belongs to rank ``owner(j)`` (contiguous blocks), so whole GRPO
  groups stay on one rank. Every rank samples with its own engine, then the rollout is all-gathered:
  every rank holds the whole rollout, so advantages, allocator decisions, detectors, clocks and the
  learning-rate rule are computed identically on every rank (no broadcasts of decisions needed).
- Training: each of the K global minibatches (B/K responses) is split across ranks; every rank's loss
  is its part of the minibatch loss (the normaliser is the global one) multiplied by N, because DDP and
  FSDP average gradients over ranks: the averaged gradient is then exactly the 1-process gradient.
- FSDP2 (``fully_shard``) shards parameters, gradients and optimizer state; DDP replicates them. With
  FSDP the engine generates with a separate full copy of the weights, refreshed from the shards after
  the K steps; with DDP the engine shares the (replicated) module.
- Mixed precision (``model.dtype=bfloat16`` with master weights, :class:`~rlvr_scaling.models.Precision`):
  DDP replicates the fp32 module, whose forwards run under autocast, and all-reduces fp32 gradients.
  FSDP2 keeps the fp32 shards (the master weights and AdamW states) and computes with bf16 unsharded
  parameters, reducing gradients in fp32 (``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)``); the full copy the engine and the log-prob passes use is then held in bf16 too,
  so that it computes exactly what the FSDP forward computes (both: bf16 parameters under autocast).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def enabled(self) -> bool:
        """A process group is in use (world size > 1, or 1 when FSDP/DDP was asked for explicitly)."""
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------ shares

    def block(self, n: int, rank: int | None = None) -> range:
        """This rank's contiguous block of ``n`` items (blocks differ in size by at most one)."""
        r = self.rank if rank is None else rank
        return range(r * n // self.world_size, (r + 1) * n // self.world_size)

    def owner(self, j: int, n: int) -> int:
        """The rank whose block of ``n`` items holds item ``j``."""
        return next(r for r in range(self.world_size) if j in self.block(n, r))

    # ------------------------------------------------------------------ collectives

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        if not self.enabled or not values:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self._collective_device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.cpu().tolist()

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def _collective_device(self) -> torch.device:
        return (
            torch.device("cuda", torch.cuda.current_device())
            if self.backend == "nccl"
            else torch.device("cpu")
        )


def _slurm_tasks() -> int:
    try:
        return int(os.environ.get("SLURM_NTASKS", "1"))
    except ValueError:
        return 1


def requested_world_size() -> int:
    """N as the launcher set it (before any process group exists)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    if "SLURM_PROCID" in os.environ and _slurm_tasks() > 1:
        return _slurm_tasks()
    return 1


def init(device_type: str, backend: str = "auto", force: bool = False) -> DistEnv:
    """Join the process group the launcher describes (no-op for a single process, unless ``force``
    and a launcher such as torchrun set WORLD_SIZE=1: then a group of one, e.g. FSDP on one GPU)."""
    if dist.is_available() and dist.is_initialized():
        # a group someone else formed: a launcher script's (adopted), or an in-process engine's own
        # one-process group (vLLM forms one; not a data-parallel world: ignored)
        if dist.get_world_size() > 1 or force:
            return DistEnv(
                dist.get_rank(),
                dist.get_world_size(),
                int(os.environ.get("LOCAL_RANK", 0)),
                dist.get_backend(),
            )
        return DistEnv()
    if requested_world_size() <= 1 and not (force and "WORLD_SIZE" in os.environ):
        return DistEnv()
    if "WORLD_SIZE" not in os.environ:  # SLURM tasks without torchrun: derive the env:// variables
        from submitit.helpers import TorchDistributedEnvironment

        TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if backend == "auto":
        backend = "nccl" if device_type == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if device_type == "cuda":
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        kwargs["device_id"] = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group(backend=backend, rank=rank, world_size=world, **kwargs)
    global _OWNED
    _OWNED = True
    return DistEnv(rank, world, local_rank, backend)


_OWNED = False  # whether init() formed the current default process group


def shutdown() -> None:
    """Leave the process group, if init() formed it (an engine's or a caller's group is left alone)."""
    global _OWNED
    if _OWNED and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _OWNED = False


def local_device(device: torch.device, env: DistEnv) -> torch.device:
    """The device of this rank (``cuda:<local rank>`` for multi-GPU runs)."""
    if device.type == "cuda" and env.enabled:
        return torch.device("cuda", torch.cuda.current_device())
    return device


# ---------------------------------------------------------------------- model wrapping


@dataclass
class Parallel:
    """The trainer's view of the model under a data-parallel strategy.

    ``train_module``: what the loss forward runs through (the model itself, DDP, or the FSDP2 module).
    ``full_module``: an unsharded module holding the weights the rollout was generated with (theta_old):
    the engine's weights, and what old/reference log-probs and per-sample gradients are computed with
    (those are per-rank computations, so they must not trigger collectives).
    """

    strategy: str  # none | ddp | fsdp
    train_module: torch.nn.Module
    full_module: torch.nn.Module
    params_module: torch.nn.Module  # whose .parameters() the optimizer updates

    def micro_context(self, sync: bool):
        """Gradient synchronisation on (last micro-batch) or off (earlier ones)."""
        import contextlib

        if self.strategy == "ddp" and not sync:
            return self.train_module.no_sync()
        if self.strategy == "fsdp":
            self.train_module.set_requires_gradient_sync(sync)
        return contextlib.nullcontext()

    @torch.no_grad()
    def refresh_full(self) -> None:
        """Copy the updated (sharded) parameters into the full module (FSDP; DDP/none share it)."""
        if self.strategy != "fsdp":
            return
        full = dict(self.full_module.named_parameters())
        for name, p in self.train_module.named_parameters():
            full[name].copy_(p.full_tensor())


def _decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks FSDP wraps one by one (HF decoder-only models keep them in a ModuleList
    named ``layers`` or ``h``)."""
    for name in ("model.layers", "transformer.h", "model.decoder.layers", "gpt_neox.layers"):
        mod: Any = model
        try:
            for part in name.split("."):
                mod = getattr(mod, part)
        except AttributeError:
            continue
        if isinstance(mod, torch.nn.ModuleList):
            return list(mod)
    return []


def wrap(model: torch.nn.Module, env: DistEnv, strategy: str, device: torch.device) -> Parallel:
    """Wrap ``model`` for data-parallel training (``strategy``: auto | ddp | fsdp)."""
    if not env.enabled:
        return Parallel("none", model, model, model)
    if strategy == "auto":
        strategy = "fsdp" if device.type == "cuda" else "ddp"
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        return Parallel("ddp", DDP(model, device_ids=ids), model, model)
    if strategy == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        full = copy.deepcopy(model).requires_grad_(False)
        compute = getattr(model, "rlvr_autocast_dtype", None)  # mixed precision (models.enable_autocast)
        policy = MixedPrecisionPolicy()
        if compute is not None:
            policy = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
            # what FSDP all-gathers for compute: the same bf16 weights. Parameters only: buffers
            # (rotary inv_freq) stay fp32, as FSDP's policy leaves them
            for p in full.parameters():
                p.data = p.data.to(compute)
        for layer in _decoder_layers(model):
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        return Parallel("fsdp", model, full, model)
    raise ValueError(f"unknown data-parallel strategy {strategy!r}")


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (the tensor itself otherwise)."""
    return t.to_local() if hasattr(t, "to_local") else t


def full_value(t: torch.Tensor) -> torch.Tensor:
    """The full (reduced / gathered) value of a DTensor (the tensor itself otherwise)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t
