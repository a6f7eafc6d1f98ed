"""Tool calls are part of the answer on screen (issue 23, item 7): each call's name and arguments as a block,
with the answer's finish reason, live while it streams and once it has ended; in the chat, in compare panes
and in an older turn drawn compact. A compat server that answers only with ``tool_calls`` deltas used to
leave an empty "ok" turn.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from ttft.backends.providers.lean.messages import LeanMessagesBackend
from ttft.backends.providers.openai_chat import OpenAIChatBackend
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.tui.widgets.transcript import AssistantMessage, CompactTurn, ToolCalls, Transcript, tool_arguments

from tests.fakes import FakeServer, Schedule
from tests.support.tui_support import wait_until
from tests.support.turns import at, play, recorder

CALLS = (("get_weather", '{"city":"Paris","unit":"c"}'), ("get_time", '{"tz":"Europe/Paris"}'))


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")


def _text(renderable: Any, width: int = 100) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def _painted(app: App[Any]) -> str:
    console = Console(file=io.StringIO(), record=True, width=app.size.width, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


def _tool_events(calls: tuple[tuple[str, str], ...] = CALLS, text: str = "", stop: str = "tool_calls") -> list[Any]:
    """A streamed tool-call answer as the Chat Completions readers give it: each call's name, then its
    arguments in pieces, all under the call's index."""
    out: list[Any] = [ev.AttemptSent(at(0), 1), ev.HeadersReceived(at(50), 1, 200)]
    t = 100.0
    if text:
        out.append(ev.TextDelta(at(t), text))
        t += 10
    for i, (name, args) in enumerate(calls):
        out.append(ev.ToolCallDelta(at(t), name, "", index=i))
        for k in range(0, len(args), 7):
            t += 10
            out.append(ev.ToolCallDelta(at(t), "", args[k : k + 7], index=i))
        t += 10
    out.append(ev.Finished(at(t), stop))
    return out


def test_the_recorder_joins_the_pieces_of_each_call() -> None:
    d = play(_tool_events())
    assert d["tool_calls"] == [{"name": n, "arguments": a} for n, a in CALLS]
    assert d["answer"] == "" and d["stop_reason"] == "tool_calls"
    # no index (a non-streamed answer): a piece with a name begins a call, one without continues it
    d = play(
        [ev.ToolCallDelta(at(1), "f", '{"a":'), ev.ToolCallDelta(at(2), "", "1}"), ev.ToolCallDelta(at(3), "g", "")]
    )
    assert d["tool_calls"] == [{"name": "f", "arguments": '{"a":1}'}, {"name": "g", "arguments": ""}]
    # a server that numbers every call 0: a new name is a new call; a repeated name is the same one
    d = play(
        [
            ev.ToolCallDelta(at(1), "f", "{}", index=0),
            ev.ToolCallDelta(at(2), "g", "", index=0),
            ev.ToolCallDelta(at(3), "g", "{}", index=0),
        ]
    )
    assert d["tool_calls"] == [{"name": "f", "arguments": "{}"}, {"name": "g", "arguments": "{}"}]


def test_arguments_are_indented_when_they_are_json_and_kept_when_not() -> None:
    assert tool_arguments('{"city":"Paris"}') == '{\n  "city": "Paris"\n}'
    assert tool_arguments('{"city":"Pa') == '{"city":"Pa'  # still arriving, or broken: as streamed
    assert tool_arguments('{"a":1}', pretty=False) == '{"a":1}'


async def test_a_tool_only_turn_shows_each_call_and_its_finish_reason() -> None:
    record = TurnRecord.from_dict(play(_tool_events()))
    app = _Host()
    async with app.run_test(size=(100, 40)) as pilot:
        await app.query_one(Transcript).add_record(record, lambda: 0)
        await pilot.pause()
        msg = app.query_one(AssistantMessage)
        assert not msg.answer.display and msg.tools.display
        shown = _painted(app)
        assert "tool call 1: get_weather" in shown and "tool call 2: get_time" in shown
        assert '"city": "Paris",' in shown and '"tz": "Europe/Paris"' in shown  # indented JSON
        assert "finish_reason: tool_calls" in shown


