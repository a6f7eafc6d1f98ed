"""One turn record as OpenTelemetry GenAI spans and metric points: the one mapping both exports share.

The live push (:mod:`backends.otel.push`, through the SDK) and the file export
(:mod:`telemetry.export.otlp_json`, OTLP/JSON) both draw a turn from here, so a collector gets the
same names, values and times from either. Pure data in, pure data out: no SDK, no I/O.

It reads a typed :class:`~telemetry.record.TurnRecord` (a log line goes through
``TurnRecord.from_dict`` at the edge, which names a field of the wrong type). Its text is still
untrusted: control characters in labels are replaced, non-finite numbers left out.

Conventions followed: the GenAI semantic conventions :data:`GENAI_SEMCONV_VERSION` (the
``semantic-conventions-genai`` repository's first release), over the general conventions
:data:`SEMCONV_VERSION` they build on (written as ``schema_url``). In particular:

- the client span ``chat {model}`` (kind CLIENT; the conventions' ``gen_ai.client.inference`` span
  type) runs from the first send to the end of the stream, with ``gen_ai.usage.*`` token counts and
  ``gen_ai.response.time_to_first_chunk`` as *span* attributes (they would make one metric series
  per turn);
- the client histograms ``gen_ai.client.inference.{duration,time_to_first_chunk,
  time_per_output_chunk}`` hold the client's own measurements only; ``gen_ai.server.*`` (the model
  server's own figures) is never filled with them;
- ``time_to_first_chunk`` and ``time_per_output_chunk`` exist for streamed turns only, the
  latter once per chunk after the first (the gap since the previous chunk);
- token usage is the ``gen_ai.client.inference.usage.{input,output,cache_read.input,
  cache_write.input,reasoning.output}_tokens`` counters (with ``gen_ai.token.modality``) and the
  per-operation ``gen_ai.client.inference.operation.{input,output}_tokens`` histograms, from the
  server's usage only (an estimate is no usage to bill);
- a tool-using turn (its record's ``steps``) is an agent invocation: an ``invoke_agent`` span (INTERNAL,
  the loop is in-process) with a ``chat {model}`` span per model step and an ``execute_tool {name}``
  span per tool call, each at its step's times; each model step is an inference of its own in the
  client histograms, each tool call a point of ``gen_ai.execute_tool.duration`` and the turn one of
  ``gen_ai.invoke_agent.duration``. A turn without steps maps exactly as before;
- the names of semantic conventions 1.44.0 (``gen_ai.client.operation.*`` and the
  ``gen_ai.client.token.usage`` histogram) are emitted too, beside the new ones, when
  ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai/dup`` (the ``/dup`` of OpenTelemetry's stability
  migrations): a dashboard built on them keeps working while it moves.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import Any, Literal
from urllib.parse import urlsplit

from telemetry.record import TurnRecord

SEMCONV_VERSION = "1.44.0"
GENAI_SEMCONV_VERSION = "0.1.0"  # open-telemetry/semantic-conventions-genai
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
DUP = "gen_ai/dup"  # in OPT_IN_ENV: the 1.44.0 names too, beside the current ones
SCOPE = "ttft"
NS_PER_MS = 1_000_000

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

Attrs = dict[str, str | bool | int | float | list[str]]
SpanKind = Literal["client", "internal"]

# The semantic conventions' advised bucket bounds (s, and tokens).
DURATION_BOUNDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
CHUNK_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
TOKEN_BOUNDS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)


@dataclass(frozen=True, slots=True)
class Instrument:
    """One metric instrument: a histogram (``bounds``: its advised buckets) or a monotonic counter."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...] = ()
    kind: Literal["histogram", "counter"] = "histogram"


def _hist(name: str, unit: str, description: str, bounds: tuple[float, ...]) -> Instrument:
    return Instrument(name, unit, description, bounds)


def _counter(name: str, description: str) -> Instrument:
    return Instrument(name, "{token}", description, (), "counter")


