"""Words and symbols for config keys in figures and tables (one table, used everywhere).

| config key | symbol | words |
|---|---|---|
| ``B`` (derived P·G) | B | rollout size (responses per rollout) |
| ``rollout.prompts_per_rollout`` | P | prompts per rollout |
| ``rollout.group_size`` | G | responses per prompt |
| ``optim.steps_per_rollout`` | K | optimizer steps per rollout |
| ``optim.epochs`` | epochs | passes over a rollout |
| ``lr.ref_lr`` | η_ref | reference learning rate |
| ``lr.ref_responses`` | B_ref | reference rollout size |
| ``lr.power`` | p | learning-rate power (η ∝ B^p) |
| ``lr.rule`` | LR rule | learning-rate rule |
| ``loss.clip`` | ε | PPO ratio clip |
| ``loss.kl_coef`` | β | KL coefficient |
| ``loss.aggregation`` | loss aggregation | loss aggregation |
| ``loss.name`` | loss | loss |
| ``baseline.name`` | baseline | baseline |
| ``baseline.scale`` | advantage scale | advantage scale |
| ``allocator.name`` | allocator | rollout allocator |
| ``train.max_responses`` | budget | response budget |
| ``target`` | a | target accuracy |

Keys not in the table appear under their own dotted name.
"""

from __future__ import annotations

import math

#: key -> (plain-text symbol, matplotlib mathtext symbol, words)
SYMBOLS: dict[str, tuple[str, str, str]] = {
    "B": ("B", "$B$", "rollout size (responses per rollout)"),
    "rollout.prompts_per_rollout": ("P", "$P$", "prompts per rollout"),
    "rollout.group_size": ("G", "$G$", "responses per prompt"),
    "optim.steps_per_rollout": ("K", "$K$", "optimizer steps per rollout"),
    "optim.epochs": ("epochs", "epochs", "passes over a rollout"),
    "lr.ref_lr": ("η_ref", r"$\eta_{\rm ref}$", "reference learning rate"),
    "lr.ref_responses": ("B_ref", r"$B_{\rm ref}$", "reference rollout size"),
    "lr.power": ("p", "$p$", "learning-rate power"),
    "lr.rule": ("LR rule", "LR rule", "learning-rate rule"),
    "loss.clip": ("ε", r"$\epsilon$", "PPO ratio clip"),
    "loss.kl_coef": ("β", r"$\beta$", "KL coefficient"),
    "loss.aggregation": ("loss aggregation", "loss aggregation", "loss aggregation"),
    "loss.name": ("loss", "loss", "loss"),
    "baseline.name": ("baseline", "baseline", "baseline"),
    "baseline.scale": ("advantage scale", "advantage scale", "advantage scale"),
    "allocator.name": ("allocator", "allocator", "rollout allocator"),
    "train.max_responses": ("budget", "budget", "response budget"),
    "target": ("a", "$a$", "target accuracy"),
}


def symbol(key: str, math_text: bool = False) -> str:
    """The symbol of a config key (plain text, or mathtext for matplotlib); the key when unknown."""
    entry = SYMBOLS.get(key)
    return key if entry is None else entry[1 if math_text else 0]


def words(key: str) -> str:
    entry = SYMBOLS.get(key)
    return key if entry is None else entry[2]


def value_text(value, math_text: bool = False) -> str:
    """A config value for a title or table: ``1e-06`` (or ``10^{-6}`` in mathtext), ``none`` for null."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    if isinstance(value, float) and math_text and value != 0 and not 0.01 <= abs(value) < 1000:
        exp = int(math.floor(math.log10(abs(value))))
        mant = value / 10**exp
        mant_text = "" if abs(mant - 1) < 1e-9 else f"{mant:g}\\times"
        return f"${mant_text}10^{{{exp}}}$"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe(keys: list[str], values: dict, math_text: bool = False) -> str:
    """``"η_ref = 1e-06, K = 8"`` for the given keys of a condition."""
    return (
        ", ".join(f"{symbol(k, math_text)} = {value_text(values.get(k), math_text)}" for k in keys)
        or "all runs"
    )
