"""On real runs of the embedded default: a run trained to its horizon H and the same run continued past
H (a larger budget, recording H in ``eval.horizon``) contribute the same crossings and the same failure,
under both crossing rules (docs/analysis.md, "The horizon"). A KL detector set to fire on any drift,
held for 1,088 responses, puts the failure's onset at the first rollout (64 responses) and its
detection after H = 1,024: the run trained to H ends without failing, so the continued run's failure
must not count either, nor censor its crossings at the onset."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.data.load import load_source

TARGETS = "[0.19,0.2,0.21]"  # just above the shipped warm start's 0.182: crossed within the budgets
H = 1024
# any drift is a "blow-up", held for one rollout past H: onset 64, detection 1,088
KL = ["failure.kl_blowup.max_kl=1e-12", "failure.kl_blowup.window_responses=0"]
SUSTAIN = "failure.kl_blowup.sustain_responses=1088"


def _train(out, budget: int, seed: int, *extra: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_scaling.cli.train",
            "rollout.prompts_per_rollout=8",
            f"train.max_responses={budget}",
            f"eval.targets={TARGETS}",
            "eval.points_per_doubling=8",
            "noise.curvature_every_rollouts=0",
            "run.threads=1",
            "run.progress=false",
            f"seed={seed}",
            *KL,
            SUSTAIN,
            *extra,
            f"hydra.run.dir={out}",
        ],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
    )


@pytest.mark.timeout(900)
def test_a_run_trained_to_the_horizon_and_continued_past_it_contribute_the_same(tmp_path):
    _train(tmp_path / "seed0", H, 0)  # trained to H
    _train(tmp_path / "long0", 2 * H, 0, f"eval.horizon={H}")  # the same run continued past H
    records = load_source(str(tmp_path)).runs
    status = {r.run: r.status for r in records}
    assert status["seed0"]["state"] == "completed" and status["long0"]["state"] == "failed"
    failure = status["long0"]["failure"]
    assert failure["onset_responses"] <= H < failure["responses"]  # the case: onset within H, detected after
    cols = [
        f"target:{a:g}{s}" for a in (0.19, 0.2, 0.21) for s in ("", ":lower", ":censored", ":censored_by")
    ]
    cols += ["failure", "failure:lower", "failure:censored", "failure:detection", "failure:onset"]
    for crossing in ("interval", "isotonic"):
        opts = ClockOptions(crossing=crossing)
        alone = build_tables([r for r in records if r.run == "seed0"], opts).runs
        mixed = build_tables(records, opts).runs
        assert mixed["condition"].nunique() == 1 and (mixed["horizon"] == H).all()
        ref = alone.set_index("seed")[cols]
        for run in ("seed0", "long0"):
            got = mixed[mixed["run"] == run].set_index("seed")[cols]
            pd.testing.assert_frame_equal(got, ref, check_dtype=False)
        assert ref["failure:censored"].all() and ref["failure"].item() == H
        assert (~ref[[f"target:{a:g}:censored" for a in (0.19, 0.2)]]).to_numpy().any()  # something crossed
        assert not mixed.loc[mixed["run"] == "long0", "summary_mismatch"].item()
