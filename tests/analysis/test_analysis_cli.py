"""``rlvr-analyze`` end to end: every output file, the exponents contract, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.cli import main
from analysis.synthetic import SyntheticSpec, write_sweep
from analysis.synthetic import main as synthetic_main

EXPONENT_COLUMNS = ["clock", "exponent", "ci_low", "ci_high", "n_runs", "n_censored", "n_sizes"]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path, str]:
    """Two conditions (alpha 0.15 vs 0.44) plus one corrupt run, analysed once for the module."""
    root = tmp_path_factory.mktemp("study")
    common = {"sizes": (32, 64, 128, 256), "seeds": 3, "budget": 60000, "failure_prefactor": 40000.0}
    specs = [
        SyntheticSpec(alpha=0.15, seed=21, overrides=(("lr.ref_lr", 1e-6),), **common),
        SyntheticSpec(alpha=0.44, seed=22, overrides=(("lr.ref_lr", 1e-5),), **common),
    ]
    write_sweep(root / "sweep", specs)
    broken = root / "sweep" / "broken_run"
    broken.mkdir()
    (broken / "config.yaml").write_text("seed: 0\n")
    (broken / "status.json").write_text('{"state": "running"}')
    out = root / "out"
    assert main([str(root / "sweep"), "--out", str(out), "--bootstrap", "300", "--jobs", "1"]) == 0
    return root, out, json.loads((root / "sweep" / "synthetic_truth.json").read_text())


def test_writes_every_output(study):
    _, out, _ = study
    names = {p.name for p in out.iterdir()}
    for name in (
        "runs.csv",
        "runs.parquet",
        "evals.csv",
        "exponents.csv",
        "comparisons.csv",
        "skipped.csv",
        "report.md",
        "incidence.csv",
        "incidence_summary.csv",
        "common_exponent.csv",
        "noise_scale.csv",
        "sigmoid.csv",
    ):
        assert name in names
    for condition in ("lr.ref_lr=1e-06", "lr.ref_lr=1e-05"):
        for stem in (
            "rt_vs_B",
            "rf_vs_B",
            "accuracy_vs_responses",
            "accuracy_vs_compute",
            "survival_failure",
            "incidence",
            "residuals",
        ):
            for fmt in ("png", "pdf"):
                assert f"{stem}_{condition}.{fmt}" in names
    for stem in ("alpha_gamma_vs_eta_ref", "rt_vs_B_all_0.3", "rt_vs_B_all_0.5", "exponents_vs_target"):
        assert f"{stem}.png" in names and f"{stem}.pdf" in names
    from PIL import Image

    with Image.open(out / "alpha_gamma_vs_eta_ref.png") as img:  # 300 dpi
        assert round(img.info["dpi"][0]) == 300
    runs = pd.read_csv(out / "runs.csv")
    parquet = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 24 and list(parquet.columns) == list(runs.columns)
    assert parquet["target:0.3"].tolist() == runs["target:0.3"].tolist()
    assert {
        "target:0.3",
        "target:0.3:censored",
        "target:0.3:resolution_limited",
        "failure",
        "failure:censored",
    } <= set(runs.columns)
    evals = pd.read_csv(out / "evals.csv")
    assert evals.groupby("run").size().min() > 10 and "eval/accuracy" in evals.columns
    skipped = pd.read_csv(out / "skipped.csv")
    assert skipped.to_dict("records") == [
        {
            "run": "broken_run",
            "path": str(study[0] / "sweep" / "broken_run"),
            "reason": "metrics.jsonl missing",
        }
    ]


def test_exponents_contract_and_recovery(study):
    _, out, truth = study
    exps = pd.read_csv(out / "exponents.csv")
    assert list(exps.columns[: exps.columns.get_loc("clock")])[:1] == ["condition"]
    assert set(EXPONENT_COLUMNS) <= set(exps.columns) and "lr.ref_lr" in exps.columns
    assert list(exps.columns[1 : exps.columns.get_loc("clock")]) == ["lr.ref_lr"]  # only the varying key
    assert {"n_censored_failure", "n_censored_budget", "exponent_never", "sensitivity_low", "lof_p"} <= set(
        exps.columns
    )
    assert {"delta_aic", "noise_exponent", "noise_agrees", "crossing", "failure_time"} <= set(exps.columns)
    assert (exps[exps["clock"] != "failure"]["crossing"] == "interval").all()
    assert {"prefactor", "sigma", "wald_low", "wald_high", "n_seeds_min", "warnings"} <= set(exps.columns)
    assert {"theory_noise_dominated", "theory_curvature_dominated", "theory"} <= set(exps.columns)
    assert len(exps) == 2 * 3 and set(exps["clock"]) == {"target:0.3", "target:0.5", "failure"}
    alphas = {t["spec"]["overrides"][0][1]: t["spec"]["alpha"] for t in truth}
    for row in exps.to_dict("records"):
        expected = 0.0 if row["clock"] == "failure" else alphas[row["lr.ref_lr"]]
        assert row["ci_low"] <= expected <= row["ci_high"], row
        assert row["n_runs"] == 12 and row["n_sizes"] == 4  # censored runs are counted, not dropped
    target = exps[exps["clock"] == "target:0.3"].iloc[0]
    assert target["theory_noise_dominated"] == 0.0 and target["theory_curvature_dominated"] == 0.5
    assert exps[exps["clock"] == "failure"]["theory"].eq(0.0).all()
    assert exps["n_censored"].sum() > 0


def test_comparison_report_and_stdout(study, capsys):
    _, out, _ = study
    comps = pd.read_csv(out / "comparisons.csv")
    assert len(comps) == 3 and set(comps["differs_in"]) == {"lr.ref_lr"}
    row = comps[comps["clock"] == "target:0.3"].iloc[0]
    assert row["value_a"] == 1e-6 and row["value_b"] == 1e-5  # a: the smaller value
    assert row["ci_low"] <= 0.44 - 0.15 <= row["ci_high"]
    report = (out / "report.md").read_text()
    assert "## Exponents" in report and "theory" in report and "broken_run" in report
    for section in (
        "## Reaching the target before failing (Aalen–Johansen)",
        "## A common α across targets",
        "## Noise-scale prediction beside the fit",
        "## Goodness of fit",
        "## Accuracy against compute (ScaleRL sigmoid)",
        "## Symbols",
    ):
        assert section in report
    assert "agree" in report  # the noise-scale verdict
    inc = pd.read_csv(out / "incidence_summary.csv")
    assert len(inc) == 2 * 4 * 2  # conditions x sizes x targets
    assert (inc["n_reached"] + inc["n_failed_first"] + inc["n_censored_budget"] == inc["n_runs"]).all()
    noise = pd.read_csv(out / "noise_scale.csv")
    assert (noise[noise["level"] == "condition"]["b_noise"] > 0).all()
    assert "![rt_vs_B_lr.ref_lr=1e-06.png](rt_vs_B_lr.ref_lr=1e-06.png)" in report


def test_no_readable_run_exits_nonzero(tmp_path: Path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    assert "no readable run" in capsys.readouterr().err
    assert main([str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2


def test_synthetic_cli_then_analyze(tmp_path: Path, capsys):
    src = tmp_path / "synth"
    assert (
        synthetic_main(
            [str(src), "--alpha", "0.3", "--sizes", "32", "64", "128", "--seeds", "2", "--no-failure"]
        )
        == 0
    )
    assert (
        main(
            [str(src), "--out", str(tmp_path / "o"), "--no-plots", "--bootstrap", "100", "--clock", "tokens"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "target:0.3" in printed and "all runs censored" in printed  # nobody fails: gamma not identified
    exps = pd.read_csv(tmp_path / "o" / "exponents.csv").set_index("clock")
    assert exps.loc["failure", "n_censored"] == exps.loc["failure", "n_runs"] == 6
    assert exps.loc["target:0.3", "clock_unit"] == "tokens"


def test_one_size_source_gives_a_clear_message(tmp_path: Path, capsys):
    write_sweep(tmp_path / "one", SyntheticSpec(sizes=(64,), seeds=3, seed=4))
    out = tmp_path / "o"
    assert main([str(tmp_path / "one"), "--out", str(out), "--no-plots", "--bootstrap", "50"]) == 0
    printed = capsys.readouterr().out
    assert "single rollout size (B = 64)" in printed and "single condition" in printed
    assert "single rollout size" in (out / "report.md").read_text()
    assert len(pd.read_csv(out / "runs.csv")) == 3


def test_crossing_and_failure_time_options(tmp_path: Path):
    write_sweep(tmp_path / "s", SyntheticSpec(sizes=(32, 64, 128), seeds=2, seed=5, detection_delay=3))
    for extra, crossing, failure_time in (
        ([], "interval", "onset"),
        (["--exact-crossings", "--failure-time", "detection"], "exact", "detection"),
        (["--interpolate"], "interpolate", "onset"),
    ):
        out = tmp_path / f"o{crossing}"
        argv = [
            str(tmp_path / "s"),
            "--out",
            str(out),
            "--no-plots",
            "--no-sigmoid",
            "--bootstrap",
            "0",
            *extra,
        ]
        assert main(argv) == 0
        exps = pd.read_csv(out / "exponents.csv").set_index("clock")
        assert (
            exps.loc["target:0.3", "crossing"] == crossing
            and exps.loc["failure", "failure_time"] == failure_time
        )
        runs = pd.read_csv(out / "runs.csv")
        failed = runs[~runs["failure:censored"]]
        chosen = failed["failure:onset"] if failure_time == "onset" else failed["failure:detection"]
        assert len(failed) and (failed["failure"] == chosen).all()
    with pytest.raises(SystemExit):
        main([str(tmp_path / "s"), "--exact-crossings", "--interpolate"])
