"""The proxy's server: take an app's call on loopback, forward it upstream, pass the answer back as it arrives.

A connection has ``header_timeout_s`` from its opening, or from the end of its last answer, to bring a
whole request line and headers, or it is closed (a slowloris client holds no connection past it; an idle
keep-alive connection is closed after the same time). It is one timer per connection, none per chunk.
Each request is read whole (capped at ``max_body_bytes``: 413; a client silent mid-body for
``client_timeout_s``: 408), routed (:mod:`backends.proxy.routing`), and sent upstream with its own bytes
and headers (:mod:`backends.proxy.upstream`). The answer goes back read by read: each read is written to
the client as soon as it is read (``write`` waits while the client's socket is full: backpressure
reaches the upstream), then handed to the call's tap (:mod:`backends.proxy.tap`), off the bytes' path.
A client that goes away cancels the upstream request (its connection is closed, which stops the
server's generation). An upstream silent for ``read_timeout_s`` mid-answer ends the call, recorded as a
timeout. The client is never sent a traceback: a failure of the proxy's own is a short JSON error.

Every LLM call (a POST to a Messages, Chat Completions or Responses path, ``count_tokens`` included)
becomes one :class:`ProxiedCall` (its :class:`telemetry.record.TurnRecord` and
:class:`telemetry.proxy.shape.CallShape`), handed to ``on_call`` on the server's loop once the call has
ended (completed, failed, or cut by the client), made one at a time between the streams' reads (a record
costs ~0.5-1 ms; see :meth:`ProxyServer._finisher`); ``aclose`` hands over every call still to be made.
The record's ``extra.proxy`` holds the shape as the log keeps it (:func:`telemetry.proxy.logged.shape_fields`),
so another process rebuilds the sessions from the log (``ttft proxy --watch``).
``count_tokens`` is a call but not a model step: its record's ``extra`` says ``"model_step": false`` and
holds the count. A call that carries a W3C ``traceparent`` header has its trace and parent span ids in
``extra`` (``trace_id``, ``parent_span_id``) and on its shape. Any other path and method (model lists,
``GET /``, ``HEAD``) passes through with no record.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import gc
import itertools
import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx2
from aiohttp import web

from ...telemetry import events as ev
from ...telemetry.cost import PriceRef, warm
from ...telemetry.errors import TtftError
from ...telemetry.log.secrets import Secrets, header_secrets, mask, remember
from ...telemetry.log.urls import redact_url
from ...telemetry.proxy.app_spans import read_traceparent
from ...telemetry.proxy.logged import LOG_KEY, shape_fields
from ...telemetry.proxy.shape import CallShape
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.settings import TurnSettings
from ..providers.errors import ErrorContext
from ..transport.http import CONNECT_TIMEOUT_S, Probe, needs_ca_bundle
from .request_shape import read_request
from .routing import (
    HOP_BY_HOP,
    bind_is_loopback,
    call_api,
    client_name,
    forward_headers,
    loopback,
    target_url,
)
from .tap import CallTap, read_timeout_failure
from .upstream import ProxyUpstream, ReadClock

DEFAULT_PORT = 8787  # named in docs/proxy.md; clear of OTLP's 4317/4318
MAX_BODY_BYTES = 64 * 1024 * 1024  # a long agent context with images is a few MB; 64 MiB is no real request
CLIENT_TIMEOUT_S = 30.0  # a client silent this long in the middle of its body
# A connection's time to bring a request's line and headers, from its opening or its last answer's end.
# The SDKs drop an idle pooled connection after 4-5 s (httpx, undici), so closing idle ones at 30 s costs none.
HEADER_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 600.0  # an upstream silent this long (headers, or mid-answer): keepalives count as bytes
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "x-session-id", "conversation_id")
_CREDENTIALS = ("authorization", "x-api-key", "api-key", "proxy-authorization")
_PROVIDERS = {"messages": "anthropic", "chat.completions": "openai", "responses": "openai-responses"}
_PRICE_IDS = {"messages": "anthropic", "chat.completions": "openai", "responses": "openai"}


class ProxyError(TtftError):
    """The proxy could not start: its port taken, or an address it cannot bind."""


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    host: str = "127.0.0.1"  # only a loopback address unless the CLI's --listen said otherwise
    port: int = DEFAULT_PORT  # 0: any free port
    upstream: str | None = None  # one base URL for every path; None: each path to its provider's API
    keep_content: bool = False  # store prompt/answer text (masked); default: sizes, counts, tool names, timings
    max_body_bytes: int = MAX_BODY_BYTES  # a request body past this is answered 413
    client_timeout_s: float = CLIENT_TIMEOUT_S  # a client that stalls mid-body is answered 408
    header_timeout_s: float = HEADER_TIMEOUT_S  # a connection without a whole request head by then is closed
    allow_remote_peers: bool = False  # False: a peer not on loopback is refused (403) even if bound wider
    read_timeout_s: float = READ_TIMEOUT_S  # an upstream silent this long ends the call (recorded as a timeout)
    otlp_port: int | None = None  # --otlp: the app's own telemetry received on 127.0.0.1 here (0: any free port)


@dataclass(frozen=True, slots=True)
class ProxiedCall:
    record: TurnRecord
    shape: CallShape


class BodyTooLarge(TtftError):
    """A request body past the cap (answered 413, by the proxy and by the OTLP receiver)."""


async def read_capped(request: web.BaseRequest, cap: int, timeout_s: float) -> bytes:
    """A request's whole body: :class:`BodyTooLarge` past ``cap`` bytes, ``TimeoutError`` when the client
    sends nothing for ``timeout_s`` in the middle of it."""
    loop = asyncio.get_running_loop()
    parts: list[bytes] = []
    n = 0
    async with asyncio.timeout(loop.time() + timeout_s) as clock:
        while data := await request.content.readany():
            n += len(data)
            if n > cap:
                raise BodyTooLarge
            parts.append(data)
            clock.reschedule(loop.time() + timeout_s)
    return b"".join(parts)


def _error_body(status: int, message: str) -> web.Response:
    """The proxy's own error, in a shape both SDKs read (Anthropic's ``type``/``error``, OpenAI's ``error``)."""
    body = {"type": "error", "error": {"type": "proxy_error", "message": mask(message)}}
    resp = web.Response(status=status, text=json.dumps(body), content_type="application/json")
    return resp


