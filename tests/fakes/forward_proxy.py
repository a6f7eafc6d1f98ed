"""A plain-HTTP forward proxy on loopback: one request per client connection, counted.

A client configured with ``HTTP_PROXY`` sends ``POST http://host:port/path HTTP/1.1``; the proxy
rewrites that to the origin form, forces ``Connection: close`` (so a response needs no parsing to
end) and pipes the answer back as it comes.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self) -> None:
        self.requests: list[str] = []  # "METHOD absolute-url" per forwarded request
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="forward-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop)
        self._server = fut.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        line, _, rest = head.partition(b"\r\n")
        method, target, version = line.decode("latin-1").split(" ", 2)
        self.requests.append(f"{method} {target}")
        parts = urlsplit(target)
        headers = [h for h in rest.split(b"\r\n") if h and not h.lower().startswith((b"connection:", b"proxy-"))]
        origin = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        up_r, up_w = await asyncio.open_connection(parts.hostname, parts.port or 80)
        up_w.write(f"{method} {origin} {version}\r\n".encode("latin-1"))
        up_w.write(b"\r\n".join([*headers, b"Connection: close", b"", b""]))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
