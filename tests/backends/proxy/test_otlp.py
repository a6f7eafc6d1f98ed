"""``ttft proxy --otlp``'s receiver: the app's own telemetry, sent by the real OpenTelemetry SDK and its
OTLP/HTTP exporters (protobuf, gzip) and as OTLP/JSON, read into tool spans on the proxy's clock; and
every hostile body answered with a short error while the receiver keeps serving."""

from __future__ import annotations

import asyncio
import gzip
import json
import textwrap
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import aiohttp
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode
from ttft.backends.proxy.otlp import OtlpReceiver
from ttft.backends.proxy.otlp_read import read
from ttft.telemetry.proxy.app_spans import AppToolSpan

from tests.support import netns

T = TypeVar("T")
MS = 1_000_000
PROTO, JSON = "application/x-protobuf", "application/json"


class Received:
    """A receiver serving from its own loop and thread (as beside the proxy), and every span it handed over."""

    def __init__(self, **kw: Any) -> None:
        self.spans: list[AppToolSpan] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="otlp", daemon=True)
        self._thread.start()
        self.receiver = self.run(self._make(kw))
        self.run(self.receiver.start())

    async def _make(self, kw: dict[str, Any]) -> OtlpReceiver:
        return OtlpReceiver(0, self.spans.extend, **kw)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def url(self) -> str:
        return self.receiver.endpoint

    def stop(self) -> None:
        self.run(self.receiver.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def rx() -> Iterator[Received]:
    r = Received(max_body_bytes=1 << 20, client_timeout_s=1.0)
    yield r
    r.stop()


async def post(url: str, body: Any, ctype: str = PROTO, **headers: str) -> tuple[int, str, bytes]:
    async with (
        aiohttp.ClientSession(auto_decompress=False) as s,
        s.post(url, data=body, headers={"Content-Type": ctype, **headers}) as r,
    ):
        return r.status, r.headers.get("Content-Type", ""), await r.read()


def tracer_for(url: str, compression: Compression = Compression.NoCompression) -> tuple[TracerProvider, Any]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, compression=compression)))
    return provider, provider.get_tracer("scripted-agent")


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate])
def test_the_sdks_execute_tool_spans_arrive_as_tool_spans_on_the_proxys_clock(
    rx: Received, compression: Compression
) -> None:
    provider, tracer = tracer_for(rx.url + "/v1/traces", compression)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash", "gen_ai.tool.call.id": "toolu_9"}
    before = time.monotonic_ns()
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("execute_tool Bash", attributes=attrs) as tool:
            time.sleep(0.08)
        with tracer.start_as_current_span("chat gpt-4o-mini"):  # not a tool: counted, not kept
            pass
        with tracer.start_as_current_span("execute_tool Read") as failed:  # named so, with no attributes
            failed.set_status(Status(StatusCode.ERROR, "no such file"))
    after = time.monotonic_ns()
    provider.shutdown()
    bash, read_ = rx.spans
    assert (bash.name, bash.call_id, bash.source, bash.ok) == ("Bash", "toolu_9", "execute_tool", None)
    assert bash.trace_id == format(tool.get_span_context().trace_id, "032x")
    assert bash.span_id == format(tool.get_span_context().span_id, "016x")
    assert before - 5 * MS <= bash.start_ns < bash.end_ns <= after + 5 * MS  # the wall clock moved onto ours
    assert 80 * MS <= bash.end_ns - bash.start_ns < 200 * MS
    assert (read_.name, read_.call_id, read_.ok) == ("Read", "", False)
    got = rx.receiver.counts
    assert (got.requests, got.items, got.tool_spans, got.refused) == (4, 4, 2, 0)  # one export per span


def test_claude_codes_tool_result_events_arrive_as_tool_spans(rx: Received) -> None:
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=rx.url + "/v1/logs")))
    logger = provider.get_logger("com.anthropic.claude_code.events")
    end = time.time_ns()
    mono_end = time.monotonic_ns()
    attrs = {"event.name": "tool_result", "tool_name": "Bash", "tool_use_id": "toolu_7", "success": "true"}
    logger.emit(timestamp=end, body="claude_code.tool_result", attributes={**attrs, "duration_ms": "1234"})
    logger.emit(timestamp=end, body="claude_code.api_request", attributes={"duration_ms": "99"})  # not a tool's
    logger.emit(timestamp=end, body="claude_code.tool_result", attributes={**attrs, "duration_ms": "-5"})  # unusable
    provider.shutdown()
    [bash] = rx.spans
    assert (bash.name, bash.call_id, bash.source, bash.ok) == ("Bash", "toolu_7", "claude_code.tool_result", True)
    assert bash.end_ns - bash.start_ns == 1234 * MS
    assert abs(bash.end_ns - mono_end) < 20 * MS
    assert rx.receiver.counts.items == 3


