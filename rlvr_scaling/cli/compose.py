"""The config composition of the command lines: :mod:`rlvr_scaling.compose` (``compose``, ``to_config``,
``initialized``, the resolvers) and the run directories' names (:mod:`rlvr_scaling.run_names`),
re-exported here for the entry points, scripts, benchmarks and tests that import them from
``rlvr_scaling.cli.compose``. Code outside the command lines (the study runner) imports the two public
modules directly.
"""

from __future__ import annotations

from rlvr_scaling.compose import (
    CONF_DIR,
    REPO_ROOT,
    VERSION_BASE,
    compose,
    initialized,
    register_resolvers,
    to_config,
)
from rlvr_scaling.run_names import MAX_DIRNAME_BYTES, override_value, run_dirname

__all__ = [
    "CONF_DIR",
    "MAX_DIRNAME_BYTES",
    "REPO_ROOT",
    "VERSION_BASE",
    "compose",
    "initialized",
    "override_value",
    "register_resolvers",
    "run_dirname",
    "to_config",
]
