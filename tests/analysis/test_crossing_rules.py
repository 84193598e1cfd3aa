"""The crossing-rule registry (analysis/data/crossings): a rule registered in one file — this one — is
taken by ``rlvr-analyze --crossing NAME``, by a study file's ``crossing:`` and by the report; the
built-in rules give the brackets their docstrings state."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.cli import main as analyze
from analysis.data.clock_tables import ClockOptions, build_tables
from analysis.data.crossings import (
    Bracket,
    Curve,
    crossing_names,
    crossing_rule,
    register,
    whole_rollouts,
)
from analysis.data.load import load_source
from analysis.synthetic import SyntheticSpec, write_sweep
from rlvr_study.study_file import StudyError, load_study, parse_study


@register("confirmed")
def confirmed(curve: Curve, target: float) -> Bracket | None:
    """A toy rule: the crossing is the first evaluation at or above the target that the next
    evaluation confirms (also at or above it), bracketed in whole rollouts from the evaluation before.
    Reads the accuracies up to the confirming evaluation, within the horizon."""
    above = curve.accuracy >= target
    both = np.flatnonzero(above[:-1] & above[1:])
    return whole_rollouts(curve, int(both[0])) if both.size else None


def _confirmed_by_hand(evals: pd.DataFrame, target: float, horizon: float) -> float:
    """The toy rule on one run's evaluations of evals.csv: the responses of the confirmed crossing."""
    e = evals[evals["responses"] <= horizon]
    acc, resp = e["eval/accuracy"].to_numpy(), e["responses"].to_numpy()
    for i in range(len(acc) - 1):
        if acc[i] >= target and acc[i + 1] >= target:
            return float(resp[i])
    return math.nan


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("rules") / "s"
    spec = SyntheticSpec(
        sizes=(32, 64, 128), seeds=2, gamma=None, targets=(0.3, 0.5), acc_noise=0.06, eval_every=192, seed=7
    )
    write_sweep(root, spec)
    return root


def test_a_rule_registered_in_one_file_reaches_rlvr_analyze(sweep, tmp_path):
    assert "confirmed" in crossing_names() and "confirmed" in crossing_names(brackets_only=True)
    out = tmp_path / "a"
    argv = [str(sweep), "--out", str(out), "--crossing", "confirmed", "--no-plots", "--no-sigmoid"]
    assert analyze([*argv, "--bootstrap", "50", "--quiet"]) == 0
    runs, evals = pd.read_csv(out / "runs.csv"), pd.read_csv(out / "evals.csv")
    exps = pd.read_csv(out / "exponents.csv")
    assert (exps.loc[exps["clock"] != "failure", "crossing"] == "confirmed").all()
    assert "crossings: **confirmed**" in (out / "report.md").read_text()
    moved = 0
    for _, run in runs.iterrows():
        mine = evals[evals["run"] == run["run"]]
        for a in (0.3, 0.5):
            want = _confirmed_by_hand(mine, a, run["horizon"])
            assert run[f"target:{a:g}:censored"] == math.isnan(want)
            if not math.isnan(want):
                assert run[f"target:{a:g}"] == want
                moved += want > mine.loc[mine["eval/accuracy"] >= a, "responses"].min()  # a spike not taken
    assert moved > 0
    # the rule is an ordinary name: an unknown one is refused by the parser with the known names
    with pytest.raises(SystemExit):
        analyze([str(sweep), "--crossing", "no_such_rule"])


def test_a_study_file_takes_the_rule_and_its_analysis_uses_it(sweep, tmp_path, capsys):
    from rlvr_study.cli import _analyze
    from rlvr_study.measure import measure

    path = tmp_path / "study.yaml"
    path.write_text(
        "name: s\nsizes: [4, 8, 16]\ntargets: [0.3, 0.5]\nbudget: {responses: 1.0e+6}\n"
        f"crossing: confirmed\ncommon: false\nbootstrap: 50\nfolder: {sweep}\n"
    )
    study = load_study(path)
    assert study.crossing == "confirmed"
    m = measure(study)
    assert m.tables.options.crossing == "confirmed"
    direct = build_tables(
        load_source(str(sweep)).runs, ClockOptions(crossing="confirmed", targets=(0.3, 0.5))
    )
    cols = [f"target:{a:g}{s}" for a in (0.3, 0.5) for s in ("", ":lower", ":censored")]
    pd.testing.assert_frame_equal(
        m.tables.runs.set_index("run")[cols].sort_index(), direct.runs.set_index("run")[cols].sort_index()
    )
    assert _analyze(study) == 0
    assert "--crossing confirmed" in capsys.readouterr().out
    exps = pd.read_csv(sweep / "analysis" / "exponents.csv")
    assert (exps.loc[exps["clock"] != "failure", "crossing"] == "confirmed").all()
    for r in m.widths.itertuples():  # the study's widths are the report's, under the same rule
        row = exps[(exps["condition"] == r.label) & (exps["clock"] == r.clock)].iloc[0]
        assert row["ci_high"] - row["ci_low"] == pytest.approx(r.width, rel=1e-9)
    # a rule that gives no interval cannot drive a study (it plans on interval-censored crossings)
    with pytest.raises(StudyError, match="^crossing: one of the bracketing rules"):
        parse_study({"name": "s", "sizes": [4, 8], "budget": {"responses": 1e6}, "crossing": "exact"})


def test_the_built_in_rules_brackets():
    curve = Curve(np.array([0.0, 64, 192, 320]), np.array([0.1, 0.2, 0.45, 0.4]), 64.0, 320.0)
    assert crossing_rule("interval").read(curve, 0.3) == Bracket(2, 128.0)  # [64 + B, 192]
    assert crossing_rule("interval").read(curve, 0.15) == Bracket(1, 64.0)  # first rollout: [B, 64]
    assert crossing_rule("interval").read(curve, 0.5) is None
    assert crossing_rule("exact").read(curve, 0.3) == Bracket(2)
    interp = crossing_rule("interpolate").read(curve, 0.3)
    assert interp.seen == 2 and interp.fraction == pytest.approx(0.4)
    continuous = Curve(curve.responses, curve.accuracy, 64.0, 320.0, discrete=False)
    assert crossing_rule("interval").read(continuous, 0.15) == Bracket(1, 0.0)
    # isotonic: a spike above the target that the curve falls back from is pooled away
    spike = Curve(np.array([0.0, 64, 128, 192, 256]), np.array([0.1, 0.35, 0.2, 0.25, 0.5]), 64.0, 256.0)
    assert crossing_rule("interval").read(spike, 0.3).seen == 1
    assert crossing_rule("isotonic").read(spike, 0.3).seen == 4
    with pytest.raises(ValueError, match="crossing must be one of .*interval"):
        crossing_rule("no_such_rule")
