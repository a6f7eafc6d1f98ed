"""The complete record of one turn and its ``ttft.turn/2`` JSON form (older forms upgraded on read).

``ttft.turn/2`` writes each chunk as an object ``{t_ms, kind,
tokens}``, so dataframe tools read a column of one type each; ``ttft.turn/1`` wrote the mixed
list ``[t_ms, kind, tokens]``. Fields added later under ``/2`` are additive: a reader keys on
names, and an old line simply lacks the new ones. :func:`chunk_rows` is the one way to read a
record dict's chunks, whichever form it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from telemetry.metrics import Chunk, Timestamps, TokenCounts, TurnMetrics
from telemetry.settings import TurnSettings
from telemetry.wire import HttpInfo

SCHEMA = "ttft.turn/2"
OLD_SCHEMAS = ("ttft.turn/1",)  # still read: upgraded by upgrade() as each line is parsed
SCHEMAS = (SCHEMA, *OLD_SCHEMAS)


class ChunkDict(TypedDict):
    """One token-bearing chunk as logged: ms since the first send, what it carried, its tokens."""

    t_ms: float
    kind: str  # "reasoning" | "text" | "tool"
    tokens: int


def chunk_rows(rec: dict[str, Any]) -> list[ChunkDict]:
    """A record dict's chunks as objects: ``/2`` objects as they are, ``/1`` triples converted."""
    out: list[ChunkDict] = []
    for c in rec.get("chunks") or ():
        if isinstance(c, dict):
            out.append({"t_ms": c["t_ms"], "kind": c["kind"], "tokens": c["tokens"]})
        else:
            out.append({"t_ms": c[0], "kind": c[1], "tokens": c[2]})
    return out


def chunk_times_ms(rec: dict[str, Any]) -> list[float]:
    """When each token-bearing chunk arrived, in ms since the first send."""
    return [float(c["t_ms"]) for c in chunk_rows(rec)]


def upgrade(rec: dict[str, Any]) -> dict[str, Any]:
    """A record of any readable schema in the current form (the same dict when already current)."""
    if rec.get("schema") == SCHEMA:
        return rec
    return {**rec, "schema": SCHEMA, "chunks": chunk_rows(rec)}


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    type: str
    message: str
    status_code: int | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "status_code": self.status_code, "hint": self.hint}


@dataclass(frozen=True, slots=True)
class Attempt:
    attempt: int
    sent_ns: int
    headers_ns: int | None = None
    status: int | None = None
    retry_after_s: float | None = None


@dataclass(frozen=True)
class TurnRecord:
    session_id: str
    turn_index: int
    started_at: str
    provider: str
    api: str
    model: str
    base_url: str | None
    settings: TurnSettings
    status: str  # "ok" | "error" | "cancelled"
    error: ErrorInfo | None
    attempts: tuple[Attempt, ...]
    prompt: str
    answer: str
    reasoning: str
    timestamps: Timestamps
    metrics: TurnMetrics
    tokens: TokenCounts
    chunks: tuple[Chunk, ...]
    stop_reason: str | None = None
    tool_calls: tuple[dict[str, str], ...] = ()
    server: dict[str, Any] | None = None
    diagnosis: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    notices: dict[str, Any] = field(default_factory=dict)
    http: HttpInfo | None = None  # the final attempt's connection and response headers (telemetry.wire)

    def to_dict(self) -> dict[str, Any]:
        origin = self.timestamps.sent
        t0 = origin if origin is not None else (self.chunks[0].t_ns if self.chunks else 0)
        return {
            "schema": SCHEMA,
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "started_at": self.started_at,
            "provider": self.provider,
            "api": self.api,
            "model": self.model,
            "base_url": self.base_url,
            "settings": self.settings.to_dict(),
            "status": self.status,
            "error": self.error.to_dict() if self.error else None,
            "attempts": len(self.attempts),
            "attempt_log": [
                {
                    "attempt": a.attempt,
                    "sent_ms": (a.sent_ns - t0) / 1e6,
                    "headers_ms": (a.headers_ns - t0) / 1e6 if a.headers_ns is not None else None,
                    "status": a.status,
                    "retry_after_s": a.retry_after_s,
                }
                for a in self.attempts
            ],
            "prompt": self.prompt,
            "answer": self.answer,
            "reasoning": self.reasoning,
            "tool_calls": list(self.tool_calls),
            "stop_reason": self.stop_reason,
            "events_ms": self.timestamps.relative_ms(),
            "metrics": self.metrics.to_dict(),
            "tokens": self.tokens.to_dict(),
            "server": self.server,
            "http": self.http.to_dict() if self.http is not None else None,
            "notices": dict(self.notices),
            "chunks": [
                {"t_ms": round((c.t_ns - t0) / 1e6, 3), "kind": c.kind, "tokens": c.tokens} for c in self.chunks
            ],
            "diagnosis": self.diagnosis,
            "extra": self.extra,
        }
