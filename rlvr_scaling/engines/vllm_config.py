"""Settings of the vLLM engine (``rollout.vllm``), kept apart from the engine so that the typed config
never imports the optional ``vllm`` package. The HF engine ignores them.

The defaults run the embedded model on a CPU (vLLM's CPU build, in-process, 1 GiB KV cache); the GPU
presets (``conf/gpu/``) set the memory fraction, CUDA graphs and the context length for real models.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

VLLM_DTYPES = ("auto", "float32", "bfloat16", "float16")
SEEDING_MODES = ("request", "call")


@dataclass
class VLLMConfig:
    """Engine settings for ``rollout.engine: vllm``."""

    dtype: str = "auto"  # vLLM's weights/compute: auto (= model.dtype) | float32 | bfloat16 | float16
    gpu_memory_utilization: float = 0.3  # GPU: fraction of the device vLLM may take (weights + KV cache)
    kv_cache_gb: float | None = None  # explicit KV-cache size, GiB; null = GPU: from the fraction, CPU: 1
    max_model_len: int | None = None  # prompt + completion tokens per sequence; null = the model's limit
    max_num_seqs: int | None = None  # sequences decoded together; null = vLLM's default
    enforce_eager: bool | None = None  # null = eager on CPU, CUDA graphs on GPU
    enable_prefix_caching: bool = True  # G responses of a prompt share its prefill
    # request: every response is its own request with a seed drawn from the trainer's generator
    # (reproducible, resume-exact, independent of batching); call: one request per prompt with n = its
    # count, the engine's RNG reseeded from the trainer's generator at every call (faster on GPUs at
    # large B; reproducible for an identical sequence of calls).
    seeding: str = "request"
    in_process: bool = True  # VLLM_ENABLE_V1_MULTIPROCESSING=0: engine in the trainer's process

    def validate(self, prefix: str = "rollout.vllm") -> None:
        if self.dtype not in VLLM_DTYPES:
            raise ConfigError(f"{prefix}.dtype must be one of {', '.join(VLLM_DTYPES)} (got {self.dtype!r})")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"{prefix}.gpu_memory_utilization must be in (0, 1] (got {self.gpu_memory_utilization})"
            )
        if self.kv_cache_gb is not None and not self.kv_cache_gb > 0:
            raise ConfigError(f"{prefix}.kv_cache_gb must be > 0 or null (got {self.kv_cache_gb})")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ConfigError(f"{prefix}.max_model_len must be >= 2 or null (got {self.max_model_len})")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise ConfigError(f"{prefix}.max_num_seqs must be >= 1 or null (got {self.max_num_seqs})")
        if self.seeding not in SEEDING_MODES:
            raise ConfigError(
                f"{prefix}.seeding must be one of {', '.join(SEEDING_MODES)} (got {self.seeding!r})"
            )
        if self.seeding == "call" and not self.in_process:
            raise ConfigError(
                f"{prefix}.seeding=call reseeds the engine's RNG in this process: it needs "
                f"{prefix}.in_process=true (or use seeding=request)"
            )
