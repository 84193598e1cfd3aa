"""Puts the repository root on Hydra's config search path, so that the top-level ``sweeps/`` and
``slurm/`` folders are config groups (``rlvr-train -m sweeps=demo slurm=local_cluster``)."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from rlvr_scaling_base import REPO_ROOT


class RLVRScalingSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="rlvr-scaling", path=f"file://{REPO_ROOT}")
