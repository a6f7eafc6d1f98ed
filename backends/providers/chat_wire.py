"""Chat Completions on the wire, without the SDK: request body, JSON-dict translation, the end.

Shared by the SDK backend (:mod:`backends.providers.openai_chat`) and the lean one
(:mod:`backends.providers.lean.chat`), so both turn the same bytes into the same events through one
translation. Imports neither SDK: importing ``openai`` alone costs 0.5-1.2 s of a process start.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...telemetry import events as ev
from ...telemetry.errors import ErrorKind
from ...telemetry.server.per_request import NOTICE as PER_REQUEST_NOTICE
from ...telemetry.server.per_request import SOURCE as PER_REQUEST_SOURCE
from ...telemetry.server.per_request import notice_text, read_metrics
from ..base import ChatRequest
from ..think import ThinkSplitter
from ..transport.http import Probe
from .answers.stream_shape import count, shape_checked
from .fields import field
from .hosted import TurnState
from .tools_wire import chat_messages, chat_tools, text_id

# Body fields of OpenAI-compatible servers that OpenAI's API (and so its SDK's signature) lacks: the SDK
# path sends them as extra_body.
SERVER_FIELDS = ("ignore_eos",)
OLLAMA_KEYS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)

# The record's ``notices`` entry when the usage request (stream_options.include_usage) was dropped.
STREAM_OPTIONS_NOTICE = "stream_options"
STREAM_OPTIONS_REJECTED = (
    "rejected: the server answered HTTP 400 to stream_options, so the request was sent again without it"
    " (the next attempt) and no usage was asked for: token counts are estimated unless the server sent usage anyway"
)
STREAM_OPTIONS_NOT_SENT = (
    "not sent: this server rejected stream_options on an earlier turn, so no usage was asked for:"
    " token counts are estimated unless the server sent usage anyway"
)


def usage_event_raw(t: int, usage: Any) -> ev.Usage:
    """The counts of a ``usage`` object; one of the wrong shape (or its details) reads as no counts,
    as the SDK's model reads it."""
    details_in = field(usage, "prompt_tokens_details")
    details_out = field(usage, "completion_tokens_details")
    return ev.Usage(
        t,
        input=count(field(usage, "prompt_tokens")),
        cached_input=count(field(details_in, "cached_tokens")),
        output=count(field(usage, "completion_tokens")),
        reasoning=count(field(details_out, "reasoning_tokens")),
        cache_write_input=count(field(details_in, "cache_write_tokens")),  # OpenRouter's, for Anthropic models
    )


def per_request_events(metrics: Any, t: int) -> Iterable[ev.Event]:
    """vLLM's per-request ``metrics`` object (a usage chunk's, a whole answer's, a Responses
    ``response.completed``'s): what ttft knows of it as a ServerTimings, and a Notice naming what it
    could not read (a malformed, hostile or unknown object never ends the turn)."""
    if metrics is None:
        return
    kept, dropped = read_metrics(metrics)
    if kept is not None:
        yield ev.ServerTimings(t, PER_REQUEST_SOURCE, kept)
    if dropped:
        yield ev.Notice(t, PER_REQUEST_NOTICE, notice_text(dropped))


def server_events_raw(obj: dict[str, Any], t: int) -> Iterable[ev.Event]:
    """llama-server ``timings``, Ollama's ``*_duration`` fields and vLLM's per-request ``metrics`` of one
    chunk or response."""
    timings = obj.get("timings")
    if isinstance(timings, dict):
        yield ev.ServerTimings(t, "llama-server", dict(timings))
    yield from per_request_events(obj.get("metrics"), t)
    ollama = {k: obj[k] for k in OLLAMA_KEYS if k in obj}
    if ollama:
        yield ev.ServerTimings(t, "ollama", ollama)


