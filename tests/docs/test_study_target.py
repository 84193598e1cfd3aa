"""`make study` and `make figures`: every command of the targets composes (rlvr-train lines are listed by
rlvr-grid, which starts nothing) or parses (rlvr-analyze), with the grid sizes docs/study.md states."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from analysis.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def target_commands(name: str, *variables: str) -> list[list[str]]:
    """The recipe lines of a Makefile target as make expands them (``make -n``, nothing run; the
    install prerequisite taken as done), the venv's ``bin/`` dropped; ``variables``: ``NAME=value``."""
    probe = ".venv-probe"
    out = subprocess.run(
        ["make", "-s", "-n", "-o", f"{probe}/.installed", name, f"VENV={probe}", *variables],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [shlex.split(line.replace(f"{probe}/bin/", "")) for line in out.splitlines() if line.strip()]


def test_study_target_runs_the_shipped_study_file_into_the_folder_it_analyses():
    import yaml

    from rlvr_study.study_file import parse_study

    commands = target_commands("study")
    study_cmd = [c for c in commands if c[0] == "rlvr-study"]
    # the study's own analysis is skipped: the target runs the one below (into results/study)
    assert study_cmd == [["rlvr-study", "studies/reference.yaml", "--no-analysis"]]
    study = parse_study(yaml.safe_load((REPO / "studies/reference.yaml").read_text()))
    analyze = [c for c in commands if c[0] == "rlvr-analyze"][0]
    assert analyze[1] == str(study.folder) == "runs/reference"
    # what docs/study.md states: four clipped eta_ref over a decade, the unclipped failure arm, 30
    # minutes, five pilot seeds in balanced rounds (seed-block intervals everywhere), a horizon per size
    # of every clipped condition fixed in the file (every replicate reads the same), under the two-stage
    # stop rule at assurance 0.8
    rates = sorted(float(c["lr.ref_lr"]) for c in study.conditions if c["loss"] == "clipped")
    assert len(rates) == 4 and rates[-1] / rates[0] >= 10 * 0.999
    assert [c.get("clock") for c in study.conditions if c["loss"] == "unclipped"] == ["failure"]
    assert study.budget_hours == 0.47 and study.width == 0.12 and study.failure_width == 0.6
    assert study.pilot_seeds == 5 and study.balanced
    horizons = study.preset_horizons()
    clipped = [i for i, c in enumerate(study.conditions) if c["loss"] == "clipped"]
    assert sorted(horizons) == clipped and all(
        isinstance(h, float) or sorted(h) == study.sizes for h in horizons.values()
    )
    assert study.stop_rule == "two_stage" and study.assurance == 0.8


def test_study_analysis_flags_parse():
    for name in ("study", "figures"):
        analyze = [c for c in target_commands(name) if c[0] == "rlvr-analyze"]
        assert len(analyze) == 1
        args = build_parser().parse_args(analyze[0][1:])
        assert args.crossing == "isotonic" and str(args.out) == "results/study"
        assert set(args.ignore_keys) == {"eval.targets", "noise.curvature_every_rollouts"}
        # read to the horizons the study fixed after its pilot (train.stop_at_targets is no condition key)
        assert args.horizon == "runs/reference/horizons.json"
    # a replicate's folder gets its own results folder, so no report overwrites another's
    for study, results in (("runs/reference-r1", "results/study-r1"), ("runs/other", "results/study-other")):
        commands = target_commands("study", f"STUDY={study}")
        analyze = [c for c in commands if c[0] == "rlvr-analyze"][0]
        assert analyze[1] == study and analyze[analyze.index("--out") + 1] == results
        assert commands[-1] == ["echo", f"report: {results}/report.md"]
    copied = [c[1] for c in target_commands("figures") if c[0] == "cp"]
    copied += [c[-1] for c in target_commands("figures") if "scripts/alpha_eta_figure.py" in c]
    assert any(p.endswith("alpha_vs_eta_ref.png") for p in copied)
    # what docs/study.md ("The reference study") shows is what the target writes
    study_md = (REPO / "docs" / "study.md").read_text()
    for path in copied:
        assert f"](figures/{Path(path).name})" in study_md, path
