"""The OpenTelemetry SDK's side of the live push: providers, batch processor, metric reader and the
counting exporters, for one process (:mod:`backends.otel.push` owns the queue, the thread and the exit).

It is built on the export thread, which imports the SDK there, so a process with no collector set
never pays for it. The exporters count what they delivered, so the exit can say what was lost.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from ...telemetry.export import genai_instruments, genai_points, genai_spans
from ...telemetry.record import TurnRecord

SPAN_QUEUE = 8192  # spans the SDK's batch processor holds (a turn is 2-10 spans)
SCHEDULE_DELAY_MS = 500
METRIC_INTERVAL_MS = 5000


@dataclass(frozen=True, slots=True)
class Signals:
    traces: bool
    metrics: bool
    endpoint: str  # for the one line that says what was not delivered (credentials masked)


class Sdk:
    """The SDK's providers and instruments for one process (imported here, on the export thread)."""

    def __init__(self, signals: Signals) -> None:
        import logging

        # The SDK logs export failures; under a full-screen UI a stray line would tear the screen.
        # They are counted instead, and said once at exit.
        sdk_log = logging.getLogger("opentelemetry")
        sdk_log.addHandler(logging.NullHandler())
        sdk_log.propagate = False

        from opentelemetry.sdk.resources import Resource

        from ...telemetry.export import genai as g
        from ..version import package_version

        version = package_version()
        resource = Resource.create({"service.version": version})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "ttft"}))
        self.spans_emitted = 0
        self.spans_exporter = CountingSpans(None)
        self.metrics_exporter: CountingMetricsBase | None = None
        self._tracer: Any = None
        self._providers: list[Any] = []
        self._instruments: dict[str, Any] = {}
        self._legacy = g.legacy_names()  # OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup: the 1.44.0 names too
        if signals.traces:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            self.spans_exporter = CountingSpans(OTLPSpanExporter())
            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            tracer_provider.add_span_processor(
                BatchSpanProcessor(
                    self.spans_exporter,  # type: ignore[arg-type]
                    max_queue_size=SPAN_QUEUE,
                    schedule_delay_millis=SCHEDULE_DELAY_MS,
                )
            )
            self._tracer = tracer_provider.get_tracer(g.SCOPE, version, schema_url=g.SCHEMA_URL)
            self._providers.append(tracer_provider)
        if signals.metrics:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            exporter = counting_metrics(OTLPMetricExporter())
            self.metrics_exporter = exporter
            reader = PeriodicExportingMetricReader(exporter, export_interval_millis=METRIC_INTERVAL_MS)
            meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
            meter = meter_provider.get_meter(g.SCOPE, version, schema_url=g.SCHEMA_URL)
            self._instruments = {
                i.name: meter.create_counter(i.name, unit=i.unit, description=i.description)
                if i.kind == "counter"
                else meter.create_histogram(
                    i.name, unit=i.unit, description=i.description, explicit_bucket_boundaries_advisory=i.bounds
                )
                for i in (genai_instruments.INSTRUMENTS if self._legacy else genai_instruments.CURRENT)
            }
            self._providers.append(meter_provider)

    def emit(self, rec: TurnRecord, capture_content: bool) -> None:
        if self._tracer is not None:
            span = genai_spans.turn_span(rec, capture_content=capture_content)
            if span is not None:
                self._span(span, None)
        for p in genai_points.turn_points(rec, legacy=self._legacy) if self._instruments else ():
            instrument = self._instruments[p.metric.name]
            if p.metric.kind == "counter":
                instrument.add(int(p.value), p.attributes)
            else:
                instrument.record(p.value, p.attributes)

    def _span(self, s: genai_spans.Span, parent: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        if s.kind is not None:
            kind = SpanKind.CLIENT if s.kind == "client" else SpanKind.INTERNAL
        else:  # by its place: a turn's chat span is CLIENT, its phases INTERNAL
            kind = SpanKind.INTERNAL if parent is not None else SpanKind.CLIENT
        span = self._tracer.start_span(
            s.name, context=parent, kind=kind, attributes=s.attributes, start_time=s.start_unix_ns
        )
        for e in s.events:
            span.add_event(e.name, e.attributes, timestamp=e.t_unix_ns)
        if s.error is not None:
            span.set_status(Status(StatusCode.ERROR, s.error))
        context = trace.set_span_in_context(span)
        for child in s.children:
            self._span(child, context)
        span.end(end_time=s.end_unix_ns)
        self.spans_emitted += 1

    def force_flush(self) -> None:
        for p in self._providers:
            p.force_flush()

    def shutdown(self) -> None:
        """Stop the providers' threads; what they still held was flushed before (``LivePush.close``)."""
        for p in self._providers:
            with contextlib.suppress(Exception):  # already shut down, or an exporter that raises
                p.shutdown()

    def stop_exporters(self) -> None:
        """Shut the exporters: wakes one sleeping between retries of a dead collector, which a
        provider's shutdown would otherwise wait out (its final export then fails, as it would)."""
        for x in (self.spans_exporter, self.metrics_exporter):
            if x is not None and getattr(x, "inner", x) is not None:
                with contextlib.suppress(Exception):
                    x.shutdown()


class CountingSpans:
    """The OTLP span exporter, counting what it delivered (the rest is what was lost)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.delivered = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result == SpanExportResult.SUCCESS:
            self.delivered += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class CountingMetricsBase:
    failed: int

    def shutdown(self, timeout_millis: float = 30_000, **kw: Any) -> None:
        raise NotImplementedError  # the SDK subclass in counting_metrics


def counting_metrics(inner: Any) -> Any:
    """The OTLP metric exporter, counting failed exports (built here: its base class is the SDK's)."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class CountingMetrics(MetricExporter, CountingMetricsBase):
        def __init__(self) -> None:
            super().__init__(inner._preferred_temporality, inner._preferred_aggregation)
            self.failed = 0

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kw: Any) -> MetricExportResult:
            result: MetricExportResult = inner.export(metrics_data, timeout_millis=timeout_millis, **kw)
            if result != MetricExportResult.SUCCESS:
                self.failed += 1
            return result

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return bool(inner.force_flush(timeout_millis))

        def shutdown(self, timeout_millis: float = 30_000, **kw: Any) -> None:
            inner.shutdown(timeout_millis=timeout_millis, **kw)

    return CountingMetrics()
