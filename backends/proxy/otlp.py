"""The OTLP/HTTP receiver beside the proxy (``ttft proxy --otlp``): the app's own telemetry, on loopback.

An app that exports OpenTelemetry is pointed here by the variables :func:`otlp_env` names (its
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``http://127.0.0.1:4318`` by default: OTLP/HTTP's own port, so an app
already set for a local collector needs no change). It takes:

- ``POST /v1/traces`` and ``POST /v1/logs``, binary protobuf (``application/x-protobuf``) or OTLP/JSON
  (``application/json``), gzip- or deflate-compressed or not; each read (``backends.proxy.otlp_read``)
  into the app's tool spans, handed to ``on_spans`` on this loop;
- ``POST /v1/metrics``: answered as received and not read (an app exports its metrics to the same
  endpoint; a 404 would have it log an error for each export).

It binds 127.0.0.1 whatever ``--listen`` says (an app's telemetry is this machine's) and refuses any
peer not on loopback (403). A body is capped before and after decompression (413), a client that stalls
mid-body is cut (408), another content type or encoding is 415, another path 404, another method 405,
and a body that does not read is 400, with the OTLP ``Status`` in the request's encoding. The reading
runs on a worker thread, two requests at a time, so a large export never holds the streams the proxy
is passing on for more than the interpreter's switch interval. Nothing the app sent is kept but its
tool spans' names, ids and times, at most :data:`MAX_SPANS` of them a run.
"""

from __future__ import annotations

import asyncio
import errno
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from ...telemetry import events as ev
from ...telemetry.errors import TtftError
from ...telemetry.proxy.app_spans import AppToolSpan
from .otlp_read import Encoding, OtlpRefused, Read, Signal, read
from .routing import loopback
from .server import BodyTooLarge, ProxyError, read_capped

DEFAULT_OTLP_PORT = 4318  # OTLP/HTTP's own port: named in docs/proxy.md
OTLP_HOST = "127.0.0.1"
MAX_OTLP_BYTES = 16 * 1024 * 1024  # a batch of 512 spans with attributes is well under 1 MB
CLIENT_TIMEOUT_S = 30.0
MAX_SPANS = 100_000  # tool spans kept in one run; past it they are counted, not kept
READERS = 2  # requests read at once, off the loop
_SIGNALS: dict[str, Signal | None] = {"/v1/traces": "traces", "/v1/logs": "logs", "/v1/metrics": None}
_TYPES: dict[str, Encoding] = {"application/x-protobuf": "protobuf", "application/json": "json"}
# What an app's OTel SDK reads: the endpoint and protocol for every signal, unless a signal's own is set.
ENV_ENDPOINT, ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL"
SIGNAL_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
PROTOCOLS = (ENV_PROTOCOL, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
HTTP_PROTOCOLS = ("http/protobuf", "http/json")  # what the receiver reads (not grpc)


class OtlpError(ProxyError):
    """The receiver could not start: its port taken (its hint says what to do)."""


@dataclass
class OtlpCounts:
    """What the receiver took in a run: requests answered 200, requests refused, spans or log records
    they held, tool spans kept, and tool spans past :data:`MAX_SPANS`."""

    requests: int = 0
    refused: int = 0
    items: int = 0
    tool_spans: int = 0
    dropped: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "refused": self.refused,
            "items": self.items,
            "tool_spans": self.tool_spans,
            "dropped": self.dropped,
        }


def otlp_env(port: int) -> dict[str, str]:
    """The variables that point an app's OpenTelemetry exporter at the receiver (OTLP/HTTP, protobuf)."""
    return {ENV_ENDPOINT: f"http://{OTLP_HOST}:{port}", ENV_PROTOCOL: "http/protobuf"}


