"""Snapshot of an answer with tool calls (issue 23, item 7): its text, each call as a block with its name and
indented arguments, and the finish reason; drawn by the transcript from a finished record."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.transcript import Transcript

from tests.support.turns import at, play


class _Host(App[None]):
    CSS = "Transcript { padding: 0 1; }"

    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")


def _record() -> TurnRecord:
    events: list[ev.Event] = [
        ev.AttemptSent(at(0), 1),
        ev.HeadersReceived(at(40), 1, 200),
        ev.TextDelta(at(100), "I'll look both up."),
        ev.ToolCallDelta(at(110), "get_weather", "", index=1),
        ev.ToolCallDelta(at(120), "", '{"city": "Paris", ', index=1),
        ev.ToolCallDelta(at(130), "", '"unit": "celsius", "days": 3}', index=1),
        ev.ToolCallDelta(at(140), "search_flights", "", index=2),
        ev.ToolCallDelta(at(150), "", '{"from": "LHR", "to": "CDG", "date": "2026-05-01"}', index=2),
        ev.Finished(at(160), "tool_calls"),
    ]
    return TurnRecord.from_dict(play(events))


async def _draw(pilot: Pilot) -> None:
    await pilot.app.query_one(Transcript).add_record(_record(), lambda: 0)
    await pilot.pause(0.1)


def test_an_answer_with_two_tool_calls(snap_compare) -> None:
    assert snap_compare(_Host(), terminal_size=(80, 30), run_before=_draw)
