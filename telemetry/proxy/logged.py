"""A proxied call as its session log line keeps it, and read back from that line by another process.

The proxy logs each call's turn record; the :class:`~telemetry.proxy.shape.CallShape` that rebuilding
the app's sessions needs rides in the record's ``extra`` under :data:`LOG_KEY` (:func:`shape_fields`):
message digests, tool call and result ids, the app's session id and retry count, response ids and the
HTTP status, never a word of content. Its start and end are on the wall clock (µs since the epoch),
since the proxy's monotonic clock means nothing to another process.

:func:`read_call` turns a line back into a record and a shape on one clock, the wall clock in ns since
the epoch: the record's stamps are moved by its own wall offset (from ``sent_at``), the shape's are
read as logged; the trace the app's ``traceparent`` named is read from the record's own ``extra``
(``trace_id``, ``parent_span_id``). So :func:`telemetry.proxy.sessions.rebuild` joins the calls of a
log as it joins those in the proxy's memory (less the app's own tool spans of ``--otlp``, which are
not logged). A line logged without the shape (an older ttft) still gives its call, with a
shape of what the record holds: such a call starts a conversation of its own, as nothing joins it.
Every field is type-checked: the log is a file on disk, read as outside input.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

from ..record import TurnRecord
from ..typed_read import RecordError
from .shape import CallShape

LOG_KEY = "proxy"  # the record's ``extra`` key that holds its call's shape
MAX_IDS = 100_000  # digests or ids kept per call: past any real conversation, short of a hostile line's millions
MAX_ID_CHARS = 256
_HEX = re.compile(r"[0-9a-f]+")


def shape_fields(shape: CallShape, wall_offset_ns: int | None) -> dict[str, Any]:
    """The shape as the log keeps it (see the module doc). ``wall_offset_ns``: the record's, which turns
    the proxy's monotonic stamps into the wall clock (None: the times are left out)."""
    out: dict[str, Any] = {
        "start_us": (shape.start_ns + wall_offset_ns) // 1000 if wall_offset_ns is not None else None,
        "end_us": (shape.end_ns + wall_offset_ns) // 1000 if wall_offset_ns is not None else None,
        "status": shape.status,
        "session_hint": shape.session_hint,
        "retry_count": shape.retry_count,
        "system_digest": shape.system_digest,
        "message_digests": list(shape.message_digests),
        "tool_results": list(shape.tool_results),
        "tool_calls": [list(c) for c in shape.tool_calls],
        "response_id": shape.response_id,
        "previous_response_id": shape.previous_response_id,
    }
    if shape.model:
        out["model"] = shape.model
    return out


def _text(v: Any) -> str | None:
    return v[:MAX_ID_CHARS] if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _texts(v: Any) -> tuple[str, ...]:
    return tuple(x[:MAX_ID_CHARS] for x in v[:MAX_IDS] if isinstance(x, str)) if isinstance(v, list) else ()


def _hex(v: Any, n: int) -> str:
    """A W3C trace or span id as the record's ``extra`` holds it (``n`` hex digits), "" for anything else."""
    return v if isinstance(v, str) and len(v) == n and _HEX.fullmatch(v) else ""


def _pairs(v: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, list):
        return ()
    ok = (p for p in v[:MAX_IDS] if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p))
    return tuple((a[:MAX_ID_CHARS], b[:MAX_ID_CHARS]) for a, b in ok)


def on_wall_clock(rec: TurnRecord) -> TurnRecord:
    """The record with its stamps in ns since the epoch (a record read from a log has them from its own
    send); one that was never sent has no wall offset, and is returned as it is."""
    by = rec.wall_offset_ns
    if by is None or by == 0:
        return rec
    ts = rec.timestamps
    moved = {f.name: v + by for f in dataclasses.fields(ts) if isinstance(v := getattr(ts, f.name), int)}
    return dataclasses.replace(
        rec,
        timestamps=dataclasses.replace(ts, **moved),
        attempts=tuple(
            dataclasses.replace(
                a, sent_ns=a.sent_ns + by, headers_ns=a.headers_ns + by if a.headers_ns is not None else None
            )
            for a in rec.attempts
        ),
        chunks=tuple(dataclasses.replace(c, t_ns=c.t_ns + by) for c in rec.chunks),
        wall_offset_ns=0,
    )


def read_call(line: dict[str, Any]) -> tuple[TurnRecord, CallShape, bool] | None:
    """One log line (a well-formed record, as :func:`telemetry.log.turns.parse_line` gives it) as a call:
    its record and shape on the wall clock, and whether the line held the shape. None when it is no
    proxy call (another source's turn) or its record cannot be read."""
    if line.get("source") != "proxy":
        return None
    try:
        rec = on_wall_clock(TurnRecord.from_dict(line))
    except (RecordError, TypeError, ValueError, OverflowError):
        return None
    logged = rec.extra.get(LOG_KEY)
    had = isinstance(logged, dict)
    f: dict[str, Any] = logged if isinstance(logged, dict) else {}
    ts = rec.timestamps
    start_us, end_us = _int(f.get("start_us")), _int(f.get("end_us"))
    start = start_us * 1000 if start_us is not None else ts.sent
    end = end_us * 1000 if end_us is not None else ts.end
    if start is None:  # neither the shape's times nor a send: the call is placed at its end, or nowhere
        start = end if end is not None else 0
    retry = _int(f.get("retry_count"))
    shape = CallShape(
        call_index=rec.turn_index,
        start_ns=start,
        end_ns=max(end if end is not None else start, start),
        api=rec.api,
        model=_text(f.get("model")) or rec.model,
        client=rec.client,
        status=_int(f.get("status")) if had else (rec.attempts[-1].status if rec.attempts else None),
        session_hint=_text(f.get("session_hint")),
        retry_count=retry if retry is not None and retry >= 0 else 0,
        system_digest=_text(f.get("system_digest")) or "",
        message_digests=_texts(f.get("message_digests")),
        tool_results=_texts(f.get("tool_results")),
        tool_calls=_pairs(f.get("tool_calls")),
        response_id=_text(f.get("response_id")),
        previous_response_id=_text(f.get("previous_response_id")),
        trace_id=_hex(rec.extra.get("trace_id"), 32),
        parent_span_id=_hex(rec.extra.get("parent_span_id"), 16),
    )
    return rec, shape, had


def ended_at(shape: CallShape) -> datetime:
    """The local wall-clock time a call read by :func:`read_call` ended."""
    return datetime.fromtimestamp(shape.end_ns / 1e9)