_DURATION_DOC = "GenAI inference duration (first send to end of stream)"
_TTFC_DOC = "Time from the first send to the first chunk"
_TPOC_DOC = "Time since the previous chunk, for each chunk after the first"
DURATION = _hist("gen_ai.client.inference.duration", "s", _DURATION_DOC, DURATION_BOUNDS)
TIME_TO_FIRST_CHUNK = _hist("gen_ai.client.inference.time_to_first_chunk", "s", _TTFC_DOC, DURATION_BOUNDS)
TIME_PER_OUTPUT_CHUNK = _hist("gen_ai.client.inference.time_per_output_chunk", "s", _TPOC_DOC, CHUNK_BOUNDS)
OPERATION_INPUT = _hist(
    "gen_ai.client.inference.operation.input_tokens", "{token}", "Input tokens per inference", TOKEN_BOUNDS
)
OPERATION_OUTPUT = _hist(
    "gen_ai.client.inference.operation.output_tokens", "{token}", "Output tokens per inference", TOKEN_BOUNDS
)
USAGE_INPUT = _counter("gen_ai.client.inference.usage.input_tokens", "Input tokens used, cached ones included")
USAGE_OUTPUT = _counter("gen_ai.client.inference.usage.output_tokens", "Output tokens used, reasoning included")
USAGE_CACHE_READ = _counter(
    "gen_ai.client.inference.usage.cache_read.input_tokens", "Input tokens served from the provider's cache"
)
USAGE_CACHE_WRITE = _counter(
    "gen_ai.client.inference.usage.cache_write.input_tokens", "Input tokens written to the provider's cache"
)
USAGE_REASONING = _counter("gen_ai.client.inference.usage.reasoning.output_tokens", "Output tokens used for reasoning")
# A tool-using turn (its record's ``steps``): each tool call, and the whole turn as one agent invocation.
AGENT_DURATION_BOUNDS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
EXECUTE_TOOL_DURATION = _hist(
    "gen_ai.execute_tool.duration", "s", "The duration of a single tool execution", DURATION_BOUNDS
)
INVOKE_AGENT_DURATION = _hist(
    "gen_ai.invoke_agent.duration", "s", "A tool-using turn, from its first send to its end", AGENT_DURATION_BOUNDS
)
# Semantic conventions 1.44.0's names, emitted beside the current ones with OPT_IN_ENV=gen_ai/dup.
OLD_DURATION = _hist("gen_ai.client.operation.duration", "s", _DURATION_DOC, DURATION_BOUNDS)
OLD_TIME_TO_FIRST_CHUNK = _hist("gen_ai.client.operation.time_to_first_chunk", "s", _TTFC_DOC, DURATION_BOUNDS)
OLD_TIME_PER_OUTPUT_CHUNK = _hist("gen_ai.client.operation.time_per_output_chunk", "s", _TPOC_DOC, CHUNK_BOUNDS)
OLD_TOKEN_USAGE = _hist("gen_ai.client.token.usage", "{token}", "Tokens used per operation", TOKEN_BOUNDS)
CURRENT = (
    DURATION,
    TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK,
    OPERATION_INPUT,
    OPERATION_OUTPUT,
    USAGE_INPUT,
    USAGE_OUTPUT,
    USAGE_CACHE_READ,
    USAGE_CACHE_WRITE,
    USAGE_REASONING,
    EXECUTE_TOOL_DURATION,
    INVOKE_AGENT_DURATION,
)
LEGACY = (OLD_DURATION, OLD_TIME_TO_FIRST_CHUNK, OLD_TIME_PER_OUTPUT_CHUNK, OLD_TOKEN_USAGE)
INSTRUMENTS = (*CURRENT, *LEGACY)
_RENAMED = {
    DURATION.name: OLD_DURATION,
    TIME_TO_FIRST_CHUNK.name: OLD_TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK.name: OLD_TIME_PER_OUTPUT_CHUNK,
}


