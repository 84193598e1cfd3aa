"""benchmarks/README.md is the index of the benchmarks: one row per script (every ``*.py`` under
``benchmarks/`` but the ``_*.py`` helpers), each row's script exists, its command runs that script with
options it declares, and the pages it names as quoting the figures exist and name the script."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INDEX = REPO / "benchmarks" / "README.md"


def scripts_on_disk() -> set[str]:
    return {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "benchmarks").rglob("*.py")
        if not p.name.startswith("_") and "__pycache__" not in p.parts
    }


def rows() -> list[list[str]]:
    """The table rows whose first cell is a script: [script, measures, command, figures in]."""
    out = []
    for line in INDEX.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`benchmarks/[\w/]+\.py`", cells[0]):
            out.append([cells[0].strip("`"), *cells[1:]])
    return out


def test_every_benchmark_script_has_one_row_and_every_row_a_script():
    named = [r[0] for r in rows()]
    assert len(named) == len(set(named)), "a script with two rows"
    on_disk = scripts_on_disk()
    assert on_disk, "no benchmark scripts found"
    assert set(named) - on_disk == set(), "rows without their script"
    assert on_disk - set(named) == set(), "scripts without a row in benchmarks/README.md"
    # every path the index names anywhere (prose included) exists
    for path in re.findall(r"benchmarks/[\w/]+\.(?:py|md)", INDEX.read_text()):
        assert (REPO / path).is_file(), path


def test_each_row_runs_its_own_script_with_declared_options_and_cites_pages_that_name_it():
    for script, measures, command, figures in rows():
        assert measures, script
        commands = re.findall(r"`((?:python|bash) [^`]+)`", command)
        assert commands, f"{script}: no command"
        source = (REPO / script).read_text()
        for cmd in commands:
            argv = shlex.split(cmd)
            if argv[0] == "bash":  # a wrapper script that runs the benchmark
                wrapper = REPO / argv[1]
                assert wrapper.is_file() and script in wrapper.read_text(), f"{script}: {cmd}"
                continue
            assert argv[1] == script, f"{script}: its command runs {argv[1]}"
            for flag in (a.split("=")[0] for a in argv if a.startswith("--")):
                assert f'"{flag}"' in source, f"{script}: no option {flag}"
        pages = re.findall(r"`(docs/[\w-]+\.md)`", figures)
        assert pages or figures == "none yet", f"{script}: no page quotes its figures"
        for page in pages:
            text = (REPO / page).read_text()
            assert script in text, f"{page} does not name {script}"


def test_the_index_reader_sees_a_missing_row(tmp_path):
    """The row parser finds the rows of a table like the index's, and not prose lines."""
    table = "| `benchmarks/speed/cycle.py` | a | `python benchmarks/speed/cycle.py` | `docs/speed.md` |\n"
    prose = "see `benchmarks/speed/cycle.py` | for more\n"
    global INDEX
    saved, INDEX = INDEX, tmp_path / "README.md"
    try:
        INDEX.write_text(table + prose)
        assert [r[0] for r in rows()] == ["benchmarks/speed/cycle.py"]
        assert scripts_on_disk() - {r[0] for r in rows()}  # the other scripts would be reported
    finally:
        INDEX = saved
