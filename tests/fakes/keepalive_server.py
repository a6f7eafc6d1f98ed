"""TEST FIXTURE: a raw HTTP/1.1 Chat Completions server that ends kept-alive connections in chosen ways.

It is not a model, and it runs on the caller's event loop (``asyncio.start_server`` on 127.0.0.1):
``async with KeepAliveServer(then) as srv: srv.base_url``. Each connection's first request is read
in full and answered with a short streamed answer (``KEEPALIVE_WORDS`` words, then ``[DONE]``),
kept alive. What becomes of the connection's second request is ``then``:

- ``"reset_unread"``: as soon as its first byte is in, the connection is aborted (a TCP reset)
  without the request being parsed: a server whose keep-alive ran out as the request crossed it;
- ``"read_then_drop"``: it is read in full, then the connection is closed (an EOF) with no answer:
  a server that took the request and went away, which a resend would make run it twice;
- ``"close_idle"``: none: the connection is closed as soon as the first answer is out (a keep-alive
  that ran out at once), so the next request finds it ended, or has it reset unread;
- ``"close_unread"``: as soon as its first byte is in, the connection is closed (an EOF) unread: a
  server that closes every connection after its answer, its close crossing the next request (as
  llama-server does after a stream, though it offers keep-alive);
- ``"answer"``: answered like the first.

``requests`` counts the requests the server read in full: what a client's resend would duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from typing import Literal

Then = Literal["reset_unread", "read_then_drop", "close_idle", "close_unread", "answer"]
KEEPALIVE_WORDS = 3


def _answer() -> bytes:
    events = []
    for i in range(KEEPALIVE_WORDS):
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}  # fmt: skip
        events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    last = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}  # fmt: skip
    events.append(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")
    body = b"".join(events)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(body)
    return head + body


class KeepAliveServer:
    def __init__(self, then: Then) -> None:
        self.then = then
        self.requests = 0  # read in full
        self.connections = 0
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def _read_request(self, reader: asyncio.StreamReader) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        self.requests += 1
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            if not await self._read_request(reader):
                return
            writer.write(_answer())
            await writer.drain()
            if self.then == "close_idle":
                return  # closed below
            if self.then in ("reset_unread", "close_unread"):
                if not await reader.read(1):  # the next request's first byte: it is on its way
                    return
                if self.then == "close_unread":
                    return  # closed below: an EOF, the request unread
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()  # a reset, the request unparsed
                return
            while await self._read_request(reader):
                if self.then == "read_then_drop":
                    return  # closed below: an EOF, no answer
                writer.write(_answer())
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def __aenter__(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
