"""A turn record's untrusted values and times as the GenAI mapping reads them (:mod:`telemetry.export.genai`).

A number is a finite int or float (never a bool), a label has its control characters replaced, a
count is an int; a time is ns since the epoch that OTLP can carry, or None. Whatever fails to read
is left out rather than guessed.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from ..record import TurnRecord

NS_PER_MS = 1_000_000


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def nonempty_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def label(v: Any) -> str | None:
    """A short text attribute (a model, an error type) with control characters replaced: a span
    name or an attribute may end up printed by a terminal tool, and the record is untrusted."""
    text = nonempty_str(v)
    if text is None or text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def seconds(v: float | None) -> float | None:
    n = number(v)
    return None if n is None else n / 1000


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
    return unix(whole * 1_000_000_000 + dt.microsecond * 1000)


# OTLP carries times as fixed64 ns since the epoch: one past this (the year 2554), or before 1970, fails
# the encoding of the whole batch it is in, so such a time is dropped, as an unreadable one is.
MAX_UNIX_NS = 2**64 - 1


def unix(t: int) -> int | None:
    return t if 0 <= t <= MAX_UNIX_NS else None


def sent_unix_ns(rec: TurnRecord) -> int | None:
    """The wall-clock moment of the first send, the origin of ``events_ms``: ``sent_at`` (to the us).
    A record logged before ``sent_at`` existed, or never sent, is placed at ``started_at``."""
    return unix_ns(rec.sent_at()) or unix_ns(rec.started_at)


def events_ms(rec: TurnRecord) -> dict[str, float | None]:
    """The turn's events in ms since the first send: the log's own figures, so that a span's ns
    come out as they did when the mapping read log lines (a collector's stored traces keep them)."""
    return rec.timestamps.relative_ms()


def turn_end_unix_ns(rec: TurnRecord) -> int | None:
    sent = sent_unix_ns(rec)
    if sent is None:
        return None
    ev = events_ms(rec)
    end = number(ev.get("end"))
    if end is None:
        end = number(ev.get("last_token"))
    return unix(sent + int((end or 0.0) * NS_PER_MS)) or sent