def legacy_names(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the 1.44.0 names go out too: ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai/dup``."""
    return DUP in {v.strip().lower() for v in env.get(OPT_IN_ENV, "").split(",")}


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    t_unix_ns: int
    attributes: Attrs = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """A span to emit; ``children`` are its child spans (wait phases, reasoning, streaming)."""

    name: str
    start_unix_ns: int
    end_unix_ns: int
    attributes: Attrs = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    children: tuple[Span, ...] = ()
    error: str | None = None  # the status description of a failed span; None: status unset
    kind: SpanKind | None = None  # None: by its place (a root is CLIENT, a child INTERNAL)


@dataclass(frozen=True, slots=True)
class Point:
    """One value for one instrument (a histogram's sample, a counter's increment), with its
    (low-cardinality) attributes."""

    metric: Instrument
    value: float
    attributes: Attrs


def capture_content(env: Mapping[str, str] = os.environ) -> bool:
    """Prompt and answer text go on spans only when the user asked for it, as the conventions say."""
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


# --- reading the record's untrusted values ------------------------------------------------
def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _label(v: Any) -> str | None:
    """A short text attribute (a model, an error type) with control characters replaced: a span
    name or an attribute may end up printed by a terminal tool, and the record is untrusted."""
    text = _str(v)
    if text is None or text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def chunk_times_ms(rec: TurnRecord) -> list[float]:
    """When each chunk arrived, in ms since the first send, as the log writes them (to the us)."""
    sent = rec.timestamps.sent
    t0 = sent if sent is not None else (rec.chunks[0].t_ns if rec.chunks else 0)
    return [round((c.t_ns - t0) / 1e6, 3) for c in rec.chunks]


def unix_ns(s: Any) -> int | None:
    """An ISO 8601 time with its zone (``started_at``, ``sent_at``) in ns since the epoch; None when
    missing or unreadable."""
    if not isinstance(s, str):
        return None
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None  # a naive time could be any zone: better no time than a wrong one
    whole = int(dt.replace(microsecond=0).timestamp())
    return _unix(whole * 1_000_000_000 + dt.microsecond * 1000)


# OTLP carries times as fixed64 ns since the epoch: one past this (the year 2554), or before 1970, fails
# the encoding of the whole batch it is in, so such a time is dropped, as an unreadable one is.
MAX_UNIX_NS = 2**64 - 1


def _unix(t: int) -> int | None:
    return t if 0 <= t <= MAX_UNIX_NS else None


def sent_unix_ns(rec: TurnRecord) -> int | None:
    """The wall-clock moment of the first send, the origin of ``events_ms``: ``sent_at`` (to the us).
    A record logged before ``sent_at`` existed, or never sent, is placed at ``started_at``."""
    return unix_ns(rec.sent_at()) or unix_ns(rec.started_at)


def _events_ms(rec: TurnRecord) -> dict[str, float | None]:
    """The turn's events in ms since the first send: the log's own figures, so that a span's ns
    come out as they did when the mapping read log lines (a collector's stored traces keep them)."""
    return rec.timestamps.relative_ms()


# --- attributes -----------------------------------------------------------------------------
def _server(rec: TurnRecord) -> Attrs:
    url = _str(rec.base_url)
    if url is None:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    out: Attrs = {}
    if parts.hostname:
        out["server.address"] = parts.hostname
        out["server.port"] = port or (443 if parts.scheme == "https" else 80)
    return out


def error_type(rec: TurnRecord) -> str | None:
    if rec.status == "cancelled":
        return "cancelled"
    if rec.status == "error":
        return (_label(rec.error.type) if rec.error is not None else None) or "_OTHER"
    return None


def metric_attributes(rec: TurnRecord) -> Attrs:
    """The few attributes every histogram point carries: nothing that grows with the turns."""
    return _inference_attributes(rec, error_type(rec))


def _inference_attributes(rec: TurnRecord, err: str | None) -> Attrs:
    """One model call's metric attributes (a turn's, or one model step's with its own ``err``)."""
    model = _label(rec.model) or "unknown"
    attrs: Attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": _label(rec.provider) or "unknown",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        **_server(rec),
    }
    if err is not None:
        attrs["error.type"] = err
    return attrs


def streamed(rec: TurnRecord) -> bool:
    return rec.settings.stream is not False


def _usage_attributes(tokens: Mapping[str, Any]) -> Attrs:
    """``gen_ai.usage.*`` from a token count (``TokenCounts.to_dict()``, or a step's ``tokens``)."""
    usage = {
        "gen_ai.usage.input_tokens": _count(tokens.get("input")),
        "gen_ai.usage.output_tokens": _count(tokens.get("output")),
        "gen_ai.usage.cache_read.input_tokens": _count(tokens.get("cached_input")),
        "gen_ai.usage.cache_write.input_tokens": _count(tokens.get("cache_write_input")),
        "gen_ai.usage.reasoning.output_tokens": _count(tokens.get("reasoning")),
    }
    return {k: v for k, v in usage.items() if v is not None}


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _extra_attributes(rec: TurnRecord) -> dict[str, str | int | float | None]:
    # extra is free-form (bench and compare fill it): still read field by field
    extra = rec.extra
    bench, pane = _dict(extra.get("bench")), extra.get("comparison_id")
    own: dict[str, str | int | float | None] = {}
    if bench:
        own |= {"ttft.bench.run_id": _label(bench.get("run_id")), "ttft.bench.level": _num(bench.get("level"))}
    if pane is not None:
        own |= {"ttft.compare.id": _label(pane), "ttft.compare.pane": _label(extra.get("pane_label"))}
    return own


def span_attributes(rec: TurnRecord, *, capture_content: bool = False) -> Attrs:
    tokens, metrics = rec.tokens, rec.metrics
    # ttft's own: what a latency investigation filters on, and where the counts came from.
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": _label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.api": _label(rec.api),
        "ttft.status": _label(rec.status),
        "ttft.tokens.source": _label(tokens.source),
        "ttft.time_to_first_visible_chunk": _sec(metrics.ttfvt_ms),
        "ttft.time_per_output_token": _sec(metrics.tpot_ms),
        # the server's own account of the wait (vLLM's per-request metrics, llama-server's timings, a probe)
        "ttft.server.queue_time": _sec(metrics.server_queue_ms),
        "ttft.server.time_to_first_token": _sec(metrics.server_ttft_ms),
        "ttft.server.rest_of_time_to_first_chunk": _sec(metrics.server_rest_ms),
        "ttft.server.timing_source": _label(metrics.server_timing_source),
        "ttft.diagnosis": _label(rec.diagnosis),
        **_extra_attributes(rec),
    }
    attrs = _llm_attributes(metric_attributes(rec), rec, tokens.to_dict(), metrics.ttft_ms, rec.stop_reason, own)
    if capture_content:
        attrs.update(_content(rec))
    return attrs


