"""A chat turn on an OpenAI-compatible server, with the server's own queue and KV use as the request left.

:class:`GaugedBackend` wraps a compat backend (``create_backend(..., server_gauges=True)``, the chat's):
when a turn's first attempt is sent, it reads the server's ``/metrics`` beside the API once, on a
thread, and hands the reading on as a ``ServerTimings`` event under ``telemetry.server.gauges``'s
``GAUGES_SOURCE``, so the record keeps it (``server.gauges``: running, waiting, KV use, and when the
server answered) and the telemetry pane shows "3 requests waiting · 2 running · KV 71%".

The read never delays the request (it starts once the request is out) nor the turn's end by more than
``GRACE_S``. A server without the endpoint (a hosted provider, Ollama) is asked once per backend: the
first turn's record says why in its notices, and no later turn asks again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ...telemetry import events as ev
from ...telemetry.server import gauges
from ..base import Backend, ChatRequest
from ..transport.prometheus import MetricsEndpoint, MetricsUnavailable

GRACE_S = 0.25  # how long a turn that already ended waits for a reading still on its way


class GaugedBackend:
    """``inner``'s turns, each with one reading of the server's gauges (see the module doc)."""

    def __init__(self, inner: Backend, endpoint: MetricsEndpoint) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.provider, self.api, self.model, self.base_url = inner.provider, inner.api, inner.model, inner.base_url
        self._unavailable: str | None = None  # why the endpoint gives nothing: not asked again
        self._pending_notice: str | None = None  # found in the warm-up: told by the first turn's record

    def __getattr__(self, name: str) -> Any:  # warm_up, load, http, ...: the inner backend's
        return getattr(self.inner, name)

    async def warm_up(self, extra: dict[str, Any] | None = None) -> None:
        """The inner backend's warm-up, then the endpoint's first read (the parser's import, ~100 ms, and
        which server it is) while the user types, not beside the first turn's stream."""
        inner = getattr(self.inner, "warm_up", None)
        if inner is not None:
            await inner(extra)
        await asyncio.to_thread(self._probe)

    def _probe(self) -> None:
        if self.endpoint.dialect is not None or self._unavailable is not None:
            return
        try:
            self.endpoint.probe()
        except MetricsUnavailable as exc:
            self._unavailable = str(exc)  # the first turn's record says so (stream)
            self._pending_notice = f"no server gauges: {exc}"

    def _read(self, sent_ns: int) -> ev.Event:
        """One reading as the event that carries it (a Notice when the endpoint has none); on a thread."""
        try:
            s = self.endpoint.read()
        except MetricsUnavailable as exc:
            if self.endpoint.dialect is None:  # never answered with gauges: a server without the endpoint
                self._unavailable = str(exc)
                return ev.Notice(ev.now_ns(), "server_gauges", f"no server gauges: {exc}")
            return ev.Notice(ev.now_ns(), "server_gauges", f"the server's gauges were not read: {exc}")
        answered = ev.now_ns()
        assert self.endpoint.dialect is not None  # read() learnt it
        entry = gauges.turn_entry(s.reading, self.endpoint.dialect, (answered - sent_ns) / 1e6)
        return ev.ServerTimings(answered, gauges.GAUGES_SOURCE, entry)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        reading: asyncio.Future[ev.Event] | None = None
        asked = self._unavailable is not None  # once a turn, at its first send (a retry does not ask again)
        notice, self._pending_notice = self._pending_notice, None
        stream = self.inner.stream(request)
        try:
            async for e in stream:
                if notice is not None and isinstance(e, ev.TERMINAL):
                    yield ev.Notice(e.t_ns, "server_gauges", notice)
                if not asked and isinstance(e, ev.AttemptSent):
                    asked = True
                    reading = asyncio.ensure_future(asyncio.to_thread(self._read, e.t_ns))
                if reading is not None and isinstance(e, ev.TERMINAL):
                    with contextlib.suppress(TimeoutError):  # the turn is over: a late reading is dropped
                        await asyncio.wait_for(asyncio.shield(reading), GRACE_S)
                if reading is not None and reading.done():
                    done, reading = reading, None
                    if not done.cancelled() and done.exception() is None:
                        yield done.result()  # before the terminal event: the recorder takes nothing after it
                yield e
        finally:
            if reading is not None and not reading.done():
                reading.cancel()  # the thread finishes its bounded read; nobody waits for it
            await stream.aclose()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        await self.inner.aclose()
