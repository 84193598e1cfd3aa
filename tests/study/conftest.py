"""The synthetic pilot the study tests share (``analysis.synthetic``): run directories, no trainer."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synthetic import SyntheticSpec, write_sweep

G = 8
SIZES_B = (32, 64, 128, 256)
BUDGET = 30000


@pytest.fixture(scope="session")
def two_rate_pilot(tmp_path_factory) -> Path:
    """The folder of a pilot round of two conditions, 2 seeds at B = 32 … 256 (G = 8) each: α 0.3 at
    ``lr.ref_lr=1e-6`` and 0.2 at 3e-6, target 0.3, run budget :data:`BUDGET`. Read only: a test that
    writes copies it."""
    folder = tmp_path_factory.mktemp("pilot") / "runs" / "s"
    specs = [
        SyntheticSpec(
            sizes=SIZES_B,
            seeds=2,
            alpha=a,
            sigma=0.25,
            gamma=None,
            targets=(0.3,),
            budget=BUDGET,
            group_size=G,
            overrides=(("lr.ref_lr", lr),),
            seed=k,
            b_noise=None,
        )
        for k, (a, lr) in enumerate([(0.3, 1e-6), (0.2, 3e-6)])
    ]
    write_sweep(folder, specs)
    return folder