def _llm_attributes(
    attrs: Attrs,
    rec: TurnRecord,
    tokens: Mapping[str, Any],
    ttft_ms: Any,
    stop_reason: Any,
    own: Mapping[str, str | int | float | None],
) -> Attrs:
    """A model call's span attributes: ``attrs`` (its metric attributes), the request's settings, its
    usage, TTFT and finish reason, ttft's own figures ``own``, and OpenInference's names."""
    settings = rec.settings
    if settings.max_output_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = settings.max_output_tokens
    if (temperature := _num(settings.temperature)) is not None:
        attrs["gen_ai.request.temperature"] = temperature
    attrs.update(_usage_attributes(tokens))
    if (ttft := _num(ttft_ms)) is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = ttft / 1000
    if (stop := _label(stop_reason)) is not None:
        attrs["gen_ai.response.finish_reasons"] = [stop]
    attrs.update({k: v for k, v in own.items() if v is not None})
    # OpenInference's names, so Arize Phoenix shows the model and the counts without any glue.
    attrs["openinference.span.kind"] = "LLM"
    attrs["llm.model_name"] = attrs["gen_ai.request.model"]
    for src, dst in (
        ("gen_ai.usage.input_tokens", "llm.token_count.prompt"),
        ("gen_ai.usage.output_tokens", "llm.token_count.completion"),
        ("gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read"),
        ("gen_ai.usage.cache_write.input_tokens", "llm.token_count.prompt_details.cache_write"),
        ("gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning"),
    ):
        if src in attrs:
            attrs[dst] = attrs[src]
    return attrs


def _sec(v: float | None) -> float | None:
    n = _num(v)
    return None if n is None else n / 1000


