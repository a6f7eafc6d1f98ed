"""The MCP servers of a chat or a turn as one :class:`~backends.agent.host.ToolHost`: started in
parallel and timed (spawn, initialize, list tools), their tools under names unique within the host,
and every failure of theirs a notice and an error result, never the turn's end.

Each server lives in a task of its own that enters its transport and session and leaves them when
the host closes: the SDK's connections are task-scoped (anyio), so the task that opened one must be
the one that closes it; the host, like its connections, belongs to the event loop that started it
(the chat's stream thread), and is called there. A server that cannot start, hangs past the start
timeout, dies, hangs a call past the call timeout or writes garbage is said once through
``on_notice``; the others go on.

Everything a server sends is untrusted. Its bytes are decoded with replacement (said once), a reply
that cannot be read fails its own call at once, a JSON-RPC error is that call's error, and one tool
that is not valid MCP is left out alone. Its names, versions and descriptions lose their control
characters and line breaks here (the model and ``/tools`` read them), and descriptions are capped;
screens neutralise what they show. A stdio server's stderr goes to ``<log_dir>/<name>.stderr.log``
(default: ``mcp/`` beside the session logs), never to the terminal, and is cut at
:data:`MAX_STDERR_BYTES`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ...telemetry.log.turns import data_dir
from ..agent.host import DEFAULT_MAX_RESULT_BYTES, ToolResult, cap
from ..base import ToolSpec
from .config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S, McpServerConfig, shown
from .content import to_result
from .views import ServerView, Startup, State
from .wire import (
    CODEC,
    ON_BAD_BYTES,
    REQUEST,
    Inbound,
    Outbound,
    Request,
    StderrLog,
    Unreadable,
    clean,
    leaf,
    one_line,
    parse_failure,
    reply_in,
    request_key,
    said,
    tool_problem,
)

CLOSE_WAIT_S = 10.0  # the SDK's own shutdown is bounded (stdin closed, SIGTERM, SIGKILL: about 6 s at worst)
MAX_TOOL_PAGES = 100  # a server whose tools/list never stops paging cannot hang the start
# What providers accept as a tool's name (OpenAI, Anthropic): these characters, at most 64 of them.
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 64
# A tool's description as the model gets it: one line, cut here (a server once sent 11.5 KB).
MAX_DESCRIPTION = 1024
MAX_SERVER_INFO = 120
# Each server's stderr kept per start; past it one line says so and the rest is read and dropped.
MAX_STDERR_BYTES = 5 * 1024 * 1024
# How long a "connection closed" error waits for the transport's own end to be seen (see McpHost.call).
LINK_GRACE_S = 0.5

# The SDK logs a server's garbage line and its own shutdown noise with tracebacks; with no handler
# configured Python would print them on stderr, over the chat's screen. The notices say what matters.
for _name in ("mcp", "client"):
    _logger = logging.getLogger(_name)
    _logger.addHandler(logging.NullHandler())
    _logger.propagate = False

_T = TypeVar("_T")


def _ms(t0: int, t1: int) -> float:
    return round((t1 - t0) / 1e6, 3)


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
        self.protocol_version: str | None = None
        self.error: str | None = None
        self.spawn_ms: float | None = None
        self.initialize_ms: float | None = None
        self.list_tools_ms: float | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.link_closed = False  # the transport's read stream ended: the link is really gone
        self.requests: set[Request] = set()
        self.listings: set[str] = set()  # ids of tools/list requests whose replies are still to come
        self.http_status: int | None = None  # the last HTTP error status the server answered with
        self.garbage_said = False
        self.bad_bytes_said = False
        self.skipped_said: set[str] = set()
        self.on_ready: Callable[[_Server], None] | None = None  # the host offers its tools at once
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

    def _open_log(self) -> tuple[TextIO, StderrLog | None]:
        """The server's stderr (a file of 0600: it may print its own secrets), else /dev/null, said once."""
        try:
            folder = self.log_dir if self.log_dir is not None else data_dir() / "mcp"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{self.config.name}.stderr.log"
            log = StderrLog(path, MAX_STDERR_BYTES)
            self.log_path = path
            return log.pipe, log
        except OSError as exc:
            self.notice(f"MCP server {self.config.name}: its stderr is not kept ({said(exc)})")
            return open(os.devnull, "w", encoding="utf-8"), None  # closed by the exit stack

    def gone(self, why: str) -> None:
        """The connection ended under a ready server: said once, and its task leaves it."""
        if self.state == "ready":
            self.state = "gone"
            self.error = why
            where = f"; its stderr: {self.log_path}" if self.log_path else ""
            self.notice(f"MCP server {self.config.name} is gone ({why}){where}")
            self.stop.set()

    def link_ended(self) -> None:
        """The transport's read stream ended: the server or its connection is really gone."""
        self.link_closed = True
        if not self.stop.is_set():
            self.gone("the connection closed")

    def bad_bytes(self) -> None:
        if not self.bad_bytes_said:
            self.bad_bytes_said = True
            self.notice(f"MCP server {self.config.name} wrote bytes that are not UTF-8; they were replaced")

    def unreadable(self, exc: Exception) -> None:
        """A line the transport could not read as JSON-RPC. A reply fails its own request at once (or,
        when no id can be read from it, every request of ours then waiting: none may hang on it);
        anything else is garbage, said once and ignored."""
        looks_like_reply, reply_id = reply_in(exc)
        waiting = [r for r in self.requests if reply_id is None or reply_id in r.ids]
        if looks_like_reply and waiting:  # (a reply to a request of ours that has ended: garbage now)
            why = said(exc)
            for request in waiting:
                request.fail(why)
            return
        if not self.garbage_said:
            self.garbage_said = True
            self.notice(f"MCP server {self.config.name} wrote something that is not MCP (JSON-RPC); ignored")

    def answered(self, message: types.JSONRPCResponse) -> None:
        """A reply on its way to the session: a tools/list page loses the tools that are not valid MCP,
        each said by name, so that one bad tool does not lose the server's others."""
        key = request_key(message.id)
        if key not in self.listings:
            return
        self.listings.discard(key)
        tools = message.result.get("tools")
        if not isinstance(tools, list):
            return  # the whole listing is wrong: the SDK says so
        kept: list[Any] = []
        skipped: list[str] = []
        for raw in tools:
            problem = tool_problem(raw, self.protocol_version)
            if problem is None:
                kept.append(raw)
                continue
            name = raw.get("name") if isinstance(raw, dict) else None
            shown_name = one_line(name if isinstance(name, str) else "?", MAX_NAME)
            if shown_name not in self.skipped_said:  # a listing again (the SDK may list anew): said once
                self.skipped_said.add(shown_name)
                skipped.append(f"{shown_name!r} ({problem})")
        message.result["tools"] = kept
        if skipped:
            more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
            self.notice(f"MCP server {self.config.name}: tool {', '.join(skipped[:3])}{more} left out: not valid MCP")

    async def request(self, send: Callable[[], Awaitable[_T]], limit: float | None) -> _T:
        """``send()`` as one request of ours, within ``limit`` seconds (TimeoutError past it); a reply
        to it that cannot be read ends it at once (:class:`Unreadable`)."""
        request = Request()
        token = REQUEST.set(request)
        self.requests.add(request)
        try:
            async with asyncio.timeout(limit) as scope:
                request.scope = scope
                return await send()
        except TimeoutError:
            if request.unreadable is not None:
                raise Unreadable(request.unreadable) from None
            raise
        finally:
            self.requests.discard(request)
            REQUEST.reset(token)

    async def link_lost(self) -> bool:
        """Whether the connection really ended: its read stream closed, or the server's task left it
        (the HTTP transport's failure cancels the session rather than closing its stream). Either may
        follow the SDK's "connection closed" by a moment (a failed write raises it first), so this
        waits a short grace for them."""

        def lost() -> bool:
            task_over = self.task is not None and self.task.done()
            return self.link_closed or self.stop.is_set() or self.state != "ready" or task_over

        deadline = time.monotonic() + LINK_GRACE_S
        while not lost() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return lost()

    async def _on_response(self, response: httpx2.Response) -> None:
        # The SDK says a request's 4xx as "Server returned an error response"; the start says the status.
        if response.status_code >= 400 and response.request.method == "POST":
            self.http_status = response.status_code

    async def _connect(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg = self.config
        if cfg.url is not None:
            http_client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=cfg.headers or None,
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    event_hooks={"response": [self._on_response]},
                )
            )
            return await stack.enter_async_context(streamable_http_client(cfg.url, http_client=http_client))
        errlog, log = self._open_log()
        stack.enter_context(errlog)
        if log is not None:
            stack.push_async_callback(log.drained, 2.0)  # after the process is stopped: its last words kept
        params = StdioServerParameters(
            command=cfg.command or "",
            args=list(cfg.args),
            env=dict(cfg.env) or None,
            encoding=CODEC,
            encoding_error_handler="replace",
        )
        ON_BAD_BYTES.set(self.bad_bytes)  # seen by the SDK's reader task, spawned below in this context
        t0 = time.perf_counter_ns()
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        self.spawn_ms = _ms(t0, time.perf_counter_ns())
        errlog.close()  # the child has its own copy: the pipe ends when the server (and its children) do
        return streams

    def _start_error(self, exc: BaseException) -> str:
        exc = leaf(exc)
        text = said(exc)
        if isinstance(exc, Unreadable):
            return f"its answer could not be read ({text})"
        if self.http_status is None:
            return text
        try:
            status = f"HTTP {self.http_status} ({http.HTTPStatus(self.http_status).phrase.lower()})"
        except ValueError:
            status = f"HTTP {self.http_status}"
        return status if text == "Server returned an error response" else f"{status}: {text}"

    async def run(self) -> None:
        """Connect, initialize, list the tools, then hold the connection until the host closes."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._connect(stack)
                session = await stack.enter_async_context(ClientSession(Inbound(read, self), Outbound(write, self)))
                t0 = time.perf_counter_ns()
                result = await self.request(session.initialize, None)
                t1 = time.perf_counter_ns()
                self.initialize_ms = _ms(t0, t1)
                self.protocol_version = result.protocol_version
                info = result.server_info
                self.server_info = one_line(f"{info.name} {info.version or ''}", MAX_SERVER_INFO) if info else None
                tools: list[types.Tool] = []
                cursor: str | None = None
                for _ in range(MAX_TOOL_PAGES):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await self.request(lambda: session.list_tools(params=params), None)  # noqa: B023
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.list_tools_ms = _ms(t1, time.perf_counter_ns())
                self.listed = tools
                self.session = session
                self.state = "ready"
                self.ready.set()
                if self.on_ready is not None:
                    self.on_ready(self)
                await self.stop.wait()
        except asyncio.CancelledError:
            if self.state == "starting":  # the host closed, or the start was given up, before it was ready
                self.error = "its start was stopped"
                self.state = "failed"
            raise
        except Exception as exc:  # a group from the SDK's task groups too: the start or the link failed
            if self.state == "starting":
                self.error = f"could not start: {self._start_error(exc)}"
                self.state = "failed"
            elif self.state == "ready":
                self.gone(f"the connection ended: {said(exc)}")
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
        self._retired: dict[str, tuple[_Server, str]] = {}  # names offered before a later server's clash
        self._closed = False

    def _ready(self, server: _Server) -> None:
        """A server became ready: its tools are offered now, not when the slowest server is done."""
        allow = server.config.tools
        if allow is not None:
            names = {t.name for t in server.listed}
            for missing in [a for a in allow if a not in names]:
                self._notice(f"MCP server {server.config.name} has no tool {clean(missing)!r} (its allow list)")
        self._index()

    def _index(self) -> None:
        """Each ready server's allowed tools under a provider-safe name unique within the host: a name
        two servers offer is prefixed with each one's server name. Built anew as each server becomes
        ready; a name that a later server's clash renamed still reaches its tool (a turn may hold it)."""
        offered: list[tuple[_Server, types.Tool]] = []
        for server in self._servers:
            if server.state != "ready":
                continue
            allow = server.config.tools
            offered += [(server, t) for t in server.listed if allow is None or t.name in allow]
        by_name: dict[str, tuple[_Server, str]] = {}
        specs: list[ToolSpec] = []
        counts: dict[str, int] = {}
        for _, tool in offered:
            counts[_tool_name(tool.name)] = counts.get(_tool_name(tool.name), 0) + 1
        for server, tool in offered:
            base = _tool_name(tool.name)
            name = base if counts[base] == 1 else _tool_name(f"{server.config.name}__{tool.name}")
            unique, n = name, 2
            while unique in by_name:
                unique = f"{name[: MAX_NAME - 1 - len(str(n))]}_{n}"
                n += 1
            by_name[unique] = (server, tool.name)
            specs.append(
                ToolSpec(
                    name=unique,
                    description=one_line(tool.description or tool.title or "", MAX_DESCRIPTION),
                    input_schema=dict(tool.input_schema or {}),
                    server=server.config.name,
                )
            )
        for old, entry in self._by_name.items():
            if by_name.get(old) != entry:
                self._retired[old] = entry
        self._by_name, self._specs = by_name, specs  # whole objects: another thread may read them

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

    def _unreadable(self, server: _Server, name: str, why: str) -> ToolResult:
        self._notice(f"MCP server {server.config.name}: its answer to {name} could not be read ({why})")
        return ToolResult(f"The tool {name!r} answered with something that could not be read ({why}).", is_error=True)

    def _gone(self, server: _Server, why: str) -> str:
        server.gone(why)
        return f"The MCP server {server.config.name!r} is not running ({server.error or why})."

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        entry = self._by_name.get(name) or self._retired.get(name)
        if entry is None:
            return ToolResult(f"No tool named {name!r} here.", is_error=True)
        server, original = entry
        session = server.session
        if server.state != "ready" or session is None:
            return ToolResult(f"The MCP server {server.config.name!r} is not running ({server.error}).", is_error=True)
        limit = self.call_timeout_s
        try:
            # Our own deadline, and none given to the SDK: its local errors share JSON-RPC's server range
            # (-32001 "request timeout", -32000 "connection closed"), so with no SDK timeout a -32001 can
            # only be the server's own answer. Cancelling the call makes the SDK tell the server it is
            # abandoned, as its own timeout would.
            result = await server.request(lambda: session.call_tool(original, arguments), limit)
        except Unreadable as exc:
            return self._unreadable(server, name, str(exc))
        except TimeoutError:
            self._notice(f"MCP server {server.config.name}: {name} gave no answer within {limit:g} s")
            return ToolResult(f"The tool {name!r} gave no answer within {limit:g} s.", is_error=True)
        except MCPError as exc:
            # -32000 is the SDK's own "connection closed" and also any server's ordinary error code: it
            # ends the server only when the transport's read stream really ended (link_lost); any
            # other JSON-RPC error is this call's alone.
            if exc.code == types.CONNECTION_CLOSED and await server.link_lost():
                return ToolResult(self._gone(server, "the connection closed"), is_error=True)
            if exc.code == types.PARSE_ERROR and exc.message.startswith("Failed to parse"):
                return self._unreadable(server, name, parse_failure(exc.message))  # the HTTP transport's words
            return cap(ToolResult(f"The tool {name!r} failed: {said(exc)}", is_error=True), self.max_result_bytes)
        except Exception as exc:  # a result that does not parse, a transport error: the turn goes on
            if server.session is None or server.state != "ready":
                return ToolResult(self._gone(server, said(exc)), is_error=True)
            self._notice(f"MCP server {server.config.name}: {name} failed ({said(exc)})")
            return cap(ToolResult(f"The tool {name!r} failed: {said(exc)}", is_error=True), self.max_result_bytes)
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
            if s.state == "starting" and s.task is not None:
                s.task.cancel()  # it waits on its server, not on stop
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
    on_start: Callable[[McpHost], None] | None = None,
) -> McpHost:
    """Start every server at once and wait for each to be ready, to fail, or to pass ``start_timeout_s``;
    the host offers the tools of those that started. Never raises for a server's failure.

    ``on_start`` gets the host as soon as the servers are spawned (a chat uses it at once): each
    server's tools are offered as that server becomes ready, and :meth:`McpHost.servers` says each
    one's own state meanwhile."""

    def notice(text: str) -> None:
        if on_notice is not None:
            with contextlib.suppress(Exception):  # a listener's bug is not the servers' failure
                on_notice(text)

    made = [_Server(c, log_dir, notice) for c in servers]
    host = McpHost(made, on_notice=notice, call_timeout_s=call_timeout_s, max_result_bytes=max_result_bytes)
    t0 = time.perf_counter_ns()
    for s in made:
        s.on_ready = host._ready
        s.task = asyncio.create_task(s.run(), name=f"mcp-{s.config.name}")
    if on_start is not None:
        on_start(host)

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
