"""slurm/local_cluster.sh's status and clean verbs (install, start, env and stop run in .ci/run).

``clean`` is tested on a scratch directory of its own (no cluster needed, the running one is never
touched); ``status`` on the running cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_utils import CLUSTER_SCRIPT

DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


def _script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="local_cluster.sh clean needs root")
def test_clean_deletes_only_its_scratch_dir(tmp_path: Path) -> None:
    """A stale PID file naming a live stranger (here a sleeping Python) must not get it killed."""
    scratch = tmp_path / "cluster"
    (scratch / "run").mkdir(parents=True)
    (scratch / "state").mkdir()
    (scratch / "state" / "node_state").write_text("x")
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (scratch / "run" / "slurmctld.pid").write_text(str(stranger.pid))
        env = {**os.environ, "RLVR_SLURM_DIR": str(scratch)}
        env.pop("SLURM_CONF", None)
        proc = _script("clean", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"deleted {scratch}" in proc.stdout
        assert not scratch.exists()
        assert stranger.poll() is None, "clean killed a process that is not its daemon"
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm_cluster")
def test_status_lists_every_daemon() -> None:
    proc = _script("status")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for daemon in DAEMONS:
        assert any(line.split()[:2] == [daemon, "running"] for line in proc.stdout.splitlines()), proc.stdout
    assert "debug" in proc.stdout  # sinfo's partition line
