"""`make study` and `make figures`: every command of the targets composes (rlvr-train lines are listed by
rlvr-grid, which starts nothing) or parses (rlvr-analyze), with the grid sizes the README states."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from analysis.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def target_commands(name: str) -> list[list[str]]:
    """The recipe lines of a Makefile target, with make's variables substituted."""
    text = (REPO / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_]+) \?= (.*)$", text, flags=re.M))
    recipe = re.search(rf"^{name}:.*\n((?:\t.*\n)+)", text, flags=re.M).group(1)
    out = []
    for line in recipe.splitlines():
        line = line.strip().lstrip("@")
        line = line.replace("$(VENV)/bin/", "").replace("$(ARGS)", "")
        line = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), ""), line)
        out.append(shlex.split(line))
    return out


def test_study_grids_compose_with_the_sizes_the_readme_states():
    commands = [c for c in target_commands("study") if c[0] == "rlvr-train"]
    assert len(commands) == 3
    sizes = []
    for argv in commands:
        assert argv[1] == "-m"
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr_scaling.cli.grid", "--json", *argv[2:]],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        jobs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert all(j["run_dir"].startswith("runs/study/") for j in jobs), jobs[0]
        sizes.append(len(jobs))
    # clipped 5 sizes x 2 eta_ref x 5 seeds; 10 more seeds at 3e-5; unclipped 5 x 2 x 3
    assert sizes == [50, 50, 30]


def test_study_analysis_flags_parse():
    for name in ("study", "figures"):
        analyze = [c for c in target_commands(name) if c[0] == "rlvr-analyze"]
        assert len(analyze) == 1
        args = build_parser().parse_args(analyze[0][1:])
        assert args.isotonic and str(args.out) == "results/study"
        assert set(args.ignore_keys) == {"eval.targets", "train.stop_at_targets"}
    copied = [c[1] for c in target_commands("figures") if c[0] == "cp"]
    readme = (REPO / "README.md").read_text()
    for path in copied:
        assert f"docs/figures/{Path(path).name}" in readme  # what the README shows is what it copies
