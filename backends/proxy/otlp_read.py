"""An OTLP/HTTP export request read into the app's tool spans, with ``opentelemetry-proto``.

``ttft proxy --otlp`` receives what an app exports (``backends.proxy.otlp``) and keeps only its tool runs
(:class:`telemetry.proxy.app_spans.AppToolSpan`):

- ``/v1/traces``: spans whose ``gen_ai.operation.name`` is ``execute_tool`` (or named ``execute_tool
  NAME``, the GenAI span name): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the span's start and end,
  its trace, and an error status (or ``error.type``) as a failed run;
- ``/v1/logs``: Claude Code's ``claude_code.tool_result`` events (the record's body): ``tool_name``,
  ``tool_use_id``, ``success`` and ``duration_ms`` (a string), the record stamped when the tool ended.

Both encodings of OTLP/HTTP are read through the protocol's own messages: binary protobuf
(``application/x-protobuf``) and OTLP/JSON (``application/json``, whose trace and span ids are hex where
protobuf's JSON mapping has base64: turned into base64 first; unknown fields ignored, as the spec asks
of a receiver). JSON is measured before it is parsed (:mod:`telemetry.json_guard`); protobuf's own
parser refuses nesting past its recursion limit. Whatever does not read is one :class:`OtlpRefused`,
answered 400; nothing of it reaches the spans. The app's times are wall-clock nanoseconds, moved onto
the proxy's monotonic clock by the offset between the two clocks when the request came.

``opentelemetry-proto`` comes with ``ttft[otel]``; :func:`missing` says so where it is not installed.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from ...telemetry import json_guard
from ...telemetry.errors import TtftError
from ...telemetry.proxy.app_spans import AppToolSpan, clean

Signal = Literal["traces", "logs"]
Encoding = Literal["protobuf", "json"]

JSON_DEPTH = 64  # OTLP/JSON nests ~12 deep with an attribute holding a list of maps; protobuf's limit is 100
CLAUDE_TOOL_RESULT: Final = "claude_code.tool_result"
_STATUS_OK, _STATUS_ERROR = 1, 2  # opentelemetry.proto.trace.v1.Status.StatusCode
_SPAN_ATTRS = frozenset({"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "error.type"})
_EVENT_ATTRS = frozenset({"tool_name", "tool_use_id", "success", "duration_ms"})
_MAX_DURATION_MS = 7 * 24 * 3600 * 1000.0  # a week: a duration past it is no tool run's


class OtlpRefused(TtftError):
    """A body that does not read as the OTLP request its path names (answered 400, never raised further)."""


@dataclass(frozen=True, slots=True)
class Read:
    """What one request held: its tool spans, and how many spans or log records it held in all."""

    spans: tuple[AppToolSpan, ...]
    items: int


def missing() -> str | None:
    """Why OTLP cannot be read here (``opentelemetry-proto`` not installed), or None."""
    try:
        import opentelemetry.proto.collector.logs.v1.logs_service_pb2
        import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
    except ImportError:
        return "--otlp needs the OpenTelemetry protocol package: pip install 'ttft[otel]'"
    return None


def read(signal: Signal, body: bytes, encoding: Encoding, wall_minus_mono_ns: int) -> Read:
    """The tool spans of one export request (see the module doc); :class:`OtlpRefused` for one that does
    not read. ``wall_minus_mono_ns``: the wall clock less the proxy's monotonic clock, when it came."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg: Any = ExportTraceServiceRequest() if signal == "traces" else ExportLogsServiceRequest()
    try:
        if encoding == "protobuf":
            msg.ParseFromString(body)
        else:
            doc = json_guard.loads(body, "the OTLP/JSON body", max_bytes=len(body) + 1, max_depth=JSON_DEPTH)
            if not isinstance(doc, dict):
                raise OtlpRefused("the OTLP/JSON body is not an object")
            json_format.ParseDict(_base64_ids(doc, signal), msg, ignore_unknown_fields=True)
    except json_guard.JsonRefused as exc:
        raise OtlpRefused(str(exc)) from None
    except (DecodeError, json_format.ParseError) as exc:
        raise OtlpRefused(f"not an OTLP {signal} request ({type(exc).__name__})") from None
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:  # a value of the wrong kind
        raise OtlpRefused(f"not an OTLP {signal} request ({type(exc).__name__})") from None
    if signal == "traces":
        return _from_spans(msg, wall_minus_mono_ns)
    return _from_logs(msg, wall_minus_mono_ns)


# --- OTLP/JSON's hex ids ---------------------------------------------------------------------------


