"""``report.html``: ``report.md`` as one self-contained page, plus where the numbers came from.

The page is the Markdown report converted to HTML (markdown-it-py, CommonMark with tables: every
heading, table, warning and note of ``report.md`` is there, in the same order), every PNG it
references embedded as a base64 ``data:`` URI, and a **Provenance** section: the source (folder or
wandb path), how many runs were read from which kind of source and how many were skipped, the wandb
groups, the git revisions and package versions the runs recorded (``status.json``), the analysis
options and the analysis's own versions. It needs no network and no file beside it: send it as is.

Figures other than PNG (PDF) are not embedded; a PNG missing from the folder stays a relative link and
is named under *Provenance*.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import shlex
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from analysis.data.load import RunRecord, SkippedRun
from rlvr_scaling_base import git_revision, package_versions

ANALYSIS_PACKAGES = ("rlvr-scaling", "numpy", "scipy", "pandas", "matplotlib", "wandb", "markdown-it-py")

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.86rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f5f5f5; padding: 0 0.2rem; border-radius: 3px; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0 1.5rem; }
h1, h2, h3 { line-height: 1.2; }
details { margin: 0.5rem 0; }
"""


def analysis_versions() -> dict[str, str]:
    """Versions of the analysis and the packages its numbers depend on, and its git revision."""
    versions = package_versions(ANALYSIS_PACKAGES)
    git = git_revision()
    if git:
        versions["git"] = git
    return versions


def provenance(
    source: str,
    records: Iterable[RunRecord],
    skipped: Iterable[SkippedRun],
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """What the report was computed from, as plain data (also logged to wandb by ``--to-wandb``).

    ``runs_git`` / ``runs_versions`` count the runs per recorded git revision and per package version
    (``status.json``'s ``git`` and ``versions``; wandb runs do not carry them: counted as unknown).
    """
    records = list(records)
    git: Counter[str] = Counter()
    versions: dict[str, Counter[str]] = {}
    for record in records:
        status = record.status or {}
        git[str(status.get("git") or "unknown")] += 1
        for name, version in (status.get("versions") or {}).items():
            versions.setdefault(str(name), Counter())[str(version)] += 1
    return {
        "source": source,
        "runs": len(records),
        "skipped": len(list(skipped)),
        "run_sources": dict(Counter(r.source for r in records)),
        "groups": dict(Counter(str(r.group) for r in records if r.group)),
        "runs_git": dict(git.most_common()),
        "runs_versions": {k: dict(v.most_common()) for k, v in sorted(versions.items())},
        "options": {k: _plain(v) for k, v in options.items()},
        "analysis": analysis_versions(),
        "command": _command(),
        "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _command() -> str:
    """The command line, when this process is ``rlvr-analyze`` (not a notebook or a test runner)."""
    if sys.argv and Path(sys.argv[0]).name in ("rlvr-analyze", "cli.py"):
        return shlex.join(["rlvr-analyze", *sys.argv[1:]])
    return ""


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def markdown_to_html(text: str, folder: Path) -> tuple[str, list[str]]:
    """The HTML body of a Markdown text (CommonMark + tables); PNG images found in ``folder`` are
    embedded. Returns the HTML and the image links that could not be embedded."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    missing: list[str] = []
    for token in tokens:
        for child in token.children or []:
            if child.type != "image":
                continue
            src = str(child.attrGet("src") or "")
            path = (folder / src).resolve()
            inside = path.is_relative_to(folder.resolve())
            if src.lower().endswith(".png") and inside and path.is_file():
                child.attrSet("src", _png_data_uri(path))
            elif not src.startswith("data:"):
                missing.append(src)
    return md.renderer.render(tokens, md.options, {}), missing


def _kv_table(rows: Iterable[tuple[str, Any]]) -> str:
    body = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_text(v))}</td></tr>" for k, v in rows
    )
    return f"<table>{body}</table>"


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_text(v)}" for k, v in value.items()) or "–"
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value) or "–"
    return "–" if value is None else str(value)


def provenance_html(prov: Mapping[str, Any], missing: list[str]) -> str:
    parts = ["<h2>Provenance</h2>", "<h3>Source</h3>"]
    parts.append(
        _kv_table(
            [
                ("source", prov["source"]),
                ("runs read", prov["runs"]),
                ("runs skipped", prov["skipped"]),
                ("read from", prov["run_sources"]),
                ("wandb groups (run.sweep)", prov["groups"]),
                ("command", prov.get("command", "")),
                ("written", prov.get("written", "")),
            ]
        )
    )
    parts += ["<h3>Runs: git revisions and versions</h3>", "<p>Runs per revision and per version.</p>"]
    parts.append(
        _kv_table(
            [("git revision", prov["runs_git"])]
            + [(name, counts) for name, counts in prov["runs_versions"].items()]
        )
    )
    parts += ["<h3>Analysis options</h3>", _kv_table(sorted(prov["options"].items()))]
    parts += ["<h3>Analysis versions</h3>", _kv_table(prov["analysis"].items())]
    if missing:
        items = "".join(f"<li><code>{html.escape(m)}</code></li>" for m in missing)
        parts += ["<p>Figures not embedded (not a PNG in the output folder):</p>", f"<ul>{items}</ul>"]
    return "\n".join(parts)


def write_html_report(out: Path, markdown_text: str, prov: Mapping[str, Any]) -> Path:
    """Write ``out/report.html`` from the text of ``report.md`` and :func:`provenance`; returns its path."""
    out = Path(out)
    body, missing = markdown_to_html(markdown_text, out)
    title = html.escape(f"Two-clock scaling fits: {prov['source']}")
    page = (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n{provenance_html(prov, missing)}\n</body>\n</html>\n"
    )
    path = out / "report.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