def _content(rec: TurnRecord) -> Attrs:
    """The prompt and the answer, as the conventions' structured messages (JSON text)."""
    out: Attrs = {}
    prompt, answer, reasoning = _str(rec.prompt), _str(rec.answer), _str(rec.reasoning)
    if prompt is not None:
        out["gen_ai.input.messages"] = json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}], ensure_ascii=False
        )
        out["input.value"] = prompt
    parts = [{"type": "reasoning", "content": reasoning}] if reasoning else []
    if answer is not None:
        parts.append({"type": "text", "content": answer})
        out["output.value"] = answer
    if parts:
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if (stop := _label(rec.stop_reason)) is not None:
            message["finish_reason"] = stop
        out["gen_ai.output.messages"] = json.dumps([message], ensure_ascii=False)
    return out


# --- the span tree --------------------------------------------------------------------------
WAIT_PHASES = ("retries", "pool", "dns", "connect", "tls", "send", "server", "first_token")


def turn_span(rec: TurnRecord, *, capture_content: bool = False) -> Span | None:
    """The turn as a client span with its phases as children; None when it has no wall clock.
    A tool-using turn (one with ``steps``) is an agent invocation: :func:`agent_span`."""
    if rec.agent is not None and rec.steps:
        return agent_span(rec, capture_content=capture_content)
    sent = sent_unix_ns(rec)
    if sent is None:
        return None
    ev = _events_ms(rec)

    def at(key: str) -> int | None:
        return _after(sent, ev.get(key))

    err = error_type(rec)
    said = _label(rec.error.message) if rec.error is not None else None
    message = said if err != "cancelled" else "cancelled"
    return _chat_span(
        rec,
        sent,
        at("first_token"),
        at("first_visible"),
        at("last_token"),
        at("end"),
        rec.metrics.wait_ms.to_dict() if rec.metrics.wait_ms is not None else None,
        span_attributes(rec, capture_content=capture_content),
        (message or err) if err is not None else None,
    )


def _after(origin: int, ms: Any) -> int | None:
    """``ms`` after ``origin`` (ns since the epoch); None when ``ms`` is not a number or falls out of range."""
    v = _num(ms)
    return None if v is None else _unix(origin + int(v * NS_PER_MS))


def _chat_span(
    rec: TurnRecord,
    sent: int,
    first: int | None,
    visible: int | None,
    last: int | None,
    end_at: int | None,
    wait: Mapping[str, Any] | None,
    attrs: Attrs,
    error: str | None,
    kind: SpanKind | None = None,
) -> Span:
    """One model call, ``chat {model}``, from its send to its end, with its events and its phases."""
    end = end_at or last or sent
    events = []
    if first is not None:
        events.append(SpanEvent("gen_ai.first_token", first))
    if visible is not None:
        events.append(SpanEvent("gen_ai.first_visible_token", visible))
    children = [*_wait_spans(wait, sent, first, end)]
    if first is not None:
        reasoning_end = visible if visible is not None else last
        if reasoning_end is not None and reasoning_end > first:
            children.append(Span("reasoning", first, reasoning_end, {"ttft.phase": "reasoning"}))
        if visible is not None and last is not None:
            children.append(Span("streaming", visible, last, {"ttft.phase": "streaming"}))
    return Span(
        f"chat {_label(rec.model) or 'unknown'}",
        sent,
        max(end, sent),
        attrs,
        tuple(events),
        tuple(children),
        error,
        kind,
    )


def _wait_spans(split: Mapping[str, Any] | None, sent: int, first: int | None, end: int) -> list[Span]:
    """The wait (send -> first token) as one child, or tiled by phase where the record splits it."""
    stop = first if first is not None else end
    if split is None or first is None:
        return [Span("wait", sent, stop, {"ttft.phase": "wait"})] if stop > sent else []
    out, t = [], sent
    for phase in WAIT_PHASES:
        v = _num(split.get(phase))
        ms = None if v is None else round(v, 3)  # to the us, as logged: a live span is the file's
        if not ms or ms < 0:
            continue
        nxt = min(t + int(ms * NS_PER_MS), stop)
        out.append(Span(f"wait {phase}", t, nxt, {"ttft.phase": f"wait.{phase}"}))
        t = nxt
    return out


