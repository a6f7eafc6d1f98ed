"""The chat's MCP servers start independently: while one hangs on initialize, the others' tools are
offered (a turn sees them) and ``/tools`` says each server's own state, not "starting" for all."""

from __future__ import annotations

import asyncio
import contextlib
import time

from ttft.tui.runner import LoopThread
from ttft.tui.tool_servers import ToolServers

from tests.backends.mcp.servers import stdio

START_S = 60.0  # generous: a loaded 2-core machine imports the SDK slowly


async def test_a_ready_server_is_offered_while_another_hangs_on_initialize() -> None:
    runner = LoopThread()
    servers = ToolServers([stdio("mute", "--mute"), stdio("quick")], start_timeout_s=START_S)
    start = asyncio.create_task(servers.start(runner, lambda _text: None))
    try:
        deadline = time.monotonic() + START_S
        while not (servers.host is not None and servers.host.tools()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not start.done()  # the start still waits on the hung server
        assert servers.host is not None and "echo" in [t.name for t in servers.host.tools()]
        assert {v.name: v.state for v in servers.views()} == {"mute": "starting", "quick": "ready"}
    finally:
        await servers.close(runner)  # closes the host that was handed over early: the start ends too
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(start, 30)
        runner.close()
    assert servers.host is None  # a start that ends after the close does not hand its host back
