"""The strict exact-number verifier: the whole stripped completion must be the gold number."""

import time

import pytest

from rlvr_scaling.tasks import exact_number_reward, parse_strict_number

# (completion, gold, reward)
TABLE = [
    ("57", "57", 1.0),
    ("58", "57", 0.0),
    ("57 ", "57", 1.0),  # surrounding whitespace is ignored
    (" 57\n", "57", 1.0),
    ("\t57\u00a0", "57", 1.0),  # any Unicode whitespace (here NBSP) counts as whitespace
    ("#57", "57", 0.0),  # the warm start's deliberate wrong format
    ("=57", "57", 0.0),
    ("+57", "57", 0.0),
    ("057", "57", 0.0),  # leading zeros are not canonical: wrong format
    ("57.0", "57", 0.0),  # an integer gold needs an integer literal
    ("57.", "57", 0.0),
    ("5 7", "57", 0.0),
    ("57\n58", "57", 0.0),  # a second line is trailing text
    ("57 apples", "57", 0.0),
    ("1,000", "1000", 0.0),
    ("1e3", "1000", 0.0),
    ("-4", "-4", 1.0),
    ("- 4", "-4", 0.0),
    ("4", "-4", 0.0),
    ("-0", "0", 1.0),  # numerically equal
    ("0", "0", 1.0),
    ("", "57", 0.0),
    ("   ", "57", 0.0),
    ("４", "4", 0.0),  # full-width digit
    ("٥٧", "57", 0.0),  # Arabic-Indic digits
    ("57\u200b", "57", 0.0),  # zero-width space is not whitespace
    ("4471.6021", "4471.6021", 1.0),  # decimal gold: compared with tolerance 1e-9
    ("4471.60210", "4471.6021", 1.0),
    ("4471.6022", "4471.6021", 0.0),
    ("3", "3.0", 1.0),
    ("0.30000000001", "0.3", 1.0),
    ("0.3001", "0.3", 0.0),
    ("106475279601", "106475279601", 1.0),
    ("106475279602", "106475279601", 0.0),
]


@pytest.mark.parametrize(("completion", "gold", "reward"), TABLE)
def test_exact_table(completion, gold, reward):
    assert exact_number_reward(completion, gold) == reward


def test_exact_adversarial_inputs_are_fast_zero():
    garbage = [
        "9" * 100_000,  # int() of this would hit Python's digit limit; it is never parsed
        "x" * 100_000,
        "-" * 100_000 + "1",
        "57" + " " * 100_000 + "8",
        "9**9**9**9",
        "\x00\udcff57",
        None,
        b"57",
    ]
    t = time.perf_counter()
    for text in garbage:
        assert exact_number_reward(text, "57") == 0.0
    assert time.perf_counter() - t < 0.5


def test_parse_strict_number_types():
    assert parse_strict_number("-12") == -12 and isinstance(parse_strict_number("-12"), int)
    assert parse_strict_number("0.25") * 4 == 1
    assert parse_strict_number("1_000") is None
    assert parse_strict_number(" 5") is None  # the caller strips