# --- a tool-using turn: an agent invocation, a chat span per model step, a tool span per tool call -----
# A tool step's status as the conventions' error.type (ok: none) and as its span's status description.
TOOL_ERRORS = {"error": "tool_error", "denied": "tool_not_allowed", "cancelled": "cancelled"}
_TOOL_SAID = {
    "error": "the tool failed; the model got an error result",
    "denied": "the call was not allowed (--allow-tool NAME or --allow-tools)",
    "cancelled": "cancelled",
}


def _step_error(rec: TurnRecord, status: Any) -> str | None:
    """A model step's error.type: the turn's own where the turn failed there (its error is that step's)."""
    if status == "cancelled":
        return "cancelled"
    if status == "error":
        return error_type(rec) if rec.status == "error" else "_OTHER"
    return None


def agent_span(rec: TurnRecord, *, capture_content: bool = False) -> Span | None:
    """A tool-using turn as the conventions' agent invocation: an ``invoke_agent`` span (INTERNAL: the
    loop runs in ttft's process) from the first send to the turn's end, with a child per step at its
    own times: ``chat {model}`` (CLIENT) per model step, ``execute_tool {name}`` (INTERNAL) per tool call."""
    sent = sent_unix_ns(rec)
    if sent is None:
        return None
    end = turn_end_unix_ns(rec) or sent
    children: list[Span] = []
    for i, step in enumerate(rec.steps):
        kind = step.get("kind") if isinstance(step, dict) else None
        child = _model_step_span(rec, step, i, sent) if kind == "model" else None
        if kind == "tool":
            child = _tool_step_span(rec, step, i, sent)
        if child is not None:
            children.append(child)
    err = error_type(rec)
    said = _label(rec.error.message) if rec.error is not None else None
    message = said if err != "cancelled" else "cancelled"
    return Span(
        "invoke_agent",
        sent,
        max(end, sent),
        agent_attributes(rec, capture_content=capture_content),
        (),
        tuple(children),
        (message or err) if err is not None else None,
        "internal",
    )


def agent_attributes(rec: TurnRecord, *, capture_content: bool = False) -> Attrs:
    """The ``invoke_agent`` span's: the turn's provider and model (one per turn), its summed usage, and
    ttft's split of the turn (``ttft.agent.*``, times in s)."""
    attrs: Attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": _label(rec.provider) or "unknown",
        "gen_ai.request.model": _label(rec.model) or "unknown",
        **_server(rec),
    }
    if (err := error_type(rec)) is not None:
        attrs["error.type"] = err
    attrs.update(_usage_attributes(rec.tokens.to_dict()))
    agent = _dict(rec.agent)
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": _label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.api": _label(rec.api),
        "ttft.status": _label(rec.status),
        "ttft.tokens.source": _label(rec.tokens.source),
        "ttft.agent.time_in_model": _sec(agent.get("time_in_model_ms")),
        "ttft.agent.time_in_tools": _sec(agent.get("time_in_tools_ms")),
        "ttft.agent.time_in_ttft": _sec(agent.get("time_in_ttft_ms")),
        "ttft.agent.time_in_approval": _sec(agent.get("time_in_approval_ms")),  # the chat's: a person deciding
        **{
            f"ttft.agent.{k}": _count(agent.get(k))
            for k in ("step_count", "model_steps", "tool_steps", "approval_steps", "max_steps")
        },
        "ttft.agent.stopped": _label(agent.get("stopped")),
        "ttft.diagnosis": _label(rec.diagnosis),
        **_extra_attributes(rec),
    }
    attrs.update({k: v for k, v in own.items() if v is not None})
    attrs["openinference.span.kind"] = "AGENT"
    if capture_content:
        attrs.update(_content(rec))
    return attrs


