"""Run directories' names (docs/design.md §6): the one rule that turns the overrides a sweep varies into
a directory name, and its decoder. The trainer's command line names each run with :func:`run_dirname`
(the ``rlvr.dirname`` resolver of ``conf/``, :mod:`rlvr_scaling.compose`); the study runner reads a run's
overrides back from its name with :func:`override_value`. No dependency beyond the standard library.
"""

from __future__ import annotations

import hashlib
import urllib.parse

# A file name holds at most 255 bytes (NAME_MAX); longer override lists are shortened (run_dirname).
MAX_DIRNAME_BYTES = 200


def run_dirname(override_dirname: str) -> str:
    """A run directory's name from Hydra's ``hydra.job.override_dirname`` (the overrides that vary):
    ``default`` when there are none; a name past :data:`MAX_DIRNAME_BYTES` keeps its start and ends in
    ``,~<12 hex digits of its SHA-1>``, so it stays unique, stable and creatable. A ``/`` in a value
    (``model.path=/data/ckpt``) is written ``%2F`` (and ``%`` as ``%25``), so the name stays one
    directory and two runs never share it."""
    if not override_dirname:
        return "default"
    override_dirname = override_dirname.replace("%", "%25").replace("/", "%2F")
    raw = override_dirname.encode()
    if len(raw) <= MAX_DIRNAME_BYTES:
        return override_dirname
    digest = hashlib.sha1(raw).hexdigest()[:12]
    return raw[: MAX_DIRNAME_BYTES - 14].decode(errors="ignore") + ",~" + digest


def override_value(text: str) -> str:
    """An override's value as written in a run directory's name, back to the value (the inverse of
    :func:`run_dirname`'s escaping: ``%2F`` -> ``/``, ``%25`` -> ``%``)."""
    return urllib.parse.unquote(text)
