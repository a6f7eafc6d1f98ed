"""The telemetry pane's after-turn figures with a compat server's own gauges (its queue and KV use as the
request left), drawn by the pane alone: a snapshot, and the words for what the record holds."""

from __future__ import annotations

from textual.app import App, ComposeResult
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.telemetry_pane import TelemetryPane, record_text

from tests.support.turns import at, play, stream


def _record(gauges: dict | None) -> TurnRecord:
    events = stream(first_ms=1840, gap_ms=12, visible=24)
    if gauges is not None:
        events.insert(2, ev.ServerTimings(at(3), "gauges", gauges))  # read 3 ms after the send
    return TurnRecord.from_dict(play(events))


QUEUED = {"server": "vllm", "running": 8.0, "waiting": 3.0, "kv_cache_usage": 0.713, "read_ms": 2.9}


def test_the_queue_is_said_beside_ttft() -> None:
    lines = record_text(_record(QUEUED)).plain.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("TTFT"))
    row = next(line for line in lines if "server queue" in line)
    assert row.split(None, 2)[2] == "3 requests waiting · 8 running · KV 71% (vllm)"
    assert lines.index(row) > i  # under the TTFT it explains
    assert not any(line.startswith("gauges") for line in lines)  # not shown again as an unknown server's figures


def test_no_row_without_gauges_or_with_junk() -> None:
    assert "server queue" not in record_text(_record(None)).plain
    junk = {"server": "x\x1b[31m", "running": "lots", "waiting": -1, "kv_cache_usage": 5}
    assert "server queue" not in record_text(_record(junk)).plain


def test_a_server_without_kv_gauge_says_what_it_has() -> None:
    text = record_text(_record({"server": "llama-server", "running": 2, "waiting": 0, "kv_cache_usage": None}))
    assert "0 requests waiting · 2 running (llama-server)" in text.plain


class _PaneApp(App[None]):
    def __init__(self, record: TurnRecord) -> None:
        super().__init__()
        self.record = record

    def compose(self) -> ComposeResult:
        yield TelemetryPane()

    def on_mount(self) -> None:
        self.query_one(TelemetryPane).show_record(self.record)


def test_snapshot(snap_compare) -> None:
    assert snap_compare(_PaneApp(_record(QUEUED)), terminal_size=(64, 24))
