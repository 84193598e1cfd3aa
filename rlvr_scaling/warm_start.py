"""Supervised warm start of the embedded model, cached by everything that determines it.

A randomly initialised model scores ~0 on arithmetic, which gives GRPO no signal. The warm start
trains the embedded model with next-token cross-entropy on ``prompt -> answer<eos>`` pairs from the
run's training pool, for ``warm_start.steps`` steps of ``examples_per_step`` examples (AdamW, linear
decay to 0). A fraction ``deficit_frac`` of targets (drawn afresh per example) is written in a wrong
format (``#57``) that the verifier scores 0: the warm-started model can do the arithmetic but often
answers in the wrong format, a deficit that RL can remove within a short run, much as RL on base models
mostly fixes format and sharpens existing skill.

The result is a standard Hugging Face directory under ``<cache_dir>/embedded/<key>``; concurrent jobs of a
sweep that need the same warm start wait on a file lock instead of training it twice.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from .models import build_embedded_model, build_tokenizer, encode_prompt, save_hf_dir

FORMAT_VERSION = 1


def cache_key(model_cfg, task_params) -> str:
    blob = json.dumps(
        {
            "v": FORMAT_VERSION,
            "embedded": dataclasses.asdict(model_cfg.embedded),
            "warm_start": dataclasses.asdict(model_cfg.warm_start),
            "task": dataclasses.asdict(task_params),
            "torch": torch.__version__.split("+")[0],
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prepare_embedded(model_cfg, task, task_params, cache_dir: Path, log=print) -> Path:
    """Return the directory of the warm-started embedded model, building it if needed."""
    key = cache_key(model_cfg, task_params)
    out = Path(cache_dir).expanduser() / "embedded" / key
    with file_lock(out.parent / f"{key}.lock"):
        if (out / "COMPLETE").is_file():
            return out
        log(f"[warm start] building the embedded model -> {out}")
        start = time.perf_counter()
        tokenizer = build_tokenizer()
        model = build_embedded_model(model_cfg.embedded, tokenizer)
        report = supervised_warm_start(
            model, tokenizer, task, model_cfg.warm_start, log=log, prompt_format=model_cfg.prompt_format
        )
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        save_hf_dir(model, tokenizer, tmp)
        report["seconds"] = round(time.perf_counter() - start, 1)
        (tmp / "warm_start.json").write_text(json.dumps(report, indent=2))
        (tmp / "COMPLETE").write_text("ok\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        log(f"[warm start] done in {report['seconds']} s (final SFT loss {report['final_loss']:.3f})")
        return out


def supervised_warm_start(model, tokenizer, task, cfg, log=print, prompt_format: str = "plain") -> dict:
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / max(cfg.steps, 1)))
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.train()
    pool = task.num_train()
    losses = []
    for step in range(cfg.steps):
        idx = torch.randint(0, pool, (cfg.examples_per_step,), generator=gen).tolist()
        wrong = (torch.rand(cfg.examples_per_step, generator=gen) < cfg.deficit_frac).tolist()
        seqs, starts = [], []
        for i, w in zip(idx, wrong):
            ex = task.train_example(i)
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
    return {"steps": cfg.steps, "final_loss": sum(losses[-20:]) / max(len(losses[-20:]), 1)}
