"""Supervised warm start of the embedded model: shipped for the default config, else built and cached.

A randomly initialised model scores ~0 on arithmetic, which gives GRPO no signal. The warm start
trains the embedded model with next-token cross-entropy on ``prompt -> answer<eos>`` pairs from the
task's warm-start data (``Task.warm_start_example``: the training pool itself, except for tasks whose
warm start must see other items, such as the atomic transforms of ``task=compose``), for
``warm_start.steps`` steps of ``examples_per_step`` examples (AdamW, linear decay to 0, gradient norm
clipped at 1). A fraction ``deficit_frac`` of targets (drawn afresh per
example) is written in a wrong format (``#57``) that the verifier scores 0: the warm-started model can
do the arithmetic but often answers in the wrong format, a deficit that RL can remove within a short
run, much as RL on base models mostly fixes format and sharpens existing skill.

**Same starting point on every CPU.** Floating-point results differ between CPU kernels (torch picks
AVX-512 kernels where the CPU has them, AVX2 ones elsewhere), and 600 steps of SFT amplify rounding
into a visibly different model. So the warm starts of the default config (``model=embedded
task=chain_sum``) and of ``task=compose`` ship inside the package (``rlvr_scaling/assets/``, built by
``scripts/build_embedded_asset.py`` with ``ATEN_CPU_CAPABILITY=avx2``, which every x86-64 CPU can
reproduce). :func:`prepare_embedded` returns such a directory (read-only, nothing copied or trained)
whenever the run's warm-start blob (:func:`warm_start_blob`: embedded architecture, warm-start recipe,
task parameters, format version) equals a shipped one, whatever the torch version. Any other config
is trained on first use and cached under ``<cache_dir>/embedded/<key>``, the key including the torch
version; concurrent jobs of a sweep that need the same warm start wait on a file lock instead of
training it twice. Such a model depends on the CPU it was trained on (see above).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from .models import build_embedded_model, build_tokenizer, encode_prompt, save_hf_dir
from .rundir import file_lock

# Bump when the warm-start recipe's numerics change (data order, loss, optimizer, model init): it
# invalidates the cache and the shipped asset (rebuild it with scripts/build_embedded_asset.py).
FORMAT_VERSION = 2
SHIPPED_ROOT = Path(__file__).resolve().parent / "assets"
SHIPPED_DIR = SHIPPED_ROOT / "embedded_chain_sum"  # model=embedded task=chain_sum (the default)
SHIPPED_COMPOSE_DIR = SHIPPED_ROOT / "embedded_compose"  # task=compose (model=embedded_compose)
# Losses of the first steps, recorded in warm_start.json so a test can check that the recipe still
# produces the shipped model (the first steps agree across CPUs to float rounding; later ones drift).
HEAD_STEPS = 10
CURVE_EVERY = 50
# Seconds per warm-start step of 128 examples on one CPU core: a + b * N for N parameters, fitted to
# 0.21, 0.50 and 2.07 s/step at 1.06M, 3.56M and 16.4M parameters (one core of a 2-core AVX-512
# machine; docs/study.md, "The model-size study"). Only the expected time printed before training;
# other CPUs differ.
STEP_SECONDS_BASE = 0.06
STEP_SECONDS_PER_PARAMETER = 1.25e-7


def expected_minutes(n_params: int, cfg) -> float:
    """The warm start's expected minutes on one CPU core (``STEP_SECONDS_*``), for the log."""
    per_step = (STEP_SECONDS_BASE + STEP_SECONDS_PER_PARAMETER * n_params) * cfg.examples_per_step / 128
    return cfg.steps * per_step / 60


def warm_start_blob(model_cfg, task_params) -> dict[str, Any]:
    """Everything that determines the warm-started weights, as plain JSON values keyed like the run
    config (``model.embedded``, ``model.warm_start``, ``model.prompt_format``, ``task``).

    The model's ``dtype`` is not in it: the warm start always trains in fp32 and the run casts on load.
    """
    blob = {
        "format": FORMAT_VERSION,
        "model": {
            "embedded": dataclasses.asdict(model_cfg.embedded),
            "warm_start": dataclasses.asdict(model_cfg.warm_start),
            "prompt_format": model_cfg.prompt_format,
        },
        "task": dataclasses.asdict(task_params),
    }
    return json.loads(json.dumps(blob, sort_keys=True))


def cache_key(model_cfg, task_params) -> str:
    blob = {**warm_start_blob(model_cfg, task_params), "torch": torch.__version__.split("+")[0]}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def shipped_blob(shipped_dir: Path = SHIPPED_DIR) -> dict[str, Any] | None:
    """The config blob the shipped warm start was trained from (None when no asset is installed)."""
    meta = shipped_dir / "warm_start.json"
    if not (meta.is_file() and (shipped_dir / "model.safetensors").is_file()):
        return None
    return json.loads(meta.read_text())["config"]


