"""Point labels on the SVG charts: never over one another, a point or the legend, always inside the plot,
whatever the points (many levels at nearly one TTFT, the case that drew "7.0 waiting" over its neighbour);
a label left off for want of room is still in its point's hover details."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st
from ttft.tui.report.charts import LABEL_CHAR_PX, LABEL_H, Chart, Series, place_labels

SVG = "{http://www.w3.org/2000/svg}"
PLOT = (70.0, 40.0, 700.0, 365.0)


def _box(x: float, y: float, text: str) -> tuple[float, float, float, float]:
    return (x, y - LABEL_H + 3, x + len(text) * LABEL_CHAR_PX, y + 3)


def _apart(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


points = st.lists(
    st.tuples(st.floats(70, 700), st.floats(40, 365), st.text("0123456789. waiting", min_size=1, max_size=14)),
    max_size=30,
)


@given(points)
def test_placed_labels_never_collide_and_stay_in_the_plot(wanted: list[tuple[float, float, str]]) -> None:
    legend = (70.0, 40.0, 180.0, 80.0)
    placed = place_labels(wanted, PLOT, [legend])
    boxes = [_box(x, y, t) for x, y, t in placed]
    for i, a in enumerate(boxes):
        assert PLOT[0] <= a[0] and a[2] <= PLOT[2] and PLOT[1] <= a[1] and a[3] <= PLOT[3]
        assert _apart(a, legend)
        assert all(_apart(a, b) for b in boxes[i + 1 :])
        assert all(_apart(a, (px - 6, py - 6, px + 6, py + 6)) for px, py, _ in wanted)


def test_crowded_levels_alternate_and_keep_their_text() -> None:
    """Twelve levels at one TTFT, 40 px apart: the labels take turns above and below, none over another."""
    wanted = [(100 + 40 * i, 200.0, f"{i}.0 waiting") for i in range(12)]
    placed = place_labels(wanted, PLOT)
    assert len(placed) >= 6
    assert len({y for _, y, _ in placed}) >= 2  # above and below
    assert {t for _, _, t in placed} <= {t for _, _, t in wanted}


def test_svg_labels_apart_and_every_label_in_a_tip() -> None:
    xs = [float(c) for c in range(1, 17)]
    chart = Chart(
        "xy", "TTFT by load", "concurrent users", "TTFT ms",
        [Series("TTFT p50", xs, [1000.0 + x for x in xs], [f"{x:.1f} waiting" for x in xs]),
         Series("TTFT p99", xs, [1010.0 + x for x in xs])],
        x_whole=True,
    )  # fmt: skip
    svg = chart.svg()
    root = ET.fromstring(svg)
    labels = [t for t in root.iter(f"{SVG}text") if t.get("class") == "point-label"]
    assert 2 <= len(labels) < 16  # sixteen labels at one height cannot all fit: some are left off ...
    boxes = [_box(float(t.get("x") or 0), float(t.get("y") or 0), t.text or "") for t in labels]
    assert all(_apart(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    tips = re.findall(r'data-tip="TTFT p50 ([\d.]+ waiting):', svg)
    assert tips == [f"{x:.1f} waiting" for x in xs]  # ... but every one is on its point's hover
