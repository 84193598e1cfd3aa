"""Fixtures for the SLURM tests: skip (with the reason) unless the local cluster is up."""

from __future__ import annotations

import pytest
from slurm_utils import cluster_unavailable_reason


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The local cluster of slurm/local_cluster.sh, up and reachable through $SLURM_CONF."""
    reason = cluster_unavailable_reason()
    if reason is not None:
        pytest.skip(f"local SLURM cluster unavailable: {reason}")