def program_env(environ: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a program run under ``--otlp``: ``env`` (the base URLs, the receiver's endpoint)
    over ``environ``, less what would send its traces or logs past the receiver: a signal's own endpoint,
    and a protocol the receiver does not read (grpc). An HTTP protocol the person chose (http/json) stays."""
    out = {
        k: v
        for k, v in environ.items()
        if k not in SIGNAL_ENDPOINTS and not (k in PROTOCOLS and v.strip().lower() not in HTTP_PROTOCOLS)
    }
    out.update(env)
    if environ.get(ENV_PROTOCOL, "").strip().lower() in HTTP_PROTOCOLS:
        out[ENV_PROTOCOL] = environ[ENV_PROTOCOL]
    return out


class _Refused(TtftError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _status_body(encoding: Encoding | None, code: int, message: str) -> tuple[bytes, str]:
    """OTLP's ``google.rpc.Status`` (its code and message) in the request's encoding: two fields, written
    by hand (the package that holds the message is not one the receiver needs otherwise)."""
    if encoding == "protobuf":
        text = message[:1024].encode("utf-8")
        return b"\x08" + bytes([code]) + b"\x12" + _varint(len(text)) + text, "application/x-protobuf"
    return json.dumps({"code": code, "message": message}).encode(), "application/json"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


class OtlpReceiver:
    """The receiver (see the module doc): ``start``, ``endpoint``, ``env``, ``aclose``; ``counts`` as it goes."""

    def __init__(
        self,
        port: int,
        on_spans: Callable[[Sequence[AppToolSpan]], None],
        *,
        max_body_bytes: int = MAX_OTLP_BYTES,
        client_timeout_s: float = CLIENT_TIMEOUT_S,
    ) -> None:
        self.on_spans = on_spans
        self.max_body_bytes = max_body_bytes
        self.client_timeout_s = client_timeout_s
        self.counts = OtlpCounts()
        self.callback_errors = 0  # on_spans raised: counted, never an answer the app sees
        self._port = port
        self._runner: web.ServerRunner | None = None
        self._readers = asyncio.Semaphore(READERS)

    async def start(self) -> None:
        """Bind 127.0.0.1 and serve; a taken port is an :class:`OtlpError` that says what to do."""
        # auto_decompress off: a compressed body is inflated here, under the cap (aiohttp's would not be)
        server = web.Server(self._handle, handler_cancellation=True, access_log=None, auto_decompress=False)
        runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, OTLP_HOST, self._port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            if exc.errno == errno.EADDRINUSE:
                raise OtlpError(
                    f"the OTLP port {self._port} on {OTLP_HOST} is taken (a collector running?)",
                    hint="give another with --otlp PORT (0: any free one)",
                ) from None
            raise OtlpError(f"cannot listen for OTLP on {OTLP_HOST}:{self._port}: {exc.strerror or exc}") from None
        self._runner = runner
        if runner.addresses:
            self._port = int(runner.addresses[0][1])

    @property
    def endpoint(self) -> str:
        return f"http://{OTLP_HOST}:{self._port}"

    def env(self) -> dict[str, str]:
        return otlp_env(self._port)

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        encoding = _TYPES.get((request.content_type or "").lower())
        try:
            kept = await self._serve(request, encoding)
        except asyncio.CancelledError:
            raise
        except _Refused as exc:
            return self._refuse(exc.status, str(exc), encoding)
        except OtlpRefused as exc:
            return self._refuse(400, str(exc), encoding)
        except Exception as exc:  # a bug of the receiver's own: a short answer, never a traceback
            return self._refuse(500, f"the receiver failed: {type(exc).__name__}", encoding)
        self.counts.requests += 1
        if kept:
            try:
                self.on_spans(kept)
            except Exception:  # the listener's failure is not the app's: its export was taken
                self.callback_errors += 1
        # an empty Export*ServiceResponse: no bytes in protobuf, {} in JSON
        body, ctype = (b"", "application/x-protobuf") if encoding == "protobuf" else (b"{}", "application/json")
        return web.Response(status=200, body=body, content_type=ctype)

    def _refuse(self, status: int, message: str, encoding: Encoding | None) -> web.Response:
        self.counts.refused += 1
        code = 3 if status == 400 else 7 if status == 403 else 2  # INVALID_ARGUMENT, PERMISSION_DENIED, UNKNOWN
        body, ctype = _status_body(encoding, code, message)
        resp = web.Response(status=status, body=body, content_type=ctype)
        if status in (408, 413):
            resp.force_close()  # the rest of the body is never read
        return resp

    async def _serve(self, request: web.BaseRequest, encoding: Encoding | None) -> list[AppToolSpan]:
        if not loopback(request.remote):
            raise _Refused(403, "the receiver serves only this machine (loopback)")
        if request.path not in _SIGNALS:
            raise _Refused(404, "OTLP/HTTP paths here: /v1/traces, /v1/logs, /v1/metrics")
        if request.method != "POST":
            raise _Refused(405, "an OTLP export is a POST")
        if encoding is None:
            raise _Refused(415, "OTLP/HTTP bodies here: application/x-protobuf or application/json")
        coding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if coding not in ("identity", "gzip", "deflate"):
            raise _Refused(415, "OTLP/HTTP content encodings here: gzip, deflate or none")
        cap = self.max_body_bytes
        if request.content_length is not None and request.content_length > cap:
            raise _Refused(413, f"the body is larger than the receiver's limit of {cap} bytes")
        try:
            body = await read_capped(request, cap, self.client_timeout_s)
        except BodyTooLarge:
            raise _Refused(413, f"the body is larger than the receiver's limit of {cap} bytes") from None
        except TimeoutError:
            raise _Refused(408, f"the body stalled for {self.client_timeout_s:g} s") from None
        if coding != "identity":
            body = _inflate(body, coding, cap)
        signal = _SIGNALS[request.path]
        if signal is None:
            return []  # metrics: taken, not read
        async with self._readers:
            offset = _wall_minus_mono()
            got: Read = await asyncio.to_thread(read, signal, body, encoding, offset)
        self.counts.items += got.items
        room = max(0, MAX_SPANS - self.counts.tool_spans)
        kept = list(got.spans[:room])
        self.counts.tool_spans += len(kept)
        self.counts.dropped += len(got.spans) - len(kept)
        return kept


def _inflate(body: bytes, coding: str, cap: int) -> bytes:
    """A gzip or deflate body decompressed, never past ``cap`` bytes (a small bomb stays small)."""
    d = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS)
    try:
        out = d.decompress(body, cap + 1)
    except zlib.error:
        raise OtlpRefused(f"the body is not {coding} data") from None
    if len(out) > cap:
        raise _Refused(413, f"the body decompresses past the receiver's limit of {cap} bytes")
    if not d.eof:
        raise OtlpRefused(f"the {coding} body ends short")
    return out


def _wall_minus_mono() -> int:
    """The app stamps with the wall clock, the proxy with the monotonic one: the two apart, now."""
    return ev.wall_offset_ns()