def test_metrics_are_taken_and_not_read(rx: Received) -> None:
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=rx.url + "/v1/metrics"))
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("m").create_counter("claude_code.session.count").add(1)
    provider.shutdown()
    assert rx.receiver.counts.requests >= 1 and rx.receiver.counts.refused == 0 and rx.spans == []


def _json_doc(trace: str = "5b8efff798038103d269b633813fc60c", span: str = "eee19b7ec3c1b174") -> dict[str, Any]:
    """An OTLP/JSON traces request as a JavaScript exporter sends it (``http/json``): hex ids, integers as
    strings, enums as numbers, and a field this receiver does not know. The tool ran 300-100 ms ago."""
    now = time.time_ns()
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "agent"},
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": span,
                                "name": "execute_tool search",
                                "kind": 1,
                                "startTimeUnixNano": str(now - 300 * MS),
                                "endTimeUnixNano": str(now - 100 * MS),
                                "attributes": [
                                    {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                    {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}},
                                    {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_abc"}},
                                    {"key": "retries", "value": {"intValue": "2"}},
                                ],
                                "status": {"code": 2},
                                "someFieldFromTheFuture": True,
                            }
                        ],
                    }
                ],
            }
        ]
    }


async def test_otlp_json_is_read_with_its_hex_ids(rx: Received) -> None:
    status, ctype, body = await post(rx.url + "/v1/traces", json.dumps(_json_doc()), JSON)
    assert (status, ctype, body) == (200, JSON, b"{}")
    [s] = rx.spans
    assert (s.name, s.call_id, s.ok) == ("search", "call_abc", False)
    assert (s.trace_id, s.span_id) == ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174")
    assert s.end_ns - s.start_ns == 200 * MS
    gz = gzip.compress(json.dumps(_json_doc()).encode())
    assert (await post(rx.url + "/v1/traces", gz, JSON, **{"Content-Encoding": "gzip"}))[0] == 200
    assert len(rx.spans) == 2


