"""The import graph of the packages (docs/design.md §5): which package may import which, no circles
inside a package, and configuration on a floor below the phases.

Imports anywhere in a file count, also those inside functions: a deferred import is still an arrow.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("rlvr_scaling", "analysis", "hydra_plugins", "rlvr_scaling_base", "rlvr_study")
#: package (or subpackage: the longest prefix applies) -> the packages of the project it may import
#: besides itself; the trainer's command lines read a study round's job list with the list sweeper's code;
#: the study stands above the trainer and the analysis and may import both
ALLOWED = {
    "rlvr_scaling_base": set(),
    "rlvr_scaling": {"rlvr_scaling_base"},
    "rlvr_scaling.cli": {"rlvr_scaling_base", "hydra_plugins"},
    "analysis": {"rlvr_scaling_base"},
    "hydra_plugins": {"rlvr_scaling_base"},
    "rlvr_study": {"rlvr_scaling", "analysis", "rlvr_scaling_base", "hydra_plugins"},
}
#: what a run does, in order (rlvr_scaling/trainer.py); configuration must not depend on any of it
PHASES = (
    "collect",
    "advantages",
    "logprobs",
    "noise",
    "noise_cells",
    "hessian",
    "instrument_budget",
    "curvature",
    "optimize",
    "staleness",
    "accounting",
    "evaluation",
    "policy",
    "per_sample",
    "trainer",
    "run",
)


def modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package``."""
    out = {}
    for path in sorted((REPO / package).rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute, dotted), at module level or inside functions."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. A package's own ``__init__`` is left out of
    its submodules' arrows: importing any submodule runs it, whatever the submodule imports."""
    mods = modules(package)
    return {
        name: {m for m in imports(name, path) if m in mods and m != name and not name.startswith(m + ".")}
        for name, path in mods.items()
    }


def test_the_graph_sees_relative_deferred_and_submodule_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    found = imports("pkg.sub.b", pkg / "sub" / "b.py")
    assert "pkg.a" in found
    assert "pkg.sub.b" in imports("pkg.sub", pkg / "sub" / "__init__.py")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).prepare()


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_packages_below_it(package):
    wrong = {}
    for name, path in modules(package).items():
        others = {m.split(".")[0] for m in imports(name, path)} & set(PACKAGES) - {package}
        floor = max((p for p in ALLOWED if name == p or name.startswith(p + ".")), key=len)
        extra = others - ALLOWED[floor]
        if extra:
            wrong[name] = sorted(extra)
    assert not wrong, wrong


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles_inside_a_package(package):
    g = graph(package)
    assert g
    graphlib.TopologicalSorter(g).prepare()  # raises CycleError naming the circle


def test_configuration_imports_no_phase():
    """config.py (schemas, validation, derived numbers) stands on the plug-in floors, never on a phase,
    directly or through what it imports."""
    g = graph("rlvr_scaling")
    reached, todo = set(), ["rlvr_scaling.config"]
    while todo:
        for dep in g[todo.pop()] - reached:
            reached.add(dep)
            todo.append(dep)
    phases = {f"rlvr_scaling.{p}" for p in PHASES}
    assert not reached & phases, sorted(reached & phases)
    assert "rlvr_scaling.noise_config" in reached  # the graph sees config's imports at all


def test_the_study_stands_above_the_trainer_and_the_analysis():
    """rlvr_study imports both packages below it; nothing below imports the study, and the trainer
    imports nothing from the analysis."""
    study = set().union(*({m.split(".")[0] for m in imports(n, p)} for n, p in modules("rlvr_study").items()))
    assert {"rlvr_scaling", "analysis"} <= study
    for package in set(PACKAGES) - {"rlvr_study"}:
        wrong = {
            n
            for n, p in modules(package).items()
            if any(m.split(".")[0] == "rlvr_study" for m in imports(n, p))
        }
        assert not wrong, (package, sorted(wrong))
    trainer = {
        n
        for n, p in modules("rlvr_scaling").items()
        if any(m.split(".")[0] == "analysis" for m in imports(n, p))
    }
    assert not trainer, sorted(trainer)


def cli_imports(name: str, path: Path) -> list[str]:
    """The modules of ``rlvr_scaling.cli`` that a module imports."""
    return sorted(
        m for m in imports(name, path) if m == "rlvr_scaling.cli" or m.startswith("rlvr_scaling.cli.")
    )


