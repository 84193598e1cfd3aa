"""A Hydra sweeper that launches an explicit list of jobs in one launcher call: ``hydra/sweeper=rlvr_list``.

    rlvr-train -m hydra/sweeper=rlvr_list hydra.sweeper.jobs=round.yaml sweeps=demo slurm=local_cluster

``round.yaml`` (YAML or JSON) is a list of jobs, each a list of overrides::

    - [lr.ref_lr=1e-06, seed=2, rollout.prompts_per_rollout=4]
    - [lr.ref_lr=1e-06, seed=2, rollout.prompts_per_rollout=32]
    - [lr.ref_lr=3e-06, seed=2, rollout.prompts_per_rollout=4]

Hydra's basic sweeper only launches the cartesian product of its axes, so a set of jobs that is not a
product (two conditions with different seeds, sizes that get different seeds) needs several
``rlvr-train -m`` calls: several job arrays on SLURM, several joblib batches locally. This sweeper
hands all of them to the launcher at once (``Launcher.launch`` once: one submitit job array, one
joblib batch), so ``rlvr-study`` launches a round as one command.

Each job is what the basic sweeper makes of ``rlvr-train -m <command line> <job>``: the sweep file's
``hydra.sweeper.params`` first, then the command line, then the job's overrides, one value per key (a
later value for a key replaces an earlier one, so a job's ``seed=2`` replaces a sweep file's
``seed: 0,1``), with the basic sweeper's own spelling of every override
(:meth:`BasicSweeper.split_arguments`). Run directories are named from those overrides
(``hydra.job.override_dirname``), so a job gets the directory the cartesian multirun would give it. A
job whose keys still sweep (``seed=2,3``) expands to its product. Every job is composed before the
launch (a wrong key fails before compute, naming it); ``hydra.*`` overrides belong on the command line,
not in a job, and two jobs with the same overrides (one run directory) are refused.
"""

# No `from __future__ import annotations`: Hydra runs this module before it is in sys.modules, where
# dataclasses would look string annotations up.
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf

log = logging.getLogger(__name__)


@dataclass
class ListSweeperConf:
    _target_: str = "hydra_plugins.rlvr_list_sweeper.ListSweeper"
    # The jobs: a path to a YAML or JSON file holding a list of override lists, or the list itself.
    jobs: Any = None
    # As the basic sweeper's: the axes a sweep file sets (a job's own overrides replace them).
    params: dict[str, str] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlvr_list", node=ListSweeperConf, provider="rlvr-scaling"
)


def read_jobs(jobs: Any) -> list[list[str]]:
    """The override lists of ``hydra.sweeper.jobs`` (a file path or a list); a wrong value raises
    :class:`HydraException` naming ``hydra.sweeper.jobs``."""
    key = "hydra.sweeper.jobs"
    if jobs is None:
        raise HydraException(f"{key}: required (a YAML or JSON file listing each job's overrides)")
    source = "the list"
    if isinstance(jobs, (str, Path)):
        path = Path(jobs)
        if not path.is_file():
            raise HydraException(f"{key}: {path} does not exist")
        try:
            jobs = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise HydraException(f"{key}: {path} is not YAML or JSON ({err})") from err
        source = str(path)
    elif isinstance(jobs, (DictConfig, ListConfig)):
        jobs = OmegaConf.to_container(jobs, resolve=True)
    if not isinstance(jobs, list) or not jobs:
        raise HydraException(f"{key}: {source} must be a non-empty list of jobs, got {jobs!r}")
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, list) or not all(isinstance(o, str) for o in job):
            raise HydraException(
                f"{key}: job {i} of {source} must be a list of override strings, got {job!r}"
            )
        for o in job:
            if o.lstrip("+~").startswith(("hydra.", "hydra/")):
                raise HydraException(
                    f"{key}: job {i} of {source} sets {o!r}; hydra settings go on the command line"
                )
        out.append(list(job))
    return out


def expand_jobs(jobs: list[list[str]], arguments: list[str], params: dict | None = None) -> list[list[str]]:
    """The launcher's job override lists: per job, the basic sweeper's jobs of ``params`` (as
    ``key=value``), ``arguments`` (the command line's task overrides) and the job's overrides, in that
    order (module docstring). Two identical jobs raise :class:`HydraException`."""
    parser = OverridesParser.create()
    shared = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    batch: list[list[str]] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, job in enumerate(jobs):
        for one in BasicSweeper.split_arguments(parser.parse_overrides(shared + job), None)[0]:
            key = tuple(sorted(one))
            if key in seen:
                raise HydraException(
                    f"hydra.sweeper.jobs: jobs {seen[key]} and {i} are the same run ({' '.join(one)})"
                )
            seen[key] = i
            batch.append(one)
    return batch


class ListSweeper(Sweeper):
    """Launches the jobs of ``hydra.sweeper.jobs`` in one ``Launcher.launch`` call (module docstring)."""

    def __init__(self, jobs: Any = None, params: dict | None = None) -> None:
        super().__init__()
        self.jobs = jobs
        self.params = params or {}
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> list[list[JobReturn]]:
        assert self.config is not None and self.launcher is not None
        batch = expand_jobs(read_jobs(self.jobs), arguments, self.params)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        tic = time.perf_counter()
        self.validate_batch_is_legal(batch)  # every job composes, before anything launches
        log.debug(f"Validated configs of {len(batch)} jobs in {time.perf_counter() - tic:0.2f} s")
        results = self.launcher.launch(batch, initial_job_idx=0)
        for r in results:
            _ = r.return_value  # raises if the job failed, as the basic sweeper does
        return [list(results)]
