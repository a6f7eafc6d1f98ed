"""What every lean reader shares: one call through the instrumented transport, with its SDK's retry loop.

A lean reader stands in for an SDK (``openai`` for Chat Completions and Responses, ``anthropic`` for
Messages) without importing it: importing either costs 0.5-2 s of a process start, most of
``ttft ask``'s own delay on a hosted call. :class:`LeanHosted` sends the request through the same
:class:`backends.transport.http.InstrumentedHTTP` client as the SDK paths (so AttemptSent,
HeadersReceived, the wire steps and each read's arrival come from the same hooks), retries as the
SDK would (:mod:`backends.providers.lean.retry`), raises the SDK's errors for a status or a transport
failure (:mod:`backends.providers.lean.sdk_errors`), and hands the streamed body over as JSON dicts
(:mod:`backends.providers.lean.sse`). A subclass says what differs per API: the URL, the headers,
the retry policy, the status error, the stream's reader, and its translation of each dict.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httpx2

from ...transport.http import Probe, needs_ca_bundle
from ..answers.stream_shape import MalformedStream, check_content_type
from ..hosted import HostedBackend
from .retry import OPENAI, RetryPolicy
from .sdk_errors import APIConnectionError, APIStatusError, APITimeoutError, status_error
from .sse import LeanChunks, loads

if TYPE_CHECKING:
    from ...transport.load_client import LoadClient

JSON_HEADERS = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": "ttft"}


def join_url(base: str, path: str) -> str:
    """``{base}/{path}`` with one slash between, as both SDKs join a relative path to their base URL."""
    return base.rstrip("/") + "/" + path.lstrip("/")


class LeanHosted(HostedBackend):
    """A hosted backend that speaks its API over the instrumented transport itself (see the module doc)."""

    raw_stream = True  # the stream's items are JSON dicts by construction
    retry_policy: RetryPolicy = OPENAI
    events: type[LeanChunks] = LeanChunks  # the streamed body's reader

    def _status_error(self, response: httpx2.Response) -> APIStatusError:
        """The SDK's error for a non-2xx answer whose body has been read."""
        return status_error(response)

    def _lean_setup(self, url: str, headers: dict[str, str]) -> None:
        """The address (without its query, which goes as parameters, as the SDKs take it) and the
        headers of every request; the configured headers win over the API's own."""
        self._url = url
        self._params_query: dict[str, str] = dict(getattr(self, "_query", None) or {})
        self._headers = {**JSON_HEADERS, **headers, **self.headers}
        self._aio: LoadClient | None = None

    async def _warm_up(self) -> None:
        """No SDK models to build: nothing to pay ahead of the first send."""

    def use_aiohttp(self, transport: str = "aiohttp") -> None:
        """Send through aiohttp (:mod:`backends.transport.aiohttp_client`), or with ``transport="proto"``
        through the asyncio Protocol + httptools transport (:mod:`backends.transport.protocol`), rather
        than httpx2: the load driver's clients, the cheaper per chunk under many streams. The same
        stamps, events and errors."""
        from ...transport.http import CONNECT_TIMEOUT_S

        client_class: type[LoadClient]
        if transport == "proto":
            from ...transport.protocol import ProtoClient as client_class
        else:
            from ...transport.aiohttp_client import AiohttpClient as client_class

        self._aio = client_class(
            timeout_s=self.timeout_s,
            connect_timeout_s=min(CONNECT_TIMEOUT_S, self.timeout_s or CONNECT_TIMEOUT_S),
            max_connections=self.http.limits.max_connections,
            tls=needs_ca_bundle(self._url),
        )

    async def _send(self, body: bytes, headers: dict[str, str], probe: Probe) -> Any:
        """One attempt, returned once its headers are in (an ``httpx2.Response`` or its aiohttp twin)."""
        if self._aio is not None:
            return await self._aio.send(self._url, body=body, headers=headers, params=self._params_query, probe=probe)
        client = self.http.client
        req = client.build_request("POST", self._url, content=body, headers=headers, params=self._params_query)
        try:
            return await client.send(req, stream=True)
        except httpx2.RequestError as err:
            err.request = req
            raise

    async def _create(self, params: dict[str, Any], probe: Probe, max_retries: int) -> Any:
        """One call with the SDK's retry loop; each attempt goes through the instrumented hooks.
        Returns the stream's reader (``params["stream"]``) or the whole answer's JSON."""
        body = json.dumps(params, separators=(",", ":")).encode()
        headers = {**self._headers, **probe.headers} if self._aio is None else self._headers
        policy = self.retry_policy
        for taken in range(max_retries + 1):
            remaining = max_retries - taken
            try:
                response = await self._send(body, headers, probe)
            except httpx2.TimeoutException as err:
                if remaining > 0:
                    await asyncio.sleep(policy.delay_s(taken, None))
                    continue
                raise APITimeoutError(err.request) from err
            except httpx2.RequestError as err:
                if remaining > 0:
                    await asyncio.sleep(policy.delay_s(taken, None))
                    continue
                raise APIConnectionError(request=err.request) from err
            if response.is_success:
                break
            if remaining > 0 and policy.should_retry(response):
                await response.aclose()
                await asyncio.sleep(policy.delay_s(taken, response.headers))
                continue
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise self._status_error(response)
        if params.get("stream"):
            try:
                check_content_type(response)
            except MalformedStream:
                await response.aclose()
                raise
            return self.events(response)
        try:
            await response.aread()  # through the stamped stream: the body's arrival is the stamp
        except httpx2.TimeoutException as err:
            raise APITimeoutError(response.request) from err
        except httpx2.RequestError as err:
            raise APIConnectionError(request=response.request) from err
        finally:
            await response.aclose()
        return loads(response.content, "the answer")

    async def aclose(self) -> None:
        if self._aio is not None:
            await self._aio.aclose()
        await super().aclose()
