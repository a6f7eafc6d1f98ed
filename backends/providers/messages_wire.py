"""Anthropic Messages on the wire, without the SDK: request body, JSON-dict translation, usage, the end.

Shared by the SDK backend (:mod:`backends.providers.anthropic_messages`, which translates the SDK's
typed events) and the lean one (:mod:`backends.providers.lean.messages`, which translates each
event's JSON dict here), so both send the same request and end a turn the same way. Imports no
SDK: importing ``anthropic`` alone costs 0.7-2 s of a process start.

Extended thinking: ``settings.thinking_budget`` N gives ``{"type": "enabled", "budget_tokens": N}``;
``settings.extra["thinking"] == "adaptive"`` gives ``{"type": "adaptive"}``;
``settings.thinking_display`` adds ``display`` (summarized | omitted); ``settings.reasoning_effort``
becomes ``output_config.effort``.

What is a token: ``thinking_delta`` (reasoning), ``text_delta`` (visible), ``input_json_delta`` /
``tool_use`` (tool call). A signature-only thinking block (omitted display) and
``redacted_thinking`` carry no readable token, so they are not tokens; the thinking they stand
for is counted from ``usage.output_tokens_details.thinking_tokens`` and its time is estimated by
the metrics.

Usage: ``input`` is everything the model read (``input_tokens`` + cache reads + cache writes),
``cached_input`` the cache reads, ``cache_write_input`` the cache writes (``cache_creation_input_tokens``,
priced at the cache-write rate); ``output`` is the final cumulative ``output_tokens`` (thinking
included).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...telemetry import events as ev
from ...telemetry.errors import ErrorKind
from ..base import ChatRequest
from ..transport.http import Probe
from .answers.stream_shape import count, shape_checked
from .fields import field
from .hosted import TurnState
from .tools_wire import messages_messages, messages_tools, text_id

DEFAULT_MAX_TOKENS = 4096
USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


def read_usage(usage: Any, u: dict[str, Any]) -> None:
    """The counts of one ``usage`` (a dict or the SDK's model) into ``u``; a count that is not an
    int is dropped (it would break the metrics later)."""
    if usage is None:
        return
    for name in USAGE_FIELDS:
        v = count(field(usage, name))
        if v is not None:
            u[name] = v
    thinking = field(field(usage, "output_tokens_details"), "thinking_tokens")
    if count(thinking) is not None:
        u["thinking_tokens"] = thinking


class MessagesWire:
    """The SDK-free half of an Anthropic Messages backend (mixed into a :class:`HostedBackend`)."""

    model: str

    def __init__(self, model: str, **opts: Any) -> None:
        opts.setdefault("provider", "anthropic")
        opts.setdefault("key_env", "ANTHROPIC_API_KEY")
        super().__init__(model, **opts)  # type: ignore[call-arg]  # HostedBackend, next in the MRO

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        s = request.settings
        system = [m.content for m in request.messages if m.role == "system"]
        thinking: dict[str, Any] | None = None
        if s.extra.get("thinking") == "adaptive":
            thinking = {"type": "adaptive"}
        elif s.thinking_budget:
            thinking = {"type": "enabled", "budget_tokens": s.thinking_budget}
        if thinking is not None and s.thinking_display:
            thinking["display"] = s.thinking_display
        max_tokens = s.max_output_tokens
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS + (s.thinking_budget or 0)
        p: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": messages_messages(request.messages),
            "stream": s.stream,
        }
        if request.tools:
            p["tools"] = messages_tools(request.tools)
        if system:
            p["system"] = "\n\n".join(system)
        if thinking is not None:
            p["thinking"] = thinking
        if s.reasoning_effort is not None:
            p["output_config"] = {"effort": s.reasoning_effort}
        if s.temperature is not None:
            p["temperature"] = s.temperature
        return p

    @shape_checked("Anthropic Messages")
    def _translate_raw(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        """One streamed event (or, not streamed, the whole message) as its JSON dict."""
        u: dict[str, Any] = state.extra["usage"]
        kind = item.get("type")
        if kind == "message":  # non-streamed: the whole message at once
            yield from self._complete_raw(item, t, state)
            return
        match kind:
            case "message_start":
                read_usage(item["message"].get("usage"), u)
            case "content_block_start":
                block = item["content_block"]
                btype = block.get("type")
                if btype == "tool_use":
                    yield ev.ToolCallDelta(
                        t, block.get("name") or "", "", index=count(item.get("index")), call_id=text_id(block.get("id"))
                    )
                elif btype == "thinking" and block.get("thinking", ""):
                    yield ev.ReasoningDelta(t, block["thinking"])
                elif btype == "text" and block.get("text", ""):
                    yield ev.TextDelta(t, block["text"])
                # redacted_thinking: encrypted, not a readable token
            case "content_block_delta":
                d = item["delta"]
                match d.get("type"):
                    case "thinking_delta":
                        if d.get("thinking"):
                            yield ev.ReasoningDelta(t, d["thinking"])
                    case "text_delta":
                        if d.get("text"):
                            yield ev.TextDelta(t, d["text"])
                    case "input_json_delta":
                        if d.get("partial_json"):
                            yield ev.ToolCallDelta(t, "", d["partial_json"], index=count(item.get("index")))
                    # signature_delta / citations: not tokens
            case "message_delta":
                state.stop_reason = field(item.get("delta"), "stop_reason") or state.stop_reason
                read_usage(item.get("usage"), u)
            case "message_stop":
                state.finished = True

    def _complete_raw(self, msg: dict[str, Any], t: int, state: TurnState) -> Iterable[ev.Event]:
        """A non-streamed ``message``: everything arrived with it."""
        content = msg["content"]
        yield from self._complete_blocks(
            msg.get("usage"),
            [(b.get("type"), b) for b in content],
            lambda b, name: b.get(name),
            msg.get("stop_reason"),
            t,
            state,
        )

    def _complete_blocks(
        self,
        usage: Any,
        blocks: list[tuple[Any, Any]],
        get: Any,
        stop_reason: Any,
        t: int,
        state: TurnState,
    ) -> Iterable[ev.Event]:
        """A whole message's events from its usage and ``(type, block)`` pairs (``get(block, name)`` reads
        a block's field: a dict's or a model's): reasoning, then text, then each tool call."""
        u: dict[str, Any] = state.extra["usage"]
        read_usage(usage, u)
        totals = self._usage_event(u, t)
        thinking = "".join(get(b, "thinking") or "" for kind, b in blocks if kind == "thinking")
        text = "".join(get(b, "text") for kind, b in blocks if kind == "text")
        r_tokens = totals.reasoning if totals else None
        v_tokens = (totals.output - (totals.reasoning or 0)) if totals and totals.output is not None else None
        if thinking:
            yield ev.ReasoningDelta(t, thinking, r_tokens or None)
        if text:
            yield ev.TextDelta(t, text, v_tokens or None)
        for kind, b in blocks:
            if kind == "tool_use":
                yield ev.ToolCallDelta(
                    t, get(b, "name"), json.dumps(get(b, "input"), ensure_ascii=False), call_id=text_id(get(b, "id"))
                )
        state.stop_reason = stop_reason
        state.finished = True

    def _usage_event(self, u: dict[str, Any], t: int) -> ev.Usage | None:
        if "output_tokens" not in u:
            return None
        read = u.get("cache_read_input_tokens") or 0
        inp = u.get("input_tokens")
        total_in = None if inp is None else inp + read + (u.get("cache_creation_input_tokens") or 0)
        return ev.Usage(
            t,
            input=total_in,
            cached_input=read,
            output=u["output_tokens"],
            reasoning=u.get("thinking_tokens"),
            cache_write_input=u.get("cache_creation_input_tokens"),
        )

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        usage = self._usage_event(state.extra["usage"], t)
        if usage is not None:
            yield usage
        if not state.finished:
            yield ev.Failed(
                t,
                ErrorKind.INCOMPLETE_STREAM,
                "The stream ended before message_stop, so the answer may be cut short.",
                None,
                "The partial answer is kept; retry the turn, and check any proxy between you and the server.",
            )
            return
        yield ev.Finished(t, state.stop_reason)
