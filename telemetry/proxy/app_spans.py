"""The app's own account of its tool calls, as ``ttft proxy --otlp`` keeps it: one typed span per tool run.

The proxy sees an app's model calls; the time between an answer that asked for tools and the call that
carries their results is all it can say of the tools. An app that sends OpenTelemetry says more, by its
own clock. The OTLP receiver beside the proxy (``backends.proxy.otlp``) reads two kinds of it:

- GenAI ``execute_tool`` spans (``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``): the tool's start and end;
- Claude Code's own tool events (the log record ``claude_code.tool_result``: ``tool_name``,
  ``tool_use_id``, ``duration_ms``, stamped when the tool ended).

Each becomes one :class:`AppToolSpan`, its times moved onto the proxy's monotonic clock (the app's are
wall-clock nanoseconds). Nothing else of the app's telemetry is kept: no argument, no result, no prompt.
:mod:`telemetry.proxy.tool_join` joins them to the app's steps.

An app's call may carry a W3C ``traceparent`` header (its trace and the span the call was made from);
:func:`read_traceparent` reads it, so spans of the same trace join that call's session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ..metrics import NS_PER_MS

# "execute_tool": a GenAI execute_tool span; "claude_code.tool_result": Claude Code's tool event.
SpanSource = Literal["execute_tool", "claude_code.tool_result"]
ID_CHARS = 128  # a name or an id from outside is cut to this

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16


@dataclass(frozen=True, slots=True)
class AppToolSpan:
    """One tool run as the app told it: its times on the proxy's monotonic clock (ns), the tool's name and
    the API's call id where the app said them (``""`` where not), how it ended (None: not said), the
    trace it belongs to (32 hex digits, ``""`` for an event outside any trace) and where it came from."""

    name: str
    call_id: str
    start_ns: int
    end_ns: int
    source: SpanSource
    trace_id: str = ""
    span_id: str = ""
    ok: bool | None = None

    def to_dict(self, origin_ns: int = 0) -> dict[str, Any]:
        """As ``--json`` writes it: times in ms from ``origin_ns`` (the run's start) on the same clock."""
        return {
            "name": self.name,
            "call_id": self.call_id,
            "start_ms": round((self.start_ns - origin_ns) / NS_PER_MS, 3),
            "end_ms": round((self.end_ns - origin_ns) / NS_PER_MS, 3),
            "duration_ms": round((self.end_ns - self.start_ns) / NS_PER_MS, 3),
            "source": self.source,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "ok": self.ok,
        }


def clean(value: str, limit: int = ID_CHARS) -> str:
    """A name or an id from outside as it is kept: printable ASCII only, at most ``limit`` characters (a tool
    name or an id is never longer; control characters never reach a terminal from here)."""
    return "".join(c for c in value[: limit * 2] if 0x20 < ord(c) < 0x7F)[:limit]


def read_traceparent(value: str | None) -> tuple[str, str] | None:
    """A W3C ``traceparent`` header as (trace id, parent span id), or None when absent or not one: the
    version ``ff`` and the all-zero ids are invalid; a later version may add fields after the four."""
    if not value or len(value) > 512:
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None:
        return None
    version, trace_id, span_id, _, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return trace_id, span_id