class ChatWire:
    """The SDK-free half of a Chat Completions backend (mixed into a :class:`HostedBackend`)."""

    model: str
    compat: bool
    stream_options_ok: bool

    def __init__(self, model: str, *, compat: bool = False, **opts: Any) -> None:
        opts.setdefault("provider", "openai")
        opts.setdefault("key_env", "OPENAI_API_KEY")
        super().__init__(model, **opts)  # type: ignore[call-arg]  # HostedBackend, next in the MRO
        self.compat = compat
        self.stream_options_ok = True  # learned: False once a server rejected stream_options

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        s = request.settings
        p: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request.messages),
            "stream": s.stream,
        }
        if request.tools:
            p["tools"] = chat_tools(request.tools)
        if s.max_output_tokens is not None:
            p["max_completion_tokens"] = s.max_output_tokens
            if self.compat:  # older servers (Ollama, LM Studio) only know max_tokens
                p["max_tokens"] = s.max_output_tokens
        if s.temperature is not None:
            p["temperature"] = s.temperature
        if s.reasoning_effort is not None:
            p["reasoning_effort"] = s.reasoning_effort
        if self.compat and s.extra.get("ignore_eos"):  # vLLM, SGLang, llama-server: run to max_tokens
            p["ignore_eos"] = True
        if s.stream and self.stream_options_ok:
            p["stream_options"] = {"include_usage": True}
        return p

    def _content(self, text: str, t: int, state: TurnState) -> Iterable[ev.Event]:
        splitter: ThinkSplitter | None = state.extra.get("splitter")
        if splitter is None:
            yield ev.TextDelta(t, text)
            return
        for kind, piece in splitter.feed(text):
            yield ev.ReasoningDelta(t, piece) if kind == "reasoning" else ev.TextDelta(t, piece)

    @shape_checked("Chat Completions")
    def _translate_raw(self, item: dict[str, Any], t: int, state: TurnState) -> Iterable[ev.Event]:
        """One streamed chunk as its JSON dict: the same events as from the SDK's typed chunk."""
        yield from server_events_raw(item, t)
        usage = item.get("usage")
        if usage is not None:
            state.usage["event"] = usage_event_raw(t, usage)
        for choice in item.get("choices") or ():
            delta = choice.get("delta")
            if delta is not None:  # a delta that is no object (0, []) is malformed, as through the SDK
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    yield ev.ReasoningDelta(t, reasoning)
                content = delta.get("content")
                if content:
                    yield from self._content(content, t, state)
                for tc in delta.get("tool_calls") or ():
                    fn = tc.get("function") or {}
                    name = fn.get("name") or ""
                    args = fn.get("arguments") or ""
                    call_id = tc.get("id") or ""
                    if name or args or call_id:
                        yield ev.ToolCallDelta(t, name, args, index=count(tc.get("index")), call_id=text_id(call_id))
            if choice.get("finish_reason"):
                state.stop_reason = choice["finish_reason"]

    @shape_checked("Chat Completions")
    def _translate_complete_raw(self, resp: dict[str, Any], t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``chat.completion`` body: everything arrived with it."""
        u = resp.get("usage")
        usage = usage_event_raw(t, u) if isinstance(u, dict) else None
        reasoning_tokens = usage.reasoning if usage else None
        text_tokens = (usage.output - (usage.reasoning or 0)) if usage and usage.output is not None else None
        yield from server_events_raw(resp, t)
        for choice in (resp.get("choices") or [])[:1]:
            msg = choice.get("message") or {}
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            content = msg.get("content") or ""
            if self.compat and "<think>" in content:
                splitter = ThinkSplitter()
                parts = [*splitter.feed(content), *splitter.flush()]
                reasoning = (reasoning or "") + "".join(p for k, p in parts if k == "reasoning")
                content = "".join(p for k, p in parts if k == "text")
            if isinstance(reasoning, str) and reasoning:
                yield ev.ReasoningDelta(t, reasoning, reasoning_tokens or None)
            if content:
                yield ev.TextDelta(t, content, text_tokens or None)
            for tc in msg.get("tool_calls") or ():
                fn = tc.get("function")
                if isinstance(fn, dict):
                    yield ev.ToolCallDelta(
                        t, fn.get("name") or "", fn.get("arguments") or "", call_id=text_id(tc.get("id"))
                    )
            state.stop_reason = choice.get("finish_reason")
        if usage is not None:
            state.usage["event"] = usage
        state.finished = True

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        splitter: ThinkSplitter | None = state.extra.get("splitter")
        if splitter is not None:
            for kind, piece in splitter.flush():
                yield ev.ReasoningDelta(t, piece) if kind == "reasoning" else ev.TextDelta(t, piece)
        if "event" in state.usage:
            yield state.usage["event"]
        saw_done = state.finished or b"[DONE]" in probe.body_tail
        if not saw_done and state.stop_reason is None:
            yield ev.Failed(
                t,
                ErrorKind.INCOMPLETE_STREAM,
                "The stream ended without [DONE] or a finish reason, so the answer may be cut short.",
                None,
                "The partial answer is kept; retry the turn, and check any proxy between you and the server.",
            )
            return
        yield ev.Finished(t, state.stop_reason)
