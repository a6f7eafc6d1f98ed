"""The report's page and charts: header facts, escaping, whole-number count axes, failed and
cancelled turns marked, hover details on every chart element, nothing fetched."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ttft.backends.version import package_version
from ttft.telemetry import events as ev
from ttft.telemetry.bench import aggregate as agg
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.record import typed_records
from ttft.tui.cli import main
from ttft.tui.commands.report.command import html_page, load, report_charts
from ttft.tui.report.charts import whole_ticks
from ttft.tui.report.figures import hist_chart, timeline_chart, ttft_chart

from tests.support.turns import at, play, recorder, stream
from tests.telemetry.bench.test_aggregate import rec, typed


def turns() -> list[dict]:
    """An ok turn, a failed one (HTTP 429 after 50 ms) and one cancelled while streaming."""
    ok = play(stream(first_ms=200, gap_ms=10, visible=6))
    failed = play([ev.AttemptSent(at(0), 1), ev.Failed(at(50), "rate_limit", "Too many", 429)])
    cancelled = play([*stream(first_ms=100, gap_ms=10, visible=8)[:6], ev.Cancelled(at(180))])
    for i, r in enumerate((ok, failed, cancelled)):
        r["turn_index"] = i
    return [ok, failed, cancelled]


def test_whole_ticks_never_split_a_count() -> None:
    for hi in (0, 1, 2, 3, 7, 13, 101):
        ticks = whole_ticks(hi)
        assert ticks[0] == 0 and ticks[-1] >= hi and all(t == int(t) for t in ticks)
        assert len(ticks) <= 7
    assert whole_ticks(2) == [0, 1, 2]


def _ytick_labels(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := re.match(r"\s*([\d.,]+)┤", line))]


def test_count_axes_tick_on_whole_numbers() -> None:
    hist = hist_chart([100, 120, 130, 200, 210, 400], "TTFT", "ms")
    labels = _ytick_labels(hist.terminal(60, 14))
    assert labels and all("." not in lab for lab in labels)  # was 0.25, 0.50, 0.75
    svg = ET.fromstring(hist.svg())
    y_labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("text-anchor") == "end"]
    assert y_labels and all(lab and lab.isdigit() for lab in y_labels)
    levels = [agg.aggregate_level(typed([rec(sent_at=0, ttft=10 * c, tokens=5, tpot=5)]), level=c) for c in (1, 2)]
    users = ttft_chart(levels)
    axis = users.terminal(70, 14).splitlines()[-2]  # the x tick labels
    assert re.findall(r"[\d.]+", axis) == ["1", "2"]  # concurrency: no 1.17 users
    x_labels = [t.text for t in ET.fromstring(users.svg()).iter("{http://www.w3.org/2000/svg}text")]
    assert "1.5" not in x_labels and "1" in x_labels and "2" in x_labels


def test_failed_and_cancelled_turns_are_marked_on_the_timeline() -> None:
    chart = timeline_chart(typed_records(turns()))
    text = chart.terminal(90)
    rows = text.splitlines()
    assert "✕ rate_limit (HTTP 429)" in rows[2] and "50 ms" in rows[2]
    assert "■ cancelled" in rows[3] and "✕" not in rows[1] and "■" not in rows[1]
    assert "✕ error" in rows[-1] and "■ cancelled" in rows[-1]
    svg = chart.svg()
    ET.fromstring(svg)
    assert svg.count('class="stop error"') == 1 and svg.count('class="stop cancelled"') == 1
    assert 'data-tip="#2 openai:m: rate_limit (HTTP 429) at 50 ms"' in svg


def test_every_chart_element_has_hover_details() -> None:
    level = agg.aggregate_level(typed([rec(sent_at=0, ttft=10, tokens=5, tpot=5)]), level=1)
    for chart in (
        ttft_chart([level]),
        hist_chart([1.0, 2.0, 9.0], "TTFT", "ms"),
        timeline_chart(typed_records(turns())),
    ):
        root = ET.fromstring(chart.svg())
        marks = [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] in ("rect", "circle") and e.get("height") != "10"]
        drawn = [e for e in marks if e.get("fill") not in ("white", "none")]
        assert drawn and all(e.get("data-tip") for e in drawn), chart.title


def test_page_header_and_escaping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("s-page", directory=tmp_path / "sessions")
    evil = recorder()
    evil.model = "<script>alert(1)</script>\x1b[31m"
    evil.base_url = "https://user:hunter2@api.example.com/v1?api-key=SECRETQ"
    log.append(play(stream(first_ms=120), evil))
    for r in turns():
        log.append(r)
    loaded = load([str(log.path)])
    page = html_page(loaded, report_charts(loaded, None), package_version())
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "hunter2" not in page and "SECRETQ" not in page
    assert "api.example.com" in page and str(log.path) in page and f"<dd>{package_version()}</dd>" in page
    assert re.search(r"<dt>Generated</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC</dd>", page)
    # one file: nothing is fetched, and only the page's own script may run
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert page.count("<script>") == 1 and "script-src 'sha256-" in page
    assert "name='viewport'" in page


def test_report_html_command_writes_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("s-cmd", directory=tmp_path / "sessions")
    for r in turns():
        log.append(r)
    out = tmp_path / "r.html"
    assert main(["report", str(log.path), "--html", str(out)]) == 0
    text = capsys.readouterr().out
    assert "✕ rate_limit" in text and "■ cancelled" in text
    page = out.read_text()
    assert page.count('class="stop error"') == 2  # wide and narrow drawings
    assert (out.stat().st_mode & 0o777) == 0o600


def test_html_to_stdout_is_the_page_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("s-out", directory=tmp_path / "sessions")
    for r in turns():
        log.append(r)
    assert main(["report", str(log.path), "--html", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!doctype html>") and out.rstrip().endswith("</html>")
    assert "Timeline of chosen turns" in out and "wrote" not in out and not (Path.cwd() / "-").exists()


def test_a_summary_whose_fields_are_not_text_still_makes_a_page(tmp_path: Path) -> None:
    import json

    summary = tmp_path / "summary.json"
    summary.write_text(
        json.dumps({"schema": "ttft.bench/1", "base_url": 5, "model_spec": ["x"], "started_at": 7, "details": []})
    )
    page = tmp_path / "r.html"
    assert main(["report", str(summary), "--html", str(page), "-q"]) == 0
    text = page.read_text()
    assert "<code>5</code>" in text and "ttft report" in text
