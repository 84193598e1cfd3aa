"""``report.html``: one self-contained page with every table and figure of ``report.md`` and the
provenance, parsed back with html5lib (strict: a parse error fails the test)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import html5lib

from analysis.reporting.html_report import markdown_to_html

NS = "{http://www.w3.org/1999/xhtml}"


def _parse(path: Path):
    # strict: any HTML5 parse error raises
    return html5lib.HTMLParser(strict=True).parse(path.read_text(encoding="utf-8"))


def _text(element) -> str:
    return re.sub(r"\s+", " ", "".join(element.itertext())).strip()


def _markdown_tables(text: str) -> list[list[list[str]]]:
    """The tables of report.md as rows of cell texts (inline Markdown marks removed)."""
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|(---\|)+", line):
                cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
                current.append([re.sub(r"\*\*|`", "", c.replace("\\|", "|")).strip() for c in cells])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_every_table_and_figure_of_report_md_is_in_report_html(analysed):
    _, out = analysed
    md = (out / "report.md").read_text()
    doc = _parse(out / "report.html")
    html_tables = [
        [[_text(cell) for cell in tr if cell.tag in (f"{NS}th", f"{NS}td")] for tr in table.iter(f"{NS}tr")]
        for table in doc.iter(f"{NS}table")
    ]
    md_tables = _markdown_tables(md)
    assert len(md_tables) >= 6  # exponents, competing risks, incidences, common α, fit, comparisons, ...
    for table in md_tables:
        assert table in html_tables, f"table with header {table[0]} missing from report.html"
    images = {img.get("alt"): img.get("src") for img in doc.iter(f"{NS}img")}
    figures = re.findall(r"^!\[([^\]]*)\]\(([^)]*)\)$", md, re.M)
    assert len(figures) >= 10 and "alpha_gamma_vs_eta_ref.png" in dict(figures)
    for alt, src in figures:
        prefix = "data:image/png;base64,"
        assert images[alt].startswith(prefix), alt
        assert base64.b64decode(images[alt][len(prefix) :]) == (out / src).read_bytes()
    headings = [_text(h) for h in doc.iter() if h.tag in (f"{NS}h1", f"{NS}h2", f"{NS}h3")]
    for heading in re.findall(r"^#+ (.*)$", md, re.M):
        assert heading.replace("`", "") in headings
    # every warning and note of report.md (list items) is a list item of the page
    items = {_text(li) for li in doc.iter(f"{NS}li")}
    md_items = [re.sub(r"\*\*|`", "", m) for m in re.findall(r"^- (.*)$", md, re.M)]
    assert "### Warnings" in md and len(md_items) > 5
    for item in md_items:
        assert item in items


def test_report_html_is_self_contained_and_has_the_provenance(analysed):
    root, out = analysed
    doc = _parse(out / "report.html")
    for element in doc.iter():
        for attr in ("src", "href"):
            value = element.get(attr)
            assert value is None or value.startswith(("data:", "#")), (element.tag, value)
    assert not list(doc.iter(f"{NS}script")) and not list(doc.iter(f"{NS}link"))
    body = list(doc.find(f"{NS}body"))
    start = next(i for i, e in enumerate(body) if e.tag == f"{NS}h2" and _text(e) == "Provenance")
    prov = {
        _text(tr.find(f"{NS}th")): _text(tr.find(f"{NS}td"))
        for element in body[start:]
        if element.tag == f"{NS}table"
        for tr in element.iter(f"{NS}tr")
    }
    assert prov["source"] == str(root / "sweep")
    assert prov["runs read"] == "12" and prov["runs skipped"] == "0"
    assert prov["read from"] == "dir: 12" and prov["wandb groups (run.sweep)"] == "synthetic: 12"
    # 11 runs recorded no revision, one the revision written above
    assert prov["git revision"] == "unknown: 11, 0123456789abcdef0123456789abcdef01234567: 1"
    assert prov["analysis.synthetic"] == "1: 12"
    assert prov["bootstrap"] == "60" and prov["sigmoid_bootstrap"] == "0" and prov["dpi"] == "60"
    assert prov["clock"] == "responses" and prov["formats"] == "png"
    assert {"rlvr-scaling", "numpy", "pandas", "python", "git"} <= set(prov)


def test_a_missing_figure_stays_a_link_and_is_named(tmp_path: Path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    body, missing = markdown_to_html(
        "# T\n\n![a.png](a.png)\n\n![b.png](b.png)\n\n![c](../c.png)\n", tmp_path
    )
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in body
    assert missing == ["b.png", "../c.png"]
