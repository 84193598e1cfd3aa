"""Fixtures of the vLLM engine tests (see vllm_utils for when they run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_utils import VLLM_ERROR, VLLM_TINY


@pytest.fixture(scope="session")
def tiny_model_dir(cache_dir) -> str:
    """A warm-started tiny embedded model directory that vLLM's CPU backend can run."""
    if VLLM_ERROR is not None:
        pytest.skip(VLLM_ERROR)
    from rlvr_scaling.tasks import build_task
    from rlvr_scaling.warm_start import prepare_embedded
    from tests.conftest import tiny_config

    cfg = tiny_config(cache_dir, **VLLM_TINY)
    task = build_task(cfg.task)
    try:
        return str(prepare_embedded(cfg.model, task, cfg.task, Path(cache_dir), log=lambda *_: None))
    finally:
        task.close()
