"""math-verify through the worker pool: an equivalence table and adversarial inputs."""

import time

import pytest

from rlvr_scaling.tasks import VerifierPool, extract_final_answer
from rlvr_scaling.tasks.verifiers import init_math_verify, math_verify_reward

TIMEOUT = 1.0  # for the adversarial inputs; the semantic table gets a generous limit (loaded CI boxes)

# (gold, completion, reward). The reward is math-verify's judgement after final-answer extraction;
# rows marked "math-verify" document its semantics rather than a choice of ours.
TABLE = [
    ("\\frac{1}{2}", "0.5", 1.0),
    ("1/2", "0.5", 1.0),
    ("0.5", "1/2", 1.0),
    ("\\sqrt{2}", "1.41421356", 1.0),  # math-verify: numbers compared after rounding to 6 decimals
    ("\\sqrt{2}", "1.414", 0.0),
    ("2x+2", "$2(x+1)$", 1.0),
    ("2x+2", "2(x+1)", 1.0),  # bare answers are wrapped in $...$ before parsing
    ("x^2 + 2x + 1", "$(x+1)^2$", 1.0),
    ("5\\sqrt{2}", "$\\sqrt{50}$", 1.0),
    ("10%", "10", 1.0),  # math-verify: a percentage gold accepts both 10 and 0.1
    ("10%", "0.1", 1.0),
    ("10\\%", "10", 1.0),  # math-verify: \% is dropped, so 0.1 is then wrong
    ("10\\%", "0.1", 0.0),
    ("3", "\\boxed{3}", 1.0),
    ("3", "The answer is \\boxed{3}.", 1.0),
    ("\\frac{11}{12}", "so \\boxed{\\frac{11}{12}}", 1.0),
    ("72", "#### 72", 1.0),
    ("72", "so she has 72 apples.", 1.0),
    ("1000", "1,000", 1.0),
    ("(-2, 2)", "$(-2,2)$", 1.0),
    ("\\pi", "3.14159265", 1.0),
    ("4", "x = 4", 1.0),
    ("3", "4", 0.0),
    ("x^2", "x^3", 0.0),
    ("x^2", "x**2", 0.0),  # Python power syntax is not LaTeX
    ("\\frac{1}{2}", "\\frac{1}{3}", 0.0),
    ("(1,2)", "(2,1)", 0.0),
    ("19", "#19", 0.0),
    ("5", "\\boxed{5} and then \\boxed{6}", 0.0),  # the last box counts
]


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(math_verify_reward, num_workers=2, timeout_s=30.0, initializer=init_math_verify) as p:
        yield p


@pytest.fixture(scope="module")
def strict_pool():
    with VerifierPool(
        math_verify_reward, num_workers=2, timeout_s=TIMEOUT, initializer=init_math_verify
    ) as p:
        yield p


def test_equivalence_table(pool):
    payloads = [(gold, extract_final_answer(completion)) for gold, completion, _ in TABLE]
    got = pool.map(payloads)
    wrong = [(row, r) for row, r in zip(TABLE, got) if r != row[2]]
    assert not wrong, wrong


def test_adversarial_inputs_are_bounded_and_the_pool_survives(strict_pool):
    pool = strict_pool
    adversarial = ["9**9**9**9", "$9^{9^{9^{9}}}$", "$10^{10^{10}}!$", "\\boxed{9^{9^{9^{9}}}}"]
    payloads = [("3", extract_final_answer(text)) for text in adversarial]
    assert pool.map([("1", "1")] * 2) == [1.0, 1.0]  # workers started: start-up is not timed below
    t = time.perf_counter()
    got = pool.map(payloads)
    elapsed = time.perf_counter() - t
    assert all(r in (None, 0.0) for r in got), got
    assert None in got  # the time limit was exercised (9^{9^{9^9}} never finishes)
    # two workers, each item at most the soft limit (the hard limit if a worker must be killed)
    assert elapsed < len(adversarial) * (TIMEOUT + max(1.0, TIMEOUT)) / 2 + 2, elapsed
    assert pool.map([("1/2", "0.5"), ("3", "4")]) == [1.0, 0.0]


def test_huge_completion_scores_zero_without_parsing():
    for text in ["1" * 100_000, "\\boxed{" + "x" * 100_000 + "}", "a " * 50_000]:
        assert extract_final_answer(text) is None


def test_integer_fast_path_agrees_with_math_verify(pool):
    from rlvr_scaling.tasks.math_file import _INTEGER

    pairs = [
        ("72", "72"),
        ("72", "73"),
        ("-7", "-7"),
        ("-7", "7"),
        ("0", "-0"),
        ("72", "072"),
        ("5000", "5000"),
    ]
    assert all(_INTEGER.fullmatch(g) and _INTEGER.fullmatch(a) for g, a in pairs)
    fast = [float(int(g) == int(a)) for g, a in pairs]
    assert pool.map(pairs) == fast