def _ld(tag: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (tag byte, varint length, bytes)."""
    n, size = len(payload), b""
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n >> 7 else 0)])
        n >>= 7
        if not n:
            return bytes([tag]) + size + payload


def _deep_protobuf(depth: int) -> bytes:
    """A traces request whose one span has an attribute nested ``depth`` maps deep, written by hand (the
    library refuses to build one past its own limit, which is the point)."""
    value = _ld(0x0A, b"bottom")  # AnyValue.string_value
    for _ in range(depth):  # AnyValue.kvlist_value -> KeyValueList.values -> KeyValue{key, value}
        value = _ld(0x32, _ld(0x0A, _ld(0x0A, b"k") + _ld(0x12, value)))
    span = _ld(0x2A, b"execute_tool x") + _ld(0x4A, _ld(0x0A, b"deep") + _ld(0x12, value))
    return _ld(0x0A, _ld(0x12, _ld(0x12, span)))  # request.resource_spans.scope_spans.spans


def _bomb(size: int) -> bytes:
    return gzip.compress(b"\0" * size, compresslevel=9)


@pytest.mark.parametrize(
    ("path", "body", "ctype", "headers", "status"),
    [
        ("/v1/traces", b"\xff\xfe garbage \x00\x01" * 50, PROTO, {}, 400),
        ("/v1/traces", _deep_protobuf(400), PROTO, {}, 400),  # past protobuf's recursion limit
        ("/v1/traces", b"[" * 100_000 + b"]" * 100_000, JSON, {}, 400),  # deep JSON: measured, never parsed
        ("/v1/traces", b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', JSON, {}, 400),
        ("/v1/traces", b'{"resourceSpans": "not a list"}', JSON, {}, 400),
        ("/v1/traces", b"[1, 2, 3]", JSON, {}, 400),
        ("/v1/traces", b"not json", JSON, {}, 400),
        ("/v1/logs", b"\x0a\xff\xff\xff\xff\x0f", PROTO, {}, 400),  # a length past the body's end
        ("/v1/traces", b"{}", "text/plain", {}, 415),
        ("/v1/traces", b"{}", JSON, {"Content-Encoding": "br"}, 415),
        ("/v1/traces", b"not gzip at all", PROTO, {"Content-Encoding": "gzip"}, 400),
        ("/v1/traces", gzip.compress(b"x" * 1000)[:-12], PROTO, {"Content-Encoding": "gzip"}, 400),  # cut short
        ("/v1/traces", _bomb(8 << 20), PROTO, {"Content-Encoding": "gzip"}, 413),  # 8 MB out of ~8 KB
        ("/v1/traces", b"x" * (2 << 20), PROTO, {}, 413),
        ("/v1/spans", b"", PROTO, {}, 404),
    ],
    ids=[
        "garbage-protobuf",
        "deep-protobuf",
        "deep-json",
        "json-id-not-hex",
        "json-wrong-shape",
        "json-not-an-object",
        "not-json",
        "logs-truncated",
        "wrong-content-type",
        "unknown-encoding",
        "not-gzip",
        "gzip-cut-short",
        "gzip-bomb",
        "too-large",
        "wrong-path",
    ],
)
async def test_a_hostile_body_is_answered_short_and_the_receiver_keeps_serving(
    rx: Received, path: str, body: bytes, ctype: str, headers: dict[str, str], status: int
) -> None:
    got, answer_type, answer = await post(rx.url + path, body, ctype, **headers)
    assert got == status
    assert b"Traceback" not in answer and b'File "' not in answer and len(answer) < 2048
    if status == 400 and ctype == PROTO:  # OTLP's Status, in the request's encoding
        assert answer_type == PROTO
        said = status_pb2.Status.FromString(answer)
        assert said.code == 3 and said.message
    elif status == 400:
        assert answer_type == JSON and json.loads(answer)["code"] == 3
    assert rx.spans == [] and rx.receiver.counts.refused == 1
    assert (await post(rx.url + "/v1/traces", json.dumps(_json_doc()), JSON))[0] == 200  # still serving
    assert len(rx.spans) == 1


async def test_a_body_sent_in_pieces_past_the_cap_and_a_stalled_body_are_cut(rx: Received) -> None:
    async def endless() -> Any:
        while True:
            yield b"\0" * 65536

    assert (await post(rx.url + "/v1/traces", endless()))[0] == 413

    async def stalls() -> Any:
        yield b"\x0a\x00"
        await asyncio.sleep(5)

    began = time.monotonic()
    assert (await post(rx.url + "/v1/traces", stalls()))[0] == 408
    assert time.monotonic() - began < 4  # cut at the receiver's 1 s, not when the client gave up
    assert (await post(rx.url + "/v1/traces", b""))[0] == 200  # an empty export is a valid one


async def test_another_method_is_refused(rx: Received) -> None:
    async with aiohttp.ClientSession() as s, s.get(rx.url + "/v1/traces") as r:
        assert r.status == 405


def test_the_reader_alone_keeps_only_tool_spans_and_moves_their_clock() -> None:
    doc = json.dumps(_json_doc()).encode()
    mono = time.monotonic_ns()
    got = read("traces", doc, "json", wall_minus_mono_ns=time.time_ns() - mono)
    assert got.items == 1 and abs(got.spans[0].start_ns - (mono - 300 * MS)) < 20 * MS  # on the monotonic clock
    assert read("logs", b"", "protobuf", 0).spans == ()
    assert ExportTraceServiceRequest.FromString(_deep_protobuf(10)).resource_spans  # the hand-written form reads


_IN_NAMESPACE = textwrap.dedent(
    """
    import asyncio, json, socket
    from ttft.backends.proxy import otlp

    def ask(host, port, source):
        s = socket.create_connection((host, port), timeout=10, source_address=(source, 0))
        s.sendall(b"POST /v1/traces HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n"
                  b"Content-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return int(data.split()[1])

    async def seen(host):
        otlp.OTLP_HOST = host
        rx = otlp.OtlpReceiver(0, lambda spans: None)
        await rx.start()
        port = int(rx.endpoint.rsplit(":", 1)[1])
        try:
            far = await asyncio.to_thread(ask, "10.77.0.1", port, "10.77.0.1")
        except OSError:
            far = "refused"
        near = await asyncio.to_thread(ask, "127.0.0.1", port, "127.0.0.1")
        await rx.aclose()
        return {"far": far, "near": near}

    async def main():
        # as it binds (127.0.0.1), then bound to every address: the peer check still refuses another's
        print(json.dumps({"bound": await seen("127.0.0.1"), "every": await seen("0.0.0.0")}))

    asyncio.run(main())
    """
)


def test_the_receiver_is_on_loopback_only_in_a_namespace() -> None:
    seen = netns.run_beside_a_far_peer(_IN_NAMESPACE)
    assert seen["bound"] == {"far": "refused", "near": 200}  # nothing listens on the machine's other address
    assert seen["every"] == {"far": 403, "near": 200}  # and a peer from it is refused where something would
