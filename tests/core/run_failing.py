"""Runs of the embedded default that fail through a chosen detector within a few dozen rollouts, and
their child process (a real run that can be killed with SIGKILL between two checkpoints):

    python tests/core/run_failing.py RUN_DIR CACHE_DIR DETECTOR [KILL_AT]

Unclipped at a high learning rate with B = 32 (for length_blowup also temperature 1.5), greedy
evaluation at step 0 only, one detector on with short windows (so that it fires early). With KILL_AT the process sends itself SIGKILL as soon as the
training row of rollout KILL_AT + 1 is written: the checkpoint of rollout KILL_AT exists and a row
after it (which the resumed run must discard), as after a hard kill between two checkpoints.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# detector -> its overrides: each fires on the embedded default with several rollouts between its
# onset and its decision (onset / decision rollout on one CPU: 11/18, 7/15, 17/24, 18/25)
CASES = {
    "reward_collapse": [
        "lr.ref_lr=3e-4",
        *[f"failure.reward_collapse.{p}" for p in ("window_responses=128", "sustain_responses=256", "z=1.0")],
    ],
    "kl_blowup": [
        "lr.ref_lr=3e-4",
        "failure.kl_blowup.window_responses=128",
        "failure.kl_blowup.sustain_responses=256",
    ],
    "entropy_collapse": [
        "lr.ref_lr=1e-3",
        # with AVX2 kernels the entropy settles near 0.3 x its start (AVX-512: 0.014 x): a threshold of
        # 0.4 x start fires on both (onset / decision rollout 18/25 and 15/22)
        "failure.entropy_collapse.min_frac=0.4",
        "failure.entropy_collapse.window_responses=128",
        "failure.entropy_collapse.sustain_responses=256",
    ],
    "length_blowup": [
        # 6e-4 since the sampling numbers are keyed by data position (at 3e-4 the lengths no longer
        # rise): onset / decision rollout 13/20 natively and with AVX2 kernels
        "lr.ref_lr=6e-4",
        "rollout.temperature=1.5",
        "failure.length_blowup.min_rise=0.2",
        "failure.length_blowup.window_responses=128",
        "failure.length_blowup.sustain_responses=256",
    ],
}


def failing_config(cache_dir, detector: str):
    """The config ``rlvr-train`` composes from these overrides (the real Hydra composition)."""
    from rlvr_scaling.algorithms.failure import FailureConfig
    from rlvr_scaling.cli.compose import compose

    overrides = [
        "loss=unclipped",
        "rollout.prompts_per_rollout=4",  # B = 32
        "eval.samples=0",
        "eval.schedule=linear",
        "eval.every_responses=1048576",  # step 0 only
        "eval.targets=[]",
        *[f"failure.{name}=null" for name in FailureConfig.__dataclass_fields__ if name != detector],
        *CASES[detector],
        "train.max_responses=4096",
        # fixed instrument cadences: with the budgeted default, which rollouts carry noise/ and curv/
        # rows depends on wall time, and the killed run is compared with an uninterrupted one row by row
        "noise.at_theta_old_every_rollouts=8",
        "noise.curvature_every_rollouts=128",
        "run.checkpoint_every_rollouts=2",
        "run.progress=false",
        "run.threads=1",
        f"run.cache_dir={cache_dir}",
    ]
    return compose(overrides)


def _kill_after_rollout(kill_at: int) -> None:
    from rlvr_scaling import trainer

    log_row = trainer.Trainer._log_row

    def log_then_kill(self, row):
        log_row(self, row)
        if self.clocks.rollout > kill_at and "train/reward_mean" in row:
            os.kill(os.getpid(), signal.SIGKILL)

    trainer.Trainer._log_row = log_then_kill


if __name__ == "__main__":
    from rlvr_scaling.run import train

    run_dir, cache_dir, detector = sys.argv[1:4]
    if len(sys.argv) > 4:
        _kill_after_rollout(int(sys.argv[4]))
    print(train(failing_config(cache_dir, detector), Path(run_dir), log=lambda *_: None))
