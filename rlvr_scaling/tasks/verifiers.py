"""Verifier functions that run inside :class:`~rlvr_scaling.tasks.pool.VerifierPool` workers.

They may hang (sympy) and are therefore only ever called in a worker process, whose main thread owns
``SIGALRM``: math-verify's own signal-based timeouts are switched off here (``parsing_timeout=None``,
``timeout_seconds=None``) and the pool's per-item limit applies instead. Heavy imports happen in the
initializers, once per worker.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from .answers import as_math

# ---------------------------------------------------------------------- math-verify


def init_math_verify() -> None:
    # math-verify warns once that its timeouts are off (the pool's limit replaces them) and on every
    # unparseable string; neither is news here.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    math_verify_reward(("1", "1"))  # import sympy / latex2sympy and warm the caches


@functools.lru_cache(maxsize=8192)
def _parse_gold(gold: str) -> list:
    from math_verify import parse

    return parse(as_math(gold), parsing_timeout=None)


@functools.lru_cache(maxsize=8192)  # the responses of one group often share their answer
def _parse_answer(answer: str) -> list:
    from math_verify import parse

    return parse(as_math(answer), parsing_timeout=None)


def math_verify_reward(payload: tuple[str, str]) -> float | None:
    """``(gold, answer)`` -> 1.0 if math-verify finds them equivalent, 0.0 if not, ``None`` if the gold
    itself does not parse. ``verify(parse(gold), parse(answer))``, gold first (it is not symmetric)."""
    from math_verify import verify

    gold_text, answer_text = payload
    gold = _parse_gold(gold_text)
    if not gold:
        return None
    answer = _parse_answer(answer_text)
    if not answer:
        return 0.0
    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0


# ---------------------------------------------------------------------- reasoning-gym

_RG_DATASET: Any = None


def init_reasoning_gym(dataset: str, kwargs: dict[str, Any]) -> None:
    global _RG_DATASET
    import reasoning_gym

    _RG_DATASET = reasoning_gym.create_dataset(dataset, **kwargs)


def reasoning_gym_reward(payload: tuple[str, dict]) -> float | None:
    """``(answer, entry)`` -> the dataset's own ``score_answer`` (may give partial credit)."""
    answer, entry = payload
    return float(_RG_DATASET.score_answer(answer, entry))
