"""What the real-model GPU scripts share (``gpu_real_model.py`` on one GPU, ``gpu_fsdp.py`` on all of a
machine's): a preset's overrides for a short check, its weights or a random-weight stand-in of the same
shapes, and the rollout rows of the run's metrics."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from rlvr_scaling.stand_in import SHAPES  # noqa: E402

# The presets' shapes (public config.json values) for a random-weight stand-in of the same size.
ARCH = {name: shape for name, shape in SHAPES.items() if name != "tiny"}
# --cpu-smoke checks this script on a CPU with vLLM's CPU build: the tiny shape with the character
# tokenizer's vocabulary, not a measurement.
SMOKE_ARCH = {**SHAPES["tiny"], "vocab_size": 512}


def stand_in_model(preset: str, dtype: str, out: Path, device: str) -> str:
    """Random weights in the preset's architecture, with the character tokenizer; a HF model directory."""
    import torch

    from rlvr_scaling.models import DTYPES, build_tokenizer, save_hf_dir
    from rlvr_scaling.stand_in import model_classes

    tok = build_tokenizer()
    cls_cfg, cls_model = model_classes(preset if device == "cuda" else "tiny")
    config = cls_cfg(
        **(ARCH[preset] if device == "cuda" else SMOKE_ARCH),
        max_position_embeddings=4096,
        rope_theta=1e6,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    default = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[dtype])  # initialise directly in the preset's dtype, on the device
    try:
        with torch.device(device):
            model = cls_model(config)
    finally:
        torch.set_default_dtype(default)
    save_hf_dir(model, tok, out)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return str(out)


def check_overrides(preset: str, prompts: int, group: int, max_new_tokens: int, rollouts: int, work: Path):
    """The rlvr-train overrides of a GPU check: the preset, GSM8K (its files under $RLVR_DATA_DIR, else
    the project's fixture), a few rollouts of P x G responses with K = 4, no evaluation in between."""
    data = Path(os.environ.get("RLVR_DATA_DIR", "data"))
    if (data / "gsm8k/train.parquet").is_file() and (data / "gsm8k/test.parquet").is_file():
        task = ["task=gsm8k", "task.val_size=64"]
    else:
        fixture = REPO / "tests/fixtures/math/gsm8k_tiny.jsonl"
        task = ["task=gsm8k", f"task.path={fixture}", "task.val_path=null", "task.val_size=4"]
    b = prompts * group
    return [
        f"model={preset}",
        *task,
        f"rollout.prompts_per_rollout={prompts}",
        f"rollout.group_size={group}",
        f"rollout.max_new_tokens={max_new_tokens}",
        f"eval.max_new_tokens={max_new_tokens}",
        f"train.max_responses={b * rollouts}",
        f"eval.every_responses={10 * b * rollouts}",
        "optim.steps_per_rollout=4",
        "lr.ref_lr=1e-6",
        f"lr.ref_responses={b}",
        "failure=none",
        "run.progress=false",
        f"run.cache_dir={work / 'cache'}",
    ]


def model_or_stand_in(
    cfg, preset: str, work: Path, device: str, share: Callable = lambda make: make()
) -> bool:
    """Point ``cfg.model`` at the preset's weights when they are on this machine, else at a random-weight
    stand-in built under ``work/model`` (always on a CPU smoke test, with the prompt format ``plain``).
    ``share(make)`` builds the stand-in once and hands its path to every process (data parallel: rank 0
    builds, the path is broadcast). True when the stand-in is used."""
    from rlvr_scaling.models import check_model_path

    try:
        if device == "cpu":
            raise FileNotFoundError("CPU smoke test: always the tiny stand-in")
        check_model_path(cfg.model.path)
        return False
    except Exception:
        cfg.model.path = share(lambda: stand_in_model(preset, cfg.model.dtype, work / "model", device))
        cfg.model.prompt_format = "plain"
        return True


def rollout_rows(run_dir: Path) -> tuple[list[dict], list[dict]]:
    """The run's rollout rows (``metrics.jsonl`` rows with a reward) and the timed ones: all but the first,
    which includes the warm-up (all of them when there is only one)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "train/reward_mean" in r]
    return train_rows, train_rows[1:] or train_rows
