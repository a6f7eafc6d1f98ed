"""OpenAI Responses on the wire, without the SDK: request body, JSON-dict translation, usage, the end.

Shared by the SDK backend (:mod:`backends.providers.openai_responses`, which translates the SDK's
typed events) and the lean one (:mod:`backends.providers.lean.responses`, which translates each
event's JSON dict here), so both send the same request and end a turn the same way. Imports no
SDK: importing ``openai`` alone costs 0.5-1.2 s of a process start.

``reasoning.effort`` and ``reasoning.summary`` (auto | concise | detailed) come from the turn
settings; reasoning summaries (and the raw ``reasoning_text`` of open models) arrive as reasoning
events, ``output_text`` (and a refusal) as visible text, a ``function_call`` item as a tool call.
The stream must end with ``response.completed`` (or ``response.incomplete``); one that stops
before is an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...telemetry import events as ev
from ...telemetry.errors import ErrorKind
from ..base import ChatRequest
from ..transport.http import Probe
from .answers.error_body import error_message, label, words
from .answers.stream_shape import count, shape_checked
from .chat_wire import per_request_events
from .fields import field
from .hosted import TurnState
from .tools_wire import responses_input, responses_tools, text_id

TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


class ResponsesWire:
    """The SDK-free half of a Responses backend (mixed into a :class:`HostedBackend`)."""

    model: str
    api_key: str | None

    def __init__(self, model: str, **opts: Any) -> None:
        opts.setdefault("provider", "openai-responses")
        opts.setdefault("key_env", "OPENAI_API_KEY")
        super().__init__(model, **opts)  # type: ignore[call-arg]  # HostedBackend, next in the MRO

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        s = request.settings
        system = [m.content for m in request.messages if m.role == "system"]
        p: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request.messages),
            "stream": s.stream,
        }
        if request.tools:
            p["tools"] = responses_tools(request.tools)
        if system:
            p["instructions"] = "\n\n".join(system)
        reasoning: dict[str, str] = {}
        if s.reasoning_effort is not None:
            reasoning["effort"] = s.reasoning_effort
        if s.reasoning_summary is not None:
            reasoning["summary"] = s.reasoning_summary
        if reasoning:
            p["reasoning"] = reasoning
        if s.max_output_tokens is not None:
            p["max_output_tokens"] = s.max_output_tokens
        if s.temperature is not None:
            p["temperature"] = s.temperature
        return p

    @shape_checked("Responses")
    def _translate_raw(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """One streamed event (or, not streamed, the whole ``response``) as its JSON dict."""
        kind = item.get("type")
        if kind is None or item.get("object") == "response":
            yield from self._complete(item, t, state)
            return
        if kind in TEXT_DELTAS:
            if item.get("delta"):
                yield ev.TextDelta(t, item["delta"])
        elif kind in REASONING_DELTAS:
            if item.get("delta"):
                yield ev.ReasoningDelta(t, item["delta"])
        elif kind == "response.output_item.added":
            it = item.get("item")
            if field(it, "type") == "function_call":
                yield ev.ToolCallDelta(
                    t,
                    field(it, "name") or "",
                    field(it, "arguments") or "",
                    index=count(item.get("output_index")),
                    call_id=text_id(field(it, "call_id")),
                )
        elif kind == "response.function_call_arguments.delta":
            if item.get("delta"):
                yield ev.ToolCallDelta(t, "", item["delta"], index=count(item.get("output_index")))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._lifecycle(kind, item.get("response"), None, None, t, state)
        elif kind == "error":
            self._lifecycle(kind, None, item.get("message"), item.get("code"), t, state)

    def _lifecycle(self, kind: str, response: Any, message: Any, code: Any, t: int, state: TurnState) -> None:
        """The events that end a turn: completed, incomplete, failed, error (either path's item)."""
        match kind:
            case "response.completed" | "response.incomplete":
                self._usage(response, t, state)
                state.extra["per_request"] = list(per_request_events(field(response, "metrics"), t))
                state.finished = True
                if kind == "response.incomplete":
                    reason = field(field(response, "incomplete_details"), "reason")
                    state.stop_reason = f"incomplete: {reason or 'unknown'}"
                else:
                    state.stop_reason = "completed"
            case "response.failed":
                err = field(response, "error")
                msg = error_message(err) or "the response failed"
                state.failed = self._stream_failure(t, f"{label(field(err, 'code')) or 'failed'}: {msg}")
            case "error":
                msg = words(message) or "unknown error"
                state.failed = self._stream_failure(t, f"{label(code) or 'error'}: {msg}")

    def _stream_failure(self, t: int, detail: str) -> ev.Failed:
        detail = " ".join(detail.split())  # the secrets this backend sends are masked where the event enters
        # the recorder (backends.turn), as in every Failed
        return ev.Failed(
            t,
            ErrorKind.STREAM_ERROR,
            f"The server reported an error in the middle of the answer ({detail.rstrip('.')}).",
            None,
            "The partial answer is kept; retry the turn, and raise --max-retries if this keeps happening.",
        )

    def _usage(self, response: Any, t: int, state: TurnState) -> None:
        u = field(response, "usage")
        if u is None:
            return
        din = field(u, "input_tokens_details")
        dout = field(u, "output_tokens_details")
        state.usage["event"] = ev.Usage(
            t,
            input=count(field(u, "input_tokens")),  # the SDK builds its models without validating
            cached_input=count(field(din, "cached_tokens")) if din else None,
            output=count(field(u, "output_tokens")),
            reasoning=count(field(dout, "reasoning_tokens")) if dout else None,
            cache_write_input=count(field(din, "cache_write_tokens")) if din else None,
        )

    def _complete(self, resp: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``response`` object (a dict or the SDK's model)."""
        self._usage(resp, t, state)
        yield from per_request_events(field(resp, "metrics"), t)
        usage: ev.Usage | None = state.usage.get("event")
        reasoning, text = [], []
        for out in field(resp, "output") or ():
            kind = field(out, "type")
            if kind == "reasoning":
                reasoning += [field(s, "text") for s in (field(out, "summary") or ())]
                reasoning += [field(c, "text") for c in (field(out, "content") or ()) if field(c, "text")]
            elif kind == "message":
                text += [field(c, "text") for c in field(out, "content") if field(c, "text")]
            elif kind == "function_call":
                yield ev.ToolCallDelta(
                    t, field(out, "name"), field(out, "arguments"), call_id=text_id(field(out, "call_id"))
                )
        r_tokens = usage.reasoning if usage else None
        v_tokens = (usage.output - (usage.reasoning or 0)) if usage and usage.output is not None else None
        if reasoning:
            yield ev.ReasoningDelta(t, "".join(reasoning), r_tokens or None)
        if text:
            yield ev.TextDelta(t, "".join(text), v_tokens or None)
        state.finished = True
        state.stop_reason = field(resp, "status")

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        if "event" in state.usage:
            yield state.usage["event"]
        yield from state.extra.get("per_request", ())  # vLLM's metrics in response.completed
        if not state.finished:
            yield ev.Failed(
                t,
                ErrorKind.INCOMPLETE_STREAM,
                "The stream ended before response.completed, so the answer may be cut short.",
                None,
                "The partial answer is kept; retry the turn, and check any proxy between you and the server.",
            )
            return
        yield ev.Finished(t, state.stop_reason)
