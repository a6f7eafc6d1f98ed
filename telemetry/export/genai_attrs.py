"""The GenAI attributes of a turn: a metric point's few (nothing that grows with the turns), a
``chat`` span's (settings, usage, ttft's own figures, OpenInference's names, the content when asked)
and an ``invoke_agent`` span's; and the conventions' ``error.type`` of a turn, a step and a tool call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..record import TurnRecord
from .genai_values import as_dict, count, label, nonempty_str, number, seconds

Attrs = dict[str, str | bool | int | float | list[str]]


# --- attributes -----------------------------------------------------------------------------
def _server(rec: TurnRecord) -> Attrs:
    url = nonempty_str(rec.base_url)
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
        return (label(rec.error.type) if rec.error is not None else None) or "_OTHER"
    return None


def metric_attributes(rec: TurnRecord) -> Attrs:
    """The few attributes every histogram point carries: nothing that grows with the turns."""
    return inference_attributes(rec, error_type(rec))


def inference_attributes(rec: TurnRecord, err: str | None) -> Attrs:
    """One model call's metric attributes (a turn's, or one model step's with its own ``err``)."""
    model = label(rec.model) or "unknown"
    attrs: Attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": label(rec.provider) or "unknown",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        **_server(rec),
    }
    if err is not None:
        attrs["error.type"] = err
    return attrs


def _usage_attributes(tokens: Mapping[str, Any]) -> Attrs:
    """``gen_ai.usage.*`` from a token count (``TokenCounts.to_dict()``, or a step's ``tokens``)."""
    usage = {
        "gen_ai.usage.input_tokens": count(tokens.get("input")),
        "gen_ai.usage.output_tokens": count(tokens.get("output")),
        "gen_ai.usage.cache_read.input_tokens": count(tokens.get("cached_input")),
        "gen_ai.usage.cache_write.input_tokens": count(tokens.get("cache_write_input")),
        "gen_ai.usage.reasoning.output_tokens": count(tokens.get("reasoning")),
    }
    return {k: v for k, v in usage.items() if v is not None}


def _extra_attributes(rec: TurnRecord) -> dict[str, str | int | float | None]:
    # extra is free-form (bench and compare fill it): still read field by field
    extra = rec.extra
    bench, pane = as_dict(extra.get("bench")), extra.get("comparison_id")
    own: dict[str, str | int | float | None] = {}
    if bench:
        own |= {"ttft.bench.run_id": label(bench.get("run_id")), "ttft.bench.level": number(bench.get("level"))}
    if pane is not None:
        own |= {"ttft.compare.id": label(pane), "ttft.compare.pane": label(extra.get("pane_label"))}
    return own


def span_attributes(rec: TurnRecord, *, capture_content: bool = False) -> Attrs:
    tokens, metrics = rec.tokens, rec.metrics
    # ttft's own: what a latency investigation filters on, and where the counts came from.
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.api": label(rec.api),
        "ttft.status": label(rec.status),
        "ttft.tokens.source": label(tokens.source),
        "ttft.time_to_first_visible_chunk": seconds(metrics.ttfvt_ms),
        "ttft.time_per_output_token": seconds(metrics.tpot_ms),
        # the server's own account of the wait (vLLM's per-request metrics, llama-server's timings, a probe)
        "ttft.server.queue_time": seconds(metrics.server_queue_ms),
        "ttft.server.time_to_first_token": seconds(metrics.server_ttft_ms),
        "ttft.server.rest_of_time_to_first_chunk": seconds(metrics.server_rest_ms),
        "ttft.server.timing_source": label(metrics.server_timing_source),
        "ttft.diagnosis": label(rec.diagnosis),
        **_extra_attributes(rec),
    }
    attrs = llm_attributes(metric_attributes(rec), rec, tokens.to_dict(), metrics.ttft_ms, rec.stop_reason, own)
    if capture_content:
        attrs.update(_content(rec))
    return attrs


def llm_attributes(
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
    if (temperature := number(settings.temperature)) is not None:
        attrs["gen_ai.request.temperature"] = temperature
    attrs.update(_usage_attributes(tokens))
    if (ttft := number(ttft_ms)) is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = ttft / 1000
    if (stop := label(stop_reason)) is not None:
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


def _content(rec: TurnRecord) -> Attrs:
    """The prompt and the answer, as the conventions' structured messages (JSON text)."""
    out: Attrs = {}
    prompt, answer, reasoning = nonempty_str(rec.prompt), nonempty_str(rec.answer), nonempty_str(rec.reasoning)
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
        if (stop := label(rec.stop_reason)) is not None:
            message["finish_reason"] = stop
        out["gen_ai.output.messages"] = json.dumps([message], ensure_ascii=False)
    return out


# --- a tool-using turn: an agent invocation, a chat span per model step, a tool span per tool call -----
# A tool step's status as the conventions' error.type (ok: none) and as its span's status description.
TOOL_ERRORS = {
    "error": "tool_error",
    "denied": "tool_not_allowed",
    "cancelled": "cancelled",
    "refused": "tool_arguments_refused",
}


def step_error(rec: TurnRecord, status: Any) -> str | None:
    """A model step's error.type: the turn's own where the turn failed there (its error is that step's)."""
    if status == "cancelled":
        return "cancelled"
    if status == "error":
        return error_type(rec) if rec.status == "error" else "_OTHER"
    return None


def agent_attributes(rec: TurnRecord, *, capture_content: bool = False) -> Attrs:
    """The ``invoke_agent`` span's: the turn's provider and model (one per turn), its summed usage, and
    ttft's split of the turn (``ttft.agent.*``, times in s)."""
    attrs: Attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": label(rec.provider) or "unknown",
        "gen_ai.request.model": label(rec.model) or "unknown",
        **_server(rec),
    }
    if (err := error_type(rec)) is not None:
        attrs["error.type"] = err
    attrs.update(_usage_attributes(rec.tokens.to_dict()))
    agent = rec.agent.to_dict() if rec.agent is not None else {}  # its JSON: the attributes take its names
    own: dict[str, str | int | float | None] = {
        "ttft.session_id": label(rec.session_id),
        "ttft.turn_index": rec.turn_index,
        "ttft.api": label(rec.api),
        "ttft.status": label(rec.status),
        "ttft.tokens.source": label(rec.tokens.source),
        "ttft.agent.time_in_model": seconds(agent.get("time_in_model_ms")),
        "ttft.agent.time_in_tools": seconds(agent.get("time_in_tools_ms")),
        "ttft.agent.time_in_ttft": seconds(agent.get("time_in_ttft_ms")),
        "ttft.agent.time_in_approval": seconds(agent.get("time_in_approval_ms")),  # the chat's: a person deciding
        "ttft.agent.time_in_app": seconds(agent.get("time_in_app_ms")),  # a proxied app's own, between its calls
        **{
            f"ttft.agent.{k}": count(agent.get(k))
            for k in ("step_count", "model_steps", "tool_steps", "approval_steps", "max_steps")
        },
        "ttft.agent.stopped": label(agent.get("stopped")),
        "ttft.diagnosis": label(rec.diagnosis),
        **_extra_attributes(rec),
    }
    attrs.update({k: v for k, v in own.items() if v is not None})
    attrs["openinference.span.kind"] = "AGENT"
    if capture_content:
        attrs.update(_content(rec))
    return attrs
