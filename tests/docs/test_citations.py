"""Every page the code and docs cite is in the repository: ``docs/<page>`` exists, and every
``docs/design.md §N`` names a section of docs/design.md (whose numbers stay fixed)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = (
    "rlvr_scaling",
    "rlvr_scaling_base",
    "analysis",
    "rlvr_study",
    "hydra_plugins",
    "benchmarks",
    "scripts",
    "tests",
)
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".ipynb"}
#: "docs/design.md §3", "`docs/design.md` §2–§3", "docs/design.md §3 and §6", "docs/design.md, §2, §6"
CITATION = re.compile(r"docs/design\.md`?,? ((?:§\d+(?:[–-]§?\d+)?(?:,? (?:and )?)?)+)")


def sources() -> list[Path]:
    files = [REPO / "README.md", REPO / "Makefile", REPO / ".ci" / "run", *(REPO / "docs").glob("*.md")]
    for folder in FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return files


def design_sections() -> set[str]:
    return set(re.findall(r"^## (\d+)\. ", (REPO / "docs" / "design.md").read_text(), re.M))


def test_cited_pages_and_design_sections_exist():
    sections = design_sections()
    assert sections >= {"1", "2", "3", "4", "5", "6", "7", "8"}
    missing, bad = [], []
    this = Path(__file__).resolve()
    for path in sources():
        if path.resolve() == this:
            continue
        text = path.read_text(errors="replace")
        where = path.relative_to(REPO)
        for page in set(re.findall(r"docs/([\w-]+\.(?:md|ipynb))", text)):
            if not (REPO / "docs" / page).is_file():
                missing.append(f"{where}: docs/{page}")
        for cited in CITATION.findall(text):
            for number in re.findall(r"\d+", cited):
                if number not in sections:
                    bad.append(f"{where}: docs/design.md §{number}")
        if "DESIGN" + ".md" in text:
            missing.append(f"{where}: a design file outside the repository")
    assert not missing, missing
    assert not bad, bad


def test_the_check_sees_a_wrong_section():
    text = "see docs/design.md §3 and §12"
    cited = CITATION.findall(text)
    assert re.findall(r"\d+", cited[0]) == ["3", "12"] and "12" not in design_sections()


#: a file of the repository named in text: `analysis/fits/fit.py`, tests/core/test_resume.py, …
CODE_PATH = re.compile(
    r"(?<![\w/.-])((?:analysis|rlvr_scaling|rlvr_scaling_base|rlvr_study|hydra_plugins|benchmarks|scripts|tests)"
    r"/[\w/.-]*\w\.(?:py|sh|yaml|ipynb))"
)
#: paths named on purpose though they do not exist (a made-up command in tests/docs/test_doc_commands.py)
NOT_FILES = {"scripts/new_tool.py"}


def test_cited_code_files_exist():
    """Every file of the repository that the code, the docs and the report text name exists (a module
    that moved is cited at its new place)."""
    missing = []
    for path in sources():
        text = path.read_text(errors="replace")
        for cited in set(CODE_PATH.findall(text)) - NOT_FILES:
            if not (REPO / cited).is_file():
                missing.append(f"{path.relative_to(REPO)}: {cited}")
    assert not missing, sorted(missing)
    assert CODE_PATH.findall("see `analysis/fits/fit.py` and tests/core/test_resume.py.") == [
        "analysis/fits/fit.py",
        "tests/core/test_resume.py",
    ]
