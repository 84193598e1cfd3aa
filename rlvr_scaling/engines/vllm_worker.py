"""Runs inside vLLM's worker process when the engine is multi-process (``rollout.vllm.in_process: false``).

Tensors sent through ``collective_rpc`` to another process arrive as nested lists, so the trainer sends
its state dict as one safetensors blob; the worker turns it back into tensors and reloads them in place
with ``reload_weights(..., is_checkpoint_format=True)``, the path that works on vLLM's CPU backend.
vLLM mixes this class into its worker (``worker_extension_cls``), so ``self`` is the worker.
Importing this module must not import vLLM.
"""

from __future__ import annotations

import torch


def enable_amx() -> bool:
    """Ask Linux for this process's permission to use AMX tiles, where the CPU has them.

    vLLM's CPU attention picks its AMX kernel for bfloat16 on a CPU that reports AMX, but never asks
    for the permission (``arch_prctl(ARCH_REQ_XCOMP_PERM)``, which oneDNN requests only when it uses
    AMX itself): without it the first tile instruction kills the process with SIGILL. Asking twice is
    harmless; a CPU without AMX returns False.
    """
    init = getattr(torch.cpu, "_init_amx", None)
    return bool(init is not None and torch.cpu._is_amx_tile_supported() and init())


# vLLM imports this module in its worker process to mix in the extension below: the worker's
# attention kernels run there, so the permission is asked for there too.
enable_amx()


def serialize_state_dict(state: dict[str, torch.Tensor], dtype: torch.dtype) -> bytes:
    from safetensors.torch import save

    # Tied weights share storage, which safetensors refuses: give every tensor its own contiguous copy.
    return save({name: t.detach().to("cpu", dtype).contiguous().clone() for name, t in state.items()})


class WeightSyncExtension:
    def rlvr_reload_weights(self, payload: bytes) -> int:
        from safetensors.torch import load

        tensors = load(payload)
        device = next(self.model_runner.get_model().parameters()).device
        self.reload_weights(
            weights_iterator=((name, t.to(device)) for name, t in tensors.items()),
            is_checkpoint_format=True,
        )
        return len(tensors)
