"""Where a run came from: git revision, package versions, host (written into status.json)."""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

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
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    versions["python"] = platform.python_version()
    try:
        git = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        git = None
    return {"git": git, "versions": versions, "host": socket.gethostname()}
