"""Generation engines behind one interface (:class:`~rlvr_scaling.engines.base.Engine`)."""

from __future__ import annotations

import importlib.util

# Names the config may use; the implementation modules are imported only when a run builds one, so the
# optional vLLM dependency is never imported for an HF run.
ENGINE_NAMES = ("auto", "hf", "vllm")


def resolve_engine(name: str, device: str) -> str:
    """The engine a run uses (``derived.engine``). ``auto`` picks the faster one where vLLM is installed:
    vLLM on a CUDA device; the HF engine on CPUs, where it out-generates vLLM's CPU build on the embedded
    model (benchmarks/speed/engines.py; figures in docs/vllm.md), and wherever vLLM is not installed.

    ``device`` is ``run.device`` (auto | cpu | cuda); only cheap checks here, nothing is imported.
    """
    if name != "auto":
        return name
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and vllm_installed():
        return "vllm"
    return "hf"


def vllm_installed() -> bool:
    """Whether a ``vllm`` package is installed (cheap: nothing imported). A directory named ``vllm``
    without ``__init__.py`` on ``sys.path`` (e.g. ``tests/vllm`` under pytest) is a namespace package,
    not vLLM: it has no origin."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None
