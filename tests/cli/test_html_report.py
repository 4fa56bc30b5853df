"""``scopefusion convert --html``: the report page, checked as rendered by headless Chromium.

The page is opened from a file:// URL in Debian's chromium (installed by the ``chromium`` fixture when
missing); ``--dump-dom`` gives the DOM after the page's script ran, and a screenshot is kept in
``artifacts/html_report/`` at the repository root (git-ignored) for a person to look at.
"""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopefusion.cli import app
from tests.testing.small_models import write_model

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts" / "html_report"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
)


class Page(HTMLParser):
    """The parts of the report a test reads: table rows by table id, texts by element id, SVG buffers,
    fused scopes with their badges, and every URL-bearing attribute."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, str] = {}
        self.buffers: list[dict[str, str]] = []
        self.fused_scopes: list[str] = []
        self.badges: list[str] = []
        self.urls: list[str] = []
        self.csp = ""
        self._table: str | None = None
        self._in_body = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._text_id: str | None = None
        self._badge: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href", "action", "srcset", "data", "poster"):
            if a.get(key) is not None:
                self.urls.append(a[key])
        if tag == "meta" and a.get("http-equiv", "").lower() == "content-security-policy":
            self.csp = a.get("content", "")
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        elif tag == "tbody" and self._table:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")
        if tag == "rect" and "buf" in a.get("class", "").split():
            self.buffers.append(a)
        if tag == "span" and {"scope", "fused"} <= set(a.get("class", "").split()):
            self.fused_scopes.append(a.get("data-scope", ""))
        if tag == "span" and "fusedb" in a.get("class", "").split():
            self._badge = []
        if a.get("id") in ("fusion-count",):
            self._text_id = a["id"]
            self.texts[a["id"]] = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None
        elif tag == "span":
            if self._badge is not None:
                self.badges.append("".join(self._badge).strip())
                self._badge = None
            self._text_id = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._badge is not None:
            self._badge.append(data)
        if self._text_id is not None:
            self.texts[self._text_id] += data


def chromium_run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.fixture(scope="module")
def report(gelu_files, tmp_path_factory):
    """The model converted with the user rules, an --html page and a --report JSON beside it."""
    out = tmp_path_factory.mktemp("html")
    args = ["convert", str(gelu_files["model"]), "-o", str(out / "m.ge"), "--rules", str(gelu_files["rules"]),
            "--input-shape", "x:2,16", "--input-shape", "x:3,16", "--html", str(out / "report.html"),
            "--report", str(out / "report.json"), "-q"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def test_the_page_in_chromium_shows_fusions_refusals_scopes_and_memory_plans(report, gelu_files, chromium, tmp_path):
    from scopefusion.convert import convert

    page_path = report / "report.html"
    url = page_path.resolve().as_uri()
    dom = Page(chromium_run(chromium, tmp_path / "profile-dom", "--dump-dom", url).stdout)
    data = json.loads((report / "report.json").read_text())

    fusions = dom.tables["fusions"]
    assert len(fusions) == sum(data["fusions"].values()) == 2
    assert sorted((row[1], row[2], row[3]) for row in fusions) == [
        ("block_0/gelu", "Gelu", "TestGelu"), ("block_1/gelu", "Gelu", "TestGelu"),
    ]  # fmt: skip
    assert [row[5] for row in fusions] == ["8", "8"]  # nodes replaced
    assert fusions[0][6] == "0: /block_0/dense/MatMul:0"
    # The page's script ran in the browser and counted the rows it shows.
    assert dom.texts["fusion-count"] == "2 of 2 fusions shown"

    refused = [row for row in dom.tables["refused"] if row[0] == "TestGeluAgain"]
    assert [row[1] for row in refused] == ["block_0/gelu", "block_1/gelu"]
    assert all("already claimed by fusion" in row[2] for row in refused)
    assert len(dom.tables["refused"]) == sum(len(v) for v in data["refused"].values())
    passes = {row[0]: row for row in dom.tables["passes"]}
    assert passes["TestGelu"][1].startswith("file:") and passes["TestGelu"][2] == "changed"

    assert sorted(dom.fused_scopes) == ["block_0/gelu/", "block_1/gelu/"]
    assert dom.badges.count("Gelu · TestGelu") == 2

    model = convert(gelu_files["model"], rules=[gelu_files["rules"]], input_shapes=[{"x": (2, 16)}, {"x": (3, 16)}])
    plans = [p.memory_plan for p in model.profiles]
    assert len(dom.buffers) == sum(len(p.buffers) for p in plans) > 0
    first = plans[0]
    for rect, buffer in zip(dom.buffers, first.buffers):  # x grows with the schedule, y with the offset
        assert rect["data-values"] == " ".join(buffer.values)
    by_values = {rect["data-values"]: rect for rect in dom.buffers[: len(first.buffers)]}
    early, late = sorted(first.buffers, key=lambda b: b.first)[0], sorted(first.buffers, key=lambda b: b.first)[-1]
    assert float(by_values[" ".join(early.values)]["x"]) < float(by_values[" ".join(late.values)]["x"])

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    chromium_run(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1280,2000", url)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    print(f"screenshot of the HTML report: {shot}")


def test_the_page_is_self_contained(report):
    text = (report / "report.html").read_text()
    page = Page(text)
    assert "default-src 'none'" in page.csp
    assert all(url.startswith("#") for url in page.urls), page.urls
    assert not re.search(r"<(link|img|iframe|object|embed)\b", text)
    assert "<script src" not in text and "@import" not in text and "url(" not in text


def test_names_are_escaped_and_a_model_without_fusions_renders(tmp_path):
    from scopefusion.convert import convert, fusion_setup
    from scopefusion.html_report import render_html

    model_path = write_model(tmp_path / "m.onnx", prefix="x<b>&'")
    every_pass = [entry.name for entry in fusion_setup()[0].passes()]
    model = convert(model_path, disable=every_pass, input_shapes={"x": (2, 16)})
    for profile in model.profiles:  # made on first use, adding its time to the timings the page shows
        assert profile.memory_plan is not None
    html = render_html(model)
    assert "x<b>&" not in html and "x&lt;b&gt;&amp;&#x27;block_0" in html
    assert html == render_html(model)
    page = Page(html)
    assert page.tables["fusions"] == [] and page.fused_scopes == []
    assert "No fusion was applied." in html and "No fusion was refused." in html
    assert len(page.buffers) == len(model.profiles[0].memory_plan.buffers) > 0


def test_convert_html_option_writes_nothing_when_the_model_is_bad(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a model" * 5)
    result = CliRunner().invoke(app, ["convert", str(bad), "-o", str(tmp_path / "o.ge"), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]
