"""The chat switches into compare mode (F9, /compare SPEC) and back (F10/Esc, or /chat A to go on with a pane)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.telemetry.log.turns import read_records
from ttft.tui.chat.app import ChatApp
from ttft.tui.chat.compare import CompareSpecScreen
from ttft.tui.compare.pane import PaneView
from ttft.tui.compare.screen import CompareScreen
from ttft.tui.widgets.transcript import UserMessage

from tests.support.tui_support import TimedBackend, heard, said, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


class Factory:
    """A fresh scripted backend per (spec, base URL), as the real factory makes one per pane."""

    def __init__(self) -> None:
        self.made: list[tuple[str, TimedBackend]] = []

    def __call__(self, spec: str, base_url: str | None) -> TimedBackend:
        name = spec.split(":", 1)[1]
        b = TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=4, model=name, text=lambda i: f"{name}{i} ")
        self.made.append((spec, b))
        return b

    def backends(self, spec: str) -> list[TimedBackend]:
        return [b for s, b in self.made if s == spec]


async def submit(pilot, app, text: str) -> None:  # type: ignore[no-untyped-def]
    app.screen.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_f9_opens_compare_with_the_chat_model_and_chat_a_continues_a_pane(data_dir: Path) -> None:
    factory = Factory()
    app = ChatApp("fake:first", factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        await submit(pilot, app, "hello")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)

        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareSpecScreen))
        app.screen.query_one("#compare-spec").value = "fake:second"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), timeout=15)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        names = [v.model_name for v in screen.query(PaneView)]
        assert names == ["fake:first", "fake:second"]  # seeded with the chat's model, then the typed one
        assert screen.active_bindings["f10"].enabled  # back to the chat is on offer here

        await submit(pilot, app, "compare this")
        await wait_until(pilot, lambda: len(screen.results) == 1 and not screen.in_flight, timeout=15)
        for spec in ("fake:first", "fake:second"):
            req = factory.backends(spec)[-1].requests[-1]
            # every pane starts from the chat's conversation
            assert [m.content for m in req.messages][:2] == ["hello", "first0 first1 first2 first3 "]
            assert req.messages[-1].content == "compare this"

        await submit(pilot, app, "/chat B")
        await wait_until(pilot, lambda: not isinstance(app.screen, CompareScreen))
        await wait_until(pilot, lambda: app.chat.session.spec == "fake:second")
        assert [m.content for m in app.chat.session.messages][-2:] == [
            "compare this",
            "second0 second1 second2 second3 ",
        ]
        assert "fake · second" in str(app.query_one("#header").content)
        await wait_until(pilot, lambda: [u.prompt for u in app.query(UserMessage)][-1:] == ["compare this"])

        # the chat goes on with pane B's model and conversation
        await submit(pilot, app, "and now?")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 2 and not app.chat.busy)
        last = factory.backends("fake:second")[-1].requests[-1]
        assert [m.content for m in last.messages] == [
            "hello",
            "first0 first1 first2 first3 ",
            "compare this",
            "second0 second1 second2 second3 ",
            "and now?",
        ]
        assert app.chat.session.records[-1].model == "second"
    # the comparison's turns were logged with their comparison id; the chat's own log goes on
    logs = {p.stem: list(read_records(p)) for p in (data_dir / "sessions").glob("*.jsonl")}
    chat = logs.pop(app.chat.session.log.session_id)
    assert [r["prompt"] for r in chat] == ["hello", "and now?"]
    (compared,) = logs.values()
    assert sorted(r["model"] for r in compared) == ["first", "second"]
    assert all(r["extra"].get("comparison_id") for r in compared)


async def test_compare_command_then_escape_leaves_the_chat_as_it_was() -> None:
    factory = Factory()
    app = ChatApp("fake:first", factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, app, "/compare fake:other")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), timeout=15)
        screen = app.screen
        await pilot.press("ctrl+n")  # a chat key does nothing to the chat under the compare screen
        await pilot.pause(0.1)
        assert isinstance(app.screen, CompareScreen) and app.chat.session.records == []
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, CompareScreen))
        assert app.chat.session.spec == "fake:first" and app.chat.session.messages == []
        assert not screen.is_attached  # its backends and stream thread went with it
        assert screen.stream.loop.is_closed()
        await submit(pilot, app, "still here")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        assert app.chat.session.records[0].model == "first"


async def test_a_bad_spec_stays_in_the_chat_with_a_message() -> None:
    def factory(spec: str, base_url: str | None) -> TimedBackend:
        if spec.startswith("nope:"):
            raise ValueError("unknown provider 'nope'")
        return TimedBackend(model=spec)

    app = ChatApp("fake:first", factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, app, "/compare nope:x")
        await wait_until(pilot, lambda: said(app, "unknown provider"))
        assert not isinstance(app.screen, CompareScreen)


async def test_a_spec_or_error_with_brackets_and_controls_is_said_as_written() -> None:
    def factory(spec: str, base_url: str | None) -> TimedBackend:
        if spec.startswith("nope:"):
            raise ValueError("server said [/bold] \x1b[2Jno")  # not markup, not an escape sequence
        return TimedBackend(model=spec)

    app = ChatApp("fake:first", factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, app, "/compare nope:[x]")
        await wait_until(pilot, lambda: said(app, "nope:[x]"))
        assert not isinstance(app.screen, CompareScreen)
        notices = heard(app)
        assert any("nope:[x]" in m and "[/bold]" in m for m in notices)
        assert not any("\x1b" in m for m in notices)
        await pilot.pause(0.2)  # the toasts render: a markup error here would end the app
        assert app.is_running


async def test_a_comparison_opened_from_the_chat_starts_the_chats_tool_servers_for_itself(data_dir: Path) -> None:
    from ttft.tui.tool_servers import ToolServers

    from tests.backends.mcp.servers import stdio

    tools = ToolServers([stdio("fake")], start_timeout_s=90)
    app = ChatApp("fake:first", factory=Factory(), tools=tools)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: tools.host is not None, timeout=90)
        await submit(pilot, app, "/compare fake:second")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), timeout=15)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # the same servers, its own set: the comparison's host is closed with it, the chat's stays up
        assert screen.tools is not tools and screen.tools.servers == tools.servers
        await wait_until(pilot, lambda: screen.tools.host is not None, timeout=90)
        assert screen.tools.host is not tools.host
        await pilot.press("f10")
        await wait_until(pilot, lambda: not isinstance(app.screen, CompareScreen))
        await wait_until(pilot, lambda: screen.tools.host is None, timeout=30)
        assert tools.host is not None and [t.name for t in tools.host.tools()]  # the chat's servers still serve
