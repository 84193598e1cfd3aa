"""Gold-answer and final-answer extraction (pure string scanning, runs in the trainer process)."""

import time

import pytest

from rlvr_scaling.tasks import as_math, extract_final_answer, extract_gold

# (answer field, format, gold)
GOLD = [
    ("12 + 7 = <<12+7=19>>19\n#### 19", "gsm8k", "19"),
    ("12 + 7 = <<12+7=19>>19\n#### 19", "auto", "19"),
    ("#### 5,000", "auto", "5000"),
    ("#### -7", "auto", "-7"),
    ("#### $1,234.50", "gsm8k", "1234.50"),
    ("#### 72 dollars", "gsm8k", "72"),
    ("#### 3/4", "gsm8k", "3/4"),
    ("a #### 1\nthen #### 2", "gsm8k", "2"),  # the last one
    ("no marker 42", "gsm8k", None),
    ("so $x = \\boxed{\\frac{\\frac{1}{2}}{3}}$.", "boxed", "\\frac{\\frac{1}{2}}{3}"),  # nested braces
    ("so $x = \\boxed{\\frac{\\frac{1}{2}}{3}}$.", "auto", "\\frac{\\frac{1}{2}}{3}"),
    ("\\boxed{1} then \\boxed{\\sqrt{2}}", "boxed", "\\sqrt{2}"),  # the last one
    ("\\boxed{\\{1,2\\}}", "boxed", "\\{1,2\\}"),  # escaped braces are literal
    ("\\fbox{7}", "boxed", "7"),
    ("\\boxed 7", "boxed", "7"),
    ("\\boxed{unclosed", "boxed", None),
    ("\\boxed{(-2, 2)}", "auto", "(-2, 2)"),
    ("  42 ", "plain", "42"),
    ("x^2+1", "auto", "x^2+1"),
    ("", "plain", None),
]


@pytest.mark.parametrize(("field", "fmt", "gold"), GOLD)
def test_extract_gold(field, fmt, gold):
    assert extract_gold(field, fmt) == gold


def test_extract_gold_rejects_unknown_format():
    with pytest.raises(ValueError, match="answer_format"):
        extract_gold("1", "latex")


# (completion, extracted final answer)
FINAL = [
    ("The answer is \\boxed{3}.", "3"),
    ("\\boxed{5} and then \\boxed{6}", "6"),
    ("\\boxed{23}\n\nExtra text 99", "23"),  # a boxed answer beats a later number
    ("Step 1 ... #### 72", "72"),
    ("#### 5,000", "5000"),
    ("0.5", "0.5"),  # bare answers
    ("2(x+1)", "2(x+1)"),
    ("$x^2$", "$x^2$"),
    ("#57", "#57"),
    ("The answer is $\\frac{2}{3}$.", "\\frac{2}{3}"),
    ("It costs \\$5, so $$7$$", "7"),  # an escaped dollar is not a delimiter
    ("so \\(x+1\\) it is", "x+1"),
    ("so she has 72 apples.", "72"),
    ("The result is -7.", "-7"),
    ("about 1,000 cars", "1000"),
    ("no idea", None),
    ("", None),
    ("   ", None),
]


@pytest.mark.parametrize(("completion", "answer"), FINAL)
def test_extract_final_answer(completion, answer):
    assert extract_final_answer(completion) == answer


def test_as_math_wraps_only_undelimited():
    assert as_math("2x+2") == "$2x+2$"
    assert as_math("$x$") == "$x$"
    assert as_math("\\(x\\)") == "\\(x\\)"
    assert as_math("\\$18") == "$\\$18$"  # an escaped dollar is not a delimiter


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 20_000,
        "$" * 100_000,
        "\\(" * 50_000,
        "1," * 50_000,
        "{" * 100_000 + "\\boxed{1}",
        "####" * 25_000,
        "9" * 100_000,
    ],
)
def test_extraction_is_linear_on_adversarial_text(text):
    t = time.perf_counter()
    answer = extract_final_answer(text)
    assert time.perf_counter() - t < 0.5
    assert answer is None or len(answer) <= 1000
