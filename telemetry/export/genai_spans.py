"""A turn as OpenTelemetry GenAI spans: the ``chat {model}`` client span with its wait, reasoning and
streaming phases, or, for a tool-using turn, the ``invoke_agent`` span with a ``chat`` span per model
step and an ``execute_tool`` span per tool call; and the stable trace and span ids of a logged turn."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..log.secrets import mask, mask_optional
from ..record import TurnRecord
from ..steps import ModelStepRecord, ToolStepRecord
from .genai_attrs import (
    TOOL_ERRORS,
    Attrs,
    agent_attributes,
    error_type,
    inference_attributes,
    llm_attributes,
    span_attributes,
    step_error,
)
from .genai_values import (
    NS_PER_MS,
    events_ms,
    label,
    number,
    seconds,
    sent_unix_ns,
    turn_end_unix_ns,
    unix,
)

SpanKind = Literal["client", "internal"]


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


# --- the span tree --------------------------------------------------------------------------
WAIT_PHASES = ("retries", "pool", "dns", "connect", "tls", "send", "server", "first_token", "client_lag")


def turn_span(rec: TurnRecord, *, capture_content: bool = False) -> Span | None:
    """The turn as a client span with its phases as children; None when it has no wall clock.
    A tool-using turn (one with ``steps``) is an agent invocation: :func:`agent_span`."""
    rec = masked_turn(rec)
    if rec.agent is not None and rec.steps:
        return agent_span(rec, capture_content=capture_content)
    sent = sent_unix_ns(rec)
    if sent is None:
        return None
    ev = events_ms(rec)

    def at(key: str) -> int | None:
        return _after(sent, ev.get(key))

    err = error_type(rec)
    said = label(rec.error.message) if rec.error is not None else None
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


def masked_turn(rec: TurnRecord) -> TurnRecord:
    """The record as a span may carry it: its error's words and its diagnosis masked
    (:func:`telemetry.log.secrets.mask`), whichever exporter sends it (a file, the live OTLP push)."""
    err = rec.error
    error = err if err is None else replace(err, message=mask(err.message), hint=mask_optional(err.hint))
    diagnosis = mask(rec.diagnosis)
    if error == err and diagnosis == rec.diagnosis:
        return rec
    return replace(rec, error=error, diagnosis=diagnosis)


def _after(origin: int, ms: Any) -> int | None:
    """``ms`` after ``origin`` (ns since the epoch); None when ``ms`` is not a number or falls out of range."""
    v = number(ms)
    return None if v is None else unix(origin + int(v * NS_PER_MS))


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
        f"chat {label(rec.model) or 'unknown'}",
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
        v = number(split.get(phase))
        ms = None if v is None else round(v, 3)  # to the us, as logged: a live span is the file's
        if not ms or ms < 0:
            continue
        nxt = min(t + int(ms * NS_PER_MS), stop)
        out.append(Span(f"wait {phase}", t, nxt, {"ttft.phase": f"wait.{phase}"}))
        t = nxt
    return out


_TOOL_SAID = {
    "error": "the tool failed; the model got an error result",
    "denied": "the call was not allowed (--allow-tool NAME or --allow-tools)",
    "cancelled": "cancelled",
    "refused": "its arguments were past ttft's limits for untrusted JSON: not run; the model got an error result",
}


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
        child = None
        if isinstance(step, ModelStepRecord):
            child = _model_step_span(rec, step, i, sent)
        elif isinstance(step, ToolStepRecord):
            child = _tool_step_span(rec, step, i, sent)
        if child is not None:
            children.append(child)
    err = error_type(rec)
    said = label(rec.error.message) if rec.error is not None else None
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


def _model_step_span(rec: TurnRecord, step: ModelStepRecord, index: int, sent: int) -> Span | None:
    start = _after(sent, step.start_ms)
    if start is None:
        return None
    end = _after(sent, step.end_ms)
    first, visible, last = (_after(start, v) for v in (step.ttft_ms, step.ttfvt_ms, step.e2e_ms))
    status = step.status
    err = step_error(rec, status)
    tokens = step.tokens.to_dict() if step.tokens is not None else {}
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.step_index": index,
        "ttft.api": label(rec.api),
        "ttft.status": label(status),
        "ttft.tokens.source": label(tokens.get("source")),
        "ttft.time_to_first_visible_chunk": seconds(step.ttfvt_ms),
        "ttft.time_per_output_token": seconds(step.tpot_ms),
        "ttft.server.queue_time": seconds(step.server_queue_ms),
        "ttft.server.time_to_first_token": seconds(step.server_ttft_ms),
        "ttft.server.rest_of_time_to_first_chunk": seconds(step.server_rest_ms),
        "ttft.server.timing_source": label(step.server_timing_source),
        "ttft.step.tool_calls": step.tool_calls,
    }
    attrs = llm_attributes(inference_attributes(rec, err), rec, tokens, step.ttft_ms, step.stop_reason, own)
    if err is None:
        error = None
    elif err == "cancelled":
        error = "cancelled"
    else:  # the turn's error is its failed step's
        error = (label(rec.error.message) if rec.error is not None else None) or err
    wait = step.wait_ms.to_dict() if step.wait_ms is not None else None
    return _chat_span(rec, start, first, visible, last, end, wait, attrs, error, "client")


def _tool_step_span(rec: TurnRecord, step: ToolStepRecord, index: int, sent: int) -> Span | None:
    start = _after(sent, step.start_ms)
    if start is None:
        return None
    end = _after(sent, step.end_ms) or start
    name = label(step.name) or "unknown"
    attrs: Attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if (call_id := label(step.call_id)) is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    status = step.status
    if (err := TOOL_ERRORS.get(status)) is not None:
        attrs["error.type"] = err
    own: dict[str, str | int | float | bool | None] = {
        "ttft.session_id": label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.step_index": index,
        "ttft.tool.server": label(step.server),
        "ttft.tool.status": label(status),
        "ttft.tool.result_bytes": step.result_bytes,
        "ttft.tool.truncated": step.truncated,
    }
    attrs.update({k: v for k, v in own.items() if v is not None})
    attrs["openinference.span.kind"] = "TOOL"
    attrs["tool.name"] = name
    said = _TOOL_SAID[status] if err is not None and isinstance(status, str) else None
    return Span(f"execute_tool {name}", start, max(end, start), attrs, (), (), said, "internal")


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
