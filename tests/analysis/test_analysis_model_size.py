"""The model size N as a study axis: N per run (``analysis/data/model_size.py``) and the trends of α, γ and
B_crit per decade of N (``analysis/fits/trend_size.py``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.data.model_size import embedded_parameters, run_parameters
from analysis.synthetic import SyntheticSpec, write_sweep

# the embedded family (conf/model/embedded*.yaml): (hidden, layers, heads, intermediate)
FAMILY = {"embedded": (128, 4, 4, 512), "embedded_4m": (192, 6, 6, 768), "embedded_16m": (320, 10, 10, 1280)}
SIZES = (32, 64, 128, 256, 512)


def test_the_embedded_count_is_the_trainers_and_the_family_spans_a_decade():
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.models import build_embedded_model, build_tokenizer, count_parameters

    tok = build_tokenizer()
    counts = {}
    for name, (d, layers, heads, inter) in FAMILY.items():
        cfg = compose([f"model={name}"]).model
        assert (cfg.embedded.hidden_size, cfg.embedded.num_layers, cfg.embedded.num_heads) == (
            d,
            layers,
            heads,
        )
        assert cfg.embedded.intermediate_size == inter and cfg.embedded.hidden_size // heads == 32
        counts[name] = count_parameters(build_embedded_model(cfg.embedded, tok))
        blob = {"hidden_size": d, "num_layers": layers, "intermediate_size": inter}
        assert embedded_parameters(blob) == counts[name]
    assert counts["embedded"] == 1_062_528
    assert counts["embedded_16m"] >= 10 * counts["embedded"]
    assert (
        3 < counts["embedded_4m"] / counts["embedded"] < 5
        and 3 < counts["embedded_16m"] / counts["embedded_4m"] < 6
    )


def test_n_comes_from_the_summary_else_from_an_embedded_config():
    cfg = {
        "model": {
            "path": "embedded",
            "embedded": {"hidden_size": 128, "num_layers": 4, "intermediate_size": 512},
        }
    }
    assert run_parameters(cfg, {"model": {"parameters": 123}}) == 123
    assert run_parameters(cfg, None) == 1_062_528
    assert math.isnan(run_parameters({"model": {"path": "org/some-model"}}, {}))


def _specs(parameters, **kw):
    return [
        SyntheticSpec(
            sizes=SIZES,
            seeds=5,
            sigma=0.1,
            gamma=None,
            targets=(0.3, 0.4),
            budget=400000,
            overrides=(("model.embedded.hidden_size", d), ("model.embedded.num_layers", layers)),
            parameters=n,
            seed=k,
            b_noise=None,
            **{key: v[k] for key, v in kw.items()},
        )
        for k, (n, (d, layers)) in enumerate(zip(parameters, [(128, 4), (192, 6), (320, 10)]))
    ]


def _analyze(tmp_path, specs) -> pd.DataFrame:
    from analysis.cli import main as analyze

    write_sweep(tmp_path / "sweep", specs)
    out = tmp_path / "out"
    args = [str(tmp_path / "sweep"), "--out", str(out), "--bootstrap", "2000", "--no-plots", "--quiet"]
    assert analyze(args) == 0
    runs = pd.read_csv(out / "runs.csv")
    assert "model.parameters" in runs.columns
    assert "## Model size" in (out / "report.md").read_text()
    trend = pd.read_csv(out / "trend.csv")
    return trend[trend["key"] == "model.parameters"]


N = [1.06e6, 4.2e6, 1.64e7]


def test_the_trend_recovers_a_known_slope_of_alpha_per_decade_of_n(tmp_path):
    slope = 0.2  # truth: alpha rises by 0.2 per decade of N
    alphas = [0.15 + slope * math.log10(n / N[0]) for n in N]
    rows = _analyze(tmp_path, _specs(N, alpha=alphas))
    alpha_rows = rows[rows["clock"].str.startswith("target") | (rows["clock"] == "common")]
    assert set(alpha_rows["clock"]) == {"target:0.3", "target:0.4", "common"}
    for r in alpha_rows.itertuples():
        assert r.slope_low < slope < r.slope_high and r.trend == "rise", r
        assert r.values == " ".join(f"{n:g}" for n in N)


def test_the_trend_recovers_a_known_slope_of_log10_b_crit_per_decade_of_n(tmp_path):
    slope = 0.5  # truth: B_crit grows as N^0.5
    b_crits = [120.0 * (n / N[0]) ** slope for n in N]
    rows = _analyze(tmp_path, _specs(N, b_crit=b_crits))
    b_rows = rows[rows["clock"].str.startswith("b_crit:")]
    assert set(b_rows["clock"]) == {"b_crit:0.3", "b_crit:0.4"}
    for r in b_rows.itertuples():
        got = np.array(r.exponents.split(), float)
        assert got == pytest.approx(np.log10(b_crits), abs=0.35), r
        assert r.slope_low < slope < r.slope_high, r


def test_the_model_size_figure_draws_alpha_and_b_crit_against_n(tmp_path):
    from analysis.figures.plots_size import plot_size

    table = pd.DataFrame(
        [
            [f"c{i}", n, q, clock, v, v * 0.8, v * 1.25 if i else math.inf]
            for i, n in enumerate(N)
            for q, clock, v in [
                ("alpha", "target:0.3", 0.2 + 0.1 * i),
                ("b_crit", "target:0.3", 100.0 * 2**i),
            ]
        ],
        columns=["condition", "model.parameters", "quantity", "clock", "value", "ci_low", "ci_high"],
    )
    assert plot_size(tmp_path, table, formats=("png",)) == ["model_size.png"]
    assert (tmp_path / "model_size.png").stat().st_size > 1000
    assert plot_size(tmp_path, table[table["model.parameters"] == N[0]]) == []
    # γ rows without a value (no run failed) get no panel; a fitted γ does
    from analysis.figures.plots_size import panels

    empty = pd.DataFrame(
        [[f"c{i}", n, "gamma", "failure", math.nan, math.nan, math.nan] for i, n in enumerate(N)],
        columns=table.columns,
    )
    assert panels(pd.concat([table, empty])) == ["alpha", "b_crit"]
    assert panels(pd.concat([table, empty.assign(value=0.1)])) == ["alpha", "gamma", "b_crit"]
