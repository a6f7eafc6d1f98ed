"""The MCP servers of a chat or a turn as one :class:`~backends.agent.host.ToolHost`: started in
parallel and timed (spawn, initialize, list tools), their tools under names unique within the host,
and every failure of theirs a notice and an error result, never the turn's end.

Each server lives in a task of its own that enters its transport and session and leaves them when
the host closes: the SDK's connections are task-scoped (anyio), so the task that opened one must be
the one that closes it; the host, like its connections, belongs to the event loop that started it
(the chat's stream thread), and is called there. A server that cannot start, hangs past the start
timeout, dies, hangs a call past the call timeout or writes garbage is said once through
``on_notice``; the others go on.

Everything a server sends is untrusted: its tools' descriptions lose their control characters here
(the model reads them), and screens neutralise what they show. A stdio server's stderr goes to
``<log_dir>/<name>.stderr.log`` (default: ``mcp/`` beside the session logs), never to the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TextIO

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from backends.agent.host import ToolResult, ToolSpec
from backends.mcp.config import McpServerConfig, shown
from backends.mcp.content import DEFAULT_MAX_RESULT_BYTES, capped, to_result
from backends.mcp.views import ServerView, Startup, State
from telemetry.log.turns import data_dir
from telemetry.log.urls import redact_urls_in

DEFAULT_START_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 60.0
CLOSE_WAIT_S = 10.0  # the SDK's own shutdown is bounded (stdin closed, SIGTERM, SIGKILL: about 6 s at worst)
MAX_TOOL_PAGES = 100  # a server whose tools/list never stops paging cannot hang the start
# What providers accept as a tool's name (OpenAI, Anthropic): these characters, at most 64 of them.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 64
# Control characters a server might put in a description: gone before the model or a screen reads it.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# The SDK logs a server's garbage line and its own shutdown noise with tracebacks; with no handler
# configured Python would print them on stderr, over the chat's screen. The notices say what matters.
for _name in ("mcp", "client"):
    _logger = logging.getLogger(_name)
    _logger.addHandler(logging.NullHandler())
    _logger.propagate = False


def _ms(t0: int, t1: int) -> float:
    return round((t1 - t0) / 1e6, 3)


def _clean(text: str | None) -> str:
    return _CONTROLS.sub("", text or "")


def _said(exc: BaseException) -> str:
    """An exception in one line: a group's first leaf, the message with any URL's credentials masked."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return redact_urls_in(_clean(" ".join(text.split())))[:300]


