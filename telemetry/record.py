"""The complete record of one turn and its ``ttft.turn/2`` JSON form (older forms upgraded on read).

``ttft.turn/2`` writes each chunk as an object ``{t_ms, kind,
tokens}``, so dataframe tools read a column of one type each; ``ttft.turn/1`` wrote the mixed
list ``[t_ms, kind, tokens]``. Fields added later under ``/2`` are additive: a reader keys on
names, and an old line simply lacks the new ones. :func:`chunk_rows` is the one way to read a
record dict's chunks, whichever form it holds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict

from .cost import Cost
from .errors import ErrorKind
from .errors import kind_of as error_kind
from .metrics import NS_PER_MS, Chunk, ChunkKind, Timestamps, TokenCounts, TurnMetrics, speculative_summary
from .settings import TurnSettings
from .steps import AgentSummary, StepRecord, steps_from_json
from .typed_read import RecordError, build, bulk_read, convert, exact_types, field_types, kind_of
from .wire import HttpInfo

SCHEMA = "ttft.turn/2"
OLD_SCHEMAS = ("ttft.turn/1",)  # still read: upgraded by upgrade() as each line is parsed
SCHEMAS = (SCHEMA, *OLD_SCHEMAS)

# How a turn ended: its answer came whole, it failed (``error`` says how), or it was stopped.
Status = Literal["ok", "error", "cancelled"]


class ChunkDict(TypedDict):
    """One token-bearing chunk as logged: ms since the first send, what it carried, its tokens."""

    t_ms: float
    kind: ChunkKind
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
    """How a turn failed: its kind (``telemetry.errors.ErrorKind``; a class name for a bug; any string
    an old log holds), the sentence shown, the HTTP status where there was one, and what to try."""

    type: ErrorKind | str
    message: str
    status_code: int | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": str(self.type), "message": self.message, "status_code": self.status_code, "hint": self.hint}


@dataclass(frozen=True, slots=True)
class AttachmentInfo:
    """One file sent with the prompt, as the record lists it: what it was, never what it held."""

    name: str  # the file's base name
    bytes: int  # its size on disk
    media_type: str  # "image/png", "text/plain", ...
    est_tokens: int | None = None  # the input it adds by its API's rule (telemetry.tokens); None if unknown

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "media_type": self.media_type, "est_tokens": self.est_tokens}


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
    status: Status
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
    tool_calls: tuple[dict[str, str], ...] = ()  # one {name, arguments} per call, its arguments as streamed
    server: dict[str, Any] | None = None
    diagnosis: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    notices: dict[str, Any] = field(default_factory=dict)
    http: HttpInfo | None = None  # the final attempt's connection and response headers (telemetry.wire)
    wall_offset_ns: int | None = None  # a monotonic stamp plus this is the wall clock (ns since the epoch)
    attachments: tuple[AttachmentInfo, ...] = ()  # the files sent with the prompt: never their contents
    cost: Cost | None = None  # telemetry.cost: None when not priced (unknown model, estimated counts)
    # An edited prompt's turn: the turn_index of the turn whose prompt it replaces. It starts a new branch
    # of the conversation from the turn before that one (telemetry.log.branches); None on the usual path.
    branch_of: int | None = None
    # A turn that used tools (backends.agent.loop, telemetry.agent.steps): each model and tool step in
    # order on the turn's clock, and the turn's split (time in the model, in tools, in ttft between steps).
    # Absent from the JSON of a turn without tools, so such a line is unchanged (telemetry.steps).
    steps: tuple[StepRecord, ...] = ()
    agent: AgentSummary | None = None
    # A call another app sent, timed by ``ttft proxy`` (backends.proxy): source "proxy" and the app's
    # User-Agent product ("claude-cli/2.0.14"). Absent from the JSON of ttft's own turns, so such a line is unchanged.
    source: str = ""
    client: str = ""

    def sent_at(self) -> str | None:
        """The wall clock of the first send (the origin of ``events_ms``), to the microsecond, UTC."""
        sent = self.timestamps.sent
        if sent is None or self.wall_offset_ns is None:
            return None
        us = (sent + self.wall_offset_ns) // 1000
        whole = datetime.fromtimestamp(us // 1_000_000, UTC)  # whole seconds: no float rounding of the us
        return whole.replace(microsecond=us % 1_000_000).isoformat(timespec="microseconds")

    def to_dict(self) -> dict[str, Any]:
        origin = self.timestamps.sent
        t0 = origin if origin is not None else (self.chunks[0].t_ns if self.chunks else 0)
        out = {
            "schema": SCHEMA,
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "started_at": self.started_at,
            "sent_at": self.sent_at(),
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
            "branch_of": self.branch_of,
            "attachments": [a.to_dict() for a in self.attachments],
            "answer": self.answer,
            "reasoning": self.reasoning,
            "tool_calls": list(self.tool_calls),
            "stop_reason": self.stop_reason,
            "events_ms": self.timestamps.relative_ms(),
            "metrics": self.metrics.to_dict(),
            "tokens": self.tokens.to_dict(),
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "server": self.server,
            "http": self.http.to_dict() if self.http is not None else None,
            "notices": dict(self.notices),
            "chunks": [
                {"t_ms": round((c.t_ns - t0) / 1e6, 3), "kind": c.kind, "tokens": c.tokens} for c in self.chunks
            ],
            "diagnosis": self.diagnosis,
            "extra": self.extra,
        }
        if self.agent is not None:
            out["agent"] = self.agent.to_dict()
            out["steps"] = [s.to_dict() for s in self.steps]
        if self.source:
            out["source"] = self.source
        if self.client:
            out["client"] = self.client
        return out

    @classmethod
    def from_dict(cls, data: object) -> TurnRecord:
        """The record a ``ttft.turn`` dict describes, whichever schema wrote it (``/1`` or ``/2``).

        Its clock starts at the first send, as the dict's times do: ``from_dict(d).to_dict() == d``.
        Absent fields take their defaults, unknown ones are ignored; a field of the wrong type is
        a ``RecordError`` that names it (see ``telemetry.typed_read``).
        """
        if not isinstance(data, Mapping):
            raise RecordError(f"a turn record is an object, not {kind_of(data)}")
        schema = data.get("schema", SCHEMA)
        if schema not in SCHEMAS:
            shown = repr(schema)[:40] if isinstance(schema, str) else kind_of(schema)
            raise RecordError(f"schema {shown} is not one this version reads ({', '.join(SCHEMAS)})")
        for name in ("turn_index", "status"):
            if data.get(name) is None:
                raise RecordError(f"{name} is missing")
        events = convert(dict[str, float | None], _object(data, "events_ms"), "events_ms")
        attempts = tuple(_attempt(a, f"attempt_log[{i}]") for i, a in enumerate(_list(data, "attempt_log")))
        sent = _ns(events.get("sent"), "events_ms.sent")
        known: dict[str, Any] = {
            "settings": build(TurnSettings, _object(data, "settings"), "settings"),
            "error": _error(data.get("error")),
            "attempts": attempts,
            "timestamps": Timestamps(
                sent=sent,
                final_sent=attempts[-1].sent_ns if attempts else sent,
                headers=_ns(events.get("headers"), "events_ms.headers"),
                first_token=_ns(events.get("first_token"), "events_ms.first_token"),
                first_visible=_ns(events.get("first_visible"), "events_ms.first_visible"),
                last_token=_ns(events.get("last_token"), "events_ms.last_token"),
                end=_ns(events.get("end"), "events_ms.end"),
            ),
            "metrics": _metrics(data),
            "tokens": build(TokenCounts, {"source": "", **_object(data, "tokens")}, "tokens"),
            "chunks": _chunks(_list(data, "chunks")),
            "wall_offset_ns": _wall_offset(data.get("sent_at"), sent),
            "steps": steps_from_json(data.get("steps")),
            "agent": AgentSummary.from_dict(agent) if isinstance(agent := data.get("agent"), Mapping) else None,
        }
        for name, tp, has_default, text, exact in _plain_fields(cls, known):
            value = data.get(name)
            if value is None and text:
                value = ""  # well-formed old lines may hold null for a text field
            if value is None and has_default:
                continue
            known[name] = value if exact is None or type(value) in exact else convert(tp, value, name)
        return cls(**known)


def typed_records(dicts: Iterable[object]) -> list[TurnRecord]:
    """The typed records of those dicts that are readable ones; any other is left out (a front end
    summarising a session should show what it can, not fail on one odd line)."""
    out: list[TurnRecord] = []
    with bulk_read():
        for d in dicts:
            try:
                out.append(TurnRecord.from_dict(d))
            except RecordError:
                continue
    return out


# Text fields that a well-formed old line may hold as null: read as empty.
_TEXT_FIELDS = ("session_id", "started_at", "provider", "api", "model", "prompt", "answer", "reasoning", "diagnosis")
_Plain = list[tuple[str, Any, bool, bool, tuple[type, ...] | None]]
_PLAIN: dict[type, _Plain] = {}


def _plain_fields(cls: type, known: Mapping[str, Any]) -> _Plain:
    """The fields ``from_dict`` reads as their annotation says (the rest it builds itself), once
    per class: (name, annotation, has a default, a text field, the types that pass unchanged)."""
    plain = _PLAIN.get(cls)
    if plain is None:
        hints = field_types(cls)
        plain = _PLAIN[cls] = []
        for f in dataclasses.fields(cls):
            if f.name not in known:
                has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                tp = hints[f.name]
                plain.append((f.name, tp, has_default, f.name in _TEXT_FIELDS, exact_types(tp)))
    return plain


def _wall_offset(sent_at: object, sent: int | None) -> int | None:
    """The offset that turns this clock (0 at the first send) back into the logged ``sent_at``."""
    if sent is None or not isinstance(sent_at, str):
        return None
    try:
        when = datetime.fromisoformat(sent_at)
    except ValueError:
        raise RecordError("sent_at is not an ISO 8601 time") from None
    if when.tzinfo is None:
        return None  # a wall clock with no zone names no instant
    epoch_us = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return epoch_us * 1000 - sent


def _metrics(data: Mapping[str, Any]) -> TurnMetrics:
    metrics = _object(data, "metrics")
    m = build(TurnMetrics, metrics, "metrics")
    if "server_timing_source" not in metrics and m.expected_prefill_ms is not None and m.server_queue_ms is not None:
        # logged before the server's own account: its probe split, named as a probe's
        m = dataclasses.replace(m, server_timing_source="probe", server_ttft_ms=m.expected_prefill_ms)
    if "speculative" not in metrics:  # logged before metrics.speculative: the same figures from the server's data
        server = data.get("server")
        try:
            spec = speculative_summary(server if isinstance(server, dict) else None)
        except (TypeError, ValueError, OverflowError):  # counts that are no numbers: nothing to show
            spec = None
        m = dataclasses.replace(m, speculative=spec)
    return m


_MAX_MS = 1e15  # ~30 years: a finite time whose ns fit any clock


def _ns(value_ms: float | None, where: str = "a time") -> int | None:
    """A time in ms since the first send as ns on a clock that starts there (exact for logged ns)."""
    if value_ms is None:
        return None
    ns = value_ms * NS_PER_MS
    if not math.isfinite(ns):
        raise RecordError(f"{where} is not a finite time")
    return round(ns)


def _object(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise RecordError(f"{name} is {kind_of(value)}, not an object")
    return value


def _list(data: Mapping[str, Any], name: str) -> list[Any]:
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise RecordError(f"{name} is {kind_of(value)}, not a list")
    return list(value)


def _attempt(a: object, where: str) -> Attempt:
    if type(a) is dict:  # the common case inline, as for chunks; the checks below name what is wrong
        sent, headers, status, after = a.get("sent_ms"), a.get("headers_ms"), a.get("status"), a.get("retry_after_s")
        n = a.get("attempt", 1)
        if (
            type(sent) is float
            and -_MAX_MS < sent < _MAX_MS
            and (headers is None or (type(headers) is float and -_MAX_MS < headers < _MAX_MS))
            and type(n) is int
            and (status is None or type(status) is int)
            and (after is None or type(after) is float)
        ):
            return Attempt(
                n, round(sent * NS_PER_MS), None if headers is None else round(headers * NS_PER_MS), status, after
            )
    if not isinstance(a, Mapping):
        raise RecordError(f"{where} is {kind_of(a)}, not an object")
    sent = convert(float | None, a.get("sent_ms"), f"{where}.sent_ms")
    return Attempt(
        attempt=convert(int, a.get("attempt", 1), f"{where}.attempt"),
        sent_ns=_ns(sent, f"{where}.sent_ms") or 0,
        headers_ns=_ns(convert(float | None, a.get("headers_ms"), f"{where}.headers_ms"), f"{where}.headers_ms"),
        status=convert(int | None, a.get("status"), f"{where}.status"),
        retry_after_s=convert(float | None, a.get("retry_after_s"), f"{where}.retry_after_s"),
    )


def _error(e: object) -> ErrorInfo | None:
    if e is None:
        return None
    if not isinstance(e, Mapping):
        raise RecordError(f"error is {kind_of(e)}, not an object")
    return ErrorInfo(
        type=error_kind(convert(str | None, e.get("type"), "error.type") or "error"),
        message=convert(str | None, e.get("message"), "error.message") or "",
        status_code=convert(int | None, e.get("status_code"), "error.status_code"),
        hint=convert(str | None, e.get("hint"), "error.hint"),
    )


_CHUNK_WORDS: dict[str, ChunkKind] = {"reasoning": "reasoning", "text": "text", "tool": "tool"}


def _chunks(raw: list[Any]) -> tuple[Chunk, ...]:
    """The chunks of a record: hundreds of them, so the common ``/2`` object is read inline here."""
    out: list[Chunk] = []
    append = out.append
    for c in raw:
        if type(c) is dict:
            t, kind, n = c.get("t_ms"), c.get("kind"), c.get("tokens")
            word = _CHUNK_WORDS.get(kind) if type(kind) is str else None
            if type(t) is float and word is not None and type(n) is int and -_MAX_MS < t < _MAX_MS:
                append(Chunk(round(t * NS_PER_MS), word, n))
                continue
        append(_chunk(c, len(out)))
    return tuple(out)


def _chunk(c: object, i: int) -> Chunk:
    """A ``/2`` chunk object or a ``/1`` ``[t_ms, kind, tokens]`` triple, the ``i``-th, read with
    every check (the path of old lines and of naming what is wrong)."""
    where = f"chunks[{i}]"
    if isinstance(c, list | tuple) and len(c) == 3:
        c = {"t_ms": c[0], "kind": c[1], "tokens": c[2]}
    if not isinstance(c, Mapping):
        raise RecordError(f"{where} is {kind_of(c)}, not a chunk")
    return Chunk(
        t_ns=_ns(convert(float, c.get("t_ms"), f"{where}.t_ms"), f"{where}.t_ms") or 0,
        kind=convert(ChunkKind, c.get("kind"), f"{where}.kind"),
        tokens=convert(int, c.get("tokens"), f"{where}.tokens"),
    )
