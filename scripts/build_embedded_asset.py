#!/usr/bin/env python
"""Build the warm starts of the embedded model that ship in the package (rlvr_scaling/assets/).

    python scripts/build_embedded_asset.py                   # rebuild the shipped asset (AVX2 kernels, 1 thread)
    python scripts/build_embedded_asset.py --asset compose   # the one of task=compose
    python scripts/build_embedded_asset.py --out /tmp/a      # build elsewhere, e.g. to compare bytes
    python scripts/build_embedded_asset.py --capability native --threads 2 --out /tmp/b

Two assets ship: ``chain_sum`` (the default composition, ``model=embedded task=chain_sum``, in
``assets/embedded_chain_sum``) and ``compose`` (``task=compose``, which selects
``model=embedded_compose``, in ``assets/embedded_compose``). The config comes from the same place as
``rlvr-train``'s: Hydra composes ``conf/`` (the root ``config.yaml`` with its default groups, plus the
asset's own overrides) against the dataclass schemas, and the warm start is trained with exactly the code a run uses when no shipped asset matches
(:func:`rlvr_scaling.warm_start.build_warm_start`). So changing the recipe means changing ``conf/`` or
the dataclass defaults, then re-running this script (a test fails until the shipped blob equals the
default composition again). Extra arguments are Hydra overrides, for experiments only: an asset
built with overrides is used only by runs that ask for the same overrides.

Kernels: ``ATEN_CPU_CAPABILITY=avx2`` (set here before torch is imported, unless ``--capability
native``) selects torch's AVX2 kernels, which every x86-64 CPU since 2013 runs, so the asset can be
rebuilt bit for bit on any such machine with the same torch version and thread count. The torch
version, capability and threads used are recorded in ``warm_start.json`` beside the loss curve and
the config blob.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# asset -> (the Hydra overrides that compose its config, its directory under rlvr_scaling/assets/)
ASSETS = {"chain_sum": ([], "embedded_chain_sum"), "compose": (["task=compose"], "embedded_compose")}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asset", choices=sorted(ASSETS), default="chain_sum", help="which shipped warm start")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: the shipped asset)")
    ap.add_argument(
        "--capability",
        default="avx2",
        help="ATEN_CPU_CAPABILITY for the build (avx2, the default; default/avx512/...; native = torch's choice)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument(
        "overrides", nargs="*", help="Hydra overrides (experiments only; none for the shipped asset)"
    )
    return ap.parse_args(argv)


def compose_config(overrides: list[str]):
    """The typed config ``rlvr-train <overrides>`` would run (Hydra's compose API over conf/)."""
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.config import validate

    typed = compose(overrides)
    validate(typed)
    return typed


def main(argv=None) -> int:
    args = parse_args(argv)
    # before torch is imported: the kernel choice is made once per process
    if args.capability == "native":
        os.environ.pop("ATEN_CPU_CAPABILITY", None)
    else:
        os.environ["ATEN_CPU_CAPABILITY"] = args.capability
    sys.path.insert(0, str(REPO_ROOT))

    import torch
    import transformers

    from rlvr_scaling.tasks import build_task
    from rlvr_scaling.warm_start import SHIPPED_ROOT, build_warm_start, greedy_accuracy

    asset_overrides, asset_dir = ASSETS[args.asset]
    overrides = [*asset_overrides, *args.overrides]
    cfg = compose_config(overrides)
    if cfg.model.path != "embedded":
        sys.exit(f"build_embedded_asset: model.path is {cfg.model.path!r}, not the embedded model")
    torch.set_num_threads(args.threads)
    capability = torch.backends.cpu.get_cpu_capability()
    out = (args.out or SHIPPED_ROOT / asset_dir).resolve()
    print(
        f"[asset] torch {torch.__version__}, CPU capability {capability}, {args.threads} thread(s) -> {out}"
    )
    built_with = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpu_capability": capability,
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
        "threads": args.threads,
        "overrides": overrides,
    }
    task = build_task(cfg.task)
    try:
        report = build_warm_start(cfg.model, task, cfg.task, out, extra={"built_with": built_with})
        # the starting point a run sees: its step-0 greedy validation accuracy (tests check it on any CPU)
        max_new = cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens
        report["greedy_accuracy"] = greedy_accuracy(out, task, max_new, cfg.model.prompt_format)
        report["greedy_accuracy_max_new_tokens"] = max_new
        for name, examples in task.extra_validation().items():  # task=compose: depth 3
            report[f"greedy_accuracy_{name}"] = greedy_accuracy(
                out, task, max_new, cfg.model.prompt_format, examples=examples
            )
        (out / "warm_start.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    finally:
        task.close()
    (out / "COMPLETE").unlink(missing_ok=True)  # a cache marker; the shipped asset is not a cache entry
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; installed package data must be readable by all
    size = sum(p.stat().st_size for p in out.iterdir())
    print(
        f"[asset] final SFT loss {report['final_loss']:.4f}, greedy validation accuracy "
        f"{report['greedy_accuracy']:.4f}; {size / 2**20:.2f} MiB in {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