async def test_tool_calls_stream_in_live_and_settle_when_the_turn_ends() -> None:
    events = _tool_events(text="Let me check. ")
    rec = recorder()
    app = _Host()
    async with app.run_test(size=(100, 40)) as pilot:
        transcript = app.query_one(Transcript)
        msg = await transcript.add_assistant(lambda: at(10_000))
        cut = 7  # sent, headers, the text, the first call's name and its first three pieces
        for e in events[:cut]:
            rec.feed(e)
        msg.pump(rec, rec.snapshot(at(10_000)))
        await pilot.pause(0.1)
        live = _text(msg.tools.content)
        assert msg.tools.display and "tool call: get_weather" in live
        assert '{"city":"Paris","' in live and "finish_reason" not in live  # as streamed so far
        for e in events[cut:]:
            rec.feed(e)
        msg.pump(rec, rec.snapshot(at(10_000)))
        await pilot.pause(0.1)
        await msg.finalize(rec.finish())
        await pilot.pause(0.1)
        final = _text(msg.tools.content)
        assert "tool call 1: get_weather" in final and "tool call 2: get_time" in final
        assert '"unit": "c"' in final and "finish_reason: tool_calls" in final
        assert msg.answer.display  # the text before the calls stays the answer


async def test_a_compact_turn_keeps_its_tool_calls() -> None:
    record = TurnRecord.from_dict(play(_tool_events(text="On it.")))
    text = _text(CompactTurn._content("weather?", record))
    assert "On it." in text and "tool call 1: get_weather" in text and "finish_reason: tool_calls" in text


async def test_a_tool_calls_names_and_arguments_never_drive_the_terminal() -> None:
    record = TurnRecord.from_dict(
        play(_tool_events(calls=(("evil\x1b]0;PWNED\x07\u202e", '{"q":"\x9b31m\u2066x"}'),), stop="tool_calls"))
    )
    app = _Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await app.query_one(Transcript).add_record(record, lambda: 0)
        await pilot.pause()
        shown = _painted(app)
        assert "evil␛]0;PWNED␇<U+202E>" in shown
        assert not any(c in shown for c in "\x1b\x07\x9b\u202e\u2066")
    assert record.tool_calls[0]["name"] == "evil\x1b]0;PWNED\x07\u202e"  # the record keeps the exact text


def test_a_tool_call_widget_stays_hidden_without_calls() -> None:
    w = ToolCalls()
    w.show([], "stop", final=True)
    assert not w.display


async def test_the_chat_shows_a_compat_servers_tool_calls(tmp_path: Path) -> None:
    """The real chat, through the OpenAI SDK, against a compat server that answers with tool_calls deltas only."""
    from ttft.tui.chat.app import ChatApp

    with FakeServer(Schedule(visible_tokens=0, tool_calls=CALLS)) as srv:
        app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
        async with app.run_test(size=(120, 40)) as pilot:
            app.query_one("#prompt").value = "weather in Paris?"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 20)
            await pilot.pause(0.2)
            shown = _painted(app)
            record = app.chat.session.records[0].to_dict()
    assert record["status"] == "ok" and record["answer"] == "" and record["stop_reason"] == "tool_calls"
    assert record["tool_calls"] == [{"name": n, "arguments": a} for n, a in CALLS]
    assert "tool call 1: get_weather" in shown and '"city": "Paris"' in shown
    assert "finish_reason: tool_calls" in shown


async def test_compare_panes_show_tool_calls_of_each_api(tmp_path: Path) -> None:
    """Two panes, Chat Completions (SDK) and Anthropic Messages (lean reader), both answering with tool calls."""
    from ttft.tui.compare.app import CompareApp, PaneView

    with FakeServer(Schedule(visible_tokens=1, tool_calls=CALLS[:1])) as srv:
        chat = OpenAIChatBackend("fake-model", provider="compat", base_url=srv.openai_base_url, compat=True)
        messages = LeanMessagesBackend("fake-model", base_url=srv.url, api_key="k")
        app = CompareApp([chat, messages], session_id="s-tools", comparison_id="cmp-tools")
        async with app.run_test(size=(160, 48)) as pilot:
            app.query_one("#prompt").value = "weather?"  # type: ignore[attr-defined]
            await pilot.press("enter")
            for _ in range(300):
                await pilot.pause(0.05)
                if not app.in_flight:
                    break
            await pilot.pause(0.3)
            views = list(app.query(PaneView))
            blocks = [_text(w.content) for v in views for w in v.query(ToolCalls) if w.display]
    assert len(blocks) == 2, blocks
    assert all("tool call: get_weather" in b and '"city": "Paris"' in b for b in blocks)
    assert any("finish_reason: tool_calls" in b for b in blocks) and any("finish_reason: tool_use" in b for b in blocks)
