"""What the proxy keeps of one call to rebuild the app's conversations from its traffic: shapes, never content.

``ttft proxy`` (``backends.proxy``) reads each request and answer that passes through it and keeps,
beside the call's turn record, a :class:`CallShape`: when it ran on the proxy's monotonic clock, who
sent it, the app's own session id and retry count where the app sends them, a short digest of each
message of the request (so a conversation is found by its growing message list without keeping a
word of it), the tool calls the answer asked for and the tool results the request carries, matched by
call id, and the trace the call belongs to where the app sent a W3C ``traceparent`` header.
:mod:`telemetry.proxy.sessions` joins the shapes into the app's sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CallShape:
    """One call through the proxy, as far as rebuilding the app's steps needs it (see the module doc)."""

    call_index: int  # the call's order through the proxy (0, 1, ...): its turn record's ``turn_index``
    start_ns: int  # monotonic: the request's headers read from the client
    end_ns: int  # monotonic: the answer's last byte written to the client, or the call's failure
    api: str  # as the turn record's ``api``: "chat.completions", "responses" or "messages"
    model: str = ""
    client: str = ""  # the User-Agent's first product, e.g. "claude-cli/2.0.14" ("" when none was sent)
    status: int | None = None  # the upstream's HTTP status; None when no answer came
    session_hint: str | None = None  # the app's own session id header (Claude Code: X-Claude-Code-Session-Id)
    retry_count: int = 0  # the official SDKs' X-Stainless-Retry-Count: above 0, a retry of the same step
    system_digest: str = ""  # digest of the system prompt or instructions ("" when none): sub-agents differ
    message_digests: tuple[str, ...] = ()  # one digest per message of the request, in order
    tool_results: tuple[str, ...] = ()  # call ids whose results the request carries
    tool_calls: tuple[tuple[str, str], ...] = ()  # (call id, tool name) per tool call the answer asked for
    response_id: str | None = None  # Responses: the answer's id, which a next call names as its previous
    previous_response_id: str | None = None  # Responses: the call this one continues
    trace_id: str = ""  # the W3C traceparent header's trace (32 hex digits), "" when the app sent none
    parent_span_id: str = ""  # ... and the app's span the call was made from (16 hex digits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_index": self.call_index,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "api": self.api,
            "model": self.model,
            "client": self.client,
            "status": self.status,
            "session_hint": self.session_hint,
            "retry_count": self.retry_count,
            "system_digest": self.system_digest,
            "message_digests": list(self.message_digests),
            "tool_results": list(self.tool_results),
            "tool_calls": [list(c) for c in self.tool_calls],
            "response_id": self.response_id,
            "previous_response_id": self.previous_response_id,
            "trace_id": self.trace_id,
            "parent_span_id": self.parent_span_id,
        }
