"""The one way to compose a config outside ``rlvr-train``: Hydra's compose API over ``conf/``, with the
project's resolvers and schemas registered, so a benchmark, an experiment, a script or a test gets the
config that ``rlvr-train <overrides>`` would run.

    from rlvr_scaling.compose import compose
    cfg = compose(["rollout.prompts_per_rollout=32", "lr=linear"])   # the typed Config the run receives
    job = compose(["sweeps=demo", "seed=3"], hydra=True)             # Hydra's DictConfig, hydra: included

The typed config is the composed tree without its ``hydra:`` node, converted to :class:`Config`
(``OmegaConf.to_object``), exactly as the entry point converts it before it fills in what it reads
from the Hydra runtime (``run.threads`` when null, ``run.name``, the logger's override tags). It is not
validated: call :func:`rlvr_scaling.config.validate` where a bad value must stop the caller.

A public module of the trainer's package, outside ``cli/``: the study runner composes its jobs with it
(``rlvr_study`` never imports the command lines); ``rlvr_scaling.cli.compose`` re-exports it for the
command lines, scripts and tests that import it from there. The run directories' names:
:mod:`rlvr_scaling.run_names`.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal, overload

from omegaconf import DictConfig, OmegaConf, open_dict

from rlvr_scaling.run_names import run_dirname
from rlvr_scaling_base import REPO_ROOT

if TYPE_CHECKING:
    from rlvr_scaling.config import Config

CONF_DIR = REPO_ROOT / "conf"
VERSION_BASE = "1.3"


def register_resolvers() -> None:
    """The resolvers ``conf/`` uses (``rlvr.or``, ``rlvr.dirname``); registering twice is a no-op."""
    if not OmegaConf.has_resolver("rlvr.or"):
        OmegaConf.register_new_resolver("rlvr.or", lambda value, default: value if value else default)
    if not OmegaConf.has_resolver("rlvr.dirname"):
        OmegaConf.register_new_resolver("rlvr.dirname", run_dirname)


@overload
def compose(overrides: Sequence[str] = (), *, hydra: Literal[False] = False) -> Config: ...
@overload
def compose(overrides: Sequence[str] = (), *, hydra: Literal[True]) -> DictConfig: ...
def compose(overrides: Sequence[str] = (), *, hydra: bool = False) -> Config | DictConfig:
    """The config ``rlvr-train <overrides>`` composes (a single run: Hydra's RUN mode; a multirun's job
    is composed the same way from its own override list).

    ``hydra=False``: the typed :class:`Config` (module docstring). ``hydra=True``: Hydra's DictConfig
    with the ``hydra:`` node (launcher, sweeper params, run directory; :func:`to_config` types it).
    A misspelt key, a wrong type or an unknown option raises Hydra's composition error naming it.
    Hydra's global state is set up for the call and cleared after it (the call cannot run inside
    another Hydra initialisation, e.g. in a ``@hydra.main`` function).
    """
    from hydra import compose as hydra_compose

    with initialized():
        cfg = hydra_compose("config", overrides=list(overrides), return_hydra_config=True)
    if hydra:
        return cfg
    with open_dict(cfg):  # what Hydra's compose does without return_hydra_config
        del cfg["hydra"]
    return OmegaConf.to_object(cfg)


@contextlib.contextmanager
def initialized() -> Iterator[None]:
    """Hydra's global state for ``conf/`` (resolvers and schemas registered), cleared on exit: what
    :func:`compose` runs in, for code that asks Hydra something else about ``conf/``."""
    from hydra import initialize_config_dir

    register_resolvers()
    _register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=VERSION_BASE):
        yield


_registered: tuple | None = None


def _register_schemas() -> None:
    """:func:`rlvr_scaling.config.register_configs` (~0.2 s), again only when a schema registry has
    changed since (a task module imported later) or Hydra's ConfigStore no longer holds the root."""
    from hydra.core.config_store import ConfigStore

    from rlvr_scaling.algorithms import allocators, baselines, lr_rules
    from rlvr_scaling.config import register_configs
    from rlvr_scaling.tasks import TASK_PARAMS

    global _registered
    repo = ConfigStore.instance().repo
    registries = (TASK_PARAMS, baselines.PARAMS, lr_rules.PARAMS, allocators.PARAMS)
    state = (id(repo), tuple((name, id(params)) for r in registries for name, params in r.items()))
    if state != _registered or "config_schema.yaml" not in repo:
        register_configs()
        _registered = state


def to_config(cfg: DictConfig) -> Config:
    """The typed :class:`Config` of a composed DictConfig, without its ``hydra:`` node (``cfg`` is left
    as it is)."""
    if "hydra" in cfg:
        cfg = copy.deepcopy(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
    return OmegaConf.to_object(cfg)
