"""A pool of runs (``analysis/data/pool.py``) and the held-out coverage on it
(``benchmarks/calibration/pool_coverage.py``): real tiny runs packed and unpacked read back as the same
runs, byte-identical packs, thinner evaluations replayed from the per-problem record; the calibration
keeps truth and design seeds disjoint and covers a known exponent on synthetic runs."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.data.eval_records import problem_subset, read_eval_records, replay
from analysis.data.load import load_source
from analysis.data.pool import MANIFEST, POOL_FILES, pack, read_manifest, thinned, unpack
from analysis.synthetic import SyntheticSpec, simulate, write_run_dirs
from rlvr_scaling.run import train
from tests.conftest import tiny_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "calibration"))
import pool_coverage  # noqa: E402


@pytest.fixture(scope="module")
def tiny_runs(cache_dir, tmp_path_factory):
    """Two real tiny runs (seeds 0 and 1), evaluated every 16 responses with 2 samples per problem."""
    root = tmp_path_factory.mktemp("pool_src") / "sweep"
    for seed in (0, 1):
        cfg = tiny_config(cache_dir, **{"train.max_responses": 64, "eval.every_responses": 16, "seed": seed})
        cfg.eval.samples = 2
        cfg.eval.targets = [0.3, 0.6]
        train(cfg, root / f"seed={seed}", log=lambda *_: None)
    return root


def test_a_pool_reads_back_as_the_same_runs(tiny_runs, tmp_path):
    out = tmp_path / "pool.tar.xz"
    manifest = pack([tiny_runs], out, command="rlvr-train -m seed=0,1")
    assert manifest["runs"] == ["runs/sweep/seed=0", "runs/sweep/seed=1"]
    assert read_manifest(out)["command"] == "rlvr-train -m seed=0,1"
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert names[0] == MANIFEST and all(n == MANIFEST or n.split("/")[-1] in POOL_FILES for n in names)
    assert not any("checkpoints" in n for n in names) and (tiny_runs / "seed=0" / "checkpoints").is_dir()
    before = {r.run.split("/")[-1]: r for r in load_source(str(tiny_runs)).runs}
    after = {r.run.split("/")[-1]: r for r in load_source(str(unpack(out, tmp_path / "x"))).runs}
    assert sorted(before) == sorted(after) == ["seed=0", "seed=1"]
    for k in before:
        assert after[k].rows == before[k].rows and after[k].config == before[k].config
        assert after[k].status == before[k].status and after[k].summary == before[k].summary
    again = tmp_path / "again.tar.xz"
    pack([tiny_runs], again, command="rlvr-train -m seed=0,1")
    assert again.read_bytes() == out.read_bytes(), "packing is deterministic"


def test_bad_inputs_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no run directory"):
        pack([tmp_path / "empty"], tmp_path / "p.tar.xz")
    with tarfile.open(tmp_path / "plain.tar.xz", "w:xz") as tar:
        tar.add(tmp_path / "empty", arcname="empty")
    with pytest.raises(ValueError, match="not a pool"):
        unpack(tmp_path / "plain.tar.xz", tmp_path / "out")


def test_a_thinner_evaluation_is_the_replay_of_the_record(tiny_runs):
    (record,) = [r for r in load_source(str(tiny_runs)).runs if r.run.endswith("seed=0")]
    evals = [row for row in record.rows if "eval/accuracy" in row]
    assert len(evals) >= 4
    same = thinned(record)
    assert [r for r in same.rows if "eval/accuracy" in r] == evals
    rec = read_eval_records(record.path)
    subset = problem_subset(rec.problems, 5, seed=3)
    thin = thinned(record, subset, samples=1, every=2)
    got = [r for r in thin.rows if "eval/accuracy" in r]
    kept = sorted(set(range(0, len(evals), 2)) | {len(evals) - 1})
    assert [r["responses"] for r in got] == [evals[i]["responses"] for i in kept]
    want = replay(rec, subset, samples=1)["accuracy"].to_numpy()[kept]
    np.testing.assert_allclose([r["eval/accuracy"] for r in got], want)
    assert all(r["eval/responses"] == 5 for r in got)
    training = [r for r in record.rows if "eval/accuracy" not in r]
    assert [r for r in thin.rows if "eval/accuracy" not in r] == training
    # a record that does not match the run's evaluation rows is refused, not misread
    one_less = [r for r in record.rows if r is not evals[1]]
    moved = [{**r, "responses": r["responses"] + 1} if r is evals[1] else r for r in record.rows]
    for rows in (one_less, moved):
        assert thinned(dataclasses.replace(record, rows=rows)) is None


def test_held_out_coverage_keeps_seeds_apart_and_covers_a_known_exponent(tmp_path, capsys):
    spec = SyntheticSpec(alpha=0.3, gamma=None, sizes=(32, 64, 128, 256), seeds=8, targets=(0.3, 0.5), seed=5)
    write_run_dirs(simulate(spec), tmp_path / "runs")
    pool = tmp_path / "pool.tar.xz"
    pack([tmp_path / "runs"], pool)
    argv = ["--pool", str(pool), "--draws", "6", "--bootstrap", "200", "--jobs", "1", "--design-seeds", "3"]

    def coverage(name: str, *extra: str) -> tuple[pd.DataFrame, str]:
        """The coverage table and printout of one run of the script on the pool, truth from seeds 0-3."""
        out = tmp_path / f"{name}.csv"
        assert (
            pool_coverage.main(
                [*argv, "--truth-seeds", "0-3", "--crossing", "interval", *extra, "--out", str(out)]
            )
            == 0
        )
        return pd.read_csv(out), capsys.readouterr().out

    table, printed = coverage("coverage")
    assert set(table["clock"]) == {"target:0.3", "target:0.5", "common"}
    assert (table["draws"] == 6).all() and table["coverage"].between(0, 1).all()
    common = table.set_index("clock").loc["common"]
    assert (
        "3 seeds x B = [32, 64, 128, 256] per condition; one design of every condition costs 12 runs"
        in printed
    )
    # designs at the two end sizes only: 6 runs a design, the truth still from every size
    ends, printed = coverage("ends", "--design-sizes", "32", "256")
    assert "B = [32, 256] per condition; one design of every condition costs 6 runs" in printed
    narrow = ends.set_index("clock").loc["common"]
    assert narrow["truth"] == common["truth"] and narrow["median_width"] != common["median_width"]
    # designs read (and priced) to a shorter horizon than the truth's
    short, printed = coverage("short", "--design-horizon", "20000")
    assert "read to 20,000 responses" in printed
    assert short.set_index("clock").loc["common", "truth"] == common["truth"]
    # per-size horizons from each design's first two seeds: every design still identifies the common α
    sized, printed = coverage("sized", "--size-horizon-factor", "2")
    assert "per-size horizons (2 x the slowest crossing of the top target" in printed
    per_size = sized.set_index("clock").loc["common"]
    assert per_size["unidentified"] == 0 and per_size["truth"] == common["truth"]
    # the truth (4 seeds) is near the generating exponent, and the designs' intervals are wider than its
    assert abs(common["truth"] - 0.3) < common["truth_width"]
    assert common["median_width"] > common["truth_width"] * 0.8
    runs = pd.DataFrame(
        {"condition": "c", "seed": [s for s in range(8) for _ in range(4)], "B": [32, 64, 128, 256] * 8}
    )
    truth, design = pool_coverage.split(runs.iloc[:-1], set())  # seed 7 lacks B = 256: in neither half
    assert truth["c"] == {0, 1, 2, 3} and design["c"] == {4, 5, 6} and not truth["c"] & design["c"]
    assert json.loads(json.dumps(pool_coverage.parse_seeds("0-2,5"), default=sorted)) == [0, 1, 2, 5]


def test_each_draw_can_hold_out_its_own_truth_and_the_stop_rule_is_replayed(tmp_path, capsys):
    import stop_rule_coverage

    # two conditions (two rates): each condition's runs fitted alone are labelled by the tables, not by
    # the pool's condition name, and the replay must still find them
    for lr, alpha in ((1e-5, 0.3), (3e-5, 0.3)):
        spec = SyntheticSpec(
            alpha=alpha, gamma=None, sizes=(32, 64, 128, 256), seeds=8, targets=(0.3, 0.5), seed=5,
            overrides=(("lr.ref_lr", lr),),
        )  # fmt: skip
        write_run_dirs(simulate(spec), tmp_path / "runs")
    pool = str(tmp_path / "pool.tar.xz")
    pack([tmp_path / "runs"], pool)
    common = ["--pool", pool, "--bootstrap", "200", "--jobs", "1", "--crossing", "interval"]
    out = tmp_path / "complement.csv"
    argv = [*common, "--truth", "complement", "--draws", "4", "--design-seeds", "3", "--out", str(out)]
    assert pool_coverage.main(argv) == 0
    printed = capsys.readouterr().out
    assert "truth seeds the 5 seeds each design leaves" in printed and "draws take 3: 56 distinct" in printed
    table = pd.read_csv(out)
    table = table[table["condition"].str.contains("1e-05")].set_index("clock")
    assert (table["draws"] == 4).all()
    assert abs(table.loc["common", "truth"] - 0.3) < table.loc["common", "truth_width"]
    # the stop rule: width 0 is never met (every draw ends with all 4 design seeds), width 10 at the first
    # look (2 seeds); each coverage is then that of the fixed design it stopped on
    out = tmp_path / "stop.csv"
    argv = [*common, "--truth-seeds", "0-3", "--start-seeds", "2", "--widths", "0", "10", "--draws", "3"]
    assert stop_rule_coverage.main([*argv, "--out", str(out)]) == 0
    assert "looks at 2..4 seeds" in capsys.readouterr().out
    stop = pd.read_csv(out)
    assert len(stop) == 4 and stop["coverage"].notna().all()  # two conditions, two widths
    stop = stop[stop["condition"].str.contains("1e-05")].set_index("width")
    assert stop.loc[0, "met"] == 0 and stop.loc[0, "mean_seeds"] == 4 and stop.loc[10, "met"] == 1
    assert stop.loc[10, "mean_seeds"] == 2 and (stop["draws"] == 3).all()
    assert stop.loc[0, "coverage"] == stop.loc[0, "coverage_all"]
    assert stop.loc[10, "coverage"] == stop.loc[10, "coverage_start"]
    # a truth per draw: looks at 2..3 seeds of all 8, the truth from the 5 after them
    argv = [*common, "--truth", "complement", "--start-seeds", "2", "--max-seeds", "3", "--widths", "0", "10"]
    assert stop_rule_coverage.main([*argv, "--draws", "3", "--out", str(out)]) == 0
    assert "truth seeds the 5 seeds after each draw's last look" in capsys.readouterr().out
    stop = pd.read_csv(out)
    assert len(stop) == 4
    stop = stop[stop["condition"].str.contains("3e-05")].set_index("width")
    assert stop.loc[0, "mean_seeds"] == 3 and stop.loc[10, "mean_seeds"] == 2
    assert (stop["rule"] == "sequential").all()
    assert stop["agree"].isna().all()  # no second study asked
    argv += ["--rules", "sequential", "two_stage", "--replicates"]
    assert stop_rule_coverage.main([*argv, "--draws", "3", "--out", str(out)]) == 0
    both = pd.read_csv(out)
    assert len(both) == 8 and set(both["rule"]) == {"sequential", "two_stage"}
    # the held-out 5 seeds ran the rule too: an agreement share per row, a share of 3 draws
    assert both["agree"].between(0, 1).all() and set((both["agree"] * 3).round(6)) <= {0, 1, 2, 3}
    assert (both.loc[both["width"] == 0, "both_met"] == 0).all()
    # at width 0 both rules take every look; the two-stage rule's coverage is the last look's
    at0 = both[both["width"] == 0].set_index(["condition", "rule"])["coverage"]
    assert (both[both["width"] == 0]["mean_seeds"] == 3).all()
    assert at0.xs("two_stage", level="rule").tolist() == at0.xs("sequential", level="rule").tolist()
    assert abs(stop.loc[0, "truth"] - 0.3) < stop.loc[0, "truth_width"]
    prefixes = [(5, 0.3, 0.1, 0.5), (6, 0.32, 0.2, 0.45), (7, 0.31, 0.25, 0.37)]
    assert stop_rule_coverage.stopped(prefixes, 0.25) == ((6, 0.32, 0.2, 0.45), True)
    assert stop_rule_coverage.stopped(prefixes, 0.05) == ((7, 0.31, 0.25, 0.37), False)
    # two-stage: the seeds fixed at the first look (width 0.4 on 5 seeds) whatever the later widths
    # (rlvr_study.two_stage.seeds_for), capped at the last look (7). Median width (assurance 0.5):
    # W = 0.36 -> 6 seeds (met there, though the sequential rule would stop there too); 0.3 -> 7.
    # Assurance 0.8 asks for more: 0.38 -> 7; 0.26 -> 10, 7 reached: 0.12 wide there, but short of its
    # plan it claims nothing; 0.1 -> 20, not met; at W >= 0.4 the first look. A width is claimed met
    # only at the seeds it planned
    assert stop_rule_coverage.planned(prefixes, 0.36, 0.5) == ((6, 0.32, 0.2, 0.45), True)
    assert stop_rule_coverage.planned(prefixes, 0.3, 0.5) == ((7, 0.31, 0.25, 0.37), True)
    assert stop_rule_coverage.planned(prefixes, 0.38) == ((7, 0.31, 0.25, 0.37), True)
    assert stop_rule_coverage.planned(prefixes, 0.26) == ((7, 0.31, 0.25, 0.37), False)
    assert stop_rule_coverage.planned(prefixes, 0.1) == ((7, 0.31, 0.25, 0.37), False)
    assert stop_rule_coverage.planned(prefixes, 0.4) == ((5, 0.3, 0.1, 0.5), True)
    # where the sequential rule stops on the first narrow look, the two-stage rule does not look
    assert stop_rule_coverage.stopped(prefixes, 0.26) == ((6, 0.32, 0.2, 0.45), True)
    assert stop_rule_coverage.planned(prefixes, 0.26, 0.5) == ((7, 0.31, 0.25, 0.37), False)  # plans 8
    # an unbounded first look: the study's 4 n0 seeds, capped at the last look
    assert stop_rule_coverage.planned([(5, 0.3, -np.inf, 0.5), *prefixes[1:]], 1.0)[0][0] == 7


def test_a_truth_per_draw_is_what_each_draw_is_checked_against():
    truth_of = pool_coverage.TRUTH
    draws = [
        {"c|common": (0.3, 0.2, 0.4), truth_of: {"c|common": (0.25, 0.2, 0.3)}},  # held
        {"c|common": (0.3, 0.2, 0.4), truth_of: {"c|common": (0.5, 0.4, 0.6)}},  # missed
        {
            "c|common": (0.3, 0.2, 0.4),
            truth_of: {"c|common": (np.nan, np.nan, np.nan)},
        },  # no truth: not counted
    ]
    row = pool_coverage.summarise(None, draws).iloc[0]
    assert row["draws"] == 2 and row["coverage"] == 0.5 and row["truth"] == pytest.approx(0.375)
    assert row["bias"] == pytest.approx(-0.075) and row["truth_width"] == pytest.approx(0.15)


def test_joint_coverage_counts_the_truths_own_noise():
    # equal exact widths: the points 1.3 half-widths apart are inside the joint band (1.96 * sqrt 2 ses)
    # though the truth is outside the design's interval
    design, truth = (0.30, 0.20, 0.40), (0.17, 0.07, 0.27)
    assert not design[1] <= truth[0] <= design[2]
    assert pool_coverage._joint_hit(design, truth)
    assert not pool_coverage._joint_hit((0.50, 0.40, 0.60), truth)
    # an unidentified truth interval falls back to the plain check
    assert pool_coverage._joint_hit((0.3, 0.2, 0.4), (0.25, -np.inf, np.inf))
    # an exact interval against a truth half as variable: about 89 %; a noiseless truth: 95 %
    assert pool_coverage._expected(0.1 / np.sqrt(2), 0.1) == pytest.approx(0.890, abs=0.002)
    assert pool_coverage._expected(0.0, 0.1) == pytest.approx(0.95, abs=0.001)


def test_thinner_evaluations_are_compared_bracket_by_bracket(tiny_runs, capsys):
    import eval_brackets

    from analysis.data.pool import sparse_points

    acc = np.array([0.1, 0.12, 0.2, 0.26, 0.27, 0.3, 0.31, 0.4, 0.41])
    # every 3rd point, dense while the last evaluation is within 0.05 of an unreached target (0.3)
    assert sparse_points(acc, [0.3], 3, 0.05).tolist() == [0, 3, 4, 5, 6, 8]
    assert sparse_points(acc, [0.3], 3, 0.0).tolist() == [0, 3, 6, 8]
    out = tiny_runs.parent / "brackets.csv"
    assert (
        eval_brackets.main(
            ["--runs", str(tiny_runs), "--designs", "0:2:1", "0:2:2", "0:1:1", "--out", str(out)]
        )
        == 0
    )
    table = pd.read_csv(out).set_index("design")
    # the full evaluation replayed is the full evaluation: every bracket agrees, at the full cost
    assert table.loc["all:2:1", "agreement"] == 1.0 and table.loc["all:2:1", "eval_cost"] == 1.0
    assert table.loc["all:2:1", "wall_cost"] == pytest.approx(1.0)
    assert table.loc["all:1:1", "eval_cost"] == 0.5 and table.loc["all:2:2", "eval_cost"] < 0.7
    assert (table["pairs"] == table[list(eval_brackets.OUTCOMES)].sum(axis=1)).all()
    assert (table["pairs"] == 2 * 2).all()  # two runs, two targets


def test_per_size_horizons_come_from_the_pilot_seeds_only():
    from analysis.data.records import RunRecord

    def run(name, seed):
        rows = [{"responses": r, "wall_seconds": r / 100} for r in range(0, 4097, 64)]
        return RunRecord(run=name, path="", source="dir", config={"seed": seed}, rows=rows)

    records = [run("a0", 0), run("a1", 1), run("a2", 2), run("b0", 0)]
    key_of = {"a0": ("c", 0), "a1": ("c", 1), "a2": ("c", 2), "b0": ("d", 0)}
    # B, crossing of the top target (NaN: censored), the pool's horizon
    top = {
        "a0": (64.0, 700.0, 4096.0),
        "a1": (64.0, 900.0, 4096.0),
        "a2": (64.0, 3000.0, 4096.0),
        "b0": (64.0, math.nan, 4096.0),
    }
    pilot = {("c", 0), ("c", 1), ("d", 0)}
    out, hours = pool_coverage.size_horizons(records, top, pilot, key_of, 2.0)
    # condition c: 2 x 900 = 1800 -> 1856, whole rollouts of 64, for every seed (a2's later crossing is
    # censored there); condition d's pilot did not cross: the pool's horizon
    assert [r.config["eval"]["horizon"] for r in out] == [1856, 1856, 1856, 4096]
    assert [r.rows[-1]["responses"] for r in out] == [1856, 1856, 1856, 4096]
    assert hours == pytest.approx((3 * 18.56 + 40.96) / 3600)
    # evaluations a thinner schedule skips are not paid for, those past the horizon were never run
    skipped = {"a0": [(64.0, 1.0), (3000.0, 9.0)]}
    _, thinner = pool_coverage.size_horizons(records, top, pilot, key_of, 2.0, skipped)
    assert thinner == pytest.approx(hours - 1.0 / 3600)
    original = records[0]
    thin = dataclasses.replace(
        original, rows=[{**r, "eval/accuracy": 0.1, "perf/eval_s": 0.5} for r in original.rows[:3]]
    )
    full = dataclasses.replace(
        original, rows=[{**r, "eval/accuracy": 0.1, "perf/eval_s": 0.5} for r in original.rows]
    )
    assert pool_coverage.skipped_seconds(full, thin) == [(float(r), 0.5) for r in range(192, 4097, 64)]