def blob_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``key: old -> new`` for every leaf where two blobs differ (dotted keys)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out += blob_diff(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def shipped_dirs() -> list[Path]:
    """The shipped warm starts installed with the package (``assets/embedded_*``), sorted."""
    return sorted(p for p in SHIPPED_ROOT.glob("embedded_*") if p.is_dir())


def prepare_embedded(
    model_cfg, task, task_params, cache_dir: Path, log=print, shipped_dir: Path | None = None
) -> Path:
    """Return the directory of the warm-started embedded model: a shipped one when the config is the
    one it was built from, else the cached one, trained first if needed. Says which in the log.
    ``shipped_dir`` restricts the shipped candidates to that one directory (default: all of
    :func:`shipped_dirs`)."""
    blob = warm_start_blob(model_cfg, task_params)
    candidates = [shipped_dir] if shipped_dir is not None else shipped_dirs()
    installed = {d: b for d in candidates if (b := shipped_blob(d)) is not None}
    for d, shipped in installed.items():
        if shipped == blob:
            log(f"[warm start] shipped warm start {d} (the config it was built from; no training)")
            return d
    why = "no shipped warm start installed"
    if installed:  # name the differences from the nearest shipped config
        diffs = min((blob_diff(b, blob) for b in installed.values()), key=len)
        why = "config differs from the shipped one: "
        why += "; ".join(diffs[:3]) + (f"; ... ({len(diffs)} keys)" if len(diffs) > 3 else "")
    key = cache_key(model_cfg, task_params)
    out = Path(cache_dir).expanduser() / "embedded" / key
    with file_lock(out.parent / f"{key}.lock"):
        if (out / "COMPLETE").is_file():
            log(f"[warm start] cached warm start {out} ({why})")
            return out
        log(f"[warm start] training the warm start ({why}) -> {out}")
        build_warm_start(model_cfg, task, task_params, out, log=log)
        return out


def build_warm_start(model_cfg, task, task_params, out: Path, log=print, extra: dict | None = None) -> dict:
    """Train the warm start and write it as a Hugging Face directory ``out`` (atomically) with
    ``warm_start.json`` (the loss curve summary, the config blob, ``extra``). Returns that report."""
    start = time.perf_counter()
    tokenizer = build_tokenizer()
    model = build_embedded_model(model_cfg.embedded, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(
        f"[warm start] {n_params:,} parameters, {model_cfg.warm_start.steps} steps of "
        f"{model_cfg.warm_start.examples_per_step} examples: expected about "
        f"{expected_minutes(n_params, model_cfg.warm_start):.0f} min on one CPU core (more on a loaded one)"
    )
    report = supervised_warm_start(
        model, tokenizer, task, model_cfg.warm_start, log=log, prompt_format=model_cfg.prompt_format
    )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_hf_dir(model, tokenizer, tmp)
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["config"] = warm_start_blob(model_cfg, task_params)
    report.update(extra or {})
    (tmp / "warm_start.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (tmp / "COMPLETE").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log(f"[warm start] done in {report['seconds']} s (final SFT loss {report['final_loss']:.3f})")
    return report


def supervised_warm_start(
    model, tokenizer, task, cfg, log=print, prompt_format: str = "plain", max_steps: int | None = None
) -> dict:
    """SFT for ``cfg.steps`` steps (or the first ``max_steps`` of them: the same steps, the schedule
    still spans ``cfg.steps``). Returns ``{"steps", "final_loss" (mean of the last 20), "loss_head"
    (the first HEAD_STEPS losses), "loss_curve" (mean loss per CURVE_EVERY steps)}``."""
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / max(cfg.steps, 1)))
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.train()
    pool = task.num_train()
    losses = []
    for step in range(cfg.steps if max_steps is None else min(max_steps, cfg.steps)):
        idx = torch.randint(0, pool, (cfg.examples_per_step,), generator=gen).tolist()
        wrong = (torch.rand(cfg.examples_per_step, generator=gen) < cfg.deficit_frac).tolist()
        seqs, starts = [], []
        for i, w in zip(idx, wrong):
            ex = task.warm_start_example(i)
            target = task.sft_completion(ex)
            if w:
                target = cfg.deficit_prefix + target
            p = encode_prompt(tokenizer, ex.prompt, prompt_format)
            c = tokenizer.encode(target, add_special_tokens=False) + [eos]
            seqs.append(p + c)
            starts.append(len(p))
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        labels = torch.full_like(ids, -100)
        mask = torch.zeros_like(ids)
        for r, (s, st) in enumerate(zip(seqs, starts)):
            ids[r, : len(s)] = torch.tensor(s)
            mask[r, : len(s)] = 1
            labels[r, st : len(s)] = torch.tensor(s[st:])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if (step + 1) % 100 == 0:
            log(f"[warm start] step {step + 1}/{cfg.steps} loss {sum(losses[-100:]) / 100:.3f}")
    model.eval()
    curve = [
        {"steps": min(i + CURVE_EVERY, len(losses)), "loss": sum(chunk) / len(chunk)}
        for i in range(0, len(losses), CURVE_EVERY)
        if (chunk := losses[i : i + CURVE_EVERY])
    ]
    return {
        "steps": len(losses),
        "final_loss": sum(losses[-20:]) / max(len(losses[-20:]), 1),
        "loss_head": losses[:HEAD_STEPS],
        "loss_curve": curve,
    }


def greedy_accuracy(
    model_dir: Path | str, task, max_new_tokens: int, prompt_format: str = "plain", examples=None
) -> float:
    """Greedy pass@1 of the model in ``model_dir`` on ``task``'s validation set (or on ``examples``):
    the trainer's step-0 ``eval/accuracy`` with ``eval.samples=0`` on the HF engine (fp32, CPU),
    recomputed outside a run."""
    from .engines.base import SampleKeys, SamplingParams
    from .engines.hf import ENGINES
    from .models import load_hf

    device = torch.device("cpu")
    model, tokenizer = load_hf(str(model_dir), "float32", device)
    model.eval()
    engine = ENGINES.get("hf")(model, tokenizer, device, None, prompt_format)
    val = task.validation() if examples is None else list(examples)
    gen = engine.generate(
        [e.prompt for e in val],
        [1] * len(val),
        SamplingParams(max_new_tokens, greedy=True),
        SampleKeys(0, tuple(range(len(val)))),
    )
    rewards = task.score(gen.texts, [val[i] for i in gen.prompt_index.tolist()])
    return sum(x is not None and x >= 1.0 - 1e-9 for x in rewards) / max(len(rewards), 1)
