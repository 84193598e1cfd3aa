"""Shared fixtures: a tiny but real configuration (embedded Llama, reasoning-gym task) for CPU tests."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_SILENT", "true")
torch.set_num_threads(1)

# Under pytest-xdist (`make test` runs two workers, --dist loadgroup), the tests of one folder that share
# an expensive session resource stay on one worker: the local SLURM cluster's slots, the converted
# SmolLM2 folder, vLLM's engine.
_ONE_WORKER = ("slurm", "real_model", "vllm")


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.parts
        for folder in _ONE_WORKER:
            if "tests" in parts and folder in parts[parts.index("tests") :]:
                item.add_marker(pytest.mark.xdist_group(folder))


@pytest.fixture(scope="session")
def sweep_jobs():
    """``rlvr-grid``'s job list of a shipped sweep (``list_jobs(["sweeps=NAME"])``), listed once per test
    session: the config and grid-listing tests only read it."""
    from rlvr_scaling.cli.grid import list_jobs

    listed: dict[str, list] = {}

    def jobs(sweep: str) -> list:
        if sweep not in listed:
            listed[sweep] = list_jobs([f"sweeps={sweep}"])
        return listed[sweep]

    return jobs


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rlvr_cache")


def tiny_config(cache_dir, **overrides):
    """A run small enough for a unit test: ~30k-parameter model, 20-step warm start, B = 16."""
    from rlvr_scaling.algorithms.allocators import UniformParams
    from rlvr_scaling.algorithms.baselines import GRPOParams
    from rlvr_scaling.algorithms.lr_rules import PowerLRParams
    from rlvr_scaling.config import Config
    from rlvr_scaling.tasks import ReasoningGymTaskParams

    cfg = Config(
        task=ReasoningGymTaskParams(
            dataset_config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
            train_size=500,
            val_size=16,
        ),
        lr=PowerLRParams(ref_lr=1e-3, ref_responses=16),
        baseline=GRPOParams(),
        allocator=UniformParams(),
    )
    cfg.model.embedded.hidden_size = 32
    cfg.model.embedded.num_layers = 2
    cfg.model.embedded.num_heads = 2
    cfg.model.embedded.intermediate_size = 64
    cfg.model.warm_start.steps = 30
    cfg.model.warm_start.examples_per_step = 32
    cfg.rollout.prompts_per_rollout = 4
    cfg.rollout.group_size = 4
    cfg.rollout.max_new_tokens = 4
    cfg.optim.steps_per_rollout = 2
    cfg.eval.schedule = "linear"  # every 32 responses, greedy: what these unit tests were written for
    cfg.eval.every_responses = 32
    cfg.eval.samples = 0
    cfg.eval.targets = [0.05, 0.9]
    cfg.train.max_responses = 64
    # fixed instrument cadences (a budgeted one depends on wall time): rows comparable between runs
    cfg.noise.at_theta_old_every_rollouts = 8
    cfg.noise.curvature_every_rollouts = 128
    cfg.run.cache_dir = str(cache_dir)
    cfg.run.checkpoint_every_rollouts = 2
    cfg.run.progress = False
    for key, value in overrides.items():
        obj = cfg
        *path, last = key.split(".")
        for part in path:
            obj = getattr(obj, part)
        setattr(obj, last, value)
    return cfg


def tiny_cli(cache_dir, prompts: int | None = 4) -> list[str]:
    """``rlvr-train`` overrides for the tiny model and task, for tests that launch real processes;
    ``prompts=None`` leaves rollout.prompts_per_rollout to a sweep file."""
    return [
        "model=tiny",
        *([f"rollout.prompts_per_rollout={prompts}"] if prompts else []),
        "rollout.group_size=4",
        "optim.steps_per_rollout=2",
        "rollout.max_new_tokens=4",
        "task.train_size=500",
        "task.val_size=16",
        "eval.schedule=linear",
        "eval.samples=0",
        "eval.every_responses=64",
        "eval.targets=[0.05,0.9]",
        "lr.ref_lr=1e-3",
        "lr.ref_responses=16",
        "failure=none",
        "run.threads=1",
        "run.progress=false",
        f"run.cache_dir={cache_dir}",
    ]


def build_warm_cache(overrides: list[str], out, env: dict[str, str]) -> None:
    """Run ``rlvr-train`` once for 16 responses with ``overrides`` (the tiny model and its
    ``run.cache_dir``), so that the processes a test launches afterwards only load the warm start."""
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_scaling.cli.train",
            *overrides,
            "train.max_responses=16",
            f"hydra.run.dir={out}",
        ],
        check=True,
        env=env,
        timeout=300,
        capture_output=True,
    )


@pytest.fixture
def varied_rewards(monkeypatch):
    """Score responses by a rule every completion can meet or miss (an even number of characters), so
    that the tiny model's groups have varying rewards (non-zero advantages) whatever its short warm start
    learnt. The model, engine and trainer stay real; only the verifier's rule changes."""
    from rlvr_scaling.tasks.reasoning_gym_task import ReasoningGymTask

    monkeypatch.setattr(
        ReasoningGymTask, "score", lambda self, texts, examples: [float(len(t) % 2 == 0) for t in texts]
    )
