"""The analysis package's shape: no import circles between its modules (imports inside functions
count too: a deferred import is still a circle), and no function so long that it cannot be read in one
screen (the report, the clocks of one run and one condition's figures were each one long function)."""

from __future__ import annotations

import ast
from pathlib import Path

import analysis

PACKAGE = Path(analysis.__file__).parent
#: the longest function allowed in the modules named below, in lines (def to last line)
MAX_LINES = 80
#: modules held to MAX_LINES (the others still carry longer fitting and CLI functions)
BOUNDED = (
    "data.clock_options",
    "data.clock_tables",
    "data.conditions",
    "data.failure_clock",
    "data.horizon",
    "data.load",
    "data.noise_columns",
    "data.records",
    "data.row_values",
    "data.target_clock",
    "data.wandb_io",
    "figures.plot_style",
    "figures.plots",
    "figures.plots_bcrit",
    "figures.plots_condition",
    "figures.plots_cross",
    "reporting.markdown",
    "reporting.sections",
    "reporting.sections_across",
    "reporting.sections_failure",
    "reporting.sections_runs",
    "reporting.sections_theory",
    "reporting.text",
)


def _trees() -> dict[str, ast.Module]:
    """Module (dotted, inside the package: ``cli``, ``data.load``, ``fits.__init__``) -> its tree."""
    return {
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts): ast.parse(p.read_text(), str(p))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def import_graph(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from analysis.x.y import``, ``import analysis.x.y``,
    ``from analysis.x import y``, ``from .y import``), anywhere in the file."""
    graph: dict[str, set[str]] = {}
    for name, tree in trees.items():
        here = name.split(".")[:-1]  # the subpackage the module is in
        wanted: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from .y import z / from . import y
                    parts = here[: len(here) - node.level + 1] + (node.module or "").split(".")
                else:
                    parts = (node.module or "").split(".")
                    if parts[0] != "analysis":
                        continue
                    parts = parts[1:]
                module = ".".join(p for p in parts if p)
                wanted.add(module)
                wanted.update(f"{module}.{a.name}" if module else a.name for a in node.names)
            elif isinstance(node, ast.Import):
                wanted.update(
                    a.name[len("analysis.") :] for a in node.names if a.name.startswith("analysis.")
                )
        graph[name] = {d for d in wanted if d in trees and d != name and not d.endswith("__init__")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def function_lengths(trees: dict[str, ast.Module]) -> dict[str, int]:
    return {
        f"{name}.{node.name}": node.end_lineno - node.lineno + 1
        for name, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def test_the_cycle_finder_finds_a_circle_and_a_deferred_one():
    # the two circles the package had: load <-> wandb_io through a deferred import, plots <-> plots_cross
    trees = {
        "data.load": ast.parse("def f():\n    from analysis.data import wandb_io\n"),
        "data.wandb_io": ast.parse("from analysis.data.load import RunRecord\n"),
        "figures.plots": ast.parse("def g():\n    from analysis.figures.plots_cross import plot_cross\n"),
        "figures.plots_cross": ast.parse("from .plots import save\n"),
        "data.clock_tables": ast.parse("from analysis.data.load import CLOCKS\n"),
    }
    assert cycles(import_graph(trees)) == [
        ["data.load", "data.wandb_io"],
        ["figures.plots", "figures.plots_cross"],
    ]
    del trees["data.wandb_io"]
    assert cycles(import_graph(trees)) == [["figures.plots", "figures.plots_cross"]]


def test_no_import_cycles_inside_the_analysis_package():
    graph = import_graph(_trees())
    assert graph["data.load"] and graph["figures.plots"]  # the graph sees imports at all
    assert cycles(graph) == []


def test_no_long_functions_in_the_restructured_modules():
    lengths = function_lengths(_trees())
    for name in (
        "reporting.markdown.write_report",
        "data.clock_tables.run_clocks",
        "figures.plots_condition.plot_condition",
    ):
        assert lengths[name] <= MAX_LINES, (name, lengths[name])
    too_long = {f: n for f, n in lengths.items() if f.rpartition(".")[0] in BOUNDED and n > MAX_LINES}
    assert not too_long, too_long


def test_public_import_paths_still_work():
    from analysis.data.load import LoadResult, RunReadError, RunRecord, SkippedRun, validate_rows
    from analysis.data.records import RunRecord as Record
    from analysis.figures.plots import plot_all, plot_condition

    assert RunRecord is Record and callable(plot_all) and callable(plot_condition)
    assert {LoadResult, RunReadError, SkippedRun} and callable(validate_rows)


def test_fork_map_passes_shared_inputs_to_forked_workers_and_in_process():
    """``shared`` reaches every call, forked (jobs=2) or in-process (jobs=1), with the same results."""
    from analysis._parallel import _INHERITED, fork_map

    items = list(range(7))
    forked = fork_map(_scaled, items, 2, shared={"k": 3})
    assert forked == fork_map(_scaled, items, 1, shared={"k": 3}) == [3 * i for i in items]
    assert fork_map(abs, [-1, 2], 2) == [1, 2]  # no shared: one argument
    assert _INHERITED is None  # nothing is left behind for the next call


def _scaled(item, shared):
    return shared["k"] * item
