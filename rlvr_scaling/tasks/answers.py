"""Final-answer extraction for math tasks: gold answers from dataset fields, model answers from text.

Everything here is plain string scanning with linear (or explicitly bounded) cost, so it runs in the
trainer process; only the short extracted strings travel to the math-verify worker processes.

Gold answers (``answer_format``):
- ``gsm8k``: the text after the last ``####`` on its line, as a number (``1,000`` -> ``1000``);
- ``boxed``: the content of the last ``\\boxed{...}``/``\\fbox{...}``, nested braces allowed;
- ``plain``: the whole field, stripped;
- ``auto``: ``gsm8k`` if the field contains ``####``, else ``boxed`` if it contains ``\\boxed``/``\\fbox``,
  else ``plain``.

Model answers (:func:`extract_final_answer`), first rule that applies:
1. the last balanced ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed 5``);
2. ``#### x`` (the last one);
3. a bare answer: the stripped completion has no whitespace and at most 100 characters (``0.5``,
   ``2(x+1)``, ``$x^2$``, ``\\frac{1}{2}``);
4. the last inline math span ``$...$``, ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]``;
5. the last number (``-3``, ``1,000``, ``2.5``, ``3/4``).
Answers longer than :data:`MAX_ANSWER_CHARS` count as no answer (reward 0).

Chat models' numeric answers (:func:`read_chat_answer`, ``task.verifier=answer`` of reasoning-gym tasks):
the last ``\\boxed{}``, else an ``Answer:`` line, else the final number.
"""

from __future__ import annotations

import re

MAX_ANSWER_CHARS = 1000  # an extracted answer longer than this is treated as wrong, never parsed
MAX_COMPLETION_CHARS = 16384  # only the tail of a longer completion is searched for the answer
_BARE_MAX_CHARS = 100
_BOXED_TRIES = 8  # later \boxed occurrences tried before giving up (bounds the cost on garbage)

_NUMBER = re.compile(r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:/[0-9]+)?")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_WHITESPACE = re.compile(r"\s")
ANSWER_FORMATS = ("auto", "gsm8k", "boxed", "plain")


def _brace_group(text: str, open_pos: int, limit: int) -> str | None:
    """Content of the brace group opening at ``open_pos`` (escaped ``\\{``/``\\}`` are literal);
    ``None`` when it does not close within ``limit`` characters."""
    depth = 0
    i = open_pos
    end = min(len(text), open_pos + limit + 2)
    while i < end:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_pos + 1 : i]
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last balanced ``\\boxed{...}`` / ``\\fbox{...}`` (or ``\\boxed x``)."""
    end = len(text)
    for _ in range(_BOXED_TRIES):
        pos = max(text.rfind("\\boxed", 0, end), text.rfind("\\fbox", 0, end))
        if pos < 0:
            return None
        cmd = 6 if text.startswith("\\boxed", pos) else 5
        j = pos + cmd
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            content = _brace_group(text, j, MAX_ANSWER_CHARS)
            if content is not None:
                return content.strip()
        elif j > pos + cmd:  # "\boxed 5": one token
            token = re.match(r"[^\s$]+", text[j : j + MAX_ANSWER_CHARS + 1])
            if token:
                return token.group(0)
        end = pos
    return None


def _clean_number(text: str) -> str:
    """``$1,000.`` -> ``1000``: currency sign, thousands separators and a final period removed."""
    text = text.strip()
    for prefix in ("\\$", "$"):
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
    text = re.sub(r"(?<=[0-9]),(?=[0-9]{3}\b)", "", text)
    return text.rstrip(".").strip()


def gsm8k_answer(text: str) -> str | None:
    """The answer after the last ``####``: its leading number if it has one, else the line."""
    pos = text.rfind("####")
    if pos < 0:
        return None
    line = text[pos + 4 :].split("\n", 1)[0]
    cleaned = _clean_number(line)
    match = _NUMBER.match(cleaned)
    if match and (match.end() == len(cleaned) or not cleaned[match.end()].isalnum()):
        return match.group(0).replace(",", "")
    return cleaned or None


