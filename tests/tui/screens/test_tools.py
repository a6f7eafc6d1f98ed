"""The chat's ``/tools`` screen with real MCP servers (the official SDK's, over stdio): each server's
state, start times and tools, a failed one's error, control characters a server sent made visible;
also reached from the command palette."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static
from ttft.backends.providers.config import McpServerConfig
from ttft.tui.chat.app import ChatApp
from ttft.tui.screens.tools import NONE_YET, ToolsScreen
from ttft.tui.tool_servers import ToolServers

from tests.backends.mcp.servers import stdio
from tests.support.tui_support import TimedBackend, factory_for, said, wait_until
from tests.tui.chat.test_palette import run_from_palette

SIZE = (160, 48)


pytestmark = pytest.mark.usefixtures("fresh_dirs")


def _quick() -> TimedBackend:
    return TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3, model="quick-1")


def _shown(app: Any) -> str:
    console = Console(width=200, file=io.StringIO(), record=True)
    for w in app.screen.query(Static):
        console.print(w.content)
    return console.export_text()


async def test_slash_tools_lists_each_server_its_start_and_its_tools(tmp_path: Path) -> None:
    missing = McpServerConfig(name="missing", command=str(tmp_path / "no-such-server"))
    tools = ToolServers([stdio("fake"), missing], start_timeout_s=60)
    app = ChatApp("fake:one", factory=factory_for(_quick()), tools=tools)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: tools.host is not None, timeout=90)  # a loaded machine: generous
        await wait_until(pilot, lambda: said(app, "missing could not start"))
        await pilot.press(*"/tools")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ToolsScreen))
        await wait_until(pilot, lambda: "list tools" in _shown(app))
        text = _shown(app)
        assert "fake  ready  ttft-fake" in text and "missing  failed" in text
        assert "spawn " in text and "initialize " in text and "could not start" in text
        assert "fake.stderr.log" in text
        for name in ("echo", "noop", "slow", "fail", "big", "picture", "die"):
            assert name in text
        assert "Say the text back." in text and "\x1b" not in text  # the server's ESC never reaches the screen
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ToolsScreen))
        await run_from_palette(pilot, app, "mcp tools", "MCP tools: servers and their tools")
        await wait_until(pilot, lambda: isinstance(app.screen, ToolsScreen))
    assert tools.host is None  # closed with the chat
    assert (tmp_path / "data" / "mcp" / "fake.stderr.log").exists()


async def test_without_servers_the_screen_says_how_to_add_one() -> None:
    app = ChatApp("fake:one", factory=factory_for(_quick()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"/tools")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ToolsScreen))
        assert " ".join(NONE_YET.split()) in " ".join(_shown(app).split())


async def test_the_compare_screen_lists_its_servers_too(tmp_path: Path) -> None:
    from ttft.tui.compare.app import CompareApp

    missing = McpServerConfig(name="missing", command=str(tmp_path / "no-such-server"))
    tools = ToolServers([missing], start_timeout_s=60)
    app = CompareApp([_quick(), _quick()], session_id="t1", tools=tools)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: said(app, "missing could not start"), timeout=60)
        await pilot.press(*"/tools")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ToolsScreen))
        await wait_until(pilot, lambda: "missing  failed" in _shown(app))
