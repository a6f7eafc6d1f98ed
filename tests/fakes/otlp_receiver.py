"""A loopback OTLP/HTTP receiver: what a collector would get, decoded with ``opentelemetry-proto``.

It takes ``POST /v1/traces`` and ``/v1/metrics`` as protobuf (what the SDK's exporter sends)
or as OTLP/JSON (what ``curl`` replays from a file export), gzip or not, and keeps each
request decoded. ``delay_s`` makes it a slow collector; ``status`` a failing one.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(node: Any) -> Any:
    """OTLP/JSON writes ids in hex where protobuf's JSON mapping expects base64: convert, as a collector does."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in _ID_KEYS and isinstance(v, str)
            else _hex_ids_to_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids_to_base64(x) for x in node]
    return node


def parse_traces_json(text: str | bytes) -> ExportTraceServiceRequest:
    """An OTLP/JSON traces document as the protobuf message (strict: an unknown field fails)."""
    return json_format.ParseDict(_hex_ids_to_base64(json.loads(text)), ExportTraceServiceRequest())


def parse_metrics_json(text: str | bytes) -> ExportMetricsServiceRequest:
    return json_format.ParseDict(json.loads(text), ExportMetricsServiceRequest())


def attrs(kvs: Any) -> dict[str, Any]:
    """Protobuf ``KeyValue``s as a plain dict (arrays as lists)."""
    out: dict[str, Any] = {}
    for kv in kvs:
        out[kv.key] = _any(kv.value)
    return out


def _any(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_any(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Received:
    path: str
    content_type: str
    headers: dict[str, str]
    message: ExportTraceServiceRequest | ExportMetricsServiceRequest


@dataclass
class OtlpReceiver:
    delay_s: float = 0.0
    status: int = 200
    received: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                if receiver.status != 200:
                    self.send_response(receiver.status)
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ctype = self.headers.get("Content-Type", "")
                msg: ExportTraceServiceRequest | ExportMetricsServiceRequest
                if self.path == "/v1/traces":
                    msg = parse_traces_json(body) if "json" in ctype else ExportTraceServiceRequest.FromString(body)
                elif self.path == "/v1/metrics":
                    msg = parse_metrics_json(body) if "json" in ctype else ExportMetricsServiceRequest.FromString(body)
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.received.append(Received(self.path, ctype, dict(self.headers.items()), msg))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- what arrived ---------------------------------------------------------------------
    def spans(self) -> list[Span]:
        return [
            s
            for r in self.received
            if isinstance(r.message, ExportTraceServiceRequest)
            for rs in r.message.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]

    def resources(self) -> list[dict[str, Any]]:
        out = []
        for r in self.received:
            groups = (
                r.message.resource_spans
                if isinstance(r.message, ExportTraceServiceRequest)
                else r.message.resource_metrics
            )
            out += [attrs(g.resource.attributes) for g in groups]
        return out

    def schema_urls(self) -> set[str]:
        urls: set[str] = set()
        for r in self.received:
            if isinstance(r.message, ExportTraceServiceRequest):
                urls |= {ss.schema_url for rs in r.message.resource_spans for ss in rs.scope_spans}
            else:
                urls |= {sm.schema_url for rm in r.message.resource_metrics for sm in rm.scope_metrics}
        return urls

    def metrics(self) -> list[Metric]:
        return [
            m
            for r in self.received
            if isinstance(r.message, ExportMetricsServiceRequest)
            for rm in r.message.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        ]

    def wait_for(self, pred: Callable[[OtlpReceiver], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self):
                return True
            time.sleep(0.02)
        return pred(self)
