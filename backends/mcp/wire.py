"""What a hostile MCP server can put on the wire, met where it arrives: its bytes decoded with
replacement (said once), each request of ours ended at once when its reply cannot be read, the link's
real end told apart from a JSON-RPC error, one listed tool that is not valid MCP left out alone, its
stderr drained and cut, and its words made one line before anyone reads them.

The SDK's session reads and writes through :class:`Inbound` and :class:`Outbound`, thin wrappers of
the transport's streams (the SDK's own stream protocols), so none of this reaches into the SDK.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TextIO

import anyio
import mcp_types as types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

from ...telemetry.errors import TtftError
from ...telemetry.log import private_files
from ...telemetry.log.urls import redact_urls_in

STDERR_CUT_LINE = b"\n--- ttft cut this server's stderr here (%d bytes kept); the rest is dropped\n"
# Control characters a server might put in a description: gone before the model or a screen reads it.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A reply's own id, near its start, in a line that did not parse (the SDK's servers write it second).
_REPLY_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,128}")')


def clean(text: str | None) -> str:
    return _CONTROLS.sub("", text or "")


def one_line(text: str | None, limit: int) -> str:
    """A server's words on one line (a newline could draw a row that looks like another server's),
    whitespace runs as one space, cut to ``limit`` characters with an ellipsis."""
    one = " ".join(clean(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def leaf(exc: BaseException) -> BaseException:
    """A group's first leaf (the SDK's task groups wrap what they raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def said(exc: BaseException) -> str:
    """An exception in one line: a group's first leaf, the message with any URL's credentials masked;
    a pydantic error as its first problem, never its dump."""
    exc = leaf(exc)
    if isinstance(exc, ValidationError):
        text = invalid(exc)
    else:
        text = str(exc).strip() or type(exc).__name__
        if isinstance(exc, OSError) and exc.strerror:
            text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return redact_urls_in(one_line(text, 300))


def invalid(exc: ValidationError) -> str:
    """What is wrong in a reply, in a few words: the first problem and where it is."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    if not errors:
        return "not valid MCP"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return (f"{where}: " if where else "") + str(first.get("msg", "not valid")) + more


def parse_failure(message: str) -> str:
    """The SDK's "Failed to parse ...: <a pydantic dump>" as its first words and the dump's first problem."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and "validation error" in lines[0]:
        return one_line(f"{lines[0].split(':', 1)[0]}: {lines[1].split(' [type=', 1)[0]}", 300)
    return one_line(message, 300)


def request_key(request_id: object) -> str:
    """A JSON-RPC id as both sides may spell it (7 and "7" are the same request to the SDK)."""
    return str(request_id).strip('"')


# Decoding a stdio server's stdout: UTF-8 with replacement, and the server told when a byte was
# replaced. The SDK takes an encoding's name and one of three error handlers, so the noting is a codec
# of ours; the reader task that decodes is spawned inside the server's own task, so it sees the
# server's callback through this context variable.
CODEC = "ttft_mcp_utf_8"
ON_BAD_BYTES: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "ttft_mcp_on_bad_bytes", default=None
)


class NotingDecoder(codecs.BufferedIncrementalDecoder):
    """UTF-8, each undecodable byte replaced (U+FFFD), and the server's callback told that it was."""

    def __init__(self, errors: str = "replace") -> None:
        super().__init__(errors)
        self._on_bad = ON_BAD_BYTES.get()

    def _buffer_decode(self, data: Any, errors: str, final: bool) -> tuple[str, int]:
        try:
            return codecs.utf_8_decode(data, "strict", final)
        except UnicodeDecodeError:
            if self._on_bad is not None:
                self._on_bad()
            return codecs.utf_8_decode(data, "replace", final)


def codec_search(name: str) -> codecs.CodecInfo | None:
    if name != CODEC:
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(
        name=CODEC,
        encode=utf8.encode,
        decode=utf8.decode,
        incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=NotingDecoder,
        streamreader=utf8.streamreader,
        streamwriter=utf8.streamwriter,
    )


codecs.register(codec_search)


class Unreadable(TtftError):
    """A reply to this request came and could not be read: the request ends at once."""