def last_math_span(text: str) -> str | None:
    """Content of the last ``$...$``/``$$...$$``/``\\(...\\)``/``\\[...\\]`` span."""
    best: tuple[int, str] | None = None
    inline = text.replace("$$", "$ ")  # display math as inline math, positions unchanged
    dollars = [m.start() for m in _UNESCAPED_DOLLAR.finditer(inline)]
    if len(dollars) >= 2:
        pairs = len(dollars) // 2  # pair from the left: an unmatched last "$" is a currency sign
        a, b = dollars[2 * pairs - 2], dollars[2 * pairs - 1]
        best = (b, inline[a + 1 : b].strip())
    for left, right in (("\\(", "\\)"), ("\\[", "\\]")):
        close = text.rfind(right)
        if close < 0:
            continue
        open_ = text.rfind(left, 0, close)
        if open_ >= 0 and (best is None or close > best[0]):
            best = (close, text[open_ + 2 : close].strip())
    return best[1] if best and best[1] else None


def last_number(text: str) -> str | None:
    last = None
    for last in _NUMBER.finditer(text):  # noqa: B007 - keep the last match
        pass
    return last.group(0).replace(",", "") if last else None


def extract_gold(answer: str, answer_format: str = "auto") -> str | None:
    """The gold final answer of a dataset answer field (see the module docstring); ``None`` if absent."""
    if answer_format == "auto":
        if "####" in answer:
            answer_format = "gsm8k"
        elif "\\boxed" in answer or "\\fbox" in answer:
            answer_format = "boxed"
        else:
            answer_format = "plain"
    if answer_format == "gsm8k":
        gold = gsm8k_answer(answer)
    elif answer_format == "boxed":
        gold = last_boxed(answer)
    elif answer_format == "plain":
        gold = answer.strip()
    else:
        raise ValueError(f"unknown answer_format {answer_format!r}; valid: {', '.join(ANSWER_FORMATS)}")
    return gold or None


def extract_final_answer(completion: str) -> str | None:
    """The model's final answer (rules in the module docstring); ``None`` if there is none."""
    text = completion[-MAX_COMPLETION_CHARS:]
    stripped = text.strip()
    answer = last_boxed(text)
    if answer is None and "####" in text:
        answer = gsm8k_answer(text)
    if answer is None and stripped and len(stripped) <= _BARE_MAX_CHARS and not _WHITESPACE.search(stripped):
        answer = stripped
    if answer is None:
        answer = last_math_span(text)
    if answer is None:
        answer = last_number(text)
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


_ANSWER_LINE = re.compile(r"\banswer\s*(?:is\b|:|=)[ \t]*([^\n]*)", re.IGNORECASE)


def read_chat_answer(completion: str) -> str | None:
    """A chat model's final number, read as its users read it, first rule that applies:

    1. the last balanced ``\\boxed{...}``: the last number in it;
    2. the last ``Answer:`` / ``answer is`` / ``answer =`` (any case): the first number after it on its line;
    3. the last number of the completion (``58 + 26 = 84.`` -> ``84``).

    A rule that applies but finds no number gives ``None`` (``Answer: unknown`` is no answer, whatever
    numbers came before). Numbers as :func:`last_number` reads them (``-6``, ``1,000``, ``2.5``), a
    Unicode minus taken as ``-``. Linear in the completion (its last ``MAX_COMPLETION_CHARS``).
    """
    text = completion[-MAX_COMPLETION_CHARS:].replace("\u2212", "-")
    boxed = last_boxed(text)
    if boxed is not None:
        return last_number(boxed)
    lines = [m for m in _ANSWER_LINE.finditer(text)]
    if lines:
        first = _NUMBER.search(lines[-1].group(1))
        return first.group(0).replace(",", "") if first else None
    return last_number(text)


def as_math(text: str) -> str:
    """Wrap in ``$...$`` unless already delimited, so math-verify's LaTeX extraction sees it
    (a bare ``2x+2`` would otherwise be read as ``2``)."""
    text = text.strip()
    if _UNESCAPED_DOLLAR.search(text) or text.startswith(("\\(", "\\[")):
        return text
    return f"${text}$"
