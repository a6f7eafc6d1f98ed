"""The charts' axes: ticks with the decimals their range needs (never "20 20 20 20" for 19.7-19.8 ms), as
many as fit the chart's width, in the terminal and in SVG; a timeline as tall as its rows."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ttft.tui.report.charts import axis_ticks, tick_decimals, tick_labels
from ttft.tui.report.figures import hist_chart, timeline_chart
from ttft.tui.report.html import NARROW

from tests.support.turns import play, stream

SVG = "{http://www.w3.org/2000/svg}"


def _ticks(svg: str, axis: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text") if t.get("class") == f"tick {axis}"]


@pytest.mark.parametrize(
    ("ticks", "labels"),
    [
        ([19.7, 19.72, 19.74, 19.76], ["19.70", "19.72", "19.74", "19.76"]),
        ([0, 2.5, 5, 7.5], ["0.0", "2.5", "5.0", "7.5"]),  # as given; axis_ticks steps by 1, 2 or 5
        ([0, 500, 1000, 1500], ["0", "500", "1,000", "1,500"]),
        ([-0.2, -0.1, 0.0, 0.1], ["-0.2", "-0.1", "0.0", "0.1"]),
        ([0.001, 0.0015, 0.002], ["0.0010", "0.0015", "0.0020"]),
        ([1e-17, 0.1], ["0.0", "0.1"]),  # float noise is no decimal (and never "-0.0")
    ],
)
def test_labels_take_the_decimals_the_step_needs(ticks: list[float], labels: list[str]) -> None:
    assert tick_labels(ticks) == labels


@given(
    lo=st.floats(-1e6, 1e6, allow_nan=False),
    span=st.floats(1e-3, 1e6, allow_nan=False),
)
def test_nice_ticks_always_read_apart(lo: float, span: float) -> None:
    ticks = axis_ticks(lo, lo + span, 600)
    labels = tick_labels(ticks)
    assert len(set(labels)) == len(labels), (ticks, labels)
    assert ticks[0] <= lo + 1e-9 * max(1, abs(lo)) and ticks[-1] >= lo + span - 1e-9 * max(1, abs(lo + span))
    assert tick_decimals(ticks) <= 10


def test_a_narrow_tpot_histogram_is_labelled_apart_in_svg_and_the_terminal() -> None:
    values = [19.7 + i * 0.1 / 39 for i in range(40)]
    chart = hist_chart(values, "TPOT distribution", "TPOT ms")
    for svg in (chart.svg(), chart.svg(*NARROW)):
        labels = _ticks(svg, "x")
        assert len(labels) >= 3 and len(set(labels)) == len(labels), labels  # was 20 20 20 20 20 20
        assert all(re.fullmatch(r"19\.\d\d", x) for x in labels), labels
    text = chart.terminal(78, 16)
    axis = next(line for line in text.splitlines() if "19." in line)  # the x tick labels' line
    found = re.findall(r"\d+\.\d+", axis)
    assert len(found) >= 3 and len(set(found)) == len(found) and all(len(x) == 5 for x in found), axis


def test_long_labels_thin_out_on_a_narrow_chart() -> None:
    values = [1_000_000 + i * 3_700 for i in range(50)]
    chart = hist_chart(values, "E2E", "ms")
    wide, narrow = _ticks(chart.svg(), "x"), _ticks(chart.svg(*NARROW), "x")
    assert len(narrow) < len(wide) or len(narrow) * 9 * 7 <= NARROW[0] - 90  # the labels fit side by side
    assert len(set(narrow)) == len(narrow)


@pytest.mark.parametrize("n", [1, 2, 8, 20])
def test_the_timeline_is_as_tall_as_its_rows(n: int) -> None:
    records = []
    for i in range(n):
        r = play(stream(first_ms=100 + i, gap_ms=10, visible=4))
        r["turn_index"] = i
        records.append(r)
    from ttft.telemetry.record import typed_records

    chart = timeline_chart(typed_records(records))
    for width, offered in ((720, 420), NARROW):
        root = ET.fromstring(chart.svg(width, offered))
        height = float(root.get("height") or 0)
        rows = [float(r.get("height") or 0) + 4 for r in root.iter(f"{SVG}rect") if r.get("class") == "seg"]
        assert rows, "no bars drawn"
        used = 60 + 55 + n * max(rows)  # legend, axis, and one row per turn
        assert height == pytest.approx(used, abs=1), (n, height, used)
        if n == 2:
            assert height < offered * 0.6  # two turns: no longer a card of mostly empty space
