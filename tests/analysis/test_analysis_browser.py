"""``report.html`` in a real browser: headless Chromium opens the page that ``rlvr-analyze`` wrote for a
small synthetic sweep and reports what it rendered.

A copy of the page gets two things in its ``<head>`` and nothing else changes: a Content-Security-Policy
that allows only what a self-contained page needs (``data:`` images, inline style; the probe's inline
script), so anything the page would fetch — from the network or from a file beside it — is blocked and
reported as a violation; and a probe that, on ``load``, opens every ``<details>`` and writes what the
browser sees (every image's decoded size, every table's rows and rendered height, the resources the
page loaded, the violations) into a ``<pre>``, read back with ``--dump-dom``. The browser's host
resolver maps every name to nothing, so the check never reaches a network either way.

Skipped, with the reason, where no Chromium binary is found (``.ci/run`` installs Debian's
``chromium`` when it can; ``CHROME_BIN`` names another binary).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import html5lib
import pytest

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
MARKER = "browser-check"
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
PROBE = """<meta http-equiv="Content-Security-Policy" content="{csp}">
<script>
const violations = [];
document.addEventListener("securitypolicyviolation",
  e => violations.push(e.violatedDirective + " " + e.blockedURI));
window.addEventListener("load", () => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const images = [...document.images].map(i => ({alt: i.alt, complete: i.complete,
    width: i.naturalWidth, height: i.naturalHeight, shown: i.getBoundingClientRect().width}));
  const tables = [...document.querySelectorAll("table")].map(t => ({rows: t.rows.length,
    header: t.rows.length ? [...t.rows[0].cells].map(c => c.textContent.trim()) : [],
    shown: t.getBoundingClientRect().height}));
  const resources = performance.getEntriesByType("resource").map(r => r.name);
  const out = document.createElement("pre");
  out.id = "{marker}";
  out.textContent = JSON.stringify({images, tables, resources, violations, title: document.title});
  document.body.appendChild(out);
});
</script>
""".replace("{csp}", CSP).replace("{marker}", MARKER)


def chromium() -> str | None:
    """The Chromium binary: ``$CHROME_BIN``, else the first of :data:`BINARIES` on PATH."""
    named = os.environ.get("CHROME_BIN")
    if named:
        return shutil.which(named)
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


def open_in_browser(page: Path, profile: Path) -> dict:
    """What headless Chromium rendered for ``page`` (a copy with the probe in its head)."""
    binary = chromium()
    if binary is None:
        pytest.skip(
            "no Chromium binary found (chromium, chromium-browser, google-chrome; or set CHROME_BIN): "
            "`apt-get install chromium` to run the browser check"
        )
    text = page.read_text(encoding="utf-8")
    assert text.count("<head>") == 1
    probed = page.with_name("probed_" + page.name)
    probed.write_text(text.replace("<head>", "<head>\n" + PROBE, 1), encoding="utf-8")
    argv = [
        binary,
        "--headless",
        "--no-sandbox",  # root in containers; the page is our own
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",  # lets the load handler run before the DOM is dumped
        "--dump-dom",
        probed.as_uri(),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    match = re.search(rf'<pre id="{MARKER}">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"the probe wrote nothing (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(html.unescape(match.group(1)))


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path
    return struct.unpack(">II", head[16:24])


def _source_tables(page: Path) -> int:
    doc = html5lib.HTMLParser(strict=True).parse(page.read_text(encoding="utf-8"))
    return sum(1 for _ in doc.iter("{http://www.w3.org/1999/xhtml}table"))


def test_report_html_renders_every_figure_and_table_and_fetches_nothing(analysed, tmp_path):
    _, out = analysed
    page = tmp_path / "report.html"
    shutil.copy(out / "report.html", page)  # alone in its folder: a relative link would find nothing
    seen = open_in_browser(page, tmp_path / "profile")
    md = (out / "report.md").read_text()

    assert seen["violations"] == [] and seen["resources"] == [], (seen["violations"], seen["resources"])
    assert seen["title"]

    # every figure of report.md is an image the browser decoded, at the PNG's own pixel size
    figures = dict(re.findall(r"^!\[([^\]]*)\]\(([^)]*)\)$", md, re.M))
    assert len(figures) >= 10
    images = {image["alt"]: image for image in seen["images"]}
    assert len(images) == len(seen["images"]) == len(figures), sorted(images)
    for alt, src in figures.items():
        image = images[alt]
        assert image["complete"] and image["width"] > 0 and image["shown"] > 0, image
        assert (image["width"], image["height"]) == png_size(out / src), alt

    # every table of the page is there, with its rows, and is laid out (details opened)
    tables = seen["tables"]
    md_tables = re.findall(r"^\|(?:---\|)+$", md, re.M)
    assert len(tables) == _source_tables(page) >= len(md_tables) >= 6
    for table in tables:
        assert table["rows"] >= 2 and table["shown"] > 0 and all(table["header"]), table


def test_the_probe_sees_a_broken_figure_and_an_outside_fetch(tmp_path):
    """What makes the check above fail: an image that does not decode and fetches the page makes."""
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    page = tmp_path / "report.html"
    page.write_text(
        "<!DOCTYPE html>\n<html>\n<head>\n<title>t</title>\n</head>\n<body>\n"
        f'<img alt="ok" src="data:image/png;base64,{pixel}">\n'
        '<img alt="broken" src="data:image/png;base64,iVBORw0KGgo=">\n'
        '<img alt="beside" src="beside.png">\n'
        '<img alt="remote" src="https://example.org/figure.png">\n'
        "<table><tr><th>a</th></tr><tr><td>1</td></tr></table>\n</body>\n</html>\n"
    )
    seen = open_in_browser(page, tmp_path / "profile")
    widths = {image["alt"]: image["width"] for image in seen["images"]}
    assert widths == {"ok": 1, "broken": 0, "beside": 0, "remote": 0}
    # the browser names a blocked file: URI by its scheme only
    assert sorted(seen["violations"]) == ["img-src file", "img-src https://example.org/figure.png"]
    assert [t["rows"] for t in seen["tables"]] == [2]
