"""Turn records as OTLP/JSON documents a collector takes as they are (``POST /v1/traces``, ``/v1/metrics``).

The names and values come from :mod:`telemetry.export.genai` (shared with the live push); this
module only writes them in the OTLP/JSON encoding: ids in hex, 64-bit integers as strings,
enums as numbers. Metrics are *cumulative* histograms and monotonic sums (the usage counters), one
data point per series (metric and attribute set) over the whole file, from the first turn's send
(``startTimeUnixNano``) to the last turn's end, so a backend adds them up the way it adds up a live
process's.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..record import TurnRecord
from . import genai, genai_instruments, genai_points, genai_spans, genai_values

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2
CUMULATIVE = 2


def value(v: Any) -> dict[str, Any]:
    """One attribute value in OTLP/JSON's ``AnyValue`` form."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": str(v)}


def attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in attrs.items()]


def resource(service_name: str = "ttft") -> dict[str, Any]:
    return {"attributes": attributes({"service.name": service_name, "telemetry.sdk.language": "python"})}


def _span(s: genai_spans.Span, trace_id: str, span_id: str, parent: str | None, kind: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": s.name,
        "kind": kind,
        "startTimeUnixNano": str(s.start_unix_ns),
        "endTimeUnixNano": str(s.end_unix_ns),
        "attributes": attributes(s.attributes),
    }
    if parent is not None:
        out["parentSpanId"] = parent
    if s.events:
        out["events"] = [
            {"timeUnixNano": str(e.t_unix_ns), "name": e.name, "attributes": attributes(e.attributes)} for e in s.events
        ]
    if s.error is not None:
        out["status"] = {"code": STATUS_ERROR, "message": s.error}
    return out


def turn_spans(rec: TurnRecord, *, capture_content: bool = False, used: set[str] | None = None) -> list[dict[str, Any]]:
    """The turn's span tree (a ``chat`` span and its phases, or a tool-using turn's ``invoke_agent``
    span, its steps' spans and their phases), with stable ids (the same file names the same trace).

    ``used`` holds the trace ids already written to this document; a record whose identity repeats
    one gets the next salted id, so two turns never share a trace (or their children a parent).
    """
    root = genai_spans.turn_span(rec, capture_content=capture_content)
    if root is None:
        return []
    salt = 0
    trace_id, root_id = genai_spans.trace_ids(rec)
    while used is not None and trace_id in used:
        salt += 1
        trace_id, root_id = genai_spans.trace_ids(rec, salt)
    if used is not None:
        used.add(trace_id)
    out = [_span(root, trace_id, root_id, None, _kind(root, SPAN_KIND_CLIENT))]
    n = 0

    def children(parent: genai_spans.Span, parent_id: str) -> None:
        """Depth first, each span the next id after the root's (a turn's children: root + 1, + 2, ...)."""
        nonlocal n
        for child in parent.children:
            n += 1
            child_id = f"{(int(root_id, 16) + n) % (1 << 64) or 1:016x}"
            out.append(_span(child, trace_id, child_id, parent_id, _kind(child, SPAN_KIND_INTERNAL)))
            children(child, child_id)

    children(root, root_id)
    return out


def _kind(s: genai_spans.Span, by_place: int) -> int:
    return {"client": SPAN_KIND_CLIENT, "internal": SPAN_KIND_INTERNAL}[s.kind] if s.kind else by_place


def traces_document(
    records: Iterable[TurnRecord], *, capture_content: bool = False, counted: list[int] | None = None
) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest``: every turn a ``chat {model}`` span tree (a tool-using turn an
    ``invoke_agent`` one)."""
    spans: list[dict[str, Any]] = []
    used: set[str] = set()
    n = 0
    for rec in records:
        n += 1
        spans += turn_spans(rec, capture_content=capture_content, used=used)
    if counted is not None:
        counted.append(n)
    scope = {"name": genai.SCOPE}
    return {
        "resourceSpans": [
            {
                "resource": resource(),
                "schemaUrl": genai.SCHEMA_URL,
                "scopeSpans": [{"scope": scope, "schemaUrl": genai.SCHEMA_URL, "spans": spans}],
            }
        ]
    }


@dataclass
class _Series:
    bounds: tuple[float, ...]
    attrs: dict[str, Any]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0
    lo: float = float("inf")
    hi: float = float("-inf")

    def add(self, v: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, v)] += 1  # bucket i holds (bounds[i-1], bounds[i]]
        self.total += v
        self.n += 1
        self.lo, self.hi = min(self.lo, v), max(self.hi, v)


def metrics_document(
    records: Iterable[TurnRecord], *, counted: list[int] | None = None, legacy: bool | None = None
) -> dict[str, Any]:
    """An ``ExportMetricsServiceRequest``: the GenAI client histograms and usage counters over every turn,
    cumulative; ``legacy`` (default: :func:`genai.legacy_names` of the environment) adds the 1.44.0 names."""
    if legacy is None:
        legacy = genai.legacy_names()
    instruments = genai_instruments.INSTRUMENTS if legacy else genai_instruments.CURRENT
    series: dict[str, dict[tuple[tuple[str, Any], ...], _Series]] = {h.name: {} for h in instruments}
    first: int | None = None
    last: int | None = None
    n = 0
    for rec in records:
        n += 1
        sent, end = genai_values.sent_unix_ns(rec), genai_values.turn_end_unix_ns(rec)
        if sent is not None:
            first = sent if first is None else min(first, sent)
        if end is not None:
            last = end if last is None else max(last, end)
        for p in genai_points.turn_points(rec, legacy=legacy):
            key = tuple(sorted(p.attributes.items()))
            s = series[p.metric.name].setdefault(key, _Series(p.metric.bounds, p.attributes))
            s.add(p.value)
    if counted is not None:
        counted.append(n)
    start, now = str(first or 0), str(last or first or 0)
    metrics = []
    for h in instruments:
        if h.kind == "counter":
            sums = [
                {"attributes": attributes(s.attrs), "startTimeUnixNano": start, "timeUnixNano": now,
                 "asInt": str(int(s.total))}
                for s in series[h.name].values()
            ]  # fmt: skip
            if sums:
                metrics.append(
                    {
                        "name": h.name,
                        "unit": h.unit,
                        "description": h.description,
                        "sum": {"dataPoints": sums, "aggregationTemporality": CUMULATIVE, "isMonotonic": True},
                    }
                )
            continue
        points = [
            {
                "attributes": attributes(s.attrs),
                "startTimeUnixNano": start,
                "timeUnixNano": now,
                "count": str(s.n),
                "sum": s.total,
                "min": s.lo,
                "max": s.hi,
                "bucketCounts": [str(c) for c in s.counts],
                "explicitBounds": list(h.bounds),
            }
            for s in series[h.name].values()
        ]
        if points:
            metrics.append(
                {
                    "name": h.name,
                    "unit": h.unit,
                    "description": h.description,
                    "histogram": {"dataPoints": points, "aggregationTemporality": CUMULATIVE},
                }
            )
    scope = {"name": genai.SCOPE}
    return {
        "resourceMetrics": [
            {
                "resource": resource(),
                "schemaUrl": genai.SCHEMA_URL,
                "scopeMetrics": [{"scope": scope, "schemaUrl": genai.SCHEMA_URL, "metrics": metrics}],
            }
        ]
    }
