"""The model size N of a run (its parameter count): the numeric axis of a model-size study.

A study that varies the model (``model=embedded``, ``model=embedded_4m``, ``model=embedded_16m``;
docs/study.md, "The model-size study") changes several config keys at once (``model.embedded.hidden_size``,
``num_layers``, ...), none of which is the size. The number a trend needs is N, the parameters the
trainer counted: ``summary.json``'s ``model.parameters`` (docs/design.md §6). A run without it (still
running, or written before the field existed) gets N from its config where the config determines it:
the embedded model, a Llama with tied embeddings over the character tokenizer (:func:`embedded_parameters`,
equal to the trainer's count: ``tests/analysis/test_analysis_model_size.py``); else N is unknown (NaN).

``runs.csv`` carries N as the column ``model.parameters``; :func:`condition_parameters` gives one N per
condition (NaN where the runs of a condition disagree or none is known).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

#: the runs-table column holding N
PARAMETERS_KEY = "model.parameters"
#: config keys a model choice sets (the Hydra group ``model``): N stands for all of them in a trend
MODEL_PREFIX = "model."
#: tokens of the embedded model's character tokenizer (4 special + 96 characters: rlvr_scaling.models)
EMBEDDED_VOCAB = 100


def embedded_parameters(embedded: dict[str, Any], vocab: int = EMBEDDED_VOCAB) -> int:
    """Parameters of the embedded Llama (``model.embedded``): tied input/output embedding ``V d``, per
    layer the attention projections ``4 d^2`` (as many key/value heads as heads), the gated MLP
    ``3 d i`` and two RMSNorm weights ``2 d``, and the final norm ``d``."""
    d, layers, inter = (int(embedded[k]) for k in ("hidden_size", "num_layers", "intermediate_size"))
    return vocab * d + layers * (4 * d * d + 3 * d * inter + 2 * d) + d


def run_parameters(config: dict[str, Any], summary: dict[str, Any] | None) -> float:
    """N of one run: ``summary.json``'s ``model.parameters``, else the embedded model's count from the
    config, else NaN (module docstring)."""
    model = (summary or {}).get("model")
    if isinstance(model, dict) and isinstance(model.get("parameters"), (int, float)):
        value = float(model["parameters"])
        if math.isfinite(value) and value > 0:
            return value
    cfg = config.get("model") if isinstance(config, dict) else None
    if isinstance(cfg, dict) and cfg.get("path") == "embedded" and isinstance(cfg.get("embedded"), dict):
        try:
            return float(embedded_parameters(cfg["embedded"]))
        except (KeyError, TypeError, ValueError):
            return math.nan
    return math.nan


def condition_parameters(runs: pd.DataFrame) -> dict[str, float]:
    """Condition -> N (NaN where its runs disagree or none is known)."""
    if PARAMETERS_KEY not in runs.columns or runs.empty:
        return {}
    out = {}
    for condition, values in runs.groupby("condition", sort=True)[PARAMETERS_KEY]:
        known = values.dropna().unique()
        out[condition] = float(known[0]) if len(known) == 1 else math.nan
    return out
