"""``rlvr-train``: the Hydra entry point (the only code that sees Hydra).

    rlvr-train                                      # one run on the embedded default (CPU, no downloads)
    rlvr-train rollout.prompts_per_rollout=32 lr=linear seed=1
    rlvr-train -m sweeps=demo                       # a grid, launched locally
    rlvr-train -m sweeps=two_clock slurm=gpu        # the same kind of grid on SLURM (submitit)
    rlvr-train --cfg job                            # print the composed config

The run directory is Hydra's ``hydra.run.dir`` (single runs) or sweep subdir (multiruns); re-running
the same command resumes the run in it, or skips it when it has ended. The config directory and its
resolvers live in :mod:`rlvr_scaling.compose`, whose ``compose`` gives code outside this entry point the
same config; the run directories' names in :mod:`rlvr_scaling.run_names`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from rlvr_scaling.compose import CONF_DIR, VERSION_BASE, register_resolvers
from rlvr_scaling.config import register_configs
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.rundir import RunDirLocked


@hydra.main(version_base=VERSION_BASE, config_path=str(CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> str:
    from hydra.core.hydra_config import HydraConfig

    from rlvr_scaling.run import train

    try:
        typed = OmegaConf.to_object(cfg)
        hc = HydraConfig.get()
        run_dir = Path(hc.runtime.output_dir)
        if typed.run.threads is None:
            typed.run.threads = default_threads(hc)
        if typed.run.name is None:
            typed.run.name = hc.job.override_dirname or "default"
        typed.logger.tags = list(typed.logger.tags) + [o for o in hc.overrides.task if len(o) <= 64]
        return train(typed, run_dir)
    except ConfigError as err:
        # A wrong config: one clear line and exit code 2, before any compute.
        _fail(f"config error: {err}", 2, err)
    except RunDirLocked as err:
        # Another live process owns the run directory (run.lock names it): one line, exit code 3.
        _fail(str(err), 3, err)


def _fail(message: str, code: int, err: Exception) -> None:
    """One line on stderr; then exit with ``code`` (a single run), or, in a multirun, raise, so that the
    launcher reports this job as failed with the message (a job of a SLURM array that exited instead
    would only say it produced no result)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    print(f"rlvr-train: {message}", file=sys.stderr)
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        raise err
    sys.exit(code)


def default_threads(hc) -> int | None:
    """Torch threads for this job when run.threads is null: the CPUs SLURM gave the task, or the
    machine's cores shared among the jobs a local parallel launcher runs at once (parallel torch
    processes that each use every core slow each other down several-fold)."""
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        return max(1, int(os.environ["SLURM_CPUS_PER_TASK"]))
    n_jobs = OmegaConf.select(hc, "launcher.n_jobs", default=None)
    if str(hc.mode) == "RunMode.MULTIRUN" and isinstance(n_jobs, int) and n_jobs > 1:
        return max(1, (os.cpu_count() or 1) // n_jobs)
    return None


def main() -> None:
    if not CONF_DIR.is_dir():
        sys.exit(
            f"rlvr-train: config directory {CONF_DIR} not found (install the project editable from a clone)"
        )
    register_resolvers()
    register_configs()
    _hydra_main()


if __name__ == "__main__":
    main()
