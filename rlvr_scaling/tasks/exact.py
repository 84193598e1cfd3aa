"""The strict numeric verifier: the whole completion must be the gold number, nothing else.

Rule. ``completion.strip()`` must match ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` (ASCII digits only) and equal
the gold:

- integer gold: the completion must be an integer literal with the same value (``57.0`` scores 0);
- decimal gold: any literal of the grammar, |answer - gold| <= 1e-9 * max(1, |gold|), compared exactly
  as fractions (no float rounding).

Everything else scores 0.0: a leading ``=``/``#``/``+``, leading zeros (``057``), thousands separators,
exponents, trailing text or a second line, non-ASCII digits (``５７``). Surrounding whitespace of any
kind is ignored (``57 `` scores 1). ``-0`` equals 0. The strictness is deliberate: the warm start writes
some targets in a wrong format (``#57``), and RL must be able to fix the format for reward.

Pure Python, no ``eval``, length-capped before parsing: cannot hang, never raises.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_NUMBER_CHARS = 256  # longer stripped completions score 0 without parsing
DECIMAL_TOLERANCE = Fraction(1, 10**9)

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_LOOSE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:/[0-9]+)?")  # a gold number chat_answer_reward compares


def parse_strict_number(text: str) -> int | Fraction | None:
    """``int`` for an integer literal, ``Fraction`` for a decimal literal, ``None`` otherwise."""
    if not isinstance(text, str) or len(text) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(text):
        return None
    if "." in text:
        return Fraction(text)
    return int(text)


def exact_number_reward(completion: str, gold: str) -> float:
    """1.0 if the stripped ``completion`` is exactly the number ``gold`` (see the module docstring)."""
    try:
        if not isinstance(completion, str):
            return 0.0
        text = completion.strip()
        if len(text) > MAX_NUMBER_CHARS:
            return 0.0
        answer = parse_strict_number(text)
        target = parse_strict_number(gold.strip())
        if answer is None or target is None:
            return 0.0
        if isinstance(target, int):
            return 1.0 if isinstance(answer, int) and answer == target else 0.0
        return 1.0 if abs(answer - target) <= DECIMAL_TOLERANCE * max(1, abs(target)) else 0.0
    except Exception:  # defensive: the contract is "never raises"
        return 0.0


def chat_answer_reward(completion: str, gold: str) -> float:
    """1.0 if the number a chat model gives as its answer (:func:`~.answers.read_chat_answer`: the last
    ``\\boxed{}``, else an ``Answer:`` line, else the final number) equals the number ``gold``, compared
    as exact fractions (``84.0`` is ``84``; ``1,000`` is ``1000``). Never raises."""
    from .answers import read_chat_answer

    try:
        if not isinstance(completion, str):
            return 0.0
        answer = read_chat_answer(completion)
        target = gold.strip()
        if answer is None or len(answer) > MAX_NUMBER_CHARS or not _LOOSE.fullmatch(target):
            return 0.0
        return 1.0 if Fraction(answer) == Fraction(target) else 0.0
    except (ValueError, ZeroDivisionError):
        return 0.0
