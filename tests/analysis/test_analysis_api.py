"""The notebook API (:mod:`analysis.api`) gives the numbers and the figure ``rlvr-analyze`` gives with the
same options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis import api
from analysis.cli import main
from analysis.synthetic import SyntheticSpec, write_sweep

IGNORE = ["eval.targets", "train.stop_at_targets"]  # as `make figures` analyses the study


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("api")
    common = {"sizes": (32, 64, 128), "seeds": 2, "budget": 40000, "failure_prefactor": 30000.0}
    write_sweep(
        root / "sweep",
        [
            SyntheticSpec(alpha=0.15, seed=51, overrides=(("lr.ref_lr", 3e-6),), **common),
            SyntheticSpec(alpha=0.44, seed=52, overrides=(("lr.ref_lr", 3e-5),), **common),
        ],
    )
    out = root / "out"
    argv = [str(root / "sweep"), "--out", str(out), "--isotonic", "--ignore-keys", *IGNORE]
    argv += ["--bootstrap", "50", "--seed", "3", "--no-sigmoid", "--formats", "png", "--dpi", "60"]
    assert main([*argv, "--jobs", "1", "--quiet"]) == 0
    return root, out


def test_the_api_is_exported_from_the_package():
    for name in api.__all__:
        assert getattr(analysis, name) is getattr(api, name)


def test_load_runs_into_a_frame(study):
    root, _ = study
    runs = api.load_runs(root / "sweep")
    frame = runs.frame
    assert len(runs) == len(frame) == 12 and not runs.skipped
    assert sorted(frame["lr.ref_lr"].unique()) == [3e-6, 3e-5]
    assert set(frame["state"]) <= {"completed", "failed"} and set(frame["group"]) == {"synthetic"}
    metrics = runs.metrics
    assert len(metrics) == frame["rows"].sum() and set(metrics["run"]) == set(frame["run"])
    assert {"responses", "eval/accuracy"} <= set(metrics.columns)
    only = api.load_runs(root / "sweep", filters={"lr.ref_lr": "3e-05"})
    assert len(only) == 6


def test_clocks_and_fits_equal_the_cli(study):
    root, out = study
    tables = api.clocks_table(api.load_runs(root / "sweep"), crossing="isotonic", ignore_keys=IGNORE)
    cli_runs = pd.read_csv(out / "runs.csv")
    mine = tables.runs.sort_values("run").reset_index(drop=True)
    cli_runs = cli_runs.sort_values("run").reset_index(drop=True)
    for column in ("condition", "B", "seed", "target:0.3", "target:0.3:censored", "failure"):
        assert mine[column].tolist() == cli_runs[column].tolist(), column
    fits = api.fit_conditions(tables, n_boot=50, seed=3)
    cli = pd.read_csv(out / "exponents.csv")
    columns = ["condition", "clock", "exponent", "ci_low", "ci_high", "n_runs", "n_censored"]
    pd.testing.assert_frame_equal(fits.exponents[columns], cli[columns], check_dtype=False)
    for condition in tables.runs["condition"].unique():
        one = api.fit_condition(tables, condition, n_boot=50, seed=3)
        assert set(one.exponents["condition"]) == {condition}
        full = fits.exponents[fits.exponents["condition"] == condition].reset_index(drop=True)
        pd.testing.assert_frame_equal(one.exponents[columns], full[columns])
        assert set(one.results) == {k for k in fits.results if k[0] == condition}
    with pytest.raises(ValueError, match="the conditions are: lr.ref_lr=3e-05, lr.ref_lr=3e-06"):
        api.fit_condition(tables, "lr.ref_lr=1")


def test_the_main_figure_equals_the_cli_one(study, tmp_path: Path):
    from PIL import Image

    root, out = study
    tables = api.clocks_table(api.load_runs(root / "sweep"), crossing="isotonic", ignore_keys=IGNORE)
    fits = api.fit_conditions(tables, n_boot=50, seed=3)
    (path,) = api.plot_exponents(tables, fits, "lr.ref_lr", out=tmp_path, dpi=60)
    assert path == tmp_path / "alpha_gamma_vs_eta_ref.png"
    with Image.open(path) as mine, Image.open(out / path.name) as cli:
        assert mine.size == cli.size
        assert np.array_equal(np.asarray(mine), np.asarray(cli))
    condition = sorted(tables.runs["condition"].unique())[0]
    names = {p.name for p in api.plot_condition(tables, fits, condition, out=tmp_path, dpi=60)}
    assert f"rt_vs_B_{condition}.png" in names and all((tmp_path / n).is_file() for n in names)
    with pytest.raises(ValueError, match="does not vary"):
        api.plot_exponents(tables, fits, "loss.clip", out=tmp_path)
