"""Every command shown in README.md and docs/*.md is run, composed, or mapped to what exercises it.

Commands are taken from the fenced shell blocks (```bash, ```sh, ```console, and plain ``` blocks for
lines that start with a known program) and from inline code spans that start with ``rlvr-train``,
``rlvr-grid``, ``rlvr-analyze`` or ``make``. Each one gets exactly one coverage from :data:`RULES`
(first match wins):

- ``compose``: an ``rlvr-train`` command (also through ``make run ARGS=``, torchrun or another venv)
  is composed as Hydra composes it, every job of a grid listed and its first and last job validated;
- ``run``: cheap commands run for real in a scratch directory (``rlvr-grid``, ``--cfg``/``--info``
  commands, ``python -m analysis.synthetic``, ``rlvr-analyze`` on run directories: on the ones an
  earlier command of the same block made, else on a synthetic sweep, with the documented flags);
- ``ci``: run by ``.ci/run`` (the line must be there);
- ``test``: exercised by a named test (the test must exist);
- ``pyproject``: an install line whose extra or pin must be the one pyproject.toml declares;
- ``script``: a benchmark or experiment (minutes of CPU; not run here): the script must exist and
  declare every documented ``--flag``.

A documented command that matches no rule fails :func:`test_every_documented_command_is_covered`:
cover it by adding a rule (or a test). ``python tests/docs/test_doc_commands.py`` prints the table.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
PROGRAMS = {
    "rlvr-train",
    "rlvr-grid",
    "rlvr-analyze",
    "rlvr-plan",
    "rlvr-study",
    "make",
    "python",
    "torchrun",
    "bash",
    "pip",
    "cp",
}
INLINE_PROGRAMS = {"rlvr-train", "rlvr-grid", "rlvr-analyze", "rlvr-plan", "rlvr-study", "make"}
PLACEHOLDER = "..."  # `rlvr-train -m ... slurm=gpu_2x8`: the rest of the command still composes


@dataclasses.dataclass(frozen=True)
class Command:
    doc: str  # path relative to the repository
    line: int
    text: str  # one simple command, comment and `sudo` removed
    block: str  # commands of one fenced block share it (run in order, in one scratch directory)

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


# ------------------------------------------------------------------------------------------ extraction
def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _split_simple(line: str) -> list[str]:
    """``a && b; c`` -> [a, b, c] (outside quotes)."""
    parts, quote, start, i = [], None, 0, 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif line.startswith(("&&", "||"), i) or ch == ";":
            parts.append(line[start:i])
            i += 1 if ch == ";" else 2
            start = i
            continue
        i += 1
    parts.append(line[start:])
    return [p.strip() for p in parts if p.strip()]


def _normalise(text: str) -> str:
    text = text.strip()
    if text.startswith("$ "):
        text = text[2:]
    if text.startswith("sudo "):
        text = text[5:]
    return text.strip()


def extract(text: str, doc: str) -> list[Command]:
    """The commands of one Markdown document (see the module docstring for what counts)."""
    out: list[Command] = []
    lines = text.splitlines()
    fence = None
    lang = ""
    block_id = ""
    pending = ""
    pending_line = 0
    for n, raw in enumerate(lines, 1):
        stripped = raw.strip()
        opening = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
        if fence is None and opening:
            fence, lang, block_id = opening.group(1), opening.group(2).lower(), f"{doc}:{n}"
            continue
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip("`~") == "":
                fence = None
                continue
            if lang not in SHELL_LANGS and lang != "":
                continue
            if pending:
                stripped = pending + " " + stripped
            else:
                pending_line = n
            if stripped.endswith("\\"):
                pending = stripped[:-1].rstrip()
                continue
            pending = ""
            line = _strip_comment(stripped)
            for part in _split_simple(line):
                part = _normalise(part)
                if not part:
                    continue
                first = Path(part.split()[0]).name
                if lang == "" and first not in PROGRAMS and not re.match(r"^[A-Z_]+=", part):
                    continue  # a plain block that shows output or a tree, not commands
                out.append(Command(doc, pending_line, part, block_id))
            continue
        for span in re.findall(r"`([^`\n]+)`", raw):
            tokens = span.split()
            if len(tokens) >= 2 and tokens[0] in INLINE_PROGRAMS:
                out.append(Command(doc, n, _normalise(span), f"{doc}:{n}:inline"))
    return out


def documented_commands() -> list[Command]:
    return [c for path in DOCS for c in extract(path.read_text(), str(path.relative_to(REPO)))]


# ------------------------------------------------------------------------------------------- coverage
@dataclasses.dataclass(frozen=True)
class Coverage:
    kind: str  # compose | run | ci | test | pyproject | script
    target: str  # what exercises it
    why: str = ""


def _hydra_args(argv: list[str]) -> list[str] | None:
    """The rlvr-train arguments of a command that starts rlvr-train, or None."""
    prog = Path(argv[0]).name
    if prog == "rlvr-train":
        return argv[1:]
    if prog == "make" and len(argv) >= 2 and argv[1] == "run":
        extra = [a[len("ARGS=") :] for a in argv[2:] if a.startswith("ARGS=")]
        return shlex.split(extra[0]) if extra else []
    if "-m" in argv and "rlvr_scaling.cli.train" in argv and prog in ("torchrun", "python", "python3"):
        return argv[argv.index("rlvr_scaling.cli.train") + 1 :]
    return None


def _script_path(argv: list[str]) -> str | None:
    """``[ENV=x ...] python <script.py> ...`` -> the script."""
    args = [a for a in argv if not re.match(r"^[A-Z_][A-Z0-9_]*=", a)]
    if len(args) >= 2 and Path(args[0]).name in ("python", "python3") and args[1].endswith(".py"):
        return args[1]
    return None


Rule = tuple[str, Callable[[Command], Coverage | None]]


def _regex(pattern: str, coverage: Coverage) -> Callable[[Command], Coverage | None]:
    return lambda cmd: coverage if re.search(pattern, cmd.text) else None


def _hydra_rule(cmd: Command) -> Coverage | None:
    args = _hydra_args(cmd.argv)
    if args is None:
        return None
    if any(a.startswith(("--cfg", "--info", "--help", "-c", "-p")) for a in args):
        return Coverage("run", "subprocess in a scratch directory (prints, starts nothing)")
    extra = ""
    if Path(cmd.argv[0]).name == "torchrun":
        extra = "; data-parallel runs under torchrun: tests/distributed/test_data_parallel.py"
    elif cmd.argv[0].startswith(".venv-vllm/"):
        extra = "; the vLLM venv's rlvr-train: .ci/run runs tests/vllm there"
    elif cmd.argv[0] == "make":
        extra = "; `make -n run` has the target"
    return Coverage(
        "compose", "Hydra: the grid's jobs listed, the first and last composed and validated" + extra
    )


def _grid_rule(cmd: Command) -> Coverage | None:
    if Path(cmd.argv[0]).name == "rlvr-grid":
        return Coverage("run", "rlvr-grid in a scratch directory (lists, starts nothing)")
    return None


def _analyze_rule(cmd: Command) -> Coverage | None:
    argv = cmd.argv
    if Path(argv[0]).name != "rlvr-analyze":
        return None
    if len(argv) > 1 and argv[1].startswith("wandb:"):
        return Coverage(
            "test",
            "tests/analysis/test_analysis_wandb.py::test_api_path_gives_the_same_tables",
            "the wandb API needs a server; the test serves the same runs through a stand-in API",
        )
    if "--to-wandb" in argv:
        return Coverage(
            "test",
            "tests/analysis/test_analysis_to_wandb.py::test_tables_images_and_report_artifact",
            "logs to wandb: the test runs it offline and reads the run back",
        )
    if "wandb-offline" in argv:
        return Coverage(
            "test", "tests/analysis/test_analysis_wandb.py::test_offline_round_trip_gives_the_same_tables"
        )
    return Coverage(
        "run", "rlvr-analyze with these flags on the block's run directories, or a synthetic sweep"
    )


def _plan_rule(cmd: Command) -> Coverage | None:
    if Path(cmd.argv[0]).name == "rlvr-plan":
        return Coverage(
            "run", "rlvr-plan with these flags on the block's run directories, or a synthetic sweep"
        )
    return None


def _make_rule(cmd: Command) -> Coverage | None:
    argv = cmd.argv
    if argv[0] != "make" or len(argv) < 2:
        return None
    target = argv[1]
    if target in ("test", "install"):
        return Coverage("ci", f"make {target}")
    if target == "lint":
        return Coverage("ci", "make lint")
    if target == "test-oldest":
        return Coverage("ci", "make test-oldest")
    if target == "gpu-wheels":
        return Coverage("ci", "make gpu-wheels")
    if target == "study":
        return Coverage(
            "test",
            "tests/docs/test_study_target.py::test_study_target_runs_the_shipped_study_file_into_the_folder_it_analyses",
            "its study file validated and its pilot composed by tests/study (~34 minutes of CPU to run)",
        )
    if target == "figures":
        return Coverage("test", "tests/docs/test_study_target.py::test_study_analysis_flags_parse")
    if target == "bench":
        return Coverage("script", "benchmarks/speed/cycle.py", "make bench runs it; minutes of CPU")
    return None


def _script_rule(cmd: Command) -> Coverage | None:
    script = _script_path(cmd.argv)
    if script is None:
        return None
    if script.startswith(("benchmarks/", "experiments/")):
        return Coverage("script", script, "a benchmark or experiment (minutes of CPU); not run by the tests")
    return None


RULES: list[Rule] = [
    ("hydra", _hydra_rule),
    ("rlvr-grid", _grid_rule),
    ("rlvr-analyze", _analyze_rule),
    ("rlvr-plan", _plan_rule),
    (
        "rlvr-study",
        lambda c: (
            None
            if c.argv[0] != "rlvr-study"
            else Coverage(
                "test",
                "tests/study/test_study_rounds.py::test_shipped_study_files_validate_and_compose",
                "composed, the pilot's commands printed; nothing runs",
            )
            if "--dry-run" in c.argv
            else Coverage(
                "test",
                "tests/study/test_study_e2e.py::test_a_study_runs_in_rounds_and_resumes_after_an_interruption",
                "rounds of real runs on the tiny model, interrupted and resumed",
            )
        ),
    ),
    ("make", _make_rule),
    (
        "synthetic",
        _regex(r"^python -m analysis\.synthetic ", Coverage("run", "in the block's scratch directory")),
    ),
    (
        "pool",
        _regex(
            r"^python -m analysis\.data\.pool (pack|unpack) ",
            Coverage("test", "tests/analysis/test_pool.py::test_a_pool_reads_back_as_the_same_runs"),
        ),
    ),
    ("benchmarks", _script_rule),
    (
        "local cluster",
        lambda c: (
            Coverage("ci", f"slurm/local_cluster.sh {m.group(2)}")
            if (
                m := re.fullmatch(
                    r'(?:eval "\$\()?(bash )?slurm/local_cluster\.sh (install|start|env|stop)\)?"?', c.text
                )
            )
            else None
        ),
    ),
    (
        "cluster status",
        _regex(
            r"^(bash )?slurm/local_cluster\.sh status$",
            Coverage("test", "tests/slurm/test_local_cluster_script.py::test_status_lists_every_daemon"),
        ),
    ),
    (
        "cluster clean",
        _regex(
            r"^(bash )?slurm/local_cluster\.sh clean$",
            Coverage(
                "test", "tests/slurm/test_local_cluster_script.py::test_clean_deletes_only_its_scratch_dir"
            ),
        ),
    ),
    (
        "sinfo",
        _regex(
            r"^sinfo$",
            Coverage(
                "test", "tests/slurm/slurm_utils.py::cluster_unavailable_reason", "before every SLURM test"
            ),
        ),
    ),
    (
        "slurm tests",
        _regex(
            r"^python -m pytest tests/slurm( |$)",
            Coverage("ci", "make test", "the suite includes tests/slurm"),
        ),
    ),
    (
        "real-model tests",
        _regex(
            r"^python -m pytest -m real_model tests/real_model$",
            Coverage(
                "ci", "make test", "the suite includes tests/real_model (make install installs the weights)"
            ),
        ),
    ),
    (
        "site file",
        _regex(
            r"^cp slurm/local\.example\.yaml slurm/local\.yaml$",
            Coverage("test", "tests/slurm/test_slurm_presets.py::test_example_site_file_is_valid"),
        ),
    ),
    (
        "gpu check smoke",
        _regex(
            r"^(bash )?scripts/gpu_check\.sh --cpu-smoke$", Coverage("ci", "scripts/gpu_check.sh --cpu-smoke")
        ),
    ),
    (
        "gpu check",
        _regex(
            r"^(bash )?scripts/gpu_check\.sh$",
            Coverage(
                "ci",
                "scripts/gpu_check.sh --cpu-smoke",
                "needs a GPU node; CI runs the same script path with --cpu-smoke",
            ),
        ),
    ),
    (
        "warm-start asset",
        _regex(
            r"^python scripts/build_embedded_asset\.py( |$)",
            Coverage(
                "test",
                "tests/core/test_embedded_asset.py::test_the_recipe_still_produces_the_shipped_model",
                "the script's composition and the recipe's first steps; a full build is minutes of CPU",
            ),
        ),
    ),
    (
        "replicates",
        _regex(
            r"^python -m analysis\.replicates results/\S+ results/\S+$",
            Coverage(
                "test",
                "tests/analysis/test_replicates.py::test_two_replicates_are_compared_quantity_by_quantity",
                "needs two studies' results (an hour of CPU); the test runs it on written result folders",
            ),
        ),
    ),
    (
        "vllm install",
        _regex(
            r"^bash scripts/install_vllm_cpu\.sh \.venv-vllm$",
            Coverage("ci", "scripts/install_vllm_cpu.sh .venv-vllm"),
        ),
    ),
    (
        "pip extra",
        _regex(r'^pip install -e "?\.\[(\w+)\]"?$', Coverage("pyproject", "optional-dependencies")),
    ),
    ("pip pin", _regex(r"^pip install [\w-]+==[\w.]+$", Coverage("pyproject", "a pinned requirement"))),
]


def coverage_of(cmd: Command) -> tuple[str, Coverage] | None:
    for name, rule in RULES:
        found = rule(cmd)
        if found is not None:
            return name, found
    return None


# --------------------------------------------------------------------------------------------- tests
COMMANDS = documented_commands()


def _ids(cmds: list[Command]) -> list[str]:
    return [f"{c.doc}:{c.line}:{c.text[:60]}" for c in cmds]


def test_the_documents_show_commands():
    docs = {c.doc for c in COMMANDS}
    assert "README.md" in docs and "docs/slurm.md" in docs
    assert any(c.text == "rlvr-train -m sweeps=demo slurm=local_cluster" for c in COMMANDS)


def test_extraction():
    md = (
        "Text with `rlvr-train seed=1` and `rlvr-train` and `rlvr-train: config error`.\n"
        "```bash\n"
        "make run   # a comment\n"
        "# a comment line\n"
        "bash a.sh install && bash a.sh start; sinfo\n"
        'eval "$(bash a.sh env)"   # exports X # twice\n'
        "rlvr-train -m sweeps=demo \\\n"
        "    seed=0,1\n"
        "sudo slurm/x.sh stop\n"
        "```\n"
        "```python\nimport os\n```\n"
        "```\nrlvr-train rollout=vllm    # plain block, a known program\nconf/ --> trainer\n```\n"
    )
    got = [(c.line, c.text) for c in extract(md, "x.md")]
    assert got == [
        (1, "rlvr-train seed=1"),
        (3, "make run"),
        (5, "bash a.sh install"),
        (5, "bash a.sh start"),
        (5, "sinfo"),
        (6, 'eval "$(bash a.sh env)"'),
        (7, "rlvr-train -m sweeps=demo seed=0,1"),
        (9, "slurm/x.sh stop"),
        (15, "rlvr-train rollout=vllm"),
    ]


def test_an_unknown_command_is_not_covered():
    """What makes the coverage test fail for a newly documented command nothing exercises."""
    assert coverage_of(Command("x.md", 1, "frobnicate --all", "b")) is None
    assert coverage_of(Command("x.md", 1, "python scripts/new_tool.py", "b")) is None
    assert coverage_of(Command("x.md", 1, "rlvr-train -m sweeps=new lr=linear", "b"))[1].kind == "compose"
    assert coverage_of(Command("x.md", 1, "rlvr-analyze runs/x --clock tokens", "b"))[1].kind == "run"


def test_every_documented_command_is_covered():
    ci = (REPO / ".ci" / "run").read_text()
    ci_lines = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
    pyproject = (REPO / "pyproject.toml").read_text()
    missing, broken = [], []
    for cmd in COMMANDS:
        found = coverage_of(cmd)
        if found is None:
            missing.append(str(cmd))
            continue
        _, cov = found
        if cov.kind == "ci" and not any(cov.target in line for line in ci_lines):
            broken.append(f"{cmd}: .ci/run does not run {cov.target!r}")
        elif cov.kind == "test":
            path, _, name = cov.target.partition("::")
            source = (REPO / path).read_text() if (REPO / path).is_file() else ""
            if not re.search(rf"^def {re.escape(name)}\(", source, re.M):
                broken.append(f"{cmd}: {cov.target} does not exist")
        elif cov.kind == "script":
            script = REPO / cov.target
            flags = [a.split("=")[0] for a in cmd.argv if a.startswith("--")]
            text = script.read_text() if script.is_file() else ""
            if not text:
                broken.append(f"{cmd}: {cov.target} does not exist")
            for flag in flags:
                if f'"{flag}"' not in text:
                    broken.append(f"{cmd}: {cov.target} has no option {flag}")
        elif cov.kind == "pyproject":
            if m := re.search(r"\.\[(\w+)\]", cmd.text):
                if not re.search(rf"^{m.group(1)} = \[", pyproject, re.M):
                    broken.append(f"{cmd}: pyproject.toml has no extra {m.group(1)!r}")
            elif (pin := cmd.argv[-1]) not in pyproject:
                broken.append(f"{cmd}: pyproject.toml does not pin {pin}")
    assert not missing, (
        "documented commands no rule covers (add a rule in tests/docs/test_doc_commands.py):\n"
        + "\n".join(missing)
    )
    assert not broken, "\n".join(broken)


def test_documented_analyze_flags_parse():
    """Every rlvr-analyze command, the wandb ones included, parses with rlvr-analyze's own parser."""
    from analysis.cli import build_parser

    parser = build_parser()
    commands = [c for c in COMMANDS if Path(c.argv[0]).name == "rlvr-analyze"]
    assert commands
    for cmd in commands:
        try:
            parser.parse_args(cmd.argv[1:])
        except SystemExit:
            pytest.fail(f"{cmd}: rlvr-analyze rejects these arguments")


