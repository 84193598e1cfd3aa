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
    "clocks",
    "load",
    "markdown",
    "plot_style",
    "plots",
    "plots_condition",
    "plots_cross",
    "records",
    "wandb_io",
)


def _trees() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.glob("*.py"))}


def import_graph(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from analysis.x import``, ``import analysis.x``,
    ``from analysis import x``, ``from .x import``), anywhere in the file."""
    graph: dict[str, set[str]] = {}
    for name, tree in trees.items():
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: from .x import y / from . import x
                    deps.update([module.split(".")[0]] if module else [a.name for a in node.names])
                elif module == "analysis":
                    deps.update(a.name for a in node.names)
                elif module.startswith("analysis."):
                    deps.add(module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("analysis."))
        graph[name] = {d for d in deps if d in trees and d not in (name, "__init__")}
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
        "load": ast.parse("def f():\n    from analysis import wandb_io\n"),
        "wandb_io": ast.parse("from analysis.load import RunRecord\n"),
        "plots": ast.parse("def g():\n    from analysis.plots_cross import plot_cross\n"),
        "plots_cross": ast.parse("from .plots import save\n"),
        "clocks": ast.parse("from analysis.load import CLOCKS\n"),
    }
    assert cycles(import_graph(trees)) == [["load", "wandb_io"], ["plots", "plots_cross"]]
    del trees["wandb_io"]
    assert cycles(import_graph(trees)) == [["plots", "plots_cross"]]


def test_no_import_cycles_inside_the_analysis_package():
    graph = import_graph(_trees())
    assert graph["wandb_io"] and graph["plots"]  # the graph sees imports at all
    assert cycles(graph) == []


def test_no_long_functions_in_the_restructured_modules():
    lengths = function_lengths(_trees())
    for name in ("markdown.write_report", "clocks.run_clocks", "plots_condition.plot_condition"):
        assert lengths[name] <= MAX_LINES, (name, lengths[name])
    too_long = {f: n for f, n in lengths.items() if f.split(".")[0] in BOUNDED and n > MAX_LINES}
    assert not too_long, too_long


def test_public_import_paths_still_work():
    from analysis.load import LoadResult, RunReadError, RunRecord, SkippedRun, validate_rows
    from analysis.plots import plot_all, plot_condition
    from analysis.records import RunRecord as Record

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
