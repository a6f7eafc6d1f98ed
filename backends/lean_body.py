"""The whole-body half of the load transports' responses (:mod:`backends.lean_http`,
:mod:`backends.http1_conn`): what the lean reader's error paths and non-streamed answers need of
an ``httpx2.Response`` beyond the stamped pieces each transport reads its own way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2


class WholeBody:
    """``aiter_bytes``, ``aread``, ``content`` and ``text`` over a subclass's ``read_stamped``."""

    _body: bytes | None
    timeout_s: float | None

    @property
    def request(self) -> httpx2.Request:
        raise NotImplementedError

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