def test_every_linked_figure_and_file_exists():
    """Every image and relative link of README.md and docs/*.md points to a file of the repository."""
    missing = []
    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            target = target.split("#")[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue  # an anchor in the page, or a URL
            if not (path.parent / target).exists():
                missing.append(f"{path.relative_to(REPO)}: {target}")
    assert not missing, missing
    assert any(
        "figures/" in t for t in re.findall(r"\]\(([^)]+)\)", (REPO / "docs" / "study.md").read_text())
    )


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README.md has no section {heading!r}"
    return match.group(1)


def test_the_readme_is_a_short_way_in():
    """README.md: at most 200 lines, a code map whose every path exists, an index of every docs/ page."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for command in ("make run", "make test", "rlvr-train", "rlvr-analyze", "rlvr-plan", "rlvr-study"):
        assert command in _section(readme, "Typical sessions") + _section(readme, "Set up"), command
    rows = re.findall(r"^\| (`[^|]*) \|", _section(readme, "Code map"), re.M)
    assert len(rows) >= 10 and "rlvr_scaling/trainer.py" in " ".join(rows)
    for cell in rows:
        paths = re.findall(r"`([^`]+)`", cell)
        base = REPO / Path(paths[0].split("{")[0]).parent
        for path in paths:
            head, _, rest = path.partition("{")
            names, _, tail = rest.partition("}")
            for expanded in [head + n + tail for n in names.split(",")] if rest else [path]:
                found = [*REPO.glob(expanded), *base.glob(expanded)]
                assert found, f"code map: {expanded} names no file"
    index = _section(readme, "Documentation")
    pages = sorted(p.name for p in (REPO / "docs").iterdir() if p.suffix in (".md", ".ipynb"))
    assert pages and all(f"`docs/{name}`" in index for name in pages), pages


def test_documented_make_targets_exist():
    targets = sorted({c.argv[1] for c in COMMANDS if c.argv[0] == "make" and len(c.argv) > 1})
    assert targets
    for target in targets:
        proc = subprocess.run(
            ["make", "-n", "-C", str(REPO), target], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, f"make {target}: {proc.stderr}"


# ----------------------------------------------------------------------------------- composition
def _hydra_overrides(cmd: Command) -> list[str]:
    args = _hydra_args(cmd.argv) or []
    return [a for a in args if a != PLACEHOLDER and not a.startswith("-")]


COMPOSED = sorted(
    {
        tuple(_hydra_overrides(c)): c
        for c in reversed(COMMANDS)
        if (cov := coverage_of(c)) and cov[1].kind == "compose"
    }.items()
)


@pytest.mark.parametrize("overrides,cmd", COMPOSED, ids=[str(c) for _, c in COMPOSED])
def test_documented_training_commands_compose(overrides, cmd):
    from rlvr_scaling.cli.compose import compose
    from rlvr_scaling.cli.grid import sweep_jobs
    from rlvr_scaling.config import validate
    from rlvr_scaling.errors import ConfigError

    plain = [o for o in overrides if "," not in o or o.startswith(("eval.targets=", "+"))]
    base = compose(plain, hydra=True)
    jobs = sweep_jobs(list(overrides), base=base)
    args = _hydra_args(cmd.argv) or []
    multirun = bool({"-m", "--multirun"} & set(args)) or str(base.hydra.mode) == "RunMode.MULTIRUN"
    assert multirun or len(jobs) == 1, f"{cmd}: a grid without -m"
    for job in {tuple(jobs[0]), tuple(jobs[-1])}:
        typed = compose(job)
        try:
            validate(typed)
        except ConfigError as err:
            # real models and datasets load from local paths this machine may not have
            assert re.match(r"(model\.path|task\.(val_)?path): ", str(err)), f"{cmd}: {err}"


# ------------------------------------------------------------------------------- running cheap ones
def _env() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    for key in list(env):
        if key.startswith(("SLURM_", "RLVR_SLURM_")):
            del env[key]
    return env


RUN_BLOCKS: dict[str, list[Command]] = {}
for _cmd in COMMANDS:
    if (_cov := coverage_of(_cmd)) and _cov[1].kind == "run":
        RUN_BLOCKS.setdefault(_cmd.block, []).append(_cmd)


SELECTION = ("--group", "--tag", "--filter")


def _drop_selection(args: list[str]) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in SELECTION:
            skip = True
        elif not arg.startswith(tuple(f"{s}=" for s in SELECTION)):
            out.append(arg)
    return out


def _synthetic_sweep(root: Path) -> Path:
    out = root / "synthetic-sweep"
    if not out.is_dir():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "analysis.synthetic",
                str(out),
                "--sizes",
                "32",
                "64",
                "128",
                "--seeds",
                "2",
            ],
            check=True,
            capture_output=True,
            timeout=300,
            cwd=REPO,
        )
    return out


@pytest.mark.timeout(900)
@pytest.mark.parametrize("block", sorted(RUN_BLOCKS), ids=sorted(RUN_BLOCKS))
def test_documented_cheap_commands_run(block, tmp_path, tmp_path_factory):
    """The block's runnable commands, in order, in one scratch directory (as a reader would)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for cmd in RUN_BLOCKS[block]:
        argv = cmd.argv
        prog = Path(argv[0]).name
        if prog == "rlvr-analyze":
            source, rest = scratch / argv[1], argv[2:]
            if not source.exists():
                # a synthetic sweep stands in for the documented one; options that select runs by the
                # documented sweep's names would select none of it (they are parsed in
                # test_documented_analyze_flags_parse)
                source, rest = _synthetic_sweep(tmp_path_factory.getbasetemp()), _drop_selection(rest)
            argv = ["rlvr-analyze", str(source), *rest]
        elif prog == "rlvr-plan":
            # `python -m rlvr_study.plan_cli` is the rlvr-plan entry point (pyproject.toml) without reinstalling
            rest = argv[1:]
            if rest and not rest[0].startswith("-"):
                source = scratch / rest[0]
                if not source.exists():
                    source = _synthetic_sweep(tmp_path_factory.getbasetemp())
                rest = [str(source), *rest[1:]]
            if "--throughput-from" in rest:
                # a run of the synthetic sweep stands in for a measured run the block does not make
                at = rest.index("--throughput-from") + 1
                if not (scratch / rest[at]).is_dir():
                    rest[at] = str(sorted(_synthetic_sweep(tmp_path_factory.getbasetemp()).glob("B*"))[0])
            argv = [sys.executable, "-m", "rlvr_study.plan_cli", *rest]
        elif prog == "rlvr-train":
            argv = ["rlvr-train", *argv[1:]]
        proc = subprocess.run(argv, cwd=scratch, env=_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


def table() -> str:
    rows = []
    for cmd in COMMANDS:
        found = coverage_of(cmd)
        kind, target = (found[1].kind, found[1].target) if found else ("MISSING", "")
        rows.append(f"| `{cmd.text}` | {cmd.doc}:{cmd.line} | {kind} | {target} |")
    return "\n".join(["| command | where | covered by | how |", "|---|---|---|---|", *rows])


if __name__ == "__main__":
    print(table())
