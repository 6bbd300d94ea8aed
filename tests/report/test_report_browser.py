"""The HTML report as a person sees it: opened from disk in headless Chromium (Debian's
`chromium`, which `make browser` installs; skipped with the reason where it is absent), with no
console errors and no network requests, every section and chart on screen, the in-page links
landing, a screenshot taken and the page printed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_helpers import DOCTOR, TUNE, TUNE_SCRIPT, result

from torchpace.report import document
from torchpace.report.html import page

playwright = pytest.importorskip(
    "playwright.sync_api", reason="playwright is a dev dependency: pip install -e .[dev]"
)
CHROMIUM = os.environ.get("TORCHPACE_CHROMIUM") or shutil.which("chromium")
if CHROMIUM is None and os.environ.get("CI"):
    # CI installs Chromium (.ci/run): there, a missing browser is a failure, not a skip.
    raise RuntimeError("CI without chromium on PATH: .ci/run's `make browser` did not install it")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no `chromium` on PATH: `make browser` installs Debian's package (as root), or set "
    "TORCHPACE_CHROMIUM to a Chromium binary",
)

DOCTOR_SECTIONS = ("step-time", "throughput", "findings", "syncs", "memory", "references")
TUNE_SECTIONS = ("summary", "speedups", "loss", "memory", "verdicts", "batch", "plan")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    docs = [document("doctor", result(DOCTOR)), document("tune", result(TUNE))]
    path.write_text(page(docs, sources=["doctor.json", "torchpace-tune.json"]), encoding="utf-8")
    return path


@pytest.fixture()
def opened(browser: Any, report: Path) -> Iterator[tuple[Any, list[str], list[str]]]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    requests: list[str] = []
    tab.on(
        "console",
        lambda m: (
            problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None
        ),
    )
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    tab.on("request", lambda r: requests.append(r.url))
    tab.goto(report.as_uri(), wait_until="load")
    yield tab, problems, requests
    context.close()


def test_the_page_opens_offline_without_errors_or_requests(opened: Any, report: Path) -> None:
    tab, problems, requests = opened
    assert problems == []
    assert requests == [report.as_uri()]  # the file itself, and nothing else
    assert tab.title() == "torchpace doctor + torchpace tune cnn"


def test_every_section_and_chart_is_on_the_page(opened: Any) -> None:
    tab, _, _ = opened
    for prefix, ids in (("r1-", DOCTOR_SECTIONS), ("r2-", TUNE_SECTIONS)):
        for sid in ids:
            section = tab.locator(f"section#{prefix}{sid}")
            assert section.count() == 1, sid
            assert section.locator("h2").is_visible(), sid
    charts = tab.locator("figure.chart svg[role=img]")
    assert charts.count() == 4  # the breakdown; speed-ups, loss curves, memory
    for i in range(charts.count()):
        svg = charts.nth(i)
        box = svg.bounding_box()
        assert box is not None and box["width"] > 500 and box["height"] > 100
        assert svg.locator("title").count() == 1 and svg.locator("desc").count() == 1
        assert svg.locator("text").count() > 5  # text stays text: labels, ticks, legend
    # The loss chart draws the two baseline seeds, the plan and six rejected trials.
    assert (
        "2 baseline seeds, the chosen plan, and 6 rejected trials"
        in tab.locator("#r2-tune-loss-desc").text_content()
    )


def test_every_in_page_link_lands_on_an_element(opened: Any) -> None:
    tab, _, _ = opened
    missing = tab.evaluate(
        """() => [...document.querySelectorAll('a[href^="#"]')]
            .map(a => a.getAttribute('href').slice(1))
            .filter(id => !document.getElementById(id))"""
    )
    assert missing == []
    assert tab.locator('a[href="#r1-technique-amp-bf16"]').count() >= 1
    entry = tab.locator("#r1-rule-tp302")
    assert not entry.evaluate("e => e.open")  # references start collapsed ...
    tab.locator('#r1-findings a[href="#r1-rule-tp302"]').first.click()
    assert tab.evaluate("() => location.hash") == "#r1-rule-tp302"
    assert entry.evaluate("e => e.open")  # ... and a link to one opens it
    assert entry.locator("pre code").first.is_visible()  # its example


def test_a_screenshot_and_a_print_are_written(opened: Any, tmp_path: Path) -> None:
    tab, problems, _ = opened
    shot = tmp_path / "report.png"
    tab.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 100_000
    # Printing opens every chart's table of figures, so the printout holds them too.
    assert tab.locator("details[open]").count() == 0
    tab.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    assert tab.locator("details[open]").count() == tab.locator("details").count()
    assert tab.locator("details.chart-data").count() == 4
    pdf = tab.pdf(path=str(tmp_path / "report.pdf"))
    assert pdf[:5] == b"%PDF-" and len(pdf) > 50_000
    assert problems == []


def test_a_script_tune_opens_with_its_script_arguments_and_verdicts(
    browser: Any, tmp_path: Path
) -> None:
    path = tmp_path / "script.html"
    path.write_text(
        page([document("tune", result(TUNE_SCRIPT))], sources=["torchpace-tune.json"]),
        encoding="utf-8",
    )
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda e: problems.append(str(e)))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    tab.goto(path.as_uri(), wait_until="load")
    header = tab.locator("header").first.inner_text()
    assert "tests/script/scripts/planted.py" in header and "--steps 200" in header
    verdicts = tab.locator("section#verdicts").inner_text()
    assert "rejected" in verdicts and "not applicable" in verdicts and "kept" in verdicts
    for sid in ("summary", "speedups", "loss", "verdicts", "plan"):
        assert tab.locator(f"section#{sid} h2").is_visible(), sid
    assert problems == []
    context.close()
