"""What the load transports' responses (:mod:`backends.transport.aiohttp_client`, :mod:`backends.transport.http1`)
share of an ``httpx2.Response``: the request named for errors, the status test and the whole
body, over the stamped pieces each transport reads its own way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2


class LeanResponse:
    """``request``, ``is_success``, ``aiter_bytes``, ``aread``, ``content`` and ``text`` over a
    subclass's ``read_stamped`` and the attributes below."""

    status_code: int
    timeout_s: float | None
    _url: str
    _params: dict[str, str]
    _request: httpx2.Request | None
    _body: bytes | None

    @property
    def request(self) -> httpx2.Request:
        """The request as httpx2 would name it, for errors only (built on first use: not per request)."""
        if self._request is None:
            self._request = httpx2.Request("POST", self._url, params=self._params or None)
        return self._request

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    async def read_stamped(self) -> bytes:
        """The next piece of the body, stamped on arrival; ``b""`` at its end."""
        raise NotImplementedError

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while data := await self.read_stamped():
            yield data

    async def aread(self) -> bytes:
        if self._body is None:
            try:
                async with asyncio.timeout(self.timeout_s):
                    self._body = b"".join([d async for d in self.aiter_bytes()])
            except TimeoutError as exc:
                raise httpx2.ReadTimeout("read timeout", request=self.request) from exc
        return self._body

    @property
    def content(self) -> bytes:
        if self._body is None:
            raise RuntimeError("the body has not been read (await aread() first)")
        return self._body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")