class _Server:
    """One server's connection, owned by its own task (:meth:`run`)."""

    def __init__(self, config: McpServerConfig, log_dir: Path | None, notice: Callable[[str], None]) -> None:
        self.config = config
        self.transport: Literal["stdio", "http"] = "http" if config.url is not None else "stdio"
        self.log_dir = log_dir
        self.log_path: Path | None = None
        self.notice = notice
        self.state: State = "starting"
        self.session: ClientSession | None = None
        self.listed: list[types.Tool] = []
        self.server_info: str | None = None
        self.error: str | None = None
        self.spawn_ms: float | None = None
        self.initialize_ms: float | None = None
        self.list_tools_ms: float | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.garbage_said = False
        self.task: asyncio.Task[None] | None = None

    def startup(self) -> Startup:
        return Startup(
            self.config.name,
            self.transport,
            self.spawn_ms,
            self.initialize_ms,
            self.list_tools_ms,
            len(self.listed),
            self.error if self.state in ("failed", "starting") else None,
        )

    def _open_log(self) -> TextIO:
        """The server's stderr file (0600: it may print its own secrets), else /dev/null, said once."""
        try:
            folder = self.log_dir if self.log_dir is not None else data_dir() / "mcp"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{self.config.name}.stderr.log"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            log = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
            log.write(f"--- ttft started this server at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            log.flush()
            self.log_path = path
            return log
        except OSError as exc:
            self.notice(f"MCP server {self.config.name}: its stderr is not kept ({_said(exc)})")
            return open(os.devnull, "w", encoding="utf-8")  # closed by the exit stack

    async def _on_message(self, message: Any) -> None:
        """The session's raw inbound traffic: only a line that is not MCP is of interest (said once)."""
        if isinstance(message, Exception) and not self.garbage_said:
            self.garbage_said = True
            self.notice(f"MCP server {self.config.name} wrote something that is not MCP (JSON-RPC); ignored")

    async def _connect(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg = self.config
        if cfg.url is not None:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=cfg.headers or None, timeout=httpx2.Timeout(30.0, read=300.0))
            )
            return await stack.enter_async_context(streamable_http_client(cfg.url, http_client=http))
        errlog = stack.enter_context(self._open_log())
        params = StdioServerParameters(command=cfg.command or "", args=list(cfg.args), env=dict(cfg.env) or None)
        t0 = time.perf_counter_ns()
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        self.spawn_ms = _ms(t0, time.perf_counter_ns())
        return streams

    async def run(self) -> None:
        """Connect, initialize, list the tools, then hold the connection until the host closes."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._connect(stack)
                session = await stack.enter_async_context(ClientSession(read, write, message_handler=self._on_message))
                t0 = time.perf_counter_ns()
                result = await session.initialize()
                t1 = time.perf_counter_ns()
                self.initialize_ms = _ms(t0, t1)
                info = result.server_info
                self.server_info = _clean(f"{info.name} {info.version or ''}".strip())[:120] if info else None
                tools: list[types.Tool] = []
                cursor: str | None = None
                for _ in range(MAX_TOOL_PAGES):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.list_tools_ms = _ms(t1, time.perf_counter_ns())
                self.listed = tools
                self.session = session
                self.state = "ready"
                self.ready.set()
                await self.stop.wait()
        except Exception as exc:  # a group from the SDK's task groups too: the start or the link failed
            if self.state == "starting":
                self.error = f"could not start: {_said(exc)}"
                self.state = "failed"
            elif self.state == "ready":
                self.error = f"the connection ended: {_said(exc)}"
                self.state = "gone"
        finally:
            self.session = None
            if self.state == "ready":
                self.state = "closed"
            self.ready.set()


def _tool_name(text: str) -> str:
    return (_NAME_UNSAFE.sub("_", text).strip("_") or "tool")[:MAX_NAME]


class McpHost:
    """The servers' tools, callable by name (:class:`~backends.agent.host.ToolHost`)."""

    def __init__(
        self,
        servers: list[_Server],
        *,
        on_notice: Callable[[str], None],
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self._servers = servers
        self._notice = on_notice
        self.call_timeout_s = call_timeout_s
        self.max_result_bytes = max_result_bytes
        self.startup: tuple[Startup, ...] = ()
        self.startup_ms: float = 0.0  # the whole parallel start, first spawn to last tool list (or timeout)
        self._specs: list[ToolSpec] = []
        self._by_name: dict[str, tuple[_Server, str]] = {}
        self._closed = False

    def _index(self) -> None:
        """Each ready server's allowed tools under a provider-safe name unique within the host: a name
        two servers offer is prefixed with each one's server name."""
        offered: list[tuple[_Server, types.Tool]] = []
        for server in self._servers:
            if server.state != "ready":
                continue
            allow = server.config.tools
            names = {t.name for t in server.listed}
            if allow is not None:
                for missing in [a for a in allow if a not in names]:
                    self._notice(f"MCP server {server.config.name} has no tool {_clean(missing)!r} (its allow list)")
            offered += [(server, t) for t in server.listed if allow is None or t.name in allow]
        counts: dict[str, int] = {}
        for _, tool in offered:
            counts[_tool_name(tool.name)] = counts.get(_tool_name(tool.name), 0) + 1
        for server, tool in offered:
            base = _tool_name(tool.name)
            name = base if counts[base] == 1 else _tool_name(f"{server.config.name}__{tool.name}")
            unique, n = name, 2
            while unique in self._by_name:
                unique = f"{name[: MAX_NAME - 1 - len(str(n))]}_{n}"
                n += 1
            self._by_name[unique] = (server, tool.name)
            self._specs.append(
                ToolSpec(
                    name=unique,
                    description=_clean(tool.description or tool.title or ""),
                    input_schema=dict(tool.input_schema or {}),
                    server=server.config.name,
                )
            )

    def tools(self) -> list[ToolSpec]:
        return list(self._specs)

    def servers(self) -> list[ServerView]:
        """Every server, in the order given, as it is now."""
        return [
            ServerView(
                name=s.config.name,
                shown=shown(s.config),
                state=s.state,
                startup=next((x for x in self.startup if x.name == s.config.name), s.startup()),
                error=s.error,
                server_info=s.server_info,
                log_path=s.log_path,
                tools=tuple(t for t in self._specs if t.server == s.config.name),
            )
            for s in self._servers
        ]

    def _gone(self, server: _Server, why: str) -> str:
        if server.state == "ready":
            server.state = "gone"
            server.error = why
            where = f"; its stderr: {server.log_path}" if server.log_path else ""
            self._notice(f"MCP server {server.config.name} is gone ({why}){where}")
            server.stop.set()  # its task leaves the connection
        return f"The MCP server {server.config.name!r} is not running ({server.error or why})."

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        entry = self._by_name.get(name)
        if entry is None:
            return ToolResult(f"No tool named {name!r} here.", is_error=True)
        server, original = entry
        session = server.session
        if server.state != "ready" or session is None:
            return ToolResult(f"The MCP server {server.config.name!r} is not running ({server.error}).", is_error=True)
        limit = self.call_timeout_s
        try:
            # The SDK's own timeout first (it tells the server the request is abandoned); ours a backstop.
            async with asyncio.timeout(limit + 5.0):
                result = await session.call_tool(original, arguments, read_timeout_seconds=limit)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                return ToolResult(self._gone(server, "the connection closed"), is_error=True)
            if exc.code == types.REQUEST_TIMEOUT:
                self._notice(f"MCP server {server.config.name}: {name} gave no answer within {limit:g} s")
                return ToolResult(f"The tool {name!r} gave no answer within {limit:g} s.", is_error=True)
            return capped(f"The tool {name!r} failed: {_said(exc)}", is_error=True, max_bytes=self.max_result_bytes)
        except TimeoutError:
            self._notice(f"MCP server {server.config.name}: {name} gave no answer within {limit:g} s")
            return ToolResult(f"The tool {name!r} gave no answer within {limit:g} s.", is_error=True)
        except Exception as exc:  # a result that does not parse, a transport error: the turn goes on
            if server.session is None or server.state != "ready":
                return ToolResult(self._gone(server, _said(exc)), is_error=True)
            self._notice(f"MCP server {server.config.name}: {name} failed ({_said(exc)})")
            return capped(f"The tool {name!r} failed: {_said(exc)}", is_error=True, max_bytes=self.max_result_bytes)
        if not isinstance(result, types.CallToolResult):
            return ToolResult(f"The tool {name!r} answered with something that is not a result.", is_error=True)
        return to_result(result, self.max_result_bytes)

    async def aclose(self) -> None:
        """Stop every server (each task leaves its own connection), waiting a bounded time."""
        if self._closed:
            return
        self._closed = True
        for s in self._servers:
            s.stop.set()
        tasks = [s.task for s in self._servers if s.task is not None and not s.task.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CLOSE_WAIT_S)
        for s in self._servers:
            if s.state == "ready":
                s.state = "closed"


async def start_host(
    servers: Iterable[McpServerConfig],
    *,
    log_dir: Path | None = None,
    on_notice: Callable[[str], None] | None = None,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> McpHost:
    """Start every server at once and wait for each to be ready, to fail, or to pass ``start_timeout_s``;
    the host offers the tools of those that started. Never raises for a server's failure."""

    def notice(text: str) -> None:
        if on_notice is not None:
            with contextlib.suppress(Exception):  # a listener's bug is not the servers' failure
                on_notice(text)

    made = [_Server(c, log_dir, notice) for c in servers]
    host = McpHost(made, on_notice=notice, call_timeout_s=call_timeout_s, max_result_bytes=max_result_bytes)
    t0 = time.perf_counter_ns()
    for s in made:
        s.task = asyncio.create_task(s.run(), name=f"mcp-{s.config.name}")

    async def ready(s: _Server) -> None:
        try:
            await asyncio.wait_for(s.ready.wait(), start_timeout_s)
        except TimeoutError:
            s.error = f"did not start within {start_timeout_s:g} s"
            s.state = "failed"
            s.stop.set()
            if s.task is not None:
                s.task.cancel()  # aclose waits for it to let go of the process

    try:
        await asyncio.gather(*(ready(s) for s in made))
    except BaseException:  # cancelled while starting: nothing may be left running
        await host.aclose()
        raise
    host.startup_ms = _ms(t0, time.perf_counter_ns())
    host.startup = tuple(s.startup() for s in made)
    for s in made:
        if s.state != "ready":
            where = f"; its stderr: {s.log_path}" if s.log_path else ""
            notice(f"MCP server {s.config.name} {s.error or 'did not start'}{where}")
    host._index()
    return host