def _b64(value: Any, what: str) -> Any:
    if not isinstance(value, str) or not value:
        return value  # not a string: ParseDict refuses it in words of its own
    try:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    except ValueError:
        raise OtlpRefused(f"the OTLP/JSON body's {what} is not hex") from None


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))


def _base64_ids(doc: dict[str, Any], signal: Signal) -> dict[str, Any]:
    """The ids at the places OTLP/JSON has them (spans, their links, log records), hex turned into the
    base64 protobuf's JSON mapping reads; in place (the document is this request's own)."""
    outer, inner, items = (
        ("resourceSpans", "scopeSpans", "spans")
        if signal == "traces"
        else (
            "resourceLogs",
            "scopeLogs",
            "logRecords",
        )
    )
    for res in _dicts(doc.get(outer)):
        for scope in _dicts(res.get(inner)):
            for item in _dicts(scope.get(items)):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = _b64(item[key], key)
                for link in _dicts(item.get("links")):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _b64(link[key], key)
    return doc


# --- the messages as tool spans --------------------------------------------------------------------


def _attrs(kvs: Iterable[Any], wanted: frozenset[str]) -> dict[str, str]:
    """The wanted attributes' values as strings (a number as written), the rest never looked at."""
    out: dict[str, str] = {}
    for kv in kvs:
        if kv.key not in wanted:
            continue
        v = kv.value
        match v.WhichOneof("value"):
            case "string_value":
                out[kv.key] = v.string_value
            case "int_value":
                out[kv.key] = str(v.int_value)
            case "double_value":
                out[kv.key] = repr(v.double_value)
            case "bool_value":
                out[kv.key] = "true" if v.bool_value else "false"
    return out


def _hex_id(raw: bytes, size: int) -> str:
    return binascii.hexlify(raw).decode("ascii") if len(raw) == size and any(raw) else ""


def _from_spans(msg: Any, offset: int) -> Read:
    spans: list[AppToolSpan] = []
    items = 0
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                items += 1
                attrs = _attrs(sp.attributes, _SPAN_ATTRS)
                named = sp.name == "execute_tool" or sp.name.startswith("execute_tool ")
                if attrs.get("gen_ai.operation.name") != "execute_tool" and not named:
                    continue
                start, end = sp.start_time_unix_nano, sp.end_time_unix_nano
                if not start or end < start:
                    continue  # no time of its own: nothing to split the app's step with
                name = attrs.get("gen_ai.tool.name") or (sp.name[len("execute_tool ") :] if named else "")
                code = sp.status.code
                ok = False if code == _STATUS_ERROR or "error.type" in attrs else (True if code == _STATUS_OK else None)
                spans.append(
                    AppToolSpan(
                        name=clean(name),
                        call_id=clean(attrs.get("gen_ai.tool.call.id", "")),
                        start_ns=start - offset,
                        end_ns=end - offset,
                        source="execute_tool",
                        trace_id=_hex_id(sp.trace_id, 16),
                        span_id=_hex_id(sp.span_id, 8),
                        ok=ok,
                    )
                )
    return Read(tuple(spans), items)


def _from_logs(msg: Any, offset: int) -> Read:
    spans: list[AppToolSpan] = []
    items = 0
    for rl in msg.resource_logs:
        for sl in rl.scope_logs:
            for lr in sl.log_records:
                items += 1
                body = lr.body.string_value if lr.body.WhichOneof("value") == "string_value" else ""
                if body != CLAUDE_TOOL_RESULT and lr.event_name != CLAUDE_TOOL_RESULT:
                    continue
                attrs = _attrs(lr.attributes, _EVENT_ATTRS)
                end = lr.time_unix_nano or lr.observed_time_unix_nano
                took = _duration_ms(attrs.get("duration_ms"))
                if not end or took is None:
                    continue
                success = attrs.get("success")
                spans.append(
                    AppToolSpan(
                        name=clean(attrs.get("tool_name", "")),
                        call_id=clean(attrs.get("tool_use_id", "")),
                        start_ns=end - round(took * 1e6) - offset,
                        end_ns=end - offset,
                        source=CLAUDE_TOOL_RESULT,
                        trace_id=_hex_id(lr.trace_id, 16),
                        span_id=_hex_id(lr.span_id, 8),
                        ok=None if success not in ("true", "false") else success == "true",
                    )
                )
    return Read(tuple(spans), items)


def _duration_ms(value: str | None) -> float | None:
    if value is None or len(value) > 32:
        return None
    try:
        ms = float(value)
    except ValueError:
        return None
    return ms if math.isfinite(ms) and 0 <= ms <= _MAX_DURATION_MS else None
