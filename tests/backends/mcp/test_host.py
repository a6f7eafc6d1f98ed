"""The MCP host against real servers built on the official SDK: over stdio (a subprocess) and over
streamable HTTP on 127.0.0.1; each way a server can fail is a notice and an error result, never a
crash, and the other servers go on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from ttft.backends.agent.host import ToolHost
from ttft.backends.mcp.host import start_host
from ttft.backends.providers.config import McpServerConfig

from tests.backends.mcp.servers import http_server, stdio

START_S = 60.0  # generous: a loaded 2-core machine imports the SDK slowly


async def test_a_stdio_server_is_started_timed_listed_and_called(tmp_path: Path) -> None:
    notices: list[str] = []
    host = await start_host([stdio("fake", "--stderr")], log_dir=tmp_path, on_notice=notices.append,
                            start_timeout_s=START_S)  # fmt: skip
    as_host: ToolHost = host  # the agent loop's protocol, as mypy reads it in the chat's code too
    try:
        assert as_host.tools() == host.tools()
        (st,) = host.startup
        assert st.error is None and st.transport == "stdio"
        assert st.spawn_ms is not None and st.initialize_ms is not None and st.list_tools_ms is not None
        assert st.tool_count == 7
        names = [t.name for t in host.tools()]
        assert names == ["echo", "noop", "slow", "fail", "big", "picture", "die"]
        echo = host.tools()[0]
        assert echo.server == "fake" and echo.input_schema["required"] == ["text"]
        assert "\x1b" not in echo.description  # a server's control characters never reach model nor screen
        said = await host.call("echo", {"text": "héllo"})
        assert (said.text, said.is_error, said.size_bytes, said.truncated) == ("héllo", False, 6, False)
        pic = await host.call("picture", {})
        assert pic.text == "a caption\n[image/png 12 KB]"
        failed = await host.call("fail", {})
        assert failed.is_error and "broke on purpose" in failed.text
        unknown = await host.call("nope", {})
        assert unknown.is_error and "nope" in unknown.text
        (view,) = host.servers()
        assert view.state == "ready" and view.log_path == tmp_path / "fake.stderr.log"
    finally:
        await host.aclose()
    assert "fake server starting" in (tmp_path / "fake.stderr.log").read_text()  # stderr kept, not shown
    assert host.servers()[0].state == "closed"
    assert notices == []


async def test_a_streamable_http_server_is_listed_and_called(tmp_path: Path) -> None:
    with http_server() as url:
        notices: list[str] = []
        server = McpServerConfig(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        host = await start_host([server], log_dir=tmp_path, on_notice=notices.append, start_timeout_s=START_S)
        try:
            (st,) = host.startup
            assert st.error is None and st.transport == "http" and st.spawn_ms is None
            assert st.initialize_ms is not None and st.tool_count == 7
            said = await host.call("echo", {"text": "over http"})
            assert said.text == "over http" and not said.is_error
        finally:
            await host.aclose()
        assert "s3cret" not in host.servers()[0].shown
    assert notices == []


async def test_a_slow_call_times_out_a_big_one_is_capped_and_the_server_goes_on(tmp_path: Path) -> None:
    notices: list[str] = []
    host = await start_host([stdio("fake")], log_dir=tmp_path, on_notice=notices.append, start_timeout_s=START_S,
                            call_timeout_s=1.0, max_result_bytes=65536)  # fmt: skip
    try:
        t0 = time.monotonic()
        slow = await host.call("slow", {"seconds": 30})
        assert slow.is_error and "within 1 s" in slow.text
        assert time.monotonic() - t0 < 20  # the call timeout, not the tool's 30 s
        assert any("slow gave no answer within 1 s" in n for n in notices)
        host.call_timeout_s = 60.0
        big = await host.call("big", {"n": 10 * 1024 * 1024})
        assert big.truncated and big.size_bytes == 10 * 1024 * 1024 and len(big.text.encode()) == 65536
        assert (await host.call("echo", {"text": "still here"})).text == "still here"
        # Esc: a cancelled call is cancelled (the only thing that propagates), and the server goes on
        call = asyncio.create_task(host.call("slow", {"seconds": 30}))
        await asyncio.sleep(0.5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await host.call("echo", {"text": "after esc"})).text == "after esc"
    finally:
        await host.aclose()


async def test_a_server_that_dies_mid_call_is_an_error_result_and_a_notice_and_the_rest_go_on(tmp_path: Path) -> None:
    notices: list[str] = []
    host = await start_host([stdio("a"), stdio("b", tools=("echo", "die"))], log_dir=tmp_path,
                            on_notice=notices.append, start_timeout_s=START_S)  # fmt: skip
    try:
        names = [t.name for t in host.tools()]
        # a name both offer is prefixed with each server's; b's allow list leaves only two of its tools
        assert "a__echo" in names and "b__echo" in names and "b__die" in names and "a__die" in names
        assert "noop" in names and not any(n.startswith("b__") and n not in ("b__echo", "b__die") for n in names)
        died = await host.call("b__die", {})
        assert died.is_error and "not running" in died.text
        assert any("MCP server b is gone" in n and "b.stderr.log" in n for n in notices)
        again = await host.call("b__echo", {"text": "x"})
        assert again.is_error and "not running" in again.text
        assert (await host.call("a__echo", {"text": "a lives"})).text == "a lives"
        states = {v.name: v.state for v in host.servers()}
        assert states == {"a": "ready", "b": "gone"}
    finally:
        await host.aclose()


async def test_a_server_that_never_answers_initialize_is_a_notice_within_the_start_timeout(tmp_path: Path) -> None:
    notices: list[str] = []
    t0 = time.monotonic()
    host = await start_host([stdio("mute", "--mute")], log_dir=tmp_path, on_notice=notices.append, start_timeout_s=3)
    try:
        assert time.monotonic() - t0 < 3 + 10
        assert host.startup[0].error == "did not start within 3 s"
        assert any("mute did not start within 3 s" in n for n in notices)
        assert host.tools() == []
        lost = await host.call("echo", {"text": "x"})
        assert lost.is_error
    finally:
        await host.aclose()
    assert host.servers()[0].state == "failed"


async def test_garbage_on_stdout_and_a_missing_command_are_notices_and_the_rest_serve(tmp_path: Path) -> None:
    notices: list[str] = []
    missing = McpServerConfig(name="missing", command=str(tmp_path / "no-such-server"))
    host = await start_host([stdio("garbage", "--garbage"), missing], log_dir=tmp_path, on_notice=notices.append,
                            start_timeout_s=START_S)  # fmt: skip
    try:
        by_name = {s.name: s for s in host.startup}
        assert by_name["missing"].error is not None and "could not start" in by_name["missing"].error
        assert by_name["garbage"].error is None  # garbage on stdout, then MCP: said, and served
        assert any("missing could not start" in n for n in notices)
        assert any("garbage wrote something that is not MCP" in n for n in notices)
        assert {t.server for t in host.tools()} == {"garbage"}
        assert (await host.call("echo", {"text": "ok"})).text == "ok"
    finally:
        await host.aclose()
