"""The command palette works on every screen, and static texts keep their square brackets.

The compare screen's palette once listed nothing (it called a method that an edit had
removed, and the palette swallowed the error), and the help screen dropped "[usage]" and
"[estimated]" as markup: pilot tests that open the palette everywhere and run a command,
and that read the words back off the screen.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Static
from ttft.tui.chat.app import ChatApp
from ttft.tui.chat.compare import CompareSpecScreen
from ttft.tui.compare.app import CompareApp, CompareScreen, PaneView
from ttft.tui.screens.help import METRICS, HelpScreen
from ttft.tui.screens.sessions import SessionsScreen
from ttft.tui.screens.settings import SettingsScreen

from tests.support.tui_support import TimedBackend, factory_for, wait_until

SIZE = (160, 48)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data [x]"))  # brackets in a path shown on screen
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    return tmp_path / "data [x]"


def quick(model: str = "quick-1") -> TimedBackend:
    return TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3, model=model)


async def run_from_palette(pilot: Any, app: Any, query: str, expect: str) -> None:
    """ctrl+p, type ``query``, check ``expect`` is among the matches, run the highlighted one."""
    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)
    palette = app.screen

    def matches() -> list[str]:
        options = palette.query_one(CommandList)
        return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]

    await wait_until(pilot, lambda: any(expect in m for m in matches()))
    assert expect in matches()[0], matches()  # the best match is the one typed
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_palette_in_the_chat_runs_a_command() -> None:
    app = ChatApp("fake:one", factory=factory_for(quick()))
    async with app.run_test(size=SIZE) as pilot:
        await run_from_palette(pilot, app, "help keys", "Help: keys and metrics")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))


async def test_palette_over_settings_and_sessions_runs_the_apps_commands() -> None:
    app = ChatApp("fake:one", factory=factory_for(quick()))
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one("#pane")
        shown = pane.display
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        await run_from_palette(pilot, app, "toggle the telemetry", "Toggle the telemetry pane")
        await wait_until(pilot, lambda: pane.display is not shown)
        assert isinstance(app.screen, SettingsScreen)  # the command ran; the dialog is still open
        await pilot.press("escape")
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await run_from_palette(pilot, app, "toggle the telemetry", "Toggle the telemetry pane")
        await wait_until(pilot, lambda: pane.display is shown)


async def test_palette_in_compare_from_the_command_line_keeps_a_pane() -> None:
    app = CompareApp([quick("alpha"), quick("beta")], session_id="p1")
    async with app.run_test(size=SIZE) as pilot:
        await run_from_palette(pilot, app, "keep pane b", "Keep pane B")
        await wait_until(pilot, lambda: [v.label for v in app.query(PaneView)] == ["B"])


async def test_palette_in_compare_from_the_chat_goes_back_to_the_chat() -> None:
    made: list[TimedBackend] = []

    def factory(spec: str, base_url: str | None) -> TimedBackend:
        made.append(quick(spec.split(":", 1)[1]))
        return made[-1]

    app = ChatApp("fake:first", factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareSpecScreen))
        app.screen.query_one("#compare-spec").value = "fake:second"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), timeout=15)
        await run_from_palette(pilot, app, "continue pane b", "Continue pane B in the chat")
        await wait_until(pilot, lambda: not isinstance(app.screen, CompareScreen))
        assert "second" in app.chat.session.spec


def shown(screen: Any) -> str:
    """Every Static's text as drawn, markup applied (what a person reads), one line per widget."""
    return "\n".join(str(getattr(w.render(), "plain", w.render())) for w in screen.query(Static))


def rich_text(renderable: Any) -> str:
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


async def test_help_keeps_every_word_in_brackets() -> None:
    app = ChatApp("fake:one", factory=factory_for(quick()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = " ".join(rich_text(w.content) for w in app.screen.query(Static))
        text = " ".join(text.split())
        for _, what in METRICS:
            assert " ".join(what.split()) in text  # every word, "[usage]" and "[estimated]" included
        assert "[usage]" in text and "[estimated]" in text


async def test_sessions_title_and_rows_keep_brackets(data_dir: Path) -> None:
    from dataclasses import replace

    from ttft.telemetry.log.turns import SessionLog

    from tests.support.turns import recorder, stream

    rec = recorder()
    for e in stream():
        rec.feed(e)
    SessionLog("s-brackets").append(replace(rec.finish(), model="[fast]-7b"))
    app = ChatApp("fake:one", factory=factory_for(quick()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await pilot.pause()
        assert "data [x]" in shown(app.screen)
        table = app.screen.query_one(DataTable)
        rows = " ".join(str(getattr(c, "plain", c)) for i in range(table.row_count) for c in table.get_row_at(i))
        assert "[fast]-7b" in rows