class Request:
    """One request of ours in flight (a tool call, initialize, a tools/list page): the JSON-RPC ids
    it went out under, and the scope that ends it early when its reply cannot be read."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.scope: asyncio.Timeout | None = None
        self.unreadable: str | None = None

    def fail(self, why: str) -> None:
        if self.unreadable is None and self.scope is not None:
            self.unreadable = why
            with contextlib.suppress(RuntimeError):  # already expiring or left: nothing to end
                self.scope.reschedule(asyncio.get_running_loop().time())


REQUEST: contextvars.ContextVar[Request | None] = contextvars.ContextVar("ttft_mcp_request", default=None)


class Watcher(Protocol):
    """The server a connection's streams tell what they see (the host's own)."""

    listings: set[str]  # ids of tools/list requests whose replies are still to come

    def link_ended(self) -> None: ...
    def unreadable(self, exc: Exception) -> None: ...
    def answered(self, message: types.JSONRPCResponse) -> None: ...


class Outbound:
    """The session's write stream, seen on its way out: each request's id, for the request of ours
    that sent it (the SDK writes in the caller's task, so the context variable is the caller's)."""

    def __init__(self, inner: WriteStream[SessionMessage], server: Watcher) -> None:
        self._inner = inner
        self._server = server

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            request = REQUEST.get()
            if request is not None:
                request.ids.add(request_key(message.id))
            if message.method == "tools/list":
                self._server.listings.add(request_key(message.id))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Outbound:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class Inbound:
    """The transport's read stream as the session reads it, watched: its end (the link really
    closed), a line that is not MCP (a reply that fails its request at once, or garbage said once),
    and tools/list replies, from which a tool that is not valid MCP is left out alone."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], server: Watcher) -> None:
        self._inner = inner
        self._server = server

    @property
    def last_context(self) -> contextvars.Context | None:  # the SDK's duck-typed per-message context
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._server.link_ended()
            raise
        if isinstance(item, Exception):
            self._server.unreadable(item)
        elif isinstance(item.message, types.JSONRPCResponse):
            self._server.answered(item.message)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Inbound:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Inbound:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class StderrLog:
    """A stdio server's stderr: a pipe drained by a thread of its own into the log file, so however
    much the server writes it never blocks on the pipe, and the file keeps at most ``cap`` bytes of
    this start, then one line that says the rest was dropped."""

    def __init__(self, path: Path, cap: int) -> None:
        # as every file ttft writes: never through a link, 0600, an older log's mode tightened (it may hold secrets)
        self._fd = private_files.open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self._cap = cap
        try:
            self._write(f"--- ttft started this server at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            read_fd, write_fd = os.pipe()
        except OSError:
            os.close(self._fd)
            raise
        self.pipe: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")  # the child's stderr
        self._thread = threading.Thread(target=self._drain, args=(read_fd,), name="mcp-stderr", daemon=True)
        self._thread.start()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _drain(self, read_fd: int) -> None:
        kept, cut, lost = 0, False, False
        try:
            while chunk := os.read(read_fd, 65536):
                room = self._cap - kept
                if lost or (room <= 0 and cut):
                    continue  # read and dropped: the server never waits on its pipe
                try:
                    if room > 0:
                        self._write(chunk[:room])
                        kept += min(room, len(chunk))
                    if len(chunk) > room:
                        cut = True
                        self._write(STDERR_CUT_LINE % kept)
                except OSError:
                    lost = True  # a full disk: the rest is lost, and still read
        except OSError:
            pass  # the pipe itself failed: nothing more can come through it
        finally:
            os.close(read_fd)
            os.close(self._fd)

    async def drained(self, wait_s: float) -> None:
        """Wait (bounded) for what the server wrote before it ended to reach the file."""
        deadline = time.monotonic() + wait_s
        while self._thread.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


def reply_in(exc: Exception) -> tuple[bool, str | None]:
    """Whether a line that did not parse was meant as a reply (JSON with an ``id`` and no ``method``:
    a request of the server's has ids of its own; or text with a ``jsonrpc`` member), and its id
    when one can be read from it."""
    if not isinstance(exc, ValidationError):
        return False, None
    for error in exc.errors(include_url=False, include_context=False):
        value = error.get("input")
        if isinstance(value, dict):
            if "id" in value and "method" not in value:
                return True, request_key(value["id"])
        elif isinstance(value, str | bytes):
            text = value if isinstance(value, str) else value.decode("utf-8", "replace")
            if '"jsonrpc"' in text[:4096]:
                found = _REPLY_ID.search(text, 0, 4096)
                return True, (request_key(found.group(1)) if found else None)
    return False, None


def tool_problem(raw: object, version: str | None) -> str | None:
    """What keeps one listed tool from being valid MCP (for the negotiated version), in a few words."""
    try:
        types.Tool.model_validate(raw, by_name=False)
        if version is not None:
            with contextlib.suppress(KeyError):  # a version the SDK has no table for: the model's check only
                validate_server_result("tools/list", version, {"tools": [raw]})
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        loc = [str(p) for p in (errors[0].get("loc", ()) if errors else ()) if not isinstance(p, int)]
        if loc and loc[0] == "tools":
            loc = loc[1:]
        return f"its {one_line(loc[0], 40)} is not valid" if loc else "it is not valid"
    except ValueError:
        return None  # an unknown protocol version: the model's check passed
    return None