def _header_id(headers: Any, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value:
            clean = "".join(c for c in value[:128] if 0x21 <= ord(c) <= 0x7E)
            if clean:
                return clean
    return None


def _retry_count(headers: Any) -> int:
    value = headers.get("x-stainless-retry-count", "")
    return int(value) if value.isdigit() and len(value) < 6 else 0


class ProxyServer:
    """The reverse proxy (see the module doc)."""

    def __init__(self, config: ProxyConfig, on_call: Callable[[ProxiedCall], None], *, session_id: str = "") -> None:
        self.config = config
        self.on_call = on_call
        self.session_id = session_id
        self._port = config.port
        self._runner: web.ServerRunner | None = None
        self._calls = itertools.count()
        self.callback_errors = 0  # on_call raised: counted, never a failed call
        # Ended calls whose records are still to be made: one at a time, off the streams' path (see _finisher).
        self._ended: collections.deque[Callable[[], None]] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        upstream = config.upstream
        self._upstream_base = redact_url(upstream) if upstream else None
        self._client = ProxyUpstream(
            timeout_s=config.read_timeout_s,
            connect_timeout_s=CONNECT_TIMEOUT_S,
            max_connections=1024,
            tls=needs_ca_bundle(upstream) if upstream else True,
        )

    # --- the API -----------------------------------------------------------------------
    async def start(self) -> None:
        """Bind and serve; a taken port or an address that cannot be bound is a :class:`ProxyError`."""
        # aiohttp's keep-alive timer runs from the connection's opening and from each answer's end, and closes
        # the connection if no whole request head has come by then: bytes dribbled in do not move it. So it
        # is the header deadline (tests/backends/proxy/test_slow_client.py holds aiohttp to that).
        # auto_decompress off: a compressed request body goes upstream as the client sent it, byte for byte
        # (aiohttp would inflate it and the upstream, told gzip, could not read it); its shape is read from
        # a decoded copy (read_request).
        server = web.Server(
            self._handle,
            handler_cancellation=True,
            access_log=None,
            keepalive_timeout=self.config.header_timeout_s,
            auto_decompress=False,
        )
        runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, self._port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            if exc.errno == errno.EADDRINUSE:
                raise ProxyError(
                    f"port {self._port} on {self.config.host} is taken", hint="give another with --port PORT"
                ) from None
            raise ProxyError(f"cannot listen on {self.config.host}:{self._port}: {exc.strerror or exc}") from None
        self._runner = runner
        sockets = [s for s in (runner.addresses or ())]
        if sockets:
            self._port = int(sockets[0][1])
        _warm(self.config.upstream is None)
        self._wake = asyncio.Event()
        self._worker = asyncio.get_running_loop().create_task(self._finisher())

    @property
    def port(self) -> int:
        """The port it listens on (the one the system gave, for ``port=0``, once started)."""
        return self._port

    @property
    def base_url(self) -> str:
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self._port}"

    def env(self) -> dict[str, str]:
        """The variables that point both official SDKs here: Anthropic's joins ``/v1/messages`` to its base
        URL, OpenAI's joins ``chat/completions`` to a base that ends in ``/v1``."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "OPENAI_BASE_URL": self.base_url + "/v1"}

    @property
    def loopback_only(self) -> bool:
        return bind_is_loopback(self.config.host)

    async def aclose(self) -> None:
        """Stop accepting; calls in flight are cancelled (each recorded as cut by the proxy's close)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._client.aclose()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        while self._ended:  # every call that ended is handed over, even at the close
            self._ended.popleft()()

    async def _finisher(self) -> None:
        """Make each ended call's record and hand it over, one per pass of the loop. A record costs ~0.5-1 ms
        (its percentiles, diagnosis, cost); made inside the handler, 256 streams that end together would
        hold every other stream's bytes for a quarter of a second."""
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._ended:
                self._ended.popleft()()
                await asyncio.sleep(0)  # the streams' reads and writes go first

    # --- one request -------------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            return await self._serve(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of the proxy's own: a short error, never a traceback
            return _error_body(500, f"the proxy failed: {type(exc).__name__}")

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        start_ns = ev.now_ns()
        cfg = self.config
        if not cfg.allow_remote_peers and not loopback(request.remote):
            return _error_body(403, "the proxy serves only this machine (loopback)")
        cap = cfg.max_body_bytes
        if request.content_length is not None and request.content_length > cap:
            return self._too_large(cap)
        try:
            body = await read_capped(request, cap, cfg.client_timeout_s)
        except BodyTooLarge:
            return self._too_large(cap)
        except TimeoutError:
            resp = _error_body(408, f"the request body stalled for {cfg.client_timeout_s:g} s")
            resp.force_close()
            return resp
        url = target_url(request.raw_path, request.headers, cfg.upstream)
        headers = forward_headers(request.headers.items())
        call = call_api(request.method, request.path)
        if call is None:
            return await self._pass(request, url, body, headers)
        return await self._call(request, url, body, headers, call, start_ns)

    def _too_large(self, cap: int) -> web.Response:
        resp = _error_body(413, f"the request body is larger than the proxy's limit of {cap} bytes")
        resp.force_close()  # the rest of a large body is never read
        return resp

    def _answer_headers(self, raw: Any) -> list[tuple[str, str]]:
        return [(k, v) for k, v in raw.headers.items() if k.lower() not in HOP_BY_HOP]

    async def _pass(
        self, request: web.BaseRequest, url: str, body: bytes, headers: list[tuple[str, str]]
    ) -> web.StreamResponse:
        """Any other path or method: forwarded both ways untouched, no record."""
        probe = Probe()
        try:
            up = await self._client.forward(request.method, url, body=body, headers=headers, probe=probe)
        except httpx2.HTTPError as exc:
            return _error_body(504 if isinstance(exc, httpx2.TimeoutException) else 502, _upstream_words(exc))
        try:
            resp = web.StreamResponse(status=up.status_code, reason=up._raw.reason)
            for k, v in self._answer_headers(up._raw):
                resp.headers.add(k, v)
            await resp.prepare(request)
            if request.method != "HEAD":
                loop = asyncio.get_running_loop()
                async with asyncio.timeout(None) as deadline:
                    clock = ReadClock(deadline, self.config.read_timeout_s)
                    try:
                        while True:
                            clock.reading_since = loop.time()
                            if not (data := await up.read_stamped()):
                                break
                            clock.reading_since = None
                            await resp.write(data)
                    finally:
                        clock.close()
            await resp.write_eof()
            return resp
        except (httpx2.HTTPError, ConnectionError, TimeoutError):  # cut short: the client gets what came
            return resp
        finally:
            await up.aclose()

    async def _call(
        self,
        request: web.BaseRequest,
        url: str,
        body: bytes,
        headers: list[tuple[str, str]],
        call: tuple[str, bool],
        start_ns: int,
    ) -> web.StreamResponse:
        """One LLM call: forwarded as :meth:`_pass` forwards, and read by its tap into a record."""
        api, model_step = call
        cfg = self.config
        index = next(self._calls)
        probe = Probe()
        sent_secrets = header_secrets({k: v for k, v in request.headers.items() if k.lower() in _CREDENTIALS})
        remember(*sent_secrets)  # masked wherever a server or an error might quote them
        base = self._upstream_base or url.split("/v1", 1)[0]
        provider = "compat" if cfg.upstream and api == "chat.completions" else _PROVIDERS[api]
        recorder = TurnRecorder(
            session_id=self.session_id,
            turn_index=index,
            provider=provider,
            api=api,
            model="",
            base_url=base,
            settings=TurnSettings(max_retries=0),
            prompt="",
        )
        ctx = ErrorContext(
            provider=provider, base_url=base, timeout_s=cfg.read_timeout_s, secrets=Secrets(sent_secrets)
        )
        tap = CallTap(
            api,
            recorder=recorder,
            probe=probe,
            ctx=ctx,
            url=redact_url(url) or "",
            model_step=model_step,
            compat=bool(cfg.upstream),
        )
        try:
            return await self._relay(request, url, body, headers, probe, tap)
        except asyncio.CancelledError:
            tap.end(ev.now_ns(), cancelled="the client disconnected (or the proxy closed) before the answer ended")
            raise
        except ConnectionError:  # the client went away before the answer's headers could go
            tap.end(ev.now_ns(), cancelled="the client disconnected before the answer began")
            raise
        except Exception as exc:  # the proxy's own failure: the call is still recorded, as failed
            tap.end(ev.now_ns(), exc)
            raise
        finally:
            self._ended.append(lambda: self._deliver(request, body, tap, start_ns, index, api, model_step))
            if self._wake is not None:
                self._wake.set()

    async def _relay(
        self,
        request: web.BaseRequest,
        url: str,
        body: bytes,
        headers: list[tuple[str, str]],
        probe: Probe,
        tap: CallTap,
    ) -> web.StreamResponse:
        cfg = self.config
        try:
            up = await self._client.forward(request.method, url, body=body, headers=headers, probe=probe)
        except httpx2.HTTPError as exc:
            tap.end(ev.now_ns(), exc)
            return _error_body(504 if isinstance(exc, httpx2.TimeoutException) else 502, _upstream_words(exc))
        loop = asyncio.get_running_loop()
        try:
            tap.begin(up.status_code, up.headers)
            resp = web.StreamResponse(status=up.status_code, reason=up._raw.reason)
            for k, v in self._answer_headers(up._raw):
                resp.headers.add(k, v)
            read, write, feed = up.read_stamped, resp.write, tap.feed
            try:
                await resp.prepare(request)
                async with asyncio.timeout(None) as deadline:
                    clock = ReadClock(deadline, cfg.read_timeout_s)  # no timer per read: see ReadClock
                    try:
                        while True:
                            clock.reading_since = loop.time()
                            data = await read()
                            if not data:
                                break
                            clock.reading_since = None  # a slow client is not the upstream's silence
                            await write(data)  # first the client's bytes, then the tap's copy
                            feed(data, probe.last_arrival_ns or ev.now_ns())
                    finally:
                        clock.close()
            except TimeoutError:
                tap.end(ev.now_ns(), read_timeout_failure(cfg.read_timeout_s, tap.got_tokens))
                with contextlib.suppress(ConnectionError):
                    await resp.write_eof()  # what came is the client's; it ends short, as the upstream did
                return resp
            except httpx2.HTTPError as exc:  # dropped mid-answer
                tap.end(ev.now_ns(), exc)
                return resp
            except ConnectionError:  # the client went away: the upstream request is cut below
                tap.end(ev.now_ns(), cancelled="the client disconnected before the answer ended")
                return resp
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            tap.end(ev.now_ns())
            return resp
        finally:
            await up.aclose()  # read to its end: back to the pool; otherwise closed, which stops the generation

    def _deliver(
        self, request: web.BaseRequest, body: bytes, tap: CallTap, start_ns: int, index: int, api: str, step: bool
    ) -> None:
        """The call's record and shape, to ``on_call`` (never raising into the proxy)."""
        cfg = self.config
        req = read_request(
            body, api, max_bytes=cfg.max_body_bytes, content_encoding=request.headers.get("Content-Encoding")
        )
        recorder = tap.recorder
        recorder.model = req.model
        recorder.settings = TurnSettings(stream=req.stream, max_retries=0)
        recorder.input_chars = req.input_chars
        recorder.extra["model_step"] = step
        trace = read_traceparent(request.headers.get("traceparent"))
        if trace is not None:  # the app's trace: its spans of it join this call's session
            recorder.extra["trace_id"], recorder.extra["parent_span_id"] = trace
        if req.unread:
            tap.note(f"the request body: {req.unread}")
        if req.model:
            recorder.price = self._price(api, req.model)
        record = recorder.finish()
        client = client_name(request.headers.get("User-Agent"))
        tool_ids = recorder.tool_call_ids
        names = [c["name"] for c in record.tool_calls]
        if cfg.keep_content:
            record = replace(
                record,
                prompt=mask(req.prompt),
                answer=mask(record.answer),
                reasoning=mask(record.reasoning),
                source="proxy",
                client=client,
            )
        else:
            record = replace(
                record,
                prompt="",
                answer="",
                reasoning="",
                tool_calls=tuple({"name": n, "arguments": ""} for n in names),
                source="proxy",
                client=client,
            )
        end_ns = record.timestamps.end or ev.now_ns()
        shape = CallShape(
            call_index=index,
            start_ns=start_ns,
            end_ns=end_ns,
            api=api,
            model=req.model,
            client=client,
            status=tap.status or None,
            session_hint=_header_id(request.headers, SESSION_HEADERS),
            retry_count=_retry_count(request.headers),
            system_digest=req.system_digest,
            message_digests=req.message_digests,
            tool_results=req.tool_results,
            tool_calls=tuple(zip(tool_ids, names, strict=False)),
            response_id=tap.response_id,
            previous_response_id=req.previous_response_id,
            trace_id=trace[0] if trace else "",
            parent_span_id=trace[1] if trace else "",
        )
        # the shape rides in the log line, so another process (ttft proxy --watch) rebuilds the sessions too
        record.extra[LOG_KEY] = shape_fields(shape, record.wall_offset_ns)  # the record is this call's alone
        try:
            self.on_call(ProxiedCall(record, shape))
        except Exception:
            self.callback_errors += 1

    def _price(self, api: str, model: str) -> PriceRef | None:
        upstream = self._upstream_base
        if upstream is None:
            return PriceRef(model, provider_id=_PRICE_IDS[api])
        host = urllib.parse.urlsplit(upstream).hostname or ""
        if loopback(host) or host == "localhost":
            return None  # a local server: no provider's price applies
        return PriceRef(model, api_url=upstream)


_frozen = False


def _warm(priced: bool) -> None:
    """Pay a record's first-use costs now (numpy for the percentiles, the price table), not at the end of the
    first call, where they would hold every other stream through the proxy for 100-300 ms."""
    rec = TurnRecorder("", 0, "openai", "chat.completions", "gpt-4o-mini", None, TurnSettings(), "")
    t = ev.now_ns()
    for i, e in enumerate((ev.AttemptSent(t), ev.HeadersReceived(t), *(ev.TextDelta(t + i, "x") for i in range(3)))):
        rec.feed(replace(e, t_ns=t + i))
    rec.feed(ev.Finished(t + 10, "stop"))
    rec.finish()
    if priced:
        warm(PriceRef("gpt-4o-mini", provider_id="openai"))
    # What is imported by now lives as long as the process: frozen (once a process), a full collection under
    # load does not walk it (a pause of 10s of ms across every stream through the proxy).
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def _upstream_words(exc: BaseException) -> str:
    kind = "timed out" if isinstance(exc, httpx2.TimeoutException) else "could not be reached"
    return f"the upstream {kind} ({type(exc).__name__})"
