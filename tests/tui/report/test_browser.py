"""``ttft report --html`` in real headless Chromium: renders without console errors, the charts
are there and sized at a phone's width and a desktop's, hovering shows details, and a hostile
model name runs nothing. Needs /usr/bin/chromium (CI: ``apt-get install -y chromium``); never
lets Playwright download a browser."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry.log.turns import SessionLog
from ttft.tui.cli import main

from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer
from tests.support.turns import play, recorder, stream
from tests.tui.report.test_page import turns

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
VIEWPORTS = {"phone": (390, 844), "desktop": (1400, 900)}


def needs_chromium() -> pytest.MarkDecorator:
    """Skip where Chromium or playwright is missing, except in CI (``CI`` set, as .ci/run sets it and
    installs Chromium): there a missing browser fails the module, never passes as a quiet skip."""
    missing = None if CHROMIUM.exists() else f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = missing or "the playwright package is not installed (the dev extra)"
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI is set but {missing}: the report cannot be checked in a browser", pytrace=False)
    return pytest.mark.skipif(missing is not None, reason=missing or "")


pytestmark = needs_chromium()
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright Python package")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of a bench run, a session with a failed ask, and ok/failed/cancelled turns with a
    hostile model name, all made by the real code (the first two against the loopback fakes)."""
    root = tmp_path_factory.mktemp("browser")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTFT_DATA_DIR", str(root / "data"))
        sched = Schedule(first_token_ms=20, token_ms=3, visible_tokens=6)
        with (
            FakeServer(sched) as ok,
            FakeServer(Schedule(fail_status=500)) as bad,
            BatchingServer(slots=2, token_ms=5, prefill_ms=10) as batching,
        ):
            for url in (ok.openai_base_url, bad.openai_base_url, ok.openai_base_url):
                main(["ask", "-m", "compat:fake-model", "--base-url", url, "--session", "20260101-000000-brws",
                      "--max-retries", "0", "hi"])  # fmt: skip
            assert main(["bench", "-m", "compat:batching-fake", "--base-url", batching.base_url,
                         "--concurrency", "1,2", "--requests", "4", "--warmup", "0", "--max-output-tokens", "6",
                         "--out", str(root / "bench"), "--quiet"]) == 0  # fmt: skip
        log = SessionLog("mixed", directory=root / "sessions")
        evil = recorder()
        evil.model = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
        log.append(play(stream(first_ms=90), evil))
        for r in turns():
            log.append(r | {"turn_index": r["turn_index"] + 1})
        out = root / "report.html"
        session = root / "data" / "sessions" / "20260101-000000-brws.jsonl"
        assert main(["report", str(root / "bench"), str(session), str(log.path), "--html", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser(page_file: Path, narrow_page: Path) -> Iterator[Any]:
    """Chromium, started after the pages are made (Playwright's sync API keeps an event loop running)."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def _open(browser: Any, page_file: Path, size: tuple[int, int]) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(f"fetched {r.url}"))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    return page, problems


@pytest.mark.parametrize("name", list(VIEWPORTS))
def test_renders_clean_with_charts_sized(browser: Any, page_file: Path, name: str, tmp_path: Path) -> None:
    width, height = VIEWPORTS[name]
    page, problems = _open(browser, page_file, (width, height))
    try:
        assert page.title().startswith("ttft report")
        figures = page.locator("figure.chart")
        assert figures.count() == 5  # trade-off, TTFT by load, the TTFT and TPOT distributions, the timeline
        shown = "svg.narrow" if name == "phone" else "svg.wide"
        hidden = "svg.wide" if name == "phone" else "svg.narrow"
        for i in range(figures.count()):
            fig = figures.nth(i)
            box = fig.locator(shown).bounding_box()
            assert box is not None and box["width"] >= min(300, width - 60) and box["height"] >= 150
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1  # inside the screen
            assert not fig.locator(hidden).is_visible()
        # the page itself never scrolls sideways (wide tables scroll in their own box)
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        header = page.locator("header").inner_text()
        assert "ttft" in header and "compat:fake-model" in header and "127.0.0.1" in header
        assert "report.html" not in header and "turns.jsonl" not in header and "summary.json" in header
        page.screenshot(path=str(tmp_path / f"report-{name}.png"), full_page=True)
        if os.environ.get("TTFT_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["TTFT_SCREENSHOTS"]) / f"report-{name}.png"), full_page=True)
    finally:
        page.close()
    assert problems == []


def _hover_tip(page: Any, selector: str, last: bool = False) -> str:
    found = page.locator(selector)
    el = found.last if last else found.first
    el.scroll_into_view_if_needed()
    el.hover(force=True)
    tip = page.locator("#tip")
    tip.wait_for(state="visible", timeout=5000)
    return str(tip.inner_text())


def test_hover_shows_details_on_every_chart(browser: Any, page_file: Path) -> None:
    page, problems = _open(browser, page_file, VIEWPORTS["desktop"])
    try:
        assert page.locator("[data-tip] > title").count() == 0  # no second, native tooltip
        hist = _hover_tip(page, "#chart-ttft-distribution svg.wide rect[data-tip]")
        assert " ms: " in hist and "requests" in hist
        point = _hover_tip(page, "#chart-tradeoff svg.wide circle[data-tip]")
        assert "c=1" in point or "c=2" in point
        load = _hover_tip(page, "#chart-ttft svg.wide circle[data-tip]")
        assert "TTFT p" in load and "concurrent users" in load
        stop = _hover_tip(page, "#chart-timeline svg.wide text.stop.error")
        assert "server_error (HTTP 500)" in stop  # the ask against the failing fake
        stop = _hover_tip(page, "#chart-timeline svg.wide text.stop.error", last=True)
        assert "rate_limit (HTTP 429)" in stop
        cancelled = _hover_tip(page, "#chart-timeline svg.wide text.stop.cancelled")
        assert "cancelled" in cancelled
        seg = _hover_tip(page, "#chart-timeline svg.wide rect.seg")
        assert "waiting" in seg and " ms" in seg
        page.mouse.move(5, 5)  # off every chart: the tip goes
        assert not page.locator("#tip").is_visible()
        # the hostile name is text on the page, never markup
        assert page.locator("img[src=x]").count() == 0
        assert '<img src=x onerror="alert(1)"><script>alert(2)</script>' in page.locator("header").inner_text()
    finally:
        page.close()
    assert problems == []


def test_phone_tap_shows_details(browser: Any, page_file: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    page = context.new_page()
    try:
        page.goto(page_file.as_uri())
        el = page.locator("#chart-ttft-distribution svg.narrow rect[data-tip]").first
        el.scroll_into_view_if_needed()
        el.tap(force=True)
        tip = page.locator("#tip")
        tip.wait_for(state="visible", timeout=5000)
        assert "requests" in tip.inner_text()
        box = tip.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 391
    finally:
        context.close()


# --- the charts' own layout, seen at two widths ---------------------------------------------------
@pytest.fixture(scope="module")
def narrow_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report whose charts test their axes: two turns with TPOT 19.7 and 19.8 ms (a histogram of a
    0.1 ms range, and a timeline of two rows), beside a bench with the server's gauges and histograms (the
    queue and server-TTFT charts)."""
    root = tmp_path_factory.mktemp("narrow")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTFT_DATA_DIR", str(root / "data"))
        from tests.fakes.gauged_server import GaugedServer

        with GaugedServer(slots=2, token_ms=10, prefill_ms=5) as gauged:  # levels of 1-2 s: reads of a queue
            assert main(["bench", "-m", "compat:gauged-fake", "--base-url", gauged.base_url, "--concurrency", "1,4",
                         "--requests", "12", "--warmup", "0", "--max-output-tokens", "20", "--server-metrics",
                         "--out", str(root / "bench"), "--quiet"]) == 0  # fmt: skip
        log = SessionLog("narrow", directory=root / "sessions")
        for i, gap in enumerate((19.7, 19.8)):
            r = recorder()
            r.turn_index = i
            log.append(play(stream(first_ms=240 + 60 * i, gap_ms=gap, visible=30), r))
        out = root / "narrow.html"
        assert main(["report", str(root / "bench"), str(log.path), "--html", str(out)]) == 0
    return out


def _labels_apart(fig: Any, shown: str, axis: str) -> list[str]:
    """The tick labels of one axis as Chromium laid them out: each distinct, none over its neighbour."""
    ticks = fig.locator(f"{shown} text.tick.{axis}")
    labels = [str(t) for t in ticks.all_text_contents()]  # innerText is HTML's: SVG text has textContent
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    boxes = [b for b in (ticks.nth(i).bounding_box() for i in range(ticks.count())) if b is not None]
    assert len(boxes) == len(labels)
    if axis == "x":
        boxes.sort(key=lambda b: b["x"])
        assert all(a["x"] + a["width"] <= b["x"] + 0.5 for a, b in pairwise(boxes)), labels
    else:
        boxes.sort(key=lambda b: b["y"])
        assert all(a["y"] + a["height"] <= b["y"] + 0.5 for a, b in pairwise(boxes)), labels
    return labels


@pytest.mark.parametrize("name", list(VIEWPORTS))
def test_charts_at_two_widths_read_apart_and_fit_their_cards(
    browser: Any, narrow_page: Path, name: str, tmp_path: Path
) -> None:
    width, height = VIEWPORTS[name]
    page, problems = _open(browser, narrow_page, (width, height))
    try:
        shown = "svg.narrow" if name == "phone" else "svg.wide"
        figures = page.locator("figure.chart")
        ids = [figures.nth(i).get_attribute("id") for i in range(figures.count())]
        # the gauged fake publishes latency histograms too: the server's TTFT beside the client's
        assert ids == ["chart-tradeoff", "chart-ttft", "chart-queue", "chart-server-ttft",
                       "chart-ttft-distribution", "chart-tpot-distribution", "chart-timeline"]  # fmt: skip
        for i in range(figures.count()):
            fig = figures.nth(i)
            axes = ("x",) if ids[i] == "chart-timeline" else ("x", "y")
            for axis in axes:
                _labels_apart(fig, shown, axis)
            # each card is as tall as its chart (plus its padding), not as its row's tallest neighbour
            card, svg = fig.bounding_box(), fig.locator(shown).bounding_box()
            assert card is not None and svg is not None
            assert card["height"] - svg["height"] <= 16, (ids[i], card, svg)
        tpot = _labels_apart(page.locator("#chart-tpot-distribution"), shown, "x")
        assert all(label.startswith("19.") and len(label) == 5 for label in tpot), tpot  # 19.70 ... not "20 20 20"
        timeline = page.locator(f"#chart-timeline {shown}").bounding_box()
        assert timeline is not None
        rows = page.locator(f"#chart-timeline {shown} rect.seg")
        seg_tops = {round(b["y"]) for b in (rows.nth(k).bounding_box() for k in range(rows.count())) if b}
        assert len(seg_tops) == 2  # two turns, two rows ...
        assert timeline["height"] < 0.45 * timeline["width"]  # ... in a card no taller than they need
        page.screenshot(path=str(tmp_path / f"charts-{name}.png"), full_page=True)
        if os.environ.get("TTFT_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["TTFT_SCREENSHOTS"]) / f"charts-{name}.png"), full_page=True)
    finally:
        page.close()
    assert problems == []
