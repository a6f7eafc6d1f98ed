"""The report's layout in real headless Chromium at a laptop's width (1,280 px) and a small window's
(800 px): the page never scrolls sideways, every cell of a wide level table can be reached in the
table's own scrolling box, and the "N waiting" labels of the TTFT chart never overlap, however
close the levels. The report is made by the real code from a bench run against the loopback
gauged fake (a fixed number of slots, so requests really queue at the higher levels).

Needs /usr/bin/chromium and the playwright package; skips (saying why) without them, except in CI
(``CI`` set, as .ci/run sets it and installs Chromium), where a missing browser fails."""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from ttft.tui.cli import main

from tests.tui.report.test_browser import ARGS, CHROMIUM, needs_chromium

WIDTHS = (1280, 800)


pytestmark = needs_chromium()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench of seven levels on two slots, read through the server's /metrics: five levels queue."""
    root = tmp_path_factory.mktemp("layout")
    from tests.fakes.gauged_server import GaugedServer

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTFT_DATA_DIR", str(root / "data"))
        with GaugedServer(slots=2, token_ms=8, prefill_ms=5) as gauged:
            assert main(["bench", "-m", "compat:gauged-fake", "--base-url", gauged.base_url,
                         "--concurrency", "1,2,3,4,5,6,8", "--requests", "10", "--warmup", "0",
                         "--max-output-tokens", "12", "--server-metrics", "--out", str(root / "bench"),
                         "--quiet"]) == 0  # fmt: skip
        out = root / "report.html"
        assert main(["report", str(root / "bench"), "--html", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def browser(report: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")  # never fetch a browser
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


# Every element that is wider than its box and lets it spill out (overflow visible): only the tables'
# own scrolling boxes may be wider than the page allows, and they scroll.
SPILLS = """() => [...document.body.querySelectorAll('*')].filter(el => el instanceof HTMLElement
  && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1
  && getComputedStyle(el).overflowX === 'visible').map(el => el.tagName + '.' + el.className)"""

# Each table's last column, scrolled into its box: is every cell then wholly inside the box and the window?
LAST_COLUMN = """() => [...document.querySelectorAll('div.scroll')].map(box => {
  box.scrollLeft = box.scrollWidth;
  const b = box.getBoundingClientRect();
  const cells = [...box.querySelectorAll('tr > :last-child')];
  return {scrolls: box.scrollWidth > box.clientWidth, cells: cells.length,
    reachable: cells.every(c => { const r = c.getBoundingClientRect();
      return r.width > 0 && r.left >= b.left - 1 && r.right <= b.right + 1 && r.right <= innerWidth + 1; }),
    text: cells.map(c => c.textContent)};
})"""


@pytest.mark.parametrize("width", WIDTHS)
def test_no_sideways_page_every_column_reachable_labels_apart(
    browser: Any, report: Path, width: int, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(tmp_path / f"layout-{width}.png"), full_page=True)
        if os.environ.get("TTFT_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["TTFT_SCREENSHOTS"]) / f"layout-{width}.png"), full_page=True)

        assert page.evaluate("document.documentElement.scrollWidth") <= page.evaluate("innerWidth")
        assert page.evaluate(SPILLS) == []

        tables = page.evaluate(LAST_COLUMN)
        assert len(tables) == 1 and tables[0]["cells"] == 8  # the header and seven levels
        assert tables[0]["text"][0] == "client" and all("cpu" in t for t in tables[0]["text"][1:])
        assert tables[0]["reachable"], tables

        # the level column stays in view while the table scrolls
        first = page.locator("div.scroll tbody tr:first-child td:first-child").bounding_box()
        box = page.locator("div.scroll").bounding_box()
        assert first is not None and box is not None and first["x"] >= box["x"] - 1

        labels = page.locator("#chart-ttft svg.wide text.point-label")
        texts = labels.all_text_contents()
        assert len(texts) >= 2 and all(t.endswith(" waiting") for t in texts), texts
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        svg = page.locator("#chart-ttft svg.wide").bounding_box()
        assert svg is not None and all(b is not None for b in boxes)
        for b in boxes:  # each inside its chart
            assert svg["x"] <= b["x"] and b["x"] + b["width"] <= svg["x"] + svg["width"] + 0.5
        for (i, a), (j, b) in combinations(enumerate(boxes), 2):
            apart = (
                a["x"] + a["width"] <= b["x"] + 0.5
                or b["x"] + b["width"] <= a["x"] + 0.5
                or a["y"] + a["height"] <= b["y"] + 0.5
                or b["y"] + b["height"] <= a["y"] + 0.5
            )
            assert apart, (texts[i], a, texts[j], b)
    finally:
        page.close()
