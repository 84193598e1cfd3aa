"""``python -m analysis.replicates``: two replicates' results side by side, with a difference test that
keeps its level and a mutual-inclusion share that matches its exact value."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import stdtrit

from analysis.replicates import compare, difference, interval_se, main, trend_verdicts

COND = ["loss.clip=0.2__lr.ref_lr=1e-05", "loss.clip=0.2__lr.ref_lr=3.16e-05"]
FAIL = "loss.clip=null__lr.ref_lr=0.0001"


def _write(folder: Path, common: list[tuple], gamma: tuple, slope: tuple, seeds: dict[str, int]) -> Path:
    folder.mkdir(parents=True)
    pd.DataFrame(
        [{"condition": c, "exponent_common": x, "ci_low": lo, "ci_high": hi} for c, x, lo, hi in common]
    ).to_csv(folder / "common_exponent.csv", index=False)
    pd.DataFrame(
        [{"condition": FAIL, "clock": "failure", "exponent": gamma[0], "ci_low": gamma[1], "ci_high": gamma[2]},
         {"condition": COND[0], "clock": "failure", "exponent": math.nan, "ci_low": math.nan, "ci_high": math.nan}]
    ).to_csv(folder / "exponents.csv", index=False)  # fmt: skip
    pd.DataFrame(
        [{"condition": c, "seed": s, "in_fit": True} for c, n in seeds.items() for s in range(n)]
        + [{"condition": COND[0], "seed": 99, "in_fit": False}]
    ).to_csv(folder / "runs.csv", index=False)
    pd.DataFrame(
        [{"key": "lr.ref_lr", "series": "loss.clip=0.2", "clock": "common", "slope": slope[0], "slope_low": slope[1],
          "slope_high": slope[2], "reference": 0.29, "reference_inside": slope[1] <= 0.29 <= slope[2]},
         {"key": "lr.ref_lr", "series": "loss.clip=0.2", "clock": "target:0.22", "slope": 0.0, "slope_low": -1.0,
          "slope_high": 1.0, "reference": 0.29, "reference_inside": True}]
    ).to_csv(folder / "trend.csv", index=False)  # fmt: skip
    return folder


def test_two_replicates_are_compared_quantity_by_quantity(tmp_path: Path, capsys):
    seeds = {COND[0]: 5, COND[1]: 20, FAIL: 13}
    a = _write(tmp_path / "a", [(COND[0], 0.17, 0.12, 0.22), (COND[1], 0.21, 0.15, 0.27)], (0.15, -0.06, 0.37),
               (0.0, -0.13, 0.06), seeds)  # fmt: skip
    b = _write(tmp_path / "b", [(COND[0], 0.22, 0.16, 0.26), (COND[1], 0.40, 0.36, 0.44)], (0.04, -0.23, 0.33),
               (0.1, -0.05, 0.35), {**seeds, COND[1]: 7})  # fmt: skip
    table, notes = compare(a, b)
    assert not notes
    t = table.set_index("quantity")
    assert list(t.index) == [f"common α {COND[0]}", f"common α {COND[1]}", f"γ {FAIL}"]
    assert t["a_seeds"].tolist() == [5, 20, 13] and t["b_seeds"].tolist() == [5, 7, 13]  # in-fit runs only
    # the se a 95 % t interval on n seeds implies, and the difference's z by hand
    se_a = 0.12 / (2 * stdtrit(19, 0.975))
    se_b = 0.08 / (2 * stdtrit(6, 0.975))
    assert t.loc[f"common α {COND[1]}", "z"] == pytest.approx((0.21 - 0.40) / math.hypot(se_a, se_b))
    assert t["inside"].tolist() == [True, False, True]
    assert t["resolved"].tolist() == [False, True, False]  # 0.21 against 0.40, z about -4.8
    assert (t["p_holm"] >= t["p"]).all()
    trends = trend_verdicts(a, b, notes).set_index("clock")
    assert list(trends.index) == ["common", "target:0.22"]  # the common α's trend first, then each target's
    assert not trends.loc["common", "same_verdict"]  # +0.29 outside A's, inside B's
    assert trends.loc["target:0.22", "same_verdict"]  # inside both
    assert main([str(a), str(b), "--out", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "Differences resolved after Holm: 1 of 3." in out and "**different verdicts**" in out
    assert (
        "Trend of α at 0.22 along lr.ref_lr (loss.clip=0.2), per decade: A +0.000 [-1.000, +1.000] (inside)"
        in out
    )
    # a replicate without an interval for the common α's trend (fewer than three rates left): not tested
    trend = pd.read_csv(b / "trend.csv").astype({"reference_inside": object})
    trend.loc[trend["clock"] == "common", ["slope", "slope_low", "slope_high", "reference_inside"]] = math.nan
    trend.to_csv(b / "trend.csv", index=False)
    trends = trend_verdicts(a, b, []).set_index("clock")
    assert trends.loc["common", "inside_b"] is None and trends.loc["common", "same_verdict"] is None
    assert trends.loc["target:0.22", "same_verdict"]
    main([str(a), str(b)])
    assert "B no interval; the reference +0.29: not tested in both." in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "t.csv").shape == (3, len(table.columns))
    # where a replicate's common-α test rejects, the study asked for each target's α: said in a note
    common = pd.read_csv(b / "common_exponent.csv").assign(p_common=[0.4, 0.028])
    common.to_csv(b / "common_exponent.csv", index=False)
    _, notes = compare(a, b)
    assert notes == [f"{b}: common α {COND[1]}: the common-α test rejects (p = 0.028)"]


def test_a_missing_file_or_quantity_is_reported_not_fatal(tmp_path: Path, capsys):
    a = _write(tmp_path / "a", [(COND[0], 0.17, 0.12, 0.22), (COND[1], 0.2, -math.inf, math.inf)], (0.15, -0.06, 0.37),
               (0.0, -0.13, 0.06), {COND[0]: 5})  # fmt: skip
    b = tmp_path / "b"
    b.mkdir()
    pd.DataFrame([{"condition": COND[1], "exponent_common": 0.3, "ci_low": 0.2, "ci_high": 0.4}]).to_csv(
        b / "common_exponent.csv", index=False
    )
    table, notes = compare(a, b)
    assert (
        len(table) == 1 and np.isnan(table.loc[0, "z"]) and bool(table.loc[0, "inside"])
    )  # unbounded: no test
    assert any("exponents.csv: not read" in n for n in notes)
    assert any(n == f"common α {COND[0]}: fitted in only one replicate" for n in notes)
    assert main([str(a), str(b)]) == 0
    assert "note: " in capsys.readouterr().out


def test_the_difference_test_keeps_its_level_and_inclusion_its_exact_share():
    """Exact t intervals on seeds of one truth: the difference test's false alarms stay near 5 % (a
    Welch t on the se each interval implies), each point lies in the other's interval in about 83 %
    of pairs."""
    rng = np.random.default_rng(0)
    n, reps, truth, sigma = 7, 4000, 0.2, 0.1
    crit = stdtrit(n - 1, 0.975)
    draws = truth + sigma * rng.standard_normal((reps, 2, n))
    mean, sd = draws.mean(axis=2), draws.std(axis=2, ddof=1) / math.sqrt(n)
    rejected = inside = 0
    for (ma, mb), (sa, sb) in zip(mean, sd):
        a, b = (ma, ma - crit * sa, ma + crit * sa, n), (mb, mb - crit * sb, mb + crit * sb, n)
        assert interval_se(a[1], a[2], n) == pytest.approx(sa)
        both, z, p = difference(a, b)
        rejected += p < 0.05
        inside += both
    assert 0.035 < rejected / reps < 0.065
    assert 0.80 < inside / reps < 0.89
