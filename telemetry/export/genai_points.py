"""A turn as GenAI metric points: each model call's duration, time to first chunk, chunk gaps and
server-counted usage, each tool call's duration and a tool-using turn's whole invocation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..record import TurnRecord
from ..steps import ModelStepRecord, ToolStepRecord
from .genai_attrs import (
    TOOL_ERRORS,
    Attrs,
    error_type,
    inference_attributes,
    metric_attributes,
    step_error,
)
from .genai_instruments import (
    DURATION,
    EXECUTE_TOOL_DURATION,
    INVOKE_AGENT_DURATION,
    OLD_TOKEN_USAGE,
    OPERATION_INPUT,
    OPERATION_OUTPUT,
    RENAMED,
    TIME_PER_OUTPUT_CHUNK,
    TIME_TO_FIRST_CHUNK,
    USAGE_CACHE_READ,
    USAGE_CACHE_WRITE,
    USAGE_INPUT,
    USAGE_OUTPUT,
    USAGE_REASONING,
    Instrument,
)
from .genai_values import chunk_times_ms, count, label, number


@dataclass(frozen=True, slots=True)
class Point:
    """One value for one instrument (a histogram's sample, a counter's increment), with its
    (low-cardinality) attributes."""

    metric: Instrument
    value: float
    attributes: Attrs


def streamed(rec: TurnRecord) -> bool:
    return rec.settings.stream is not False


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
    if (total := number(total_ms)) is not None:
        out.append(Point(DURATION, total / 1000, attrs))
    if streamed(rec):
        if (ttft := number(ttft_ms)) is not None:
            out.append(Point(TIME_TO_FIRST_CHUNK, ttft / 1000, attrs))
        out += [Point(TIME_PER_OUTPUT_CHUNK, (b - a) / 1000, attrs) for a, b in pairwise(times)]
    n_in, n_out = count(tokens.get("input")), count(tokens.get("output"))
    if tokens.get("source") == "usage":  # the server's counts: what a bill holds, never an estimate
        # ttft sends text; files it attached may be images, and the usage does not split them out
        in_attrs: Attrs = {**attrs, "gen_ai.token.modality": "unknown" if rec.attachments else "text"}
        out_attrs: Attrs = {**attrs, "gen_ai.token.modality": "text"}
        for metric, n, a in (
            (USAGE_INPUT, n_in, in_attrs),
            (USAGE_OUTPUT, n_out, out_attrs),
            (USAGE_CACHE_READ, count(tokens.get("cached_input")), in_attrs),
            (USAGE_CACHE_WRITE, count(tokens.get("cache_write_input")), in_attrs),
            (USAGE_REASONING, count(tokens.get("reasoning")), out_attrs),
        ):
            if n is not None and n >= 0:
                out.append(Point(metric, float(n), a))
        for metric, n in ((OPERATION_INPUT, n_in), (OPERATION_OUTPUT, n_out)):
            if n is not None and n >= 0:
                out.append(Point(metric, float(n), attrs))
    if legacy:
        out += [Point(RENAMED[p.metric.name], p.value, p.attributes) for p in out if p.metric.name in RENAMED]
        for n, kind in ((n_in, "input"), (n_out, "output")):
            if n is not None:
                out.append(Point(OLD_TOKEN_USAGE, float(n), {**attrs, "gen_ai.token.type": kind}))
    return out


def _agent_points(rec: TurnRecord, legacy: bool) -> list[Point]:
    times = chunk_times_ms(rec)  # every step's chunks on the turn's clock: each model step takes its own
    out: list[Point] = []
    for step in rec.steps:
        start, end = number(step.start_ms), number(step.end_ms)
        if isinstance(step, ModelStepRecord):
            mine = [t for t in times if start is not None and end is not None and start <= t <= end]
            total = end - start if start is not None and end is not None and end >= start else None
            attrs = inference_attributes(rec, step_error(rec, step.status))
            tokens = step.tokens.to_dict() if step.tokens is not None else {}
            out += _inference_points(rec, attrs, total, step.ttft_ms, mine, tokens, legacy)
        elif isinstance(step, ToolStepRecord):
            took = number(step.duration_ms)
            if took is None or took < 0:
                continue
            tool: Attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": label(step.name) or "unknown"}
            if (err := TOOL_ERRORS.get(step.status)) is not None:
                tool["error.type"] = err
            out.append(Point(EXECUTE_TOOL_DURATION, took / 1000, tool))
    if (total := number(rec.metrics.total_ms)) is not None:
        agent: Attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": label(rec.provider) or "unknown",
            "gen_ai.request.model": label(rec.model) or "unknown",
        }
        if (err := error_type(rec)) is not None:
            agent["error.type"] = err
        out.append(Point(INVOKE_AGENT_DURATION, total / 1000, agent))
    return out