def _model_step_span(rec: TurnRecord, step: Mapping[str, Any], index: int, sent: int) -> Span | None:
    start = _after(sent, step.get("start_ms"))
    if start is None:
        return None
    end = _after(sent, step.get("end_ms"))
    first, visible, last = (_after(start, step.get(k)) for k in ("ttft_ms", "ttfvt_ms", "e2e_ms"))
    status = step.get("status")
    err = _step_error(rec, status)
    tokens = _dict(step.get("tokens"))
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": _label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.step_index": index,
        "ttft.api": _label(rec.api),
        "ttft.status": _label(status),
        "ttft.tokens.source": _label(tokens.get("source")),
        "ttft.time_to_first_visible_chunk": _sec(step.get("ttfvt_ms")),
        "ttft.time_per_output_token": _sec(step.get("tpot_ms")),
        "ttft.server.queue_time": _sec(step.get("server_queue_ms")),
        "ttft.server.time_to_first_token": _sec(step.get("server_ttft_ms")),
        "ttft.server.rest_of_time_to_first_chunk": _sec(step.get("server_rest_ms")),
        "ttft.server.timing_source": _label(step.get("server_timing_source")),
        "ttft.step.tool_calls": _count(step.get("tool_calls")),
    }
    attrs = _llm_attributes(
        _inference_attributes(rec, err), rec, tokens, step.get("ttft_ms"), step.get("stop_reason"), own
    )
    if err is None:
        error = None
    elif err == "cancelled":
        error = "cancelled"
    else:  # the turn's error is its failed step's
        error = (_label(rec.error.message) if rec.error is not None else None) or err
    wait = step.get("wait_ms")
    return _chat_span(rec, start, first, visible, last, end, wait if isinstance(wait, dict) else None, attrs, error,
                      "client")  # fmt: skip


def _tool_step_span(rec: TurnRecord, step: Mapping[str, Any], index: int, sent: int) -> Span | None:
    start = _after(sent, step.get("start_ms"))
    if start is None:
        return None
    end = _after(sent, step.get("end_ms")) or start
    name = _label(step.get("name")) or "unknown"
    attrs: Attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if (call_id := _label(step.get("call_id"))) is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    status = step.get("status")
    err = TOOL_ERRORS.get(status) if isinstance(status, str) else None
    if err is not None:
        attrs["error.type"] = err
    own: dict[str, str | int | float | bool | None] = {
        "ttft.session_id": _label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.step_index": index,
        "ttft.tool.server": _label(step.get("server")),
        "ttft.tool.status": _label(status),
        "ttft.tool.result_bytes": _count(step.get("result_bytes")),
        "ttft.tool.truncated": step.get("truncated") if isinstance(step.get("truncated"), bool) else None,
    }
    attrs.update({k: v for k, v in own.items() if v is not None})
    attrs["openinference.span.kind"] = "TOOL"
    attrs["tool.name"] = name
    said = _TOOL_SAID[status] if err is not None and isinstance(status, str) else None
    return Span(f"execute_tool {name}", start, max(end, start), attrs, (), (), said, "internal")


# --- metric points --------------------------------------------------------------------------
def turn_points(rec: TurnRecord, *, legacy: bool = False) -> list[Point]:
    """Every metric value this turn contributes (per chunk for ``time_per_output_chunk``); with
    ``legacy`` (:func:`legacy_names`) the 1.44.0 names' too. A tool-using turn contributes each model
    step as a model call of its own, each tool call to ``gen_ai.execute_tool.duration`` and the whole
    turn to ``gen_ai.invoke_agent.duration``."""
    if rec.agent is not None and rec.steps:
        return _agent_points(rec, legacy)
    metrics = rec.metrics
    return _inference_points(
        rec,
        metric_attributes(rec),
        metrics.total_ms,
        metrics.ttft_ms,
        chunk_times_ms(rec),
        rec.tokens.to_dict(),
        legacy,
    )


