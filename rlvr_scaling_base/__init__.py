"""The ground floor the trainer (``rlvr_scaling``) and the analysis (``analysis``) both stand on.

Facts about the checkout and the machine that both packages need, written once: the repository root
(where ``conf/``, ``sweeps/`` and ``slurm/`` live), the git revision and package versions recorded as
provenance (``status.json``, ``report.html``), and whether wandb credentials exist (online or offline
logging). Standard library only; it imports neither package, so neither package imports the other
through it (docs/design.md §5).
"""

from __future__ import annotations

import netrc
import os
import platform
import subprocess
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

#: the repository root: the folder holding the packages, ``conf/``, ``sweeps/`` and ``slurm/``
REPO_ROOT = Path(__file__).resolve().parents[1]


def git_revision() -> str | None:
    """The commit checked out where the packages live (``git rev-parse HEAD``), or None outside git."""
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return revision or None


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """The installed version of each named distribution (absent ones left out), then ``python``."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    versions["python"] = platform.python_version()
    return versions


def wandb_credentials() -> bool:
    """Whether wandb can log online: ``WANDB_API_KEY`` is set, or ``~/.netrc`` has an entry for the
    host of ``WANDB_BASE_URL`` (api.wandb.ai by default)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc(os.path.expanduser("~/.netrc"))
    except (OSError, netrc.NetrcParseError):
        return False
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    return auth.authenticators(host) is not None
