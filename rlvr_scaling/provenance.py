"""Where a run came from: git revision, package versions, host (written into status.json)."""

from __future__ import annotations

import functools
import socket

from rlvr_scaling_base import git_revision, package_versions

PACKAGES = (
    "rlvr-scaling",
    "torch",
    "transformers",
    "hydra-core",
    "wandb",
    "reasoning-gym",
    "math-verify",
    "vllm",
)


@functools.cache
def provenance() -> dict:
    return {"git": git_revision(), "versions": package_versions(PACKAGES), "host": socket.gethostname()}