def test_the_study_never_imports_the_trainers_command_lines(tmp_path):
    """rlvr_study reaches the trainer through its public modules (``rlvr_scaling.compose``,
    ``rlvr_scaling.run_names``, ``rlvr_scaling.eval_schedule``), never through ``rlvr_scaling.cli``: the
    command lines may change without the study noticing."""
    wrong = {n: found for n, p in modules("rlvr_study").items() if (found := cli_imports(n, p))}
    assert not wrong, wrong
    (tmp_path / "m.py").write_text("def f():\n    from rlvr_scaling.cli.compose import compose\n")
    assert cli_imports("m", tmp_path / "m.py") == [
        "rlvr_scaling.cli.compose",
        "rlvr_scaling.cli.compose.compose",
    ]


#: the floors of the analysis package, bottom up: a subpackage -> the other subpackages it may import. The
#: modules at its top (cli, api, pipeline, synthetic) may import every floor; _parallel (forked workers)
#: serves all of them and imports none
ANALYSIS_FLOORS = {
    "analysis.data": set(),
    "analysis.fits": {"analysis.data"},
    "analysis.figures": {"analysis.data", "analysis.fits"},
    "analysis.reporting": {"analysis.data", "analysis.fits"},
}
ANALYSIS_SHARED = {"analysis._parallel"}


def analysis_floor(module: str) -> str:
    """The floor a module of the analysis package stands on, or the module itself at the top."""
    return next((f for f in ANALYSIS_FLOORS if module == f or module.startswith(f + ".")), module)


def test_the_analysis_floors_import_only_the_floors_below_them():
    mods = modules("analysis")
    wrong, arrows = {}, 0
    for name, path in mods.items():
        floor = analysis_floor(name)
        if floor not in ANALYSIS_FLOORS and name not in ANALYSIS_SHARED:
            continue  # the top imports any floor
        for dep in {m for m in imports(name, path) if m in mods} - {name}:
            arrows += 1
            if name in ANALYSIS_SHARED or (
                dep not in ANALYSIS_SHARED and analysis_floor(dep) not in {floor} | ANALYSIS_FLOORS[floor]
            ):
                wrong.setdefault(name, []).append(dep)
    assert arrows > 50  # the check sees the imports at all
    assert not wrong, wrong
    assert (
        analysis_floor("analysis.fits.exponents") == "analysis.fits"
        and analysis_floor("analysis.cli") == "analysis.cli"
    )


#: the longest a function may be (its ``def`` line to its last line, docstring included)
MAX_FUNCTION_LINES = 120
#: the packages held to it
SHORT_FUNCTION_PACKAGES = ("rlvr_study", "rlvr_scaling", "rlvr_scaling_base", "analysis", "hydra_plugins")


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name (lines)`` of every function or method in ``path`` longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                out.append(f"{node.name} ({n})")
    return out


def test_the_length_check_counts_nested_functions_and_methods(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(120))
    (tmp_path / "m.py").write_text(f"class A:\n    def f(self):\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(tmp_path / "m.py") == ["f (121)"]
    assert long_functions(tmp_path / "m.py", limit=121) == []


@pytest.mark.parametrize("package", SHORT_FUNCTION_PACKAGES)
def test_no_function_is_longer_than_the_limit(package):
    wrong = {name: found for name, path in modules(package).items() if (found := long_functions(path))}
    assert not wrong, wrong


#: the most lines a module may have (a longer one is split by concern)
MAX_MODULE_LINES = 600
#: the packages held to it
SHORT_MODULE_PACKAGES = ("rlvr_scaling", "analysis", "rlvr_study")


def long_modules(package: str, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Repository path -> lines of every module of ``package`` longer than ``limit`` lines."""
    out = {}
    for path in modules(package).values():
        n = len(path.read_text().splitlines())
        if n > limit:
            out[path.relative_to(REPO).as_posix()] = n
    return out


@pytest.mark.parametrize("package", SHORT_MODULE_PACKAGES)
def test_no_module_is_longer_than_the_limit(package):
    assert not long_modules(package), long_modules(package)
    assert long_modules(package, limit=0)  # the check reads the package's modules at all
