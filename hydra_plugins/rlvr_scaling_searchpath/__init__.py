"""Puts the repository root on Hydra's config search path, so that the top-level ``sweeps/`` and
``slurm/`` folders are config groups (``rlvr-train -m sweeps=demo slurm=local_cluster``)."""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

REPO_ROOT = Path(__file__).resolve().parents[2]


class RLVRScalingSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="rlvr-scaling", path=f"file://{REPO_ROOT}")
