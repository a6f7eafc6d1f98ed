"""Server-Sent Events on bytes for the lean readers: the stream as JSON dicts.

The body's raw reads (each stamped on arrival by the HTTP client) are split into SSE events as
they arrive and each event's JSON read with orjson. What ends a turn is what ends it through
each SDK's stream, raised with the SDKs' exception classes (:mod:`backends.providers.lean.sdk_errors`):

- OpenAI (Chat Completions, Responses; :class:`LeanChunks`): ``data:`` only, the event name is not
  read; ``[DONE]`` ends the stream, an object with a truthy ``error`` raises ``APIError``;
- Anthropic (Messages; :class:`LeanMessageEvents`): an event without an ``event:`` line and ``ping``
  are skipped, ``event: error`` raises a status error of the stream's status (200), an event with
  no data is skipped;
- both: malformed JSON fails with the stdlib's error, a dropped connection or a read timeout with
  the SDKs' connection and timeout errors.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import orjson

from ....telemetry import json_guard
from .sdk_errors import APIConnectionError, APIError, APITimeoutError, anthropic_stream_error

# Digits to "0", anything else to " ": a run of 19 digits is then one find, in C.
_DIGIT_RUNS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19  # the shortest integer that may fall outside orjson's 64 bits (-9223372036854775809)


def loads(data: bytes, what: str = "a stream event") -> Any:
    """JSON through orjson (a fifth of the stdlib's time per chunk), read exactly as the SDKs read it
    (the stdlib's ``json.loads`` of the UTF-8 text), so both paths hold the same values:

    - what orjson refuses and the stdlib reads (a lone surrogate escape, NaN) is read by the stdlib,
      and malformed JSON fails with the stdlib's own error, so the record's message is the same;
    - an integer past 64 bits, which orjson reads as a float without a word (-9.223372036854776e+18
      for -9223372036854775809), is read by the stdlib, exact: any run of 19 digits sends the chunk there;
    - the fallback decodes the bytes as strict UTF-8 first, as the SDKs' decoder does: ``json.loads`` of
      bytes would guess UTF-16 from a NUL, drop a BOM and let UTF-8-encoded surrogates through.

    An event with more opening brackets than the guard's depth is measured first: what nests past it
    is left out before any parser or reader recurses into it (a marker string in its place, which the
    reader of that field drops with a notice as a wrong type: a hostile ``metrics`` object), so the
    rest of the event and the turn go on. An event that is itself nothing but the nesting, or too
    large, is refused (``JsonRefused``, a malformed stream, in words)."""
    if data.count(b"[") + data.count(b"{") > json_guard.MAX_DEPTH:
        return json_guard.loads_event(data, what)
    if data.translate(_DIGIT_RUNS).find(_LONG_RUN) < 0:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data.decode("utf-8"))


class SSESplitter:
    """Incremental Server-Sent Events: feed raw bytes, get each complete event's ``data`` (:meth:`feed`),
    or its ``event:`` name and ``data`` (:meth:`feed_named`, for an API whose events are named).

    Events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``); ``:`` lines are comments
    (``: ping``); several ``data:`` lines of one event are joined by ``\\n``. An event with no
    data but another field (``event:``, ``id:``, ``retry:``) gives ``b""``, as the SDKs' decoder does.
    """

    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # a \r has been seen: the slower, general boundary search from now on

    def _blocks(self, chunk: bytes) -> list[bytes]:
        """Every event completed by ``chunk``, as its raw lines (the blank line that ends it left off)."""
        buf = self._buf + chunk if self._buf else chunk
        if not self._cr and b"\r" in chunk:
            self._cr = True
        if not self._cr:  # the usual stream: one C-level split
            *blocks, self._buf = buf.split(b"\n\n")
            return blocks
        out = []
        start = 0
        while True:
            end, sep = self._boundary(buf, start)
            if end < 0:
                break
            out.append(buf[start:end])
            start = end + sep
        self._buf = buf[start:]
        return out

    def feed(self, chunk: bytes) -> list[bytes | UnicodeDecodeError]:
        """The ``data`` of every event completed by ``chunk`` (the event's name is not read).

        A line that is not UTF-8 ends the list with its ``UnicodeDecodeError``, for the reader to raise
        where that event would be: the events before it are handed over first, as by the SDKs.
        """
        out: list[bytes | UnicodeDecodeError] = []
        if not self._cr and b"\r" not in chunk:  # the usual stream: one C-level split, one data line each
            buf = self._buf + chunk if self._buf else chunk
            *blocks, self._buf = buf.split(b"\n\n")
            for block in blocks:
                if block.startswith(b"data: ") and b"\n" not in block:
                    out.append(block[6:])
                elif (data := self._data_of(block)) is not None:
                    out.append(data)
                    if type(data) is UnicodeDecodeError:
                        break
            return out
        for block in self._blocks(chunk):
            if (data := self._data_of(block)) is not None:
                out.append(data)
                if type(data) is UnicodeDecodeError:
                    break
        return out

    def _data_of(self, block: bytes) -> bytes | UnicodeDecodeError | None:
        """One event's data by the general rules (named, several lines, CR line ends), its decoding error,
        or None for a block of comments only. Kept apart from :meth:`feed`'s loop: a ``try`` there
        costs every usual event a tenth of its split."""
        try:
            named = self._usual_named(block) or self._named(block)  # Responses' events are named
        except UnicodeDecodeError as exc:
            return exc
        return None if named is None else named[1]

    def feed_named(self, chunk: bytes) -> list[tuple[bytes | None, bytes] | UnicodeDecodeError]:
        """``(event name or None, data)`` of every event completed by ``chunk`` (a bad line: as in :meth:`feed`)."""
        out: list[tuple[bytes | None, bytes] | UnicodeDecodeError] = []
        for block in self._blocks(chunk):
            if (named := self._named_of(block)) is not None:
                out.append(named)
                if type(named) is UnicodeDecodeError:
                    break
        return out

    def _named_of(self, block: bytes) -> tuple[bytes | None, bytes] | UnicodeDecodeError | None:
        try:
            return self._usual_named(block) or self._named(block)
        except UnicodeDecodeError as exc:
            return exc

    def finish(self) -> None:
        """The body has ended: what is left (a last line with no blank line after it) is no event,
        but it is read as UTF-8 as the SDKs' decoder reads it, so bad bytes fail as they do there."""
        self._buf.decode()

    @staticmethod
    def _usual_named(block: bytes) -> tuple[bytes, bytes] | None:
        """An ``event: NAME`` line then one ``data:`` line (the usual named event), else None."""
        if block.startswith(b"event: ") and b"\r" not in block:
            name, sep, rest = block.partition(b"\n")
            if sep and rest.startswith(b"data: ") and b"\n" not in rest:
                name.decode()  # as the SDKs' decoder reads every line: bad bytes fail here too
                return name[7:], rest[6:]
        return None

    def _boundary(self, buf: bytes, start: int) -> tuple[int, int]:
        if not self._cr:
            return buf.find(b"\n\n", start), 2
        best, size = -1, 0
        for sep in (b"\r\n\r\n", b"\n\n", b"\r\r"):
            i = buf.find(sep, start)
            if i >= 0 and (best < 0 or i < best):
                best, size = i, len(sep)
        return best, size

    @staticmethod
    def _named(block: bytes) -> tuple[bytes | None, bytes] | None:
        """One event's name (its last ``event:`` line) and data, or None for a block of comments only."""
        data: list[bytes] = []
        event: bytes | None = None
        other = False
        for line in block.splitlines():
            line.decode()  # every line is UTF-8 to the SDKs' decoder (comments too): bad bytes fail alike
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                event = value
            elif name in (b"id", b"retry"):
                other = True
        if data:
            return event, b"\n".join(data)
        return (event, b"") if other or event is not None else None


def stream_error(obj: object) -> tuple[str, Any] | None:
    """An OpenAI stream's error event (``{"error": ...}``): its message, in the SDK's words when it gives
    none, and the error's body; None for any other event."""
    if not isinstance(obj, dict) or not obj.get("error"):
        return None
    error = obj["error"]
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return message, error


def message_data(
    event: tuple[bytes | None, bytes] | UnicodeDecodeError, response: Callable[[], httpx2.Response]
) -> bytes | None:
    """One Messages SSE event as the SDK reads it: its data to parse, or None for one it skips (a ``ping``,
    an unnamed event, an empty data). A skipped one is decoded first: the SDK's decoder reads every line as
    UTF-8. Raises the decode error, and the SDK's error for an ``error`` event (``response``: the answer
    it is raised against)."""
    if isinstance(event, UnicodeDecodeError):
        raise event
    name, data = event
    if name is None or name == b"ping":
        data.decode()
        return None
    if name == b"error":
        raise anthropic_stream_error(response(), data)
    return data or None


class LeanChunks:
    """An OpenAI streamed answer (Chat Completions, Responses) as JSON dicts, read from the (stamped)
    byte stream as it arrives."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    def _reader(self) -> Callable[[], Awaitable[bytes]]:
        """The next stamped read of the body (``b""`` at its end). aiohttp's response hands its reads
        over directly (``read_stamped``): no async generator between the socket's read and this one,
        a hop saved on every chunk under load. httpx2's byte stream is adapted to the same call."""
        direct: Callable[[], Awaitable[bytes]] | None = getattr(self.response, "read_stamped", None)
        if direct is not None:
            return direct
        chunks = self.response.aiter_bytes()

        async def read() -> bytes:
            async for chunk in chunks:
                if chunk:
                    return chunk
            return b""

        return read

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        response = self.response
        split = SSESplitter()
        feed = split.feed
        try:
            read = self._reader()
            while raw := await read():
                for data in feed(raw):
                    if isinstance(data, UnicodeDecodeError):
                        raise data
                    if data.startswith(b"[DONE]"):
                        while await read():  # read the rest: the connection stays reusable
                            pass
                        return
                    obj = loads(data)
                    if (error := stream_error(obj)) is not None:
                        raise APIError(error[0], response.request, body=error[1])
                    yield obj
            split.finish()
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err

    async def close(self) -> None:
        await self.response.aclose()


class LeanMessageEvents(LeanChunks):
    """An Anthropic Messages stream as JSON dicts (see the module doc for what ends it)."""

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        response = self.response
        split = SSESplitter()
        feed = split.feed_named

        def errored() -> httpx2.Response:
            return response

        try:
            read = self._reader()
            while raw := await read():
                for event in feed(raw):
                    if (data := message_data(event, errored)) is not None:
                        yield loads(data)
            split.finish()
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err