def _inference_points(
    rec: TurnRecord,
    attrs: Attrs,
    total_ms: Any,
    ttft_ms: Any,
    times: list[float],
    tokens: Mapping[str, Any],
    legacy: bool,
) -> list[Point]:
    """One model call's points: its duration, TTFT and chunk gaps (``times``: its chunks, in ms), and
    its usage (``tokens``, as ``TokenCounts.to_dict()`` writes it)."""
    out: list[Point] = []
    if (total := _num(total_ms)) is not None:
        out.append(Point(DURATION, total / 1000, attrs))
    if streamed(rec):
        if (ttft := _num(ttft_ms)) is not None:
            out.append(Point(TIME_TO_FIRST_CHUNK, ttft / 1000, attrs))
        out += [Point(TIME_PER_OUTPUT_CHUNK, (b - a) / 1000, attrs) for a, b in pairwise(times)]
    n_in, n_out = _count(tokens.get("input")), _count(tokens.get("output"))
    if tokens.get("source") == "usage":  # the server's counts: what a bill holds, never an estimate
        # ttft sends text; files it attached may be images, and the usage does not split them out
        in_attrs: Attrs = {**attrs, "gen_ai.token.modality": "unknown" if rec.attachments else "text"}
        out_attrs: Attrs = {**attrs, "gen_ai.token.modality": "text"}
        for metric, n, a in (
            (USAGE_INPUT, n_in, in_attrs),
            (USAGE_OUTPUT, n_out, out_attrs),
            (USAGE_CACHE_READ, _count(tokens.get("cached_input")), in_attrs),
            (USAGE_CACHE_WRITE, _count(tokens.get("cache_write_input")), in_attrs),
            (USAGE_REASONING, _count(tokens.get("reasoning")), out_attrs),
        ):
            if n is not None and n >= 0:
                out.append(Point(metric, float(n), a))
        for metric, n in ((OPERATION_INPUT, n_in), (OPERATION_OUTPUT, n_out)):
            if n is not None and n >= 0:
                out.append(Point(metric, float(n), attrs))
    if legacy:
        out += [Point(_RENAMED[p.metric.name], p.value, p.attributes) for p in out if p.metric.name in _RENAMED]
        for n, kind in ((n_in, "input"), (n_out, "output")):
            if n is not None:
                out.append(Point(OLD_TOKEN_USAGE, float(n), {**attrs, "gen_ai.token.type": kind}))
    return out


def _agent_points(rec: TurnRecord, legacy: bool) -> list[Point]:
    times = chunk_times_ms(rec)  # every step's chunks on the turn's clock: each model step takes its own
    out: list[Point] = []
    for step in rec.steps:
        if not isinstance(step, dict):
            continue
        start, end = _num(step.get("start_ms")), _num(step.get("end_ms"))
        if step.get("kind") == "model":
            mine = [t for t in times if start is not None and end is not None and start <= t <= end]
            total = end - start if start is not None and end is not None and end >= start else None
            attrs = _inference_attributes(rec, _step_error(rec, step.get("status")))
            out += _inference_points(rec, attrs, total, step.get("ttft_ms"), mine, _dict(step.get("tokens")), legacy)
        elif step.get("kind") == "tool":
            took = _num(step.get("duration_ms"))
            if took is None or took < 0:
                continue
            tool: Attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": _label(step.get("name")) or "unknown",
            }
            status = step.get("status")
            if isinstance(status, str) and (err := TOOL_ERRORS.get(status)) is not None:
                tool["error.type"] = err
            out.append(Point(EXECUTE_TOOL_DURATION, took / 1000, tool))
    if (total := _num(rec.metrics.total_ms)) is not None:
        agent: Attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _label(rec.provider) or "unknown",
            "gen_ai.request.model": _label(rec.model) or "unknown",
        }
        if (err := error_type(rec)) is not None:
            agent["error.type"] = err
        out.append(Point(INVOKE_AGENT_DURATION, total / 1000, agent))
    return out


def turn_end_unix_ns(rec: TurnRecord) -> int | None:
    sent = sent_unix_ns(rec)
    if sent is None:
        return None
    ev = _events_ms(rec)
    end = _num(ev.get("end"))
    if end is None:
        end = _num(ev.get("last_token"))
    return _unix(sent + int((end or 0.0) * NS_PER_MS)) or sent


def trace_ids(rec: TurnRecord, salt: int = 0) -> tuple[str, str]:
    """A stable (trace id, span id) in hex for a logged turn: a file replayed twice names the same trace.

    The key is the turn's identity: compare panes share a session, a turn index and often the
    millisecond they started, so provider, model, URL and send time are in it too. ``salt`` separates
    records that still agree on all of it (the caller counts duplicates in file order). The key is
    the text the log line holds for each (``None`` for a missing one), so ids match older exports.
    """
    who = "/".join(str(v) for v in (rec.session_id, rec.turn_index, rec.started_at, rec.sent_at()))
    where = "/".join(str(v) for v in (rec.provider, rec.model, rec.base_url))
    digest = hashlib.sha256(f"{who}/{where}/{salt}".encode()).hexdigest()
    return digest[:32], digest[32:48]
