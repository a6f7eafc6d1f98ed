"""Server-Sent Events on bytes for the lean Chat Completions reader: the stream as JSON dicts.

The body's raw reads (each stamped on arrival by the HTTP client) are split into SSE events as
they arrive, each event's JSON read with orjson, and a mid-stream ``{"error": ...}`` object,
malformed JSON, a dropped connection and a missing ``[DONE]`` end the turn as they do through
the SDK's stream (with the SDK's exception classes, :mod:`backends.providers.lean.sdk_errors`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import orjson

from backends.providers.lean.sdk_errors import APIConnectionError, APIError, APITimeoutError


def loads(data: bytes) -> Any:
    """JSON through orjson (a fifth of the stdlib's time per chunk); what orjson refuses and the
    stdlib reads (a lone surrogate escape, NaN, a huge integer) is read as the SDK path reads it,
    and malformed JSON fails with the stdlib's own error, so the record's message is the same."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class SSESplitter:
    """Incremental Server-Sent Events: feed raw bytes, get each complete event's ``data``.

    Events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``); ``:`` lines are comments
    (``: ping``); several ``data:`` lines of one event are joined by ``\\n``. An event with no
    data but another field (``event:``, ``id:``, ``retry:``) gives ``b""``, as the SDK's decoder does.
    """

    __slots__ = ("_buf", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # a \r has been seen: the slower, general boundary search from now on

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        if not self._cr and b"\r" in chunk:
            self._cr = True
        if not self._cr:  # the usual stream: one C-level split, then each event's one data line
            *blocks, self._buf = buf.split(b"\n\n")
            out = []
            for block in blocks:
                if block.startswith(b"data: ") and b"\n" not in block:
                    out.append(block[6:])
                elif (data := self._event(block)) is not None:
                    out.append(data)
            return out
        out = []
        start = 0
        while True:
            end, sep = self._boundary(buf, start)
            if end < 0:
                break
            data = self._event(buf[start:end])
            if data is not None:
                out.append(data)
            start = end + sep
        self._buf = buf[start:]
        return out

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
    def _event(block: bytes) -> bytes | None:
        if block.startswith(b"data: ") and b"\n" not in block and b"\r" not in block:
            return block[6:]  # the usual event: one data line
        data: list[bytes] = []
        other = False
        for line in block.splitlines():
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name in (b"event", b"id", b"retry"):
                other = True
        if data:
            return b"\n".join(data)
        return b"" if other else None


class LeanChunks:
    """A streamed answer as JSON dicts, read from the (stamped) byte stream as it arrives."""

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
                    if data.startswith(b"[DONE]"):
                        while await read():  # read the rest: the connection stays reusable
                            pass
                        return
                    obj = loads(data)
                    if isinstance(obj, dict) and obj.get("error"):
                        error = obj["error"]
                        message = error.get("message") if isinstance(error, dict) else None
                        if not message or not isinstance(message, str):
                            message = "An error occurred during streaming"
                        raise APIError(message, response.request, body=error)
                    yield obj
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err

    async def close(self) -> None:
        await self.response.aclose()
